"""CPU cost over a point's window: whole machine, per CPU, per tool process.

Cores busy = the sum over CPUs of the fraction of each CPU's accounted time
spent in user + nice + system + irq + softirq (steal is another guest's work,
iowait is idle).  The
stack's softirq work on other cores is included, which a tool's own figure
(iperf3 counts only itself) misses.  Derived: Gbps per busy core, CPU-seconds
per GB (10^9 bytes), and cycles per byte, which on this VM (no hardware
counters) can only be *estimated* from the nominal MHz: cycles/byte =
busy-seconds x MHz x 10^6 / bytes.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from ..records import CPU_BUSY as BUSY
from ..records import Sample

SATURATED = 0.95
NOT_READ = "no read covered it"


@dataclass(frozen=True)
class CpuUsage:
    host: str
    window: tuple[float, float]
    cpus: int
    per_cpu: dict[str, dict[str, float]]      # cpu -> state -> fraction of the window
    cores_busy: float
    busiest_cpu: str
    busiest: float                            # fraction of that CPU's time busy
    busiest_state: str                        # the busy state it spends most time in
    tools: dict[str, float] = field(default_factory=dict)   # "role host proc" -> cores (user+system)
    # cpu -> (fraction of the window it was sampled, why not the rest): CPUs
    # offline for part of the window, or whose counters went backwards
    gaps: dict[str, tuple[float, str]] = field(default_factory=dict)
    cpus_present: float | None = None         # CPUs x fraction of the window each was sampled

    @property
    def percent_of_machine(self) -> float:
        """Busy share of the CPU time that was there: a CPU offline for half the
        window counts half, one absent all along not at all."""
        present = self.cpus_present if self.cpus_present is not None else self.cpus
        return 100.0 * self.cores_busy / present if present else 0.0


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def cpu_usage(samples: Iterable[Sample], window: tuple[float, float], host: str | None = None) -> CpuUsage | None:
    """None when no CPU sample overlaps the window.  Parts of the window no read
    covers are never dropped silently: each CPU's gap is in ``gaps`` with why
    (offline, counters that went backwards, or reads that did not cover it)."""
    w0, w1 = window
    secs = w1 - w0
    if secs <= 0:
        return None
    if cpu_unmeasured(samples, window, host) is not None:
        return None
    cpu_s = [x for x in samples if x.metric == "cpu.time" and (host is None or x.tag("host") == host)
             and _overlap(x.t_start, x.t_end, w0, w1) > 0]
    acc: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for x in cpu_s:
        if x.t_end > x.t_start:
            acc[x.tag("cpu") or "?"][x.tag("state") or "?"] += x.value * _overlap(x.t_start, x.t_end, w0, w1) \
                / (x.t_end - x.t_start)
    # Fractions of the time each CPU had accounted, as mpstat and top compute
    # them: on this VM /proc/stat's states summed to 7 % less than wall time
    # over a few seconds (tick accounting lags), so dividing by wall seconds
    # would understate every state.
    per: dict[str, dict[str, float]] = {}
    for c, st in acc.items():
        total = sum(st.values())
        if total > 0:
            per[c] = {k: v / total for k, v in st.items()}
    if not per:
        return None
    # how much of the window each CPU was sampled: its busy share counts for
    # that time only, and the gaps are said (never silently one whole core)
    covered: dict[str, float] = defaultdict(float)
    # sorted: a set of strings iterates in a per-process hash order, and float
    # sums in another order differ in their last digit from run to run
    for c0, c1, c in sorted({(x.t_start, x.t_end, x.tag("cpu") or "?") for x in cpu_s}):
        covered[c] += _overlap(c0, c1, w0, w1) / secs
    reasons: dict[str, str] = {}
    for x in samples:
        if x.metric == "cpu.gap" and (host is None or x.tag("host") == host) and _overlap(x.t_start, x.t_end, w0, w1):
            reasons.setdefault(x.tag("cpu") or "?", x.tag("reason") or NOT_READ)
    share = {c: min(1.0, covered.get(c, 0.0)) for c in per}
    gaps = {c: (share.get(c, 0.0), reasons.get(c, NOT_READ)) for c in set(per) | set(reasons)
            if share.get(c, 0.0) < 0.99}
    busy = {c: sum(st.get(s, 0.0) for s in BUSY) for c, st in per.items()}
    busiest = max(busy, key=lambda c: busy[c])
    top = max(BUSY, key=lambda s: per[busiest].get(s, 0.0))
    # an offline CPU's busy share counts for the time it was there; a CPU that
    # was there but unread for a while (a missed or backwards read) is taken at
    # its share over the time it was read -- either way the gap is said
    weight = {c: share[c] if reasons.get(c) == "offline" else 1.0 for c in per}
    tools: dict[str, float] = defaultdict(float)
    for x in samples:
        if x.metric == "proc.cpu" and x.t_end > x.t_start:
            key = f"{x.tag('role')} {x.tag('host')} {x.tag('proc')}"
            tools[key] += x.value * _overlap(x.t_start, x.t_end, w0, w1) / (x.t_end - x.t_start) / secs
    return CpuUsage(cpu_s[0].tag("host") or "?", window, len(set(per) | set(reasons)),
                    {c: dict(v) for c, v in per.items()}, sum(busy[c] * weight[c] for c in busy), busiest,
                    busy[busiest], top, dict(tools), gaps, sum(weight.values()))


# the least share of a point's window the CPU reads must cover for its CPU
# cost to be given: a gap inside it (a read missed or gone backwards on every
# CPU at once) is said and bridged; a window mostly unread is not measured
MIN_COVER = 0.75


def cpu_unmeasured(samples: Iterable[Sample], window: tuple[float, float], host: str | None = None) -> str | None:
    """Why the CPU cost over ``window`` is not given (None: it is): no CPU
    read at all, or reads covering under :data:`MIN_COVER` of the window."""
    w0, w1 = window
    if w1 <= w0:
        return "the window is empty"
    spans = sorted({(x.t_start, x.t_end) for x in samples if x.metric == "cpu.time"
                    and (host is None or x.tag("host") == host) and _overlap(x.t_start, x.t_end, w0, w1) > 0})
    if not spans:
        return "no CPU read covered the window"
    covered, reach = 0.0, w0
    for a, b in spans:
        lo, hi = max(a, reach), min(b, w1)
        if hi > lo:
            covered += hi - lo
            reach = hi
    if covered < MIN_COVER * (w1 - w0):
        return (f"the CPU reads covered {covered / (w1 - w0):.0%} of the window "
                f"({covered:.2f} of {w1 - w0:.2f} s; at least {MIN_COVER:.0%} is needed)")
    return None


def cpu_notes(samples: Sequence[Sample], window: tuple[float, float], u: CpuUsage | None) -> list[str]:
    """The warnings of a point's CPU figures: :func:`cpu_warnings`, or why its
    CPU cost is not given when CPU reads were made but do not cover its window
    (a run with no CPU reads at all, an import, says nothing)."""
    if u is not None:
        return cpu_warnings(u)
    if not any(x.metric == "cpu.time" for x in samples):
        return []
    return [f"CPU cost not given: {cpu_unmeasured(samples, window)}"]


def cpu_warnings(u: CpuUsage) -> list[str]:
    """Warnings that name the fix."""
    out = []
    if u.busiest >= SATURATED:
        share = {s: u.per_cpu[u.busiest_cpu].get(s, 0.0) for s in BUSY}
        if u.busiest_state == "softirq":
            out.append(f"CPU {u.busiest_cpu} {u.busiest * 100:.0f}% busy, mostly softirq "
                       f"({share['softirq'] * 100:.0f}%): CPU-bound in the network stack; spread IRQs "
                       "over more cores / add queues (RSS)")
        else:
            out.append(f"CPU {u.busiest_cpu} {u.busiest * 100:.0f}% busy, mostly {u.busiest_state}: "
                       "the host is CPU-bound at this point")
    for c, (frac, why) in sorted(u.gaps.items()):
        out.append(f"CPU {c} was sampled over {frac * 100:.0f}% of the window ({why}): "
                   + ("its share counts for that time only" if why == "offline" else
                      "its share over that time stands for the window"))
    for tool, cores in sorted(u.tools.items()):
        if cores >= SATURATED:
            out.append(f"{tool} used {cores * 100:.0f}% of one core: the engine is single-threaded here; "
                       "add processes or client hosts (TCP: study.streams_per_process)")
    return out


@dataclass(frozen=True)
class Efficiency:
    cores_busy: float
    gbps_per_core: float | None
    cpu_s_per_gb: float | None
    cycles_per_byte: float | None             # estimated from nominal MHz; None when unknown


def efficiency(u: CpuUsage, gbps: float, mhz: float | None) -> Efficiency:
    bytes_per_s = gbps * 1e9 / 8
    return Efficiency(
        u.cores_busy,
        gbps / u.cores_busy if u.cores_busy > 0 else None,
        u.cores_busy / (bytes_per_s / 1e9) if bytes_per_s > 0 else None,
        u.cores_busy * mhz * 1e6 / bytes_per_s if (mhz and bytes_per_s > 0) else None)
