"""Storage over NBD with real nbdkit and fio in the lab (root)."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
from helpers import namespaces

from nicbench.api import execute, load_run, render
from nicbench.core.errors import ToolError
from nicbench.lab import manager
from nicbench.plan import parse_plan
from nicbench.store.reader import open_run_dir

pytestmark = pytest.mark.lab

TOOLS = ("nbdkit", "fio", "tgtd", "iscsi-perf")   # none may outlive a test (conftest.py checks)



def plan(lab: str, extra: str = "", ops='["read", "write"]', sizes='["4K", "32K"]', duration=2) -> str:
    return f'''name = "storage-e2e"
[lab]
name = "{lab}"
[link]
speed = "1G"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
[study]
kind = "storage"
luns = 4
lun_size = "64M"
ops = {ops}
block_sizes = {sizes}
duration = {duration}
ramp = 1
{extra}
'''


def test_two_initiators_aggregate_is_the_sum_of_each(tmp_path):
    text = plan("e2es4")
    out = execute(parse_plan(text), text, store=tmp_path)
    assert namespaces("e2es4") == []
    view = load_run(out.run_dir)
    assert all(t.status == "ok" for t in view.trials), [t.error for t in view.trials]
    for t in view.trials:
        assert set(t.per_initiator_mb_s) == {"c1", "c2"}
        # one barrier starts the initiators, but each fio's jobs connect to their LUNs one
        # after another (seen: 77 ms between the first and last job under load): the window
        # all jobs share, trimmed by a report interval, is what is counted (the skew is
        # recorded; how small it is is this machine's scheduling)
        assert t.start_skew_s is not None and t.trim_s is not None and t.start_skew_s >= 0
        assert t.mb_s == pytest.approx(sum(t.per_initiator_mb_s.values()), rel=0.03)
        assert t.cpu is not None
    for p in view.points:
        # nothing above the 1G link's ceiling (how near it came is this machine's speed)
        assert p.of_ceiling is not None and not p.above_ceiling, (p.point, p.mb_s, p.ceiling_mb_s)
    page = render(view).read_text()
    assert "Seed 004" in page and (out.run_dir / "report" / "storage-iops.png").exists()


def test_a_lun_that_vanishes_fails_its_point_in_bounded_time_and_nothing_is_left(tmp_path):
    """nbdkit of LUN 0 killed during the first point: fio fails or hangs, the
    point fails within its limit, the next points fail fast, no process stays."""
    text = plan("e2es5", ops='["read"]', sizes='["4K", "8K"]', duration=3, extra="timeout_margin = 5")
    killed: list[int] = []
    stop = threading.Event()

    def kill_lun0():
        pidfile = manager.state_dir() / "e2es5.pids"
        while not stop.is_set() and not killed:
            time.sleep(0.1)
            try:
                for ln in pidfile.read_text().splitlines():
                    pid = int(ln.split()[1])
                    cmd = open(f"/proc/{pid}/cmdline").read()
                    if "nbdkit" in cmd and "-p\x0010809" in cmd:
                        time.sleep(2.0)              # inside the first point
                        os.kill(pid, signal.SIGKILL)
                        killed.append(pid)
                        break
            except (OSError, ValueError, IndexError):
                continue
    th = threading.Thread(target=kill_lun0, daemon=True)
    th.start()
    t0 = time.monotonic()
    try:
        out = execute(parse_plan(text), text, store=tmp_path)
    finally:
        stop.set()
        th.join()
    assert killed and time.monotonic() - t0 < 60
    trials = load_run(out.run_dir).trials
    assert [t.status for t in trials] == ["failed", "failed"]
    assert "gone" in trials[1].error
    assert namespaces("e2es5") == []


def test_a_target_that_cannot_start_is_one_clear_error(tmp_path, monkeypatch):
    """nbdkit refusing its arguments: its own words in one line, nothing left behind."""
    from nicbench.studies.storage import runner as storage
    real = storage.target_argv
    monkeypatch.setattr(storage, "target_argv", lambda s, a, lun: real(s, a, lun)[:-1] + ["allocator=nosuch"])
    text = plan("e2es6")
    with pytest.raises(ToolError) as e:
        execute(parse_plan(text), text, store=tmp_path)
    line = e.value.one_line()
    assert "did not start" in line and "allocator" in line, line
    assert namespaces("e2es6") == []


def test_iscsi_reads_from_tgt_null_luns_and_tgtd_is_gone(tmp_path):
    text = plan("e2es7", ops='["read"]', sizes='["32K"]', extra='target = "iscsi"\nlun_kind = "null"')
    out = execute(parse_plan(text), text, store=tmp_path)
    [t] = load_run(out.run_dir).trials
    assert t.status == "ok", t.error
    assert set(t.per_initiator_mb_s) == {"c1", "c2"} and all(v > 0 for v in t.per_initiator_mb_s.values())
    assert namespaces("e2es7") == []
    # tgtd made its control socket under /var/run/tgtd (shared by every namespace,
    # so it lives outside the lab); stopping the study removed it
    assert os.path.isdir("/var/run/tgtd")
    assert not [f for f in os.listdir("/var/run/tgtd") if f.startswith("socket.23260")]


def test_existing_block_devices_with_libaio(tmp_path):
    """target = "devices": LUNs the initiators already see as block devices
    (here two loop devices standing in for logged-in iSCSI/NVMe-TCP LUNs)."""
    import subprocess
    loops, files = [], []
    try:
        for i in range(2):
            f = f"/dev/shm/nicbench-e2e-loop{i}"
            subprocess.run(["truncate", "-s", "64M", f], check=True)
            files.append(f)
            r = subprocess.run(["losetup", "-f", "--show", f], capture_output=True, text=True)
            if r.returncode != 0:
                pytest.skip(f"no loop devices on this machine: {r.stderr.strip()}")
            loops.append(r.stdout.strip())
        text = plan("e2es8", ops='["read"]', sizes='["32K"]').replace("luns = 4\n", "").replace(
            'lun_size = "64M"', 'target = "devices"\ntransport = "iscsi"\n'
            f'devices = {{ c1 = ["{loops[0]}"], c2 = ["{loops[1]}"] }}')
        out = execute(parse_plan(text), text, store=tmp_path)
        [t] = load_run(out.run_dir).trials
        assert t.status == "ok", t.error
        assert set(t.per_initiator_mb_s) == {"c1", "c2"} and all(v > 0 for v in t.per_initiator_mb_s.values())
        argv = open_run_dir(out.run_dir).trials()[0].meta["argv"]
        assert any(f"--filename={loops[0]}" in a and "--ioengine=libaio" in a for a in argv.values())
        # writes to existing devices need an explicit yes
        with pytest.raises(Exception) as e:
            parse_plan(text.replace('ops = ["read"]', 'ops = ["write"]'))
        assert "destructive = true" in str(e.value)
    finally:
        for lo in loops:
            subprocess.run(["losetup", "-d", lo])
        for f in files:
            os.remove(f)
