"""Where the archive is: a SQLite file (the default, in the per-user data
directory) or a PostgreSQL database, and where its runs' files live.

``--store`` / ``$NICBENCH_STORE`` take a path or a URL:

- a directory ``D`` (the default is ``$XDG_DATA_HOME/nicbench``, i.e.
  ``~/.local/share/nicbench``): the catalogue is ``D/archive.sqlite``, run
  directories go under ``D/runs/``;
- a file ``F.sqlite`` (or ``.sqlite3``, ``.db``) or ``sqlite:///F``: the
  catalogue is ``F``, run directories go beside it, under ``F``'s folder
  ``runs/``;
- ``postgresql://user@host/db`` (any libpq URL; ``postgres://`` too): the
  catalogue is that database, run directories stay on this machine under
  ``$NICBENCH_RUNS`` (default ``<data dir>/runs``).

Raw tool outputs are never put in the database: they stay files in the run
directory, and the catalogue holds their path and sha256.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from ..core.errors import InputError

SQLITE_SUFFIXES = (".sqlite", ".sqlite3", ".db")
DB_NAME = "archive.sqlite"
_PG_SCHEMES = ("postgresql", "postgres")


@dataclass(frozen=True)
class StoreLocation:
    """A parsed store: what to connect to and where run directories go."""

    kind: Literal["sqlite", "postgresql"]
    target: str               # the SQLite file, or the PostgreSQL URL (with its password, if given)
    runs_root: Path

    @property
    def display(self) -> str:
        """The store as it may be printed: a URL's password replaced by ``***``."""
        if self.kind == "sqlite":
            return self.target
        return redact(self.target)

    @property
    def url(self) -> str:
        """The store as a URL (``sqlite:///...`` or the PostgreSQL URL)."""
        return f"sqlite://{self.target}" if self.kind == "sqlite" else self.target


def data_home() -> Path:
    """The per-user data directory of nicbench (XDG base directory spec)."""
    base = os.environ.get("XDG_DATA_HOME") or ""
    # the spec says a relative XDG_DATA_HOME is invalid and must be ignored
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "share"
    return root / "nicbench"


def cache_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or ""
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "nicbench"


def redact(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = netloc[0].split(":", 1)[0]
    return urlunsplit(SplitResult(parts.scheme, f"{user}:***@{netloc[1]}", parts.path, parts.query,
                                  parts.fragment))


def _pg_runs_root() -> Path:
    env = os.environ.get("NICBENCH_RUNS")
    return Path(env).absolute() if env else data_home() / "runs"


def _check_pg_url(url: str, parts: SplitResult) -> None:
    """A PostgreSQL URL libpq would accept, checked before anything connects
    (a typo in a port or an option is bad input, not a store outage)."""
    try:
        parts.port   # noqa: B018 - urlsplit checks the port only when it is read
    except ValueError as e:
        raise InputError(f"store URL does not parse: {e}", where=redact(url),
                         hint="postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE") from None
    if not parts.path.strip("/") and "dbname=" not in parts.query:
        raise InputError("store URL names no database", where=redact(url),
                         hint="postgresql://USER@HOST/DATABASE")
    from psycopg.conninfo import conninfo_to_dict  # libpq's own parser; psycopg loads only here
    try:
        conninfo_to_dict(url)
    except Exception as e:  # noqa: BLE001 - psycopg raises ProgrammingError; any failure is bad input
        raise InputError(f"store URL does not parse: {str(e).strip().splitlines()[0]}", where=redact(url),
                         hint="postgresql://USER[:PASSWORD]@HOST[:PORT]/DATABASE") from None


def parse_store(spec: str | os.PathLike[str] | None) -> StoreLocation:
    """A store from ``--store`` (a path or URL), else ``$NICBENCH_STORE``, else
    the per-user default.  Raises :class:`InputError` for what cannot be one."""
    if spec is None or str(spec) == "":
        spec = os.environ.get("NICBENCH_STORE") or str(data_home())
    text = str(spec)
    if "\n" in text or "\x00" in text:
        raise InputError("store contains a newline or NUL", where="--store", hint="a path or a URL")
    if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", text):
        try:
            parts = urlsplit(text)
        except ValueError as e:
            raise InputError(f"store URL does not parse: {e}", where=redact(text),
                             hint="postgresql://USER@HOST/DB or sqlite:///PATH") from None
        scheme = parts.scheme.lower()
        if scheme in _PG_SCHEMES or scheme.startswith("postgresql+"):
            url = text if scheme in _PG_SCHEMES else "postgresql" + text[len(parts.scheme):]
            _check_pg_url(url, parts)
            return StoreLocation("postgresql", url, _pg_runs_root())
        if scheme == "sqlite":
            if parts.netloc not in ("", "localhost"):
                raise InputError("a sqlite URL names a local file: sqlite:///PATH", where=text,
                                 hint="three slashes, then the absolute path")
            path = unquote(parts.path)
            if not path:
                raise InputError("sqlite URL names no file", where=text, hint="sqlite:///PATH/archive.sqlite")
            return _sqlite_file(Path(path))
        raise InputError(f"unknown store URL scheme {parts.scheme!r}", where=redact(text),
                         hint="postgresql://... or sqlite:///..., or a directory")
    given = Path(text).expanduser()
    if given.suffix in SQLITE_SUFFIXES or given.is_file():
        return _sqlite_file(given)
    root = given.absolute()
    return StoreLocation("sqlite", str(root / DB_NAME), root / "runs")


def _sqlite_file(path: Path) -> StoreLocation:
    p = path.expanduser().absolute()
    if p.is_dir():
        raise InputError("is a directory, not a database file", where=str(p),
                         hint="give the directory itself (its archive.sqlite is used) without sqlite://")
    return StoreLocation("sqlite", str(p), p.parent / "runs")
