"""Regressions over a plan's history: every point's change points
(``analysis.changepoints``), each tied to what changed between the runs on
either side of it, and judged for CI.

:func:`plan_trend` is the one reading of it every front end shows: ``nicbench
trend --plan NAME`` (text, JSON, ``--check``, ``--junit``) and the
dashboard's trend and plan pages (a page draws ``PointTrend.series`` with
each ``Explained.change`` marked and ``Explained.changes`` annotated at it,
and a plan view colours each point by ``PointTrend.status``).

What changed between two runs: the host facts that differ (``report.facts``:
identity facts left out, and :data:`VOLATILE` facts, which differ between any
two runs), and the run's own settings -- its tuning profile, the traffic
engine and its version, the nicbench that ran it, how it came in (a run or
an import) and whether the plan's text was edited.  Each change is ranked
by how many of the plan's change points it coincides with: a kernel upgrade
under ten points' steps comes before a governor change under one.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from xml.etree import ElementTree

from ..analysis.changepoints import MIN_RUNS, ChangePoint, find
from ..records import HostFacts, RunInfo
from ..store.archive import Archive, RunFilter, TrendRow
from ..store.reader import RunReader
from . import numbers
from .facts import fact_changes, grouped_changes
from .view import Metric

# facts that differ between any two runs of the same host, so are never what
# changed: the clock /proc/cpuinfo reports is the moment's frequency
VOLATILE = re.compile(r"^cpu\.mhz$")
# a change point this many runs from the newest or nearer is "at the newest
# run" for --check: PELT needs two runs on each side to see a step, so a
# regression shows from the second run after it; five runs give a CI job
# that runs once a day most of a week to act before the new level is the
# history it is judged against
RECENT = 5
# the runs a plan's trend reads unless told: PELT is O(n^2) per point (a
# 1,000-run series in ~15 ms), and a regression to gate on is among them
LAST_RUNS = 1000


@dataclass(frozen=True)
class Change:
    """One thing that differs between the run before a change point and the run after it."""

    what: str                     # a fact key, or "tuning profile", "engine", "nicbench", "source", "plan"
    before: str
    after: str
    hosts: tuple[str, ...] = ()   # the hosts it changed on (empty: the run's own setting)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.what, self.before, self.after)

    def text(self) -> str:
        on = f" on {', '.join(self.hosts)}" if self.hosts else ""
        return f"{self.what} {self.before} -> {self.after}{on}"


@dataclass(frozen=True)
class Explained:
    """A change point of one point, with the runs on either side and what differs between them."""

    change: ChangePoint
    run_before: TrendRow          # the last run of the level before
    run_after: TrendRow           # the first run of the new level
    changes: tuple[Change, ...]   # most coinciding across the plan first
    unrecorded: tuple[str, ...]   # runs whose host facts were not recorded (imported runs), said so
    verdicts_before: dict[str, int]   # the point's stored verdicts over the level before: limit -> runs
    verdicts_after: dict[str, int]

    @property
    def nothing_recorded_changed(self) -> bool:
        return not self.changes and not self.unrecorded


@dataclass(frozen=True)
class PointTrend:
    point: str
    series: list[TrendRow]        # every run of the point, oldest first, partial ones included (marked)
    judged: list[TrendRow]        # the runs the detector saw: complete points with a value
    explained: list[Explained]    # its change points, oldest first
    status: str                   # see :func:`_status`
    coincide: dict[tuple[str, str, str], int] = field(default_factory=dict)

    @property
    def flagged(self) -> bool:
        return self.status == "regression"

    @property
    def newest(self) -> Explained | None:
        return self.explained[-1] if self.explained else None


@dataclass(frozen=True)
class PlanTrend:
    metric: Metric
    study: str
    runs: int                     # runs read
    points: list[PointTrend]
    ranking: list[tuple[Change, int]]   # each change once, with how many change points it coincides with
    recent: int
    changepoints: int

    @property
    def flagged(self) -> list[PointTrend]:
        return [p for p in self.points if p.flagged]


def _status(points_rows: list[TrendRow], judged: list[TrendRow], cps: Sequence[ChangePoint], recent: int) -> str:
    """``partial`` (the newest run's figure is its survivors': not judged, as
    today's trend), ``not enough history`` (fewer than two runs per side
    possible), ``regression`` / ``improvement`` (the newest change point is
    one and among the newest ``recent`` runs: the newest run is at the new
    level), ``changed earlier`` (change points, none recent), ``steady``."""
    if points_rows and points_rows[-1].survivors_only:
        return "partial"
    if len(judged) < 2 * MIN_RUNS:
        return "not enough history"
    if cps and cps[-1].index >= len(judged) - recent:
        return cps[-1].direction
    return "changed earlier" if cps else "steady"


class _Runs:
    """The run-level record of the runs on either side of change points, each read once."""

    def __init__(self, archive: Archive):
        self.archive = archive
        self.got: dict[str, tuple[RunInfo, list[HostFacts]]] = {}

    def __call__(self, run_id: str) -> tuple[RunInfo, list[HostFacts]]:
        if run_id not in self.got:
            reader = RunReader(self.archive, self.archive.row(run_id))
            self.got[run_id] = (reader.info(), reader.facts())
        return self.got[run_id]


def _plan_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def run_changes(a: tuple[RunInfo, list[HostFacts]], b: tuple[RunInfo, list[HostFacts]]) -> list[Change]:
    """What differs from run ``a`` to run ``b``: their own settings, then their hosts' facts."""
    (ia, fa), (ib, fb) = a, b
    out: list[Change] = []
    ta, tb = (ia.meta.get("tuning") or {}), (ib.meta.get("tuning") or {})
    own = [("tuning profile", ta.get("profile") if isinstance(ta, dict) else None,
            tb.get("profile") if isinstance(tb, dict) else None),
           ("engine", ia.meta.get("engine"), ib.meta.get("engine")),
           ("engine version", ia.meta.get("engine_version"), ib.meta.get("engine_version")),
           ("nicbench", ia.nicbench_version, ib.nicbench_version),
           ("source", ia.source, ib.source),
           ("plan", _plan_hash(ia.plan_text), _plan_hash(ib.plan_text))]
    for what, va, vb in own:
        if va == vb:
            continue
        if what == "plan":
            out.append(Change("plan text", f"sha256 {va}", f"sha256 {vb}"))
        else:
            out.append(Change(what, str(va or "none"), str(vb or "none")))
    changes = [c for c in fact_changes(fa, fb) if not VOLATILE.match(c[1])]
    out += [Change(g["fact"], g["a"], g["b"], tuple(g["hosts"])) for g in grouped_changes(changes)]
    return out


def _verdicts(rows: Sequence[TrendRow]) -> dict[str, int]:
    return dict(Counter(r.verdict for r in rows if r.verdict).most_common())


def plan_trend(archive: Archive, metric: Metric, study: str, f: RunFilter, *, last_runs: int | None = LAST_RUNS,
               recent: int = RECENT, **find_kw: Any) -> PlanTrend:
    """``metric`` at every point of the runs ``f`` selects (the newest
    ``last_runs``), each point's change points explained, the plan's changes
    ranked, and each point's status for CI (``recent``: see :func:`_status`).
    A partial point (survivors only) is kept in the series, marked, and never
    judged; imported runs are judged like any run, and said when their host
    facts were not recorded."""
    rows = archive.plan_trend(metric.name, RunFilter(**{**f.__dict__, "study": study}), last_runs)
    by_point: dict[str, list[TrendRow]] = {}
    for r in rows:
        by_point.setdefault(r.point, []).append(r)
    runs = _Runs(archive)
    found: list[tuple[str, list[TrendRow], list[TrendRow], list[ChangePoint]]] = []
    for point in sorted(by_point):
        series = by_point[point]
        judged = [r for r in series if r.value is not None and not r.survivors_only and math.isfinite(r.value)]
        cps = find([float(r.value) for r in judged if r.value is not None],
                   higher_is_better=metric.higher_is_better, **find_kw)
        found.append((point, series, judged, cps))
    # what changed at each change point, read once per pair of runs
    pair_changes: dict[tuple[str, str], tuple[list[Change], list[str]]] = {}
    for _point, _series, judged, cps in found:
        for cp in cps:
            a, b = judged[cp.index - 1], judged[cp.index]
            if (a.run_id, b.run_id) in pair_changes:
                continue
            ra, rb = runs(a.run_id), runs(b.run_id)
            unrecorded = [r.run_id + (" (imported)" if r.source != "plan" else "")
                          for r, got in ((a, ra), (b, rb)) if not got[1]]
            pair_changes[(a.run_id, b.run_id)] = (run_changes(ra, rb), unrecorded)
    counts: Counter[tuple[str, str, str]] = Counter()
    first: dict[tuple[str, str, str], Change] = {}
    for _point, _series, judged, cps in found:
        for cp in cps:
            for c in pair_changes[(judged[cp.index - 1].run_id, judged[cp.index].run_id)][0]:
                counts[c.key] += 1
                first.setdefault(c.key, c)
    points = []
    for point, series, judged, cps in found:
        explained = []
        for cp in cps:
            a, b = judged[cp.index - 1], judged[cp.index]
            changes, unrecorded = pair_changes[(a.run_id, b.run_id)]
            ranked = sorted(changes, key=lambda c: -counts[c.key])     # stable: run settings first among equals
            explained.append(Explained(cp, a, b, tuple(ranked), tuple(unrecorded),
                                       _verdicts(judged[cp.before.start:cp.before.end]),
                                       _verdicts(judged[cp.after.start:cp.after.end])))
        points.append(PointTrend(point, series, judged, explained, _status(series, judged, cps, recent)))
    ranking = sorted(((first[k], n) for k, n in counts.items()), key=lambda t: -t[1])
    n_runs = len({r.run_id for r in rows})
    return PlanTrend(metric, study, n_runs, points, ranking, recent, sum(len(p.explained) for p in points))


# ---- what a reader sees ----

def _num(v: float) -> str:
    return numbers.num(v)


def step_text(e: Explained, unit: str) -> str:
    """``-48.2 % (-4.1 Gbit/s: 8.5 [8.3..8.7] over 12 runs -> 4.4 [4.2..4.6] over 3)``."""
    cp = e.change
    pct = "" if cp.step_pct is None else f"{cp.step_pct:+.1f} % "
    b, a = cp.before, cp.after
    return (f"{pct}({'+' if cp.step >= 0 else ''}{_num(cp.step)} {unit}: {_num(b.median)} "
            f"[{_num(b.low)}..{_num(b.high)}] over {b.n} runs -> {_num(a.median)} [{_num(a.low)}..{_num(a.high)}] "
            f"over {a.n})")


def changed_text(e: Explained, limit: int | None = 3) -> str:
    """What changed at the change point, most coinciding first; "nothing
    recorded changed" when so; runs without recorded facts said."""
    parts = [c.text() for c in e.changes]
    if limit is not None and len(parts) > limit:
        parts = parts[:limit] + [f"{len(e.changes) - limit} more"]
    if e.unrecorded:
        parts.append("host facts not recorded for " + ", ".join(e.unrecorded))
    return "; ".join(parts) if parts else "nothing recorded changed"


def _verdict_text(d: dict[str, int]) -> str:
    return ", ".join(f"{k} ({n})" for k, n in d.items()) if d else "not stored"


def summary_text(t: PlanTrend, plan: str, *, width: int = 100) -> str:
    """One screen: the counts, each point with a change point (the flagged
    ones first, their newest change point in full), and the changes ranked."""
    m = t.metric
    by_status = Counter(p.status for p in t.points)
    head = (f"{m.name} ({m.unit}, {'higher' if m.higher_is_better else 'lower'} is better) at {len(t.points)} "
            f"points of plan {plan}, {t.runs} runs: {len(t.flagged)} regressed at the newest run, "
            f"{t.changepoints} change point(s) in all; "
            + ", ".join(f"{n} {s}" for s, n in sorted(by_status.items())))
    lines = [head]
    shown = sorted([p for p in t.points if p.explained], key=lambda p: (not p.flagged, p.point))
    for p in shown[:12]:
        mark = {"regression": "REGRESSED", "improvement": "improved"}.get(p.status, p.status)
        lines.append(f"  {p.point}  [{mark}]  {len(p.explained)} change point(s)")
        for e in p.explained[-2:]:
            lines.append(f"    {e.change.direction} at run {e.run_after.run_id}: {step_text(e, m.unit)}")
            lines.append(f"      changed: {changed_text(e)}"[:width + 40])
            if e.verdicts_before or e.verdicts_after:
                lines.append(f"      verdict: {_verdict_text(e.verdicts_before)} -> {_verdict_text(e.verdicts_after)}")
    if len(shown) > 12:
        lines.append(f"  ... and {len(shown) - 12} more point(s) with change points (--json lists every one)")
    partial = [p.point for p in t.points if p.status == "partial"]
    if partial:
        lines.append(f"  newest run partial (survivors only), not judged: {', '.join(partial[:6])}"
                     + (" ..." if len(partial) > 6 else ""))
    if t.ranking:
        lines.append("what changed at the change points, most coinciding first:")
        for c, n in t.ranking[:6]:
            lines.append(f"  {n} of {t.changepoints}: {c.text()}")
    elif t.changepoints:
        lines.append("nothing recorded changed at any change point")
    return "\n".join(lines)


def as_dict(t: PlanTrend, plan: str) -> dict[str, Any]:
    """Everything, full precision, for --json and the dashboard."""
    def cp(e: Explained) -> dict[str, Any]:
        c = e.change
        return {"run_before": e.run_before.run_id, "run_after": e.run_after.run_id, "index": c.index,
                "direction": c.direction, "step": c.step, "step_pct": c.step_pct, "p_value": c.p_value,
                "before": {**c.before.__dict__, "n": c.before.n}, "after": {**c.after.__dict__, "n": c.after.n},
                "changes": [{"what": x.what, "before": x.before, "after": x.after, "hosts": list(x.hosts)}
                            for x in e.changes],
                "unrecorded": list(e.unrecorded), "nothing_recorded_changed": e.nothing_recorded_changed,
                "verdicts_before": e.verdicts_before, "verdicts_after": e.verdicts_after}
    return {"plan": plan, "study": t.study, "metric": t.metric.name, "unit": t.metric.unit,
            "higher_is_better": t.metric.higher_is_better, "runs": t.runs, "recent": t.recent,
            "flagged": [p.point for p in t.flagged],
            "points": [{"point": p.point, "status": p.status,
                        "series": [{"run_id": r.run_id, "created": r.created, "value": r.value,
                                    "survivors_only": r.survivors_only, "source": r.source, "verdict": r.verdict}
                                   for r in p.series],
                        "change_points": [cp(e) for e in p.explained]} for p in t.points],
            "ranking": [{"what": c.what, "before": c.before, "after": c.after, "hosts": list(c.hosts),
                         "change_points": n} for c, n in t.ranking]}


def junit_xml(t: PlanTrend, plan: str) -> str:
    """JUnit XML: one test case per point; a regression at the newest run is
    a failure saying the step and what changed; a partial newest run or too
    little history is skipped, saying why."""
    m = t.metric
    suite = ElementTree.Element("testsuite", name=f"nicbench trend {plan} {m.name}", tests=str(len(t.points)),
                                failures=str(len(t.flagged)),
                                skipped=str(sum(p.status in ("partial", "not enough history") for p in t.points)))
    for p in t.points:
        case = ElementTree.SubElement(suite, "testcase", classname=f"{plan}.{m.name}", name=p.point)
        e = p.newest
        if p.flagged and e is not None:
            msg = (f"{m.name} {e.change.direction} at run {e.run_after.run_id}: {step_text(e, m.unit)}; "
                   f"changed: {changed_text(e, None)}")
            fail = ElementTree.SubElement(case, "failure", message=msg, type="regression")
            fail.text = (msg + f"\nverdict: {_verdict_text(e.verdicts_before)} -> {_verdict_text(e.verdicts_after)}"
                         f"\nrun before: {e.run_before.run_id}\nrun after: {e.run_after.run_id}")
        elif p.status in ("partial", "not enough history"):
            ElementTree.SubElement(case, "skipped", message=(
                "the newest run's figure is its surviving clients' only: not judged" if p.status == "partial"
                else f"{len(p.judged)} complete runs: a change point needs {2 * MIN_RUNS}"))
        out = ElementTree.SubElement(case, "system-out")
        out.text = "; ".join([p.status, f"{len(p.judged)} runs judged",
                              *(f"{x.change.direction} at {x.run_after.run_id}: {step_text(x, m.unit)}"
                                for x in p.explained)])
    ElementTree.indent(suite)
    return ElementTree.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"
