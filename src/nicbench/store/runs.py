"""Run directories of older nicbench: one ``results.sqlite`` per run.

Before the archive (``store/archive.py``), a run was a directory
``<store>/<run_id>/`` holding ``plan.toml``, ``raw/`` and its own
``results.sqlite``.  This module still reads them (``nicbench archive add``
brings them into the archive, read-only) and writes them for the upgrade
tests.  A directory whose database lacks its meta (an import killed half-way)
is listed as damaged, never a crash.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path

from ..core.errors import StoreError
from ..records import Fact, HostFacts, RawOutput, RunInfo, Sample, TrialRecord, TrialSpec
from .names import new_run_id as _new_run_id
from .schema import SCHEMA_VERSION, migrate

DB = "results.sqlite"
REQUIRED_META = ("run_id", "name", "study", "created")


def default_store() -> Path:
    return Path(os.environ.get("NICBENCH_STORE", "nicbench-runs"))


def new_run_id(name: str, now: float | None = None) -> str:
    """A run id made only of safe characters (see ``store.names``)."""
    return _new_run_id(name, now)


def _connect(path: Path, readonly: bool = False) -> sqlite3.Connection:
    try:
        if readonly:
            db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
        else:
            db = sqlite3.connect(str(path), timeout=10)
        db.execute("PRAGMA foreign_keys = ON")
        db.execute("PRAGMA user_version").fetchone()   # fails early on a file that is not SQLite
    except sqlite3.Error as e:
        raise StoreError(f"cannot open result database: {e}", where=str(path),
                         hint="the file is damaged or not a nicbench database") from None
    return db


class RunWriter:
    def __init__(self, run_dir: Path, db: sqlite3.Connection):
        self.run_dir = run_dir
        self.db = db

    @classmethod
    def create(cls, store: Path, info: RunInfo) -> RunWriter:
        run_dir = store / info.run_id
        try:
            (run_dir / "raw").mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            raise StoreError("run directory already exists", where=str(run_dir)) from None
        except OSError as e:
            raise StoreError(f"cannot create run directory: {e}", where=str(run_dir),
                             hint="choose a writable [output] dir or --store") from None
        (run_dir / "plan.toml").write_text(info.plan_text)
        db = _connect(run_dir / DB)
        migrate(db, str(run_dir / DB))
        w = cls(run_dir, db)
        w.set_meta(run_id=info.run_id, name=info.name, study=info.study, created=info.created,
                   source=info.source, nicbench_version=info.nicbench_version, status="running",
                   **{f"meta.{k}": v for k, v in info.meta.items()})
        return w

    def set_meta(self, **items: object) -> None:
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                                [(k, json.dumps(v)) for k, v in items.items()])

    def raw_dir(self, trial_id: str) -> Path:
        d = self.run_dir / "raw" / trial_id
        d.mkdir(parents=True, exist_ok=True)
        return d

    def rel(self, p: Path) -> str:
        return str(Path(p).resolve().relative_to(self.run_dir.resolve()))

    def write_trial(self, rec: TrialRecord, samples: Iterable[Sample], raws: Iterable[RawOutput]) -> None:
        s = rec.spec
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO trials VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                (s.trial_id, s.index, s.study, s.point, s.repeat, s.params_json(), rec.status,
                 rec.started, rec.ended, rec.error, json.dumps(dict(rec.meta), sort_keys=True, default=str)))
            self.db.executemany(
                "INSERT INTO samples VALUES (?,?,?,?,?,?,?)",
                [(x.trial_id, x.metric, x.value, x.unit, x.t_start, x.t_end, json.dumps(dict(x.tags)))
                 for x in samples])
            self._insert_raws(raws)

    def write_facts(self, hosts: Iterable[HostFacts], raws: Iterable[RawOutput] = ()) -> None:
        """Host facts as collected before the first point (one transaction)."""
        with self.db:
            for h in hosts:
                self.db.executemany(
                    "INSERT OR REPLACE INTO facts VALUES (?,?,?,?,?,?,?)",
                    [(h.host, h.role, h.collected, f.key, None if f.value is None else json.dumps(f.value),
                      f.unknown, f.source) for f in h.facts])
            self._insert_raws(raws)

    def write_raws(self, raws: Iterable[RawOutput]) -> None:
        """Raw outputs that belong to the run rather than one trial (a server's log)."""
        with self.db:
            self._insert_raws(raws)

    def _insert_raws(self, raws: Iterable[RawOutput]) -> None:
        self.db.executemany("INSERT INTO raw_outputs VALUES (?,?,?,?,?,?)",
                            [(r.trial_id, r.host, r.role, r.tool, r.stream, r.path) for r in raws])

    def finish(self, status: str, **meta: object) -> None:
        self.set_meta(status=status, finished=time.time(), **meta)
        self.db.close()


class RunReader:
    def __init__(self, run_dir: Path, readonly: bool = False):
        """``readonly``: read the database as it is (no migration written into it)."""
        self.run_dir = run_dir
        path = run_dir / DB
        if not path.exists():
            raise StoreError("no results.sqlite in this directory", where=str(run_dir),
                             hint="nicbench runs lists the runs in the store")
        self.db = _connect(path, readonly)
        if readonly:
            try:
                (have,) = self.db.execute("PRAGMA user_version").fetchone()
            except sqlite3.Error as e:
                raise StoreError(f"cannot read result database: {e}", where=str(path)) from None
            if have > SCHEMA_VERSION:
                raise StoreError(f"result database has schema {have}, this nicbench knows up to {SCHEMA_VERSION}",
                                 where=str(path), hint="upgrade nicbench to read this run")
            self.version = have
        else:
            migrate(self.db, str(path))
            self.version = SCHEMA_VERSION

    def meta(self) -> dict[str, object]:
        try:
            rows = self.db.execute("SELECT key, value FROM meta").fetchall()
        except sqlite3.Error as e:
            raise StoreError(f"run database is damaged: {e}", where=str(self.run_dir)) from None
        out: dict[str, object] = {}
        for k, v in rows:
            try:
                out[k] = json.loads(v)
            except (TypeError, ValueError):
                out[k] = None
        return out

    def damaged(self) -> str | None:
        """Why this run cannot be read as a run (None: it can)."""
        m = self.meta()
        missing = [k for k in REQUIRED_META if m.get(k) is None]
        if missing:
            return f"no {', '.join(missing)} in its meta (written half: an import or run killed early?)"
        return None

    def info(self) -> RunInfo:
        m = self.meta()
        bad = self.damaged()
        if bad:
            raise StoreError(f"damaged run: {bad}", where=str(self.run_dir),
                             hint="its raw files are still there; nicbench runs lists the readable runs")
        return RunInfo(run_id=str(m["run_id"]), name=str(m["name"]), study=str(m["study"]),
                       created=float(m["created"]),  # type: ignore[arg-type]
                       plan_text=(self.run_dir / "plan.toml").read_text()
                       if (self.run_dir / "plan.toml").exists() else "",
                       source=str(m.get("source", "plan")), nicbench_version=str(m.get("nicbench_version")),
                       meta={k[5:]: v for k, v in m.items() if k.startswith("meta.")})

    def trials(self) -> list[TrialRecord]:
        out = []
        for row in self.db.execute(
                "SELECT trial_id, idx, study, point, repeat, params, status, started, ended, error, meta "
                "FROM trials ORDER BY idx"):
            spec = TrialSpec(row[0], row[1], row[2], row[3], row[4], json.loads(row[5]))
            out.append(TrialRecord(spec, row[6], row[7], row[8], row[9], json.loads(row[10])))
        return out

    def samples(self, trial_id: str | None = None, metric: str | None = None) -> list[Sample]:
        q = "SELECT trial_id, metric, value, unit, t_start, t_end, tags FROM samples WHERE 1=1"
        args: list[object] = []
        if trial_id:
            q += " AND trial_id = ?"
            args.append(trial_id)
        if metric:
            q += " AND metric = ?"
            args.append(metric)
        return [Sample(r[0], r[1], r[2], r[3], r[4], r[5], tuple(sorted(json.loads(r[6]).items())))
                for r in self.db.execute(q, args)]

    def facts(self) -> list[HostFacts]:
        """Every host's facts, in the order they were written (empty for runs
        made before facts were recorded)."""
        hosts: dict[str, HostFacts] = {}
        rows: dict[str, list[Fact]] = {}
        if self.version < 2:
            return []
        for host, role, collected, key, value, unknown, source in self.db.execute(
                "SELECT host, role, collected, key, value, unknown, source FROM facts ORDER BY rowid"):
            hosts.setdefault(host, HostFacts(host, role, collected, ()))
            rows.setdefault(host, []).append(
                Fact(key, None if value is None else json.loads(value), unknown, source))
        return [HostFacts(h.host, h.role, h.collected, tuple(rows[h.host])) for h in hosts.values()]

    def raw_outputs(self) -> list[RawOutput]:
        return [RawOutput(*r) for r in self.db.execute(
            "SELECT trial_id, host, role, tool, stream, path FROM raw_outputs")]

    def close(self) -> None:
        self.db.close()


def list_runs(store: Path) -> list[dict[str, object]]:
    """Every run in ``store``, newest first, with its status and counts."""
    out: list[dict[str, object]] = []
    if not store.is_dir():
        return out
    for d in sorted(store.iterdir(), reverse=True):
        if not (d / DB).exists():
            continue
        try:
            r = RunReader(d, readonly=True)
            m = r.meta()
            bad = r.damaged()
            counts = dict(r.db.execute("SELECT status, COUNT(*) FROM trials GROUP BY status").fetchall())
            r.close()
        except (StoreError, sqlite3.Error) as e:
            out.append({"run_id": d.name, "path": str(d), "status": f"unreadable: {e}", "damaged": True})
            continue
        if bad:
            out.append({"run_id": d.name, "path": str(d), "status": f"damaged: {bad}", "damaged": True})
            continue
        out.append({"run_id": d.name, "path": str(d), "name": m.get("name"), "study": m.get("study"),
                    "created": m.get("created"), "status": m.get("status"), "source": m.get("source"),
                    "trials_ok": counts.get("ok", 0), "trials_failed": counts.get("failed", 0)})
    return out


def resolve(store: Path, ref: str) -> Path:
    """A run directory from a path, a run id, a unique id prefix, or ``latest``."""
    p = Path(ref)
    if (p / DB).exists():
        return p
    if ref == "latest":
        runs = [r for r in list_runs(store) if not r.get("damaged")]
        if not runs:
            raise StoreError("the store has no runs", where=str(store), hint="nicbench run PLAN.toml")
        return Path(str(runs[0]["path"]))
    if (store / ref / DB).exists():
        return store / ref
    matches = [d for d in store.iterdir() if d.name.startswith(ref) and (d / DB).exists()] \
        if store.is_dir() else []
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        raise StoreError(f"run id prefix {ref!r} is ambiguous ({len(matches)} runs)", where=str(store),
                         hint="give more of the id; nicbench runs lists them")
    raise StoreError(f"no run {ref!r}", where=str(store),
                     hint="nicbench runs lists the runs; --store picks another store")

