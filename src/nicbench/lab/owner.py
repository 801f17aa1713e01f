"""Who made a lab, so ``nicbench lab down --all`` removes only this user's labs.

The owner is recorded in the lab's state file when it is built: the user
(the one behind sudo when there is one: ``SUDO_UID``, since the lab needs
root either way), and the process that built it, so a lab a run is still
using is not pulled from under it.  Labs without an owner (built before
owners were recorded, or leftovers whose state file is gone) are nobody's:
only ``--force`` or naming them removes them.
"""

from __future__ import annotations

import os
import pwd
from dataclasses import dataclass
from typing import Any

from ..hosts.tracker import proc_starttime


def _user(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def me() -> int:
    """The uid of the person running nicbench: sudo's caller if under sudo, else the process's."""
    sudo = os.environ.get("SUDO_UID", "")
    return int(sudo) if sudo.isdigit() else os.getuid()


def record(purpose: str) -> dict[str, Any]:
    """The owner entry of a lab built now, by this process, for ``purpose`` ("run" or "lab up")."""
    uid = me()
    pid = os.getpid()
    return {"uid": uid, "user": _user(uid), "pid": pid, "pid_start": proc_starttime(pid), "purpose": purpose}


@dataclass(frozen=True)
class Ownership:
    """What ``lab down --all`` needs to know of a lab."""

    name: str
    owner: dict[str, Any] | None        # None: not recorded (older lab, or no state file)

    @property
    def mine(self) -> bool:
        return self.owner is not None and self.owner.get("uid") == me()

    @property
    def in_use(self) -> bool:
        """A run (another process) that built the lab is still running."""
        o = self.owner or {}
        pid = o.get("pid")
        if o.get("purpose") != "run" or not isinstance(pid, int) or pid == os.getpid():
            return False
        return proc_starttime(pid) is not None and proc_starttime(pid) == o.get("pid_start")

    def who(self) -> str:
        if self.owner is None:
            return "owner not recorded"
        o = self.owner
        by = f"{o.get('user', o.get('uid'))}'s {o.get('purpose', 'nicbench')}"
        return by + (f", still running as pid {o.get('pid')}" if self.in_use else "")

    def why_not(self) -> str | None:
        """Why ``--all`` leaves this lab alone, or None if it removes it."""
        if not self.mine:
            return self.who()
        if self.in_use:
            return f"in use by a run ({self.who()})"
        return None
