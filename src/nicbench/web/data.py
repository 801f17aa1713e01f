"""What the dashboard's pages show, read from the archive (no HTTP here).

Every function takes an open :class:`Archive` and returns plain data for a
template.  Analyses of a run (its study's view over its samples) are cached
by the run's progress, so a live page polled by several browsers analyses
each new point once.
"""

from __future__ import annotations

import math
import re
import shutil
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.trend import check_series
from ..core.errors import InputError, NicbenchError, StoreError
from ..report.catalogue import metric_of
from ..report.compare import compare_runs
from ..report.facts import facts_table, grouped_changes
from ..report.timeline import point_grid
from ..report.view import Metric, RunView, StudyView, analyse, read_stored
from ..store.archive import Archive, RunFilter, RunRow
from ..store.location import StoreLocation
from ..store.names import is_run_id
from ..store.reader import RunReader
from .charts import chart_data
from .svg import Series, chart

PAGE = 50
TREND_TABLE = 200          # rows of a trend's table (the figure has every run)
FILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,120}\.(png|csv|json|html)$")


class Archives:
    """One open archive per server thread (sqlite3 and psycopg connections
    are not shared between threads); a connection that failed is reopened."""

    def __init__(self, loc: StoreLocation):
        self.loc = loc
        self._local = threading.local()

    def get(self) -> Archive:
        a = getattr(self._local, "archive", None)
        if a is None:
            a = Archive.open(self.loc, create=False)
            self._local.archive = a
        return a

    def drop(self) -> None:
        a = getattr(self._local, "archive", None)
        self._local.archive = None
        if a is not None:
            a.close()


class ViewCache:
    """Analysed runs by (run id, points done, status): a finished run is
    analysed once, a live one once per new point."""

    def __init__(self, size: int = 8):
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, int, str], RunView] = OrderedDict()
        self._size = size

    def get(self, archive: Archive, row: RunRow, views: Mapping[str, StudyView]) -> RunView:
        key = (row.run_id, row.trials_done, row.status)
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        view = analyse(read_stored(RunReader(archive, row), Path(row.run_dir)), views)
        with self._lock:
            self._items[key] = view
            while len(self._items) > self._size:
                self._items.popitem(last=False)
        return view


def row_of(archive: Archive, run_id: str) -> RunRow:
    if not is_run_id(run_id):
        raise StoreError("no such run", where="run id", hint="the runs page lists them")
    return archive.row(run_id)


# ---- runs ----
def runs_page(archive: Archive, f: RunFilter, page: int) -> dict[str, Any]:
    total = archive.count(f)
    pages = max(1, math.ceil(total / PAGE))
    page = min(max(1, page), pages)
    rows = archive.runs(f, limit=PAGE, offset=(page - 1) * PAGE)
    return {"rows": rows, "total": total, "page": page, "pages": pages,
            "studies": [r[0] for r in archive.db.query("SELECT DISTINCT study FROM runs ORDER BY study")]}


# ---- one run ----
def _scalar_cols(rows: list[dict[str, Any]]) -> list[str]:
    cols: dict[str, None] = {}
    for r in rows:
        for k, v in r.items():
            if not isinstance(v, dict | list | tuple):
                cols.setdefault(k)
    return list(cols)


def run_context(archive: Archive, row: RunRow, view: RunView, sv: StudyView) -> dict[str, Any]:
    rows = sv.rows(view)
    reader = RunReader(archive, row)
    extra = reader.meta()
    tuning = view.info.meta.get("tuning") if isinstance(view.info.meta.get("tuning"), dict) else None
    warnings = [str(w) for w in view.info.meta.get("warnings") or []]
    for key in ("untune_error", "aborted", "status_note"):
        if extra.get(key):
            warnings.append(f"{key.replace('_', ' ')}: {extra[key]}")
    return {"row": row, "info": view.info, "rows": rows, "cols": _scalar_cols(rows),
            "failures": [t for t in view.trials if t.status not in ("ok", "partial")],
            "partials": [t for t in view.trials if t.status == "partial"],
            "imported": [f for f in view.info.meta.get("imported") or [] if isinstance(f, dict)]
            if row.source == "import" else [],
            "facts": facts_table(list(view.facts), summary=True), "hosts": [h.host for h in view.facts],
            "tuning": tuning, "warnings": warnings, "raws": reader.raw_files(), "link": view.link}


def report_dir(cache_root: Path, row: RunRow, view: RunView, sv: StudyView) -> Path:
    """The study's own report of a finished run, rendered once into the cache."""
    key = f"{row.run_id}/{row.trials_done}-{row.status}"
    out = cache_root / key
    if (out / "index.html").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".render-"))
    try:
        sv.render(view, tmp)
        try:
            tmp.rename(out)
        except OSError:
            if not (out / "index.html").exists():    # another request rendered it meanwhile: fine
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def report_file(directory: Path, name: str) -> Path | None:
    """A file of a rendered report, by plain name only (nothing outside it)."""
    if not FILE_NAME.match(name) or ".." in name:
        return None
    p = directory / name
    return p if p.is_file() and p.resolve().parent == directory.resolve() else None


def raw_path(archive: Archive, row: RunRow, seq: int) -> tuple[Path, dict[str, Any]] | None:
    """A raw output of the run by its number; only a file inside the run's directory."""
    for r in RunReader(archive, row).raw_files():
        if r["seq"] == seq:
            base = Path(row.run_dir).resolve()
            p = (base / r["path"]).resolve()
            if base in p.parents and p.is_file():
                return p, r
            return None
    return None


def _finite(xs: Sequence[float]) -> list[float | None]:
    return [x if math.isfinite(x) else None for x in xs]


def timeline(view: RunView, sv: StudyView, point: str) -> dict[str, Any]:
    """One point's timeline as numbers for the interactive chart: the same
    grid, series and notes as the report's PNG (``report.timeline.point_grid``),
    seconds from the trial's first interval; NaN (a gap) as null."""
    try:
        t, g, notes = point_grid(view, point, sv.timeline_panels)
    except KeyError:
        raise StoreError("no such point in this run", where="point",
                         hint="the run page lists its points") from None
    head = {"point": point, "trial": t.trial_id, "repeat": t.repeat + 1, "status": t.status, "notes": notes}
    if g is None:
        return {**head, "t": [], "panels": [], "windows": []}
    panels = [{"ylabel": p.ylabel, "log": p.log,
               "lines": [{"label": k, "values": _finite(v), "dash": p.styles.get(k) == "--"} for k, v in lines.items()]}
              for p, lines in g.panels]
    several = len({h for h, _, _ in g.cpu}) > 1
    if g.cpu:
        panels.append({"ylabel": "cores busy", "log": False, "stacked": True,
                       "lines": [{"label": state + (f" ({h})" if several else ""), "values": _finite(v),
                                  "dash": False} for h, state, v in g.cpu]})
    if g.counts:
        panels.append({"ylabel": f"per {g.width:.2g} s", "log": False,
                       "lines": [{"label": k, "values": _finite(v), "dash": False} for k, v in g.counts.items()]})
    return {**head, "t": g.edges[:-1], "width": g.width, "panels": panels, "windows": g.windows}


# ---- live ----
@dataclass(frozen=True)
class Live:
    run_id: str
    status: str
    done: int
    total: int | None
    ok: int
    failed: int
    eta_s: float | None
    last: list[str]
    figure: str
    heartbeat: float | None
    partial: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "status": self.status, "done": self.done, "total": self.total, "ok": self.ok,
                "failed": self.failed, "eta_s": self.eta_s, "last": self.last, "figure": self.figure,
                "heartbeat": self.heartbeat, "partial": self.partial}


def live(archive: Archive, row: RunRow, views: Mapping[str, StudyView], cache: ViewCache) -> Live:
    """Where a run is: points done of total, an ETA from the points so far,
    the last results as the study's view words them, the figure so far."""
    sv = views.get(row.study)
    trials = archive.db.query("SELECT trial_id, point, status, error, started, ended FROM trials WHERE rid = ? "
                              "ORDER BY idx", (row.rid,))
    eta = None
    if trials and row.trials_total and row.status == "running":
        span = float(trials[-1][5]) - float(trials[0][4])
        eta = max(0.0, span / len(trials) * (row.trials_total - len(trials)))
    last: list[str] = []
    figure = ""
    if sv is not None and trials:
        view = cache.get(archive, row, views)
        reader = RunReader(archive, row)
        recs = {r.spec.trial_id: r for r in reader.trials()}
        meta = view.info.meta
        for tid, point, status, error, _s, _e in trials[-5:][::-1]:
            rec = recs.get(tid)
            if status == "ok" and rec is not None:
                try:
                    last.append(sv.progress_line(rec, reader.samples(tid), meta))
                except NicbenchError as e:
                    last.append(f"{point}: {e.message}")
            else:
                last.append(f"{point} {status.upper()}: {error or ''}")
        figure = points_figure(view, sv)
    return Live(row.run_id, row.status, row.trials_done, row.trials_total, row.trials_ok, row.trials_failed, eta,
                last, figure, row.heartbeat, row.trials_partial)


def points_figure(view: RunView, sv: StudyView) -> str:
    if not sv.metrics:
        return ""
    m = sv.metrics[0]
    summ = sv.point_summaries(view)
    return chart([p.point for p in summ], [Series(m.name, [p.values.get(m.name) for p in summ])],
                 y_label=f"{m.name} ({m.unit})", title=f"{view.info.name}: {m.label}", bars=True)


# ---- compare ----
def _tuning_rows(view: RunView) -> dict[tuple[str, str], str]:
    t = view.info.meta.get("tuning")
    rows = t.get("rows") if isinstance(t, dict) else None
    out: dict[tuple[str, str], str] = {}
    for r in rows or []:
        if isinstance(r, dict):
            out[(str(r.get("host")), str(r.get("setting")))] = str(r.get("current"))
    return out


def _tuning_changes(a: RunView, b: RunView) -> list[dict[str, Any]]:
    ta, tb = _tuning_rows(a), _tuning_rows(b)
    diffs = [(h, s, ta.get((h, s), "absent"), tb.get((h, s), "absent")) for h, s in sorted(set(ta) | set(tb))
             if ta.get((h, s)) != tb.get((h, s))]
    return grouped_changes(diffs)


# a cell of a run that lacks the point (it is in a third run only)
_ABSENT: dict[str, Any] = {"median": None, "n": 0, "factor": None, "p": None, "verdict": "n/a (in neither run)",
                           "diff": None, "low": None, "high": None, "why": ""}
COMPARE_MAX = 6


def compare_context(archive: Archive, run_ids: Sequence[str], views: Mapping[str, StudyView],
                    cache: ViewCache) -> dict[str, Any]:
    """The first run as the baseline, each other run compared with it as
    ``nicbench compare BASELINE RUN`` compares them (``report.compare``: the
    same pairing, the same numbers), on the headline figure: per point the
    factor, Welch's test and the difference of the means with its interval;
    and the study's own figures with one line per run and series."""
    if not 2 <= len(run_ids) <= COMPARE_MAX:
        raise InputError(f"compare two to {COMPARE_MAX} runs (got {len(run_ids)})", where="run",
                         hint="tick two to six runs on the runs page")
    rows = [row_of(archive, r) for r in run_ids]
    studies = {r.study for r in rows}
    if len(studies) > 1:
        raise InputError(f"runs of different studies ({', '.join(sorted(studies))})", where="compare",
                         hint="compare runs of one study")
    sv = views.get(rows[0].study)
    if sv is None:
        raise StoreError(f"no view for study {rows[0].study!r}", where="compare")
    vs = [cache.get(archive, r, views) for r in rows]
    cmps = [compare_runs(sv, vs[0], v) for v in vs[1:]]
    heads = [c.figures[0] for c in cmps]             # the headline figure, as `nicbench compare` leads with
    diffs = [{d.point: d for d in h.diffs} for h in heads]
    intervals = [h.intervals() for h in heads]
    points = list(dict.fromkeys(p for h in heads for p in (d.point for d in h.diffs)))
    table = []
    for p in points:
        base = next(ds[p] for ds in diffs if p in ds)
        # the baseline's own cell: its median and repeats, nothing to compare with
        cells: list[dict[str, Any]] = [{**_ABSENT, "median": base.median_a, "n": base.n_a, "verdict": ""}]
        for ds, iv in zip(diffs, intervals, strict=True):
            d = ds.get(p)
            i = iv.get(p)
            cells.append(dict(_ABSENT) if d is None else
                         {"median": d.median_b, "n": d.n_b, "factor": d.factor, "p": d.p_value, "verdict": d.verdict,
                          "diff": i.diff if i else None, "low": i.low if i else None, "high": i.high if i else None,
                          "why": i.why if i else ""})
        table.append({"point": p, "cells": cells})
    charts = chart_data(sv.charts, [(r.run_id, sv.rows(v)) for r, v in zip(rows, vs, strict=True)])
    facts = [{"run": r.run_id, "changes": c.facts_differing, "tuning": _tuning_changes(vs[0], v)}
             for r, v, c in zip(rows[1:], vs[1:], cmps, strict=True)]
    matched = [{"run": r.run_id, "a": pa, "b": pb, "note": note}
               for r, c in zip(rows[1:], cmps, strict=True) for pa, pb, note in c.matched]
    return {"rows": rows, "metric": heads[0].metric, "table": table, "charts": charts, "facts": facts,
            "matched": matched,
            "profiles": [(r.run_id, (v.info.meta.get("tuning") or {}).get("profile")) for r, v in
                         zip(rows, vs, strict=True)]}


# ---- trend ----
def trend_context(archive: Archive, views: Mapping[str, StudyView], metric: str, point: str, f: RunFilter,
                  window: int, tolerance: float, last: int | None) -> dict[str, Any]:
    found = metric_of(views, metric, f.study)
    if not found:
        raise InputError(f"no metric {metric!r}", where="metric", hint="pick one from the list")
    study, m = found[0]
    f = RunFilter(**{**f.__dict__, "study": study})
    rows = archive.trend(metric, [point], f, limit=last)
    values = [r.value for r in rows]
    verdict = check_series(values, [r.survivors_only for r in rows], window=window,
                           higher_is_better=m.higher_is_better, tolerance=tolerance)
    flags = [False] * len(rows)
    if verdict.flagged and rows:
        flags[-1] = True
    band = (verdict.low, verdict.high) if verdict.low is not None and verdict.high is not None else None
    labels = [time.strftime("%m-%d %H:%M", time.localtime(r.created)) for r in rows]
    figure = chart(labels, [Series(f"{metric} at {point}", values, flags, [r.survivors_only for r in rows])],
                   y_label=f"{metric} ({m.unit})", title=f"{study}: {m.label}, {point}", band=band) if rows else ""
    return {"metric": m, "study": study, "point": point, "rows": rows[-TREND_TABLE:][::-1], "n": len(rows),
            "verdict": verdict, "figure": figure, "window": window, "tolerance": tolerance}


def trend_choices(archive: Archive, views: Mapping[str, StudyView], study: str | None,
                  metric: str | None) -> dict[str, Any]:
    """What the trend form offers: metrics per study, and the points stored for one."""
    metrics: list[tuple[str, Metric]] = [(k, m) for k, v in views.items() if study in (None, k) for m in v.metrics]
    points: list[str] = []
    if metric:
        # the points of the study's recent runs (a DISTINCT over every run's values reads them all)
        studies = [k for k, m in metrics if m.name == metric]
        points = [r[0] for r in archive.db.query(
            "SELECT DISTINCT p.point FROM points p WHERE p.rid IN (SELECT rid FROM runs WHERE visible = 1 AND "
            f"study IN ({', '.join('?' for _ in studies)}) ORDER BY created DESC LIMIT 50) ORDER BY p.point",
            studies)] if studies else []
    return {"metrics": metrics, "points": points}


def stale_note(row: RunRow) -> str | None:
    """For a run still marked running on another machine: how long it has been silent."""
    if row.status != "running" or row.heartbeat is None:
        return None
    age = time.time() - row.heartbeat
    return f"last heard from {age:.0f} s ago" if age > 60 else None
