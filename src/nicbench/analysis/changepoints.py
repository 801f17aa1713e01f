"""Where a series of runs changed level: change points over a point's history.

The detector is ruptures' PELT for a piecewise-constant mean
(``KernelCPD(kernel="linear")``: the l2 cost, solved exactly in C) -- not a
detector of nicbench's own.  Around it, nicbench decides only what a lab's
runs need:

- **scale**: the series is divided by its noise, estimated robustly from
  the median absolute difference of successive runs (a step moves one
  difference, not the median of them), so one penalty serves Gbit/s,
  microseconds and CPU seconds alike;
- **penalty** ``PENALTY * ln(n)`` per change point (a BIC-like penalty, grown
  with the series so a long history does not find a step in every stretch of
  noise);
- **confirmation**: each change point PELT proposes is kept only when the
  runs of the segments on either side differ by Welch's t-test at
  ``MAX_P`` (each side's variance no lower than the series' noise) and by at least ``MIN_STEP`` of the level before it.

Why ruptures (see ARCHITECTURE.md, "Change points"): it installs from
wheels with only numpy and scipy, is maintained, and its C PELT takes a
2,000-run series in milliseconds; Apache Otava pins numpy and scipy to
versions older than nicbench's and brings BigQuery and Slack clients along;
MongoDB's signal-processing-algorithms needs numpy < 2 and ships no wheel;
FD.io's jumpavg is pure Python and quadratic in the run count.
The thresholds are below, each with its reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import ruptures
from scipy import special

# the penalty per change point, times ln(n), in units of the noise squared:
# simulated on noise with no step (Gaussian, Laplace and Student t with 3
# degrees of freedom; n = 6 to 2,000), PELT alone at 4 ln(n) proposes a false
# step in 1-4 % of series; with the t-test below, 0.1 % of 7,200 series of
# 8 to 100 runs at 1-10 % noise had one (0.6 % at 3 ln(n)).  Still found: a
# 15 % step under 10 % noise with 30 runs each side (7 times in 10), a 50 %
# drop for 3 runs under 3 % noise between 3-run stretches (9 in 10)
PENALTY = 4.0
# the t-test every proposed step must pass: 0.001, so 36 points of a plan
# checked at once give less than one false step in 25 checks from this test
MAX_P = 0.001
# a step smaller than this share of the level before it is not reported: far
# below the run-to-run scatter of a lab (+-10 % on this VM, LAB-NOTES), so a
# real regression is never hidden by it, while a long quiet history cannot
# flag a 0.3 % wobble that its tiny noise makes "significant"
MIN_STEP = 0.02
# runs on each side of a change at least: one run is an outlier, not a level
MIN_RUNS = 2
# the noise is never taken below this share of the series' level: a series
# of identical figures (a counter at 0, a saturated link) has no noise to
# divide by
NOISE_FLOOR = 1e-6


@dataclass(frozen=True)
class Segment:
    """Runs ``start`` to ``end`` (exclusive) of a series, at one level."""

    start: int
    end: int
    median: float
    low: float            # the spread: lowest and highest run of the segment
    high: float

    @property
    def n(self) -> int:
        return self.end - self.start


@dataclass(frozen=True)
class ChangePoint:
    """A change of level at run ``index`` (the first run of the new level)."""

    index: int
    before: Segment
    after: Segment
    p_value: float                # Welch's t-test of the runs of the two segments
    higher_is_better: bool

    @property
    def step(self) -> float:
        """after - before, in the series' unit (medians of the segments)."""
        return self.after.median - self.before.median

    @property
    def step_pct(self) -> float | None:
        """The step as a percentage of the level before it (None when that is 0)."""
        if self.before.median == 0:
            return None
        return 100.0 * self.step / abs(self.before.median)

    @property
    def direction(self) -> str:
        """``regression`` (a drop when higher is better, a rise when lower is) or ``improvement``."""
        return "regression" if (self.step < 0) == self.higher_is_better else "improvement"


def noise(values: Sequence[float] | np.ndarray) -> float:
    """The series' noise (one standard deviation) from the median absolute
    difference of successive values (x 1.4826 / sqrt 2: a normal's standard
    deviation), floored at :data:`NOISE_FLOOR` of its level."""
    x = np.asarray(values, dtype=float)
    level = abs(float(np.median(x))) if len(x) else 0.0
    floor = NOISE_FLOOR * level if level > 0 else NOISE_FLOOR
    if len(x) < 2:
        return floor
    mad = float(np.median(np.abs(np.diff(x))))
    return max(1.4826 * mad / math.sqrt(2.0), floor)


def _segment(x: np.ndarray, start: int, end: int) -> Segment:
    part = x[start:end]
    return Segment(start, end, float(np.median(part)), float(part.min()), float(part.max()))


def _p_value(a: np.ndarray, b: np.ndarray, sd: float) -> float:
    """Welch's t-test of ``a`` against ``b``, each side's variance taken no
    lower than the series' noise ``sd`` squared: two or three runs that
    happen to agree closely would otherwise make any difference look certain."""
    va = max(float(a.var(ddof=1)) if len(a) > 1 else 0.0, sd * sd) / len(a)
    vb = max(float(b.var(ddof=1)) if len(b) > 1 else 0.0, sd * sd) / len(b)
    t = abs(float(b.mean()) - float(a.mean())) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va * va / max(len(a) - 1, 1) + vb * vb / max(len(b) - 1, 1))
    return float(2.0 * special.stdtr(df, -t))       # Student's t, both tails


def find(values: Sequence[float], *, higher_is_better: bool = True, penalty: float = PENALTY,
         max_p: float = MAX_P, min_step: float = MIN_STEP, min_runs: int = MIN_RUNS) -> list[ChangePoint]:
    """The change points of ``values`` (oldest first; every value a run's
    figure, none missing), oldest first.  A step PELT proposes that fails the
    t-test or ``min_step`` is merged into its neighbours and the rest are
    judged again, so every change point kept is between the levels that
    stand on either side of it."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n < 2 * min_runs:
        return []
    sd = noise(x)
    z = (x - float(np.median(x))) / sd
    breaks = ruptures.KernelCPD(kernel="linear", min_size=min_runs).fit(z).predict(pen=penalty * math.log(n))
    edges = [0, *[int(b) for b in breaks[:-1]], n]
    while True:
        weakest: tuple[float, int] | None = None
        for i in range(1, len(edges) - 1):
            a, b = x[edges[i - 1]:edges[i]], x[edges[i]:edges[i + 1]]
            p = _p_value(a, b, sd)
            before, after = float(np.median(a)), float(np.median(b))
            small = before != 0 and abs(after - before) < min_step * abs(before)
            if (p >= max_p or small) and (weakest is None or p > weakest[0]):
                weakest = (p, i)
        if weakest is None:
            break
        del edges[weakest[1]]          # the least convincing first: its neighbours may stand once merged
    return [ChangePoint(edges[i], _segment(x, edges[i - 1], edges[i]), _segment(x, edges[i], edges[i + 1]),
                        _p_value(x[edges[i - 1]:edges[i]], x[edges[i]:edges[i + 1]], sd), higher_is_better)
            for i in range(1, len(edges) - 1)]
