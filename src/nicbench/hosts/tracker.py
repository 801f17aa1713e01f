"""A durable record of every process nicbench starts (in a lab, or the ssh clients of real hosts).

Each spawn appends ``host pid starttime`` to a file under the lab's state
directory *before* anything waits on it, so a crashed nicbench leaves a list
that ``nicbench lab down`` can act on.  ``starttime`` (field 22 of
/proc/PID/stat) guards against killing an unrelated process that reused a PID.
Processes are killed by process group (every tool is its group's leader).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path


def state_root() -> Path:
    """Where nicbench keeps what must survive a crash of its own process
    (tracked PIDs, lab state): ``$NICBENCH_STATE_DIR`` or ``/run/nicbench``."""
    return Path(os.environ.get("NICBENCH_STATE_DIR", "/run/nicbench"))


def proc_starttime(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # comm may contain spaces: fields after the last ')' are positional
    rest = stat.rsplit(")", 1)[1].split()
    return rest[19] if len(rest) > 19 else None


class ProcessTracker:
    def __init__(self, path: Path):
        self.path = path

    def add(self, host: str, pid: int) -> None:
        st = proc_starttime(pid) or "?"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a") as f:
            f.write(f"{host} {pid} {st}\n")
            f.flush()
            os.fsync(f.fileno())

    def entries(self) -> list[tuple[str, int, str]]:
        try:
            lines = self.path.read_text().splitlines()
        except FileNotFoundError:
            return []
        out = []
        for ln in lines:
            parts = ln.split()
            if len(parts) == 3 and parts[1].isdigit():
                out.append((parts[0], int(parts[1]), parts[2]))
        return out

    def alive(self) -> list[tuple[str, int]]:
        return [(h, pid) for h, pid, st in self.entries() if proc_starttime(pid) == st]

    def kill_all(self) -> list[int]:
        """SIGKILL every tracked process group that is still the one we started."""
        killed = []
        for _host, pid in self.alive():
            try:
                os.killpg(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
            except PermissionError:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except OSError:
                    pass
        return killed

    def clear(self) -> None:
        self.path.unlink(missing_ok=True)
