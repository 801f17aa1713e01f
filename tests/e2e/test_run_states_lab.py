"""Half-done states with the real lab (issue 33): a second run on a lab in use
is refused without touching the first; a lab left half-built by a killed run
is seen by 'nicbench recover' and replaced by the next run (root; run under
the shared lock)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from helpers import namespaces, nicbench, plan_text, procs_in

from nicbench.store.archive import Archive

pytestmark = pytest.mark.lab
TOOLS = ("iperf3",)                  # none may outlive a test (conftest.py checks)


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "SUDO_UID"}
    env["NICBENCH_STATE_DIR"] = str(tmp_path / "state")
    return env


def _down(lab: str, env: dict[str, str]) -> None:
    if namespaces(lab) or (Path(env["NICBENCH_STATE_DIR"]) / "labs" / f"{lab}.json").exists():
        nicbench("lab", "down", lab, "--force", env=env).communicate(timeout=60)


def test_a_second_run_on_a_lab_in_use_is_refused_and_touches_nothing(tmp_path):
    lab = "e2eas1"
    env = _env(tmp_path)
    store = tmp_path / "store"
    plan = tmp_path / "busy.toml"     # shaped to 10 Mbit/s: a point that costs little CPU
    plan.write_text(plan_text("busy", lab, clients=1, connections=(1,), duration=6, omit=0, trim=0, speed="10M"))
    first = nicbench("run", plan, "--store", store, "--no-report", env=env)
    stopped = False
    try:
        # the first run's point is in flight: its client (tx: on the server) is running
        deadline = time.monotonic() + 60
        while not procs_in(f"nb-{lab}-srv", lambda argv: b"-c" in argv and argv[0].endswith(b"iperf3")):
            assert time.monotonic() < deadline and first.poll() is None, first.communicate()
            time.sleep(0.05)
        # the first nicbench is held still (its tools run on) while the second starts: on a
        # loaded machine a second nicbench's start-up alone can outlast a short point
        os.kill(first.pid, signal.SIGSTOP)
        stopped = True
        with Archive.open(store) as a:
            [row] = a.runs()
        second = nicbench("run", plan, "--store", store, "--no-report", env=env)
        _, err = second.communicate(timeout=60)
        assert second.returncode == 3, err
        [line] = err.strip().splitlines()
        assert f"lab e2eas1: the lab is in use by run {row.run_id} (pid {first.pid}, plan busy" in line, line
        assert "nothing was started or stopped" in line and "hint:" in line
        os.kill(first.pid, signal.SIGCONT)
        stopped = False
        out, err = first.communicate(timeout=60)
        assert first.returncode == 0, err
        with Archive.open(store) as a:
            [row] = a.runs()              # the refused run left no run behind
            got = a.db.query("SELECT status, error FROM trials WHERE rid = ?", (row.rid,))
        assert [tuple(t) for t in got] == [("ok", None)], got       # its point, in flight, was not killed
        assert namespaces(lab) == []      # the first run removed the lab it built
    finally:
        if stopped:
            os.kill(first.pid, signal.SIGCONT)
        if first.poll() is None:
            first.send_signal(signal.SIGTERM)
            first.communicate(timeout=60)
        _down(lab, env)

def _half_built(lab: str, plan: Path, env: dict[str, str], dead: int) -> None:
    """What a run killed with kill -9 while building the lab leaves: the state
    file (written before the first namespace), some of the namespaces, an
    owner that was a run whose process is gone."""
    up = nicbench("lab", "up", plan, env=env)
    assert up.wait(timeout=60) == 0, up.communicate()
    state = Path(env["NICBENCH_STATE_DIR"]) / "labs" / f"{lab}.json"
    doc = json.loads(state.read_text())
    doc["owner"].update(pid=dead, pid_start="1", purpose="run")
    state.write_text(json.dumps(doc))
    subprocess.run(["ip", "netns", "del", f"nb-{lab}-c1"], check=True)


def test_a_lab_half_built_by_a_killed_run_is_seen_by_recover_and_replaced_by_a_run(tmp_path):
    lab = "e2eas2"
    env = _env(tmp_path)
    store = tmp_path / "store"
    plan = tmp_path / "half.toml"
    plan.write_text(plan_text("half", lab, clients=1, connections=(1,), duration=1, omit=0, trim=0))
    dead = subprocess.Popen(["true"])
    dead.wait()
    try:
        _half_built(lab, plan, env, dead.pid)
        p = nicbench("recover", "--store", store, env=env)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err
        assert f"lab {lab} half-built by a run whose process {dead.pid} is gone" in out, out
        p = nicbench("recover", "--yes", "--store", store, env=env)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0 and out.strip().endswith("done"), out + err
        assert namespaces(lab) == []

        _half_built(lab, plan, env, dead.pid)
        run = nicbench("run", plan, "--store", store, "--no-report", env=env)
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        assert f"lab {lab} was half-built by a run whose process {dead.pid} is gone" in err + out, err + out
        assert "removed and built afresh" in err + out
        assert namespaces(lab) == []          # and the run removed the lab it built
    finally:
        _down(lab, env)
