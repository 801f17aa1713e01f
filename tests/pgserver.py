"""A throwaway PostgreSQL server for the archive tests and benches.

Debian's ``postgresql`` package (15): ``initdb`` into a fresh directory as the
postgres user, password logins only (scram), listening on a Unix socket in a
private directory and on no TCP port, fsync off (it is thrown away; a
killed server still keeps every commit, which the outage test relies on:
synchronous_commit stays on).  Stopped and removed by :meth:`PgServer.stop`.
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

USER = "nbtest"


def bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


@dataclass
class PgServer:
    base: Path
    bin: Path
    password: str

    @property
    def sock(self) -> Path:
        return self.base / "sock"

    @property
    def data(self) -> Path:
        return self.base / "data"

    def url(self, db: str = "postgres", password: str | None = None) -> str:
        pw = self.password if password is None else password
        return f"postgresql://{USER}:{quote(pw, safe='')}@/{db}?host={quote(str(self.sock), safe='')}"

    def _as_postgres(self, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(argv, user="postgres", group="postgres", capture_output=True, text=True,
                              timeout=timeout, check=False, cwd=self.base)

    def start(self) -> None:
        r = self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "-l",
                              str(self.base / "log"), "-o",
                              f"-k {self.sock} -c listen_addresses='' -c fsync=off -c full_page_writes=off "
                              "-c max_connections=60", "start")
        if r.returncode != 0:
            raise RuntimeError(f"pg_ctl start failed: {r.stdout}{r.stderr}{self.log()}")

    def stop(self, mode: str = "fast") -> None:
        self._as_postgres(str(self.bin / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60", "-m", mode, "stop")

    def log(self) -> str:
        try:
            return (self.base / "log").read_text()[-2000:]
        except OSError:
            return ""

    def create_db(self) -> str:
        import psycopg

        name = "t_" + secrets.token_hex(6)
        with psycopg.connect(self.url(), autocommit=True) as c:
            c.execute(f"CREATE DATABASE {name}")
        return name

    def drop_db(self, name: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as c:
            c.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def remove(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.base, ignore_errors=True)


def start_server() -> PgServer:
    """initdb + start; the caller must :meth:`PgServer.remove` it."""
    b = bindir()
    if b is None:
        raise RuntimeError("PostgreSQL is not installed (Debian package 'postgresql'; scripts/install.sh adds it)")
    pg = pwd.getpwnam("postgres")
    base = Path(tempfile.mkdtemp(prefix="nbE-pg-", dir="/tmp"))
    os.chmod(base, 0o755)
    os.chown(base, pg.pw_uid, pg.pw_gid)
    (base / "sock").mkdir(mode=0o700)
    os.chown(base / "sock", pg.pw_uid, pg.pw_gid)
    password = secrets.token_urlsafe(12)
    pwfile = base / "pw"
    pwfile.write_text(password + "\n")
    os.chown(pwfile, pg.pw_uid, pg.pw_gid)
    os.chmod(pwfile, 0o600)
    srv = PgServer(base, b, password)
    r = srv._as_postgres(str(b / "initdb"), "-D", str(srv.data), "-U", USER, f"--pwfile={pwfile}",
                         "--auth=scram-sha-256", "-E", "UTF8", "--no-sync", "--locale=C", timeout=120)
    pwfile.unlink()
    if r.returncode != 0:
        shutil.rmtree(base, ignore_errors=True)
        raise RuntimeError(f"initdb failed: {r.stdout}{r.stderr}")
    try:
        srv.start()
    except BaseException:
        shutil.rmtree(base, ignore_errors=True)
        raise
    return srv
