"""``nicbench archive``: bring older run directories in, push runs spooled
while PostgreSQL was away, (re)compute the per-point figures, tag runs."""

from __future__ import annotations

from pathlib import Path

import click

from ..core.errors import InputError, StoreError
from ..registry import VIEWS
from ..report.catalogue import SUMMARY_VERSION, summarise
from ..store.transfer import add_legacy, legacy_dirs, spools, sync_spool
from .options import check_tags, emit, json_option, open_archive, store_option


@click.group("archive")
def archive() -> None:
    """The archive: one catalogue of every run (SQLite by default, or PostgreSQL)."""


@archive.command("add")
@click.argument("dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--tag", "tags", multiple=True, callback=check_tags, help="Tag every added run (repeatable).")
@store_option
@json_option
@click.pass_context
def add(ctx: click.Context, dirs: tuple[Path, ...], tags: tuple[str, ...], store: str | None) -> None:
    """Bring run directories of an older nicbench (DIR with a results.sqlite,
    or a folder of them such as ./nicbench-runs) into the archive.  Each run
    goes in whole or not at all; its files stay where they are, recorded by
    path and sha256.  Adding a run twice adds it once."""
    found = legacy_dirs(list(dirs))
    if not found:
        raise InputError("no run directories found", where=" ".join(map(str, dirs)),
                         hint="a run directory holds results.sqlite")
    results = []
    with open_archive(store, create=True) as a:
        for d in found:
            r = add_legacy(a, d, tags)
            if r.outcome == "added" and r.run_id:
                summarise(a, r.run_id, VIEWS)
            results.append(r)
    damaged = [r for r in results if r.outcome.startswith("damaged")]
    lines = [f"{r.outcome}: {r.run_id or r.path}" + (f" ({r.trials} trials, {r.samples} samples)"
                                                       if r.outcome == "added" else "") for r in results]
    emit(ctx, [r.__dict__ for r in results], "\n".join(lines))
    if damaged:
        raise StoreError(f"{len(damaged)} of {len(results)} run directories are damaged and were not added "
                         "(the others were)", where=", ".join(r.path for r in damaged[:3]),
                         hint="their raw files are untouched; see the lines above")


@archive.command("sync")
@click.argument("dirs", nargs=-1, type=click.Path(path_type=Path))
@store_option
@json_option
@click.pass_context
def sync(ctx: click.Context, dirs: tuple[Path, ...], store: str | None) -> None:
    """Push runs that went on into a local spool while the archive
    (PostgreSQL) was unreachable.  Without DIRs, every spool under the
    archive's run directories.  Repeating it adds nothing twice."""
    with open_archive(store, create=True) as a:
        todo = [Path(d) for d in dirs] if dirs else spools(a.runs_root)
        pushed: list[str] = []
        for d in todo:
            got = sync_spool(d, a)
            for run_id in got:
                summarise(a, run_id, VIEWS)
            pushed += got
    emit(ctx, {"pushed": pushed}, "\n".join(f"pushed {r}" for r in pushed) or "nothing to sync")


@archive.command("summarise")
@click.argument("runs", nargs=-1)
@click.option("--stale", is_flag=True, help="Every finished run without figures from this nicbench.")
@store_option
@json_option
@click.pass_context
def summarise_cmd(ctx: click.Context, runs: tuple[str, ...], stale: bool, store: str | None) -> None:
    """(Re)compute the per-point figures of RUNs (what trends and exports read)."""
    with open_archive(store) as a:
        ids = [a.resolve(r).run_id for r in runs] if runs else a.unsummarised(SUMMARY_VERSION if stale else None)
        for run_id in ids:
            summarise(a, run_id, VIEWS)
    emit(ctx, {"summarised": ids}, f"summarised {len(ids)} run(s)")


@archive.command("tag")
@click.argument("run_ref", metavar="RUN")
@click.argument("tags", nargs=-1, required=True, callback=check_tags)
@store_option
@json_option
@click.pass_context
def tag(ctx: click.Context, run_ref: str, tags: tuple[str, ...], store: str | None) -> None:
    """Tag RUN (e.g. with the driver build it tested)."""
    with open_archive(store) as a:
        row = a.resolve(run_ref)
        a.add_tags(row.run_id, tags)
    emit(ctx, {"run_id": row.run_id, "tags": list(tags)}, f"tagged {row.run_id}: {', '.join(tags)}")


@archive.command("info")
@store_option
@json_option
@click.pass_context
def info(ctx: click.Context, store: str | None) -> None:
    """Where the archive is, its schema, how many runs."""
    with open_archive(store) as a:
        d = a.info_row()
    emit(ctx, d, "\n".join(f"{k}: {v}" for k, v in d.items()))
