"""``nicbench compare A B``: two runs of the same study, point by point."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..core.errors import InputError
from ..registry import VIEWS
from ..report.compare import Comparison, compare_runs, write_compare_page
from ..report.numbers import num
from ..report.view import RunView
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
    cmp = compare_runs(VIEWS[a.info.study], a, b, alpha=alpha, threshold=threshold)
    if not cmp.shared:
        raise InputError("the runs have no point in common", where="compare",
                         hint="compare runs of the same plan (or the same points)")
    page = write_compare_page(html, a, b, cmp) if html is not None else None
    if json_ or (ctx.obj or {}).get("json"):
        click.echo(json.dumps(comparison_json(a, b, cmp, page), indent=1))
        return

    con = Console(width=150)
    for pa, pb, note in cmp.matched:
        con.print(f"no point of the same name: B's {pb} is compared as A's {pa} ({note})", markup=False)
    for fig in cmp.figures:
        direction = "higher is better" if fig.higher_is_better else "lower is better"
        t = Table(title=f"{fig.metric} ({direction}): B = {b.info.run_id} vs A = {a.info.run_id}",
                  header_style="bold")
        for col in ("point", "A median", "B median", "B/A", "p", "repeats A/B", "verdict"):
            t.add_column(col)
        for d in fig.diffs:
            verdict = d.verdict if d.better is None else \
                f"[{'green' if d.better else 'bold red'}]{d.verdict} ({'better' if d.better else 'worse'})[/]"
            t.add_row(d.point, num(d.median_a), num(d.median_b), num(d.factor), num(d.p_value), f"{d.n_a}/{d.n_b}",
                      verdict)
        con.print(t)
    if cmp.tuning:
        con.print(f"tuning profile: A {cmp.tuning[0]} -> B {cmp.tuning[1]}")
    grouped = cmp.facts_differing
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


def comparison_json(a: RunView, b: RunView, cmp: Comparison, page: Path | None) -> dict[str, Any]:
    """What ``--json`` prints: every figure's pairs at full precision."""
    head = cmp.figures[0]
    return {
        "a": a.info.run_id,
        "b": b.info.run_id,
        # the headline figure, as before; every figure under "metrics"
        "metric": head.metric,
        "points": [asdict(d) for d in head.diffs],
        "metrics": [{"metric": f.metric, "higher_is_better": f.higher_is_better,
                     "points": [asdict(d) for d in f.diffs]} for f in cmp.figures],
        "facts_changed": [dict(zip(("host", "fact", "a", "b"), c, strict=True)) for c in cmp.facts_changed],
        "facts_differing": cmp.facts_differing,
        "tuning": cmp.tuning,
        # points met across names (different engines): B's point is listed under A's
        "matched": [{"a": pa, "b": pb, "note": note} for pa, pb, note in cmp.matched],
        "html": str(page.resolve()) if page else None,
    }
