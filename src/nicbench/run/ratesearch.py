"""The search for the highest rate whose loss stays at or below a threshold
(RFC 2544's throughput: the packet study's no-drop rate, the UDP study's
maximum rate), as pure arithmetic over the steps measured so far: which rate
to try next, when to stop, which step is the answer.  A runner measures;
this decides.

Step 0 runs unpaced: if it loses no more than the threshold, the sender is
the limit and that is the answer.  Otherwise, when an ``upper`` bound below
step 0's sent rate per unit is known (the link's ceiling: asking for more
than the wire carries only loses steps), step 1 tries it, as RFC 2544's
first trial runs at the medium's maximum rate: if it passes, that is the
answer.  Then bisect between the best passing rate and the lowest failing
one (step 0's sent rate per unit, or ``upper``, to begin with), at most
``max_steps`` steps after step 0, or until the bracket is narrower than
``resolution`` of its top.  The answer is the passing step that received
the most.

Rates are per *unit* (the study says which: frames/s per port, bit/s per
client); ``sent`` and ``received`` are the whole point's, in that unit per
second, so step 0's sent rate / units is a rate per unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One measured step of the search."""

    rate: float | None         # asked of each unit; None: unpaced
    sent: float                # sent per second, all units
    received: float            # received per second, all units
    loss: float | None         # a fraction of what was sent
    passed: bool


def judge(rate: float | None, sent: float, received: float, loss: float | None, threshold: float) -> Step:
    """A measured step, judged: it passes when its loss is at most ``threshold``.
    A loss that could not be told is no pass: the search claims only rates it
    saw pass (a receiver that counted nothing is the caller's: it fails the
    step with loss 1, or the point, before it gets here)."""
    return Step(rate, sent, received, loss, loss is not None and loss <= threshold)


def bracket(steps: Sequence[Step], *, units: int, upper: float | None = None) -> tuple[float, float]:
    """(low, high) per unit after the steps so far: the highest passing rate and
    the lowest failing one (step 0's sent rate, or ``upper``, to begin with)."""
    low, high = 0.0, steps[0].sent / units
    if upper is not None and upper < high:
        high = upper
    for s in steps[1:]:
        if s.passed:
            low = max(low, s.rate or 0.0)
        else:
            high = min(high, s.rate or 0.0)
    return low, high


def next_rate(steps: Sequence[Step], *, units: int, max_steps: int, upper: float | None = None,
              resolution: float = 0.0) -> float | None:
    """The rate per unit of the next step, or None when the search is over
    (the first step is the unpaced one: call this only after it ran)."""
    if not steps or steps[0].passed or len(steps) > max_steps:
        return None
    if upper is not None and 0 < upper < steps[0].sent / units and len(steps) == 1:
        return upper
    low, high = bracket(steps, units=units, upper=upper)
    if high <= 0 or high - low <= resolution * high:
        return None
    return (low + high) / 2


def best(steps: Sequence[Step]) -> int | None:
    """The index of the passing step that received the most (the first of
    equals), or None if none passed."""
    passing = [i for i, s in enumerate(steps) if s.passed]
    return max(passing, key=lambda i: (steps[i].received, -i)) if passing else None
