"""Plan -> the ordered list of trials (the study's points x repeats)."""

from __future__ import annotations

from ..records import TrialSpec
from .model import Plan
from .studies.tcp import point_key

__all__ = ["point_key", "trials"]


def trials(plan: Plan) -> list[TrialSpec]:
    """Every trial of the plan, in run order.

    ``interleaved`` runs the whole matrix once per repeat, so slow drift of the
    machine spreads over all points instead of biasing one; ``sequential``
    repeats each point back to back.
    """
    s = plan.study
    points = s.points()
    if s.order == "interleaved":
        order = [(r, p) for r in range(s.repeats) for p in points]
    else:
        order = [(r, p) for p in points for r in range(s.repeats)]
    return [TrialSpec(trial_id=f"t{i + 1:04d}", index=i, study=s.kind, point=key, repeat=rep, params=params)
            for i, (rep, (key, params)) in enumerate(order)]
