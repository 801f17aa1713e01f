"""The latency study's report and comparisons, on its stored real run
(tests/fixtures/runs/latency: a lab run, server + 2 probes, a TCP load on a
500 Mbit/s link)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES
from nicbench.api import load_run, render
from nicbench.store.runs import RunReader
from nicbench.studies.latency.analysis import LatencyPoint, LatencyTrial
from nicbench.studies.latency.view import LatencyView, waiting_settings

RUN = FIXTURES / "runs" / "latency"


@pytest.fixture()
def run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    shutil.copytree(RUN, d)
    return d


def test_percentiles_are_compared_lower_is_better_on_every_ok_repeat(run_dir):
    view = load_run(run_dir)
    cvs = LatencyView().compare_values(view)
    assert [c.metric for c in cvs] == ["p99 RTT (us)", "p50 RTT (us)", "p99.9 RTT (us)"]
    assert not any(c.higher_is_better for c in cvs)
    for t in view.trials:
        assert isinstance(t, LatencyTrial)
        if t.status == "ok":
            assert t.percentiles["p99"] * 1e6 in cvs[0].values[t.point]
    assert all(len(v) == 2 for v in cvs[0].values.values())          # two repeats of every point


def test_compare_command_lists_every_percentile_and_says_lower_is_better(run_dir, tmp_path):
    other = tmp_path / "other"
    shutil.copytree(run_dir, other)
    r = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "compare", str(run_dir), str(other), "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["metric"] == "p99 RTT (us)" and [m["higher_is_better"] for m in doc["metrics"]] == [False] * 3
    assert all(p["verdict"] == "no significant difference" for m in doc["metrics"] for p in m["points"])
    r = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "compare", str(run_dir), str(other)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "p99 RTT (us) (lower is better)" in r.stdout


def test_rows_order_percentiles_and_price_the_load(run_dir):
    view = load_run(run_dir)
    rows = LatencyView().rows(view)
    json.dumps(rows)                                                  # the exports' rows: JSON as they are
    for r in rows:
        if not r["repeats_ok"]:
            continue
        assert r["min_s"] <= r["p50_s"] <= r["p90_s"] <= r["p99_s"] <= r["p999_s"] <= r["max_s"]
        assert r["p99_low_s"] <= r["p99_s"] <= r["p99_high_s"]
        if r["condition"] == "loaded":
            assert r["load_gbps"] and 0 < r["load_gbps"] <= 0.5       # the 500 Mbit/s link
            assert r["idle_point"] == r["point"].replace("loaded", "idle")
            assert r["p99_vs_idle"] == pytest.approx(r["p99_s"] / next(x["p99_s"] for x in rows
                                                                        if x["point"] == r["idle_point"]))
        else:
            assert r["load_gbps"] is None and r["p99_vs_idle"] is None
        assert set(r["per_host"]) == {"c1", "c2"}
        assert r["percentiles_bound"] == ("upper" if r["engine"] == "iperf2" else "exact")


def test_progress_line_and_the_page(run_dir):
    view = load_run(run_dir)
    reader = RunReader(run_dir)
    rec = next(r for r in reader.trials() if r.spec.point.endswith("/loaded") and r.status == "ok")
    line = LatencyView().progress_line(rec, reader.samples(rec.spec.trial_id), view.info.meta)
    reader.close()
    assert line.startswith(rec.spec.point) and " p99 " in line and "Gbps" in line
    index = render(view)
    html = index.read_text()
    assert "How the sockets waited" in html and "busy_poll" in html and "Engines on the same path" in html
    pts = [p for p in view.points if isinstance(p, LatencyPoint)]
    assert {p.engine for p in pts} == {"sockperf", "irtt", "iperf2"}


def test_busy_polling_and_coalescing_come_from_the_host_facts(run_dir):
    rows = {r["host"]: r for r in waiting_settings(load_run(run_dir).facts)}
    # in the lab the sysctls are the machine's: a namespace does not see them
    assert rows["machine"]["busy_poll"].isdigit() and rows["machine"]["busy_read"].isdigit()
    assert rows["srv"]["busy_poll"].startswith("unknown: ")
    assert "eth0" in rows["srv"]["coalescing"]
