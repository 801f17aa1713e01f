"""Hosts over SSH, against real sshd in the lab's SSH mode (root): the same
results as through namespaces, strict host keys, a dropped connection that
leaves nothing running, a host that is down named in preflight."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from helpers import alive, goodput_agrees_with_the_wire, lab_up, namespaces, overcount_flagged, pids_with, plan_text

from nicbench.api import execute, load_run
from nicbench.cli.options import read_plan
from nicbench.core.errors import PreflightError
from nicbench.hosts.ssh import SshTransport
from nicbench.hosts.sshcheck import preflight
from nicbench.lab import manager, sshd
from nicbench.lab.topology import DirectLink, make_spec
from nicbench.plan import parse_plan
from nicbench.report.view import read_run

pytestmark = pytest.mark.lab

TOOLS = ("iperf3", "sshd")   # none may outlive a test (conftest.py checks)
# lab names: e2essN, or with another prefix (a session sharing the machine runs its own labs)
P = os.environ.get("NICBENCH_E2E_LAB_PREFIX", "e2e")


def ssh_plan(lab: str, transport: str, duration: float = 3) -> str:
    return plan_text("ssh-e2e", lab, connections=(4,), duration=duration, omit=1, speed="1G").replace(
        f'name = "{lab}"', f'name = "{lab}"\ntransport = "{transport}"')


def test_tcp_over_ssh_gives_the_netns_result(tmp_path):
    views = {}
    for transport in ("netns", "ssh"):
        text = ssh_plan(f"{P}ss1", transport)
        try:
            # the lab kept: what must end is ended by nicbench and the watchdogs, not by the lab's teardown
            out = execute(parse_plan(text), text, store=tmp_path / transport, keep_lab=True)
            views[transport] = load_run(out.run_dir)
            deadline = time.monotonic() + 5
            while pids_with("nicbench-wrap") and time.monotonic() < deadline:
                time.sleep(0.1)
            assert pids_with("nicbench-wrap") == [] and pids_with("iperf3 -s") == []
        finally:
            manager.down(f"{P}ss1")
        assert namespaces(f"{P}ss1") == []
    a, b = views["netns"].trials[0], views["ssh"].trials[0]
    assert a.status == b.status == "ok", (a.error, b.error)
    # the same result: the same receivers counted, and each run's goodput what its wire
    # carried (the two runs' Gbps are not compared: they ran one after the other on a
    # shared machine, and how fast each went is not what nicbench decides)
    assert set(a.receiver["tx"].per_host) == set(b.receiver["tx"].per_host) == {"c1", "c2"}
    for v in views.values():
        [p] = v.points
        assert not p.above_ceiling and not p.wire_above_link, (p.max_of_ceiling, p.max_wire_of_link)
        goodput_agrees_with_the_wire(p)
    meta = views["ssh"].info.meta
    assert meta["host_transport"] == "ssh" and set(meta["ssh"]) == {"srv", "c1", "c2"}
    assert all(abs(h["clock_offset_s"]) < 0.05 and h["root"] for h in meta["ssh"].values())
    assert not Path(f"/var/lib/nicbench/lab-ssh/{P}ss1").exists()


@pytest.fixture
def ssh_lab_up():
    spec = make_spec(f"{P}ss2", [("srv", "server"), ("c1", "client"), ("c2", "client")], 1500)
    lab = lab_up(spec)
    try:
        yield lab, sshd.start(lab)
    finally:
        manager.down(f"{P}ss2")


def test_a_changed_or_unknown_host_key_is_refused(ssh_lab_up):
    lab, targets = ssh_lab_up
    kh = sshd.ssh_dir(f"{P}ss2") / "known_hosts"
    good = kh.read_text()
    other = sshd.ssh_dir(f"{P}ss2") / "other"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    ip = lab.spec.host("srv").ip
    kind, key = other.with_suffix(".pub").read_text().split()[:2]
    kh.write_text("".join(f"{ip} {kind} {key}\n" if ln.startswith(ip + " ") else ln + "\n"
                          for ln in good.splitlines()))
    t = SshTransport("srv", targets["srv"])
    with pytest.raises(PreflightError) as e:
        t.connect()
    line = e.value.one_line()
    assert "srv" in line and "CHANGED" in line and "ssh-keygen -R" in line
    kh.write_text("".join(ln + "\n" for ln in good.splitlines() if not ln.startswith(ip + " ")))
    with pytest.raises(PreflightError, match="not in known_hosts"):
        SshTransport("srv", targets["srv"]).connect()
    kh.write_text(good)
    t = SshTransport("srv", targets["srv"]).connect()
    assert t.run(["hostname"]).stdout.strip() == "srv"
    t.close()


def test_a_host_that_is_down_is_named_in_preflight_with_the_others_problems(ssh_lab_up):
    lab, targets = ssh_lab_up
    subprocess.run(["ip", "-n", lab.spec.host("c1").netns, "link", "set", "eth0", "down"], check=True)
    ts = {h: SshTransport(h, t) for h, t in targets.items()}
    want = {h.name: {"eth0": (h.ip, 1500)} for h in lab.spec.hosts}
    want["c2"]["eth0"] = (lab.spec.host("c2").ip, 9000)
    t0 = time.monotonic()
    checks, problems = preflight(ts, want)
    assert time.monotonic() - t0 < 15                   # bounded by the connect timeout, hosts in parallel
    text = "; ".join(problems)
    assert "c1: cannot connect over SSH" in text and ("does not answer" in text or "not up after" in text)
    assert "c2: eth0 has MTU 1500, the plan wants 9000" in text
    assert "srv" not in text and checks["srv"].root
    for t in ts.values():
        t.close()


def test_a_dropped_connection_loses_that_pair_keeps_the_other_and_leaves_no_remote_process(tmp_path):
    """c1's SSH master killed mid-point: its sessions drop, the wrappers' watchdogs
    kill the iperf3 servers there, c1's pair is lost (named), c2's data is kept as a
    partial point, the run ends, nothing remains."""
    text = ssh_plan(f"{P}ss3", "ssh", duration=6)
    seen: dict = {}

    def drop_c1() -> None:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            lab = manager.load(f"{P}ss3")
            if lab is not None and pids_with("iperf3 -c"):
                ip = lab.spec.host("c1").ip
                masters = [p for p in pids_with(f"root@{ip}") if p in pids_with("ControlMaster=yes")]
                if masters:
                    time.sleep(1.5)                     # well inside the measured part
                    seen["iperf3"] = pids_with("iperf3 -s")
                    os.kill(masters[0], signal.SIGKILL)
                    seen["killed"] = masters[0]
                    return
            time.sleep(0.05)

    killer = threading.Thread(target=drop_c1, daemon=True)
    killer.start()
    try:
        # the lab kept: nicbench cannot reach c1 any more, and the lab's teardown
        # does not run, so only c1's watchdogs can end its iperf3 servers
        out = execute(parse_plan(text), text, store=tmp_path, keep_lab=True)
        killer.join(5)
        assert "killed" in seen, "the run never got to its point"
        view = load_run(out.run_dir)
        [t] = view.trials
        assert t.status == "partial" and "c1:5201 lost" in t.error, (t.status, t.error)
        assert set(t.receiver["tx"].per_host) == {"c2"} and t.gbps > 0, t.receiver
        deadline = time.monotonic() + 5
        while any(alive(p) for p in seen["iperf3"]) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert seen["iperf3"] and not [p for p in seen["iperf3"] if alive(p)]
        assert pids_with("nicbench-wrap") == []
    finally:
        manager.down(f"{P}ss3")
    assert namespaces(f"{P}ss3") == []


def _inventory(path: Path, spec, cfg: Path) -> None:
    """A YAML inventory of the lab's hosts as if they were machines, reached
    from outside the lab through a ProxyCommand into its switch."""
    proxy = f"ip netns exec {spec.switch_ns} bash -c 'exec 3<>/dev/tcp/%h/%p; cat <&3 & exec cat >&3'"

    def hosts(role):
        return "".join(f"        {h.name}:\n          ansible_host: {h.ip}\n          nicbench_test_ip: {h.ip}\n"
                       for h in spec.hosts if h.role == role)
    path.write_text("all:\n  vars:\n    ansible_user: root\n    nicbench_interface: eth0\n"
                    f"    ansible_ssh_common_args: >-\n      -F {cfg} -o \"ProxyCommand={proxy}\"\n"
                    "  children:\n    nicbench_server:\n      hosts:\n" + hosts("server")
                    + "    nicbench_clients:\n      hosts:\n" + hosts("client"))


def test_packets_on_real_hosts_over_ssh(tmp_path):
    """The packet study on 'real' hosts: their port NICs named in the plan, nbgen
    and trafgen started over SSH (trafgen's config written on the host).  Paced:
    at full rate trafgen 0.6.8 gives up now and then when the XDP receiver falls
    behind (its ring flush meets a full send buffer, EAGAIN: 5 of 25 runs here;
    tools/trafgen.FULL_SNDBUF) -- a trafgen limit the report names, not what
    this test is about; full rate is tested in the lab (test_packets_lab.py)."""
    spec = make_spec(f"{P}ss5", [("gen", "server"), ("sink", "client")], 1500,
                     direct=(DirectLink(0, "gen", "sink", 1),))
    lab = lab_up(spec)
    try:
        sshd.start(lab)
        _inventory(tmp_path / "lab.yml", spec, sshd.ssh_dir(f"{P}ss5") / "ssh_config")
        (tmp_path / "plan.toml").write_text(
            'name = "remote-packets"\ninventory = "lab.yml"\n[study]\nkind = "packets"\n'
            'engines = ["nbgen", "trafgen"]\nline_rate = "40G"\nrate = 200000\nduration = 2\ntrim = 0.25\n'
            'interfaces = { gen = ["pk0"], sink = ["pk0"] }\n')
        p, text = read_plan(tmp_path / "plan.toml")       # as 'nicbench run' reads it
        out = execute(p, text, store=tmp_path / "st")
        view = load_run(out.run_dir)
        assert [t.error for t in view.trials if t.status != "ok"] == []
        for t in view.trials:
            assert t.rx_pps > 0 and set(t.per_port_rx_pps) == {"pk0"}
            overcount_flagged(t)
        # the counters came from the sampler on each host, stamped by its clock, none missing
        for rec in read_run(out.run_dir).records:
            hs = rec.meta["host_sampling"]
            assert set(hs) == {"gen", "sink"} and all(h["reads"] >= 4 and h["end"] == "stdin" for h in hs.values())
            assert "counters_missing" not in rec.meta and hs["gen"]["clock"] == "mono_ns"
        assert pids_with("nicbench-wrap") == [] and not list(Path("/tmp").glob("nicbench-t*-pk0.cfg"))
    finally:
        manager.down(f"{P}ss5")


def test_real_hosts_from_an_ansible_inventory(tmp_path):
    """The lab's sshds stand in for real machines: no lab for the run, the
    hosts from a YAML inventory (address, user, NIC, test address, ssh
    arguments with a ProxyCommand into the lab's switch), the same result."""
    spec = make_spec(f"{P}ss4", [("srv", "server"), ("c1", "client"), ("c2", "client")], 1500, speed_bps=1e9)
    lab = lab_up(spec)
    try:
        sshd.start(lab)
        _inventory(tmp_path / "lab.yml", spec, sshd.ssh_dir(f"{P}ss4") / "ssh_config")
        (tmp_path / "plan.toml").write_text('name = "remote-e2e"\ninventory = "lab.yml"\n[link]\nspeed = "1G"\n'
                                            '[study]\nconnections = [4]\nduration = 3\nomit = 1\ninterval = 0.5\n'
                                            'trim = 0.25\n')
        p, text = read_plan(tmp_path / "plan.toml")       # as 'nicbench run' reads it
        assert p.remote and p.hosts["srv"].ssh == lab.spec.host("srv").ip
        out = execute(p, text, store=tmp_path / "st")
        view = load_run(out.run_dir)
        t = view.trials[0]
        assert t.status == "ok", t.error
        [p] = view.points                                          # the 1G ceiling, as in the lab
        assert not p.above_ceiling, (p.max_of_ceiling, p.of_ceiling)
        assert t.cpu is not None                                   # the server's CPU, read over SSH
        assert view.info.meta["cpu"]["scope"] == "host" and set(view.info.meta["ssh"]) == {"srv", "c1", "c2"}
        assert sorted(h.host for h in view.facts) == ["c1", "c2", "srv"]  # each host, no lab machine
        assert pids_with("nicbench-wrap") == []
    finally:
        manager.down(f"{P}ss4")
