"""nbgen, nicbench's own XDP tool, at both ends of a packet point.

As the generator: XDP live frames, one thread per queue on a CPU of its own,
sending nicbench's frames for ``duration`` s and stopping by itself; sent
frames are its own XDP counts, read every :data:`COUNT_INTERVAL` s.  As the
receiver (of nbgen's and trafgen's points): ``nbgen rx`` attaches its XDP
counter on each receiver port (through a BPF link, so it cannot outlive the
process) and says so before the generator starts; on SIGTERM after the drain
it prints its final per-CPU counts and detaches.  Its stamps are its host's
clock, put back on this machine's.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from itertools import pairwise
from typing import Any

from ....core.errors import ToolError, tail
from ....hosts.transport import Process, Transport, host_clock_offset, read_output, tool_stderr
from ....native.build import nbgen_path
from ....plan.studies.packets import PacketStudy
from ....records import Sample, Tags
from ....run.point import Point
from ....run.preflight import tool_version
from ....tools import nbgen as tool
from ..context import PacketContext
from .engine import INSTALL, Found, Ports, Receiver, TxPort

INSTALL_ANYWHERE = (INSTALL + "; on a host that does not share this machine's files: install nicbench there, run "
                    "'nicbench setup' and put the nbgen it prints on that host's PATH (it needs libbpf1)")
# nbgen's own counts, s between reads: the window's edges fall inside a read's
# span, which the analysis spreads evenly; when the rate moves within it (the
# start, bursts on shared CPUs) that share is misplaced -- 1 % seen at 0.25 s
COUNT_INTERVAL = 0.05
ATTACH_S = 10.0          # for every receiver to attach its XDP counter


def xdp_attached(info: dict | None) -> str | None:
    """The XDP program an ``ip -j link`` entry shows attached, as text, or None."""
    x = (info or {}).get("xdp")
    if not x:
        return None
    prog = x.get("prog") or {}
    return f"id {prog.get('id', '?')} ({prog.get('name', '?')}, mode {x.get('mode', '?')})"


def _nbgen_on(t: Transport, local: str) -> str:
    """nbgen's path on a host: this build where the host sees it (the lab,
    and hosts sharing the path), else the one on the host's PATH."""
    r = t.run(["sh", "-c", 'if [ -x "$1" ]; then echo "$1"; else command -v nbgen || echo nbgen; fi', "nb", local],
              timeout=10)
    return r.stdout.strip().splitlines()[-1] if r.stdout.strip() else "nbgen"


def wait_attached(procs: Ports, name: Callable[[int], str], timeout: float = ATTACH_S) -> dict[int, dict[str, Any]]:
    """Each receiver's "attached" line (mode, why), or a ToolError with
    nbgen's words; ``name(port)`` is the port's NIC."""
    by = time.monotonic() + timeout
    seen: dict[int, dict] = {}
    while len(seen) < len(procs):
        for port, p in procs:
            if port in seen:
                continue
            for line in read_output(p.stdout_path).splitlines():
                if '"attached"' in line:
                    try:
                        seen[port] = json.loads(line)
                    except ValueError:
                        break             # half written: read again on the next round
            if port not in seen and p.poll() is not None:
                err = tool.error_of(read_output(p.stderr_path)) or tail(tool_stderr(p.stderr_path)) or "no error text"
                raise ToolError(f"nbgen rx on {name(port)}: {err}", where=p.host)
        if len(seen) < len(procs):
            if time.monotonic() > by:
                raise ToolError(f"nbgen rx did not attach within {timeout:g}s", where=procs[0][1].host)
            time.sleep(0.01)
    return seen


class NbgenReceiver:
    """nbgen's XDP counter on every receiver port."""

    name = "nbgen"
    label = "nbgen-rx"
    stop_signal: int = signal.SIGTERM      # nbgen prints its last counts, then detaches

    def check_port(self, host: str, dev: str, info: dict[str, Any], threads: int) -> tuple[list[str], list[str]]:
        problems, warnings = [], []
        on = xdp_attached(info)
        if on:
            problems.append(f"{host}: {dev} already has an XDP program attached, {on}: remove it "
                            f"(ip link set dev {dev} xdp off) or stop what attached it")
        qs = int(info.get("num_rx_queues") or 1)
        if qs < threads:
            warnings.append(f"{host}: {dev} has {qs} receive queue(s) for up to {threads} "
                            "generator threads: threads share queues")
        return problems, warnings

    def start(self, pt: Point, ctx: PacketContext, ports: int, threads: int) -> Ports:
        s, t = ctx.study, ctx.transports[ctx.receiver]
        rxs: Ports = []
        for i in range(ports):
            dev = ctx.dev(ctx.receiver, i)
            argv = tool.rx_argv(ctx.exes[ctx.receiver], dev, duration=s.duration + s.timeout_margin, port=s.udp_port,
                                mode=s.xdp_mode, interval=COUNT_INTERVAL)
            rxs.append((i, pt.spawn(t, ctx.receiver, "receiver", f"rx-{dev}", argv, key=f"rx {dev}", pin=False,
                                    tool="nbgen")))
        attached = wait_attached(rxs, lambda i: ctx.dev(ctx.receiver, i))
        pt.meta["xdp"] = {
            ctx.dev(ctx.receiver, i): {"mode": a.get("mode"), "why": a.get("why") or None} for i, a in attached.items()
        }
        generic = [
            f"{ctx.dev(ctx.receiver, i)}: {a.get('why')}" for i, a in attached.items() if a.get("mode") == "generic"
        ]
        if generic and s.xdp_mode == "auto":
            pt.meta.setdefault("warnings", []).append(
                "receiver XDP runs in generic mode (slower, after the skb is built): " + "; ".join(generic)
            )
        return rxs

    def received(self, trial_id: str, host: str, dev: str, pr: Process, tags: Tags,
                 meta: dict[str, Any]) -> list[Sample]:
        rx = tool.parse_rx(read_output(pr.stdout_path), read_output(pr.stderr_path), where=host)
        if not rx.ended:
            raise ToolError(f"nbgen rx on {dev} was killed before its last count", where=host)
        meta["rx"][dev] = {
            "packets": rx.packets,
            "bytes": rx.bytes,
            "other": rx.other,
            "per_cpu": list(rx.per_cpu),
            "mode": rx.mode,
        }
        off = host_clock_offset(pr)
        out: list[Sample] = []
        for (a, na, ba), (b, nb, bb) in pairwise(rx.reads):
            if b > a:
                out.append(Sample(trial_id, "pkt.received", float(nb - na), "packets", a - off, b - off, tags))
                out.append(Sample(trial_id, "pkt.received_bytes", float(bb - ba), "bytes", a - off, b - off, tags))
        if rx.packets == 0:
            raise ToolError(
                f"the receiver counted no test frame on {dev} (sent: {meta['tx'].get(dev, {}).get('sent', '?')})",
                where=host,
                hint="does the generator's driver transmit XDP frames (ndo_xdp_xmit)? "
                'engines = ["trafgen"] does not need it',
            )
        return out


RECEIVER = NbgenReceiver()


class Nbgen:
    """nbgen's XDP live frames as the generator."""

    name = "nbgen"
    tool: str | None = None              # nicbench's own: its version comes from preflight, not the facts
    caps: tuple[str, ...] = ("CAP_NET_ADMIN", "CAP_BPF", "CAP_PERFMON")
    receiver: Receiver = RECEIVER
    own_frames = True
    forks = False
    link_wait_s = 0.0

    def locate(self, found: Found) -> list[str]:
        found.exe = tool.binary()
        if found.exe is None:
            return [f"nbgen is not built for this nicbench (looked for {nbgen_path()}, $NICBENCH_NBGEN and "
                    f"nbgen on PATH): {INSTALL}"]
        return []

    def check(self, host: str, t: Transport, found: Found) -> list[str]:
        if found.exe:
            found.exes[host] = _nbgen_on(t, found.exe)
            found.versions["nbgen"] = tool_version(t, [found.exes[host], "version"], "nbgen", INSTALL_ANYWHERE)
        return []

    def check_generator(self, study: PacketStudy, host: str, kernel: str, ncpus: int) -> list[str]:
        problems = []
        if tuple(int(x) for x in kernel.split(".")[:2] if x.isdigit()) < (5, 18):
            problems.append(f"{host}: kernel {kernel} has no XDP live frames (5.18 or later): "
                            'use engines = ["trafgen"]')
        threads = max(study.threads) * max(study.ports)
        if study.rate and threads > ncpus:
            problems.append(f"{host}: study.rate paces each nbgen thread on a CPU of its own: "
                            f"{threads} threads need {threads} CPUs, the host has {ncpus}")
        return problems

    def generator(self, tx: TxPort) -> tuple[list[str], str | None, list[int]]:
        return (tool.tx_argv(tx.exe, tx.dev, tx.frames, duration=tx.duration, cpus=tx.pin, rate=tx.rate,
                             interval=COUNT_INTERVAL), None, tx.pin)

    def sent(self, trial_id: str, host: str, dev: str, pr: Process, tags: Tags,
             meta: dict[str, Any]) -> list[Sample]:
        tx = tool.parse_tx(read_output(pr.stdout_path), read_output(pr.stderr_path), where=host)
        off = host_clock_offset(pr)             # nbgen stamps with its host's clock
        meta["tx"][dev] = {
            "sent": tx.sent,
            "paced_out": tx.paced_out,
            "per_cpu": list(tx.per_cpu),
            "threads": list(tx.threads),
            "span": [tx.t_start - off, tx.t_end - off],
        }
        return [Sample(trial_id, "pkt.sent", float(nb - na), "packets", a - off, b - off, tags)
                for (a, na), (b, nb) in pairwise(tx.reads) if b > a]


ENGINE = Nbgen()
