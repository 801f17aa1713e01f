"""Why not line rate, in the lab (root): on an unshaped link nothing but the
machine limits a point, so 512-byte and 128 KiB writes are each held by a
CPU or an engine, named with the figures that show it -- whatever the
machine's speed; ``nicbench explain`` says the same as the report.  (The
shaped link's ``wire`` verdict is checked in test_shaped_lab.py, against its
own figures.)  Asserted: what nicbench decides from what it measured, never
how fast this shared machine was."""

from __future__ import annotations

import json

import pytest
from helpers import namespaces, nicbench, plan_text

from nicbench.api import execute, load_run
from nicbench.plan import parse_plan

pytestmark = pytest.mark.lab

LAB = "e2ev"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    store = tmp_path_factory.mktemp("verdict")
    text = plan_text("verdict", LAB, clients=2, directions=("tx",), io_sizes=("512", "128K"), connections=(2,),
                     duration=3, omit=1, extra="no_delay = true\nrepeats = 1")
    out = execute(parse_plan(text), text, store=store)
    assert namespaces(LAB) == []
    return store, out.run_id, load_run(out.run_dir)


def test_each_point_is_explained_by_its_own_figures(run):
    _, _, view = run
    by = {p.point: p for p in view.points}
    assert set(by) == {"tx/c2/io512", "tx/c2/io128K"}
    for p in by.values():
        assert p.n_ok == 1 and p.verdict is not None, (p.point, p.errors)
        v = p.verdict
        # no line rate: the wire cannot be the limit, and it says so
        assert p.ceiling_gbps is None and any(c.startswith("wire: no line rate known") for c in v.checked), v
        # nothing but the machine: a CPU or an engine holds it, named
        assert v.limit in ("cpu", "engine", "mixed"), (p.point, v)
        assert v.limit != "mixed" or {v.leading, v.second} & {"cpu", "engine"}, (p.point, v)
        assert any("CPU" in e and "busy" in e or "of one core" in e for e in v.evidence), (p.point, v)


def test_explain_says_what_the_report_says(run):
    store, run_id, view = run
    p = nicbench("explain", run_id, "--json", "--store", store)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    doc = json.loads(out)
    assert {x["point"]: x["verdict"]["limit"] for x in doc["points"]} == {
        pt.point: pt.verdict.limit for pt in view.points}
