"""``nicbench compare A B``: two runs of the same study, point by point."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from ..analysis.compare import compare
from ..core.errors import InputError
from ..registry import VIEWS
from ..report.compare import write_compare_page
from ..report.facts import fact_changes, grouped_changes
from ..report.numbers import num
from ..report.view import CompareValues, PointMatcher, RunView, StudyView
from .options import STORE_HELP
from .report import load_ref


@click.command("compare")
@click.argument("run_a", metavar="A")
@click.argument("run_b", metavar="B")
@click.option("--store", default=None, metavar="PATH|URL", help=STORE_HELP)
@click.option("--alpha", type=float, default=0.05, show_default=True, help="Significance level of the t-test.")
@click.option("--threshold", type=float, default=0.01, show_default=True,
              help="Smallest relative change worth calling (0.01 = 1 %).")
@click.option("--html", "html", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Also write a page with both runs' figures overlaid into this directory.")
@click.option("--json", "json_", is_flag=True, help="Machine-readable output on stdout.")
@click.pass_context
def compare_cmd(ctx: click.Context, run_a: str, run_b: str, store: str | None, alpha: float, threshold: float,
                html: Path | None, json_: bool) -> None:
    """Compare run B against run A: per point the medians, the factor B/A,
    Welch's t-test over the repeats, a verdict, for every figure the study
    is compared on (the headline first); then the host facts and tuning that
    differ between the runs (the usual explanation), each differing fact once
    with the hosts it differs on."""
    a, b = load_ref(run_a, store), load_ref(run_b, store)
    if a.info.study != b.info.study:
        raise InputError(f"run A is a {a.info.study} study, run B a {b.info.study} study", where="compare",
                         hint="compare runs of the same kind of study")
    view = VIEWS[a.info.study]
    metrics = list(zip(view.compare_values(a), view.compare_values(b), strict=True))
    matched = _matched(view, a, b, metrics)
    if matched:
        # B's points take the names of A's they meet, so each pair is one row (and one place in a figure)
        names = {pb: pa for pa, pb, _ in matched}
        metrics = [(ca, dataclasses.replace(cb, values={names.get(k, k): v for k, v in cb.values.items()}))
                   for ca, cb in metrics]
    if not set(metrics[0][0].values) & set(metrics[0][1].values):
        raise InputError("the runs have no point in common", where="compare",
                         hint="compare runs of the same plan (or the same points)")
    diffs = [(ca, compare(ca.values, cb.values, alpha=alpha, threshold=threshold,
                          higher_is_better=ca.higher_is_better)) for ca, cb in metrics]
    changes = fact_changes(a.facts, b.facts)
    grouped = grouped_changes(changes)
    ta, tb = (a.info.meta.get("tuning") or {}), (b.info.meta.get("tuning") or {})
    tuning = (ta.get("profile"), tb.get("profile")) if ta.get("profile") != tb.get("profile") else None
    page = (write_compare_page(html, a, b, metrics[0], diffs[0][1], grouped, tuning) if html is not None
            else None)
    if json_ or (ctx.obj or {}).get("json"):
        click.echo(
            json.dumps(
                {
                    "a": a.info.run_id,
                    "b": b.info.run_id,
                    # the headline figure, as before; every figure under "metrics"
                    "metric": diffs[0][0].metric,
                    "points": [d.__dict__ for d in diffs[0][1]],
                    "metrics": [{"metric": cv.metric, "higher_is_better": cv.higher_is_better,
                                 "points": [d.__dict__ for d in ds]} for cv, ds in diffs],
                    "facts_changed": [dict(zip(("host", "fact", "a", "b"), c, strict=True)) for c in changes],
                    "facts_differing": grouped,
                    "tuning": tuning,
                    # points met across names (different engines): B's point is listed under A's
                    "matched": [{"a": pa, "b": pb, "note": note} for pa, pb, note in matched],
                    "html": str(page.resolve()) if page else None,
                },
                indent=1,
            )
        )
        return

    con = Console(width=150)
    for pa, pb, note in matched:
        con.print(f"no point of the same name: B's {pb} is compared as A's {pa} ({note})", markup=False)
    for cv, ds in diffs:
        direction = "higher is better" if cv.higher_is_better else "lower is better"
        t = Table(title=f"{cv.metric} ({direction}): B = {b.info.run_id} vs A = {a.info.run_id}",
                  header_style="bold")
        for col in ("point", "A median", "B median", "B/A", "p", "repeats A/B", "verdict"):
            t.add_column(col)
        for d in ds:
            verdict = d.verdict if d.better is None else \
                f"[{'green' if d.better else 'bold red'}]{d.verdict} ({'better' if d.better else 'worse'})[/]"
            t.add_row(d.point, num(d.median_a), num(d.median_b), num(d.factor), num(d.p_value), f"{d.n_a}/{d.n_b}",
                      verdict)
        con.print(t)
    if tuning:
        con.print(f"tuning profile: A {tuning[0]} -> B {tuning[1]}")
    if grouped:
        ft = Table(title="host facts that differ between the runs (each once)", header_style="bold")
        for c in ("fact", "A", "B", "hosts"):
            ft.add_column(c, overflow="fold")
        for g in grouped[:60]:
            ft.add_row(g["fact"], g["a"], g["b"], ", ".join(g["hosts"]))
        con.print(ft)
        if len(grouped) > 60:
            con.print(f"... and {len(grouped) - 60} more (--json lists all)")
    if page is not None:
        con.print(f"compare page: {page.resolve()}")


def _matched(view: StudyView, a: RunView, b: RunView,
             metrics: list[tuple[CompareValues, CompareValues]]) -> list[tuple[str, str, str]]:
    """Pairs of points of other names the study meets across runs that share
    no point by name (``report.view.PointMatcher``), else none: a point of the
    same name is always the one compared."""
    if set(metrics[0][0].values) & set(metrics[0][1].values) or not isinstance(view, PointMatcher):
        return []
    return view.match_points(a, b)
