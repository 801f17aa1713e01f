"""An A/B's judgement (analysis/ab.py): the difference with its Welch
interval, B better or worse only outside zero and by the least effect, and
whether each point's limit moved."""

from __future__ import annotations

import pytest
from scipy import stats

from nicbench.analysis.ab import BETTER, MIN_EFFECT, SAME, UNTESTED, WORSE, ab, point_ab


def test_a_clear_win_has_an_interval_above_zero_and_the_limit_moving():
    p = point_ab("rx/c1/io128K", [18.5, 19.1, 18.9, 19.0], [93.1, 93.6, 93.4, 93.5], limit_a="window",
                 limit_b="wire")
    assert p.outcome == BETTER and p.low > 3 and p.diff == pytest.approx(93.4 / 18.875 - 1)
    assert p.median_a == pytest.approx(18.95) and p.median_b == pytest.approx(93.45)
    assert p.limit_moved and p.as_dict()["limit_moved"] is True
    assert p.why.startswith("+394.8 % [") and p.why.endswith("higher is better")


def test_the_interval_is_welchs():
    a, b = [10.0, 11.0, 12.0], [13.0, 15.0, 14.0, 16.0]
    p = point_ab("x", a, b)
    t = stats.ttest_ind(b, a, equal_var=False)
    ci = t.confidence_interval(0.95)          # scipy's own Welch interval on mean B - mean A
    assert p.low == pytest.approx(ci.low / 11.0) and p.high == pytest.approx(ci.high / 11.0)


def test_no_difference_when_the_interval_holds_zero_or_the_change_is_too_small():
    p = point_ab("x", [93.0, 94.1, 93.6, 93.2], [93.9, 93.1, 93.5, 93.8])
    assert p.outcome == SAME and p.low < 0 < p.high and "holds zero" in p.why
    # real but tiny: a tight 0.5 % change is not called
    q = point_ab("x", [93.0, 93.01, 93.02], [93.5, 93.51, 93.52])
    assert q.low > 0 and q.diff < MIN_EFFECT and q.outcome == SAME and "under the 2%" in q.why


def test_lower_is_better_figures_and_a_worse_b():
    assert point_ab("x", [10, 10.2, 10.1], [5, 5.1, 5.2], higher_is_better=False).outcome == BETTER
    assert point_ab("x", [10, 10.2, 10.1], [5, 5.1, 5.2]).outcome == WORSE


def test_one_repeat_a_side_is_not_tested():
    p = point_ab("x", [10.0], [20.0, 21.0])
    assert p.outcome == UNTESTED and "A 1, B 2" in p.why and p.diff is None


def test_b_wins_only_if_better_somewhere_and_worse_nowhere():
    win = ab("gbps", {"p1": [1, 1.1, 1.05], "p2": [5, 5.1, 5.0]}, {"p1": [2, 2.1, 2.05], "p2": [5.05, 5.0, 5.1]},
             limits_a={"p1": "window", "p2": "wire"}, limits_b={"p1": "wire", "p2": "wire"})
    assert win.b_won and [p.outcome for p in win.points] == [BETTER, SAME]
    assert win.summary == ("B won: better at 1, worse at 0, no difference at 1 of 2 point(s); the limit moved at 1")
    lose = ab("gbps", {"p1": [1, 1.1, 1.05], "p2": [5, 5.1, 5.0]}, {"p1": [2, 2.1, 2.05], "p2": [2.5, 2.4, 2.6]})
    assert not lose.b_won and lose.summary.startswith("B did not win: better at 1, worse at 1")
    assert not ab("gbps", {"p1": [1, 1.1]}, {"p1": [1.05, 1.0]}).b_won
