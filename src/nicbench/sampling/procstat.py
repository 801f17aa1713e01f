"""Per-CPU time from /proc/stat, per-process CPU from /proc/PID/stat (pure).

/proc/stat counts in USER_HZ ticks (100 per second on Linux, whatever the
kernel's HZ).  Columns: user nice system idle iowait irq softirq steal guest
guest_nice; old kernels print fewer (2.6.11+: 8, 2.6.24+: 9, 2.6.33+: 10).
Missing columns are taken as 0.  A CPU may appear or vanish between two
reads (hot-plug): only CPUs present in both count.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..records import CPU_BUSY, CPU_STATES

USER_HZ = 100
STATES = CPU_STATES
BUSY = CPU_BUSY


@dataclass(frozen=True)
class CpuTimes:
    cpu: str                  # "cpu" for the total line, "0", "1", ... per CPU
    ticks: dict[str, int]


def parse_proc_stat(text: str) -> dict[str, CpuTimes]:
    """Every ``cpuN`` line (and the ``cpu`` total as key "all")."""
    out: dict[str, CpuTimes] = {}
    for line in text.splitlines():
        if not line.startswith("cpu"):
            continue
        f = line.split()
        name = f[0][3:] or "all"
        try:
            vals = [int(x) for x in f[1:]]
        except ValueError:
            continue
        out[name] = CpuTimes(name, {s: (vals[i] if i < len(vals) else 0) for i, s in enumerate(STATES)})
    return out


def cpu_deltas(a: dict[str, CpuTimes], b: dict[str, CpuTimes], hz: int = USER_HZ) -> dict[str, dict[str, float]]:
    """Seconds spent in each state per CPU between two reads; ``hz``: ticks
    per second (USER_HZ for /proc/stat, ``stathz`` for FreeBSD's kern.cp_times).

    A CPU whose counters went backwards (it was offlined and came back, or
    the counter reset) is left out for that span rather than guessed.  A
    state one of the reads lacks (FreeBSD has no iowait, softirq or steal)
    is left out, not taken as 0.
    """
    out = {}
    for cpu in a.keys() & b.keys():
        d = {s: (b[cpu].ticks[s] - a[cpu].ticks[s]) / hz for s in STATES
             if s in a[cpu].ticks and s in b[cpu].ticks}
        if any(v < 0 for v in d.values()):
            continue
        out[cpu] = d
    return out


@dataclass(frozen=True)
class ProcCpu:
    pid: int
    comm: str
    utime: float              # seconds
    stime: float              # seconds
    processor: int | None = None   # the CPU it last ran on (field 39)


def parse_pid_stat(text: str) -> ProcCpu:
    """utime/stime of one process from /proc/PID/stat (comm may hold spaces)."""
    head, _, rest = text.rpartition(")")
    pid_s, _, comm = head.partition(" (")
    f = rest.split()
    # rest starts at field 3 (state); utime and stime are fields 14 and 15,
    # the CPU it last ran on field 39 (absent before Linux 2.2.8)
    return ProcCpu(int(pid_s), comm, int(f[11]) / USER_HZ, int(f[12]) / USER_HZ,
                   int(f[36]) if len(f) > 36 and f[36].lstrip("-").isdigit() else None)


def cpus_allowed(status_text: str) -> str | None:
    """``Cpus_allowed_list`` of /proc/PID/status: the CPUs a process may run on."""
    for line in status_text.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return None
