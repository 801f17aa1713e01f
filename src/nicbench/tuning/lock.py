"""The tuning lock: held while a run's tuning is in force."""

from __future__ import annotations

import fcntl
import os

from ..core.errors import InputError
from .restorefile import restore_dir


class TuningLock:
    """Held by a run while its tuning is in force, so a 'nicbench tune apply'
    or 'tune restore' from another shell cannot change settings under it.
    An flock: released by the kernel if the holder dies, so a crash never
    leaves it stuck (the restore files then do their job)."""

    def __init__(self) -> None:
        self.fd: int | None = None

    def path(self) -> str:
        return os.path.join(restore_dir(), ".lock")

    def acquire(self, what: str) -> TuningLock:
        os.makedirs(restore_dir(), mode=0o700, exist_ok=True)
        fd = os.open(self.path(), os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 200).decode(errors="replace").strip()
            os.close(fd)
            raise InputError(f"tuning is in use by another nicbench ({holder or 'unknown'})", where=what,
                             hint="wait for that run to finish; it restores its tuning itself") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}: {what}".encode())
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)          # closing drops the flock
            self.fd = None
