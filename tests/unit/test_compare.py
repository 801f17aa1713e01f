"""Comparing two runs: factor, Welch's t-test, verdicts; the CLI on imported runs."""

import json
import shutil
import sqlite3
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


def test_lower_is_better_figures_call_a_rise_worse():
    """Loss: more of it is a change for the worse; from none to some has no factor but is a change."""
    worse = compare({"x": [0.10, 0.11, 0.09]}, {"x": [0.50, 0.52, 0.48]}, higher_is_better=False)[0]
    assert worse.verdict == "higher" and worse.better is False
    better = compare({"x": [0.50, 0.52, 0.48]}, {"x": [0.10, 0.11, 0.09]}, higher_is_better=False)[0]
    assert better.verdict == "lower" and better.better is True
    from_none = compare({"x": [0.0, 0.0, 0.0]}, {"x": [2.0, 2.1, 1.9]}, higher_is_better=False)[0]
    assert from_none.factor is None and from_none.verdict == "higher" and from_none.better is False
    same = compare({"x": [0.0, 0.0]}, {"x": [0.0, 0.0]}, higher_is_better=False)[0]
    assert same.verdict == "no significant difference" and same.better is None
    assert compare({"x": [10.0, 10.1, 9.9]}, {"x": [11.0, 11.1, 10.9]})[0].better is True


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
    assert [m["metric"] for m in doc["metrics"]] == [doc["metric"]] and doc["metrics"][0]["higher_is_better"]
    r = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "compare", ids[0], "nosuchrun",
                        "--store", str(tmp_path / "store")], capture_output=True, text=True)
    assert r.returncode == 6 and r.stderr.count("\n") == 1 and "hint:" in r.stderr


def test_compare_command_names_every_figure_of_a_study(tmp_path):
    """A UDP run is compared on received Gbps and on loss, which is lower-is-better."""
    run = tmp_path / "udp"
    shutil.copytree(FIXTURES / "runs" / "udp", run)
    r = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "compare", str(run), str(run), "--json"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(m["metric"], m["higher_is_better"]) for m in doc["metrics"]] == [
        ("Gbps received (UDP payload)", True), ("loss % (receivers)", False)]
    assert doc["metric"] == doc["metrics"][0]["metric"] and len(doc["points"]) == 12


def test_compare_html_overlays_both_runs_and_lists_each_differing_fact_once(tmp_path):
    store = tmp_path / "store"
    for name in ("a", "b"):
        shutil.copytree(FIXTURES / "runs" / "tcp", store / name)
    with sqlite3.connect(store / "b" / "results.sqlite") as db:       # B: another kernel on every host, rx 10 % lower
        db.execute("update meta set value = '\"b-run\"' where key = 'run_id'")
        db.execute("update facts set value = '\"6.19.0\"' where key = 'kernel'")
        db.execute("update samples set value = value * 0.9 where metric = 'tcp.bytes' and trial_id in "
                   "(select trial_id from trials where point like 'rx/%')")
    out = tmp_path / "cmp"
    r = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "compare", str(store / "a"), str(store / "b"),
                        "--html", str(out), "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["html"] == str((out / "index.html").resolve())
    [kernel] = [f for f in doc["facts_differing"] if f["fact"] == "kernel"]
    assert kernel["b"] == "6.19.0" and sorted(kernel["hosts"]) == ["c1", "c2", "c3", "machine", "srv"]
    assert len([f for f in doc["facts_changed"] if f["fact"] == "kernel"]) == 5      # per host, as before
    html = (out / "index.html").read_text()
    assert html.count("<code>kernel</code>") == 1 and "srv, c1, c2, c3, machine" in html
    figs = sorted(p.name for p in out.glob("*.png"))
    assert figs == ["compare-0-tx.png", "compare-1-rx.png", "compare-2-bidir.png"]
    assert all((out / f).stat().st_size > 5000 for f in figs) and all(f in html for f in figs)
    rx = {p["point"]: p for p in doc["points"]}["rx/c3/io8K"]
    assert abs(rx["factor"] - 0.9) < 1e-9
    text = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "compare", str(store / "a"), str(store / "b")],
                          capture_output=True, text=True).stdout
    assert text.count(" kernel ") == 1 and "(each once)" in text
