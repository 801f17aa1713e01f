"""'nicbench setup' builds nbperf (the TCP and UDP studies' engine) as it
builds nbgen: its sources are package data, what its build needs is checked
and named with the package, the build lands in the per-user home keyed by the
sources' hash, and the studies find it there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from conftest import ROOT
from nicbench.core.errors import PreflightError
from nicbench.native import build as nb
from nicbench.tools import nbperf


def nbcli(*args: object, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nicbench.cli.main", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=180, env=env)


def test_nbperfs_sources_are_package_data_and_the_checkout_path_still_works():
    src = ROOT / "src" / "nicbench" / "native" / "nbperf"
    assert nb.NBPERF.sources == src
    assert all((src / f).is_file() for f in nb.NBPERF.files) and (src / "LICENSE").is_file()
    assert {p.name for p in src.glob("*.c")} | {"Makefile", "nbperf.h"} == set(nb.NBPERF.files)
    assert (ROOT / "native" / "nbperf" / "Makefile").resolve() == src / "Makefile"     # make -C native/nbperf
    text = (ROOT / "pyproject.toml").read_text()
    assert '"native/nbperf/*.c", "native/nbperf/*.h"' in text and "src/nicbench/native/nbperf/LICENSE" in text


def test_the_check_names_a_missing_compiler_and_header_with_their_packages(monkeypatch, tmp_path):
    monkeypatch.setenv("NICBENCH_HOME", str(tmp_path))
    real = nb.find_tool
    monkeypatch.setattr(nb, "find_tool", lambda name: None if name in ("gcc", "cc") else real(name))
    req = nb.check("nbperf")
    assert not req.ok and req.message() == "missing: gcc (package gcc)" and "make" in req.tools
    assert req.install_hint().startswith("on Debian/Ubuntu: sudo apt-get install gcc")
    with pytest.raises(PreflightError) as e:
        nb.build(name="nbperf")
    assert e.value.one_line().startswith("nicbench: preflight: nicbench setup: nbperf cannot be built: missing: gcc")
    assert not (tmp_path / "nbperf").exists()
    monkeypatch.setattr(nb, "find_tool", real)
    monkeypatch.setattr(nb, "NBPERF", replace(nb.NBPERF, headers={**nb.NBPERF.headers,
                                                                  "nosuch/header.h": "libnosuch-dev"}))
    assert nb.check("nbperf").message() == "missing: <nosuch/header.h> (package libnosuch-dev)"
    # nbperf needs no BPF tool chain and no kernel version: nothing of nbgen's is asked
    assert set(nb.check("nbperf").tools) == {"make", "cc"} and not nb.check("nbperf").warnings


def test_setup_check_without_a_tool_chain_fails_in_one_line_naming_the_packages(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path), "NICBENCH_HOME": str(tmp_path)}     # no make, no gcc
    p = nbcli("setup", "--check", "--only", "nbperf", env=env)
    assert p.returncode == 3, p.stderr
    [line] = p.stderr.strip().splitlines()
    assert "nbperf cannot be built: missing: make (package make), gcc (package gcc)" in line
    assert "sudo apt-get install make gcc" in line


def test_the_studies_find_this_versions_build_in_the_per_user_home(monkeypatch, tmp_path):
    monkeypatch.setenv("NICBENCH_HOME", str(tmp_path))
    monkeypatch.delenv("NICBENCH_NBPERF", raising=False)
    exe = nb.tool_path("nbperf")
    assert exe == tmp_path / "nbperf" / nb.source_hash("nbperf") / "nbperf"
    assert nb.source_hash("nbperf") != nb.source_hash("nbgen")
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\necho nbperf 1.0.0\n")
    exe.chmod(0o755)
    assert nbperf.binary() == str(exe)
    monkeypatch.setenv("NICBENCH_NBPERF", "/nonexistent/nbperf")      # the user's choice wins, even a wrong one
    assert nbperf.binary() is None


def test_setup_builds_a_working_nbperf_into_a_fresh_xdg_home(tmp_path):
    """The real build (gcc, ~10 s here): the binary runs, says its version,
    refuses bad input with its one line, and is the one the studies pick."""
    env = {k: v for k, v in os.environ.items() if k not in ("NICBENCH_HOME", "NICBENCH_NBPERF")}
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg")
    p = nbcli("--json", "setup", "--only", "nbperf", env=env)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    path = Path(out["nbperf"])
    assert path.parent.parent == tmp_path / "xdg" / "nicbench" / "nbperf" and out["builds"]["nbperf"]["built_now"]
    assert out["builds"]["nbperf"]["version"].startswith("nbperf 1.") and "nbgen" not in out["builds"]
    v = subprocess.run([path, "version"], capture_output=True, text=True, timeout=10)
    assert v.returncode == 0 and v.stdout.startswith("nbperf ")
    bad = subprocess.run([path, "client", "--server", "127.0.0.1", "--start", "+1", "--duration", "1", "--io", "0"],
                         capture_output=True, text=True, timeout=10)
    assert bad.returncode == 2 and bad.stderr.startswith("nbperf: error: ") and bad.stderr.count("\n") == 1
    found = subprocess.run([sys.executable, "-c", "from nicbench.tools import nbperf; print(nbperf.binary())"],
                           capture_output=True, text=True, timeout=30, env=env)
    assert found.stdout.strip() == str(path)
    again = json.loads(nbcli("--json", "setup", "--only", "nbperf", env=env).stdout)
    assert again["nbperf"] == str(path) and not again["builds"]["nbperf"]["built_now"]
