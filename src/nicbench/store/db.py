"""One connection to the catalogue, SQLite or PostgreSQL, with the same few
operations on both: the archive's SQL is written once, with ``?``
placeholders, in the subset both dialects share.

Why no ORM: the catalogue is eight tables and plain SQL that both engines
accept; what differs is small and named here (placeholders, a few types, the
bulk path: ``executemany`` in SQLite, ``COPY`` in PostgreSQL, which is an
order of magnitude faster for samples than row inserts).  SQLite runs in WAL
mode with a busy timeout, so the dashboard reads while runs write and two
writers wait for each other instead of failing.

Every driver error leaves this module as a :class:`StoreError` (or one of
its kinds below) naming the database, never as a driver exception.
"""

from __future__ import annotations

import errno
import itertools
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..core.errors import StoreError
from .location import StoreLocation

BUSY_TIMEOUT_S = 60.0      # a writer waits this long for another writer's transaction


class StoreUnavailable(StoreError):
    """The database cannot be reached (PostgreSQL down, network gone)."""


class StoreFull(StoreError):
    """The disk under the store is full."""


class StoreBusy(StoreError):
    """Another writer held the database longer than the busy timeout."""


def free_bytes(path: str | Path) -> int | None:
    """Free space for an unprivileged writer on the file system holding ``path``."""
    p = Path(path)
    while not p.exists() and p != p.parent:
        p = p.parent
    try:
        return shutil.disk_usage(p).free
    except OSError:
        return None


def full_error(where: str, need: int | None, started: bool = True) -> StoreFull:
    """``started``: a point had finished (it is kept, the run marked aborted);
    else nothing of the run is kept (an empty aborted run would only be noise)."""
    free = free_bytes(where)
    have = f"{free / 1e6:.1f} MB free" if free is not None else "free space unknown"
    want = f", needs about {max(need or 0, 1 << 20) / 1e6:.1f} MB more" if need is not None else ""
    kept = ("the points finished before are kept and the run is marked aborted" if started
            else "no point had finished, so nothing of the run is kept")
    return StoreFull(f"disk full: {have}{want}; {kept}", where=where,
                     hint="free space there (or use --store elsewhere) and run again")


# SQLite may say "disk I/O error" when it cannot grow a file (its WAL, its
# shared memory): with less free than this, that error is a full disk
FULL_BELOW = 1 << 20


class Db:
    """A connection in autocommit mode; :meth:`transaction` groups writes."""

    def __init__(self, loc: StoreLocation):
        self.loc = loc
        self.dialect = loc.kind
        self.where = loc.display
        self._lock = threading.RLock()
        self._depth = 0
        self.raw: Any = self._connect()

    # ---- connecting ----
    def _connect(self) -> Any:
        if self.dialect == "sqlite":
            return self._connect_sqlite()
        return self._connect_pg()

    def _connect_sqlite(self) -> sqlite3.Connection:
        path = Path(self.loc.target)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreError(f"cannot create the store's directory: {e.strerror or e}", where=str(path.parent),
                             hint="choose a writable --store") from None
        try:
            db = sqlite3.connect(str(path), timeout=BUSY_TIMEOUT_S, isolation_level=None, check_same_thread=False)
            db.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
            mode = _journal_wal(db)
            if mode is None or str(mode[0]).lower() != "wal":
                raise StoreError(f"cannot switch the database to WAL (journal mode {mode and mode[0]})",
                                 where=str(path), hint="the store needs a local file system that supports WAL")
            db.execute("PRAGMA synchronous = NORMAL")     # durable in WAL up to the last checkpoint-safe commit
            db.execute("PRAGMA foreign_keys = ON")
            db.execute("PRAGMA cache_size = -65536")      # 64 MiB: a run's samples insert without re-reading pages
        except sqlite3.DatabaseError as e:
            raise self._map(e, None) from None
        return db

    def _connect_pg(self) -> Any:
        import psycopg  # imported here: SQLite users never pay for it

        try:
            return psycopg.connect(self.loc.target, autocommit=True, connect_timeout=10,
                                   application_name="nicbench")
        except psycopg.Error as e:
            raise self._map(e, None) from None

    # ---- errors ----
    def _map(self, e: BaseException, need: int | None) -> StoreError:
        msg = " ".join(str(e).split()) or type(e).__name__
        if isinstance(e, sqlite3.Error):
            code = getattr(e, "sqlite_errorcode", None)
            if code == sqlite3.SQLITE_FULL or "database or disk is full" in msg:
                return full_error(self.where, need)
            if (code is not None and code & 0xFF == sqlite3.SQLITE_IOERR or "disk I/O error" in msg) \
                    and (free := free_bytes(self.where)) is not None and free < FULL_BELOW:
                return full_error(self.where, need)
            if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "database is locked" in msg:
                return StoreBusy(f"database stayed locked for {BUSY_TIMEOUT_S:.0f} s: {msg}", where=self.where,
                                 hint="another nicbench holds a long write; try again")
            if code == sqlite3.SQLITE_CANTOPEN or "unable to open" in msg:
                return StoreError(f"cannot open the database: {msg}", where=self.where,
                                  hint="check the path and its permissions")
            if isinstance(e, sqlite3.DatabaseError) and ("not a database" in msg or "malformed" in msg):
                return StoreError(f"not a nicbench archive or damaged: {msg}", where=self.where,
                                  hint="point --store at an archive, or move the file away")
            return StoreError(f"database error: {msg}", where=self.where, hint="--debug shows more")
        import psycopg
        from psycopg import errors as pge

        if isinstance(e, pge.DiskFull):
            return full_error(self.where, need)
        if isinstance(e, pge.InvalidPassword | pge.InvalidAuthorizationSpecification):
            return StoreError(f"PostgreSQL refused the login: {msg}", where=self.where,
                              hint="check the user and password (URL, PGPASSWORD or ~/.pgpass)")
        if isinstance(e, pge.InvalidCatalogName):
            return StoreError(f"no such database: {msg}", where=self.where, hint="createdb it first")
        if isinstance(e, psycopg.OperationalError) and not isinstance(e, pge.QueryCanceled):
            if "password authentication failed" in msg or "no password supplied" in msg:
                return StoreError(f"PostgreSQL refused the login: {msg}", where=self.where,
                                  hint="check the user and password (URL, PGPASSWORD or ~/.pgpass)")
            if "does not exist" in msg and "database" in msg:
                return StoreError(f"no such database: {msg}", where=self.where, hint="createdb it first")
            return StoreUnavailable(f"PostgreSQL unreachable: {msg}", where=self.where,
                                    hint="is the server up and the URL right?")
        return StoreError(f"database error: {msg}", where=self.where, hint="--debug shows more")

    @contextmanager
    def _mapped(self, need: int | None = None) -> Iterator[None]:
        try:
            yield
        except StoreError:
            raise
        except OSError as e:
            if e.errno == errno.ENOSPC:
                raise full_error(self.where, need) from None
            raise
        except Exception as e:
            if isinstance(e, sqlite3.Error) or type(e).__module__.startswith("psycopg"):
                raise self._map(e, need) from None
            raise

    # ---- statements ----
    def sql(self, text: str) -> str:
        return text if self.dialect == "sqlite" else text.replace("?", "%s")

    def execute(self, text: str, params: Sequence[Any] = ()) -> Any:
        with self._lock, self._mapped():
            if self.dialect == "sqlite":
                return self.raw.execute(text, params)
            return self.raw.execute(self.sql(text), params, prepare=False)

    def query(self, text: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock, self._mapped():
            if self.dialect == "sqlite":
                return self.raw.execute(text, params).fetchall()
            return self.raw.execute(self.sql(text), params).fetchall()

    def one(self, text: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        rows = self.query(text, params)
        return rows[0] if rows else None

    def executemany(self, text: str, rows: Iterable[Sequence[Any]], need: int | None = None) -> None:
        rows = list(rows)
        if not rows:
            return
        with self._lock, self._mapped(need):
            if self.dialect == "sqlite":
                self.raw.executemany(text, rows)
            else:
                with self.raw.cursor() as cur:
                    cur.executemany(self.sql(text), rows)

    def copy_in(self, table: str, columns: Sequence[str], rows: Iterable[Sequence[Any]],
                need: int | None = None) -> None:
        """Bulk insert of new rows (no conflict handling): COPY on PostgreSQL."""
        if self.dialect == "sqlite":
            marks = ", ".join("?" for _ in columns)
            sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
            with self._lock, self._mapped(need):
                it = iter(rows)
                while batch := list(itertools.islice(it, 50000)):     # bounded memory for big runs
                    self.raw.executemany(sql, batch)
            return
        with self._lock, self._mapped(need), self.raw.cursor() as cur, \
                cur.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as cp:
            for r in rows:
                cp.write_row(r)

    @contextmanager
    def transaction(self, need: int | None = None) -> Iterator[None]:
        """One transaction (nested calls join the outer one).  SQLite takes the
        write lock at the start (BEGIN IMMEDIATE), so a writer waits at the
        start for another instead of failing half-way."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            with self._mapped(need):
                if self.dialect == "sqlite":
                    self.raw.execute("BEGIN IMMEDIATE")
                    self._depth = 1
                    try:
                        yield
                    except BaseException:
                        self._depth = 0
                        try:
                            self.raw.execute("ROLLBACK")
                        except sqlite3.Error:
                            pass         # the error already rolled it back
                        raise
                    self._depth = 0
                    self.raw.execute("COMMIT")
                else:
                    self._depth = 1
                    try:
                        with self.raw.transaction():
                            yield
                    finally:
                        self._depth = 0

    def close(self) -> None:
        try:
            self.raw.close()
        except Exception:  # noqa: BLE001 - closing a connection that is already gone
            pass

    def is_alive(self) -> bool:
        try:
            self.query("SELECT 1")
            return True
        except StoreError:
            return False

    def file_path(self) -> str | None:
        return self.loc.target if self.dialect == "sqlite" else None


def pid_start(pid: int) -> str | None:
    """A process's start time in clock ticks since boot (field 22 of
    /proc/PID/stat): with the pid it names one process, even after pid reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def machine_name() -> str:
    """This machine, as runs record where they ran."""
    return os.uname().nodename


def boot_id() -> str:
    """This boot of this machine: a run recorded under another boot is not running."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _journal_wal(db: sqlite3.Connection) -> Any:
    """Switch to WAL.  SQLite does not call the busy handler for this switch:
    a second opener of a new database, while the first is still making it,
    gets "database is locked" at once (seen 1 run in 3 with four openers), so
    the switch is retried here for as long as the busy timeout allows."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            return db.execute("PRAGMA journal_mode = WAL").fetchone()
        except sqlite3.OperationalError as e:
            if "locked" not in str(e) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)

