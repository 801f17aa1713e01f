"""``nicbench export``: the archive's per-point figures as a tidy table.

One row per point of every selected run: the run's id, plan, study, time,
status, kernel/driver/tags, the point's key and repeat counts, each
parameter in its own column, each metric in its own column, full precision
(CSV and JSON carry the shortest text that reads back as the same double).

``--verdicts`` adds each point's limit (analysis/verdict.py): ``limit``,
``limit_confidence`` and ``verdict`` (its evidence and checks: an object in
JSON, JSON text in CSV and Parquet).  The archive's summaries keep figures
only, so each selected run is analysed from its samples again, as ``nicbench
explain`` does: an analysis per run, hence asked for.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import sys
from pathlib import Path
from typing import Any

import click

from ..core.errors import InputError, NicbenchError
from ..store.archive import Archive
from .options import filter_options, open_archive, pop_filter, store_option

FIXED = ["run_id", "plan", "study", "created", "created_iso", "status", "kernel", "driver", "tags", "point",
         "n_ok", "n_failed", "n_partial", "survivors_only"]
VERDICT = ["limit", "limit_confidence", "verdict"]


def with_verdicts(a: Archive, rows: list[dict[str, Any]]) -> list[str]:
    """Each row's point verdict, its run analysed once from the archive;
    what could not be analysed, one line per run (those rows get none)."""
    # only an export with verdicts pays for the analysis
    from ..registry import VIEWS
    from ..report.view import analyse, read_run

    problems = []
    for run_id in dict.fromkeys(r["run_id"] for r in rows):
        try:
            view = analyse(read_run(Path(), a, run_id), VIEWS)
            verdicts = {str(p.get("point")): p.get("verdict") for p in VIEWS[view.info.study].rows(view)}
        except NicbenchError as e:
            problems.append(f"run {run_id}: no verdicts ({e})")
            verdicts = {}
        for r in rows:
            if r["run_id"] == run_id:
                v = verdicts.get(r["point"])
                r["verdict"] = v
                r["limit"] = v.get("limit") if isinstance(v, dict) else None
                r["limit_confidence"] = v.get("confidence") if isinstance(v, dict) else None
    return problems


def tidy(rows: list[dict[str, Any]]) -> tuple[list[str], list[dict[str, Any]]]:
    """Columns and flat rows: parameters, then metrics, each in its own column
    (a parameter named like a fixed column or a metric gets ``param.``)."""
    params: dict[str, None] = {}
    metrics: dict[str, None] = {}
    for r in rows:
        params.update(dict.fromkeys(r["params"]))
        metrics.update(dict.fromkeys(r["metrics"]))
    taken = set(FIXED) | set(VERDICT) | set(metrics)
    pname = {p: (f"param.{p}" if p in taken else p) for p in params}
    out = []
    for r in rows:
        flat = {k: r[k] for k in FIXED + VERDICT if k in r}
        flat["created_iso"] = dt.datetime.fromtimestamp(r["created"], dt.UTC).isoformat()
        for p, v in r["params"].items():
            flat[pname[p]] = json.dumps(v) if isinstance(v, dict | list) else v
        flat.update(r["metrics"])
        out.append(flat)
    verdicts = VERDICT if rows and "verdict" in rows[0] else []
    return FIXED + verdicts + list(pname.values()) + list(metrics), out


def _column(values: list[Any]) -> Any:
    import pyarrow as pa  # only Parquet exports pay for it (0.3 s)

    kinds = {type(v) for v in values if v is not None}
    if kinds <= {bool}:
        return pa.array(values, pa.bool_())
    if kinds <= {int}:
        return pa.array(values, pa.int64())
    if kinds <= {int, float}:
        return pa.array([None if v is None else float(v) for v in values], pa.float64())
    return pa.array([None if v is None else str(v) for v in values], pa.string())


def write_parquet(cols: list[str], rows: list[dict[str, Any]], out: Path) -> None:
    import pyarrow as pa  # only Parquet exports pay for it
    import pyarrow.parquet as pq

    table = pa.table({c: _column([r.get(c) for r in rows]) for c in cols})
    tmp = out.with_name(out.name + ".tmp")
    pq.write_table(table, tmp)
    tmp.replace(out)          # a reader never sees half a file


@click.command("export")
@click.argument("runs", nargs=-1)
@filter_options
@click.option("--format", "fmt", type=click.Choice(["csv", "json", "parquet"]), default="csv", show_default=True)
@click.option("-o", "--out", type=click.Path(path_type=Path), default=None,
              help="File to write (default: stdout; Parquet needs a file).")
@click.option("--verdicts", is_flag=True,
              help="Also each point's limit and its evidence (as nicbench explain): each run is analysed again.")
@store_option
def export(runs: tuple[str, ...], fmt: str, out: Path | None, store: str | None, verdicts: bool, **kw: Any) -> None:
    """Export the per-point figures of RUNs (ids, prefixes, 'latest'), or of
    every run the filters select, one row per point."""
    f = pop_filter(kw)
    with open_archive(store) as a:
        if runs:
            f = type(f)(**{**f.__dict__, "run_ids": tuple(a.resolve(r).run_id for r in runs)})
        rows = a.export_rows(f)
        for problem in with_verdicts(a, rows) if verdicts else []:
            click.echo(f"warning: {problem}", err=True)
    cols, flat = tidy(rows)
    if fmt != "json":       # one column of text: the verdict's evidence as JSON
        for r in flat:
            if isinstance(r.get("verdict"), dict):
                r["verdict"] = json.dumps(r["verdict"])
    if fmt == "parquet":
        if out is None:
            raise InputError("Parquet is binary: give a file", where="--format parquet", hint="-o points.parquet")
        write_parquet(cols, flat, out)
        return
    if fmt == "json":
        text = json.dumps(flat, indent=1) + "\n"
    else:
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(flat)
        text = buf.getvalue()
    if out is None:
        sys.stdout.write(text)
    else:
        tmp = out.with_name(out.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(out)
