"""Reading one run back from the archive, as the results side needs it:
the same methods as the per-run reader of older nicbench (``runs.RunReader``),
so the report reads either."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

from ..core.errors import StoreError
from ..records import TRIAL_STATUSES, Fact, HostFacts, RawOutput, RunInfo, Sample, TrialRecord, TrialSpec
from .archive import Archive, RunRow, loads
from .location import StoreLocation, parse_store
from .writer import SPOOL, read_marker


@lru_cache(maxsize=4096)
def _tags(text: str) -> tuple[tuple[str, str], ...]:
    """Tags repeat across a run's samples: each distinct JSON text is decoded once."""
    d = loads(text, {}) or {}
    return tuple(sorted((str(k), str(v)) for k, v in d.items()))


class RunReader:
    def __init__(self, archive: Archive, row: RunRow, owns_archive: bool = False):
        """``owns_archive``: :meth:`close` closes the archive too."""
        self.archive = archive
        self.owns_archive = owns_archive
        self.row = row
        self.run_dir = Path(row.run_dir)
        got = archive.db.one("SELECT plan_text, info_meta, extra, nicbench_version FROM runs WHERE rid = ?",
                             (row.rid,))
        if got is None:
            raise StoreError(f"run {row.run_id} vanished while being read", where=archive.where)
        self._plan, self._meta_text, self._extra_text, self._version = got

    @property
    def damaged(self) -> str | None:
        """Why the run's stored info cannot be trusted as it is (None: it can)."""
        if loads(self._meta_text, None) is None or loads(self._extra_text, None) is None:
            return "its run info is not valid JSON"
        return None

    def meta(self) -> dict[str, object]:
        """The run's info as one flat mapping (as the per-run database held it)."""
        r = self.row
        out: dict[str, Any] = {"run_id": r.run_id, "name": r.name, "study": r.study, "created": r.created,
                               "source": r.source, "nicbench_version": self._version, "status": r.status}
        info_meta = loads(self._meta_text, {}) or {}
        out.update({f"meta.{k}": v for k, v in info_meta.items()})
        extra = loads(self._extra_text, {}) or {}
        out.update(extra)
        out["status"] = r.status
        if r.finished is not None:
            out["finished"] = r.finished
        return out

    def info(self) -> RunInfo:
        r = self.row
        meta = loads(self._meta_text, None)
        if not isinstance(meta, dict):
            raise StoreError(f"run {r.run_id} is damaged: its info is not valid JSON", where=self.archive.where,
                             hint="nicbench runs lists it as damaged; its raw files are in " + r.run_dir)
        return RunInfo(r.run_id, r.name, r.study, r.created, self._plan, r.source, str(self._version), meta)

    def trials(self) -> list[TrialRecord]:
        out = []
        for row in self.archive.db.query(
                "SELECT trial_id, idx, point, repeat, params, status, started, ended, error, meta FROM trials "
                "WHERE rid = ? ORDER BY idx", (self.row.rid,)):
            spec = TrialSpec(row[0], int(row[1]), self.row.study, row[2], int(row[3]), loads(row[4], {}) or {})
            meta = loads(row[9], {}) or {}
            status, error = row[5], row[8]
            # the analysis reads what the runner recorded; the row holds the analysis'
            # decision over it (Archive.record_decisions), read by lists and counts
            recorded = meta.pop("recorded", None)
            if isinstance(recorded, dict) and recorded.get("status") in TRIAL_STATUSES:
                status, error = recorded["status"], recorded.get("error")
            out.append(TrialRecord(spec, status, float(row[6]), float(row[7]), error, meta))
        return out

    def samples(self, trial_id: str | None = None, metric: str | None = None) -> list[Sample]:
        q = "SELECT trial_id, metric, value, unit, t_start, t_end, tags FROM samples WHERE rid = ?"
        args: list[object] = [self.row.rid]
        if trial_id:
            q += " AND trial_id = ?"
            args.append(trial_id)
        if metric:
            q += " AND metric = ?"
            args.append(metric)
        q += " ORDER BY trial_id, seq"
        return [Sample(r[0], r[1], float(r[2]), r[3], float(r[4]), float(r[5]), _tags(r[6]))
                for r in self.archive.db.query(q, args)]

    def facts(self) -> list[HostFacts]:
        hosts: dict[str, HostFacts] = {}
        rows: dict[str, list[Fact]] = {}
        for host, role, collected, key, value, unknown, source in self.archive.db.query(
                "SELECT host, role, collected, key, value, unknown, source FROM facts WHERE rid = ? ORDER BY seq",
                (self.row.rid,)):
            hosts.setdefault(host, HostFacts(host, role, float(collected), ()))
            v = None if value is None else loads(value, None)
            if v is None and unknown is None:
                unknown = "stored value is damaged"
            rows.setdefault(host, []).append(Fact(key, v, unknown if v is None else None, source))
        return [HostFacts(h.host, h.role, h.collected, tuple(rows[h.host])) for h in hosts.values()]

    def raw_outputs(self) -> list[RawOutput]:
        return [RawOutput(r[0], r[1], r[2], r[3], r[4], r[5]) for r in self.archive.db.query(
            "SELECT trial_id, host, role, tool, stream, path FROM raw_outputs WHERE rid = ? ORDER BY seq",
            (self.row.rid,))]

    def raw_files(self) -> list[dict[str, Any]]:
        """Raw outputs with what the archive recorded of each file (sha256, size)."""
        return [{"seq": int(r[0]), "trial_id": r[1], "host": r[2], "role": r[3], "tool": r[4], "stream": r[5],
                 "path": r[6], "sha256": r[7], "size": r[8]} for r in self.archive.db.query(
            "SELECT seq, trial_id, host, role, tool, stream, path, sha256, size FROM raw_outputs WHERE rid = ? "
            "ORDER BY seq", (self.row.rid,))]

    def missing_raw_files(self) -> list[str]:
        """The raw files the archive lists that are not in the run directory
        (deleted mid-run, or since), as paths relative to it."""
        return [r["path"] for r in self.raw_files() if not (self.run_dir / r["path"]).is_file()]

    def close(self) -> None:
        """Close the archive if this reader opened it (else it is the caller's)."""
        if self.owns_archive:
            self.archive.close()


def archive_of(run_dir: Path) -> tuple[Archive, str]:
    """The archive a run directory belongs to (its ``run.json``; the local
    spool while it has not been synced) and the run's id in it."""
    marker = read_marker(run_dir)
    if marker is None:
        raise StoreError("not a run directory (no run.json, no results.sqlite)", where=str(run_dir),
                         hint="nicbench runs lists the runs; nicbench report RUN_ID renders one")
    if marker.get("spool") and (run_dir / SPOOL).exists():
        loc = StoreLocation("sqlite", str(run_dir / SPOOL), run_dir.parent)
    else:
        loc = parse_store(str(marker["store"]))
    return Archive.open(loc, create=False), str(marker["run_id"])


def open_run_dir(run_dir: Path) -> RunReader:
    """A reader of the run whose directory is ``run_dir`` (close it when done)."""
    a, run_id = archive_of(run_dir)
    try:
        return RunReader(a, a.resolve(run_id), owns_archive=True)
    except BaseException:
        a.close()
        raise

