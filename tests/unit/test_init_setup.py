"""A pip user's first steps: the examples ship inside the package and
'nicbench init' writes one; 'nicbench setup' names what building nbgen needs
and puts it where the packet study looks (a per-user directory)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from test_study_runners_fake import fake_hosts, packet_host

from conftest import ROOT
from nicbench.core.errors import PreflightError
from nicbench.native import build as nb
from nicbench.plan import load_plan, parse_plan
from nicbench.plan.examples import example, names
from nicbench.studies.packets.runner import PacketRunner
from nicbench.tools import nbgen


def nbcli(*args: object, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nicbench.cli.main", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=120, env={**os.environ, **(env or {})})


def test_the_examples_are_package_data_and_the_repository_path_still_works():
    assert names() == sorted(p.stem for p in (ROOT / "src" / "nicbench" / "examples").glob("*.toml"))
    assert {"quickstart", "realhosts-tcp", "seed000-tcp-multiclient", "seed003-packets"} <= set(names())
    assert (ROOT / "examples" / "seed000-tcp-multiclient.toml").read_text() == \
        example("seed000-tcp-multiclient").text            # the repository's examples/ is the same


def test_init_writes_the_quickstart_then_refuses_to_overwrite(tmp_path):
    p = nbcli("init", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = tmp_path / "quickstart.toml"
    assert f"wrote {out}" in p.stdout and "nicbench check quickstart.toml" in p.stdout
    plan, _ = load_plan(out)
    assert plan.study.kind == "tcp" and not plan.remote
    again = nbcli("init", cwd=tmp_path)
    assert again.returncode == 2 and f"{out}: file exists" in again.stderr and "--force" in again.stderr
    assert nbcli("init", "--force", cwd=tmp_path).returncode == 0


def test_init_by_prefix_into_a_path_and_a_typo_gets_a_suggestion(tmp_path):
    p = nbcli("--json", "init", "mine.toml", "--example", "seed003", cwd=tmp_path)
    assert json.loads(p.stdout)["example"] == "seed003-packets"
    assert load_plan(tmp_path / "mine.toml")[0].study.kind == "packets"
    p = nbcli("init", "--example", "quikstart", cwd=tmp_path)
    assert p.returncode == 2 and "'quikstart' is not an example (did you mean 'quickstart'?)" in p.stderr
    listed = json.loads(nbcli("init", "--list", "--json", cwd=tmp_path).stdout)
    assert [e["name"] for e in listed] == names()
    assert {e["name"]: e["where"] for e in listed}["realhosts-tcp"] == "real hosts (ssh)"


def test_setup_check_names_every_missing_requirement_with_its_package(monkeypatch, tmp_path):
    monkeypatch.setenv("NICBENCH_HOME", str(tmp_path))
    real = nb.find_tool
    monkeypatch.setattr(nb, "find_tool", lambda name: None if name in ("clang", "bpftool") else real(name))
    monkeypatch.setattr(nb, "NBGEN", replace(nb.NBGEN, headers={**nb.NBGEN.headers,
                                                                "nosuch/header.h": "libnosuch-dev"}))
    req = nb.check()
    assert not req.ok
    assert req.message() == ("missing: clang (package clang), bpftool (package bpftool), <nosuch/header.h> "
                             "(package libnosuch-dev)")
    assert req.install_hint().startswith("on Debian/Ubuntu: sudo apt-get install clang bpftool libnosuch-dev")
    with pytest.raises(PreflightError) as e:
        nb.build()
    assert "nbgen cannot be built: missing: clang" in e.value.one_line()
    assert not (tmp_path / "nbgen").exists()


def test_the_packet_study_finds_this_versions_build_in_the_per_user_home(monkeypatch, tmp_path):
    monkeypatch.setenv("NICBENCH_HOME", str(tmp_path))
    monkeypatch.delenv("NICBENCH_NBGEN", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    assert nbgen.binary() is None
    exe = nb.nbgen_path()
    assert exe.parent.name == nb.source_hash() and exe.parent.parent == tmp_path / "nbgen"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\necho nbgen 0\n")
    exe.chmod(0o755)
    assert nbgen.binary() == str(exe)
    monkeypatch.setattr(nb, "source_hash", lambda name="nbgen": "0123456789ab")   # other sources: not their build
    assert nbgen.binary() is None


def test_a_packet_plan_without_nbgen_says_run_setup_and_preflight_once(monkeypatch, tmp_path):
    monkeypatch.setenv("NICBENCH_HOME", str(tmp_path))
    monkeypatch.delenv("NICBENCH_NBGEN", raising=False)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    plan = parse_plan(example("seed003").text.replace('engines = ["nbgen", "trafgen"]', 'engines = ["nbgen"]'))
    with pytest.raises(PreflightError) as e:
        PacketRunner(plan, fake_hosts(plan, {"gen": packet_host("01", "gen"), "sink": packet_host("02", "sink")},
                                      direct=2)).preflight()
    line = e.value.one_line()
    assert line.startswith("nicbench: preflight: packets study: nbgen is not built for this nicbench")
    assert str(nb.nbgen_path()) in line and "run 'nicbench setup'" in line and line.count("preflight") == 1
