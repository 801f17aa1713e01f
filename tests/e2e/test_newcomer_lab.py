"""A run as a newcomer's CI log or nohup sees it: stderr not a terminal, one
line per finished point as it finishes, and at the end the results table
with the report's headline columns (real lab, real iperf3; root)."""

from __future__ import annotations

import re

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
