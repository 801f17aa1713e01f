"""The archive: one catalogue of runs (SQLite or PostgreSQL) and the run
directories beside it.

Everything the results side needs is in the catalogue: run info, trials,
samples, host facts, raw outputs (by path and sha256; the files stay in the
run directory), and the per-point figures each study's view computed
(``points``/``point_values``: what ``nicbench trend``, exports and the
dashboard's lists read, so no query over many runs analyses samples).

A run is written as it progresses (:class:`~nicbench.store.writer.RunWriter`):
a crash leaves a visible run whose process is gone, shown as ``aborted``.
Imports and ``archive add`` write invisibly and show the run only when it is
complete.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import InputError, StoreError
from ..records import RunInfo
from .catalogue import SCHEMA_VERSION, migrate, version
from .db import Db, boot_id, machine_name, pid_start
from .location import StoreLocation, parse_store
from .names import is_run_id

POINT_COLS = ("rid", "point", "params", "n_ok", "n_failed", "n_partial", "survivors_only", "verdict")
MARKER = "run.json"            # in a run directory: which run of which archive it is
LABEL_KEYS = ("host", "kernel", "driver", "firmware", "tag")
# a finished run's status as its points make it: all ok, some partial, some failed
RUN_DONE = ("done", "done-with-partial-points", "done-with-failures")


@dataclass(frozen=True)
class RunFilter:
    """What ``nicbench runs``, trends and exports select runs by.  Text
    filters match exactly, or as a glob with ``*``."""

    study: str | None = None
    name: str | None = None
    host: str | None = None
    kernel: str | None = None
    driver: str | None = None
    firmware: str | None = None
    tag: str | None = None
    status: str | None = None
    since: float | None = None        # created at or after (epoch s)
    until: float | None = None        # created before (epoch s)
    run_ids: tuple[str, ...] = ()

    def labels(self) -> list[tuple[str, str]]:
        return [(k, v) for k in LABEL_KEYS if (v := getattr(self, k)) is not None]


@dataclass(frozen=True)
class RunRow:
    """A run as the catalogue lists it."""

    rid: int
    run_id: str
    name: str
    study: str
    source: str
    created: float
    finished: float | None
    heartbeat: float | None
    stored_status: str
    run_dir: str
    machine: str
    boot: str
    pid: int | None
    pid_start: str | None
    trials_total: int | None
    trials_done: int
    trials_ok: int
    trials_failed: int
    headline_metric: str | None
    headline_value: float | None
    headline_point: str | None
    summary_version: str | None
    visible: bool = True
    trials_partial: int = 0           # points that lost some clients (their survivors' data kept)
    labels: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def status(self) -> str:
        """The stored status, except that a run still marked running whose
        process on this machine is gone (killed, crashed, rebooted) is
        ``aborted``.  A run on another machine stays ``running``: its
        heartbeat tells how recently it wrote."""
        if self.stored_status != "running":
            return self.stored_status
        return "aborted" if self.process_gone() else "running"

    def process_gone(self) -> bool:
        if self.machine != machine_name():
            return False
        if self.boot != boot_id():
            return True
        return self.pid is None or pid_start(self.pid) != self.pid_start

    @property
    def hosts(self) -> tuple[str, ...]:
        return self.labels.get("host", ())


@dataclass(frozen=True)
class LeaseRow:
    """A host lease as the archive records it (the lock itself is on the host)."""

    run_id: str
    host: str
    target: str         # where the lock is: the host's ssh destination and file, or a lab namespace's file
    plan: str
    controller: str
    pid: int | None
    since: float
    released: float | None


@dataclass(frozen=True)
class PointSummary:
    """One point of a run as its study's view summarised it: parameters, and
    each metric's value (full precision, in the unit the view declares)."""

    point: str
    params: Mapping[str, Any]
    n_ok: int
    n_failed: int
    values: Mapping[str, float | None]
    n_partial: int = 0                # repeats that lost some clients
    survivors_only: bool = False      # the figure is over the survivors of partial repeats only
    verdict: str | None = None        # the limit that held the point (analysis/verdict.py LIMITS), if any


@dataclass(frozen=True)
class TrendRow:
    run_id: str
    name: str
    created: float
    status: str
    point: str
    value: float | None
    labels: Mapping[str, tuple[str, ...]]
    survivors_only: bool = False      # the value is over the clients that survived, not a complete point
    source: str = "plan"              # how the run came in: plan, import, ...
    verdict: str | None = None        # the point's verdict's limit, where the summary stored one


_RUN_COLS = ("rid, run_id, name, study, source, created, finished, heartbeat, status, run_dir, machine, boot_id, "
             "pid, pid_start, trials_total, trials_done, trials_ok, trials_failed, headline_metric, headline_value, "
             "headline_point, summary_version, visible, trials_partial")


_AGE = re.compile(r"^(\d+)([smhdw])$")
_AGE_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_when(text: str | None, where: str) -> float | None:
    """An ISO 8601 date or time (local time unless it says otherwise), or an
    age like ``7d``/``12h`` before now; epoch seconds."""
    if text is None or not text.strip():
        return None
    m = _AGE.match(text.strip())
    if m:
        return time.time() - int(m.group(1)) * _AGE_S[m.group(2)]
    try:
        return dt.datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise InputError(f"not a date: {text[:40]!r}", where=where,
                         hint="2026-01-31, 2026-01-31T08:00 or an age: 7d, 12h") from None


def _like(pattern: str) -> str:
    """A ``*`` glob as a LIKE pattern (with ``\\`` escaping LIKE's own wildcards)."""
    esc = pattern.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return esc.replace("*", "%")


def _text_match(col: str, value: str, args: list[Any]) -> str:
    if "*" in value:
        args.append(_like(value))
        return f"{col} LIKE ? ESCAPE '\\'"
    args.append(value)
    return f"{col} = ?"


def where_clause(f: RunFilter, alias: str = "r", visible_only: bool = True) -> tuple[str, list[Any]]:
    """SQL for ``f`` over the runs table aliased ``alias``, and its arguments."""
    parts: list[str] = [f"{alias}.visible = 1"] if visible_only else ["1 = 1"]
    args: list[Any] = []
    if f.study:
        parts.append(_text_match(f"{alias}.study", f.study, args))
    if f.name:
        parts.append(_text_match(f"{alias}.name", f.name, args))
    if f.status:
        # a run still marked running may be one whose process is gone: the
        # caller sorts those out (RunRow.status); here both are candidates
        if f.status == "aborted":
            parts.append(f"{alias}.status IN ('aborted', 'running')")
        elif f.status == "partial":
            # any run with a point that lost some clients, whatever else happened in it
            parts.append(f"{alias}.trials_partial > 0")
        else:
            parts.append(_text_match(f"{alias}.status", f.status, args))
    if f.since is not None:
        parts.append(f"{alias}.created >= ?")
        args.append(f.since)
    if f.until is not None:
        parts.append(f"{alias}.created < ?")
        args.append(f.until)
    if f.run_ids:
        parts.append(f"{alias}.run_id IN ({', '.join('?' for _ in f.run_ids)})")
        args.extend(f.run_ids)
    for key, value in f.labels():
        sub: list[Any] = [key]
        cond = _text_match("l.value", value, sub)
        parts.append(f"EXISTS (SELECT 1 FROM labels l WHERE l.rid = {alias}.rid AND l.key = ? AND {cond})")
        args.extend(sub)
    return " AND ".join(parts), args


def _row(t: Sequence[Any], labels: Mapping[str, tuple[str, ...]] | None = None) -> RunRow:
    return RunRow(int(t[0]), t[1], t[2], t[3], t[4], float(t[5]), t[6], t[7], t[8], t[9], t[10], t[11],
                  None if t[12] is None else int(t[12]), t[13], t[14], int(t[15]), int(t[16]), int(t[17]),
                  t[18], t[19], t[20], t[21], bool(t[22]), int(t[23] or 0), labels or {})


def loads(text: str | None, default: Any = None) -> Any:
    """JSON from the catalogue; a damaged value is ``default``, never a crash."""
    if text is None:
        return default
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return default


class Archive:
    """An open catalogue.  Not shared between threads without care: each
    thread of a server opens its own (see ``web``)."""

    def __init__(self, loc: StoreLocation, db: Db):
        self.loc = loc
        self.db = db

    # ---- opening ----
    @classmethod
    def open(cls, spec: StoreLocation | str | Path | None = None, *, create: bool = True) -> Archive:
        """Connect to (and, with ``create``, make or migrate) the archive ``spec``
        names (``--store`` text, a location, or None for the default)."""
        loc = spec if isinstance(spec, StoreLocation) else parse_store(spec)
        if loc.kind == "sqlite" and not create and not Path(loc.target).exists():
            raise StoreError("no archive here yet", where=loc.display,
                             hint="nicbench run or nicbench archive add creates it; --store picks another "
                                  "(nicbench runs --store X lists one)")
        db = Db(loc)
        try:
            migrate(db, create=create)
        except BaseException:
            db.close()
            raise
        return cls(loc, db)

    @property
    def runs_root(self) -> Path:
        return self.loc.runs_root

    @property
    def where(self) -> str:
        return self.loc.display

    def schema_version(self) -> int:
        return version(self.db)

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writing runs (RunWriter in writer.py builds on these) ----
    def insert_run(self, info: RunInfo, run_dir: Path, *, visible: bool, total: int | None,
                   status: str = "running", pid: int | None = None, extra: Mapping[str, Any] | None = None,
                   finished: float | None = None) -> int:
        """The run's row; its rid.  A run id already in the archive is refused."""
        if not is_run_id(info.run_id):
            raise InputError(f"run id {info.run_id!r} is not a safe name", where="run id",
                             hint="letters, digits, '.', '_', '-'")
        if self.db.one("SELECT 1 FROM runs WHERE run_id = ?", (info.run_id,)):
            raise StoreError(f"run {info.run_id} is already in the archive", where=self.where,
                             hint="nicbench runs lists it")
        self.db.execute(
            "INSERT INTO runs (run_id, name, study, source, created, finished, heartbeat, status, visible, "
            "nicbench_version, plan_text, info_meta, extra, run_dir, machine, boot_id, pid, pid_start, "
            "trials_total) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (info.run_id, info.name, info.study, info.source, info.created, finished, time.time(), status,
             1 if visible else 0, info.nicbench_version, info.plan_text,
             json.dumps(dict(info.meta), default=str), json.dumps(dict(extra or {}), default=str), str(run_dir),
             machine_name(), boot_id(), pid, None if pid is None else pid_start(pid), total))
        row = self.db.one("SELECT rid FROM runs WHERE run_id = ?", (info.run_id,))
        assert row is not None
        return int(row[0])

    def add_labels(self, rid: int, labels: Iterable[tuple[str, str]]) -> None:
        rows = sorted({(k, str(v)[:200], rid) for k, v in labels if v not in (None, "")})
        self.db.executemany("INSERT INTO labels (key, value, rid) VALUES (?, ?, ?) ON CONFLICT DO NOTHING", rows)

    def add_tags(self, run_id: str, tags: Sequence[str]) -> None:
        row = self.row(run_id)
        with self.db.transaction():
            self.add_labels(row.rid, [("tag", t) for t in tags])

    def refresh_counts(self, rid: int) -> None:
        self.db.execute(
            "UPDATE runs SET trials_done = (SELECT COUNT(*) FROM trials t WHERE t.rid = runs.rid), "
            "trials_ok = (SELECT COUNT(*) FROM trials t WHERE t.rid = runs.rid AND t.status = 'ok'), "
            "trials_failed = (SELECT COUNT(*) FROM trials t WHERE t.rid = runs.rid AND t.status = 'failed'), "
            "trials_partial = (SELECT COUNT(*) FROM trials t WHERE t.rid = runs.rid AND t.status = 'partial'), "
            "heartbeat = ? WHERE rid = ?", (time.time(), rid))

    def set_status(self, run_id: str, status: str, note: str | None = None) -> None:
        """Mark a run (e.g. ``aborted`` once its process is known gone), with a note in its extras."""
        row = self.row(run_id, include_hidden=True)
        with self.db.transaction():
            extra = loads((self.db.one("SELECT extra FROM runs WHERE rid = ?", (row.rid,)) or ("{}",))[0], {})
            if note:
                extra["status_note"] = note
            self.db.execute("UPDATE runs SET status = ?, extra = ?, finished = COALESCE(finished, ?) WHERE rid = ?",
                            (status, json.dumps(extra, default=str), time.time(), row.rid))

    def delete_run(self, run_id: str) -> None:
        """A run's rows (its directory is the caller's to remove)."""
        with self.db.transaction():
            self.db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))

    # ---- host leases (the locks are on the hosts: hosts/lease.py) ----
    def record_leases(self, run_id: str, plan: str, controller: str, pid: int | None, since: float,
                      targets: Mapping[str, str]) -> None:
        """The hosts ``run_id`` holds leases on: host -> where the lock is."""
        with self.db.transaction():
            self.db.executemany(
                "INSERT INTO host_leases (run_id, host, target, plan, controller, pid, since) "
                "VALUES (?,?,?,?,?,?,?) ON CONFLICT DO NOTHING",
                [(run_id, h, t, plan, controller, pid, since) for h, t in sorted(targets.items())])

    def release_leases(self, run_id: str) -> int:
        """Mark the leases of ``run_id`` released; how many were still held."""
        with self.db.transaction():
            n = self.db.one("SELECT COUNT(*) FROM host_leases WHERE run_id = ? AND released IS NULL", (run_id,))
            self.db.execute("UPDATE host_leases SET released = ? WHERE run_id = ? AND released IS NULL",
                            (time.time(), run_id))
        return int(n[0]) if n else 0

    def held_leases(self) -> list[LeaseRow]:
        """Every lease not released: held by a running run, or left by a killed one."""
        return [LeaseRow(str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4]),
                         None if r[5] is None else int(r[5]), float(r[6]), None if r[7] is None else float(r[7]))
                for r in self.db.query("SELECT run_id, host, target, plan, controller, pid, since, released "
                                       "FROM host_leases WHERE released IS NULL ORDER BY since, run_id, host")]

    def active(self) -> list[tuple[RunRow, list[LeaseRow]]]:
        """Runs still marked running, and runs whose leases are not released,
        each with its held leases, oldest first."""
        leases: dict[str, list[LeaseRow]] = {}
        for lease in self.held_leases():
            leases.setdefault(lease.run_id, []).append(lease)
        ids = {r[0] for r in self.db.query("SELECT run_id FROM runs WHERE status = 'running'")} | set(leases)
        rows = sorted((self.row(i, include_hidden=True) for i in ids), key=lambda r: (r.created, r.run_id))
        return [(r, leases.get(r.run_id, [])) for r in rows]

    # ---- the analysis' decisions (one status per trial, read the same everywhere) ----
    def record_decisions(self, run_id: str, decisions: Sequence[tuple[str, str, str | None]]) -> str:
        """Store the analysis' status and error of each trial, ``(trial_id,
        status, error)``, where they differ from the stored ones, and the
        run's status that follows from them; returns the run's status.

        The runner's own record is kept in the trial's meta (``recorded``) the
        first time it is overridden, and read back from there for the next
        analysis (:class:`~nicbench.store.reader.RunReader`), so a better
        analysis can re-decide an old run; every list, filter, count and
        export reads the decision.  Only a finished run's point-derived status
        (``done``, ``done-with-failures``, ``done-with-partial-points``)
        follows its points; interrupted and aborted runs keep theirs."""
        row = self.row(run_id, include_hidden=True)
        stored = {t: (st, err, m) for t, st, err, m in self.db.query(
            "SELECT trial_id, status, error, meta FROM trials WHERE rid = ?", (row.rid,))}
        with self.db.transaction():
            for trial_id, status, error in decisions:
                have = stored.get(trial_id)
                if have is None or (have[0], have[1]) == (status, error):
                    continue
                meta = loads(have[2], {}) or {}
                meta.setdefault("recorded", {"status": have[0], "error": have[1]})
                if meta["recorded"] == {"status": status, "error": error}:
                    del meta["recorded"]        # a re-analysis agrees with the runner again
                self.db.execute("UPDATE trials SET status = ?, error = ?, meta = ? WHERE rid = ? AND trial_id = ?",
                                (status, error, json.dumps(meta, sort_keys=True, default=str), row.rid, trial_id))
            self.refresh_counts(row.rid)
            status = row.stored_status
            if status in RUN_DONE:
                counts = self.db.one("SELECT trials_failed, trials_partial FROM runs WHERE rid = ?", (row.rid,))
                failed, partial = counts if counts else (0, 0)
                status = RUN_DONE[2] if failed else RUN_DONE[1] if partial else RUN_DONE[0]
                if status != row.stored_status:
                    self.db.execute("UPDATE runs SET status = ? WHERE rid = ?", (status, row.rid))
        return status

    # ---- summaries (what the study's view computed per point) ----
    def write_summary(self, run_id: str, points: Sequence[PointSummary], headline: str | None,
                      version_tag: str) -> None:
        """Replace the run's per-point figures.  ``headline`` names the metric
        the runs list shows (its best value over the complete points; over
        the partial ones, said so, only when no point is complete)."""
        row = self.row(run_id, include_hidden=True)
        best: tuple[float, str] | None = None
        complete = [p for p in points if not p.survivors_only]
        for p in complete or points:
            v = p.values.get(headline) if headline else None
            if v is not None and (best is None or v > best[0]):
                best = (float(v), p.point if complete else f"{p.point}, partial: survivors only")
        with self.db.transaction():
            self.db.execute("DELETE FROM point_values WHERE rid = ?", (row.rid,))
            self.db.execute("DELETE FROM points WHERE rid = ?", (row.rid,))
            self.db.copy_in("points", POINT_COLS,
                            [(row.rid, p.point, json.dumps(dict(p.params), sort_keys=True, default=str), p.n_ok,
                              p.n_failed, p.n_partial, 1 if p.survivors_only else 0, p.verdict) for p in points])
            self.db.copy_in("point_values", ("metric", "point", "rid", "value"),
                            [(m, p.point, row.rid, None if v is None else float(v))
                             for p in points for m, v in p.values.items()])
            self.db.execute("UPDATE runs SET headline_metric = ?, headline_value = ?, headline_point = ?, "
                            "summary_version = ? WHERE rid = ?",
                            (headline, best[0] if best else None, best[1] if best else None, version_tag, row.rid))

    def unsummarised(self, version_tag: str | None = None) -> list[str]:
        """Runs with no summary (or one from another version), oldest first."""
        q = "SELECT run_id FROM runs WHERE visible = 1 AND status <> 'running' AND (summary_version IS NULL"
        args: list[Any] = []
        if version_tag is not None:
            q += " OR summary_version <> ?"
            args.append(version_tag)
        return [r[0] for r in self.db.query(q + ") ORDER BY created", args)]

    # ---- listing and finding ----
    def runs(self, f: RunFilter | None = None, *, limit: int | None = None, offset: int = 0,
             with_labels: bool = True, include_hidden: bool = False) -> list[RunRow]:
        """Runs matching ``f``, newest first (``include_hidden``: also runs still being imported)."""
        f = f or RunFilter()
        where, args = where_clause(f, visible_only=not include_hidden)
        q = f"SELECT {_RUN_COLS} FROM runs r WHERE {where} ORDER BY r.created DESC, r.rid DESC"
        post_aborted = f.status == "aborted"
        if limit is not None and not post_aborted:
            q += " LIMIT ? OFFSET ?"
            args += [limit, offset]
        rows = [_row(t) for t in self.db.query(q, args)]
        if post_aborted:
            rows = [r for r in rows if r.status == "aborted"]
            rows = rows[offset: offset + limit] if limit is not None else rows
        elif f.status == "running":
            rows = [r for r in rows if r.status == "running"]
        return self._with_labels(rows) if with_labels else rows

    def count(self, f: RunFilter | None = None) -> int:
        f = f or RunFilter()
        if f.status in ("aborted", "running"):
            return len(self.runs(f, with_labels=False))
        where, args = where_clause(f)
        row = self.db.one(f"SELECT COUNT(*) FROM runs r WHERE {where}", args)
        return int(row[0]) if row else 0

    def _with_labels(self, rows: list[RunRow]) -> list[RunRow]:
        if not rows:
            return rows
        labels = self.labels_of([r.rid for r in rows])
        return [RunRow(**{**r.__dict__, "labels": labels.get(r.rid, {})}) for r in rows]

    def labels_of(self, rids: Sequence[int], keys: Sequence[str] = LABEL_KEYS) -> dict[int, dict[str, tuple[str, ...]]]:
        """The labels (of ``keys``) of each run."""
        out: dict[int, dict[str, list[str]]] = {}
        kmarks = ", ".join("?" for _ in keys)
        for i in range(0, len(rids), 500):
            chunk = list(rids[i:i + 500])
            for rid, key, value in self.db.query(
                    f"SELECT rid, key, value FROM labels WHERE rid IN ({', '.join('?' for _ in chunk)}) "
                    f"AND key IN ({kmarks}) ORDER BY key, value", [*chunk, *keys]):
                out.setdefault(int(rid), {}).setdefault(key, []).append(value)
        return {rid: {k: tuple(v) for k, v in d.items()} for rid, d in out.items()}

    def row(self, run_id: str, *, include_hidden: bool = False) -> RunRow:
        t = self.db.one(f"SELECT {_RUN_COLS} FROM runs r WHERE run_id = ?" + ("" if include_hidden
                                                                                 else " AND visible = 1"), (run_id,))
        if t is None:
            raise StoreError(f"no run {run_id!r}", where=self.where,
                             hint="nicbench runs lists the runs; --store picks another archive")
        return self._with_labels([_row(t)])[0]

    def resolve(self, ref: str) -> RunRow:
        """A run from its id, a unique id prefix, ``latest``, or its run directory."""
        ref = ref.strip()
        if ref == "latest":
            t = self.db.one(f"SELECT {_RUN_COLS} FROM runs r WHERE visible = 1 ORDER BY created DESC, rid DESC "
                            "LIMIT 1")
            if t is None:
                raise StoreError("the archive has no runs", where=self.where, hint="nicbench run PLAN.toml")
            return self._with_labels([_row(t)])[0]
        marker = Path(ref) / MARKER
        if "/" in ref or Path(ref).is_dir():
            try:
                run_id = str(json.loads(marker.read_text())["run_id"])
            except (OSError, ValueError, KeyError, TypeError):
                raise StoreError("not a run directory of this archive", where=ref,
                                 hint="a run id from 'nicbench runs'; an older run directory is brought in "
                                      "by 'nicbench archive add DIR'") from None
            return self.row(run_id)
        t = self.db.one(f"SELECT {_RUN_COLS} FROM runs r WHERE run_id = ? AND visible = 1", (ref,))
        if t is not None:
            return self._with_labels([_row(t)])[0]
        matches = self.db.query(f"SELECT {_RUN_COLS} FROM runs r WHERE run_id LIKE ? ESCAPE '\\' AND visible = 1 "
                                "LIMIT 2", (_like(ref) + "%",))
        if len(matches) == 1:
            return self._with_labels([_row(matches[0])])[0]
        if len(matches) > 1:
            raise StoreError(f"run id prefix {ref!r} is ambiguous", where=self.where,
                             hint="give more of the id; nicbench runs lists them")
        raise StoreError(f"no run {ref!r}", where=self.where,
                         hint="nicbench runs lists the runs; --store picks another archive")

    # ---- trends and exports (per-point figures only) ----
    def trend(self, metric: str, points: Sequence[str], f: RunFilter | None = None,
              limit: int | None = None) -> list[TrendRow]:
        """``metric`` at each of ``points`` across the runs ``f`` selects, oldest first
        (the newest ``limit`` runs with a value, when given)."""
        f = f or RunFilter()
        where, args = where_clause(f)
        marks = ", ".join("?" for _ in points)
        q = (f"SELECT r.rid, r.run_id, r.name, r.created, r.status, v.point, v.value, p.survivors_only "
             f"FROM point_values v JOIN runs r ON r.rid = v.rid "
             f"LEFT JOIN points p ON p.rid = v.rid AND p.point = v.point "
             f"WHERE v.metric = ? AND v.point IN ({marks}) AND {where} "
             "ORDER BY r.created DESC, r.rid DESC")
        qargs: list[Any] = [metric, *points, *args]
        if limit is not None:
            q += " LIMIT ?"
            qargs.append(limit * max(1, len(points)))
        rows = self.db.query(q, qargs)
        rows.reverse()
        lab = self.labels_of(sorted({int(t[0]) for t in rows}), keys=("kernel", "driver", "firmware", "tag"))
        return [TrendRow(t[1], t[2], float(t[3]), t[4], t[5], t[6], lab.get(int(t[0]), {}), bool(t[7]))
                for t in rows]

    def plan_trend(self, metric: str, f: RunFilter, last_runs: int | None = None) -> list[TrendRow]:
        """``metric`` at every point of the runs ``f`` selects (the newest
        ``last_runs`` of them, when given), oldest first: one query, whatever
        the number of points.  Each row says the run's source and the point's
        stored verdict."""
        where, args = where_clause(f)
        q = (f"SELECT r.rid, r.run_id, r.name, r.created, r.status, v.point, v.value, p.survivors_only, "
             f"r.source, p.verdict FROM point_values v JOIN runs r ON r.rid = v.rid "
             f"LEFT JOIN points p ON p.rid = v.rid AND p.point = v.point WHERE v.metric = ? AND {where}")
        qargs: list[Any] = [metric, *args]
        if last_runs is not None:
            q += (f" AND r.rid IN (SELECT r.rid FROM runs r WHERE {where} "
                  "ORDER BY r.created DESC, r.rid DESC LIMIT ?)")
            qargs += [*args, last_runs]
        rows = self.db.query(q + " ORDER BY r.created, r.rid, v.point", qargs)
        lab = self.labels_of(sorted({int(t[0]) for t in rows}), keys=("kernel", "driver", "firmware", "tag"))
        return [TrendRow(t[1], t[2], float(t[3]), t[4], t[5], t[6], lab.get(int(t[0]), {}), bool(t[7]), t[8], t[9])
                for t in rows]

    def studies_of(self, f: RunFilter) -> list[str]:
        """The studies of the runs ``f`` selects."""
        where, args = where_clause(f)
        return sorted(r[0] for r in self.db.query(f"SELECT DISTINCT r.study FROM runs r WHERE {where}", args))

    def metrics_of(self, study: str | None = None) -> list[str]:
        q = "SELECT DISTINCT v.metric FROM point_values v"
        args: list[Any] = []
        if study:
            q += " JOIN runs r ON r.rid = v.rid WHERE r.study = ?"
            args.append(study)
        return sorted(r[0] for r in self.db.query(q, args))

    def points_of(self, run_id: str) -> list[PointSummary]:
        row = self.row(run_id)
        vals: dict[str, dict[str, float | None]] = {}
        for point, metric, value in self.db.query(
                "SELECT point, metric, value FROM point_values WHERE rid = ?", (row.rid,)):
            vals.setdefault(point, {})[metric] = value
        return [PointSummary(p, loads(params, {}), int(ok), int(bad), vals.get(p, {}), int(part), bool(surv), verdict)
                for p, params, ok, bad, part, surv, verdict in self.db.query(
                    "SELECT point, params, n_ok, n_failed, n_partial, survivors_only, verdict FROM points "
                    "WHERE rid = ? ORDER BY point", (row.rid,))]

    def export_rows(self, f: RunFilter | None = None) -> list[dict[str, Any]]:
        """Tidy rows: one per point of every run ``f`` selects, with the run's id,
        plan, study, status and labels, the point's parameters and metrics."""
        f = f or RunFilter()
        where, args = where_clause(f)
        runs = {int(t[0]): t for t in self.db.query(
            f"SELECT r.rid, r.run_id, r.name, r.study, r.created, r.status FROM runs r WHERE {where}", args)}
        vals: dict[tuple[int, str], dict[str, float | None]] = {}
        for rid, point, metric, value in self.db.query(
                f"SELECT v.rid, v.point, v.metric, v.value FROM point_values v JOIN runs r ON r.rid = v.rid "
                f"WHERE {where}", args):
            vals.setdefault((int(rid), point), {})[metric] = value
        labels = self.labels_of(sorted(runs))
        out = []
        for rid, point, params, n_ok, n_failed, n_partial, surv in self.db.query(
                f"SELECT p.rid, p.point, p.params, p.n_ok, p.n_failed, p.n_partial, p.survivors_only "
                f"FROM points p JOIN runs r ON r.rid = p.rid "
                f"WHERE {where} ORDER BY r.created, r.rid, p.point", args):
            r = runs[int(rid)]
            lab = labels.get(int(rid), {})
            out.append({"run_id": r[1], "plan": r[2], "study": r[3], "created": float(r[4]), "status": r[5],
                        "kernel": ";".join(lab.get("kernel", ())), "driver": ";".join(lab.get("driver", ())),
                        "tags": ";".join(lab.get("tag", ())), "point": point, "n_ok": int(n_ok),
                        "n_failed": int(n_failed), "n_partial": int(n_partial), "survivors_only": bool(surv),
                        "params": loads(params, {}),
                        "metrics": vals.get((int(rid), point), {})})
        return out

    # ---- a crashed writer's leftovers ----
    def stale_runs(self) -> list[RunRow]:
        """Runs (visible or not) still marked running whose process on this machine is gone."""
        rows = [_row(t) for t in self.db.query(f"SELECT {_RUN_COLS} FROM runs r WHERE status = 'running'")]
        return self._with_labels([r for r in rows if r.process_gone()])

    def info_row(self) -> dict[str, Any]:
        n = self.db.one("SELECT COUNT(*), SUM(CASE WHEN visible = 1 THEN 0 ELSE 1 END) FROM runs") or (0, 0)
        return {"store": self.where, "kind": self.loc.kind, "schema": self.schema_version(),
                "schema_known": SCHEMA_VERSION, "runs": int(n[0] or 0), "hidden": int(n[1] or 0),
                "runs_root": str(self.runs_root)}
