"""netmap's pkt-gen at both ends of a packet point (FreeBSD, or Linux with /dev/netmap).

``pkt-gen -f rx`` on each receiver port counts every frame its RX rings get;
it is started first and waited for ("Ready...").  Then ``pkt-gen -f tx``
behind the start barrier under ``timeout -s INT``, building its own frames
from the same addresses and MACs as nicbench's; it first waits
:data:`WAIT_S` for the link it reset on entering netmap mode.  Sent and
received frames are the two pkt-gen's own counts per report interval
(:mod:`nicbench.tools.pktgen`).  Not run here: this machine has no netmap,
so this engine is tested on fakes answering recorded pkt-gen output only.
"""

from __future__ import annotations

import signal
import time
from typing import Any

from ....core.errors import ToolError, tail
from ....hosts.transport import Process, Transport, host_clock_offset, read_output
from ....plan.studies.packets import PacketStudy
from ....records import Sample, Tags
from ....run.point import Point
from ....tools import pktgen as tool
from ..context import PacketContext
from .engine import Found, Ports, Receiver, TxPort

WAIT_S = 2               # pkt-gen -w: the link's reset on entering netmap mode (pkt-gen's own default)
INSTALL = ("pkt-gen comes with netmap: FreeBSD builds it from /usr/src/tools/tools/netmap (make; "
           "kldload netmap if the kernel lacks 'device netmap'); Linux: netmap's own build "
           "(luigirizzo/netmap, apps/pkt-gen) and its kernel module")
# one command: is netmap there, may this user open it, and where is pkt-gen
NETMAP = ('[ -e /dev/netmap ] && echo netmap=yes || echo netmap=no; '
          '[ -r /dev/netmap ] && [ -w /dev/netmap ] && echo open=yes || echo open=no; '
          'p=$(command -v pkt-gen) && echo "pkt-gen=$p" || echo pkt-gen=')
# timeout's 124 is the duration ending it; SIGINT (130, or -2 seen from here) is how both ends stop
ENDED = (0, 124, 130, -2, None)


def netmap_problems(host: str, out: str) -> list[str]:
    """What the :data:`NETMAP` check says is missing for pkt-gen on ``host``
    (pure; one line each, naming the host)."""
    kv = dict(ln.split("=", 1) for ln in out.splitlines() if "=" in ln)
    if kv.get("netmap") != "yes":
        return [f"{host}: pkt-gen needs netmap, and this host has no /dev/netmap ({INSTALL})"]
    out_ = []
    if kv.get("open") != "yes":
        out_.append(f"{host}: /dev/netmap is not readable and writable by this user (run as root)")
    if not kv.get("pkt-gen"):
        out_.append(f"{host}: pkt-gen is not installed ({INSTALL})")
    return out_


def counts(trial_id: str, pr: Process, host: str, dev: str, tags: Tags, metric: str, into: dict[str, Any],
           released: float) -> list[Sample]:
    """One pkt-gen's counts per report interval as samples on this machine's
    clock (its stamps are its host's seconds modulo 1000, put back near the
    point's start); its total, span and exit into the trial's meta."""
    out, err, rc = read_output(pr.stdout_path), read_output(pr.stderr_path), pr.poll()
    if rc not in ENDED:
        raise ToolError(f"pkt-gen on {dev} exited {rc}: {tail(err) or tail(out)}", where=host)
    off = host_clock_offset(pr)
    near = float(released) + off             # the barrier's release, on the host's clock
    run = tool.parse_run(out, err, near=near, where=f"{host}: pkt-gen on {dev}")
    if run.packets == 0 and metric == "pkt.received":
        raise ToolError(f"pkt-gen rx counted no frame on {dev}", where=host,
                        hint="do the MACs match (pkt-gen -D is the receiver port's), and is the link up?")
    into[dev] = {"sent" if metric == "pkt.sent" else "packets": run.packets, "mode": "netmap",
                 "span": [run.intervals[0].t_start - off, run.intervals[-1].t_end - off]}
    return [Sample(trial_id, metric, float(iv.packets), "packets", iv.t_start - off, iv.t_end - off, tags)
            for iv in run.intervals if iv.t_end > iv.t_start]


class PktgenReceiver:
    """pkt-gen rx on every receiver port."""

    name = "pkt-gen"
    label = "nbgen-rx"                   # as the packet study has always labelled its receivers
    stop_signal: int = signal.SIGINT          # pkt-gen ends its threads on SIGINT, printing its last counts

    def check_port(self, host: str, dev: str, info: dict[str, Any], threads: int) -> tuple[list[str], list[str]]:
        return [], []

    def start(self, pt: Point, ctx: PacketContext, ports: int, threads: int) -> Ports:
        """Each waited for until it says "Ready..." (netmap mode entered, the
        link wait over), or a ToolError with pkt-gen's own last line."""
        t = ctx.transports[ctx.receiver]
        procs: Ports = []
        for i in range(ports):
            dev = ctx.dev(ctx.receiver, i)
            procs.append((i, pt.spawn(t, ctx.receiver, "receiver", f"rx-{dev}", tool.rx_argv(dev, threads=threads,
                                                                                               wait=WAIT_S),
                                      key=f"rx {dev}", pin=False, tool="pkt-gen")))
        by = time.monotonic() + WAIT_S + 10
        waiting = dict(procs)
        while waiting:
            for i, p in list(waiting.items()):
                if tool.ready(read_output(p.stderr_path)):
                    del waiting[i]
                elif p.poll() is not None:
                    text = read_output(p.stdout_path) + read_output(p.stderr_path)
                    raise ToolError(f"pkt-gen rx on {ctx.dev(ctx.receiver, i)} exited: {tail(text) or 'no output'}",
                                    where=ctx.receiver, hint=INSTALL)
            if waiting:
                if time.monotonic() > by:
                    raise ToolError(f"pkt-gen rx was not ready within {WAIT_S + 10}s", where=ctx.receiver)
                time.sleep(0.02)
        pt.meta["xdp"] = {}                  # no XDP receiver: netmap counts
        return procs

    def received(self, trial_id: str, host: str, dev: str, pr: Process, tags: Tags,
                 meta: dict[str, Any]) -> list[Sample]:
        return counts(trial_id, pr, host, dev, tags, "pkt.received", meta["rx"], meta["released"])


class Pktgen:
    """pkt-gen tx: its own frames, its own pinning (thread k on CPU first + k modulo -c)."""

    name = "pkt-gen"
    tool: str | None = "pkt-gen"
    caps: tuple[str, ...] = ()           # what it may do is /dev/netmap's access, checked instead
    receiver: Receiver = PktgenReceiver()
    own_frames = False                   # its frames are its -s/-d/-S/-D in argv, not nicbench's bytes
    forks = False
    link_wait_s = float(WAIT_S)

    def locate(self, found: Found) -> list[str]:
        return []

    def check(self, host: str, t: Transport, found: Found) -> list[str]:
        got = t.run(["sh", "-c", NETMAP], timeout=10).stdout
        lack = netmap_problems(host, got)
        if not lack:        # pkt-gen prints no version: its path says which one ran
            found.versions["pkt-gen"] = got.rsplit("pkt-gen=", 1)[-1].strip()
        return lack

    def check_generator(self, study: PacketStudy, host: str, kernel: str, ncpus: int) -> list[str]:
        return []

    def generator(self, tx: TxPort) -> tuple[list[str], str | None, list[int]]:
        return (tool.tx_argv(tx.dev, frame_size=tx.frame_size, ip=tx.ip, src_ip=tx.src_ip, dst_ip=tx.dst_ip,
                             src_mac=tx.src_mac, dst_mac=tx.dst_mac, sport=1024, dport=tx.dport, threads=len(tx.pin),
                             duration=tx.duration, wait=WAIT_S, rate=tx.rate, first_cpu=tx.pin[0], cpus=tx.ncpus),
                None, tx.pin)

    def sent(self, trial_id: str, host: str, dev: str, pr: Process, tags: Tags,
             meta: dict[str, Any]) -> list[Sample]:
        return counts(trial_id, pr, host, dev, tags, "pkt.sent", meta["tx"], meta["released"])


ENGINE = Pktgen()
