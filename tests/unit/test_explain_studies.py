"""Every study's points get a verdict (analysis/verdict.py) from the stored
runs of tests/fixtures/runs, made before verdicts existed: ``nicbench
explain`` says it with its evidence for each, and ``nicbench export
--verdicts`` carries the same per point, TCP's and UDP's included."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from conftest import run_cli as nb
from nicbench.analysis.verdict import LIMITS
from nicbench.registry import VIEWS
from nicbench.report.catalogue import summarise
from nicbench.store.archive import Archive
from nicbench.store.transfer import add_legacy

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"
KINDS = ("tcp", "https", "storage", "packets", "latency")


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("explain")
    ids = {}
    with Archive.open(tmp / "arch") as a:
        for kind in KINDS:
            shutil.copytree(RUNS / kind, tmp / kind)
            ids[kind] = add_legacy(a, tmp / kind).run_id
            summarise(a, ids[kind], VIEWS)
    return tmp / "arch", ids


def explained(capsys, store, run_id) -> dict[str, dict]:
    code, out, err = nb(capsys, "explain", run_id, "--json", "--store", store)
    assert code == 0, err
    points = {p["point"]: p["verdict"] for p in json.loads(out)["points"]}
    for point, v in points.items():
        assert v is not None and v["limit"] in LIMITS and (v["evidence"] or v["checked"]), (point, v)
    return points


def test_https_points_are_judged_by_what_wrk_read_its_errors_and_nginx(capsys, archive):
    store, ids = archive
    v = explained(capsys, store, ids["https"])
    assert {p: x["limit"] for p, x in v.items()} == {"https/c4": "wire", "http/c4": "wire"}
    assert v["https/c4"]["evidence"][0].startswith("tx goodput read by wrk 1.86 Gbit/s = 99.2 % of its")
    assert "loss: 0 socket errors, 0.0 % of the requests (under 0.1 %)" in v["https/c4"]["checked"]
    assert any("wrk c2 c2 at 0.11 of the 2 cores" in c for c in v["http/c4"]["checked"])   # wrk -t 2


def test_storage_points_name_the_cpu_or_the_wire_and_say_the_device_is_not_measured(capsys, archive):
    store, ids = archive
    v = explained(capsys, store, ids["storage"])
    assert {p: x["limit"] for p, x in v.items()} == {"read/bs4K": "cpu", "write/bs4K": "cpu",
                                                     "read/bs32K": "wire", "write/bs32K": "wire"}
    assert v["read/bs32K"]["evidence"] == ["read throughput 235 MB/s = 99.8 % of its 235 MB/s ceiling"]
    assert v["read/bs4K"]["evidence"][0].startswith("CPU 0 of machine 99.5 % busy")
    assert "device: not measured (no device counters are sampled; the LUNs are in the target's memory: no " \
           "device behind them)" in v["read/bs4K"]["checked"]


def test_packet_points_put_the_generator_against_the_receiver(capsys, archive):
    store, ids = archive
    code, out, _ = nb(capsys, "explain", ids["packets"], "--point", "trafgen/ipv4/p1/t1/64B", "--store", store)
    assert code == 0 and "trafgen/ipv4/p1/t1/64B: engine" in out
    assert "because: the generator (trafgen) sent only 0.381 Mpps = 0.6 % of the ceiling, and the receivers got " \
           "100.1 % of it: the sender is the limit" in out
    v = explained(capsys, store, ids["packets"])
    # nbgen's core is full, half of it the softirq of the frames it sends: both said, the engine first
    nb64 = v["nbgen/ipv4/p1/t1/64B"]
    assert (nb64["limit"], nb64["leading"], nb64["second"]) == ("mixed", "engine", "cpu")
    assert any(c.startswith("loss: 0.1 % of the frames lost") for c in nb64["checked"])


def test_latency_points_say_what_the_round_trips_waited_on(capsys, archive):
    store, ids = archive
    code, out, _ = nb(capsys, "explain", ids["latency"], "--store", store)
    assert code == 0 and "(latency): what the round trips waited on" in out
    v = explained(capsys, store, ids["latency"])
    loaded = v["udp/sockperf/m64/loaded"]
    assert loaded["limit"] == "wire" and loaded["evidence"][0].startswith("load goodput 0.468 Gbit/s = 99.4 %")
    assert loaded["evidence"][1] == "what the load cost: p99 1.32x the idle point's (udp/sockperf/m64/idle)"
    idle = v["udp/sockperf/m64/idle"]
    assert idle["limit"] == "none found"
    assert "wire: an idle point: the probes alone, no load to fill the link" in idle["checked"]
    assert any(c.endswith("latency-client spin there by design") for c in idle["checked"])


def test_export_carries_each_points_verdict_when_asked(capsys, archive):
    store, ids = archive
    code, out, err = nb(capsys, "export", "--format", "json", "--verdicts", "--store", store)
    assert code == 0, err
    rows = json.loads(out)
    assert {r["study"] for r in rows} == set(KINDS) and all(r["verdict"] for r in rows)
    for kind in ("tcp", "storage"):
        want = {p: x["limit"] for p, x in explained(capsys, store, ids[kind]).items()}
        assert {r["point"]: r["limit"] for r in rows if r["run_id"] == ids[kind]} == want
    assert all(r["limit_confidence"] in ("high", "split") for r in rows)
    code, out, _ = nb(capsys, "export", ids["packets"], "--verdicts", "--store", store)
    got = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and {r["limit"] for r in got} == {"engine", "mixed"}
    assert json.loads(got[0]["verdict"])["limit"] == got[0]["limit"]          # CSV: the evidence as JSON text
    # not asked: the summaries alone, no analysis
    code, out, _ = nb(capsys, "export", ids["packets"], "--store", store)
    assert code == 0 and "limit" not in next(csv.reader(io.StringIO(out)))
