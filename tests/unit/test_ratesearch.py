"""The rate search (RFC 2544 throughput) as pure arithmetic: a simulated path
that carries at most ``limit`` per second, searched step by step."""

from __future__ import annotations

import pytest

from nicbench.run import ratesearch as rs


def search(limit: float, unpaced: float, *, units: int = 1, max_steps: int = 8, upper: float | None = None,
           resolution: float = 0.0, threshold: float = 0.001) -> tuple[list[rs.Step], int | None]:
    """Run the search against a path that delivers min(sent, limit)."""
    steps: list[rs.Step] = []
    rate: float | None = None
    while True:
        sent = unpaced if rate is None else rate * units
        got = min(sent, limit)
        steps.append(rs.judge(rate, sent, got, 1 - got / sent, threshold))
        rate = rs.next_rate(steps, units=units, max_steps=max_steps, upper=upper, resolution=resolution)
        if rate is None:
            return steps, rs.best(steps)


def test_an_unpaced_step_within_the_threshold_is_the_answer():
    steps, k = search(limit=10.0, unpaced=9.0)
    assert len(steps) == 1 and k == 0 and steps[0].passed


def test_bisection_closes_in_from_below_and_keeps_the_best_passing_step():
    steps, k = search(limit=3.0, unpaced=5.0, max_steps=4)
    assert [s.rate for s in steps] == [None, 2.5, 3.75, 3.125, 2.8125]
    assert k == 4 and steps[k].received == 2.8125


def test_rates_are_per_unit():
    steps, _ = search(limit=3.0, unpaced=5.0, units=2, max_steps=2)
    assert [s.rate for s in steps] == [None, 1.25, 1.875]          # 2 units: step 0's 5/s is 2.5 each


def test_an_upper_bound_below_the_unpaced_rate_is_tried_first_then_bisected_from():
    """A link ceiling: tried at once (RFC 2544's first trial at the medium's
    rate); failing, bisecting from 100 instead of 1000 gets closer in as many steps."""
    free, _ = search(limit=97.0, unpaced=1000.0, max_steps=6)
    capped, k = search(limit=97.0, unpaced=1000.0, max_steps=6, upper=100.0)
    assert [s.rate for s in capped] == [None, 100.0, 50.0, 75.0, 87.5, 93.75, 96.875] and k == 6
    assert [s.rate for s in free] == [None, 500.0, 250.0, 125.0, 62.5, 93.75, 109.375]


def test_a_path_that_carries_the_upper_bound_is_done_at_once():
    steps, k = search(limit=100.0, unpaced=1000.0, upper=100.0, resolution=0.01)
    assert [s.rate for s in steps] == [None, 100.0] and k == 1


def test_the_search_stops_once_the_bracket_is_narrower_than_the_resolution():
    steps, k = search(limit=95.0, unpaced=1000.0, upper=100.0, resolution=0.02, max_steps=20)
    low, high = rs.bracket(steps, units=1, upper=100.0)
    assert high - low <= 0.02 * high and len(steps) < 10
    assert steps[k].received == pytest.approx(95.0, rel=0.02)


def test_no_passing_step_is_no_answer():
    steps, k = search(limit=0.0 + 1e-9, unpaced=10.0, max_steps=3)
    assert k is None and not any(s.passed for s in steps)


def test_a_step_whose_loss_cannot_be_told_does_not_pass():
    """Every caller, the same rule: the search claims only rates it saw pass."""
    assert rs.judge(1e6, 1e6, 1e6, None, 0.001).passed is False
    assert rs.judge(1e6, 1e6, 1e6, 0.0, 0.001).passed is True
    assert rs.judge(1e6, 1e6, 0.999e6, 0.001, 0.001).passed is True
