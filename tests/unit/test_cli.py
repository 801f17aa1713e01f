"""The CLI as a user meets it: subprocesses, exit codes, one-line errors."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT


def nb(*args, store=None, check=False):
    env = dict(os.environ)
    if store:
        env["NICBENCH_STORE"] = str(store)
    p = subprocess.run([sys.executable, "-m", "nicbench.cli.main", *map(str, args)],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    if check:
        assert p.returncode == 0, p.stderr
    return p


def test_help_for_every_command():
    for cmd in ([], ["run"], ["report"], ["runs"], ["import"], ["check"], ["lab"], ["lab", "up"],
                ["lab", "down"], ["lab", "status"]):
        p = nb(*cmd, "--help")
        assert p.returncode == 0 and "Usage:" in p.stdout


def test_import_report_runs_roundtrip(tmp_path):
    v3 = FIXTURES / "iperf3" / "3.12"
    p = nb("import", "iperf3", v3 / "tx_p2.json", v3 / "rx_p2.json", v3 / "bidir_p2.json",
           "--json", store=tmp_path, check=True)
    run_id = json.loads(p.stdout)["run_id"]
    rep = json.loads(nb("report", run_id, "--json", store=tmp_path, check=True).stdout)
    points = {r["direction"]: r for r in rep["points"]}
    assert set(points) == {"tx", "rx", "bidir"}
    assert points["bidir"]["tx_gbps"] > 0 and points["bidir"]["rx_gbps"] > 0
    assert points["bidir"]["gbps_median"] == pytest.approx(
        points["bidir"]["tx_gbps"] + points["bidir"]["rx_gbps"], abs=0.01
    )
    out = Path(rep["report"]).parent
    for f in (
        "index.html",
        "points.csv",
        "points.json",
        "throughput-tx.png",
        "throughput-tx.svg",
        "throughput-bidir.png",
    ):
        assert (out / f).stat().st_size > 0, f
    exported = json.loads((out / "points.json").read_text())
    assert exported["schema"] == 1 and len(exported["points"]) == 3
    runs = json.loads(nb("runs", "--json", store=tmp_path, check=True).stdout)
    assert runs[0]["run_id"] == run_id and runs[0]["source"] == "import"


def test_import_iperf2_needs_role(tmp_path):
    f = FIXTURES / "iperf2" / "2.1.8" / "server_tx_p2.csv"
    p = nb("import", "iperf2", f, store=tmp_path)
    assert p.returncode == 2 and "--role" in p.stderr and "Traceback" not in p.stderr
    p = nb("import", "iperf2", f, "--role", "server", "--io-size", "128K", "--json", store=tmp_path, check=True)
    rep = json.loads(nb("report", "latest", "--json", store=tmp_path, check=True).stdout)
    assert rep["points"][0]["io_size"] == 131072 and rep["points"][0]["gbps_median"] > 1


def test_import_of_a_failed_run_is_refused(tmp_path):
    p = nb("import", "iperf3", FIXTURES / "iperf3" / "3.12" / "err_refused.json", store=tmp_path)
    assert p.returncode == 2 and "Connection refused" in p.stderr


@pytest.mark.parametrize(
    "patch, exit_code, needle",
    [
        (('io_sizes = ["128K"]', 'io_sizes = ["10 Gb"]'), 2, "study.io_sizes[0]"),
        (('io_sizes = ["128K"]', "io_sizes = [0]"), 2, "must be > 0"),
        (("duration = 2", "duraton = 2"), 2, "unknown key 'duraton'"),
        (("[hosts.c1]", '[hosts.c1]\nrol = "x"'), 2, "hosts.c1"),
    ],
)
def test_bad_plans_give_one_line_and_exit_code(tmp_path, patch, exit_code, needle):
    text = """name = "x"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[study]
io_sizes = ["128K"]
duration = 2
omit = 0
"""
    plan = tmp_path / "p.toml"
    plan.write_text(text.replace(*patch))
    for cmd in ("check", "run"):
        p = nb(cmd, plan)
        assert p.returncode == exit_code, p.stderr
        lines = p.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and str(plan) in lines[0]
        assert "Traceback" not in p.stderr


def test_debug_shows_traceback_and_json_error(tmp_path):
    p = nb("--debug", "check", tmp_path / "missing.toml")
    assert p.returncode == 2 and "Traceback" in p.stderr
    p = nb("check", tmp_path / "missing.toml", "--json")
    assert json.loads(p.stdout)["error"]["exit_code"] == 2


def test_report_of_unknown_run(tmp_path):
    p = nb("report", "nope", store=tmp_path)
    assert p.returncode == 6 and "nicbench runs" in p.stderr


def test_a_damaged_database_is_a_store_error_not_a_traceback(tmp_path):
    run = tmp_path / "r1"
    run.mkdir()
    (run / "results.sqlite").write_text("this is not sqlite")
    p = nb("report", run, store=tmp_path)
    assert p.returncode == 6 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_lab_commands_check_names_before_touching_anything():
    p = nb("lab", "up", "--name", "My-Lab")
    assert p.returncode == 2 and "not a lab name" in p.stderr
    p = nb("lab", "up", "--mtu", "20000")
    assert p.returncode == 2 and "--mtu" in p.stderr
