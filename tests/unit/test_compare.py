"""Comparing two runs: factor, Welch's t-test, verdicts; the CLI on imported runs."""

import json
import subprocess
import sys

from conftest import FIXTURES
from nicbench.analysis.compare import compare


def test_verdicts_need_repeats_significance_and_a_real_change():
    a = {"p1": [10.0, 10.1, 9.9, 10.0], "p2": [10.0, 10.2, 9.8], "p3": [10.0], "p4": [5.0, 5.0]}
    b = {"p1": [11.0, 11.1, 10.9, 11.0], "p2": [10.1, 9.8, 10.2], "p3": [12.0], "p5": [1.0, 1.0]}
    d = {x.point: x for x in compare(a, b)}
    assert d["p1"].verdict == "higher" and d["p1"].factor == 1.1 and d["p1"].p_value < 0.001
    assert d["p2"].verdict == "no significant difference" and d["p2"].p_value > 0.05
    assert d["p3"].verdict.startswith("n/a (needs >= 2 repeats") and d["p3"].factor == 1.2
    assert d["p4"].verdict == "n/a (only in run A)" and d["p5"].verdict == "n/a (only in run B)"
    lower = compare({"x": [10.0, 10.1, 9.9]}, {"x": [8.0, 8.1, 7.9]})[0]
    assert lower.verdict == "lower"
    tiny = compare({"x": [10.0, 10.0, 10.0]}, {"x": [10.05, 10.05, 10.05]})[0]   # real but 0.5 %
    assert tiny.verdict == "no significant difference"


def test_compare_command_on_two_imported_runs(tmp_path):
    """The same report as four repeats, ten minutes apart (an import tells
    repeats from their clocks; the same bytes twice would be one measurement
    counted twice), two per run."""
    d = json.loads((FIXTURES / "iperf3" / "3.12" / "tx_p2.json").read_text())
    copies = []
    for i in range(4):
        d["start"]["timestamp"]["timesecs"] += 600
        copies.append(tmp_path / f"r{i}.json")
        copies[-1].write_text(json.dumps(d))
    ids = []
    for name, files in (("a", copies[:2]), ("b", copies[2:])):
        r = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "--json", "import", "iperf3", *map(str, files),
                            "--store", str(tmp_path / "store"), "--name", name], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        ids.append(json.loads(r.stdout)["run_id"])
    r = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "compare", *ids, "--store", str(tmp_path / "store"),
                        "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    [p] = doc["points"]
    assert p["factor"] == 1.0 and p["n_a"] == p["n_b"] == 2 and p["verdict"] == "no significant difference"
    r = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "compare", ids[0], "nosuchrun",
                        "--store", str(tmp_path / "store")], capture_output=True, text=True)
    assert r.returncode == 6 and r.stderr.count("\n") == 1 and "hint:" in r.stderr
