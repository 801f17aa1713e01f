"""Every study's report, rebuilt from a stored real run (tests/fixtures/runs/),
gives exactly the tables, trials and figures it gave when the golden file was
written (see tests/fixtures/runs/README.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from nicbench.api import load_run, render
from nicbench.plan.studies import SCHEMAS
from nicbench.studies.registry import STUDIES, VIEWS

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


@pytest.mark.parametrize("kind", sorted(STUDIES))
def test_report_of_a_stored_run_is_the_golden_one(kind, tmp_path):
    run = tmp_path / kind
    shutil.copytree(RUNS / kind, run)            # rendering writes beside the run
    golden = json.loads((run / "golden.json").read_text())
    view = load_run(run)
    assert view.info.study == kind
    index = render(view)
    got = json.loads((index.parent / "points.json").read_text())
    assert got["points"] == golden["points"]
    assert got["trials"] == golden["trials"]
    assert got["units"] == golden["units"]
    assert sorted(p.name for p in index.parent.glob("*.png")) == golden["figures"]
    assert all((index.parent / f).stat().st_size > 5000 for f in golden["figures"])     # drawn, not empty
    assert VIEWS[kind].rows(view) == golden["points"]


def test_the_registry_and_the_plan_know_the_same_studies():
    assert sorted(STUDIES) == sorted(s.KIND for s in SCHEMAS)
    for kind, s in STUDIES.items():
        assert kind == s.schema.KIND and s.view.kind == kind and s.runner.kind == kind  # type: ignore[attr-defined]
