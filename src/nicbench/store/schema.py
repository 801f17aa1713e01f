"""The result database's schema and its migrations (SQLite ``user_version``).

Each migration takes the database from version N to N+1 and is applied in a
transaction; a database from a newer nicbench is refused, never guessed at.
"""

from __future__ import annotations

import sqlite3

from ..core.errors import StoreError

SCHEMA_VERSION = 2

_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE trials (
    trial_id TEXT PRIMARY KEY, idx INTEGER NOT NULL, study TEXT NOT NULL,
    point TEXT NOT NULL, repeat INTEGER NOT NULL, params TEXT NOT NULL,
    status TEXT NOT NULL, started REAL NOT NULL, ended REAL NOT NULL,
    error TEXT, meta TEXT NOT NULL
);
CREATE TABLE samples (
    trial_id TEXT NOT NULL REFERENCES trials(trial_id), metric TEXT NOT NULL,
    value REAL NOT NULL, unit TEXT NOT NULL, t_start REAL NOT NULL, t_end REAL NOT NULL,
    tags TEXT NOT NULL
);
CREATE INDEX samples_by_trial ON samples(trial_id, metric);
CREATE TABLE raw_outputs (
    trial_id TEXT NOT NULL, host TEXT NOT NULL, role TEXT NOT NULL, tool TEXT NOT NULL,
    stream TEXT NOT NULL, path TEXT NOT NULL
);
"""

# v2: host facts, one row per (host, key); value is JSON, NULL when unknown
_V2 = """
CREATE TABLE facts (
    host TEXT NOT NULL, role TEXT NOT NULL, collected REAL NOT NULL, key TEXT NOT NULL,
    value TEXT, unknown TEXT, source TEXT NOT NULL, PRIMARY KEY (host, key)
);
"""

MIGRATIONS: list[str] = [_V1, _V2]   # MIGRATIONS[n] takes version n to n+1


def migrate(db: sqlite3.Connection, path: str) -> int:
    """Bring ``db`` to :data:`SCHEMA_VERSION`; return the version it had."""
    (have,) = db.execute("PRAGMA user_version").fetchone()
    if have > SCHEMA_VERSION:
        raise StoreError(f"result database has schema {have}, this nicbench knows up to {SCHEMA_VERSION}",
                         where=path, hint="upgrade nicbench to read this run")
    for v in range(have, SCHEMA_VERSION):
        with db:
            db.executescript("BEGIN;" + MIGRATIONS[v] + f"PRAGMA user_version = {v + 1};")
    return have
