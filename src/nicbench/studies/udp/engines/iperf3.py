"""iperf3 as an engine of the UDP study (the iperf family: :mod:`.pairs`).

Each client's ``-J`` report nests its server's (``--get-server-output``):
the receiver's counts of tx points are in it.  Its server listens on TCP (the
control connection) and each stream's set-up datagram must reach it, else
iperf3 waits forever: that is checked within :data:`UDP_SETUP_S`.
"""

from __future__ import annotations

import time
from typing import Any

from ....core.errors import NicbenchError, ToolError, tail
from ....hosts.transport import Process, Transport, read_output, tool_stderr
from ....plan.studies.udp import UdpStudy
from ....records import Sample, TrialSpec
from ....run import iperf
from ....run.iperf import ProcSlot, Slots
from ....run.preflight import busy_ports
from ....tools import iperf3
from ....tools.base import ToolInfo
from ..measure import UdpContext, tally, udp_samples
from .pairs import IperfPairs, Tallies, busy_udp

UDP_SETUP_S = 3.0     # iperf3: each stream's set-up datagram reaches its server in milliseconds


class Iperf3(IperfPairs):
    name, tools, raw_tool, label, ready_proto = "iperf3", ("iperf3",), "iperf3", "iperf3", "tcp"

    def features(self, s: UdpStudy, server: str, tool: ToolInfo, problems: list[str], warnings: list[str]) -> None:
        if not tool.has("server_output"):
            problems.append(f"{server}: iperf3 {tool.version_str} has no --get-server-output, so the receiver's "
                            "counts of tx points cannot be collected (install iperf3 >= 3.1)")
        if "bidir" in s.directions and not tool.has("bidir"):
            problems.append(f"{server}: iperf3 {tool.version_str} has no --bidir (install iperf3 >= 3.7, or use "
                            "engine = \"iperf2\")")
        if tool.version < (3, 16):
            warnings.append(f"iperf3 {tool.version_str} is single-threaded: all streams of one process share one "
                            "core, so small datagrams hit its packet rate first")

    def busy(self, t: Transport) -> set[int]:
        return busy_udp(t) | busy_ports(t)         # and TCP, for its control connection

    def server_argv(self, ctx: UdpContext, slot: ProcSlot, size: int) -> list[str]:
        return iperf3.server_argv(slot.port, ctx.study.interval)

    def client_argv(self, ctx: UdpContext, slot: ProcSlot, size: int, mode: str,
                    per_stream: float | None) -> list[str]:
        s = ctx.study
        return iperf3.udp_client_argv(ctx.tool, target=ctx.addresses[slot.client], port=slot.port,
                                      duration=s.duration, omit=s.omit, interval=s.interval, size=size,
                                      streams=slot.streams, mode=mode, rate_bps=per_stream, window=s.window)

    def after_release(self, ctx: UdpContext, servers: Slots) -> None:
        await_udp_setup(ctx, servers)

    def never_started(self, ctx: UdpContext, slot: ProcSlot, proc: Process, limit: float) -> ToolError | None:
        """iperf3, stopped, prints what it had: no test at all means its UDP
        set-up never completed."""
        try:
            rep = iperf3.parse(read_output(proc.stdout_path))
        except NicbenchError:
            return None
        if rep.protocol is None and not rep.intervals:
            return ToolError(f"iperf3 to {slot.client}:{slot.port} never started its UDP test in {limit:g}s: the "
                             f"set-up datagram's answer from {slot.client} did not come back", where=ctx.server,
                             hint=f"is UDP from {slot.client} to {ctx.server} dropped (a firewall on {ctx.server}?)")
        return None

    def parse_client(self, ctx: UdpContext, spec: TrialSpec, slot: ProcSlot, proc: Process,
                     stamps: dict[str, float | None], ends: dict[str, float | None], meta: dict[str, Any],
                     lag: float, tallies: Tallies) -> list[Sample]:
        """One client's samples and counts, its server's too (nested in its report)."""
        key = f"{slot.client}:{slot.port}"
        try:
            rep = iperf3.parse(read_output(proc.stdout_path))
        except ToolError as e:      # no report at all: iperf3 said why on stderr (a parameter error)
            raise iperf.tool_error(f"iperf3 to {key}: {tail(tool_stderr(proc.stderr_path)) or e.message}",
                                   ctx.server) from None
        iperf.check_iperf3(rep, proc, key, ctx.server)
        if not rep.has_server_output:
            raise ToolError(f"iperf3 to {key} brought back no server report (--get-server-output): the "
                            "receiver's counts of a tx point are in it", where=ctx.server)
        anchor, peer_anchor = iperf.place_iperf3(rep, key, stamps, ends, meta, ctx.server)
        tally(tallies, key, rep.intervals)
        meta["udp_totals"][key] = {k: vars(t) for k, t in rep.udp.items()}
        meta["socket_buffers"][key] = rep.socket_buffers
        for q in rep.quirks:
            meta.setdefault("warnings", []).append(f"iperf3 to {key}: {q}")
        return udp_samples(spec.trial_id, slot.client, slot.port, anchor, rep.intervals, peer_anchor)


def await_udp_setup(ctx: UdpContext, servers: Slots) -> None:
    """Every iperf3 stream's set-up datagram reached its server: else UDP from
    the study server to that client is dropped, and iperf3 would wait forever."""
    by = time.monotonic() + UDP_SETUP_S
    waiting = list(servers)
    while waiting:
        t_of = ctx.transports
        waiting = [(sl, pr) for sl, pr in waiting if pr.poll() is None
                   and iperf.udp_streams_set_up(t_of[sl.client], pr, sl.port) < sl.streams]
        if not waiting:
            return
        if time.monotonic() > by:
            sl, pr = waiting[0]
            got = iperf.udp_streams_set_up(t_of[sl.client], pr, sl.port)
            raise ToolError(f"the iperf3 server on {sl.client}:{sl.port} got the UDP set-up datagram of {got} of "
                            f"{sl.streams} stream(s) in {UDP_SETUP_S:g} s: UDP from {ctx.server} to {sl.client} "
                            f"({ctx.addresses[sl.client]}) does not arrive", where=sl.client,
                            hint=f"is a firewall on {sl.client} (or on the way) dropping UDP to port {sl.port}, "
                                 "or is the test address wrong?")
        time.sleep(0.02)
