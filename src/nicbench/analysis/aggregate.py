"""Aggregate throughput over the window that every client process shares.

For one trial and one direction, each tool process (client host x port)
contributes interval samples on its own absolute timeline.  The shared window
is ``[latest first start, earliest last end]`` over all processes, after the
engine's warm-up intervals (``omitted``) are dropped, then trimmed by ``trim``
seconds at both ends.  Each process's bytes inside the window are summed; an
interval cut by the window edge counts pro rata to its overlap (the rate is
taken as constant within one report interval).  Aggregate Gbps = bytes x 8 /
window length.  The receiver side is the truth; the sender side is reported
beside it.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from operator import attrgetter

from ..core.units import gbps
from ..records import Sample, Tags


@dataclass(frozen=True)
class ProcessShare:
    host: str
    proc: str
    bytes: float
    span: tuple[float, float]


@dataclass(frozen=True)
class DirectionAggregate:
    direction: str
    side: str
    window: tuple[float, float]
    bytes: float
    gbps: float
    per_host: dict[str, float]                 # host -> Gbps over the window
    processes: tuple[ProcessShare, ...]
    series: tuple[tuple[float, float], ...] = field(default=())  # (t, Gbps) per bin

    @property
    def seconds(self) -> float:
        return self.window[1] - self.window[0]


class NoSharedWindow(ValueError):
    """The processes' measured spans do not overlap (after trimming)."""


def _measured(samples: Iterable[Sample], metric: str, along: str, value: str,
              side: str) -> Iterator[tuple[Sample, tuple[str, str]]]:
    """The samples of ``metric`` whose ``along`` tag is ``value``, on ``side``,
    not warm-up, each with its (host, proc).

    The tags are read once per distinct tag set, not per sample: a point's
    samples share a handful of tag sets, and reading five tags of each of
    340,000 samples (a 200 MB import) was most of its analysis' time.  The
    tag sets are looked up by identity (the rule in :mod:`nicbench.records`).
    """
    seen: dict[int, tuple[Tags, tuple[str, str] | None]] = {}
    for s in samples:
        if s.metric != metric:
            continue
        t = s.tags
        e = seen.get(id(t))
        if e is None:
            e = seen[id(t)] = (t, (s.tag("host") or "?", s.tag("proc") or "?")
                               if s.tag(along) == value and s.tag("side") == side
                               and s.tag("omitted", "0") != "1" else None)
        key = e[1]
        if key is not None:
            yield s, key


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def _pro_rata(v: list[Sample], w0: float, w1: float) -> list[float]:
    """Each sample's value times its share inside [w0, w1], in order: what
    ``x.value * _overlap(x.t_start, x.t_end, w0, w1) / (x.t_end - x.t_start)``
    gives, with min and max written out (the same comparisons, so the same
    floats) instead of three calls per sample -- a long import has 100,000s."""
    out: list[float] = []
    add = out.append
    for x in v:
        a0, a1 = x.t_start, x.t_end
        ov = (w1 if w1 < a1 else a1) - (w0 if w0 > a0 else a0)
        add(x.value * (ov if ov > 0.0 else 0.0) / (a1 - a0))
    return out


_T_START, _T_END = attrgetter("t_start"), attrgetter("t_end")


def aggregate(samples: Iterable[Sample], *, direction: str, side: str = "receiver",
              trim: float = 0.0, metric: str = "tcp.bytes", bin_s: float = 1.0,
              along: str = "direction", series: bool = True) -> DirectionAggregate:
    """``direction`` is matched against the samples' ``along`` tag (the
    storage study's ``op``).  ``series=False``: no time series (left empty),
    for a caller that reads only the totals -- it is a pass over every
    sample and bin (a long import's senders: 113,000 of each)."""
    procs: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    for s, key in _measured(samples, metric, along, direction, side):
        if s.t_end > s.t_start:
            procs[key].append(s)
    if not procs:
        raise NoSharedWindow(f"no {side}-side samples for direction {direction}")
    spans = {k: (min(map(_T_START, v)), max(map(_T_END, v))) for k, v in procs.items()}
    w0 = max(a for a, _ in spans.values()) + trim
    w1 = min(b for _, b in spans.values()) - trim
    if w1 <= w0:
        raise NoSharedWindow(
            f"the {len(procs)} processes share no measured window after trimming {trim:g}s "
            f"(start skew or a short test?)")
    shares = []
    per_host: dict[str, float] = defaultdict(float)
    total = 0.0
    for (host, proc), v in sorted(procs.items()):
        b = sum(_pro_rata(v, w0, w1))
        shares.append(ProcessShare(host, proc, b, spans[(host, proc)]))
        per_host[host] += b
        total += b
    seconds = w1 - w0
    return DirectionAggregate(direction, side, (w0, w1), total, gbps(total, seconds),
                              {h: gbps(b, seconds) for h, b in per_host.items()}, tuple(shares),
                              _series(procs.values(), w0, w1, bin_s) if series else ())


def _series(procs: Iterable[list[Sample]], w0: float, w1: float, bin_s: float) -> tuple[tuple[float, float], ...]:
    """(bin start, Gbps) per ``bin_s`` bin of [w0, w1], each sample's bytes pro
    rata to its overlap with the bin.

    Linear in samples + bins: each sample is added only to the bins it
    overlaps (found by bisection), in the same order as summing every sample
    for every bin would add them (processes, then samples), so each bin's
    float sum is the same to the last bit -- the old all-samples-per-bin sum
    took 16 million overlap tests for 2,000 intervals.
    """
    starts: list[float] = []
    ends: list[float] = []
    t = w0
    while t < w1 - 1e-9:
        t_next = min(t + bin_s, w1)
        starts.append(t)
        ends.append(t_next)
        t = t_next
    acc = [0.0] * len(starts)
    n = len(starts)
    for v in procs:
        for x in v:
            a, b, value = x.t_start, x.t_end, x.value
            span = b - a
            k = bisect_right(ends, a)        # the first bin ending after the sample starts
            while k < n and starts[k] < b:
                # _overlap, inline (min and max written out: the same comparisons): > 0 or skipped
                e, s = ends[k], starts[k]
                ov = (e if e < b else b) - (s if s > a else a)
                if ov > 0:
                    acc[k] += value * ov / span
                k += 1
    return tuple((a, gbps(bb, b - a)) for a, b, bb in zip(starts, ends, acc, strict=True))


def timeline_problems(samples: Iterable[Sample], *, direction: str, side: str = "receiver",
                      metric: str = "tcp.bytes") -> list[str]:
    """Overlaps and gaps inside each process's own timeline.

    A process's intervals must follow each other; an overlap or a gap of more
    than a quarter of its median interval means its times are wrong (a
    parser or clock problem) and its bytes cannot be placed in the window.
    """
    procs: dict[tuple[str, str], list[Sample]] = defaultdict(list)
    for s, key in _measured(samples, metric, "direction", direction, side):
        procs[key].append(s)
    out = []
    for (host, proc), v in sorted(procs.items()):
        v.sort(key=lambda x: x.t_start)
        spans = sorted(x.t_end - x.t_start for x in v)
        nominal = spans[len(spans) // 2] if spans else 0.0
        for a, b in pairwise(v):
            if b.t_start < a.t_end - 0.25 * nominal:
                out.append(f"{host}:{proc} {direction} intervals overlap by {a.t_end - b.t_start:.3f}s")
                break
            if b.t_start > a.t_end + 0.25 * nominal:
                out.append(f"{host}:{proc} {direction} has a {b.t_start - a.t_end:.3f}s gap")
                break
    return out


def processes_with_data(samples: Iterable[Sample], *, direction: str, side: str = "receiver",
                        metric: str = "tcp.bytes") -> set[tuple[str, str]]:
    return {key for _, key in _measured(samples, metric, "direction", direction, side)}


@dataclass(frozen=True)
class WireRate:
    """Frames the interface counted over a window, and the wire rate they make.

    ``wire_bps`` = (counted bytes + frames x ``uncounted_per_frame``) x 8 / s:
    counters stop at the end of the payload; FCS, preamble and IFG are added.
    """

    direction: str
    window: tuple[float, float]
    bytes: float
    frames: float
    uncounted_per_frame: int
    wire_bps: float

    @property
    def frames_per_s(self) -> float:
        return self.frames / (self.window[1] - self.window[0])


def _counter_samples(samples: Iterable[Sample], metric: str, direction: str, host: str | None) -> list[Sample]:
    return sorted((x for x in samples if x.metric == metric and x.tag("direction") == direction
                   and (host is None or x.tag("host") == host) and x.t_end > x.t_start),
                  key=lambda x: x.t_start)


def covers(v: list[Sample], w0: float, w1: float, slack: float = 1e-3) -> bool:
    """Do consecutive counter samples cover [w0, w1] without gaps?"""
    if not v or v[0].t_start > w0 + slack or v[-1].t_end < w1 - slack:
        return False
    return all(b.t_start <= a.t_end + slack for a, b in pairwise(v))


def integrate(v: list[Sample], w0: float, w1: float) -> float:
    return sum(x.value * _overlap(x.t_start, x.t_end, w0, w1) / (x.t_end - x.t_start) for x in v)


def wire_rate(samples: Iterable[Sample], *, direction: str, window: tuple[float, float],
              uncounted_per_frame: int = 24, host: str | None = None) -> WireRate | None:
    """Interface counters (``if.bytes``/``if.packets``) over ``window``, pro rata.

    None unless both counters cover the whole window without gaps: a partial
    cover divided by the full window would understate the wire rate.
    """
    samples = list(samples)
    w0, w1 = window
    by = _counter_samples(samples, "if.bytes", direction, host)
    pk = _counter_samples(samples, "if.packets", direction, host)
    if w1 <= w0 or not covers(by, w0, w1) or not covers(pk, w0, w1):
        return None
    nbytes, frames = integrate(by, w0, w1), integrate(pk, w0, w1)
    return WireRate(direction, window, nbytes, frames, uncounted_per_frame,
                    (nbytes + frames * uncounted_per_frame) * 8 / (w1 - w0))


def frames_carried(samples: Iterable[Sample], window: tuple[float, float], host: str | None) -> float | None:
    """Frames ``host``'s test interfaces sent and received over ``window``
    (what a drop count is a share of); None unless both directions' counters
    cover it."""
    samples = list(samples)
    rates = [wire_rate(samples, direction=d, window=window, host=host) for d in ("tx", "rx")]
    return sum(r.frames for r in rates if r is not None) if all(r is not None for r in rates) else None


def longest_lull(samples: Iterable[Sample], *, direction: str, window: tuple[float, float],
                 host: str | None = None, below: float = 0.01) -> tuple[float, float] | None:
    """The longest stretch of ``window`` made of consecutive interface-counter
    intervals (``if.bytes``) whose byte rate is under ``below`` x the window's
    mean: the host's traffic stopped (a stalled server).  None when nothing is
    that quiet, or when the counters do not cover the window (nothing can be
    told from them)."""
    by = _counter_samples(samples, "if.bytes", direction, host)
    w0, w1 = window
    if w1 <= w0 or not covers(by, w0, w1):
        return None
    floor = below * integrate(by, w0, w1) / (w1 - w0)
    best: tuple[float, float] | None = None
    cur: tuple[float, float] | None = None
    for x in by:
        a, b = max(x.t_start, w0), min(x.t_end, w1)
        if b <= a:
            continue
        if x.value / (x.t_end - x.t_start) <= floor:
            cur = (cur[0], b) if cur else (a, b)
            if best is None or cur[1] - cur[0] > best[1] - best[0]:
                best = cur
        else:
            cur = None
    return best


def directions_in(samples: Iterable[Sample]) -> list[str]:
    # a few, however many samples (by identity: the rule in nicbench.records)
    tag_sets = {id(s.tags): s.tags for s in samples if s.metric == "tcp.bytes"}.values()
    seen = {next((v for k, v in t if k == "direction"), None) for t in tag_sets}
    return [d for d in ("tx", "rx") if d in seen]
