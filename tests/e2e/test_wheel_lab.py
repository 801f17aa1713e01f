"""nicbench as a pip user gets it: the wheel 'python -m build' makes, installed
into a fresh venv (dependencies from PyPI), used from a directory outside the
repository.  'nicbench check' passes on every example; as root, a short lab
plan runs, 'nicbench setup' builds nbgen and nbperf into a fresh per-user home and a
packet plan runs with it.  (The demo plan itself is the first set-up command's
job: 36 points take minutes, and a test of packaging need not re-measure them.)"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import ROOT, namespaces

# the wheel's nicbench and only it: no PYTHONPATH, no repository on the path, a private state and home
CLEAN_ENV = {k: v for k, v in os.environ.items()
             if k not in ("PYTHONPATH", "NICBENCH_NBGEN", "NICBENCH_NBPERF", "NICBENCH_STORE", "VIRTUAL_ENV")}


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> tuple[Path, Path, dict[str, str]]:
    tmp = tmp_path_factory.mktemp("wheel")
    b = subprocess.run([sys.executable, "-m", "build", "--outdir", str(tmp / "dist"), str(ROOT)],
                       capture_output=True, text=True, timeout=600)
    assert b.returncode == 0, b.stderr[-2000:]
    [whl] = (tmp / "dist").glob("nicbench-*.whl")
    subprocess.run([sys.executable, "-m", "venv", str(tmp / "venv")], check=True, timeout=120)
    pip = subprocess.run([str(tmp / "venv" / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                          str(whl)], capture_output=True, text=True, timeout=900)
    assert pip.returncode == 0, pip.stderr[-2000:]
    work = tmp / "work"
    work.mkdir()
    env = {**CLEAN_ENV, "NICBENCH_HOME": str(tmp / "home"), "NICBENCH_STATE_DIR": str(tmp / "state"),
           "PATH": f"{tmp / 'venv' / 'bin'}:{CLEAN_ENV.get('PATH', '/usr/bin:/bin')}"}
    return whl, work, env


def nb(env: dict[str, str], cwd: Path, *args: object, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nicbench", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout)


def test_the_wheel_carries_examples_nbgen_sources_and_licenses(wheel_venv):
    whl, _, _ = wheel_venv
    names = zipfile.ZipFile(whl).namelist()
    for n in ("nicbench/examples/quickstart.toml", "nicbench/examples/seed000-tcp-multiclient.toml",
              "nicbench/native/nbgen/Makefile", "nicbench/native/nbgen/nbgen.c", "nicbench/native/nbgen/nbgen.bpf.c",
              "nicbench/report/tables.html.j2", "nicbench/studies/tcp/report.html.j2", "nicbench/tools/wrk.lua",
              "nicbench/web/static/charts.js", "nicbench/web/static/app.css"):
        assert n in names, n
    # the dashboard's charting library, fetched at build time: the pinned files, as stamped, with their licence
    stamp = json.loads(zipfile.ZipFile(whl).read("nicbench/web/static/vendor/VERSION.json"))
    assert stamp["package"] == "uplot" and set(stamp["files"]) == {"uPlot.iife.min.js", "uPlot.min.css",
                                                                    "uPlot.LICENSE"}
    for name, sha in stamp["files"].items():
        assert hashlib.sha256(zipfile.ZipFile(whl).read(f"nicbench/web/static/vendor/{name}")).hexdigest() == sha
    assert b"MIT" in zipfile.ZipFile(whl).read("nicbench/web/static/vendor/uPlot.LICENSE")
    meta = zipfile.ZipFile(whl).read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: Apache-2.0 AND GPL-2.0-only AND MIT" in meta
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def test_the_installed_nicbench_checks_every_example_outside_the_repository(wheel_venv):
    _, work, env = wheel_venv
    imported = subprocess.run(["python", "-c", "import nicbench, sys; print(nicbench.__file__)"], capture_output=True,
                              text=True, cwd=work, env=env, timeout=60).stdout
    assert "/venv/lib/" in imported and str(ROOT) not in imported
    listed = json.loads(nb(env, work, "init", "--list", "--json").stdout)
    assert len(listed) >= 7
    for e in listed:
        p = nb(env, work, "init", f"{e['name']}.toml", "--example", e["name"])
        assert p.returncode == 0, p.stderr
        c = nb(env, work, "check", f"{e['name']}.toml")
        assert c.returncode == 0, c.stderr
        assert c.stdout.startswith(f"{e['name']}: valid")
    schema = json.loads(nb(env, work, "schema").stdout)
    assert schema["title"] == "nicbench plan"
    assert "Exit codes:" in nb(env, work, "--help").stdout


def _lab_plan(work: Path, env: dict[str, str], example: str, lab: str, edits: tuple[tuple[str, str], ...] = ()) -> Path:
    path = work / f"{lab}.toml"
    assert nb(env, work, "init", path, "--example", example, "--force").returncode == 0
    text = path.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    path.write_text(text)
    return path


def _not_ok(p: subprocess.CompletedProcess[str]) -> list[str]:
    """Why a run was not clean: its FAILED/PARTIAL lines and final error, and the
    points its analysis rejected (their records are ok; only the report says why)."""
    out = [ln for ln in p.stderr.splitlines() if "FAILED" in ln or "PARTIAL" in ln or ln.startswith("nicbench:")]
    try:
        # the run's document comes first on stdout; with exit 7 the error's follows it
        report = json.JSONDecoder().raw_decode(p.stdout.lstrip())[0].get("report")
        trials = json.loads((Path(report).parent / "points.json").read_text())["trials"] if report else []
    except (ValueError, OSError):
        trials = []
    return out + [f"{t['point']} {t['status']}: {t['error']}" for t in trials if t["status"] != "ok"]


def _ran(p: subprocess.CompletedProcess[str], points: int) -> dict:
    assert p.returncode == 0, "\n".join(_not_ok(p)) or p.stderr[-3000:]
    doc = json.loads(p.stdout)
    assert doc["points_ok"] == points and doc["points_failed"] == 0 and Path(doc["report"]).exists()
    return doc


@pytest.mark.lab
def test_the_installed_nicbench_runs_a_short_lab_plan(wheel_venv):
    _, work, env = wheel_venv
    plan = _lab_plan(work, env, "quickstart", "nwq", (('name = "quick"', 'name = "nwq"'),))
    _ran(nb(env, work, "run", plan, "--store", work / "store", "--json", timeout=300), 4)
    assert namespaces("nwq") == []


@pytest.mark.lab
def test_setup_builds_nbgen_for_this_user_and_a_packet_plan_runs_with_it(wheel_venv):
    _, work, env = wheel_venv
    plan = _lab_plan(work, env, "seed003", "nwp", (
        ('name = "pkt"', 'name = "nwp"'), ('engines = ["nbgen", "trafgen"]', 'engines = ["nbgen"]'),
        ("frame_sizes = [64, 128, 256, 512, 1024, 1518]", "frame_sizes = [64, 1518]"),
        ("ports = [1, 2]", "ports = [1]")))
    before = nb(env, work, "run", plan, "--store", work / "store")
    assert before.returncode == 3 and "run 'nicbench setup'" in before.stderr
    assert before.stderr.count("preflight") == 1 and namespaces("nwp") == []
    s = nb(env, work, "--json", "setup", timeout=600)
    assert s.returncode == 0, s.stderr
    built = json.loads(s.stdout)
    for tool in ("nbgen", "nbperf"):       # both native tools, from the wheel's package data
        assert built["builds"][tool]["built_now"] and built[tool].startswith(env["NICBENCH_HOME"])
        assert built["builds"][tool]["version"].startswith(f"{tool} ")
    doc = _ran(nb(env, work, "run", plan, "--store", work / "store", "--json", timeout=300), 2)
    rows = json.loads((Path(doc["report"]).parent / "points.json").read_text())["points"]
    assert all(r["rx_pps"] and r["rx_pps"] > 1e4 for r in rows)
    assert namespaces("nwp") == []
