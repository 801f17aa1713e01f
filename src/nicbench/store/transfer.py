"""Runs moving into an archive: a run directory of an older nicbench
(``nicbench archive add``) and a run spooled locally while PostgreSQL was
unreachable (``nicbench archive sync``).

Both are idempotent: every row has a natural key and goes in with ``ON
CONFLICT DO NOTHING``, so a sync repeated after a crash (or a commit whose
acknowledgement was lost) adds no duplicate.  An added run becomes visible
only in the transaction that wrote all of it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import InputError, StoreError
from .archive import POINT_COLS, Archive, RunRow
from .location import StoreLocation
from .runs import DB, RunReader
from .writer import (
    FACT_COLS,
    RAW_COLS,
    SAMPLE_COLS,
    SPOOL,
    TRIAL_COLS,
    _write_marker,
    fact_labels,
    fact_rows,
    read_marker,
    sha256_of,
    trial_row,
)

_STD_META = {"run_id", "name", "study", "created", "source", "nicbench_version", "status"}
_RUN_COPY = ("run_id", "name", "study", "source", "created", "finished", "heartbeat", "status", "visible",
             "nicbench_version", "plan_text", "info_meta", "extra", "run_dir", "machine", "boot_id", "pid",
             "pid_start", "trials_total", "headline_metric", "headline_value", "headline_point", "summary_version")


@dataclass(frozen=True)
class Added:
    run_id: str | None
    path: str
    outcome: str          # "added" | "present" | "damaged: ..."
    trials: int = 0
    samples: int = 0


def legacy_dirs(paths: Sequence[Path]) -> list[Path]:
    """Every run directory of an older nicbench named by ``paths`` (a run
    directory, or a directory holding them such as ./nicbench-runs)."""
    out: list[Path] = []
    for p in paths:
        if (p / DB).exists():
            out.append(p)
        elif p.is_dir():
            out += sorted(d for d in p.iterdir() if (d / DB).exists())
        else:
            raise InputError("not a run directory (no results.sqlite in it or its subdirectories)", where=str(p),
                             hint="give a run directory of an older nicbench, or the folder holding them")
    return out


def add_legacy(archive: Archive, run_dir: Path, tags: Sequence[str] = ()) -> Added:
    """One older run directory into ``archive``, whole or not at all.  Its
    files stay where they are; the archive records their path and sha256."""
    run_dir = run_dir.absolute()
    try:
        r = RunReader(run_dir, readonly=True)
    except StoreError as e:
        return Added(None, str(run_dir), f"damaged: {e.message}")
    try:
        bad = r.damaged()
        if bad:
            return Added(None, str(run_dir), f"damaged: {bad}")
        info = r.info()
        m = r.meta()
        if archive.db.one("SELECT 1 FROM runs WHERE run_id = ?", (info.run_id,)):
            return Added(info.run_id, str(run_dir), "present")
        trials, facts, raws = r.trials(), r.facts(), r.raw_outputs()
        extra = {k: v for k, v in m.items() if k not in _STD_META and not k.startswith("meta.")}
        extra["added_from"] = str(run_dir)
        finished = m.get("finished")
        counted = [0]
        with archive.db.transaction():
            rid = archive.insert_run(info, run_dir, visible=False, total=len(trials), status=str(m.get("status")),
                                     pid=None, extra=extra,
                                     finished=float(finished) if isinstance(finished, int | float) else None)
            archive.db.copy_in("trials", TRIAL_COLS, [trial_row(rid, t) for t in trials])
            archive.db.copy_in("samples", SAMPLE_COLS, _legacy_samples(r, rid, counted))
            archive.db.copy_in("facts", FACT_COLS, fact_rows(rid, facts))
            raw_rows = []
            seen: set[str] = set()
            for i, x in enumerate(raws):
                if x.path in seen:       # the old schema had no key: one row per file
                    continue
                seen.add(x.path)
                sha, size = sha256_of(run_dir / x.path)
                raw_rows.append((rid, x.path, i, x.trial_id, x.host, x.role, x.tool, x.stream, sha, size))
            archive.db.copy_in("raw_outputs", RAW_COLS, raw_rows)
            archive.add_labels(rid, [*fact_labels(facts), *(("tag", t) for t in tags)])
            archive.refresh_counts(rid)
            archive.db.execute("UPDATE runs SET visible = 1 WHERE rid = ?", (rid,))
    finally:
        r.close()
    return Added(info.run_id, str(run_dir), "added", len(trials), counted[0])


def _legacy_samples(r: RunReader, rid: int, counted: list[int]) -> Iterator[tuple[Any, ...]]:
    """An older run's samples as archive rows, streamed: straight from its
    table (tags stay the JSON text they were), numbered per trial in the
    order they were written."""
    seq: dict[str, int] = {}
    cur = r.db.execute("SELECT trial_id, metric, value, unit, t_start, t_end, tags FROM samples ORDER BY rowid")
    while chunk := cur.fetchmany(50000):
        for tid, metric, value, unit, t0, t1, tags in chunk:
            n = seq.get(tid, 0)
            seq[tid] = n + 1
            counted[0] += 1
            yield (rid, tid, n, metric, value, unit, t0, t1, tags)


def spools(runs_root: Path) -> list[Path]:
    """Run directories holding a run spooled while its archive was unreachable."""
    if not runs_root.is_dir():
        return []
    return sorted(d for d in runs_root.iterdir() if (d / SPOOL).exists())


def spooled(run_dir: Path, run_id: str) -> RunRow | None:
    """The run ``run_id`` as the local spool in ``run_dir`` holds it (it went on
    there when its archive went away), or None when it has no spool."""
    path = run_dir / SPOOL
    if not path.is_file():
        return None
    try:
        with Archive.open(StoreLocation("sqlite", str(path), run_dir.parent), create=False) as spool:
            return spool.row(run_id, include_hidden=True)
    except StoreError:
        return None          # a spool that cannot be read is left to 'archive sync' to say so


def _iterate(src: Archive, sql: str, args: Sequence[Any], size: int = 20000) -> Any:
    cur = src.db.execute(sql, args)
    while True:
        chunk = cur.fetchmany(size)
        if not chunk:
            return
        yield from chunk


def push(src: Archive, run_id: str, dest: Archive) -> dict[str, int]:
    """Copy run ``run_id`` from ``src`` into ``dest``: its row takes ``src``'s
    state (the spool holds the newest), every child row goes in once."""
    srow = src.row(run_id, include_hidden=True)
    full = src.db.one(f"SELECT {', '.join(_RUN_COPY)} FROM runs WHERE rid = ?", (srow.rid,))
    assert full is not None
    values = dict(zip(_RUN_COPY, full, strict=True))
    counts: dict[str, int] = {}
    with dest.db.transaction():
        have = dest.db.one("SELECT rid FROM runs WHERE run_id = ?", (run_id,))
        if have is None:
            dest.db.execute(f"INSERT INTO runs ({', '.join(_RUN_COPY)}) VALUES ({', '.join('?' for _ in _RUN_COPY)})",
                            [values[c] for c in _RUN_COPY])
            have = dest.db.one("SELECT rid FROM runs WHERE run_id = ?", (run_id,))
            assert have is not None
        rid = int(have[0])
        upd = [c for c in _RUN_COPY if c not in ("run_id", "created", "machine", "boot_id", "pid", "pid_start")]
        dest.db.execute(f"UPDATE runs SET {', '.join(f'{c} = ?' for c in upd)} WHERE rid = ?",
                        [*(values[c] for c in upd), rid])
        for table, cols in (("trials", TRIAL_COLS), ("samples", SAMPLE_COLS), ("facts", FACT_COLS),
                            ("raw_outputs", RAW_COLS)):
            rows = ((rid, *t) for t in _iterate(src, f"SELECT {', '.join(cols[1:])} FROM {table} WHERE rid = ?",
                                                 (srow.rid,)))
            counts[table] = insert_ignore(dest, table, cols, rows)
        counts["labels"] = insert_ignore(dest, "labels", ("key", "value", "rid"), (
            (k, v, rid) for k, v in src.db.query("SELECT key, value FROM labels WHERE rid = ?", (srow.rid,))))
        pts = src.db.query(f"SELECT {', '.join(POINT_COLS[1:])} FROM points WHERE rid = ?", (srow.rid,))
        if pts:      # the source's summary replaces the destination's
            dest.db.execute("DELETE FROM point_values WHERE rid = ?", (rid,))
            dest.db.execute("DELETE FROM points WHERE rid = ?", (rid,))
            dest.db.copy_in("points", POINT_COLS, [(rid, *p) for p in pts])
            dest.db.copy_in("point_values", ("metric", "point", "rid", "value"), [
                (m, p, rid, v) for m, p, v in src.db.query(
                    "SELECT metric, point, value FROM point_values WHERE rid = ?", (srow.rid,))])
        dest.refresh_counts(rid)
    return counts


def insert_ignore(dest: Archive, table: str, cols: Sequence[str], rows: Any) -> int:
    """Rows not yet in ``table`` (by its key); the number offered."""
    n = 0
    batch: list[tuple[Any, ...]] = []
    db = dest.db
    if db.dialect == "postgresql":
        # COPY into a temporary copy, then one INSERT .. ON CONFLICT: the fast path for many rows
        tmp = f"nb_tmp_{table}"
        db.execute(f"CREATE TEMP TABLE IF NOT EXISTS {tmp} (LIKE {table}) ON COMMIT DROP")
        db.execute(f"TRUNCATE {tmp}")
        rows = list(rows)
        db.copy_in(tmp, cols, rows)
        db.execute(f"INSERT INTO {table} ({', '.join(cols)}) SELECT {', '.join(cols)} FROM {tmp} "
                   "ON CONFLICT DO NOTHING")
        return len(rows)
    sql = f"INSERT INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' for _ in cols)}) ON CONFLICT DO NOTHING"
    for r in rows:
        batch.append(r)
        n += 1
        if len(batch) >= 20000:
            db.executemany(sql, batch)
            batch = []
    db.executemany(sql, batch)
    return n


def sync_spool(run_dir: Path, dest: Archive) -> list[str]:
    """Push every run of ``run_dir``'s spool into ``dest``; then the spool goes
    (only after the destination has as many rows as the spool).  The run ids pushed."""
    spool = Archive.open(StoreLocation("sqlite", str(run_dir / SPOOL), run_dir.parent), create=False)
    pushed = []
    try:
        for row in spool.runs(None, with_labels=False, include_hidden=True):
            push(spool, row.run_id, dest)
            _check_complete(spool, dest, row.run_id)
            pushed.append(row.run_id)
    finally:
        spool.close()
    marker = read_marker(run_dir)
    for suffix in ("", "-wal", "-shm"):
        try:
            os.unlink(run_dir / (SPOOL + suffix))
        except FileNotFoundError:
            pass
    if marker:
        _write_marker(run_dir, dest.loc, str(marker["run_id"]))
    return pushed


def _check_complete(src: Archive, dest: Archive, run_id: str) -> None:
    s, d = src.row(run_id, include_hidden=True), dest.row(run_id, include_hidden=True)
    for table in ("trials", "samples", "facts", "raw_outputs"):
        a = src.db.one(f"SELECT COUNT(*) FROM {table} WHERE rid = ?", (s.rid,))
        b = dest.db.one(f"SELECT COUNT(*) FROM {table} WHERE rid = ?", (d.rid,))
        if a is None or b is None or int(b[0]) < int(a[0]):
            raise StoreError(f"sync of {run_id} left {table} short ({b and b[0]} of {a and a[0]} rows); the spool "
                             "is kept", where=dest.where, hint="run 'nicbench archive sync' again")
