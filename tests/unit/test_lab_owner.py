"""Which labs 'nicbench lab down --all' may remove: this user's, and not
while a run that built one is still running (lab/owner.py)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from nicbench.hosts.tracker import proc_starttime
from nicbench.lab import manager, owner


@pytest.fixture
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("NICBENCH_STATE_DIR", str(tmp_path))
    monkeypatch.delenv("SUDO_UID", raising=False)
    (tmp_path / "labs").mkdir()
    return tmp_path / "labs"


def write(state, name, own):
    (state / f"{name}.json").write_text(json.dumps({"name": name, "mtu": 1500, "hosts": [], "owner": own}))


def test_the_owner_is_the_user_behind_sudo(monkeypatch):
    monkeypatch.setenv("SUDO_UID", "54321")
    rec = owner.record("lab up")
    assert rec["uid"] == 54321 and rec["pid"] == os.getpid() and rec["purpose"] == "lab up"
    assert rec["pid_start"] == proc_starttime(os.getpid())
    monkeypatch.delenv("SUDO_UID")
    assert owner.record("run")["uid"] == os.getuid()


def test_all_removes_only_this_users_labs_that_no_run_uses(state):
    me = os.getuid()
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        write(state, "mine", {"uid": me, "user": "me", "pid": 1, "pid_start": "0", "purpose": "lab up"})
        write(state, "theirs", {"uid": me + 1, "user": "bob", "pid": 1, "pid_start": "0", "purpose": "lab up"})
        write(state, "running", {"uid": me, "user": "me", "pid": sleeper.pid,
                                 "pid_start": proc_starttime(sleeper.pid), "purpose": "run"})
        write(state, "stale", {"uid": me, "user": "me", "pid": sleeper.pid, "pid_start": "1",  # pid reused
                               "purpose": "run"})
        (state / "old.json").write_text(json.dumps({"name": "old", "mtu": 1500, "hosts": []}))
        why = {n: manager.ownership(n).why_not() for n in ("mine", "theirs", "running", "stale", "old")}
        assert why["mine"] is None and why["stale"] is None
        assert why["theirs"] == "bob's lab up"
        assert why["running"] == f"in use by a run (me's run, still running as pid {sleeper.pid})"
        assert why["old"] == "owner not recorded"
        assert manager.ownership("gone").owner is None          # no state file at all
    finally:
        sleeper.kill()
        sleeper.wait()
