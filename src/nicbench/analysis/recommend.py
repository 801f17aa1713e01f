"""From a run's verdicts to what to change: tuning settings, each with the
evidence line that motivates it and the points it should move.

A recommendation is a judgement like a verdict (analysis/verdict.py): a pure
function of what the archive holds of a run -- each point's verdict and the
figures beside it, the hosts' settings as their facts recorded them -- with
its sizing rules here, the reason for each, and nothing recommended where
nothing held a point back (``wire``, ``none found``).

What each limit leads to (:func:`recommend`):

- ``window``: the socket buffers' maxima (``net.ipv4.tcp_rmem`` on the
  receivers, ``tcp_wmem`` on the senders) sized from the bandwidth-delay
  product the point measured (ceiling x the senders' RTT) with
  :data:`WINDOW_MARGIN`, and never under the kernel's own default maxima;
  ``net.core.rmem_max``/``wmem_max`` only where the engine sets its
  buffers itself (the plan's ``window``: SO_RCVBUF is capped by them,
  autotuning is not);
- ``loss`` located at a receiver: drops on an interface -> the backlog
  (``netdev_max_backlog``) and the NIC's rings; a UDP socket buffer full ->
  ``rmem_default``/``rmem_max``; a send queue full -> ``wmem_default``/``wmem_max``;
- ``cpu`` saturated in softirq: the stack's work spread over cores -- RSS
  queues and IRQ spreading on a NIC, RPS on a veth (it has neither queues
  nor IRQs: RPS is what exists);
- ``engine`` (or a CPU saturated in process context): the plan -- more
  processes (fewer streams per process), nbperf, zerocopy and skip-rx-copy
  where the engine has them, MTU 9000 where both ends and the switch take it.

A setting the hosts cannot take is listed as such, never dropped: a
namespace lab's hosts share the machine's ``net.core`` sysctls (read-only in
a network namespace: ``--host-wide`` sets them on the machine), a veth has no
rings, a plan change is not a tuning setting.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.units import format_size

# The receive buffer a window needs: Linux advertises only part of a receive
# buffer as window (tcp_adv_win_scale, since 6.x the measured payload share of
# the buffer's memory: 0.63 on this VM's veths, down to 0.5), and the round
# trip grows once a bigger window fills the bottleneck's queue.  4 x the
# bandwidth-delay product measured covers both with room.
WINDOW_MARGIN = 4
# ...and never under Linux's own default maxima (tcp_init: tcp_rmem[2] 6 MiB,
# tcp_wmem[2] 4 MiB), which autotuning is built around: a smaller maximum saves
# little memory, and in the lab a 512 KiB receive maximum (4.5 x a 68 KiB BDP
# in window) held BBR under 97 % of a 100 Mbit/s ceiling in two of four
# repeats where the kernel's default reached it in every one
KERNEL_MAX = {"net.ipv4.tcp_rmem": 6291456, "net.ipv4.tcp_wmem": 4194304}
# a UDP receiver descheduled this long keeps what arrived meanwhile: its
# socket buffer is sized to this many seconds at the point's ceiling (a loaded
# 2-core VM here was seen off-CPU for 10-20 ms)
SCHED_GAP_S = 0.02
# the backlog a dropping receiver is given: this many times what it had
BACKLOG_FACTOR = 8
BACKLOG_FLOOR = 10000
# a CPU saturated in process context while no tool process of the point used
# half a core ran someone else's work: nothing of the point's to tune
OTHER_WORK = 0.5
# sysctls a network namespace sees read-only or not at all (Linux 6.18, seen
# in the lab): on a lab host they are the machine's
HOST_WIDE = frozenset({
    "net.core.rmem_max", "net.core.wmem_max", "net.core.rmem_default", "net.core.wmem_default",
    "net.core.optmem_max", "net.core.netdev_max_backlog", "net.core.netdev_budget",
    "net.core.rps_sock_flow_entries",
})
# RFS's table sizes, as the kernel's Documentation/networking/scaling.rst
# suggests: 32768 flows for a moderately loaded server, each receive queue's
# table that over the number of queues -- a veth has one.
RFS_FLOWS = 32768
RFS_PER_QUEUE = RFS_FLOWS
JUMBO = 9000


@dataclass(frozen=True)
class PointInput:
    """What one point of the run gives the recommendation: its verdict and
    the figures sizing rules need, in base units (None: not measured)."""

    point: str
    params: Mapping[str, Any]                 # the study's parameters of the point
    limit: str | None                          # the verdict's limit; None: no verdict
    evidence: tuple[str, ...] = ()             # the verdict's own lines (what is cited)
    leading: str | None = None                 # of a mixed verdict: its two limits
    second: str | None = None
    rtt_s: float | None = None                 # median smoothed RTT the senders saw, s
    ceiling_bps: float | None = None           # one direction's goodput ceiling, bit/s
    drops: Mapping[str, float] = field(default_factory=dict)   # "host counter" -> count over the point
    cpu_state: str | None = None               # the saturated CPU's dominant state
    cpu_host: str | None = None
    tool_cores: float | None = None            # the busiest tool process of the point, cores


@dataclass(frozen=True)
class HostInput:
    """A host as the run's facts recorded it."""

    host: str
    role: str                                  # server | client | machine
    sysctls: Mapping[str, str | None] = field(default_factory=dict)   # key -> value in force
    driver: str | None = None                  # the test interface's
    ifname: str | None = None
    max_mtu: int | None = None                 # the test interface's largest MTU, where known


@dataclass(frozen=True)
class RunInput:
    run_id: str
    study: str
    points: Sequence[PointInput]
    hosts: Sequence[HostInput]
    study_options: Mapping[str, Any] = field(default_factory=dict)   # the plan's [study] table
    engine_version: str | None = None
    mtu: int | None = None
    lab: bool = False                          # hosts are namespaces of one machine
    server: str | None = None


# status of an advice: in the profile, or listed with why not
IN_PROFILE = "recommended"
STATUSES = (IN_PROFILE, "host-wide", "absent", "plan", "manual")


@dataclass(frozen=True)
class Advice:
    """One thing to change.  ``setting`` is a tuning profile's setting (as
    its TOML table) when it is one; ``status`` says whether the profile
    carries it (:data:`IN_PROFILE`) or why not: ``host-wide`` (a lab host
    cannot set it; the machine can), ``absent`` (the host has no such knob),
    ``plan`` (a change to the plan, not tuning), ``manual`` (no profile kind
    expresses it: how to do it is in ``note``)."""

    what: str
    limit: str
    because: str
    points: tuple[str, ...]
    status: str
    setting: Mapping[str, Any] | None = None
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"what": self.what, "limit": self.limit, "because": self.because, "points": list(self.points),
                "status": self.status, "setting": dict(self.setting) if self.setting else None, "note": self.note}


@dataclass(frozen=True)
class Recommendation:
    run_id: str
    advice: tuple[Advice, ...]
    limits: Mapping[str, str]                  # point -> its verdict's limit
    quiet: tuple[str, ...] = ()                # why nothing is recommended for some points

    @property
    def settings(self) -> list[dict[str, Any]]:
        return [dict(a.setting) for a in self.advice if a.status == IN_PROFILE and a.setting]

    def as_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "settings": self.settings, "advice": [a.as_dict() for a in self.advice],
                "limits": dict(self.limits), "quiet": list(self.quiet)}


def _pow2(n: float) -> int:
    """The next power of two at or above ``n`` bytes (at least 64 KiB)."""
    return max(1 << 16, 1 << math.ceil(math.log2(max(n, 1.0))))


def _fields(value: str | None) -> list[int] | None:
    try:
        out = [int(x) for x in str(value).split()]
    except ValueError:
        return None
    return out if value is not None and len(out) == 3 else None


def _num(value: str | None) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


class _Builder:
    """Advice collected over the points, one per ``what``: the points it
    should move accumulate, a size takes the largest any point needs."""

    def __init__(self, run: RunInput):
        self.run = run
        self.out: dict[str, Advice] = {}

    def add(self, a: Advice, size: int | None = None) -> None:
        have = self.out.get(a.what)
        if have is None:
            self.out[a.what] = a
            return
        points = tuple(dict.fromkeys(have.points + a.points))
        bigger = size is not None and a.setting and have.setting and _size_of(a.setting) > _size_of(have.setting)
        self.out[a.what] = replace(a if bigger else have, points=points)

    def hosts(self, roles: Iterable[str]) -> list[HostInput]:
        want = set(roles)
        return [h for h in self.run.hosts if h.role in want]

    def machine(self) -> HostInput | None:
        return next((h for h in self.run.hosts if h.role == "machine"), None)

    def current(self, key: str, roles: Iterable[str]) -> list[str | None]:
        """The value of ``key`` on those hosts (a lab host's host-wide sysctl: the machine's)."""
        m = self.machine()
        if self.run.lab and key in HOST_WIDE and m is not None:
            return [m.sysctls.get(key)]
        return [h.sysctls.get(key) for h in self.hosts(roles)]

    def sysctl(self, key: str, value: str | int, limit: str, because: str, points: tuple[str, ...],
               why: str) -> None:
        setting = {"kind": "sysctl", "key": key, "value": value}
        if self.run.lab and key in HOST_WIDE:
            m = self.machine()
            absent = m is not None and key in m.sysctls and m.sysctls[key] is None    # read, and not there
            self.add(Advice(f"sysctl {key}", limit, because, points, "absent" if absent else "host-wide", setting,
                            f"{why}; " + ("this kernel has no such sysctl" if absent else
                                          "a network namespace cannot set it (the lab's hosts share the machine's): "
                                          "'nicbench tune apply --host-wide' or 'nicbench run --host-wide' sets it "
                                          "on the machine, for every lab on it")), _size_of(setting))
            return
        hosts = self.hosts(("server", "client"))
        # a key the run's facts did not read (facts of an older nicbench) is not absent: the audit
        # at apply time reads it
        missing = [h.host for h in hosts if key in h.sysctls and h.sysctls[key] is None]
        if hosts and len(missing) == len(hosts):
            self.add(Advice(f"sysctl {key}", limit, because, points, "absent", setting,
                            f"{why}; no host reported it (not in their kernels)"))
            return
        self.add(Advice(f"sysctl {key}", limit, because, points, IN_PROFILE, setting, why), _size_of(setting))


def _size_of(setting: Mapping[str, Any]) -> int:
    v = setting.get("value")
    if isinstance(v, int):
        return v
    f = _fields(str(v))
    return f[2] if f else 0


def _roles(direction: object) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(receivers, senders) of a TCP direction: tx is server -> clients."""
    if direction == "tx":
        return ("client",), ("server",)
    if direction == "rx":
        return ("server",), ("client",)
    return ("server", "client"), ("server", "client")


def _cite(p: PointInput, limit: str) -> str:
    """The evidence line of ``limit`` in the point's verdict."""
    for e in p.evidence:
        if e.startswith(f"{limit}: "):
            return e[len(limit) + 2:]
    return p.evidence[0] if p.evidence else f"the verdict is {limit}"


def _window(b: _Builder, p: PointInput) -> None:
    because = _cite(p, "window")
    if p.rtt_s is None or not p.ceiling_bps:
        b.add(Advice("window", "window", because, (p.point,), "manual", None,
                     "the path's bandwidth-delay product is not known (no RTT or no line-rate ceiling: an unshaped "
                     "link): size the socket buffers to at least 2 x rate x RTT by hand"))
        return
    bdp = p.ceiling_bps / 8 * p.rtt_s
    size = _pow2(bdp * WINDOW_MARGIN)
    why = (f"{WINDOW_MARGIN} x the {bdp / 1024:.0f} KiB bandwidth-delay product ({p.ceiling_bps / 1e6:.4g} Mbit/s "
           f"ceiling x {p.rtt_s * 1e3:.3g} ms RTT) = {format_size(size)}")
    recv, send = _roles(p.params.get("direction"))
    explicit = b.run.study_options.get("window")
    if explicit is not None:
        b.add(Advice("plan study.window", "window", because, (p.point,), "plan", None,
                     f"the engine sets its socket buffers itself (window = {explicit!r}): set window = "
                     f"\"{format_size(size)}\" ({why})"))
        for key in ("net.core.rmem_max", "net.core.wmem_max"):
            maxima = [_num(v) for v in b.current(key, recv + send)]
            if any(c is None or c < size for c in maxima):
                b.sysctl(key, size, "window", because, (p.point,),
                         f"{why}: an engine's own buffer (SO_RCVBUF/SO_SNDBUF) is capped by it")
        return
    moved = False
    for key, roles, default in (("net.ipv4.tcp_rmem", recv, (4096, 131072)), ("net.ipv4.tcp_wmem", send,
                                                                                (4096, 16384))):
        cur = [_fields(v) for v in b.current(key, roles)]
        have = [c for c in cur if c is not None]
        if have and min(c[2] for c in have) >= size:
            continue
        lo, mid = (min(c[0] for c in have), max(c[1] for c in have)) if have else default
        top = max(size, KERNEL_MAX[key])
        # the default (a new socket's buffer, where autotuning starts) no lower than the kernel's own
        mid = min(max(mid, default[1]), top)
        b.sysctl(key, f"{lo} {mid} {top}", "window", because, (p.point,),
                 f"the {'receive' if key.endswith('rmem') else 'send'} buffers' maximum to {why}"
                 + (f", raised to the kernel's own default maximum {format_size(top)}" if top > size else "")
                 + f" (it was {max((c[2] for c in have), default=0) or 'unknown'})")
        moved = True
    if not moved:
        b.add(Advice("window", "window", because, (p.point,), "manual", None,
                     f"the buffers' maxima already allow {format_size(size)} ({why}): the receivers' windows were "
                     "held by what their applications read, not by the sysctls -- look at the receiving engine's "
                     "CPU"))


# how the verdict names a UDP counter in its evidence (studies' loss_where)
UDP_LABELS = {"udp.rcvbuf_errors": "socket buffer full", "udp.sndbuf_errors": "send buffer or queue full"}


def _loss(b: _Builder, p: PointInput) -> None:
    because = _cite(p, "loss")
    said = " ".join(p.evidence)
    # only where the verdict itself located the loss: a few drops beside a loss the
    # counters do not see (a shaper's queue) would size the wrong thing
    located = {k: v for k, v in p.drops.items() if v > 0 and (
        k in said or f"{k.partition(' ')[0]} {UDP_LABELS.get(k.partition(' ')[2], '-')}" in said)}
    if not located:
        b.add(Advice("loss", "loss", because, (p.point,), "manual", None,
                     "the verdict's counters do not locate the loss on a host (retransmissions alone: a queue the "
                     "hosts do not count, such as a shaper's or a switch's): nothing to size"))
        return
    by_host: dict[str, HostInput] = {h.host: h for h in b.run.hosts}
    for where in sorted(located):
        host, _, counter = where.partition(" ")
        h = by_host.get(host)
        if counter.startswith("if.drops.") or counter == "softnet.dropped":
            known = [c for c in (_num(v) for v in b.current("net.core.netdev_max_backlog", ("server", "client")))
                     if c is not None]
            value = max(BACKLOG_FLOOR, BACKLOG_FACTOR * max(known, default=1000))
            b.sysctl("net.core.netdev_max_backlog", value, "loss", because, (p.point,),
                     f"{where} {located[where]:.0f}: the receive backlog overflowed; {BACKLOG_FACTOR} x "
                     f"{max(known, default=1000)}")
            d = counter.rsplit(".", 1)[-1]
            ring = {"kind": "ethtool", "feature": "ring", "params": {"rx" if d != "tx" else "tx": "max"}}
            if h is not None and h.driver == "veth":
                b.add(Advice(f"ethtool ring {d}", "loss", because, (p.point,), "absent", ring,
                             f"{host}'s {h.ifname or 'interface'} is a veth: it has no rings (its drops are the "
                             "peer's backlog)"))
            else:
                b.add(Advice(f"ethtool ring {d}", "loss", because, (p.point,), IN_PROFILE, ring,
                             f"{where}: the NIC's {d} ring to its maximum"))
        elif counter == "udp.rcvbuf_errors":
            need = _pow2((p.ceiling_bps or 0) / 8 * SCHED_GAP_S)
            for key in ("net.core.rmem_default", "net.core.rmem_max"):
                now = max((c for c in (_num(v) for v in b.current(key, ("server", "client"))) if c), default=0)
                b.sysctl(key, max(need, 4 * now), "loss", because, (p.point,),
                         f"{where}: the receivers' socket buffers filled; {SCHED_GAP_S * 1e3:.0f} ms at the ceiling"
                         f" or 4 x {now}")
        elif counter == "udp.sndbuf_errors":
            for key in ("net.core.wmem_default", "net.core.wmem_max"):
                now = max((c for c in (_num(v) for v in b.current(key, ("server", "client"))) if c), default=0)
                b.sysctl(key, max(1 << 22, 4 * now), "loss", because, (p.point,),
                         f"{where}: the senders' socket buffers or queues filled; 4 x {now}")


def _softirq(b: _Builder, p: PointInput) -> None:
    because = _cite(p, "cpu")
    host = next((h for h in b.run.hosts if h.host == p.cpu_host), None)
    nics = [h for h in b.hosts(("server", "client")) if h.driver]
    veth = bool(nics) and all(h.driver == "veth" for h in nics)
    if veth or (host is not None and host.role == "machine" and b.run.lab):
        b.add(Advice("rps", "cpu", because, (p.point,), IN_PROFILE,
                     {"kind": "rps", "cpus": "all", "flow_cnt": RFS_PER_QUEUE},
                     "veth has no RSS queues and no IRQs to spread: RPS is what exists -- each receive queue's "
                     f"work steered onto every online CPU, with RFS's per-queue flow table ({RFS_PER_QUEUE})"))
        b.sysctl("net.core.rps_sock_flow_entries", RFS_FLOWS, "cpu", because, (p.point,),
                 "RFS's global flow table, without which the per-queue tables steer nothing")
        return
    b.add(Advice("ethtool channels", "cpu", because, (p.point,), IN_PROFILE,
                 {"kind": "ethtool", "feature": "channels", "params": {"combined": "max"}},
                 "more RSS queues, so the receive work lands on more cores"))
    b.add(Advice("irq_affinity", "cpu", because, (p.point,), IN_PROFILE,
                 {"kind": "irq_affinity", "policy": "nic-node", "optional": True},
                 "one queue IRQ per core of the NIC's node, so no core takes them all"))


def _process(b: _Builder, p: PointInput, limit: str) -> None:
    """An engine (or the CPU in process context) held it: the plan, not tuning."""
    because = _cite(p, limit)
    if limit == "cpu" and p.tool_cores is not None and p.tool_cores < OTHER_WORK:
        b.add(Advice("quiet host", limit, because, (p.point,), "manual", None,
                     f"the CPU was busy with other work (the point's busiest tool process used {p.tool_cores:.0%} "
                     "of a core): nothing of the point's to tune; measure when the hosts are otherwise idle"))
        return
    o = b.run.study_options
    engine = str(o.get("engine") or p.params.get("engine") or "")
    if engine == "iperf3" and b.run.study == "tcp":
        per = o.get("streams_per_process")
        if per != 1 and int(p.params.get("connections") or 1) > 1:
            b.add(Advice("plan study.streams_per_process", limit, because, (p.point,), "plan", None,
                         "iperf3 before 3.16 runs every stream of a process on one thread: streams_per_process = 1 "
                         "gives each connection a process (a core) of its own"))
    if engine in ("iperf3", "iperf2"):
        b.add(Advice("plan study.engine", limit, because, (p.point,), "plan", None,
                     'engine = "nbperf": nicbench\'s own engine, a thread per connection'))
    if engine in ("iperf3", "nbperf") and b.run.study != "udp":
        if not o.get("zerocopy"):
            b.add(Advice("plan study.zerocopy", limit, because, (p.point,), "plan", None,
                         "zerocopy = true: the senders send from the page cache (sendfile) without a copy"))
        if not o.get("skip_rx_copy"):
            b.add(Advice("plan study.skip_rx_copy", limit, because, (p.point,), "plan", None,
                         'skip_rx_copy = "auto": receivers discard without copying (nbperf, iperf3 >= 3.16; '
                         f"{engine} {b.run.engine_version or ''} here)".replace(" )", ")")))
    mtu = b.run.mtu
    if mtu is not None and mtu < JUMBO:
        small = [f"{h.host} {h.max_mtu}" for h in b.hosts(("server", "client")) if h.max_mtu and h.max_mtu < JUMBO]
        if small:
            b.add(Advice("plan link.mtu", limit, because, (p.point,), "absent", None,
                         f"MTU {JUMBO} would cut the per-packet cost, but not every interface takes it: "
                         + ", ".join(small)))
        else:
            b.add(Advice("plan link.mtu", limit, because, (p.point,), "plan", None,
                         f"mtu = {JUMBO}: a sixth of the packets for the same bytes" + (
                             " (the lab's veths and bridge take it)" if b.run.lab else
                             "; only where both ends and every switch port between them take it")))


def recommend(run: RunInput) -> Recommendation:
    """What the run's verdicts point to, over every point that has one."""
    b = _Builder(run)
    quiet: list[str] = []
    limits: dict[str, str] = {}
    for p in run.points:
        if p.limit is None:
            continue
        limits[p.point] = p.limit
        held = [x for x in (p.leading, p.second) if x] if p.limit == "mixed" else [p.limit]
        for limit in held:
            if limit == "window":
                _window(b, p)
            elif limit == "loss":
                _loss(b, p)
            elif limit == "cpu" and p.cpu_state == "softirq":
                _softirq(b, p)
            elif limit in ("engine", "cpu"):
                _process(b, p, limit)
        if p.limit in ("wire", "none found"):
            quiet.append(f"{p.point}: {p.limit}: " + (
                "the link was full; nothing to tune" if p.limit == "wire" else "nothing held it to tune"))
    return Recommendation(run.run_id, tuple(sorted(b.out.values(), key=lambda a: (STATUSES.index(a.status),
                                                                                  a.what))),
                          limits, tuple(quiet))


def profile_doc(rec: Recommendation, description: str) -> dict[str, Any]:
    """The profile as ``tune apply`` and a plan's ``[profiles.NAME]`` take it."""
    return {"description": description, "settings": rec.settings}


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Mapping):
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _comment(text: str, width: int = 100) -> list[str]:
    out, line = [], "#"
    for word in text.split():
        if len(line) + 1 + len(word) > width and line != "#":
            out.append(line)
            line = "#  "
        line += " " + word
    return out + [line]


def profile_toml(rec: Recommendation, description: str, header: Sequence[str] = ()) -> str:
    """The profile as TOML, every setting preceded by why (its evidence and
    points), then what was listed but not put in it."""
    lines = [*(f"# {h}".rstrip() for h in header), f"description = {_toml_value(description)}", ""]
    for a in rec.advice:
        if a.status != IN_PROFILE or not a.setting:
            continue
        lines += _comment(f"{a.limit} at {', '.join(a.points)}: {a.because}")
        lines += _comment(f"-> {a.note}")
        lines.append("[[settings]]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in a.setting.items()]
        lines.append("")
    rest = [a for a in rec.advice if a.status != IN_PROFILE]
    if rest:
        lines.append("# Not in this profile:")
        for a in rest:
            lines += _comment(f"- {a.what} ({a.status}; {a.limit} at {', '.join(a.points)}): {a.note}")
    if not rec.settings:
        lines += _comment("No setting: " + ("; ".join(rec.quiet) if rec.quiet else "nothing to change."))
    return "\n".join(lines).rstrip() + "\n"
