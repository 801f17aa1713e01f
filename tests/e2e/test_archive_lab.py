"""The archive with the real lab: a live run's page in a real browser
updating as the run's points finish, and a run killed with kill -9 that
'nicbench recover' cleans up (root; loads run under the shared lock)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from browser import artefacts, chromium, served
from helpers import namespaces, nicbench, plan_text
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from nicbench.store.archive import Archive

pytestmark = pytest.mark.lab
TOOLS = ("iperf3",)                  # none may outlive a test (conftest.py checks)


@pytest.fixture(scope="module")
def shots(request):
    d = artefacts()
    with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
        print(f"\nscreenshots of the live-run test: {d}")
    return d


def _full(d, path: Path) -> None:
    h = d.execute_script("return document.documentElement.scrollHeight")
    d.set_window_size(1400, min(max(900, h + 40), 6000))
    d.save_screenshot(str(path))


def test_a_live_lab_run_updates_its_page_as_points_finish(tmp_path, shots):
    """A real lab run (4 points) writes into the archive; the dashboard, in
    another process, pushes each new point to the open page."""
    lab = "e2ear1"
    store = tmp_path / "store"
    plan = tmp_path / "live.toml"
    plan.write_text(plan_text("live", lab, directions=("tx", "rx"), io_sizes=("64K", "128K"), duration=2, omit=0,
                              trim=0))
    Archive.open(store).close()
    with chromium() as browser, served(store, tmp_path / "cache") as url:
        run = nicbench("run", plan, "--store", store, "--no-report")
        try:
            run_id = None
            deadline = time.monotonic() + 60
            while run_id is None:
                assert time.monotonic() < deadline and run.poll() is None, run.communicate()
                with Archive.open(store) as a:
                    rows = a.runs()
                    run_id = rows[0].run_id if rows else None
                time.sleep(0.1)
            browser.get(f"{url}/run/{run_id}")
            seen: list[str] = []
            status = "running"
            deadline = time.monotonic() + 120
            while status == "running" and time.monotonic() < deadline:
                try:
                    done = browser.find_element(By.ID, "done").text
                    status = browser.find_element(By.ID, "status").text
                except Exception:  # noqa: BLE001 - the page reloads into the report when the run ends
                    done, status = "", "reloading"
                if status == "running" and done and (not seen or seen[-1] != done):
                    seen.append(done)
                    browser.save_screenshot(str(shots / f"live-{len(seen)}-{done}-of-4.png"))
                time.sleep(0.1)
            out, err = run.communicate(timeout=120)
            assert run.returncode == 0, err
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        # the page moved on at least twice while the run was still running
        assert len(seen) >= 3 and [int(x) for x in seen] == sorted(int(x) for x in seen), seen
        WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.ID, "figures"))
        assert browser.find_element(By.ID, "status").text == "done"
        _full(browser, shots / "live-finished.png")
    assert namespaces(lab) == []


def test_kill_9_leaves_an_aborted_run_that_recover_cleans_up(tmp_path):
    """kill -9 of a tuned lab run: the run shows as aborted, the next run
    says what it left (and refuses to stack on its tuning), 'nicbench
    recover --yes' restores the tuning and removes the lab it built."""
    lab = "e2ek9"
    restore = tmp_path / "restore"
    store = tmp_path / "store"
    plan = tmp_path / "long.toml"
    plan.write_text('tuning = "t"\n' + plan_text("long", lab, clients=1, duration=30, omit=0)
                    + '[profiles.t]\n[[profiles.t.settings]]\nkind = "sysctl"\nkey = "net.ipv4.tcp_timestamps"\n'
                      'value = 0\n')
    env = {**os.environ, "NICBENCH_RESTORE_DIR": str(restore)}

    def nb(*args) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "nicbench.cli.main", *map(str, args), "--store", str(store)],
                              capture_output=True, text=True, timeout=120, env=env)
    p = nicbench("run", plan, "--store", store, env=env)
    try:
        deadline = time.monotonic() + 60
        while not (restore.is_dir() and list(restore.glob("*.json")) and store.joinpath("runs").is_dir()):
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.1)
        time.sleep(2.0)                                   # the first point is under way
    finally:
        p.kill()
        p.communicate(timeout=30)
    try:
        assert namespaces(lab) and list(restore.glob("*.json"))
        runs = nb("runs", "--json")
        [row] = json.loads(runs.stdout)
        assert row["status"] == "aborted", runs.stderr
        found = nb("recover")
        assert found.returncode == 0 and f"run {row['run_id']}" in found.stdout
        assert "tuning is still in force" in found.stdout and f"lab {lab} built by run" in found.stdout
        nxt = nb("run", plan)
        assert nxt.returncode == 3 and f"tuning left in force by {row['run_id']}" in nxt.stderr
        assert "nicbench recover --yes" in nxt.stderr and "left by a killed nicbench" in nxt.stderr
        done = nb("recover", "--yes")
        assert done.returncode == 0, done.stdout + done.stderr
        assert namespaces(lab) == [] and not list(restore.glob("*.json"))
        [row] = json.loads(nb("runs", "--json").stdout)
        assert row["status"] == "aborted"
        assert nb("recover").stdout.startswith("nothing left behind")
    finally:
        subprocess.run([sys.executable, "-m", "nicbench.cli.main", "lab", "down", lab], capture_output=True,
                       env=env, timeout=60)
