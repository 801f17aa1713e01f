"""The regression rule of ``nicbench trend --check`` and the trend page."""

from nicbench.analysis.trend import check


def test_the_latest_run_against_the_spread_of_the_runs_before_it():
    hist = [10.0, 10.4, 9.8, 10.1, 10.2]
    assert check([*hist, 10.0]).state == "within"
    v = check([*hist, 9.0])
    assert (v.state, v.low, v.high, v.history, v.flagged) == ("regression", 9.8, 10.4, 5, True)
    assert check([*hist, 11.0]).state == "improvement"
    # lower is better (CPU, loss): the same values read the other way round
    assert check([*hist, 9.0], higher_is_better=False).state == "improvement"
    assert check([*hist, 11.0], higher_is_better=False).flagged
    # only the last `window` runs count; a tolerance widens the spread by a share of their median
    assert check([1.0, *hist, 9.7], window=5).state == "regression"
    assert check([1.0, *hist, 9.7], window=6).state == "within"
    assert check([*hist, 9.7], tolerance=0.02).state == "within"
    # too little history, or no value for the latest run: no verdict
    assert check([10.0, 9.0]).state == "not enough history"
    assert check([*hist, None]).state == "not enough history"
    assert check([10.0, None, 10.2, None, 9.9, 5.0]).state == "regression"
