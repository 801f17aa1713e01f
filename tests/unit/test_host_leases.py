"""Host leases (issue 32 item 1): a lock on each host held by a process nicbench
keeps there, refused or queued for a second run, freed by the kernel when the
controller dies; recorded in the archive, shown by 'runs --active', released
by the run's end or by 'nicbench recover'.

The holder runs here through a transport that is this machine (its lease file
in a temporary state directory, as a lab namespace's is): the same script and
the same ``flock`` as on a real host, without root."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_archive import info, trial

from conftest import run_cli
from nicbench.core.errors import PreflightError
from nicbench.hosts import lease
from nicbench.hosts.transport import LocalTransport
from nicbench.store.archive import Archive
from nicbench.store.writer import RunWriter


class Here(LocalTransport):
    """A host that is this machine, its lease file where a lab namespace's goes."""

    kind = "netns"

    def __init__(self, host: str):
        super().__init__(host)
        self.netns = f"ns-{host}"


@pytest.fixture(autouse=True)
def state(tmp_path, monkeypatch):
    monkeypatch.setenv("NICBENCH_STATE_DIR", str(tmp_path / "state"))


def test_a_second_run_is_refused_naming_the_holder_and_gets_the_host_once_released():
    h1 = Here("h1")
    first = lease.take_all({"h1": h1}, "plan-a")
    assert first.targets() == {"h1": str(lease.lease_dir("ns-h1") / "host.lease")}
    first.note_run("20261128-000000-plan-a-0000")
    with pytest.raises(PreflightError) as e:
        lease.take_all({"h1": Here("h1")}, "plan-b")
    line = e.value.one_line()
    assert line.startswith("nicbench: preflight: host leases: host h1 is leased by run 20261128-000000-plan-a-0000 "
                           f"(plan plan-a, controller {os.uname().nodename} pid {os.getpid()}, since ")
    assert "nothing was started" in line and "--wait [SECONDS]" in line and "nicbench runs --active" in line
    assert "\n" not in line
    first.release()
    second = lease.take_all({"h1": h1}, "plan-b")
    assert second.leases["h1"].held
    second.release()


def test_before_the_run_has_an_id_the_holder_is_said_to_be_starting():
    first = lease.take_all({"h1": Here("h1")}, "plan-a")
    try:
        with pytest.raises(PreflightError, match=r"host h1 is leased by run still starting \(no run id yet\) "
                                                 r"\(plan plan-a,"):
            lease.take_all({"h1": Here("h1")}, "plan-b")
    finally:
        first.release()


def test_all_or_none_a_run_refused_on_one_host_holds_none_of_the_others():
    other = lease.take_all({"h2": Here("h2")}, "plan-a")
    try:
        with pytest.raises(PreflightError, match="host h2 is leased by"):
            lease.take_all({"h1": Here("h1"), "h2": Here("h2"), "h3": Here("h3")}, "plan-b")
        free = lease.take_all({"h1": Here("h1"), "h3": Here("h3")}, "plan-c")     # not left held by plan-b
        free.release()
    finally:
        other.release()


def test_with_wait_a_run_queues_until_the_host_is_free():
    first = lease.take_all({"h1": Here("h1")}, "plan-a")
    first.note_run("run-a")
    said: list[str] = []
    threading.Timer(1.0, first.release).start()
    second = lease.take_all({"h1": Here("h1")}, "plan-b", wait=60, say=said.append, poll=0.2)
    assert second.leases["h1"].held
    second.release()
    assert len(said) == 1 and said[0].startswith("waiting up to 60s for host h1 (leased by run run-a (plan plan-a")


def test_a_wait_that_runs_out_refuses_naming_the_holder():
    first = lease.take_all({"h1": Here("h1")}, "plan-a")
    try:
        with pytest.raises(PreflightError, match=r"still busy after waiting 0.3s: host h1 is leased by run"):
            lease.take_all({"h1": Here("h1")}, "plan-b", wait=0.3, say=lambda _: None, poll=0.1)
    finally:
        first.release()


def test_the_kernel_frees_the_lease_of_a_controller_killed_with_sigkill(tmp_path):
    code = ("import sys, time\nfrom nicbench.hosts import lease\nfrom test_host_leases import Here\n"
            "held = lease.take_all({'h1': Here('h1')}, 'plan-k')\nprint('held', flush=True)\ntime.sleep(120)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "held"
        with pytest.raises(PreflightError, match=rf"host h1 is leased by .* pid {p.pid},"):
            lease.take_all({"h1": Here("h1")}, "plan-b")
        os.kill(p.pid, signal.SIGKILL)
        p.wait(10)
        # the holder's pipe is closed by the kernel: it exits and the lock goes (a moment later)
        after = lease.take_all({"h1": Here("h1")}, "plan-b", wait=20, say=lambda _: None, poll=0.1)
        after.release()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def test_a_host_that_cannot_hold_a_lease_is_one_line_with_a_hint(tmp_path):
    t = Here("h1")
    blocked = tmp_path / "state" / "host-leases"
    blocked.parent.mkdir(parents=True, exist_ok=True)
    blocked.write_text("a file where the lease directory would be")
    with pytest.raises(PreflightError) as e:
        lease.take_all({"h1": t}, "plan-a")
    line = e.value.one_line()
    assert line.startswith("nicbench: preflight: h1: cannot lease the host (exit ") and "hint:" in line


def test_the_holder_line_is_read_whatever_a_login_shell_printed_first():
    assert lease.parse_holder('{"run_id": "r1", "plan": "p"}') == {"run_id": "r1", "plan": "p"}
    assert lease.parse_holder("") == {} and lease.parse_holder("not json") == {} and lease.parse_holder("[1]") == {}
    assert lease.describe({}) == "run still starting (no run id yet) (plan ?, controller ? pid ?, since ?)"


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_the_archive_records_who_holds_which_host_and_the_runs_end_releases_it(tmp_path, capsys):
    store = str(tmp_path / "archive.sqlite")
    a = Archive.open(store)
    w = RunWriter.create(a, info("lease-plan"), total=1)
    w.record_leases("ctl-1", 1000.0, {"srv": "root@10.0.0.1:/run/lock/nicbench/host.lease", "c1": "x"})
    [lease_row, other] = sorted(a.held_leases(), key=lambda x: x.host, reverse=True)
    assert (lease_row.run_id, lease_row.host, lease_row.plan, lease_row.controller, lease_row.pid) == (
        w.info.run_id, "srv", "lease-plan", "ctl-1", os.getpid())
    code, out, _ = run_cli(capsys, "runs", "--active", "--store", store)
    assert code == 0
    [head, row] = out.splitlines()
    assert head.split()[:4] == ["RUN", "ID", "PLAN", "STATUS"]
    assert row.split()[:3] == [w.info.run_id, "lease-plan", "running"] and row.split()[-1] == "c1,srv"
    w.write_trial(trial(0), [], [])
    w.finish("done")
    assert a.held_leases() == []
    code, out, _ = run_cli(capsys, "runs", "--active", "--store", store)
    assert code == 0 and out.strip() == f"no runs going on in {store}"
    a.close()


def test_recover_releases_the_recorded_leases_of_a_killed_run(tmp_path, capsys):
    store = str(tmp_path / "archive.sqlite")
    a = Archive.open(store)
    w = RunWriter.create(a, info("lease-plan"), total=2)
    w.record_leases("ctl-1", 1000.0, {"srv": "t1", "c1": "t2"})
    a.db.execute("UPDATE runs SET pid = ?, pid_start = ? WHERE run_id = ?", (_dead_pid(), "1", w.info.run_id))
    a.close()
    code, out, _ = run_cli(capsys, "--json", "runs", "--active", "--store", store)
    assert code == 0 and '"status": "killed (nicbench recover releases its leases)"' in out
    code, out, _ = run_cli(capsys, "recover", "--store", store)
    assert code == 0
    assert (f"run {w.info.run_id}'s leases on hosts c1, srv are still recorded as held (the locks on the hosts "
            "ended with its process) (released in the archive by 'nicbench recover --yes')") in out
    code, out, _ = run_cli(capsys, "recover", "--yes", "--store", store)
    assert code == 0 and f"run {w.info.run_id}'s leases on hosts c1, srv" in out and out.strip().endswith("done")
    with Archive.open(store) as again:
        assert again.held_leases() == [] and again.row(w.info.run_id).stored_status == "aborted"
    code, out, _ = run_cli(capsys, "runs", "--active", "--store", store)
    assert out.strip() == f"no runs going on in {store}"


def test_wait_takes_an_optional_number_of_seconds(tmp_path, capsys):
    from nicbench.cli.run import run
    [opt] = [p for p in run.params if p.name == "wait"]
    ctx = run.make_context("run", ["plan.toml", "--wait"])
    assert ctx.params["wait"] == 1800.0
    ctx = run.make_context("run", ["plan.toml", "--wait", "5"])
    assert ctx.params["wait"] == 5.0
    ctx = run.make_context("run", ["plan.toml"])
    assert ctx.params["wait"] is None and opt.metavar == "[SECONDS]"
