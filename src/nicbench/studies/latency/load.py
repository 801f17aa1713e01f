"""The load of the latency study's ``loaded`` points: TCP throughput as the
TCP study drives iperf3 (``run/iperf.py``: its process layout, detection,
anchoring and ``tcp.bytes`` Samples).

iperf3 clients on the study server, an iperf3 server per port on each load
client, released ``probes_after`` seconds before the probes by the runner's
one barrier; the load runs through every probe and ``TAIL`` seconds after.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...hosts.transport import Process, Transport
from ...plan.studies.latency import TAIL, TcpLoad, probe_timing
from ...records import Sample
from ...run import iperf
from ...run.iperf import MODE, ProcSlot, layout
from ...run.point import Point
from ...run.preflight import busy_ports
from ...tools import iperf3
from ...tools.base import ToolInfo

Slots = Sequence[tuple[ProcSlot, Process]]


def staging(load: TcpLoad | None, engine: str, duration: int) -> tuple[float, int]:
    """(seconds between the load's release and the probes', whole seconds of
    load for iperf3's -t): the load runs ``lead`` seconds before the probes'
    first timed request (sockperf's own warm-up counts), through every probe
    and ``TAIL`` seconds after them."""
    if load is None:
        return 0.0, 0
    pre, run = probe_timing(engine, duration)
    offset = max(0.0, load.lead - pre)
    return offset, int(math.ceil(offset + run + TAIL))


def slots(load: TcpLoad | None, clients: Sequence[str]) -> list[ProcSlot]:
    """The load's processes: ports, streams and load clients (none when idle)."""
    if load is None:
        return []
    return layout(load.connections, clients, load.connections_per,
                  iperf.stream_cap("iperf3", load.streams_per_process), load.port_base)


def tool_problems(load: TcpLoad, server: str, clients: Sequence[str], transports: dict[str, Transport],
                  problems: list[str]) -> ToolInfo | None:
    """iperf3 on every host of the load, recent enough for what the load asks
    (into ``problems``); the study server's, which runs the load's clients."""
    tools = iperf.detect_everywhere("iperf3", [server, *clients], transports, problems)
    floor = [iperf3.MIN_VERSION] + ([iperf3.MIN_BIDIR] if load.direction == "bidir" else [])
    for host, info in tools.items():
        problems += [p for m in floor if (p := m.problem(info.version, host))][:1]
    tool = tools.get(server)
    if tool is not None and load.zerocopy and not tool.has("zerocopy"):
        problems.append(f"{server}: iperf3 {tool.version_str} has no -Z/--zerocopy (study.load.zerocopy)")
    return tool


def port_problems(load: TcpLoad, clients: Sequence[str], transports: dict[str, Transport]) -> list[str]:
    """The load servers' ports already taken on a load client."""
    out = []
    for c in clients:
        want = {sl.port for sl in slots(load, clients) if sl.client == c}
        taken = sorted(want & busy_ports(transports[c]))
        if taken:
            out.append(f"{c}: port(s) {', '.join(map(str, taken))} already in use (study.load.port_base)")
    return out


def start_servers(pt: Point, load: TcpLoad, sls: Sequence[ProcSlot],
                  transports: dict[str, Transport]) -> list[tuple[ProcSlot, Process]]:
    """An iperf3 server (one test, then it exits) per slot on its load client."""
    return [(sl, pt.spawn(transports[sl.client], sl.client, "load-server", f"{sl.client}-load-server-{sl.port}",
                          iperf3.server_argv(sl.port, load.interval), key=f"{sl.client}:load-server:{sl.port}",
                          tool="iperf3"))
            for sl in sls]


def start_clients(pt: Point, load: TcpLoad, sls: Sequence[ProcSlot], server: str, t: Transport, tool: ToolInfo,
                  addresses: dict[str, str], seconds: int) -> list[tuple[ProcSlot, Process]]:
    """The load's iperf3 clients on the study server, behind their gates."""
    out = []
    for sl in sls:
        argv = iperf3.client_argv(tool, target=addresses[sl.client], port=sl.port, duration=seconds, omit=0,
                                  interval=load.interval, io_size=load.io_size, streams=sl.streams,
                                  mode=MODE[load.direction], zerocopy=load.zerocopy, no_delay=load.no_delay,
                                  window=load.window, congestion=load.congestion)
        out.append((sl, pt.spawn(t, server, "load-client", f"{sl.client}-load-client-{sl.port}", argv,
                                 key=f"{server}:load-client:{sl.client}:{sl.port}", gated=True, tool="iperf3")))
    return out


def samples(trial_id: str, server: str, clis: Slots, meta: dict[str, Any]) -> list[Sample]:
    """The load's receiver and sender bytes, as the TCP study stores them
    (``meta``: the load's, where its anchoring and start skew go)."""
    stamps, ends = iperf.gate_stamps(clis, meta)
    out: list[Sample] = []
    for slot, proc in clis:
        key = f"{slot.client}:{slot.port}"
        rep = iperf.iperf3_report(proc, key, server)
        anchor, peer_anchor = iperf.place_iperf3(rep, key, stamps, ends, meta, server)
        out += iperf.flow_samples(trial_id, slot.client, slot.port, anchor, rep.intervals, peer_anchor)
    meta["start_skew_s"] = iperf.start_skew(meta)
    return out
