"""Why not line rate, in the lab (root): every point of a real run gets a
verdict consistent with its own figures -- a large-write point on a shaped
1 Gbit/s link is held by the wire when it reaches 97 % of its ceiling (and
otherwise names a saturated CPU, engine or loss: never a guess), 512-byte
writes are held by a CPU or an engine, named; ``nicbench explain`` says the
same as the report.  Asserted: what nicbench decides from what it measured,
never how fast this shared machine was."""

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
                     duration=3, omit=1, speed="1G", extra="no_delay = true\nrepeats = 1")
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
        if v.limit == "wire":
            assert p.of_ceiling >= 0.97 and "of its" in v.evidence[0], (p.point, p.of_ceiling, v)
        elif v.limit == "none found":
            # nothing cleared a bar: it says what it checked, the wire's share first
            assert p.of_ceiling < 0.97 and v.checked[0].startswith("wire: tx goodput"), (p.point, v)
        else:
            # short of the wire: the figure says so, and the verdict names what held it
            assert p.of_ceiling < 0.97 and v.limit in ("cpu", "engine", "loss", "mixed"), (p.point, v)
            assert any("CPU" in e or "core" in e or "retransmitted" in e or "drops" in e for e in v.evidence), v
    # 512-byte writes with TCP_NODELAY never fill the link here: a CPU or an engine holds them
    small = by["tx/c2/io512"].verdict
    assert small.limit in ("cpu", "engine", "mixed"), small
    assert small.limit != "mixed" or {small.leading, small.second} & {"cpu", "engine"}, small


def test_explain_says_what_the_report_says(run):
    store, run_id, view = run
    p = nicbench("explain", run_id, "--json", "--store", store)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    doc = json.loads(out)
    assert {x["point"]: x["verdict"]["limit"] for x in doc["points"]} == {
        pt.point: pt.verdict.limit for pt in view.points}
