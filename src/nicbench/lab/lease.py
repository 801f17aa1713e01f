"""A lab's lease: the one run using it, held for the run's whole life.

``<state>/labs/<name>.lease`` is locked with ``flock`` by the run that uses
the lab, before it builds or reuses the lab, and stays locked (its file
descriptor open) until the run has cleaned up.  The kernel drops the lock
when the process dies however it dies, so a lease is never left behind by a
``kill -9``.  The file says who holds it (pid, plan, run id once the run has
one) for the message a second run gets: it is refused before it starts or
touches anything, the first run's processes included.

Every host of the lab is leased too, through its own transport (see
``hosts.lease``): the lab's lease keeps two runs off one lab (whose namespaces
only it names: two labs never share a namespace name), the host leases keep
any two runs, from any controller, off one host.
"""

from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from ..core.errors import PreflightError
from ..hosts.tracker import proc_starttime, state_root


def lease_path(lab: str) -> Path:
    return state_root() / "labs" / f"{lab}.lease"


def holder(lab: str) -> dict[str, Any] | None:
    """Who holds the lease of ``lab`` now (None: nobody; the file is only
    trusted while its lock is held, so a dead holder's file means nothing)."""
    path = lease_path(lab)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read(path) or {}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _read(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text() or "null")
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def describe(doc: dict[str, Any]) -> str:
    """``run RUN_ID (pid N, plan P, since HH:MM:SS)`` as far as the holder wrote it."""
    run = doc.get("run_id") or "still starting (no run id yet)"
    since = time.strftime("%H:%M:%S", time.localtime(doc["since"])) if isinstance(doc.get("since"), float) else "?"
    return f"run {run} (pid {doc.get('pid', '?')}, plan {doc.get('plan', '?')}, since {since})"


class Lease:
    """The lease of one lab, held by this process until :meth:`release`."""

    def __init__(self, lab: str, fd: int, doc: dict[str, Any]):
        self.lab = lab
        self._fd: int | None = fd
        self._doc = doc

    @classmethod
    def take(cls, lab: str, plan: str, wait: float | None = None, poll: float = 1.0) -> Lease:
        """Lock the lab for this run, or raise PreflightError naming the run
        that has it; with ``wait`` (seconds), first wait up to that long for it."""
        path = lease_path(lab)
        path.parent.mkdir(parents=True, exist_ok=True)
        deadline = None if wait is None else time.monotonic() + wait
        told = False
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                os.close(fd)
                doc = _read(path) or {}
                left = None if deadline is None else deadline - time.monotonic()
                if left is None or left <= 0:
                    waited = f" after waiting {wait:g}s" if wait is not None else ""
                    raise PreflightError(f"the lab is in use{waited} by {describe(doc)}; nothing was started or "
                                         "stopped", where=f"lab {lab}",
                                         hint="wait for that run to end (or run with --wait [SECONDS] to queue), "
                                              "or give this plan another [lab] name") from None
                if not told:
                    print(f"nicbench: waiting up to {wait:g}s for lab {lab} (in use by {describe(doc)})",
                          file=sys.stderr)
                    told = True
                time.sleep(min(poll, left))
            except BaseException:
                os.close(fd)
                raise
        pid = os.getpid()
        lease = cls(lab, fd, {"pid": pid, "pid_start": proc_starttime(pid), "plan": plan, "since": time.time()})
        lease._write()
        return lease

    def note_run(self, run_id: str) -> None:
        """The run's id, once it has one (for the message a second run gets)."""
        self._doc["run_id"] = run_id
        self._write()

    def _write(self) -> None:
        if self._fd is None:
            return
        data = json.dumps(self._doc).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, data, 0)

    def release(self) -> None:
        """Unlock (the file stays: removing it would race a run taking it)."""
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        os.close(fd)        # closing the last descriptor drops the flock
