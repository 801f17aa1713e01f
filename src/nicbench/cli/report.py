"""``nicbench report [RUN]``: a run read back from the archive and rendered."""

from __future__ import annotations

from pathlib import Path

import click

from ..registry import VIEWS
from ..report.view import RunView, load_run
from ..store.archive import MARKER
from ..store.reader import RunReader, open_run_dir
from ..store.runs import DB as LEGACY_DB
from .options import emit, json_option, open_archive, store_option


def load_ref(run_ref: str, store: str | None) -> RunView:
    """A run from a reference: a run directory (an older nicbench's, or one
    of an archive: its run.json names which), or an id, id prefix or
    ``latest`` in the archive ``--store`` names."""
    p = Path(run_ref)
    if (p / LEGACY_DB).exists():
        return load_run(p, VIEWS)
    if store is None and (p / MARKER).exists():
        return load_run(p, VIEWS)
    with open_archive(store) as a:
        row = a.resolve(run_ref)
        return load_run(Path(row.run_dir), VIEWS, a, row.run_id)


@click.command()
@click.argument("run_ref", metavar="RUN", default="latest")
@store_option
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Directory for the report (default: RUN/report).")
@json_option
@click.pass_context
def report(ctx: click.Context, run_ref: str, store: str | None, out: Path | None) -> None:
    """Re-render the report of RUN (id, id prefix, run directory or 'latest') from the archive alone."""
    view = load_ref(run_ref, store)
    sv = VIEWS[view.info.study]
    out = (out or view.run_dir / "report").absolute()
    out.mkdir(parents=True, exist_ok=True)
    index = sv.render(view, out)
    missing, listed = missing_raws(run_ref, store, view)
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        click.echo(f"nicbench: warning: raw files missing from {view.run_dir}: {len(missing)} of {listed} "
                   f"({shown}); the report's figures come from the archive, these raw outputs are lost", err=True)
    emit(ctx, {"run_id": view.info.run_id, "report": str(index), "points": sv.rows(view),
               "missing_raw_files": missing}, f"report: {index}")


def missing_raws(run_ref: str, store: str | None, view: RunView) -> tuple[list[str], int]:
    """The run's raw files its archive lists but its directory lacks, and how
    many it lists (an older run's own database keeps no such list)."""
    p = Path(run_ref)
    if (p / LEGACY_DB).exists():
        return [], 0
    if store is None and (p / MARKER).exists():
        reader = open_run_dir(p)
    else:
        a = open_archive(store)
        reader = RunReader(a, a.resolve(view.info.run_id), owns_archive=True)
    try:
        return reader.missing_raw_files(), len(reader.raw_files())
    finally:
        reader.close()
