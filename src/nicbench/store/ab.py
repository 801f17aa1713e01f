"""A/B results in the archive: one row per ``nicbench ab``, linking the two
runs it made (one per configuration, interleaved on the same hosts), the
profiles they ran under, and -- once both runs are read back and judged --
whether B won and the judgement itself (analysis/ab.py's, as JSON)."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import InputError, StoreError
from .archive import Archive, loads
from .names import is_run_id

_COLS = "ab_id, name, study, created, finished, status, run_a, run_b, profile_a, profile_b, rounds, b_won, result"


@dataclass(frozen=True)
class ABRow:
    ab_id: str
    name: str
    study: str
    created: float
    finished: float | None
    status: str                        # running | done | interrupted | failed
    run_a: str
    run_b: str
    profile_a: str
    profile_b: str
    rounds: int
    b_won: bool | None                 # None: not judged (still running, or stopped before)
    result: Mapping[str, Any] = field(default_factory=dict)


def _row(t: tuple[Any, ...]) -> ABRow:
    return ABRow(str(t[0]), str(t[1]), str(t[2]), float(t[3]), None if t[4] is None else float(t[4]), str(t[5]),
                 str(t[6]), str(t[7]), str(t[8]), str(t[9]), int(t[10]), None if t[11] is None else bool(t[11]),
                 loads(t[12], {}))


def insert_ab(a: Archive, ab_id: str, name: str, study: str, run_a: str, run_b: str, profile_a: str,
              profile_b: str, rounds: int) -> None:
    """The A/B's row, once both its runs are in the archive."""
    if not is_run_id(ab_id):
        raise InputError(f"A/B id {ab_id!r} is not a safe name", where="ab id", hint="letters, digits, '.', '_', '-'")
    with a.db.transaction():
        a.db.execute(f"INSERT INTO ab_results ({_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                     (ab_id, name, study, time.time(), None, "running", run_a, run_b, profile_a, profile_b, rounds,
                      None, "{}"))


def finish_ab(a: Archive, ab_id: str, status: str, b_won: bool | None,
              result: Mapping[str, Any] | None = None) -> None:
    with a.db.transaction():
        a.db.execute("UPDATE ab_results SET status = ?, finished = ?, b_won = ?, result = ? WHERE ab_id = ?",
                     (status, time.time(), None if b_won is None else int(b_won),
                      json.dumps(dict(result or {}), default=str), ab_id))


def ab_results(a: Archive, *, limit: int | None = None) -> list[ABRow]:
    """Newest first."""
    sql = f"SELECT {_COLS} FROM ab_results ORDER BY created DESC" + (f" LIMIT {int(limit)}" if limit else "")
    return [_row(t) for t in a.db.query(sql)]


def ab_result(a: Archive, ref: str) -> ABRow:
    """An A/B by id, unique id prefix, or ``latest``."""
    if ref == "latest":
        rows = ab_results(a, limit=1)
    else:
        rows = [_row(t) for t in a.db.query(f"SELECT {_COLS} FROM ab_results WHERE ab_id = ?", (ref,))] or [
            r for r in ab_results(a) if r.ab_id.startswith(ref)]
    if len(rows) == 1:
        return rows[0]
    if not rows:
        raise StoreError(f"no A/B {ref!r} in the archive", where=a.where,
                         hint="nicbench ab PLAN --b PROFILE makes one; 'nicbench ab --list' lists them")
    raise InputError(f"A/B {ref!r} is ambiguous: {', '.join(r.ab_id for r in rows[:5])}", where="A/B",
                     hint="give more of its id")
