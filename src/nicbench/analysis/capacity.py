"""A capacity model: the cores a host would need to carry a faster link at
the cost per byte a point measured (what the seeds' CPU columns are for).

From each ok repeat of a point: the cores busy over its window (every
state, softirq included: the stack's work on other cores counts) per Gbit/s
of goodput; the point's cost is the median over its repeats.  Scaled to
:data:`TARGETS_GBPS` under one stated assumption: cost linear in rate at the
same cost per byte (same IO size, same stack, no new bottleneck).  Withheld,
with why, where the cost was not measured cleanly: no CPU over the window, a
CPU not sampled over all of it, or a rate that was not steady.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from .cpu import CpuUsage

TARGETS_GBPS = (100, 200, 400, 800)
# a rate whose per-interval coefficient of variation is above this was not at
# one steady rate: its cost per byte mixes several operating points
STEADY_CV = 0.10
ASSUMPTION = ("linear in rate at the cost per byte measured at this point (same IO size, same stack, "
              "no new bottleneck); cores of every CPU state, softirq included")


@dataclass(frozen=True)
class Repeat:
    """What one ok repeat measured: goodput (Gbit/s), its CPU over the same
    window, and the goodput per interval bin inside the window."""

    gbps: float
    cpu: CpuUsage | None
    series: Sequence[float] = ()


@dataclass(frozen=True)
class Capacity:
    """Cores per Gbit/s and the cores at each target rate; or ``withheld``."""

    host: str | None
    cores_per_gbps: float | None
    cores_at: dict[int, float]
    withheld: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {"host": self.host, "cores_per_gbps": self.cores_per_gbps,
                "cores_at": {str(k): v for k, v in self.cores_at.items()}, "withheld": self.withheld,
                "assumption": ASSUMPTION}


def _cv(values: Sequence[float]) -> float | None:
    vals = [v for v in values if v is not None]
    if len(vals) < 3:
        return None
    mean = statistics.fmean(vals)
    return statistics.pstdev(vals) / mean if mean > 0 else None


def capacity(repeats: Sequence[Repeat]) -> Capacity | None:
    """The point's capacity model over its ok repeats (None: no repeat)."""
    if not repeats:
        return None
    host = next((r.cpu.host for r in repeats if r.cpu is not None), None)
    if any(r.cpu is None for r in repeats):
        return Capacity(host, None, {}, "no CPU measured over the window of every repeat")
    gaps = sorted({f"CPU {c} {share * 100:.0f}% ({why})" for r in repeats if r.cpu
                   for c, (share, why) in r.cpu.gaps.items()})
    if gaps:
        return Capacity(host, None, {}, "a CPU was not sampled over the whole window: " + ", ".join(gaps))
    unsteady = [cv for r in repeats if (cv := _cv(r.series)) is not None and cv > STEADY_CV]
    if unsteady:
        return Capacity(host, None, {}, f"the rate was not steady over the window (its per-interval variation "
                                        f"{max(unsteady) * 100:.0f}% > {STEADY_CV * 100:.0f}%)")
    costs = [r.cpu.cores_busy / r.gbps for r in repeats if r.cpu is not None and r.gbps > 0]
    if not costs:
        return Capacity(host, None, {}, "no goodput to divide by")
    cost = statistics.median(costs)
    return Capacity(host, cost, {t: cost * t for t in TARGETS_GBPS})
