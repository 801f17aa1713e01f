"""Host leases with real sshds (issue 32 item 1; root, under the lab lock).

Two controllers share the lab's hosts: one runs a lab plan in the lab's SSH
mode, the other a plan whose Ansible inventory names the same hosts as real
machines (reached through the lab's switch), into another archive.  The
second is refused naming the first, or with --wait runs after it; a first
controller killed with SIGKILL leaves its hosts free (the kernel ended the
locks) and only its archive record, which 'nicbench recover' releases.

Decisions only (exit codes, the lines said, what the archive holds): the first
controller is held still with SIGSTOP while the second is tried, so how fast
this shared machine is decides nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers import finish, lab_up, nicbench, plan_text, procs_in

from nicbench.core.errors import PreflightError
from nicbench.hosts import lease
from nicbench.hosts.ssh import SshTransport
from nicbench.hosts.transport import NetnsTransport
from nicbench.lab import manager, sshd
from nicbench.plan import parse_plan
from nicbench.run.hosts import lab_spec
from nicbench.store.archive import Archive

pytestmark = pytest.mark.lab
TOOLS = ("iperf3", "sshd")          # none may outlive a test (conftest.py checks)
P = os.environ.get("NICBENCH_E2E_LAB_PREFIX", "e2e")


def _plans(tmp_path: Path, lab: str, duration: float) -> tuple[Path, Path, object]:
    """The lab plan (SSH mode, 10 Mbit/s: a point that costs little CPU), the
    lab it runs on (built here, so it is reused and kept by the runs), and a
    plan on the same hosts from an inventory."""
    text = plan_text("holder", lab, clients=1, connections=(1,), duration=duration, omit=0, trim=0,
                     speed="10M").replace(f'name = "{lab}"', f'name = "{lab}"\ntransport = "ssh"')
    (tmp_path / "holder.toml").write_text(text)
    spec = lab_spec(parse_plan(text))
    lab_obj = lab_up(spec)
    sshd.start(lab_obj)
    cfg = sshd.ssh_dir(lab) / "ssh_config"
    proxy = f"ip netns exec {spec.switch_ns} bash -c 'exec 3<>/dev/tcp/%h/%p; cat <&3 & exec cat >&3'"
    hosts = {role: "".join(f"        {h.name}:\n          ansible_host: {h.ip}\n          nicbench_test_ip: {h.ip}\n"
                           for h in spec.hosts if h.role == role) for role in ("server", "client")}
    (tmp_path / "lab.yml").write_text(
        "all:\n  vars:\n    ansible_user: root\n    nicbench_interface: eth0\n"
        f"    ansible_ssh_common_args: >-\n      -F {cfg} -o \"ProxyCommand={proxy}\"\n"
        "  children:\n    nicbench_server:\n      hosts:\n" + hosts["server"]
        + "    nicbench_clients:\n      hosts:\n" + hosts["client"])
    (tmp_path / "other.toml").write_text('name = "other"\ninventory = "lab.yml"\n[link]\nspeed = "10M"\n[study]\n'
                                         'connections = [1]\nduration = 2\nomit = 0\ninterval = 0.5\ntrim = 0\n')
    return tmp_path / "holder.toml", tmp_path / "other.toml", spec


def _in_flight(p: subprocess.Popen, lab: str) -> None:
    """Until the run's point is in flight: its iperf3 client runs in the server's namespace."""
    deadline = time.monotonic() + 120
    while not procs_in(f"nb-{lab}-srv", lambda argv: b"-c" in argv and argv[0].endswith(b"iperf3")):
        assert time.monotonic() < deadline and p.poll() is None, p.communicate()
        time.sleep(0.05)


def _active(store: Path) -> list[dict]:
    p = nicbench("--json", "runs", "--active", "--store", store)
    code, out, err = finish(p, 60)
    assert code == 0, err
    return json.loads(out)


def test_a_second_controller_is_refused_a_leased_host_and_with_wait_runs_after(tmp_path):
    lab = f"{P}hl1"
    holder, other, _ = _plans(tmp_path, lab, duration=4)
    first = nicbench("run", holder, "--store", tmp_path / "s1", "--no-report")
    queued: subprocess.Popen | None = None
    stopped = False
    try:
        _in_flight(first, lab)
        os.kill(first.pid, signal.SIGSTOP)          # held still: its leases with it
        stopped = True
        with Archive.open(tmp_path / "s1") as a:
            [row] = a.runs()
        [act] = _active(tmp_path / "s1")
        assert (act["run_id"], act["status"], sorted(x["host"] for x in act["leases"])) == (
            row.run_id, "running", ["c1", "srv"])
        # another controller, another archive: refused at once, naming the holder
        code, out, err = finish(nicbench("run", other, "--store", tmp_path / "s2", "--no-report"), 120)
        assert code == 3, err
        [line] = err.strip().splitlines()
        assert line.startswith(f"nicbench: preflight: host leases: host c1 is leased by run {row.run_id} "
                               f"(plan holder, controller {os.uname().nodename} pid {first.pid}, since "), line
        assert f"host srv is leased by run {row.run_id}" in line and "--wait [SECONDS]" in line
        assert not (tmp_path / "s2" / "runs").exists() or not any((tmp_path / "s2" / "runs").iterdir())
        # with --wait it queues: it says so, and runs once the first has ended
        queued = nicbench("run", other, "--store", tmp_path / "s2", "--no-report", "--wait", "600")
        said: list[str] = []
        waiting = threading.Event()

        def read() -> None:
            assert queued.stderr is not None
            for ln in queued.stderr:
                said.append(ln)
                if "waiting up to 600s for host" in ln:
                    waiting.set()
        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        assert waiting.wait(180), said
        assert f"host c1 (leased by run {row.run_id}" in "".join(said)
        os.kill(first.pid, signal.SIGCONT)
        stopped = False
        _, err1 = first.communicate(timeout=120)
        assert first.returncode == 0, err1
        out, _ = queued.communicate(timeout=180)
        reader.join(10)
        assert queued.returncode == 0, "".join(said)
        with Archive.open(tmp_path / "s2") as b:
            [queued_row] = b.runs()
            assert queued_row.status == "done" and queued_row.trials_ok == 1
            assert b.held_leases() == []
        with Archive.open(tmp_path / "s1") as a:
            assert a.held_leases() == [] and a.row(row.run_id).status == "done"
        assert _active(tmp_path / "s1") == [] and _active(tmp_path / "s2") == []
    finally:
        if stopped:
            os.kill(first.pid, signal.SIGCONT)
        for p in (first, queued):
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.communicate(timeout=60)
        manager.down(lab)


def test_a_controller_killed_mid_run_frees_its_hosts_and_recover_cleans_its_record(tmp_path):
    lab = f"{P}hl2"
    holder, _, spec = _plans(tmp_path, lab, duration=8)
    first = nicbench("run", holder, "--store", tmp_path / "s1", "--no-report")
    try:
        _in_flight(first, lab)
        with Archive.open(tmp_path / "s1") as a:
            [row] = a.runs()
        # the lease taken over SSH is the namespace's own lock: refused through ip netns exec too
        ns = {h.name: NetnsTransport(h.name, h.netns) for h in spec.hosts}
        with pytest.raises(PreflightError, match=rf"host srv is leased by run {row.run_id} .*pid {first.pid},"):
            lease.take_all({"srv": ns["srv"]}, "probe")
        os.kill(first.pid, signal.SIGKILL)
        first.wait(30)
        # the kernel ended its locks: the hosts can be leased again, over SSH and through
        # the namespaces (a moment after the kill: the holders see their pipe's end)
        ts = {h: SshTransport(h, t) for h, t in sshd.targets(manager.load(lab)).items()}
        try:
            for t in ts.values():
                t.connect()
            again = lease.take_all(ts, "probe", wait=60, say=lambda _: None, poll=0.2)
            assert sorted(again.hosts) == ["c1", "srv"]
            again.release()
        finally:
            for t in ts.values():
                t.close()
        lease.take_all(ns, "probe", wait=60, say=lambda _: None, poll=0.2).release()
        # the archive still says it holds them, as killed, until recover releases the record
        [act] = _active(tmp_path / "s1")
        assert (act["run_id"], act["status"], sorted(x["host"] for x in act["leases"])) == (
            row.run_id, "killed (nicbench recover releases its leases)", ["c1", "srv"])
        code, out, err = finish(nicbench("recover", "--yes", "--store", tmp_path / "s1"), 120)
        assert code == 0, err
        assert f"run {row.run_id}'s leases on hosts c1, srv are still recorded as held" in out, out
        assert f"run {row.run_id} (pid {first.pid}) was killed" in out, out
        assert _active(tmp_path / "s1") == []
        with Archive.open(tmp_path / "s1") as a:
            assert a.held_leases() == [] and a.row(row.run_id).status == "aborted"
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(30)
        manager.down(lab)          # the killed run's ssh masters are tracked with the lab: ended here
