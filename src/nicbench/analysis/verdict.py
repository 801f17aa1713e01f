"""Why not line rate: the one limit that held a point, with its evidence.

A verdict is a result like a measurement: a pure function of what was
sampled over the point's window (goodput against its ceiling, the wire's
counters, every CPU's states, each tool process's CPU, the kernel's TCP
retransmits and the interfaces' drops), its thresholds here with the reason
for each, the evidence it rests on kept beside it, and ``none found`` -- with
what was checked -- when nothing clears a bar.  It is recomputed from the
archive for any run, old ones included.

Limits (closed set, :data:`LIMITS`):

- ``wire``: the link was full -- goodput at >= :data:`WIRE_SHARE` of its
  ceiling in every direction, or the interface's frames at that share of the
  link's speed;
- ``engine``: a traffic-tool process at a full core (a single-threaded
  engine is the bottleneck, not the host);
- ``cpu``: a CPU of a host saturated, named with its dominant state (softirq:
  the network stack on that core);
- ``loss``: retransmissions or drops that cut the rate, located by host and
  counter;
- ``window``: TCP held by its receive window or send buffer (needs per
  connection ``tcp_info``; said as not measured where a study has none);
- ``none found``; and ``mixed`` when two limits hold with the evidence split.

Each study maps its trial to :class:`Evidence`; :func:`decide` judges one
trial, :func:`point_verdict` a point's repeats.  What each study gives:

- TCP and UDP: goodput per direction against the link's ceiling, the wire's
  frames, every CPU, each engine process, the kernel's retransmits, the
  interfaces' drops; TCP the senders' windows (iperf3's tcp_info), UDP the
  receivers' loss located by stage and the rate the senders were paced to;
- HTTPS: what wrk read against the TLS (or TCP) ceiling, nginx's workers
  (one thread each: a worker at a full core is the engine; the TLS crypto
  runs in it) and wrk's threads, wrk's socket errors, the kernel's
  retransmits and drops;
- storage: MB/s against the transport's ceiling at the block size, fio's
  and the target's processes at the cores their threads can use, CPU,
  retransmits and drops; the backing device is not sampled (no device
  counters: said as not measured, never guessed);
- packets: frames received against the frame rate of the link, what the
  generator sent (a generator short of the line with the receiver keeping
  up is the engine), the frames lost between them located (the generator's
  interface, the wire, the receiver), the receiver's softirq CPU (a paced
  generator spins on its cores by design: its busy cores are no finding);
- latency: what the probes' round trips waited on -- the load filling the
  link (``wire``: the probes queue behind it), a saturated CPU, a probe or
  load process at a full core (a probe that busy-polls by design aside),
  requests lost; an idle point with nothing saturated is ``none found``.

No limit was added for these: a device-side limit (storage) would need
device counters nicbench does not sample, and a latency point's offered load
is the load's rate, judged against the same ceiling as any goodput.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ..core.nicstats import SAYS
from ..records import Sample
from .cpu import SATURATED, CpuUsage
from .nicstats import NicFindings, nic_findings

LIMITS = ("wire", "engine", "cpu", "loss", "window", "none found", "mixed")

# goodput at this share of its ceiling is the link's: the ceiling is exact
# framing arithmetic (core/linerate.py), and what a full shaped link leaves
# below it is its queue's jitter and the ACKs of the other direction (the seed
# replays here reach 99.6-100 % on shaped links)
WIRE_SHARE = 0.97
# a CPU or a tool process busy this share of its time is saturated: /proc/stat
# ticks lag wall time by a few % on this VM (analysis/cpu.py), so 100 % is
# never read even on a spinning core
CPU_FULL = SATURATED
ENGINE_FULL = SATURATED
# retransmitted segments per segment sent that cut a TCP rate: a loss-based
# congestion control's rate falls as 1/sqrt(p) (Mathis et al.); at 1 % a flow
# halves its window every ~100 segments, far below what a LAN path carries
RETRANS_SHARE = 0.01
# drops per frame the interface carried (rx + tx) that cost a rate: 0.1 %
# already means a retransmission every thousand frames
DROP_SHARE = 0.001
# UDP datagrams lost of those sent that make loss the limit: at 1 % the
# receivers got measurably less than was sent (the tools' own counts agree to
# ~0.1 % on a clean path here)
DATAGRAM_LOSS = 0.01
# the share of a point's bytes sent while the senders waited on the receivers'
# windows (a window's worth per round trip, the window under the congestion
# window) that makes the window the limit: most of the point, not a moment
WINDOW_SHARE = 0.5
# a point that carried this share of what its senders were paced to was held
# by its pacing (application-limited), not by the path
OFFERED_SHARE = 0.97
# application errors per request (wrk's socket errors: connect, read, write,
# timeouts) that cut a rate: a timed-out request holds its connection for
# wrk's 2 s timeout, about a thousand LAN requests' time, so 0.1 % of them
# cost as much connection time as all the rest (a point over the study's
# error budget is failed before any verdict)
REQUEST_ERRORS = 0.001

# a saturated CPU busy in process context is a tool spinning by design (not a
# limit) only when the spinning processes used at least this share of that
# CPU's user + system time: less, and something else filled it
SPIN_SHARE = 0.5

# how each unit a study's rates are in is written: (divisor, unit shown)
UNITS = {"bit/s": (1e9, "Gbit/s"), "B/s": (1e6, "MB/s"), "frames/s": (1e6, "Mpps")}
# the CPU states of process context: a CPU saturated in them runs processes,
# whose own CPU the tool-process figures tell (softirq and irq are the stack's)
PROCESS_STATES = ("user", "nice", "system")


@dataclass(frozen=True)
class Evidence:
    """What one trial of a study measured over its window, in base units.
    Absent figures are None (empty mappings): not measured, said as such."""

    goodput_bps: Mapping[str, float]                 # per direction
    ceiling_bps: float | None = None                 # per direction, the most goodput the link allows
    wire_bps: Mapping[str, float] = field(default_factory=dict)   # per direction, frames on the wire
    link_bps: float | None = None                    # per direction
    cpu: CpuUsage | None = None
    tool_cpus: Mapping[str, object] = field(default_factory=dict)   # as TrialHead.tool_cpus
    retrans_segs: float | None = None                # the kernel's, all hosts
    out_segs: float | None = None
    drops: Mapping[str, float] = field(default_factory=dict)       # "host counter" -> count
    frames: float | None = None                      # frames the test interfaces carried, for drop shares
    # TCP: the share of the window's bytes sent while waiting on the receivers' windows,
    # and what shows it (None: not measured for this engine)
    window: tuple[float, str] | None = None
    offered_bps: float | None = None                 # per direction: the rate the senders were paced to
    datagram_loss: float | None = None               # UDP: datagrams lost / expected, the receivers' count
    loss_where: Mapping[str, float] = field(default_factory=dict)  # where datagrams were lost -> count
    tcp: bool = True                                 # a TCP point (retransmits and tcp_info apply)
    # the other studies' shapes (every default is the TCP and UDP studies')
    unit: str = "bit/s"                              # of goodput, ceiling, offered and sent: a key of UNITS
    what: str = "goodput"                            # what the goodput is, as a reader says it
    wire_note: str | None = None                     # why the wire is not judged (an idle latency point)
    tool_cores: Mapping[str, float] = field(default_factory=dict)   # tool -> cores its threads can use (1)
    spinning: Mapping[str, str] = field(default_factory=dict)       # tool role -> why it spins by design
    errors: tuple[float, float, str] | None = None   # application errors, requests, what kinds
    sent_bps: float | None = None                    # what the senders put out over the window (packets)
    sender: str = "the senders"
    lost_what: str = "datagrams"                     # what datagram_loss counts
    notes: tuple[str, ...] = ()                      # the study's own checks, said with the others
    nic: NicFindings | None = None                   # the NIC's own counters and interrupts (None: not read)


@dataclass(frozen=True)
class Finding:
    limit: str
    evidence: str
    margin: float          # how far past its threshold (>= 1): ranks two findings


@dataclass(frozen=True)
class Verdict:
    """The limit of a trial or point: ``limit`` from :data:`LIMITS`, the
    ``evidence`` lines it rests on, ``checked`` what else was looked at (and
    found clear or not measurable), ``confidence`` ``high`` (one limit, every
    repeat agrees) or ``split`` (``mixed``, or repeats that disagree), and
    ``second`` the runner-up where the evidence is split."""

    limit: str
    evidence: tuple[str, ...]
    checked: tuple[str, ...] = ()
    confidence: str = "high"
    second: str | None = None
    leading: str | None = None       # of a ``mixed`` verdict: the stronger of the two

    def as_dict(self) -> dict[str, object]:
        return {"limit": self.limit, "confidence": self.confidence, "leading": self.leading, "second": self.second,
                "evidence": list(self.evidence), "checked": list(self.checked)}


def _pct(x: float) -> str:
    return f"{x * 100:.1f} %"


def cpus_in(cpu_list: object) -> int | None:
    """How many CPUs a list such as ``0-3,8`` names (None: not a list)."""
    if not isinstance(cpu_list, str) or not cpu_list.strip():
        return None
    n = 0
    try:
        for part in cpu_list.split(","):
            a, _, b = part.strip().partition("-")
            n += int(b) - int(a) + 1 if b else 1
    except ValueError:
        return None
    return n if n > 0 else None


def tool_cores(tool_cpus: Mapping[str, object], threads: Mapping[str, float]) -> dict[str, float]:
    """Tool process ("role host proc", as :class:`CpuUsage` keys them) ->
    the cores its threads can use: the role's threads (1 unless ``threads``
    says; ``inf`` for a pool as large as it likes), at most the CPUs it was
    allowed (``tool_cpus``: "host role proc" -> {"allowed": "0-1", ...}).  A
    pool with no allowed CPUs recorded is left out: no bar to judge it by."""
    out: dict[str, float] = {}
    for key, v in tool_cpus.items():
        host, role, proc = (key.split(" ", 2) + ["", ""])[:3]
        allowed = cpus_in(v.get("allowed")) if isinstance(v, Mapping) else None
        n = min(threads.get(role, 1.0), float(allowed) if allowed else float("inf"))
        out[f"{role} {host} {proc}"] = n
    for role, n in threads.items():
        if n == float("inf"):
            out.setdefault(f"{role} ", n)     # a marker: the role's unlisted processes are pools
    return out


def _rate(x: float, unit: str) -> str:
    div, shown = UNITS.get(unit, (1.0, unit))
    return f"{x / div:.3g} {shown}"


def _cores(cores: float, cap: float) -> str:
    if cap == float("inf"):
        return f"{cores:.2f} cores (a thread pool with no CPU list recorded: no bar to judge it by)"
    return f"{_pct(cores)} of one core" if cap <= 1 else f"{cores:.2f} of the {cap:g} cores its threads can use"


def _cap(e: Evidence, tool: str) -> float:
    """The cores ``tool`` can use (1: one thread, unless the study says)."""
    if tool in e.tool_cores:
        return e.tool_cores[tool]
    return e.tool_cores.get(tool.split(" ", 1)[0] + " ", 1.0)


def findings(e: Evidence) -> tuple[list[Finding], list[str]]:
    """Every limit the evidence clears, and what was checked and found clear."""
    found: list[Finding] = []
    clear: list[str] = []
    # wire
    if e.wire_note is not None:
        clear.append(f"wire: {e.wire_note}")
    elif e.ceiling_bps and e.goodput_bps:
        shares = {d: g / e.ceiling_bps for d, g in e.goodput_bps.items()}
        worst = min(shares, key=lambda d: shares[d])
        if shares[worst] >= WIRE_SHARE:
            found.append(Finding("wire", "; ".join(
                f"{d} {e.what} {_rate(g, e.unit)} = {_pct(shares[d])} of its {_rate(e.ceiling_bps, e.unit)} "
                "ceiling" for d, g in sorted(e.goodput_bps.items())), shares[worst] / WIRE_SHARE))
        else:
            clear.append(f"wire: {worst} {e.what} {_pct(shares[worst])} of its ceiling (under {_pct(WIRE_SHARE)})")
    elif e.link_bps and e.wire_bps:
        shares = {d: w / e.link_bps for d, w in e.wire_bps.items()}
        worst = min(shares, key=lambda d: shares[d])
        if shares[worst] >= WIRE_SHARE:
            found.append(Finding("wire", f"{worst}: frames on the wire at {_pct(shares[worst])} of the link's "
                                 f"{e.link_bps / 1e9:.3g} Gbit/s", shares[worst] / WIRE_SHARE))
        else:
            clear.append(f"wire: frames at {_pct(shares[worst])} of the link's speed")
    else:
        clear.append("wire: no line rate known (the link is unshaped and its speed unknown)")
    _sender_short(e, found, clear)
    # engine and cpu
    u = e.cpu
    if u is None:
        clear.append("cpu, engine: CPU not measured over the window")
    else:
        spun = {k: v for k, v in u.tools.items() if k.split(" ", 1)[0] in e.spinning}
        for tool, cores in sorted(spun.items()):
            clear.append(f"engine: {tool} at {_pct(cores)} of a core: {e.spinning[tool.split(' ', 1)[0]]}")
        of_cap = {k: v / max(1.0, _cap(e, k)) for k, v in u.tools.items() if k not in spun}
        full = {k: u.tools[k] for k, v in of_cap.items() if v >= ENGINE_FULL}
        for tool, cores in sorted(full.items(), key=lambda kv: -of_cap[kv[0]]):
            role, host, proc = (tool.split(" ", 2) + ["", ""])[:3]
            cap = max(1.0, _cap(e, tool))
            found.append(Finding("engine", f"{role} {proc} on {host} used {_cores(cores, cap)} "
                                 + ("(one thread cannot go faster)" if cap <= 1 else "(each at a full core)"),
                                 of_cap[tool] / ENGINE_FULL))
        if not full:
            top = max(of_cap.items(), key=lambda kv: kv[1], default=None)
            cap = max(1.0, _cap(e, top[0])) if top else 1.0
            clear.append("engine: " + ((f"busiest tool process {top[0]} at {_pct(top[1])} of a core" if cap <= 1 else
                                        f"busiest tool process {top[0]} at {_cores(u.tools[top[0]], cap)}")
                                       if top else "no tool process measured"))
        own = sum(u.per_cpu.get(u.busiest_cpu, {}).get(k, 0.0) for k in ("user", "system"))
        if u.busiest >= CPU_FULL and u.busiest_state in ("user", "system") and spun \
                and sum(spun.values()) >= SPIN_SHARE * own:
            clear.append(f"cpu: CPU {u.busiest_cpu} of {u.host} {_pct(u.busiest)} busy, mostly {u.busiest_state}: "
                         f"{', '.join(sorted({k.split(' ', 1)[0] for k in spun}))} spin there by design")
        elif u.busiest >= CPU_FULL:
            states = u.per_cpu.get(u.busiest_cpu, {})
            found.append(Finding("cpu", f"CPU {u.busiest_cpu} of {u.host} {_pct(u.busiest)} busy, mostly "
                                 f"{u.busiest_state} ({_pct(states.get(u.busiest_state, 0.0))})"
                                 + ("; the network stack on that core: spread it (RSS queues, RPS, IRQ affinity)"
                                    if u.busiest_state == "softirq" else "") + _nic_on_core(e, u),
                                 u.busiest / CPU_FULL))
        else:
            clear.append(f"cpu: busiest CPU {u.busiest_cpu} of {u.host} at {_pct(u.busiest)} "
                         f"(under {_pct(CPU_FULL)})")
    # loss
    lossy = []
    if e.datagram_loss is not None:
        where = ", ".join(f"{k} {v:.0f}" for k, v in sorted(e.loss_where.items(), key=lambda kv: -kv[1]) if v > 0)
        if e.datagram_loss >= DATAGRAM_LOSS:
            lossy.append(Finding("loss", f"{_pct(e.datagram_loss)} of the {e.lost_what} were lost"
                                 + (f" ({where})" if where else " (where: not told by the counters)"),
                                 e.datagram_loss / DATAGRAM_LOSS))
        else:
            clear.append(f"loss: {_pct(e.datagram_loss)} of the {e.lost_what} lost (under {_pct(DATAGRAM_LOSS)})")
    if e.errors is not None:
        n, requests, kinds = e.errors
        share = n / requests if requests > 0 else (1.0 if n else 0.0)
        if share >= REQUEST_ERRORS:
            lossy.append(Finding("loss", f"{n:.0f} socket errors against {requests:.0f} requests ({_pct(share)}"
                                 + (f": {kinds}" if kinds else "") + ")", share / REQUEST_ERRORS))
        else:
            clear.append(f"loss: {n:.0f} socket errors, {_pct(share)} of the requests (under {_pct(REQUEST_ERRORS)})")
    if e.tcp and e.retrans_segs is not None and e.out_segs:
        share = e.retrans_segs / e.out_segs
        if share >= RETRANS_SHARE:
            lossy.append(Finding("loss", f"the kernel retransmitted {e.retrans_segs:.0f} of {e.out_segs:.0f} TCP "
                                 f"segments ({_pct(share)})", share / RETRANS_SHARE))
        else:
            clear.append(f"loss: {_pct(share)} of TCP segments retransmitted (under {_pct(RETRANS_SHARE)})")
    dropped = {k: v for k, v in e.drops.items() if v > 0}
    if dropped and e.frames:
        share = sum(dropped.values()) / e.frames
        where = ", ".join(f"{k} {v:.0f}" for k, v in sorted(dropped.items(), key=lambda kv: -kv[1]))
        if share >= DROP_SHARE:
            lossy.append(Finding("loss", f"drops: {where} ({_pct(share)} of the frames carried)",
                                 share / DROP_SHARE))
        else:
            clear.append(f"loss: drops {where}, {_pct(share)} of the frames (under {_pct(DROP_SHARE)})")
    elif dropped:
        clear.append("loss: drops " + ", ".join(f"{k} {v:.0f}" for k, v in sorted(dropped.items()))
                     + " counted; their share is unknown (the frames carried were not counted)")
    else:
        clear.append("loss: no interface drops counted")
    ring_note = _nic_ring(e, lossy, clear)
    if lossy:
        found.append(Finding("loss", "; ".join(f.evidence for f in lossy) + ring_note, max(f.margin for f in lossy)))
    # window
    if not e.tcp:
        pass
    elif e.window is None:
        clear.append("window: not measured (no tcp_info of the connections for this engine)")
    elif e.window[0] >= WINDOW_SHARE:
        found.append(Finding("window", e.window[1], e.window[0] / WINDOW_SHARE))
    else:
        clear.append(f"window: {e.window[1]}")
    return found, clear + list(e.notes) + (e.nic.lines() if e.nic is not None else [])


def _nic_ring(e: Evidence, lossy: list[Finding], clear: list[str]) -> str:
    """The NIC ring's drops (no Rx buffer posted: the host's receive path):
    a loss of their own at :data:`DROP_SHARE` of the frames carried (the
    interfaces' frames, else the NIC's own queues' packets); under it, where
    another loss was found, said as where it happened (the returned note)."""
    if e.nic is None:
        return ""
    ring = {k: v for k, v in e.nic.ring().items() if v > 0}
    if not ring:
        if e.nic.interfaces:
            clear.append("loss: the NIC rings dropped nothing (no ring, missed or no-buffer counter moved)")
        return ""
    where = ", ".join(f"{k} {v:.0f}" for k, v in sorted(ring.items(), key=lambda kv: -kv[1]))
    frames = e.frames or sum(sum(s.packets.values()) for s in e.nic.spreads if s.direction == "rx") or None
    if frames is None:
        clear.append(f"loss: at the NIC ring: {where} counted; their share is unknown (the frames carried were not "
                     "counted)")
        return f"; at the NIC ring: {where}" if lossy else ""
    share = sum(ring.values()) / frames
    if share >= DROP_SHARE:
        lossy.append(Finding("loss", f"at the NIC ring: {where} ({_pct(share)} of the frames carried): "
                             f"{SAYS['ring']}; raise the ring (ethtool -G) or give its queue's core more time "
                             "(spread the queues, IRQ affinity)", share / DROP_SHARE))
        return ""
    clear.append(f"loss: at the NIC ring: {where}, {_pct(share)} of the frames (under {_pct(DROP_SHARE)})")
    return f"; at the NIC ring: {where}" if lossy else ""


def _nic_on_core(e: Evidence, u: CpuUsage) -> str:
    """What the NIC says of the saturated core: it takes every queue's
    interrupts, or the queues feeding the stack are uneven."""
    if e.nic is None:
        return ""
    out = ""
    h = e.nic.irq_hold
    # the same machine: the host whose CPUs were sampled, or the lab's one machine under every namespace
    same = h is not None and (h.host == u.host or u.host not in {x.split(" ", 1)[0] for x in e.nic.interfaces})
    if h is not None and same and h.cpu == u.busiest_cpu:
        out += (f"; it takes {_pct(h.share)} of the interrupts of every one of the NIC's {h.queues} queues "
                "(one core serves the whole NIC): spread the IRQs (smp_affinity, irqbalance)")
    if u.busiest_state in ("softirq", "irq"):
        uneven = [s for s in e.nic.spreads if s.uneven]
        if uneven:
            out += "; the NIC's queues are uneven: " + ", ".join(
                f"{s.host} {s.ifname} {s.direction} imbalance {s.index:.2f}" for s in uneven)
    return out


def _sender_short(e: Evidence, found: list[Finding], clear: list[str]) -> None:
    """What the senders put out, where a study counts it: short of the line
    (and of what they were asked) with the receivers keeping up, the senders
    are the limit."""
    if e.sent_bps is None or not e.goodput_bps:
        return
    got = min(e.goodput_bps.values())
    kept = got / e.sent_bps if e.sent_bps > 0 else 0.0
    if not e.ceiling_bps:
        clear.append(f"engine: {e.sender} sent {_rate(e.sent_bps, e.unit)}, the receivers got {_pct(kept)} of it; "
                     "no line rate known to put it against")
        return
    asked = f" ({_pct(e.sent_bps / e.offered_bps)} of the {_rate(e.offered_bps, e.unit)} asked)" \
        if e.offered_bps else ""
    short = e.sent_bps < WIRE_SHARE * e.ceiling_bps and (
        not e.offered_bps or e.sent_bps < OFFERED_SHARE * e.offered_bps)
    if short and kept >= 1 - DATAGRAM_LOSS:
        found.append(Finding("engine", f"{e.sender} sent only {_rate(e.sent_bps, e.unit)} = "
                             f"{_pct(e.sent_bps / e.ceiling_bps)} of the ceiling{asked}, and the receivers got "
                             f"{_pct(kept)} of it: the sender is the limit",
                             WIRE_SHARE * e.ceiling_bps / max(e.sent_bps, 1e-9)))
    else:
        clear.append(f"engine: {e.sender} sent {_rate(e.sent_bps, e.unit)} = {_pct(e.sent_bps / e.ceiling_bps)} "
                     f"of the ceiling{asked}; the receivers got {_pct(kept)} of it")


def _paced(e: Evidence) -> str | None:
    """The senders' pacing held the point: it carried what it was offered,
    below the wire."""
    if not e.offered_bps or not e.goodput_bps:
        return None
    got = min(e.goodput_bps.values())
    if got < OFFERED_SHARE * e.offered_bps:
        return None
    if e.ceiling_bps and e.offered_bps >= WIRE_SHARE * e.ceiling_bps:
        return None
    return (f"application-limited: {e.sender} were paced to {_rate(e.offered_bps, e.unit)} per direction and "
            f"the receivers got {_pct(got / e.offered_bps)} of it" + (
                f"; the link allows {e.ceiling_bps / UNITS.get(e.unit, (1.0, ''))[0]:.3g}" if e.ceiling_bps else ""))


def with_nic(e: Evidence, samples: Iterable[Sample], meta: Mapping[str, object]) -> Evidence:
    """``e`` with what the trial's NIC counters and interrupts say (every
    study passes its evidence through here: the NIC is the same in all)."""
    return replace(e, nic=nic_findings(samples, meta))


def decide(e: Evidence) -> Verdict:
    """The limit of one trial."""
    found, clear = findings(e)
    paced = _paced(e)
    if paced is not None:       # it got what it asked for: nothing held it, whatever ran hot
        return Verdict("none found", (paced,), tuple(clear) + tuple(f"also: {f.limit}: {f.evidence}" for f in found))
    if not found:
        return Verdict("none found", (), tuple(clear))
    by = {f.limit: f for f in found if f.limit != "engine"}
    engines = [f for f in found if f.limit == "engine"]
    if engines:
        by["engine"] = Finding("engine", "; ".join(f.evidence for f in engines), max(f.margin for f in engines))
    if "wire" in by:        # the link was full: whatever else ran hot did not hold it
        return Verdict("wire", (by["wire"].evidence,),
                       tuple(clear) + tuple(f"also: {f.limit}: {f.evidence}" for f in by.values()
                                            if f.limit != "wire"))
    if "engine" in by and "cpu" in by and e.cpu is not None and e.cpu.busiest_state in ("user", "system"):
        # the saturated CPU is busy in process context: the engine at a full core is what holds it
        return Verdict("engine", (by["engine"].evidence, by["cpu"].evidence), tuple(clear))
    if "window" in by and "cpu" in by and "engine" not in by and e.cpu is not None \
            and e.cpu.busiest_state in PROCESS_STATES and e.ceiling_bps is not None:
        # the senders kept the receivers' windows full (a window per round trip for most of the
        # bytes) while a CPU was busy in process context with no tool process of the point near a
        # core: other work on the machine (a shared lab's), not what held the point -- a faster
        # CPU moves no more per round trip, a larger window does.  Only on a link whose rate is
        # known: without it a small window may as well be a receiver the busy CPU kept from
        # reading (its free buffer is the window), so both stay named
        return Verdict("window", (by["window"].evidence,), tuple(clear) + (
            f"also: cpu: {by['cpu'].evidence} (in process context, no tool process of the point at a full "
            "core: the senders waited on the windows, not on it)",))
    ranked = sorted(by.values(), key=lambda f: -f.margin)
    if len(ranked) == 1:
        return Verdict(ranked[0].limit, (ranked[0].evidence,), tuple(clear))
    return Verdict("mixed", tuple(f"{f.limit}: {f.evidence}" for f in ranked), tuple(clear), "split",
                   second=ranked[1].limit, leading=ranked[0].limit)


def point_verdict(verdicts: Sequence[Verdict]) -> Verdict | None:
    """A point's verdict over its ok repeats: the limit most of them give
    (its first such repeat's evidence); repeats that disagree make it
    ``split``, and an even split ``mixed``.  None without a repeat."""
    if not verdicts:
        return None
    counts = Counter(v.limit for v in verdicts)
    (top, n), *rest = counts.most_common()
    first = next(v for v in verdicts if v.limit == top)
    if not rest:
        return first
    if rest[0][1] == n:
        return Verdict("mixed", (f"{top} in {n} of {len(verdicts)} repeats, {rest[0][0]} in as many",
                                 *first.evidence), first.checked, "split", second=rest[0][0], leading=top)
    return Verdict(top, first.evidence + (f"{n} of {len(verdicts)} repeats; the others: "
                                          + ", ".join(f"{k} ({m})" for k, m in rest),), first.checked, "split",
                   second=rest[0][0])
