"""Is the latest run of a series a regression?

The latest value is compared with the spread (lowest to highest) of the
``window`` runs before it, widened by ``tolerance`` times their median: below
it is a regression when higher is better (above it, when lower is better),
the other side an improvement.  The spread of recent runs, not a mean and a
standard deviation: a handful of runs of a lab machine is neither normal nor
many, and a run outside everything seen lately is what someone should look at.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Verdict:
    state: str                 # "regression" | "improvement" | "within" | "not enough history" | "partial"
    latest: float | None
    low: float | None          # the spread the latest was held against (tolerance included)
    high: float | None
    history: int               # how many earlier runs made the spread

    @property
    def flagged(self) -> bool:
        return self.state == "regression"


def check(values: Sequence[float | None], *, window: int = 10, higher_is_better: bool = True,
          tolerance: float = 0.0, min_history: int = 3) -> Verdict:
    """``values`` oldest first, the last one the run under test (None: no value)."""
    known = [v for v in values if v is not None]
    if not known or values[-1] is None:
        return Verdict("not enough history", None, None, None, 0)
    latest = float(known[-1])
    prev = [float(v) for v in known[:-1]][-window:]
    if len(prev) < min_history:
        return Verdict("not enough history", latest, None, None, len(prev))
    slack = tolerance * abs(statistics.median(prev))
    low, high = min(prev) - slack, max(prev) + slack
    if low <= latest <= high:
        state = "within"
    elif (latest < low) == higher_is_better:
        state = "regression"
    else:
        state = "improvement"
    return Verdict(state, latest, low, high, len(prev))


def check_series(values: Sequence[float | None], survivors_only: Sequence[bool], **kw: Any) -> Verdict:
    """:func:`check`, where a value over the surviving clients of a partial
    point (``survivors_only``) is neither part of the spread nor judged: it
    is lower than a complete point by the clients it lost, not by a
    regression.  A latest value that is one gives the state ``partial``."""
    if values and survivors_only and survivors_only[-1]:
        return Verdict("partial", values[-1], None, None, 0)
    return check([None if s else v for v, s in zip(values, survivors_only, strict=True)], **kw)
