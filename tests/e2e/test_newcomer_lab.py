"""A run as a newcomer's CI log or nohup sees it: stderr not a terminal, one
line per finished point as it finishes, and at the end the results table
with the report's headline columns; and the run found by runs, report latest
and serve from any directory (real lab, real iperf3; root)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request

import pytest
from helpers import namespaces, nicbench, plan_text

pytestmark = pytest.mark.lab


def test_a_run_without_a_terminal_logs_each_point_and_ends_with_the_results_table(tmp_path):
    plan = tmp_path / "log.toml"
    plan.write_text(plan_text("nlog", "nlog1", clients=2, io_sizes=("8K", "128K"), duration=2, omit=1))
    p = nicbench("run", plan, "--store", tmp_path / "store", "--no-report")
    out, err = p.communicate(timeout=180)
    assert p.returncode == 0, err
    lines = err.splitlines()
    assert lines[0].startswith("run ") and lines[0].endswith(": 2 points")
    got = [ln for ln in lines if ln.startswith("[")]
    assert [ln.split()[:2] for ln in got] == [["[1/2]", "tx/c2/io8K"], ["[2/2]", "tx/c2/io128K"]]
    assert all(re.fullmatch(r"\[\d/2\] \S+ \d+(\.\d+)? Gbps", ln) for ln in got), got
    assert "\x1b" not in err                                           # no bar, no escape codes
    table = [ln.rstrip() for ln in out.splitlines()]
    assert table[0] == "nlog: results"
    assert "Gbps (median)" in table[1] and "% of ceiling" in table[1]
    assert [ln.split()[:3] for ln in table if ln.split()[:1] == ["tx"]] == [["tx", "2", "8K"], ["tx", "2", "128K"]]
    # the table's figure is the progress line's (both from the study's view)
    for ln in got:
        point, gbps = ln.split()[1], ln.split()[2]
        io = point.rsplit("io", 1)[1]
        row = next(r for r in table if r.split()[:3] == ["tx", "2", io])
        assert row.split()[3] == gbps
    assert "run " in out and ": 2 points ok, 0 failed" in out
    assert namespaces("nlog1") == []


def test_runs_report_and_serve_find_a_lab_run_from_another_directory(tmp_path):
    """No --store and no $NICBENCH_STORE, as after scripts/demo.sh: the run is in
    the user's archive even though its plan's [output] dir puts its directory
    under the directory it was started from."""
    env = {**{k: v for k, v in os.environ.items() if k != "NICBENCH_STORE"}, "XDG_DATA_HOME": str(tmp_path / "xdg")}
    started, elsewhere = tmp_path / "checkout", tmp_path / "elsewhere"
    started.mkdir()
    elsewhere.mkdir()
    (started / "tiny.toml").write_text(plan_text("ntiny", "ntiny1", clients=1, duration=2, omit=1)
                                       + '[output]\ndir = "nicbench-runs"\n')

    def nb(cwd, *args):
        return subprocess.run([sys.executable, "-m", "nicbench.cli.main", *args], cwd=cwd, env=env,
                              capture_output=True, text=True, timeout=180)

    ran = nb(started, "--json", "run", "tiny.toml", "--no-report")
    assert ran.returncode == 0, ran.stderr
    run = json.loads(ran.stdout)
    assert run["store"] == str(tmp_path / "xdg" / "nicbench" / "archive.sqlite")
    assert run["run_dir"] == str(started / "nicbench-runs" / run["run_id"])
    for cwd in (started, elsewhere):
        listed = nb(cwd, "--json", "runs")
        assert [r["run_id"] for r in json.loads(listed.stdout)] == [run["run_id"]], listed.stderr
        rep = nb(cwd, "report", "latest")
        assert rep.returncode == 0 and rep.stdout.strip() == f"report: {run['run_dir']}/report/index.html", rep.stderr
    p = subprocess.Popen([sys.executable, "-m", "nicbench.cli.main", "serve", "--port", "0", "--cache",
                          str(tmp_path / "cache")], cwd=elsewhere, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert p.stdout is not None
        line = p.stdout.readline()
        assert "serving" in line, line
        base = line.split(" on ", 1)[1].strip().rstrip("/")
        with urllib.request.urlopen(base + "/", timeout=30) as page:
            assert run["run_id"] in page.read().decode()
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=10)
    assert namespaces("ntiny1") == []
