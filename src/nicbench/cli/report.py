"""``nicbench report [RUN]`` and ``nicbench runs``: runs read back from the store."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import click
from rich import box
from rich.table import Table

from ..report.view import load_run
from ..store.runs import list_runs
from ..studies.registry import VIEWS
from .options import emit, json_option, run_dir, store_dir, store_option
from .tables import echo_table


@click.command()
@click.argument("run_ref", metavar="RUN", default="latest")
@store_option
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Directory for the report (default: RUN/report).")
@json_option
@click.pass_context
def report(ctx: click.Context, run_ref: str, store: Path | None, out: Path | None) -> None:
    """Re-render the report of RUN (id, id prefix, path or 'latest') from the store alone."""
    view = load_run(run_dir(store, run_ref), VIEWS)
    sv = VIEWS[view.info.study]
    out = (out or view.run_dir / "report").absolute()
    out.mkdir(parents=True, exist_ok=True)
    index = sv.render(view, out)
    emit(ctx, {"run_id": view.info.run_id, "report": str(index), "points": sv.rows(view)}, f"report: {index}")


@click.command()
@store_option
@json_option
@click.pass_context
def runs(ctx: click.Context, store: Path | None) -> None:
    """List the runs in the store, newest first."""
    rows = list_runs(store_dir(store))
    if ctx.obj.get("json"):
        emit(ctx, rows)
        return
    if not rows:
        click.echo(f"no runs in {store_dir(store)}")
        return
    # the run id is what 'compare' and 'report' take: it is never cut or wrapped; a terminal too
    # narrow for the whole table gets its lines long rather than an id it cannot copy
    t = Table("run id", "name", "study", "created", "status", "ok", "failed", box=box.SIMPLE_HEAD, show_edge=False,
              header_style="bold")
    for r in rows:
        c = r.get("created")
        created = dt.datetime.fromtimestamp(float(c)).strftime("%Y-%m-%d %H:%M") if isinstance(c, (int, float)) \
            else "?"
        t.add_row(str(r["run_id"]), str(r.get("name", "")), str(r.get("study", "")), created,
                  str(r.get("status", "")), str(r.get("trials_ok", "")), str(r.get("trials_failed", "")))
    echo_table(t)
