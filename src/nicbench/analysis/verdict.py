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
trial, :func:`point_verdict` a point's repeats.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .cpu import SATURATED, CpuUsage

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


def findings(e: Evidence) -> tuple[list[Finding], list[str]]:
    """Every limit the evidence clears, and what was checked and found clear."""
    found: list[Finding] = []
    clear: list[str] = []
    # wire
    if e.ceiling_bps and e.goodput_bps:
        shares = {d: g / e.ceiling_bps for d, g in e.goodput_bps.items()}
        worst = min(shares, key=lambda d: shares[d])
        if shares[worst] >= WIRE_SHARE:
            found.append(Finding("wire", "; ".join(
                f"{d} goodput {g / 1e9:.3g} Gbit/s = {_pct(shares[d])} of its {e.ceiling_bps / 1e9:.3g} Gbit/s "
                "ceiling" for d, g in sorted(e.goodput_bps.items())), shares[worst] / WIRE_SHARE))
        else:
            clear.append(f"wire: {worst} goodput {_pct(shares[worst])} of its ceiling (under {_pct(WIRE_SHARE)})")
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
    # engine and cpu
    u = e.cpu
    if u is None:
        clear.append("cpu, engine: CPU not measured over the window")
    else:
        full = {k: v for k, v in u.tools.items() if v >= ENGINE_FULL}
        for tool, cores in sorted(full.items(), key=lambda kv: -kv[1]):
            role, host, proc = (tool.split(" ", 2) + ["", ""])[:3]
            found.append(Finding("engine", f"{role} {proc} on {host} used {_pct(cores)} of one core "
                                 "(one thread cannot go faster)", cores / ENGINE_FULL))
        if not full:
            top = max(u.tools.items(), key=lambda kv: kv[1], default=None)
            clear.append("engine: " + (f"busiest tool process {top[0]} at {_pct(top[1])} of a core"
                                       if top else "no tool process measured"))
        if u.busiest >= CPU_FULL:
            states = u.per_cpu.get(u.busiest_cpu, {})
            found.append(Finding("cpu", f"CPU {u.busiest_cpu} of {u.host} {_pct(u.busiest)} busy, mostly "
                                 f"{u.busiest_state} ({_pct(states.get(u.busiest_state, 0.0))})"
                                 + ("; the network stack on that core: spread it (RSS queues, RPS, IRQ affinity)"
                                    if u.busiest_state == "softirq" else ""), u.busiest / CPU_FULL))
        else:
            clear.append(f"cpu: busiest CPU {u.busiest_cpu} of {u.host} at {_pct(u.busiest)} "
                         f"(under {_pct(CPU_FULL)})")
    # loss
    lossy = []
    if e.datagram_loss is not None:
        where = ", ".join(f"{k} {v:.0f}" for k, v in sorted(e.loss_where.items(), key=lambda kv: -kv[1]) if v > 0)
        if e.datagram_loss >= DATAGRAM_LOSS:
            lossy.append(Finding("loss", f"{_pct(e.datagram_loss)} of the datagrams were lost"
                                 + (f" ({where})" if where else " (where: not told by the counters)"),
                                 e.datagram_loss / DATAGRAM_LOSS))
        else:
            clear.append(f"loss: {_pct(e.datagram_loss)} of the datagrams lost (under {_pct(DATAGRAM_LOSS)})")
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
    if lossy:
        found.append(Finding("loss", "; ".join(f.evidence for f in lossy), max(f.margin for f in lossy)))
    # window
    if not e.tcp:
        pass
    elif e.window is None:
        clear.append("window: not measured (no tcp_info of the connections for this engine)")
    elif e.window[0] >= WINDOW_SHARE:
        found.append(Finding("window", e.window[1], e.window[0] / WINDOW_SHARE))
    else:
        clear.append(f"window: {e.window[1]}")
    return found, clear


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
    return (f"application-limited: the senders were paced to {e.offered_bps / 1e9:.3g} Gbit/s per direction and "
            f"the receivers got {_pct(got / e.offered_bps)} of it" + (
                f"; the link allows {e.ceiling_bps / 1e9:.3g}" if e.ceiling_bps else ""))


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
