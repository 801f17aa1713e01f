"""An A/B of two configurations run interleaved on the same hosts: per
point, whether B is better, worse, or not different at this confidence.

Method: each side's figures are one value per repeat (its study's headline,
e.g. Gbit/s); the difference is B's mean less A's, as a share of A's mean,
with a :data:`CONFIDENCE` interval from Welch's t (unequal variances,
Welch-Satterthwaite degrees of freedom; A's mean taken as exact in the
denominator).  B is called better (worse) only when the interval excludes
zero on that side *and* the difference is at least :data:`MIN_EFFECT`: on
a shaped link two identical configurations differ by up to ~1 % from the
tbf's jitter and where each window falls, and a smaller change is not one
tuning is worth making for.  Interleaving (ABBA, the order alternating over
rounds) is what makes the two sides comparable; this module only judges
the figures it is given.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scipy import stats

CONFIDENCE = 0.95
MIN_EFFECT = 0.02
METHOD = (f"Welch's t interval ({CONFIDENCE:.0%}) on the difference of the means, as a share of A's mean; "
          f"better or worse only outside zero and by at least {MIN_EFFECT:.0%}")

BETTER, WORSE, SAME, UNTESTED = "B better", "B worse", "no difference", "not tested"


@dataclass(frozen=True)
class PointAB:
    """One point of an A/B: both sides' values and verdicts, the difference."""

    point: str
    a: tuple[float, ...]
    b: tuple[float, ...]
    median_a: float | None
    median_b: float | None
    diff: float | None            # (mean B - mean A) / mean A
    low: float | None             # its confidence interval, same unit
    high: float | None
    outcome: str                  # BETTER | WORSE | SAME | UNTESTED
    why: str                      # one line: the figures the outcome rests on
    limit_a: str | None = None    # each side's verdict (what held the point)
    limit_b: str | None = None

    @property
    def limit_moved(self) -> bool:
        return self.limit_a is not None and self.limit_b is not None and self.limit_a != self.limit_b

    def as_dict(self) -> dict[str, Any]:
        return {"point": self.point, "a": list(self.a), "b": list(self.b), "median_a": self.median_a,
                "median_b": self.median_b, "diff": self.diff, "low": self.low, "high": self.high,
                "outcome": self.outcome, "why": self.why, "limit_a": self.limit_a, "limit_b": self.limit_b,
                "limit_moved": self.limit_moved}


def _pct(x: float) -> str:
    return f"{x * 100:+.1f} %"


def point_ab(point: str, a: Sequence[float], b: Sequence[float], *, higher_is_better: bool = True,
             limit_a: str | None = None, limit_b: str | None = None) -> PointAB:
    """One point's comparison (values: one per ok repeat of each side)."""
    va, vb = tuple(float(x) for x in a), tuple(float(x) for x in b)
    ma = statistics.median(va) if va else None
    mb = statistics.median(vb) if vb else None

    def made(diff: float | None, low: float | None, high: float | None, outcome: str, why: str) -> PointAB:
        return PointAB(point, va, vb, ma, mb, diff, low, high, outcome, why, limit_a, limit_b)

    if len(va) < 2 or len(vb) < 2:
        return made(None, None, None, UNTESTED, f"needs 2 ok repeats a side for an interval (A {len(va)}, "
                                                f"B {len(vb)})")
    mean_a, mean_b = statistics.fmean(va), statistics.fmean(vb)
    if mean_a == 0:
        return made(None, None, None, UNTESTED, "A's mean is 0: no share to state")
    sa, sb = statistics.variance(va) / len(va), statistics.variance(vb) / len(vb)
    d = mean_b - mean_a
    se = math.sqrt(sa + sb)
    if se == 0:
        half = 0.0
    else:
        df = (sa + sb) ** 2 / ((sa * sa) / (len(va) - 1) + (sb * sb) / (len(vb) - 1))
        half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, df)) * se
    diff, low, high = d / mean_a, (d - half) / abs(mean_a), (d + half) / abs(mean_a)
    up = low > 0 and diff >= MIN_EFFECT
    down = high < 0 and diff <= -MIN_EFFECT
    if up or down:
        outcome = BETTER if up == higher_is_better else WORSE
    else:
        outcome = SAME
    interval = f"{_pct(diff)} [{_pct(low)}, {_pct(high)}]"
    if outcome == SAME:
        why = (f"{interval}: the interval holds zero" if low <= 0 <= high else
               f"{interval}: under the {MIN_EFFECT:.0%} a change must reach")
    else:
        why = f"{interval}: " + ("higher" if up else "lower") + (" is better" if outcome == BETTER else " is worse")
    return made(diff, low, high, outcome, why)


@dataclass(frozen=True)
class ABResult:
    metric: str
    higher_is_better: bool
    points: tuple[PointAB, ...]

    @property
    def b_won(self) -> bool:
        """B better at some point and worse at none."""
        return any(p.outcome == BETTER for p in self.points) and not any(p.outcome == WORSE for p in self.points)

    @property
    def summary(self) -> str:
        n = {o: sum(p.outcome == o for p in self.points) for o in (BETTER, WORSE, SAME, UNTESTED)}
        moved = sum(p.limit_moved for p in self.points)
        head = "B won" if self.b_won else "B did not win"
        return (f"{head}: better at {n[BETTER]}, worse at {n[WORSE]}, no difference at {n[SAME]}"
                + (f", not tested at {n[UNTESTED]}" if n[UNTESTED] else "")
                + f" of {len(self.points)} point(s); the limit moved at {moved}")

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "higher_is_better": self.higher_is_better, "method": METHOD,
                "confidence": CONFIDENCE, "min_effect": MIN_EFFECT, "b_won": self.b_won, "summary": self.summary,
                "points": [p.as_dict() for p in self.points]}


def ab(metric: str, a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]], *,
       higher_is_better: bool = True, limits_a: Mapping[str, str | None] | None = None,
       limits_b: Mapping[str, str | None] | None = None) -> ABResult:
    """Every point either side has, in A's order."""
    la, lb = limits_a or {}, limits_b or {}
    points = list(dict.fromkeys([*a, *b, *la, *lb]))
    return ABResult(metric, higher_is_better, tuple(
        point_ab(p, a.get(p, ()), b.get(p, ()), higher_is_better=higher_is_better, limit_a=la.get(p),
                 limit_b=lb.get(p)) for p in points))
