"""One rule for a point's share of its line-rate ceiling, in every study: a
point that moved nothing under a known ceiling is 0 % (a measurement), and
only an unknown figure or an unknown ceiling gives none (https and storage
gave none for 0, packets too)."""

from __future__ import annotations

import dataclasses

import pytest

from conftest import FIXTURES
from nicbench.analysis.trials import fraction_of, pct_of
from nicbench.api import load_run
from nicbench.registry import VIEWS

# each study's point: the field of its figure and of its ceiling (one unit)
FIELDS = {"tcp": ("median", "ceiling_gbps"), "packets": ("rx_mpps", "ceiling_mpps"), "udp": ("gbps", "ceiling_gbps"),
          "storage": ("mb_s", "ceiling_mb_s"), "https": ("app_gbps", "ceiling_gbps")}


def test_the_rule():
    assert pct_of(0.0, 9.4) == 0.0 and fraction_of(0.0, 9.4) == 0.0
    assert pct_of(4.7, 9.4) == pytest.approx(50.0) and fraction_of(4.7, 9.4) == pytest.approx(0.5)
    assert pct_of(None, 9.4) is None                   # no ok repeat: no figure
    assert pct_of(4.7, None) is None and pct_of(0.0, None) is None     # no link speed: no ceiling
    assert pct_of(4.7, 0.0) is None                    # a ceiling of 0 is no ceiling


def test_every_study_with_a_ceiling_is_held_to_it():
    with_ceiling = {k for k, v in VIEWS.items() if any(m.name == "pct_of_ceiling" for m in v.metrics)}
    assert with_ceiling == set(FIELDS)


@pytest.mark.parametrize("kind", sorted(FIELDS))
def test_a_zero_point_is_zero_percent_and_an_unknown_ceiling_none(kind):
    figure, ceiling = FIELDS[kind]
    view = load_run(FIXTURES / "runs" / kind)
    sv = VIEWS[kind]
    first = view.points[0]
    assert getattr(first, ceiling)                     # the stored run knows its link's speed
    for value, ceil, want in ((0.0, getattr(first, ceiling), 0.0), (getattr(first, figure), None, None),
                              (None, getattr(first, ceiling), None)):
        p = dataclasses.replace(first, **{figure: value, ceiling: ceil})
        v = dataclasses.replace(view, points=[p, *view.points[1:]])
        assert p.of_ceiling == (None if want is None else want / 100)
        assert getattr(p, "above_ceiling", False) is False          # (https flags it in its table instead)
        [summary] = [s for s in sv.point_summaries(v) if s.point == p.point]
        assert summary.values["pct_of_ceiling"] == want, (kind, value, ceil)
        [row] = [r for r in sv.rows(v) if r["point"] == p.point]
        assert "of_ceiling" in row or "pct_of_ceiling" in row, (kind, row)
        got = row["of_ceiling"] * 100 if "of_ceiling" in row and row["of_ceiling"] is not None else \
            row.get("pct_of_ceiling", row.get("of_ceiling"))
        assert got == want, (kind, value, ceil, row)
