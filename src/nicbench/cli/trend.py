"""``nicbench trend METRIC --point P``: one figure across runs, and with
``--check`` a CI gate that fails when the latest run regressed.

``nicbench trend --plan NAME [--metric M]`` (no ``--point``): every point of
a plan at once, each point's change points with what changed at them
(``report.regressions``); ``--check`` fails on a regression at the newest
run, ``--junit FILE`` writes one test case per point."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import click

from ..analysis.trend import Verdict, check_series
from ..core.errors import InputError, Regression
from ..registry import VIEWS
from ..report.catalogue import metric_of
from ..report.regressions import LAST_RUNS, RECENT, as_dict, junit_xml, plan_trend, summary_text
from ..report.view import Metric
from ..store.archive import Archive, RunFilter, TrendRow
from ..store.names import shown
from .options import emit, filter_options, json_option, open_archive, pop_filter, store_option


def pick_metric(metric: str, study: str | None,
                has_runs: Callable[[str], bool] = lambda k: True) -> tuple[str, Metric]:
    """The study whose METRIC is meant: the one named, else the only study
    that has it, else the only one of those whose runs in the archive have the
    points asked for (``has_runs``)."""
    found = metric_of(VIEWS, metric, study)
    if not found:
        names = sorted({m.name for k, v in VIEWS.items() if study in (None, k) for m in v.metrics})
        raise InputError(f"no metric {metric!r}" + (f" in the {study} study" if study else ""), where="METRIC",
                         hint=f"metrics: {', '.join(names)}")
    if len({k for k, _ in found}) > 1:
        used = [(k, m) for k, m in found if has_runs(k)]
        if len(used) == 1:
            return used[0]
        raise InputError(f"metric {metric!r} is in several studies ({', '.join(k for k, _ in found)})"
                         + (" with runs at these points" if used else ""), where="METRIC",
                         hint="add --study " + " or --study ".join(k for k, _ in (used or found)))
    return found[0]


def series(rows: list[TrendRow], point: str) -> list[TrendRow]:
    return [r for r in rows if r.point == point]


def verdicts(rows: list[TrendRow], points: tuple[str, ...], m: Metric, window: int,
             tolerance: float) -> dict[str, Verdict]:
    return {p: check_series([r.value for r in series(rows, p)], [r.survivors_only for r in series(rows, p)],
                            window=window, higher_is_better=m.higher_is_better, tolerance=tolerance)
            for p in points}


@click.command("trend")
@click.argument("metric", required=False)
@click.option("--metric", "metric_opt", default=None,
              help="The figure (gbps, cpu_s_per_gb, ...); with --plan and no --point, the study's headline.")
@click.option("--point", "points", multiple=True,
              help="Point key, e.g. rx/c1/io4K (repeatable).  Without it, every point of --plan, with its "
                   "change points and what changed at them.")
@filter_options
@click.option("--last", type=click.IntRange(min=1), default=None,
              help=f"Only the newest N runs (every point of a plan: {LAST_RUNS} unless given).")
@click.option("--check", "do_check", is_flag=True,
              help="Exit 8 when the latest run falls outside the spread of the --window runs before it; with "
                   "a whole plan, when a point's newest change point is a regression among the --recent "
                   "newest runs.")
@click.option("--window", type=click.IntRange(min=1), default=10, show_default=True,
              help="How many earlier runs make the spread (--point).")
@click.option("--tolerance", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Widen the spread by this fraction of its median (0.02 = 2 %%).  Without it, a series of "
                   "pure noise puts the latest run below all N before it 1 time in N+1 (--point).")
@click.option("--recent", type=click.IntRange(min=1), default=RECENT, show_default=True,
              help="A whole plan's --check: a change point among the newest N runs is one at the newest run.")
@click.option("--junit", "junit", type=click.Path(dir_okay=False, writable=True), default=None,
              help="A whole plan: write JUnit XML here, one test case per point (failure: the step and what "
                   "changed).")
@store_option
@json_option
@click.pass_context
def trend(ctx: click.Context, metric: str | None, metric_opt: str | None, points: tuple[str, ...],
          last: int | None, do_check: bool, window: int, tolerance: float, recent: int, junit: str | None,
          store: str | None, **kw: Any) -> None:
    """METRIC (e.g. gbps, mb_s, rx_mpps) at each --point across runs, oldest
    first, with each run's kernel, driver and tags; or, with --plan and no
    --point, every point of the plan: its change points, the run where each
    happened, the step, and what changed between the runs on either side."""
    if metric and metric_opt and metric != metric_opt:
        raise InputError(f"two metrics: {metric!r} and --metric {metric_opt!r}", where="METRIC",
                         hint="give one")
    metric = metric or metric_opt
    if not points:
        f = pop_filter(kw)
        if not f.name:
            raise InputError("no --point and no --plan", where="trend",
                             hint="--point P for one point's runs; --plan NAME for every point of a plan")
        with open_archive(store) as a:
            plan_mode(ctx, a, f, metric, last, do_check, recent, junit)
        return
    if junit:
        raise InputError("--junit is for every point of a plan", where="--junit", hint="drop --point, give --plan")
    if not metric:
        raise InputError("no METRIC", where="METRIC", hint="e.g. nicbench trend gbps --point tx/c1/io64K")
    f = pop_filter(kw)
    with open_archive(store) as a:
        study, m = pick_metric(metric, f.study, lambda k: bool(
            a.trend(metric, points, type(f)(**{**f.__dict__, "study": k}), limit=1)))
        f = type(f)(**{**f.__dict__, "study": study})
        rows = a.trend(metric, points, f, limit=last)
    found = verdicts(rows, points, m, window, tolerance)
    data = {"metric": metric, "unit": m.unit, "study": study, "points": list(points),
            "runs": [{"run_id": r.run_id, "created": r.created, "point": r.point, "value": r.value,
                      "survivors_only": r.survivors_only, "labels": {k: list(v) for k, v in r.labels.items()}}
                     for r in rows],
            "check": {p: v.__dict__ for p, v in found.items()}}
    lines = []
    for p in points:
        lines.append(f"{metric} ({m.unit}) at {p}:")
        for r in series(rows, p):
            when = dt.datetime.fromtimestamp(r.created).strftime("%Y-%m-%d %H:%M")
            val = "-" if r.value is None else repr(r.value)
            if r.survivors_only:
                val += " (partial: survivors only)"
            labels = " ".join(f"{k}={','.join(v)}" for k, v in sorted(r.labels.items()))
            lines.append(f"  {r.run_id}  {when}  {val}  {shown(labels, 120)}")
        if not series(rows, p):
            lines.append("  (no run has this point; nicbench runs lists runs, 'archive summarise' fills figures)")
        v = found[p]
        if v.state == "partial":
            lines.append(f"  latest {v.latest!r} is a partial point (survivors only): not judged against the "
                         "complete points before it")
        elif v.low is not None:
            lines.append(f"  latest {v.latest!r} vs spread {v.low:.6g}..{v.high:.6g} of the {v.history} runs "
                         f"before: {v.state}")
        else:
            lines.append(f"  {v.state} ({v.history} earlier runs)")
    emit(ctx, data, "\n".join(lines))
    flagged = [p for p, v in found.items() if v.flagged]
    if do_check and flagged:
        v = found[flagged[0]]
        raise Regression(f"{metric} at {', '.join(flagged)}: latest {v.latest!r} {m.unit} is outside the spread "
                         f"{v.low:.6g}..{v.high:.6g} of the {v.history} runs before it", where="trend --check",
                         hint="nicbench compare the latest run with one before it to see what changed")


def plan_study(a: Archive, f: RunFilter) -> str:
    """The one study of the runs ``f`` selects (a plan is of one study)."""
    found = a.studies_of(f)
    if not found:
        raise InputError(f"no run of plan {f.name!r}" + (f" in the {f.study} study" if f.study else "")
                         + " matches", where="--plan", hint="nicbench runs lists the runs and their plans")
    if len(found) > 1:
        raise InputError(f"plan {f.name!r} has runs of several studies ({', '.join(found)})", where="--plan",
                         hint="add --study " + " or --study ".join(found))
    return found[0]


def plan_mode(ctx: click.Context, a: Archive, f: RunFilter, metric: str | None, last: int | None, do_check: bool,
              recent: int, junit: str | None) -> None:
    study = plan_study(a, f)
    if metric is None:
        m = VIEWS[study].metrics[0]
    else:
        study, m = pick_metric(metric, study)
    plan = str(f.name)
    t = plan_trend(a, m, study, f, last_runs=last or LAST_RUNS, recent=recent)
    if not t.points:
        raise InputError(f"no run of plan {plan!r} has figures for {m.name}", where="--plan",
                         hint="nicbench archive summarise --stale computes the figures of older runs")
    if junit:
        try:
            with open(junit, "w", encoding="utf-8") as fh:
                fh.write(junit_xml(t, plan))
        except OSError as err:
            raise InputError(f"cannot write the JUnit file: {err.strerror}", where=junit,
                             hint="a writable path") from None
    emit(ctx, as_dict(t, plan), summary_text(t, plan))
    if do_check and t.flagged:
        worst = t.flagged[0]
        e = worst.newest
        assert e is not None
        pct = "" if e.change.step_pct is None else f" {e.change.step_pct:+.1f} %"
        raise Regression(f"{m.name} regressed at the newest run at {len(t.flagged)} of {len(t.points)} points of "
                         f"plan {plan}: {', '.join(p.point for p in t.flagged[:4])}"
                         + (" ..." if len(t.flagged) > 4 else "") + f" ({worst.point}{pct} at run "
                         f"{e.run_after.run_id})", where="trend --check",
                         hint=f"what changed is listed above; nicbench compare {e.run_before.run_id} "
                              f"{e.run_after.run_id} shows the two runs side by side")
