"""'nicbench lab down --all' removes this user's labs only, and none a running
run still uses; another user's lab needs --force (real namespaces, root)."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from helpers import namespaces, nicbench, plan_text

pytestmark = pytest.mark.lab


def cli(*args: object, env: dict[str, str], timeout: float = 60) -> tuple[int, str, str]:
    p = nicbench(*args, env=env)
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def test_down_all_is_scoped_to_this_users_idle_labs(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "SUDO_UID"}
    env["NICBENCH_STATE_DIR"] = str(tmp_path / "state")      # other sessions' labs have no state file here
    other = {**env, "SUDO_UID": "54321"}
    run = None
    try:
        assert cli("lab", "up", "--name", "nown1", "--clients", "1", env=other)[0] == 0
        assert cli("lab", "up", "--name", "nown2", "--clients", "1", env=env)[0] == 0
        plan = tmp_path / "slow.toml"           # shaped to 10 Mbit/s: a long point that costs little CPU
        plan.write_text(plan_text("slow", "nown3", clients=1, duration=40, omit=0, speed="10M"))
        run = nicbench("run", plan, "--store", tmp_path / "store", env=env)
        deadline = time.time() + 30
        while time.time() < deadline and len(namespaces("nown3")) < 3:
            time.sleep(0.2)
        assert len(namespaces("nown3")) == 3
        time.sleep(1)

        code, out, err = cli("lab", "down", "--all", "--json", env=env)
        assert code == 0, err
        res = json.loads(out)
        assert list(res["removed"]) == ["nown2"] and namespaces("nown2") == []
        assert "54321" in res["skipped"]["nown1"] or "'s lab up" in res["skipped"]["nown1"]
        assert res["skipped"]["nown3"].startswith("in use by a run")
        assert len(namespaces("nown1")) == 3 and len(namespaces("nown3")) == 3
        assert run.poll() is None                                    # the run goes on

        code, _, err = cli("lab", "down", "nown1", env=env)
        assert code == 4 and "lab nown1 is not yours to remove" in err and "--force" in err
        assert len(namespaces("nown1")) == 3
        code, _, err = cli("lab", "down", "nown1", "--force", env=env)
        assert code == 0, err
        assert namespaces("nown1") == []
    finally:
        if run is not None and run.poll() is None:
            run.send_signal(signal.SIGTERM)              # a clean stop removes the lab it built
            run.communicate(timeout=60)
        for lab in ("nown1", "nown2", "nown3"):
            if namespaces(lab):
                cli("lab", "down", lab, "--force", env=env)
    assert not namespaces("nown1") and not namespaces("nown2") and not namespaces("nown3")
