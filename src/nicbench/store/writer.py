"""Writing one run into the archive as it progresses.

The session (and ``import``) hold a :class:`RunWriter`: the run's row is
written when it starts, every finished trial is committed on its own (with
its samples and raw outputs), and ``finish`` records how it ended.  The run
directory keeps ``plan.toml``, ``raw/`` and ``run.json`` (which archive and
run it belongs to).

Two failures are handled here rather than passed up as a lost run:

- **PostgreSQL unreachable mid-run**: the writer switches to a local SQLite
  archive in the run directory (``spool.sqlite``, same schema), replays the
  run's header there and goes on; ``nicbench archive sync`` pushes it later.
  Every row has a natural key (run id + trial id + sequence), so a commit
  whose acknowledgement was lost and is written again lands once.
- **Run directory deleted mid-run**: the next write notices (its
  ``run.json`` is gone), the trial in flight is not recorded (its raw outputs
  went with the directory: no row points at nothing), the run is marked
  ``aborted`` and a :class:`StoreError` names the directory.
- **Disk full**: the trial in flight is rolled back, the finished ones stay
  (SQLite and PostgreSQL commit whole transactions), the run is marked
  ``aborted`` if one more small write still fits (else readers see a run whose
  process is gone: ``aborted`` too), and :class:`StoreFull` names the path and
  the space needed.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from operator import attrgetter
from pathlib import Path
from typing import Any

from ..core.errors import StoreError
from ..records import HostFacts, RawOutput, RunInfo, Sample, Tags, TrialRecord
from .archive import MARKER, Archive, loads
from .db import StoreFull, StoreUnavailable, full_error
from .location import StoreLocation, redact

SPOOL = "spool.sqlite"
RESERVE = ".space-reserve"
RESERVE_BYTES = 256 * 1024     # freed when the disk fills, so the run can still be marked aborted


def sha256_of(path: Path) -> tuple[str | None, int | None]:
    """The file's sha256 and size; (None, None) when it is missing."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest(), path.stat().st_size
    except OSError:
        return None, None


def strip_password(url: str) -> str:
    """A URL safe to write into a run directory: libpq finds the password in
    PGPASSWORD or ~/.pgpass when it is needed."""
    return redact(url).replace(":***@", "@")


def fact_labels(hosts: Iterable[HostFacts]) -> list[tuple[str, str]]:
    """The (key, value) pairs a run is found by, from its hosts' facts."""
    out: list[tuple[str, str]] = []
    for h in hosts:
        if h.host != "machine":
            out.append(("host", h.host))
        for f in h.facts:
            if f.value is None:
                continue
            if f.key == "kernel":
                out.append(("kernel", str(f.value)))
            elif f.key.startswith("if.") and f.key.rsplit(".", 1)[-1] in ("driver", "firmware"):
                out.append((f.key.rsplit(".", 1)[-1], str(f.value)))
    return out


def sample_rows(rid: int, samples: Iterable[Sample], trial_id: str = "") -> list[tuple[Any, ...]]:
    """Samples as rows, numbered per trial (the number is part of the key).
    A sample whose trial_id is "" is ``trial_id``'s: an import's samples
    (a long one has 100,000s) are stored under their trial's id rather
    than each copied to carry it."""
    seq: dict[str, int] = {}
    # a run's samples share a few tag sets: each is written as JSON once (looked
    # up by identity: the rule in nicbench.records)
    tags: dict[int, tuple[Tags, str]] = {}
    rows: list[tuple[Any, ...]] = []
    add = rows.append
    for x in samples:
        tid, t = x.trial_id or trial_id, x.tags
        n = seq.get(tid, 0)
        seq[tid] = n + 1
        e = tags.get(id(t))
        if e is None:
            e = tags[id(t)] = (t, json.dumps(dict(t), sort_keys=True))
        add((rid, tid, n, x.metric, float(x.value), x.unit, float(x.t_start), float(x.t_end), e[1]))
    return rows


_METRIC, _TAGS = attrgetter("metric"), attrgetter("tags")


SAMPLE_COLS = ("rid", "trial_id", "seq", "metric", "value", "unit", "t_start", "t_end", "tags")
TRIAL_COLS = ("rid", "trial_id", "idx", "point", "repeat", "params", "status", "started", "ended", "error", "meta")
FACT_COLS = ("rid", "host", "key", "seq", "role", "collected", "value", "unknown", "source")
RAW_COLS = ("rid", "path", "seq", "trial_id", "host", "role", "tool", "stream", "sha256", "size")


def trial_row(rid: int, rec: TrialRecord) -> tuple[Any, ...]:
    s = rec.spec
    return (rid, s.trial_id, s.index, s.point, s.repeat, s.params_json(), rec.status, rec.started, rec.ended,
            rec.error, json.dumps(dict(rec.meta), sort_keys=True, default=str))


def fact_rows(rid: int, hosts: Iterable[HostFacts], start: int = 0) -> list[tuple[Any, ...]]:
    rows = []
    n = start
    for h in hosts:
        for f in h.facts:
            rows.append((rid, h.host, f.key, n, h.role, h.collected,
                         None if f.value is None else json.dumps(f.value), f.unknown, f.source))
            n += 1
    return rows


class RunWriter:
    """One run being written.  Methods as the session calls them.

    On PostgreSQL every write also goes, first, into a local SQLite spool in
    the run directory: if the server goes away mid-run, the spool already
    holds the whole run and the run goes on into it alone (the writer cannot
    read back from a server that is gone).  When the run finishes with the
    server still there, the spool is deleted.
    """

    def __init__(self, archive: Archive, run_dir: Path, info: RunInfo, final_dir: Path):
        self.run_dir = run_dir
        self.info = info
        self.notes: list[str] = []            # what the writer had to do that the user should hear of
        self._final_dir = final_dir           # where an invisible run's directory goes when it is finished
        self._primary: Archive | None = archive
        self._spool: Archive | None = None
        self._rids: dict[int, int] = {}
        self._raw_seq = 0
        self._fact_seq = 0
        self._digests: dict[str, tuple[str, int]] = {}    # raw path -> sha256, size: written from hashed bytes
        self._aborted: str | None = None
        self._dir_gone = False
        self._full = False                    # aborted for a full disk
        self._trials = 0                      # trials recorded
        self._scratch: Path | None = None     # where clean-up's last outputs go once the run directory is gone
        self._finished = False
        self._make_args: dict[str, Any] = {}
        self._primary_loc = archive.loc

    @property
    def archive(self) -> Archive:
        """Where the run is: its archive, or the local spool once that went away."""
        if self._primary is not None:
            return self._primary
        assert self._spool is not None
        return self._spool

    @property
    def rid(self) -> int:
        return self._rids[id(self.archive)]

    def _make(self, a: Archive) -> int:
        """The run's row (and its tags) in ``a``; its rid there."""
        with a.db.transaction():
            rid = a.insert_run(self.info, self._final_dir, visible=self._make_args["visible"],
                               total=self._make_args["total"], pid=os.getpid())
            a.add_labels(rid, [("tag", t) for t in self._make_args["tags"]])
        return rid

    # ---- creating ----
    @classmethod
    def create(cls, archive: Archive, info: RunInfo, *, total: int | None = None, tags: Sequence[str] = (),
               visible: bool = True, run_dir: Path | None = None) -> RunWriter:
        final = (run_dir or archive.runs_root / info.run_id).absolute()
        where = final if visible else final.with_name(f".tmp-{info.run_id}")
        try:
            (where / "raw").mkdir(parents=True, exist_ok=False)
        except FileExistsError:
            raise StoreError("run directory already exists", where=str(where)) from None
        except OSError as e:
            raise StoreError(f"cannot create the run directory: {e.strerror or e}", where=str(where),
                             hint="choose a writable --store (or free space there)") from None
        w = cls(archive, where, info, final)
        w._make_args = {"total": total, "tags": tuple(tags), "visible": visible}
        try:
            (where / "plan.toml").write_text(info.plan_text)
            _write_marker(where, archive.loc, info.run_id)
            with open(where / RESERVE, "wb") as f:
                f.write(b"\0" * RESERVE_BYTES)
            if archive.loc.kind == "postgresql":
                w._spool = Archive.open(StoreLocation("sqlite", str(where / SPOOL), where.parent))
            w._do(lambda a, _rid: w._rids.__setitem__(id(a), w._make(a)), made=False)
        except BaseException as e:
            if w._spool is not None:
                w._spool.close()
            shutil.rmtree(where, ignore_errors=True)     # nothing of the run was recorded: leave nothing
            if isinstance(e, StoreFull) or isinstance(e, OSError) and e.errno == errno.ENOSPC:
                raise full_error(str(getattr(e, "where", None) or where), None, started=False) from None
            if isinstance(e, OSError):
                raise StoreError(f"cannot write the run directory: {e.strerror or e}", where=str(where),
                                 hint="free space there or choose another --store") from None
            raise
        return w

    # ---- where writes go ----
    def _do(self, op: Callable[[Archive, int], Any], *, need: int | None = None, made: bool = True) -> None:
        """Run ``op`` on the spool (if any), then on the archive; a PostgreSQL
        outage leaves the run to the spool from then on."""
        targets = [t for t in (self._spool, self._primary) if t is not None]
        for a in targets:
            try:
                op(a, self._rids[id(a)] if made else 0)
            except StoreUnavailable as e:
                if a is not self._primary or self._spool is None:
                    raise
                self._lose_primary(e)
            except StoreFull as e:
                if not self._trials:          # no point finished: finish() keeps nothing of the run
                    e = full_error(e.where or self.run_dir.as_posix(), need, started=False)
                self._full = True
                self._abort(str(e.message))
                raise e from None

    def _lose_primary(self, cause: StoreError) -> None:
        assert self._primary is not None
        self._primary.close()
        self._primary = None
        _write_marker(self.run_dir, self._primary_loc, self.info.run_id, spool=True)
        self.notes.append(f"the archive {self._primary_loc.display} became unreachable mid-run ({cause.message}); "
                          f"the run went on into {self.run_dir / SPOOL}: 'nicbench archive sync' pushes it there")

    def _abort(self, reason: str) -> None:
        self._aborted = reason
        try:
            (self.run_dir / RESERVE).unlink()      # room for the one small write below
        except OSError:
            pass
        for a in (self._spool, self._primary):
            if a is None:
                continue
            try:
                a.set_status(self.info.run_id, "aborted", reason)
            except StoreError:
                pass    # readers then see a run whose process is gone: aborted all the same

    def check_dir(self) -> None:
        """Raise (once: the run is then aborted) if the run directory was
        deleted while the run was writing into it; said before a point
        starts and before anything more is recorded."""
        if self._dir_gone or (self.run_dir / MARKER).is_file():
            return
        self._dir_gone = True
        self._abort(f"the run directory {self.run_dir} was deleted during the run")
        raise StoreError("the run directory was deleted during the run: the run stops; the point in flight is not "
                         "recorded (its raw outputs went with it), the points finished before are kept in the "
                         "archive without their raw files", where=str(self.run_dir),
                         hint="leave a run's directory alone until it ends; 'nicbench report' names the missing "
                              "raw files")

    # ---- what the session calls ----
    def raw_dir(self, trial_id: str) -> Path:
        self.check_dir()
        if self._dir_gone:           # clean-up (stopping servers) still needs somewhere: not the run's path
            self._scratch = self._scratch or Path(tempfile.mkdtemp(prefix=f"nicbench-{self.info.run_id}-"))
            d = self._scratch / trial_id
            d.mkdir(parents=True, exist_ok=True)
            return d
        d = self.run_dir / "raw" / trial_id
        d.mkdir(parents=True, exist_ok=True)
        return d

    def write_file(self, path: Path, text: str) -> str:
        """A file nicbench writes into the run itself (a host's facts); its
        path relative to the run directory.  A full disk is said as one."""
        try:
            path.write_text(text)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise
            err = full_error(str(path), None, started=bool(self._trials))
            self._full = True
            self._abort(err.message)
            raise err from None
        return self.rel(path)

    def rel(self, p: Path) -> str:
        return str(Path(p).resolve().relative_to(self.run_dir.resolve()))

    def set_meta(self, **items: object) -> None:
        """Things the run learned as it went (merged into its extras)."""
        def op(a: Archive, rid: int) -> None:
            with a.db.transaction():
                row = a.db.one("SELECT extra FROM runs WHERE rid = ?", (rid,))
                extra = loads(row[0] if row else None, {}) or {}
                extra.update(items)
                a.db.execute("UPDATE runs SET extra = ?, heartbeat = ? WHERE rid = ?",
                             (json.dumps(extra, default=str), time.time(), rid))
        self._do(op)

    def write_raw(self, trial_id: str, name: str, data: bytes, sha256: str) -> str:
        """``data``, whose sha256 the caller knows (it hashed those bytes), as
        the raw file ``name`` of ``trial_id``; its path in the run (for
        RawOutput).  Its row takes that digest rather than reading the file
        back to hash it (an import's 200 MB report: 0.3 s)."""
        dest = self.raw_dir(trial_id) / name
        dest.write_bytes(data)
        rel = self.rel(dest)
        self._digests[rel] = (sha256, len(data))
        return rel

    def _raw_rows(self, rid: int, raws: Iterable[RawOutput], start: int) -> list[tuple[Any, ...]]:
        rows = []
        for i, r in enumerate(raws):
            sha, size = self._digests.get(r.path) or sha256_of(self.run_dir / r.path)
            rows.append((rid, r.path, start + i, r.trial_id, r.host, r.role, r.tool, r.stream, sha, size))
        return rows

    def write_facts(self, hosts: Iterable[HostFacts], raws: Iterable[RawOutput] = ()) -> None:
        """Host facts as collected before the first point (one transaction),
        and the labels the run is found by (host, kernel, driver, firmware)."""
        hosts, raws = list(hosts), list(raws)
        start_f, start_r = self._fact_seq, self._raw_seq
        self._fact_seq += sum(len(h.facts) for h in hosts)
        self._raw_seq += len(raws)
        raw_rows = self._raw_rows(0, raws, start_r)

        def op(a: Archive, rid: int) -> None:
            with a.db.transaction():
                a.db.executemany(f"INSERT INTO facts ({', '.join(FACT_COLS)}) VALUES "
                                 f"({', '.join('?' for _ in FACT_COLS)}) ON CONFLICT DO NOTHING",
                                 fact_rows(rid, hosts, start_f))
                self._insert_raws(a, rid, raw_rows)
                a.add_labels(rid, fact_labels(hosts))
        self._do(op)

    def write_raws(self, raws: Iterable[RawOutput]) -> None:
        """Raw outputs that belong to the run rather than one trial (a server's log)."""
        self.check_dir()
        if self._dir_gone:
            return          # (clean-up after the run directory went) they went with it
        raws = list(raws)
        rows = self._raw_rows(0, raws, self._raw_seq)
        self._raw_seq += len(raws)

        def op(a: Archive, rid: int) -> None:
            with a.db.transaction():
                self._insert_raws(a, rid, rows)
        self._do(op)

    @staticmethod
    def _insert_raws(a: Archive, rid: int, rows: list[tuple[Any, ...]]) -> None:
        a.db.executemany(f"INSERT INTO raw_outputs ({', '.join(RAW_COLS)}) VALUES "
                         f"({', '.join('?' for _ in RAW_COLS)}) ON CONFLICT DO NOTHING",
                         [(rid, *r[1:]) for r in rows])

    def write_trial(self, rec: TrialRecord, samples: Iterable[Sample], raws: Iterable[RawOutput]) -> None:
        """One finished trial, its samples and raw outputs, in one transaction
        (a sample with trial_id "" is this trial's: see :func:`sample_rows`)."""
        self.check_dir()
        if self._dir_gone:
            raise StoreError("the run directory was deleted during the run", where=str(self.run_dir))
        samples, raws = list(samples), list(raws)
        raw_rows = self._raw_rows(0, raws, self._raw_seq)
        self._raw_seq += len(raws)
        # what the trial takes on disk, roughly, for the message when it does not fit:
        # 2 x the sum of 96 + len(metric) + 16 x len(tags) over the samples, added up by map
        need = 2 * (96 * len(samples) + sum(map(len, map(_METRIC, samples)))
                    + 16 * sum(map(len, map(_TAGS, samples)))) + 4096

        def op(a: Archive, rid: int) -> None:
            with a.db.transaction(need):
                a.db.copy_in("trials", TRIAL_COLS, [trial_row(rid, rec)], need)
                a.db.copy_in("samples", SAMPLE_COLS, sample_rows(rid, samples, rec.spec.trial_id), need)
                self._insert_raws(a, rid, raw_rows)
                a.refresh_counts(rid)
        self._do(op, need=need)
        self._trials += 1

    def record_leases(self, controller: str, since: float, targets: Mapping[str, str]) -> None:
        """The host leases this run holds (host -> where the lock is), for
        'nicbench runs --active'; released with the run's :meth:`finish`."""
        if targets:
            self._do(lambda a, _rid: a.record_leases(self.info.run_id, self.info.name, controller, os.getpid(),
                                                     since, targets))

    def finish(self, status: str, **meta: object) -> None:
        """How the run ended; an invisible run (an import) becomes visible now,
        its directory moved to its final name first."""
        if self._finished:
            return
        if self._full and not self._trials and self._discard():
            return
        if self._aborted:
            meta = {**meta, "aborted": self._aborted, "status_asked": status}
            status = "aborted"
        if self.run_dir != self._final_dir:
            try:
                self.run_dir.rename(self._final_dir)
            except OSError as e:
                raise StoreError(f"cannot move the run directory into place: {e.strerror or e}",
                                 where=str(self._final_dir)) from None
            self.run_dir = self._final_dir

        def op(a: Archive, rid: int) -> None:
            with a.db.transaction():
                row = a.db.one("SELECT extra FROM runs WHERE rid = ?", (rid,))
                extra = loads(row[0] if row else None, {}) or {}
                extra.update(meta)
                a.refresh_counts(rid)
                a.db.execute("UPDATE runs SET status = ?, finished = ?, extra = ?, visible = 1, run_dir = ? "
                             "WHERE rid = ?", (status, time.time(), json.dumps(extra, default=str),
                                               str(self.run_dir), rid))
                a.db.execute("UPDATE host_leases SET released = ? WHERE run_id = ? AND released IS NULL",
                             (time.time(), self.info.run_id))
        try:
            self._do(op)
        finally:
            self._finished = True
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
            for leftover in (RESERVE,):
                try:
                    (self.run_dir / leftover).unlink()
                except OSError:
                    pass
            if self._spool is not None:
                self._spool.close()
                if self._primary is not None:      # the archive has it all: the spool is not needed
                    for suffix in ("", "-wal", "-shm"):
                        try:
                            (self.run_dir / (SPOOL + suffix)).unlink()
                        except OSError:
                            pass


    def _discard(self) -> bool:
        """Remove a run that filled the disk before any point finished: an
        empty aborted run would only be noise.  False if the archive could
        not even delete it (it then stays, aborted)."""
        for a in (self._primary, self._spool):
            if a is None:
                continue
            try:
                a.delete_run(self.info.run_id)
            except StoreError:
                if a is self._primary:
                    return False
        self._finished = True
        if self._spool is not None:
            self._spool.close()
        shutil.rmtree(self.run_dir, ignore_errors=True)
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
        return True


def _write_marker(run_dir: Path, loc: StoreLocation, run_id: str, spool: bool = False) -> None:
    doc = {"run_id": run_id, "store": loc.target if loc.kind == "sqlite" else strip_password(loc.target)}
    if spool:
        doc["spool"] = SPOOL
    tmp = run_dir / (MARKER + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(run_dir / MARKER)


def read_marker(run_dir: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads((run_dir / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("run_id"), str) else None
