"""Two runs, point by point: the factor between them and whether it is real.

A difference is only called one when both runs have at least two repeats of
the point, Welch's t-test (unequal variances) gives p < ``alpha``, and the
medians differ by more than ``threshold`` (a 0.3 % change with p = 0.01 is
real but not worth a line).  With a single repeat the factor is shown and the
verdict says no test was possible; this machine's pairs scatter by several
percent, so one repeat proves little.  Whether the change is for the better
depends on the figure: more Gbps is, more loss is not (``higher_is_better``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from scipy import stats


@dataclass(frozen=True)
class Diff:
    point: str
    n_a: int
    n_b: int
    median_a: float | None
    median_b: float | None
    factor: float | None              # median_b / median_a
    p_value: float | None
    verdict: str                      # "higher" | "lower" | "no significant difference" | "n/a (...)"
    better: bool | None = None        # a significant change for the better (None: no verdict)


def compare(a: Mapping[str, Sequence[float]], b: Mapping[str, Sequence[float]], *, alpha: float = 0.05,
            threshold: float = 0.01, higher_is_better: bool = True) -> list[Diff]:
    """Every point of either run; values are one number per repeat."""
    out = []
    for point in list(dict.fromkeys([*a, *b])):
        va, vb = list(a.get(point, ())), list(b.get(point, ()))
        ma = statistics.median(va) if va else None
        mb = statistics.median(vb) if vb else None
        if ma is None or mb is None:
            out.append(Diff(point, len(va), len(vb), ma, mb, None, None,
                            f"n/a (only in run {'A' if ma is not None else 'B'})"))
            continue
        factor = mb / ma if ma else None
        if len(va) < 2 or len(vb) < 2:
            out.append(Diff(point, len(va), len(vb), ma, mb, factor, None,
                            "n/a (needs >= 2 repeats in each run for a test)"))
            continue
        if statistics.pstdev(va) == 0 and statistics.pstdev(vb) == 0:
            p = 0.0 if ma != mb else 1.0
        else:
            p = float(stats.ttest_ind(va, vb, equal_var=False).pvalue)
            if math.isnan(p):
                p = 1.0
        better = None
        if p < alpha and factor is not None and abs(factor - 1) > threshold:
            verdict = "higher" if factor > 1 else "lower"
            better = (factor > 1) == higher_is_better
        elif p < alpha and factor is None and ma != mb:      # from none: a factor cannot say how much
            verdict = "higher" if mb > ma else "lower"
            better = (mb > ma) == higher_is_better
        else:
            verdict = "no significant difference"
        out.append(Diff(point, len(va), len(vb), ma, mb, factor, p, verdict, better))
    return out
