"""Every study's report, rebuilt from a stored real run (tests/fixtures/runs/),
gives exactly the tables, trials and figures it gave when the golden file was
written (see tests/fixtures/runs/README.md)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from nicbench.api import load_run, render
from nicbench.plan.studies import SCHEMAS
from nicbench.registry import STUDIES, VIEWS

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


def same(a: Any, b: Any) -> bool:
    """Equal, floats to 12 significant digits: the exports keep full precision, and
    summing the same numbers in another order moves their last bits, nothing more."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15)
    return bool(a == b) and type(a) is type(b) or (isinstance(a, int) and isinstance(b, float) and a == b)


@pytest.mark.parametrize("kind", sorted(STUDIES))
def test_report_of_a_stored_run_is_the_golden_one(kind, tmp_path):
    run = tmp_path / kind
    shutil.copytree(RUNS / kind, run)            # rendering writes beside the run
    golden = json.loads((run / "golden.json").read_text())
    view = load_run(run)
    assert view.info.study == kind
    index = render(view)
    got = json.loads((index.parent / "points.json").read_text())
    assert same(got["points"], golden["points"])
    assert same(got["trials"], golden["trials"])
    assert got["units"] == golden["units"]
    assert sorted(p.name for p in index.parent.glob("*.png")) == golden["figures"]
    assert all((index.parent / f).stat().st_size > 5000 for f in golden["figures"])     # drawn, not empty
    assert same(VIEWS[kind].rows(view), golden["points"])


def test_same_tells_float_noise_from_a_changed_number():
    assert same({"g": [1.995058204605782]}, {"g": [1.9950582046057819]})
    assert not same({"g": [1.995058204605782]}, {"g": [1.9950582046]})
    assert not same({"g": 1}, {"g": 2}) and not same({"g": 1.0}, {"h": 1.0}) and same(3, 3.0)


def test_the_registry_and_the_plan_know_the_same_studies():
    assert sorted(STUDIES) == sorted(s.KIND for s in SCHEMAS)
    for kind, s in STUDIES.items():
        assert kind == s.schema.KIND and s.view.kind == kind and s.runner.load().kind == kind  # type: ignore[attr-defined]
