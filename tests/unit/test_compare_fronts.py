"""``nicbench compare`` and the dashboard's compare page show one comparison
(``report.compare.compare_runs``): the same pairs, the same numbers.  Held
on one archive: two TCP runs of different engines on fake hosts (iperf3 and
nbperf, recorded outputs), whose points meet by name, and the stored latency
lab run against an imported netperf run, whose points meet across names
(the study's ``match_points``)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from test_archive_partial import run_once
from test_session_fake import PLAN, opener

from conftest import FIXTURES
from conftest import run_cli as nb
from nicbench.cli.main import main
from nicbench.hosts.fake import FakeTransport, Script
from nicbench.plan import parse_plan
from nicbench.registry import VIEWS
from nicbench.report.catalogue import summarise
from nicbench.report.view import read_run
from nicbench.run.session import execute
from nicbench.store.archive import Archive
from nicbench.store.location import parse_store
from nicbench.store.transfer import add_legacy
from nicbench.studies.tcp.runner import TcpRunner
from nicbench.web import data
from nicbench.web.app import create_app

NBPERF = FIXTURES / "nbperf" / "1.0.0"
NBPERF_PLAN = PLAN.replace("[study]\n", '[study]\nengine = "nbperf"\n')
NETPERF = FIXTURES / "import" / "netperf" / "ext" / "netperf_pkb_tcp_rr_o.txt"


def nbperf_host(argv: list[str]) -> Script:
    """A host with nbperf 1.0.0 answering the recorded TCP tx case (tests/fixtures/nbperf/1.0.0)."""
    if argv[0] == "sh" and "command -v nbperf" in argv[2]:
        return Script(stdout="/x/nbperf\n")
    if argv[0] == "sh" and "ulimit -Hn" in argv[2]:
        return Script(stdout="524288\n")
    if argv[-1] == "version":
        return Script(stdout="nbperf 1.0.0 (protocol 1)\n")
    if argv[1:2] == ["client"]:
        return Script(stdout=(NBPERF / "tcp-tx.client.out").read_text(), runtime=2.0)
    if argv[1:2] == ["server"]:
        return Script(stdout=(NBPERF / "tcp-tx.server.out").read_text(), runtime=2.0)
    if argv[0] == "ping":
        return Script("1 packets transmitted, 1 received\n")
    return Script()


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fronts")
    store = tmp / "arch"
    iperf3 = run_once(store)
    _, open_fake = opener({h: FakeTransport(h, nbperf_host) for h in ("srv", "c1", "c2")})
    nbperf = execute(parse_plan(NBPERF_PLAN), NBPERF_PLAN, runner=TcpRunner, store=store, hosts_for=open_fake).run_id
    shutil.copytree(FIXTURES / "runs" / "latency", tmp / "lab")
    with pytest.raises(SystemExit) as e:
        main(["import", "--store", str(store), "--io-size", "64", str(NETPERF)])
    assert e.value.code in (0, None)
    with Archive.open(store) as a:
        lab = add_legacy(a, tmp / "lab").run_id
        assert lab is not None
        [netperf] = [r.run_id for r in a.runs() if r.source == "import"]
        for run_id in (iperf3, nbperf, lab):
            summarise(a, run_id, VIEWS)
    return store, {"tcp": (iperf3, nbperf), "latency": (lab, netperf)}


def _both(capsys, store: Path, a: str, b: str) -> tuple[dict, dict]:
    code, out, err = nb(capsys, "compare", a, b, "--store", store, "--json")
    assert code == 0, err
    with Archive.open(store) as arch:
        ctx = data.compare_context(arch, [a, b], VIEWS, data.ViewCache())
    return json.loads(out), ctx


def _held(doc: dict, ctx: dict) -> None:
    """The dashboard's table is the CLI's headline figure, pair for pair."""
    assert ctx["metric"] == doc["metric"]
    assert [r["point"] for r in ctx["table"]] == [p["point"] for p in doc["points"]]
    for row, p in zip(ctx["table"], doc["points"], strict=True):
        base, other = row["cells"]
        assert (base["median"], base["n"]) == (p["median_a"], p["n_a"])
        assert (other["median"], other["n"], other["factor"], other["p"], other["verdict"]) == (
            p["median_b"], p["n_b"], p["factor"], p["p_value"], p["verdict"])
    assert [(m["a"], m["b"], m["note"]) for m in ctx["matched"]] == [(m["a"], m["b"], m["note"])
                                                                      for m in doc["matched"]]
    assert ctx["facts"][0]["changes"] == doc["facts_differing"]


# the fake hosts answer every repeat with one recorded output: its repeats differ by rounding only
@pytest.mark.filterwarnings("ignore:Precision loss occurred in moment calculation:RuntimeWarning")
def test_two_engines_of_the_tcp_study_compare_alike_in_the_cli_and_the_dashboard(capsys, archive):
    store, runs = archive
    iperf3, nbperf = runs["tcp"]
    with Archive.open(store) as a:
        assert [read_run(Path(), a, r).info.meta["engine"] for r in (iperf3, nbperf)] == ["iperf3", "nbperf"]
    doc, ctx = _both(capsys, store, iperf3, nbperf)
    _held(doc, ctx)
    [p] = doc["points"]
    assert p["point"] == "tx/c4/io128K" and doc["matched"] == []           # the same point, by name
    # the fixtures' figures: nbperf's point 7.9 % above iperf3's, the t-test sure of it
    assert (p["n_a"], p["n_b"]) == (2, 2) and p["factor"] == pytest.approx(1.0794, abs=0.005)
    assert p["verdict"] == "higher" and p["p_value"] < 0.01


def test_points_met_across_engines_pair_alike_in_the_cli_and_the_dashboard(capsys, archive):
    """The lab run has no netperf point: the CLI met B's tcp/netperf/m64/idle
    with A's tcp/sockperf/m64/idle; the dashboard listed them as two points
    that nothing compared.  Now both pair them, with the same factor."""
    store, runs = archive
    lab, netperf = runs["latency"]
    doc, ctx = _both(capsys, store, lab, netperf)
    _held(doc, ctx)
    assert [(m["a"], m["b"]) for m in doc["matched"]] == [("tcp/sockperf/m64/idle", "tcp/netperf/m64/idle")]
    rows = {r["point"]: r for r in ctx["table"]}
    assert "tcp/netperf/m64/idle" not in rows
    other = rows["tcp/sockperf/m64/idle"]["cells"][1]
    assert other["median"] == pytest.approx(841) and other["n"] == 1 and other["factor"] is not None
    app = create_app(parse_store(store), token="test-token-0123456789", allowed_hosts=["127.0.0.1"],
                     cache_root=store.parent / "cache")
    with TestClient(app, base_url="http://127.0.0.1:8787") as client:
        page = client.get(f"/compare?run={lab}&run={netperf}")
    assert page.status_code == 200
    assert f"{netperf}'s tcp/netperf/m64/idle is compared as the baseline's tcp/sockperf/m64/idle" in page.text
