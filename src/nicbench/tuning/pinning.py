"""The pinning row of any host: which CPUs (the plan's, or the NIC's NUMA
node/domain), and the launcher that pins the tools there -- taskset or numactl
on Linux, cpuset on FreeBSD.  The OS parts come in as two functions, the rule
(unknown CPUs, a launcher missing, the prefix recorded in ``out``) is one."""

from __future__ import annotations

from collections.abc import Callable

from .profile import Pinning
from .types import Row, Target, TuningPlan

# (host) -> (CPU list, how found) or (None, why not)
CpusOf = Callable[[Target], tuple[str | None, str]]
# (host, setting, CPUs) -> (launch prefix, a note) or (None, why it cannot pin)
Launcher = Callable[[Target, Pinning, str], tuple[list[str] | None, str]]


def pin_row(t: Target, s: Pinning, out: TuningPlan, cpus_of: CpusOf, launcher: Launcher) -> Row:
    """The row; a pinning in force goes into ``out.pin`` and ``out.pin_cpus``."""
    cpus, how = (s.cpus, "as given") if s.policy == "cpus" else cpus_of(t)
    if not cpus:
        return Row(t.host, "pinning", "pinning", None, None, "unknown", how, "process")
    prefix, note = launcher(t, s, cpus)
    if prefix is None:
        return Row(t.host, "pinning", "pinning", None, cpus, "unsupported", note, "process")
    out.pin_cpus[t.host] = cpus
    out.pin[t.host] = prefix
    return Row(t.host, "pinning", "pinning", None, cpus, "ok",
               f"tools launched under {' '.join(prefix)} ({how})" + (f"; {note}" if note else ""), "process")


def has(t: Target, command: str) -> bool:
    return t.transport.run(["sh", "-c", f"command -v {command}"], timeout=15).returncode == 0
