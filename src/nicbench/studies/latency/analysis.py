"""The latency study's analysis: stored trials -> per-trial round-trip
distributions and per-point statistics.

Pure: reads the records and samples the runner stored, returns frozen
results.  Times are seconds throughout.

- A probe's distribution is its HDR histogram from the trial's meta (exact to
  the ns below 2 us, within 1/1024 above; iperf 2's are upper bounds at its
  100 us bins, and say so).  A trial's figure merges every probe's histogram:
  the RTT distribution between the server and its clients at that point.
- An imported probe (netperf, ``studies/latency/imported.py``) has no
  histogram: only the percentiles, mean, min and max its engine stated
  (bound ``"stated"``).  A trial of one such probe takes them as they are;
  of several, only what combines exactly (the max, the min, the mean weighted
  by transactions), never a percentile of percentiles.  Such points have no
  distribution, so no CDF.
- A point's percentile is the median over its ok repeats of each repeat's
  percentile; its spread is min..max over repeats.  The point's CDF merges
  every ok repeat.
- Under load, the load's achieved Gbps is its receiver-side bytes inside the
  probes' window (the span from the first timed request to the last answer):
  a loaded trial whose load does not cover that window is failed, since its
  latency was not measured under the load it names.
- What the load costs: each loaded point's percentiles over the idle point
  of the same protocol, engine and message size (loaded / idle).  Medians do
  not order reliably idle vs loaded on a busy host (a sleeping engine wakes
  faster on a CPU that never idles: bench/latency_engines.md), so the cost
  is read on p99 and up.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ...analysis.aggregate import covers, frames_carried, integrate
from ...analysis.counters import counters, drops
from ...analysis.cpu import CpuUsage, cpu_usage
from ...analysis.trials import TrialHead, by_point, head, median_of
from ...analysis.verdict import Evidence, Verdict, decide, point_verdict, tool_cores, with_nic
from ...core.errors import NicbenchError
from ...core.histogram import LatencyHistogram
from ...records import Sample, TrialRecord

PERCENTILES: dict[str, float] = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p99.9": 99.9}
LOSS_WARN = 0.001          # a probe losing more than 0.1 % of its requests is said (its percentiles omit them)


@dataclass(frozen=True)
class ProbeResult:
    """One probe (one client host) of one trial."""

    host: str
    histogram: LatencyHistogram | None  # None: an imported probe whose engine stated its figures only
    bound: str                          # "exact", "upper" (iperf 2: each percentile is its bin's upper edge),
                                        # or "stated" (the engine's own percentiles, no distribution: netperf)
    resolution_s: float | None          # the histogram's bin width when coarser than HDR's (iperf 2: 100 us)
    count: int | None                   # answered requests in the window (None: a stated probe that does not say)
    sent: int | None                    # None: not stated (imported probes)
    lost: int | None
    mean: float | None                  # None only for a stated probe whose engine did not print it
    min: float | None
    max: float | None
    window: tuple[float, float] | None  # wall clock: first timed request .. last answer (None: not known)
    percentiles: Mapping[str, float]
    stated: Mapping[str, Any] = field(default_factory=dict)   # the engine's own summary
    stated_rate: float | None = None    # transactions/s as the engine stated it (imported probes)

    @property
    def rate(self) -> float | None:
        """Answered requests per second over the window (or as the engine stated it)."""
        if self.stated_rate is not None:
            return self.stated_rate
        if self.window is None:
            return None
        span = self.window[1] - self.window[0]
        return self.count / span if span > 0 and self.count is not None else None


@dataclass(frozen=True)
class LatencyTrial(TrialHead):
    protocol: str = ""
    engine: str = ""
    message_size: int = 0
    condition: str = ""
    probes: Mapping[str, ProbeResult] = field(default_factory=dict)
    merged: LatencyHistogram | None = None
    percentiles: Mapping[str, float] = field(default_factory=dict)   # over every probe; "max" included
    mean: float | None = None
    min: float | None = None
    window: tuple[float, float] | None = None
    load_gbps: float | None = None       # receiver-side, over the probes' window (loaded points)
    load_bytes: float | None = None
    cpu: CpuUsage | None = None
    warnings: tuple[str, ...] = ()
    verdict: Verdict | None = None       # what the round trips waited on (analysis/verdict.py)

    @property
    def bound(self) -> str:
        return _bound(p.bound for p in self.probes.values())

    @property
    def lost_fraction(self) -> float | None:
        sent = sum(p.sent or 0 for p in self.probes.values())
        return sum(p.lost or 0 for p in self.probes.values()) / sent if sent else None

    @property
    def rate(self) -> float | None:
        """Answered requests per second, mean over the probes."""
        return median_of(p.rate for p in self.probes.values()) if self.probes else None


def _bound(bounds: Iterable[str]) -> str:
    """What a set of figures is: "stated" if any is an engine's stated figure, else "upper" if any is a
    bin's upper edge, else "exact"."""
    got = set(bounds)
    return "stated" if "stated" in got else "upper" if "upper" in got else "exact"


def _opt(v: object) -> float | None:
    return None if v is None else float(v)  # type: ignore[arg-type]


def _percentiles(h: LatencyHistogram, exact_max: float, resolution: float | None = None) -> dict[str, float]:
    """The percentiles of ``h`` and its exact maximum.  ``resolution``: the
    values were recorded at the upper edges of bins that wide (less 1 ns), so
    each percentile is snapped back to its edge (HDR keeps it within 1/1024)."""
    got = h.percentiles(list(PERCENTILES.values()))
    out = {k: got[v] for k, v in PERCENTILES.items()}
    if resolution:       # an upper edge can lie beyond the exact maximum: the maximum bounds it better
        out = {k: min(round(v / resolution) * resolution, exact_max) for k, v in out.items()}
    out["max"] = exact_max
    return out


def probe_result(host: str, rec: Mapping[str, Any], where: str) -> ProbeResult:
    """A probe's stored record -> its result (StoreError if the histogram is damaged)."""
    if rec.get("percentiles_bound") == "stated":
        return _stated_probe(host, rec)
    h = LatencyHistogram.from_json(rec["histogram"], where=where)
    bound = str(rec.get("percentiles_bound") or "exact")
    mx, mn, mean = float(rec["max"]), float(rec["min"]), float(rec["mean"])
    w = rec["window"]
    return ProbeResult(host, h, bound, rec.get("resolution_s"), int(rec["count"]), int(rec.get("sent") or 0),
                       int(rec.get("lost") or 0), mean, mn, mx, (float(w[0]), float(w[1])),
                       _percentiles(h, mx, rec.get("resolution_s") if bound == "upper" else None),
                       dict(rec.get("stated") or {}))


def _stated_probe(host: str, rec: Mapping[str, Any]) -> ProbeResult:
    """An imported probe: the figures its engine stated, seconds (``studies/latency/imported.py``)."""
    pct = {k: float(v) for k, v in (rec.get("percentiles") or {}).items() if k in PERCENTILES}
    if rec.get("max") is not None:
        pct["max"] = float(rec["max"])
    w = rec.get("window")
    count = rec.get("count")
    return ProbeResult(host, None, "stated", None, int(count) if count is not None else None, None, None,
                       _opt(rec.get("mean")), _opt(rec.get("min")),
                       _opt(rec.get("max")), (float(w[0]), float(w[1])) if w else None, pct,
                       dict(rec.get("stated") or {}), _opt(rec.get("rate")))


def _stated_trial(base: dict[str, Any], rec: TrialRecord, probes: dict[str, ProbeResult]) -> LatencyTrial:
    """A trial of imported probes: one probe's stated figures as they are; of
    several, only what combines exactly -- the max, the min, the mean weighted
    by each probe's transactions -- never a percentile of percentiles."""
    rs = list(probes.values())
    problems = [f"probe {h}: no round-trip time stated" for h, r in probes.items()
                if not r.percentiles and r.mean is None and r.min is None]
    if any(r.histogram is not None for r in rs):
        problems.append("stated and measured probes in one trial: their figures cannot be combined")
    if problems:
        return LatencyTrial(**base, status="failed", error="; ".join(problems), problems=tuple(problems))
    if len(rs) == 1:
        pct, mean, mn = dict(rs[0].percentiles), rs[0].mean, rs[0].min
    else:
        maxes, mins = [r.max for r in rs], [r.min for r in rs]
        pct = {"max": max(m for m in maxes if m is not None)} if None not in maxes else {}
        mn = min(m for m in mins if m is not None) if None not in mins else None
        counted = all(r.mean is not None and r.count for r in rs)
        mean = (sum((r.mean or 0.0) * (r.count or 0) for r in rs) / sum(r.count or 0 for r in rs) if counted
                else None)
    return LatencyTrial(**base, status="ok", error=None, probes=probes, percentiles=pct, mean=mean, min=mn,
                        warnings=tuple(rec.meta.get("warnings") or ()))


def load_in_window(samples: Iterable[Sample], window: tuple[float, float]) -> tuple[float, float] | None:
    """(receiver bytes, Gbps) of the load inside ``window``, every direction;
    None unless every load process's intervals cover the window."""
    series: dict[tuple[str | None, str | None, str | None], list[Sample]] = defaultdict(list)
    for s in samples:
        if s.metric == "tcp.bytes" and s.tag("side") == "receiver" and s.tag("omitted", "0") != "1" \
                and s.t_end > s.t_start:
            series[(s.tag("host"), s.tag("proc"), s.tag("direction"))].append(s)
    w0, w1 = window
    if not series or w1 <= w0:
        return None
    total = 0.0
    for v in series.values():
        v.sort(key=lambda x: x.t_start)
        if not covers(v, w0, w1, slack=0.01):
            return None
        total += integrate(v, w0, w1)
    return total, total * 8 / (w1 - w0) / 1e9


def trial_result(rec: TrialRecord, samples: Sequence[Sample], load_ceiling_bps: float | None = None) -> LatencyTrial:
    """One trial; ``load_ceiling_bps``: the most goodput the load's
    directions allow together (its verdict's wire), None when unknown."""
    t = _trial_result(rec, samples)
    if t.status != "ok" or t.window is None:
        return t
    e = evidence(t, samples, load_ceiling_bps, str(rec.meta.get("server") or ""))
    return replace(t, verdict=decide(with_nic(e, samples, rec.meta)))


def evidence(t: LatencyTrial, samples: Sequence[Sample], load_ceiling_bps: float | None, server: str) -> Evidence:
    """What a latency trial measured, for the verdict (analysis/verdict.py):
    what the probes' round trips waited on.  A loaded point's load against
    the link's ceiling (a full link: the probes queue behind it), a CPU, a
    probe or load process at a full core (a probe that spins by design
    aside), requests lost, the kernel's retransmits and the drops.  An idle
    point has no load to fill the link."""
    assert t.window is not None
    c = counters(samples, t.window)
    waiting = str(t.params.get("waiting") or "")
    spins = {"latency-client": f"the probe {waiting}: by design"} if waiting.startswith(("spins", "busy")) else {}
    lost = {f"probe {h}": float(p.lost) for h, p in t.probes.items() if p.lost}
    loaded = t.condition == "loaded"
    return Evidence({"load": t.load_gbps * 1e9} if loaded and t.load_gbps is not None else {},
                    load_ceiling_bps if loaded else None, cpu=t.cpu, tool_cpus=t.tool_cpus,
                    retrans_segs=c.total("tcp.retrans_segs") if c else None,
                    out_segs=c.total("tcp.out_segs") if c else None, drops=drops(c),
                    frames=frames_carried(samples, t.window, server or None),
                    datagram_loss=t.lost_fraction, loss_where=lost, lost_what="requests",
                    tcp=loaded or t.protocol == "tcp", what="goodput",
                    wire_note=None if loaded else "an idle point: the probes alone, no load to fill the link",
                    tool_cores=tool_cores(t.tool_cpus, {}), spinning=spins)


def _trial_result(rec: TrialRecord, samples: Sequence[Sample]) -> LatencyTrial:
    p = rec.spec.params
    base: dict[str, Any] = dict(head(rec), protocol=str(p.get("protocol")), engine=str(p.get("engine")),
                                message_size=int(p.get("message_size") or 0), condition=str(p.get("condition")))
    problems: list[str] = []
    probes: dict[str, ProbeResult] = {}
    if rec.status == "ok":
        for host, pr in sorted((rec.meta.get("probes") or {}).items()):
            try:
                probes[host] = probe_result(host, pr, f"trial {rec.spec.trial_id} probe {host}")
            except (NicbenchError, KeyError, TypeError, ValueError) as e:
                problems.append(f"probe {host}: its stored distribution is unreadable ({e})")
        if not probes and not problems:
            problems.append("no probe results stored")
        for host, r in probes.items():
            if r.count == 0 and not r.stated_rate:
                problems.append(f"probe {host}: no request was answered")
    if rec.status != "ok" or problems:
        return LatencyTrial(**base, status="failed" if rec.status == "ok" else rec.status,
                            error=rec.error or "; ".join(problems), problems=tuple(problems))
    hists = [r.histogram for r in probes.values() if r.histogram is not None]
    if len(hists) < len(probes):
        return _stated_trial(base, rec, probes)
    # a measured probe (probe_result read its histogram) has its window, mean, min and max
    merged = LatencyHistogram.merged(hists)
    wins = [r.window for r in probes.values() if r.window is not None]
    window = (min(w[0] for w in wins), max(w[1] for w in wins))
    warnings = [f"probe {h}: {r.lost} of {r.sent} requests unanswered ({(r.lost or 0) / r.sent * 100:.2f} %): "
                f"the percentiles cover answered requests only" for h, r in probes.items()
                if r.sent and (r.lost or 0) / r.sent > LOSS_WARN]
    load = None
    if base["condition"] == "loaded":
        load = load_in_window(samples, window)
        if load is None or load[0] <= 0:
            problems.append("the load's receiver bytes do not cover the probes' window: this latency was not "
                            "measured under the load")
            return LatencyTrial(**base, status="failed", error="; ".join(problems), problems=tuple(problems),
                                probes=probes)
    cpu = cpu_usage(samples, window)
    maxes = [r.max for r in probes.values() if r.max is not None]
    mins = [r.min for r in probes.values() if r.min is not None]
    weighted = [(r.mean, r.count) for r in probes.values() if r.mean is not None and r.count]
    if len(maxes) < len(probes) or len(mins) < len(probes) or len(weighted) < len(probes):
        # a measured probe's histogram gives all three: a probe without one is not a figure to make 0 of
        problems.append("a measured probe has no mean, min or max")
        return LatencyTrial(**base, status="failed", error="; ".join(problems), problems=tuple(problems),
                            probes=probes)
    return LatencyTrial(**base, status="ok", error=None, probes=probes, merged=merged,
                        percentiles=_percentiles(merged, max(maxes),
                                                 max((r.resolution_s or 0.0 for r in probes.values()
                                                      if r.bound == "upper"), default=None) or None),
                        mean=sum(m * n for m, n in weighted) / sum(n for _, n in weighted),
                        min=min(mins), window=window,
                        load_bytes=load[0] if load else None, load_gbps=load[1] if load else None, cpu=cpu,
                        warnings=tuple(warnings) + tuple(rec.meta.get("warnings") or ()))


@dataclass(frozen=True)
class LatencyPoint:
    point: str
    params: Mapping[str, object]
    n_ok: int
    n_failed: int
    percentiles: Mapping[str, float] = field(default_factory=dict)     # medians over ok repeats
    low: Mapping[str, float] = field(default_factory=dict)             # min over repeats, per percentile
    high: Mapping[str, float] = field(default_factory=dict)            # max over repeats
    mean: float | None = None
    min: float | None = None                                           # over every repeat
    per_host: Mapping[str, Mapping[str, float]] = field(default_factory=dict)   # host -> p50/p99 medians
    rate: float | None = None                                          # answered requests/s per probe, median
    lost_fraction: float | None = None                                 # over every ok repeat
    bound: str = "exact"
    resolution_s: float | None = None
    merged: LatencyHistogram | None = None                             # every ok repeat, every probe
    load_gbps: float | None = None
    load_gbps_low: float | None = None
    load_gbps_high: float | None = None
    cores_busy: float | None = None
    cpu_percent: float | None = None
    tool_cores: Mapping[str, float] = field(default_factory=dict)     # "latency-client" ... -> cores, medians
    idle_point: str | None = None
    vs_idle: Mapping[str, float] = field(default_factory=dict)         # loaded / idle, per percentile
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    verdict: Verdict | None = None       # what the round trips waited on, over the ok repeats

    @property
    def protocol(self) -> str:
        return str(self.params.get("protocol"))

    @property
    def engine(self) -> str:
        return str(self.params.get("engine"))

    @property
    def condition(self) -> str:
        return str(self.params.get("condition"))

    @property
    def message_size(self) -> int:
        v = self.params.get("message_size")
        return int(v) if isinstance(v, (int, float, str)) else 0


def _tool_role(key: str) -> str:
    return key.split(" ", 1)[0]


def point_stats(results: Iterable[LatencyTrial]) -> list[LatencyPoint]:
    out = []
    for point, rs in by_point(results).items():
        ok = [r for r in rs if r.status == "ok" and (r.merged is not None or r.bound == "stated")]
        pct: dict[str, float] = {}
        lo: dict[str, float] = {}
        hi: dict[str, float] = {}
        for k in [*PERCENTILES, "max"]:
            vals = [r.percentiles[k] for r in ok if k in r.percentiles]     # a stated trial may lack some
            if vals:
                pct[k], lo[k], hi[k] = statistics.median(vals), min(vals), max(vals)
        hosts: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for r in ok:
            for h, pr in r.probes.items():
                for k in ("p50", "p99"):
                    if k in pr.percentiles:
                        hosts[h][k].append(pr.percentiles[k])
        sent = sum(pr.sent or 0 for r in ok for pr in r.probes.values())
        lost = sum(pr.lost or 0 for r in ok for pr in r.probes.values())
        loads = [r.load_gbps for r in ok if r.load_gbps is not None]
        cpus = [r.cpu for r in ok if r.cpu is not None]
        roles: dict[str, list[float]] = defaultdict(list)
        for u in cpus:
            per: dict[str, float] = defaultdict(float)
            for key, cores in u.tools.items():
                per[_tool_role(key)] += cores
            for role, cores in per.items():
                roles[role].append(cores)
        res = {pr.resolution_s for r in ok for pr in r.probes.values() if pr.resolution_s}
        hists = [r.merged for r in ok if r.merged is not None]
        out.append(LatencyPoint(
            point, rs[0].params, len(ok), len(rs) - len(ok), pct, lo, hi,
            median_of(r.mean for r in ok), min((r.min for r in ok if r.min is not None), default=None),
            {h: {k: statistics.median(v) for k, v in d.items()} for h, d in sorted(hosts.items())},
            median_of(r.rate for r in ok), lost / sent if sent else None,
            _bound(r.bound for r in ok), max(res) if res else None,
            LatencyHistogram.merged(hists) if hists else None,
            median_of(loads), min(loads, default=None), max(loads, default=None),
            median_of(u.cores_busy for u in cpus), median_of(u.percent_of_machine for u in cpus),
            {k: statistics.median(v) for k, v in sorted(roles.items())},
            errors=tuple(sorted({r.error for r in rs if r.error})),
            warnings=tuple(sorted({w for r in ok for w in r.warnings})),
            verdict=point_verdict([r.verdict for r in ok if r.verdict is not None])))
    return _with_costs(out)


def _with_costs(points: list[LatencyPoint]) -> list[LatencyPoint]:
    """Each loaded point's percentiles over its idle twin's (same protocol, engine, size)."""
    idle = {(p.protocol, p.engine, p.message_size): p for p in points if p.condition == "idle"}
    out = []
    for p in points:
        twin = idle.get((p.protocol, p.engine, p.message_size)) if p.condition == "loaded" else None
        if twin is not None:
            ratios = {k: p.percentiles[k] / twin.percentiles[k] for k in p.percentiles
                      if k in twin.percentiles and twin.percentiles[k] > 0}
            p = replace(p, idle_point=twin.point, vs_idle=ratios, verdict=_costed(p.verdict, ratios, twin.point))
        out.append(p)
    return out


def _costed(v: Verdict | None, ratios: Mapping[str, float], twin: str) -> Verdict | None:
    """A loaded point's verdict with what the load cost beside it: evidence
    when the load filled the link (the probes queued behind it), a check
    otherwise."""
    if v is None or "p99" not in ratios:
        return v
    line = f"what the load cost: p99 {ratios['p99']:.2f}x the idle point's ({twin})"
    return replace(v, evidence=v.evidence + (line,)) if v.limit == "wire" else replace(v, checked=v.checked + (line,))


@dataclass(frozen=True)
class Agreement:
    """Two engines on the same path, protocol, size and condition."""

    protocol: str
    message_size: int
    condition: str
    engine_a: str
    engine_b: str
    ratios: Mapping[str, float]          # b / a for min, p50, mean, p99, p99.9 (medians over repeats)
    bound_b: str                          # "exact" | "upper"


def agreement(points: Sequence[LatencyPoint]) -> list[Agreement]:
    """Every pair of engines measured on the same (protocol, size, condition),
    sockperf (the primary) first: the ratio of each figure, b over a."""
    groups: dict[tuple[str, int, str], list[LatencyPoint]] = defaultdict(list)
    for p in points:
        if p.n_ok:
            groups[(p.protocol, p.message_size, p.condition)].append(p)
    out = []
    for (proto, size, cond), ps in groups.items():
        ps = sorted(ps, key=lambda p: (p.engine != "sockperf", p.engine))
        for a, b in ((ps[0], x) for x in ps[1:]):
            ratios = {k: b.percentiles[k] / a.percentiles[k] for k in ("p50", "p99", "p99.9")
                      if a.percentiles.get(k) and k in b.percentiles}
            if a.mean and b.mean is not None:
                ratios["mean"] = b.mean / a.mean
            if a.min and b.min is not None:
                ratios["min"] = b.min / a.min
            out.append(Agreement(proto, size, cond, a.engine, b.engine, ratios, b.bound))
    return out
