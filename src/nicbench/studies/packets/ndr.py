"""The no-drop-rate search (RFC 2544 throughput), as pure arithmetic over
the steps measured so far: which rate to try next, when to stop, which step
is the answer.  The runner measures; this decides.

Step 0 runs unpaced: if it loses no more than the threshold, the generator
is the limit and that is the answer.  Otherwise bisect between 0 and step
0's sent rate per port, ``max_steps`` times.  The answer is the passing step
that received the most.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class NdrStep:
    rate_per_port: float | None     # frames/s asked of each port; None: unpaced
    tx_pps: float                   # sent, all ports
    rx_pps: float                   # received, all ports
    loss: float | None              # a fraction of what was sent
    passed: bool

    def to_dict(self, step: int) -> dict[str, object]:
        return {"step": step, "rate_per_port": self.rate_per_port, "tx_pps": self.tx_pps, "rx_pps": self.rx_pps,
                "loss": self.loss, "passed": self.passed}


def step(rate_per_port: float | None, tx_pps: float, rx_pps: float, loss: float | None,
         threshold: float) -> NdrStep:
    """A measured step, judged: it passes when its loss is at most ``threshold``."""
    return NdrStep(rate_per_port, tx_pps, rx_pps, loss, (loss or 0.0) <= threshold)


def next_rate(steps: Sequence[NdrStep], *, ports: int, max_steps: int) -> float | None:
    """The rate per port of the next step, or None when the search is over
    (the first step is the unpaced one: call this only after it ran)."""
    if not steps or steps[0].passed or len(steps) > max_steps:
        return None
    low, high = 0.0, steps[0].tx_pps / ports
    for s in steps[1:]:
        if s.passed:
            low = s.rate_per_port or 0.0
        else:
            high = s.rate_per_port or 0.0
    return (low + high) / 2


def best(steps: Sequence[NdrStep]) -> int | None:
    """The index of the passing step that received the most (the first of
    equals), or None if none passed."""
    passing = [i for i, s in enumerate(steps) if s.passed]
    return max(passing, key=lambda i: (steps[i].rx_pps, -i)) if passing else None
