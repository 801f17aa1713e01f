"""Tuning applied to and restored from real lab hosts (root)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import lab_up, plan_text

from nicbench.api import execute, load_run, render
from nicbench.core.errors import InputError
from nicbench.hosts.facts import collect
from nicbench.lab import manager
from nicbench.lab.topology import make_spec
from nicbench.plan import parse_plan
from nicbench.run.hosts import lab_spec
from nicbench.tuning import apply as engine
from nicbench.tuning import knobs
from nicbench.tuning.audit import audit
from nicbench.tuning.profile import Profile
from nicbench.tuning.types import Target

pytestmark = pytest.mark.lab

PROFILE = """
[profiles.t]
[[profiles.t.settings]]
kind = "sysctl"
key = "net.ipv4.tcp_timestamps"
value = 0
[[profiles.t.settings]]
kind = "sysctl"
key = "net.core.optmem_max"
value = 524288
[[profiles.t.settings]]
kind = "sysctl"
key = "net.ipv4.tcp_no_such_knob"
value = 1
optional = true
[[profiles.t.settings]]
kind = "ethtool"
feature = "offload"
params = { gro = "on" }
[[profiles.t.settings]]
kind = "ethtool"
feature = "channels"
params = { rx = "max" }
[[profiles.t.settings]]
kind = "rps"
cpus = "all"
flow_cnt = 2048
"""
WATCHED = ["/proc/sys/net/ipv4/tcp_timestamps", "/proc/sys/net/core/optmem_max",
           "/sys/class/net/eth0/queues/rx-0/rps_cpus", "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt"]


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.setenv("NICBENCH_RESTORE_DIR", str(tmp_path / "restore"))
    spec = make_spec("e2et", [("srv", "server"), ("c1", "client")], 1500)
    manager.down(spec.name)
    lab = lab_up(spec)
    yield lab
    manager.down(spec.name)


def profile() -> Profile:
    return parse_plan(plan_text("t", "e2et", clients=1) + PROFILE).profiles["t"]


def targets(lab) -> list[Target]:
    out = []
    for h in ("srv", "c1"):
        t = lab.transport(h)
        out.append(Target(h, lab.spec.host(h).role, t, f"lab-e2et-{h}", "eth0", collect(t, "x", ["eth0"], ())[0],
                          lab=True))
    return out


def state(lab) -> dict:
    """Everything the profile touches, on every lab host."""
    out = {}
    for h in ("srv", "c1"):
        t = lab.transport(h)
        for p in WATCHED:
            out[(h, p)] = t.read_text(p).strip()
        out[(h, "gro")] = [ln for ln in t.run(["ethtool", "-k", "eth0"]).stdout.splitlines()
                           if ln.startswith("generic-receive-offload")][0]
        out[(h, "channels")] = t.run(["ethtool", "-l", "eth0"]).stdout
    return out


def test_audit_changes_nothing(lab, tmp_path):
    before = state(lab)
    sysctls = subprocess.run(["ip", "netns", "exec", lab.spec.host("srv").netns, "sysctl", "net"],
                             capture_output=True, text=True).stdout
    rows = audit(profile(), targets(lab)).rows
    assert state(lab) == before
    assert subprocess.run(["ip", "netns", "exec", lab.spec.host("srv").netns, "sysctl", "net"],
                          capture_output=True, text=True).stdout == sysctls
    assert not (tmp_path / "restore").exists() or not list((tmp_path / "restore").iterdir())
    by = {(r.host, r.setting): r for r in rows}
    assert by[("srv", "sysctl net.ipv4.tcp_timestamps")].status == "differs"
    assert by[("srv", "sysctl net.ipv4.tcp_no_such_knob")].status == "unsupported"


def test_apply_restore_round_trip_and_restore_twice(lab, tmp_path):
    before = state(lab)
    rows = engine.apply(profile(), targets(lab)).rows
    by = {(r.host, r.setting): r for r in rows}
    assert by[("srv", "sysctl net.ipv4.tcp_timestamps")].status == "applied"
    assert by[("c1", "ethtool eth0 offload gro")].status == "applied"
    assert by[("srv", "ethtool eth0 channels rx")].wanted == "2"          # "max" read from the driver
    assert by[("srv", "sysctl net.ipv4.tcp_no_such_knob")].status == "unsupported"   # reported, not fatal
    assert lab.transport("srv").read_text(WATCHED[0]).strip() == "0"
    assert "generic-receive-offload: on" in state(lab)[("c1", "gro")]
    # RPS is set from inside each host's namespace, on its own veth's queue
    assert by[("c1", "rps eth0 rx-0")].status == "applied" and by[("c1", "rfs eth0 rx-0")].status == "applied"
    online = knobs.cpu_set(open("/sys/devices/system/cpu/online").read().strip())
    assert int(lab.transport("c1").read_text(WATCHED[2]).strip().replace(",", ""), 16) == sum(1 << c for c in online)
    assert lab.transport("c1").read_text(WATCHED[3]).strip() == "2048"
    # apply again: the restore file keeps the original priors
    engine.apply(profile(), targets(lab))
    for t in targets(lab):
        restored = engine.restore(t.transport, t.restore_id)
        assert restored and all(r.status == "restored" for r in restored)
    assert state(lab) == before
    assert all(engine.restore(t.transport, t.restore_id) == [] for t in targets(lab))   # harmless
    assert state(lab) == before


def test_killed_between_two_changes_then_tune_restore(lab, tmp_path):
    plan = tmp_path / "p.toml"
    plan.write_text(plan_text("t", "e2et", clients=1) + PROFILE)
    before = state(lab)
    env = dict(os.environ, NICBENCH_RESTORE_DIR=str(tmp_path / "restore"))
    cmd = [sys.executable, "-m", "nicbench.cli.main", "tune", "apply", "--profile", "t", "--plan", str(plan),
           "--lab", "e2et", "--step-delay", "5", "srv"]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    srv = lab.transport("srv")
    deadline = time.monotonic() + 20
    while srv.read_text(WATCHED[0]).strip() != "0":       # the first change is made...
        assert time.monotonic() < deadline and p.poll() is None
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)                      # ...and the process dies before the second
    p.wait()
    assert srv.read_text(WATCHED[1]).strip() == before[("srv", WATCHED[1])]
    assert (tmp_path / "restore" / "lab-e2et-srv.json").exists()
    r = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "tune", "restore"], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert state(lab) == before
    assert not (tmp_path / "restore" / "lab-e2et-srv.json").exists()


def test_bad_profile_for_the_hosts_changes_nothing(lab, tmp_path):
    before = state(lab)
    bad = parse_plan(plan_text("t", "e2et", clients=1) + PROFILE +
                     '[[profiles.t.settings]]\nkind = "pinning"\npolicy = "cpus"\ncpus = "0-63"\n').profiles["t"]
    with pytest.raises(InputError) as e:
        engine.apply(bad, targets(lab))
    assert "names CPU" in e.value.one_line() and "nothing was changed" in e.value.one_line()
    nic = parse_plan(plan_text("t", "e2et", clients=1) + '[profiles.t]\n[[profiles.t.settings]]\n'
                     'kind = "irq_affinity"\n').profiles["t"]
    ts = [Target(t.host, t.role, t.transport, t.restore_id, "eth9",
                 collect(t.transport, "x", ["eth9"], ())[0], lab=True) for t in targets(lab)]
    with pytest.raises(InputError) as e:
        engine.apply(nic, ts)
    assert "no interface eth9" in e.value.one_line()
    assert state(lab) == before and not (tmp_path / "restore").exists()


def test_host_wide_settings_only_with_the_flag(lab, tmp_path):
    p = parse_plan(plan_text("t", "e2et", clients=1) + '[profiles.t]\n[[profiles.t.settings]]\n'
                   'kind = "sysctl"\nkey = "net.core.netdev_max_backlog"\nvalue = 2345\n').profiles["t"]
    orig = Path("/proc/sys/net/core/netdev_max_backlog").read_text().strip()
    [row] = [r for r in engine.apply(p, targets(lab)).rows if r.scope != "check"]
    assert row.host == "machine" and row.status == "host-wide"
    assert Path("/proc/sys/net/core/netdev_max_backlog").read_text().strip() == orig
    try:
        [row] = [r for r in engine.apply(p, targets(lab), host_wide=True).rows if r.scope != "check"]
        assert row.status == "applied"
        assert Path("/proc/sys/net/core/netdev_max_backlog").read_text().strip() == "2345"
    finally:
        from nicbench.hosts.transport import LocalTransport
        engine.restore(LocalTransport("machine"), "machine")
    assert Path("/proc/sys/net/core/netdev_max_backlog").read_text().strip() == orig


def test_a_plan_applies_tuning_pins_tools_records_and_restores(tmp_path, monkeypatch):
    monkeypatch.setenv("NICBENCH_RESTORE_DIR", str(tmp_path / "restore"))
    text = ('tuning = "t"\n' + plan_text("tuned", "e2eu", clients=1, connections=(2,), duration=2, omit=1)
            + PROFILE + '[[profiles.t.settings]]\nkind = "pinning"\npolicy = "cpus"\ncpus = "1"\n')
    plan = parse_plan(text)
    lab = lab_up(lab_spec(plan))
    try:
        srv = lab.transport("srv")
        before = srv.read_text(WATCHED[0]).strip()
        out = execute(plan, text, store=tmp_path)          # reuses the lab: restoring is visible
        assert srv.read_text(WATCHED[0]).strip() == before
    finally:
        manager.down("e2eu")
    view = load_run(out.run_dir)
    [t] = view.trials
    assert t.status == "ok", t.error
    tuning = view.info.meta["tuning"]
    by = {(r["host"], r["setting"]): r for r in tuning["rows"]}
    assert by[("srv", "sysctl net.ipv4.tcp_timestamps")]["status"] == "applied"
    assert tuning["pinning"] == {"srv": "1", "c1": "1"}
    assert t.tool_cpus and all(w["allowed"] == "1" and w["seen"] == [1] for w in t.tool_cpus.values())
    # the points ran with timestamps off: the facts recorded say so, and the ceiling uses it
    assert {h.host: h.value("sysctl.net.ipv4.tcp_timestamps") for h in view.facts if h.host != "machine"} == \
        {"srv": 0, "c1": 0}
    assert view.link.timestamps is False
    page = render(view).read_text()
    assert "Profile <b>t</b> applied" in page and "allowed CPUs 1, ran on 1" in page
    assert not list((tmp_path / "restore").glob("*.json"))


def test_ctrl_c_mid_run_restores_host_wide_tuning(tmp_path):
    from helpers import nicbench
    orig = Path("/proc/sys/net/core/netdev_max_backlog").read_text().strip()
    plan = tmp_path / "long.toml"
    plan.write_text('tuning = "t"\n' + plan_text("long", "e2ev", clients=1, duration=30, omit=0)
                    + '[profiles.t]\n[[profiles.t.settings]]\nkind = "sysctl"\n'
                      'key = "net.core.netdev_max_backlog"\nvalue = 3456\n')
    env_dir = tmp_path / "restore"
    os.environ["NICBENCH_RESTORE_DIR"] = str(env_dir)
    try:
        p = nicbench("run", plan, "--store", tmp_path / "store", "--host-wide")
        deadline = time.time() + 30
        while Path("/proc/sys/net/core/netdev_max_backlog").read_text().strip() != "3456":
            assert time.time() < deadline and p.poll() is None
            time.sleep(0.1)
        # another shell cannot restore (or apply) under a running run
        r = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "tune", "restore"], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 2 and "in use by another nicbench" in r.stderr, r.stderr
        assert Path("/proc/sys/net/core/netdev_max_backlog").read_text().strip() == "3456"
        time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
    finally:
        os.environ.pop("NICBENCH_RESTORE_DIR")
    assert p.returncode == 130, err
    assert Path("/proc/sys/net/core/netdev_max_backlog").read_text().strip() == orig
    assert not list(env_dir.glob("*.json"))


def test_more_signals_during_clean_up_do_not_cut_it_short(tmp_path):
    """Ctrl-C, then a volley of SIGTERM and SIGINT while the run cleans up
    (the audit's case: a second signal landed in the restore): the tuning is
    restored all the same, the lab is gone, the run says it was interrupted."""
    from helpers import namespaces, nicbench

    from nicbench.store.reader import open_run_dir
    orig = Path("/proc/sys/net/core/netdev_max_backlog").read_text().strip()
    plan = tmp_path / "long.toml"
    plan.write_text('tuning = "t"\n' + plan_text("long", "e2ew", clients=2, duration=30, omit=0)
                    + '[profiles.t]\n[[profiles.t.settings]]\nkind = "sysctl"\n'
                      'key = "net.core.netdev_max_backlog"\nvalue = 3457\n'
                      '[[profiles.t.settings]]\nkind = "sysctl"\nkey = "net.ipv4.tcp_timestamps"\nvalue = 0\n')
    env = {**os.environ, "NICBENCH_RESTORE_DIR": str(tmp_path / "restore")}
    p = nicbench("run", plan, "--store", tmp_path / "store", "--host-wide", env=env)
    deadline = time.time() + 30
    runs = tmp_path / "store" / "runs"
    # tuned, and the run recorded (after the tuning its facts are read again: seconds on a busy machine)
    while Path("/proc/sys/net/core/netdev_max_backlog").read_text().strip() != "3457" \
            or not (runs.is_dir() and any(runs.iterdir())):
        assert time.time() < deadline and p.poll() is None
        time.sleep(0.05)
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    for i in range(40):                     # 0.8 s of signals: they land in the clean-up
        time.sleep(0.02)
        if p.poll() is not None:
            break
        p.send_signal(signal.SIGTERM if i % 2 else signal.SIGINT)
    _, err = p.communicate(timeout=60)
    # clean-up finished and the run said so; a signal after that may end the process
    # before it exits by itself (nothing is left to undo then)
    assert p.returncode in (130, -signal.SIGINT, -signal.SIGTERM), err
    assert "interrupted:" in err and "finished points are stored" in err, err
    assert "during clean-up: finishing it first" in err, err      # the volley did reach the clean-up
    assert "Traceback" not in err and "nicbench: clean-up:" not in err, err       # no step failed
    assert Path("/proc/sys/net/core/netdev_max_backlog").read_text().strip() == orig
    assert not list((tmp_path / "restore").glob("*.json"))
    assert namespaces("e2ew") == []
    [run_dir] = runs.iterdir()
    assert open_run_dir(run_dir).meta()["status"] == "interrupted"


def test_tuning_is_all_or_nothing_a_missing_setting_stops_the_run_and_undoes_the_rest(tmp_path, monkeypatch):
    """The audit's case: one setting that does not exist, the others applied,
    and the run went on with partial tuning (exit 0).  Now nothing runs and
    what was applied is put back."""
    from nicbench.core.errors import PreflightError
    monkeypatch.setenv("NICBENCH_RESTORE_DIR", str(tmp_path / "restore"))
    text = ('tuning = "t"\n' + plan_text("partial", "e2ex", clients=1, duration=2, omit=0)
            + '[profiles.t]\n[[profiles.t.settings]]\nkind = "sysctl"\nkey = "net.ipv4.tcp_timestamps"\nvalue = 0\n'
              '[[profiles.t.settings]]\nkind = "sysctl"\nkey = "net.ipv4.tcp_no_such_knob"\nvalue = 1\n')
    plan = parse_plan(text)
    lab = lab_up(lab_spec(plan))
    try:
        srv = lab.transport("srv")
        before = srv.read_text(WATCHED[0]).strip()
        with pytest.raises(PreflightError) as e:
            execute(plan, text, store=tmp_path / "store")
        line = e.value.one_line()
        assert "tcp_no_such_knob: unsupported" in line and "optional = true" in line, line
        assert srv.read_text(WATCHED[0]).strip() == before          # the applied one went back
        assert not list((tmp_path / "restore").glob("*.json"))
        if (tmp_path / "store" / "archive.sqlite").exists():      # no point ran (a run row may say it stopped)
            from nicbench.store.archive import Archive
            with Archive.open(tmp_path / "store", create=False) as a:
                assert all(r.trials_done == 0 for r in a.runs()), [(r.run_id, r.trials_done) for r in a.runs()]
    finally:
        manager.down("e2ex")


def test_a_setting_changed_during_the_run_fails_the_point_and_is_not_clobbered(tmp_path, monkeypatch):
    """Someone else changes a tuned sysctl mid-run: the point it is found
    after fails naming it, and the restore leaves their value alone, saying so."""
    from helpers import namespaces, nicbench, procs_in
    monkeypatch.setenv("NICBENCH_RESTORE_DIR", str(tmp_path / "restore"))
    plan = tmp_path / "drift.toml"
    plan.write_text('tuning = "t"\n' + plan_text("drift", "e2ey", clients=1, duration=4, omit=0)
                    + '[profiles.t]\n[[profiles.t.settings]]\nkind = "sysctl"\n'
                      'key = "net.ipv4.tcp_fin_timeout"\nvalue = 33\n')
    p = nicbench("run", plan, "--store", tmp_path / "store", "--no-report", env=dict(os.environ))
    # the change must come after preflight's read-back of what was applied (a
    # change before it is a profile not in force: exit 3, 1 CI run in many when
    # this waited for the value only): wait for the point's iperf3 client (on
    # the server host: direction tx), which is spawned after preflight
    def point_started() -> bool:
        return bool(procs_in("nb-e2ey-srv", lambda argv: argv[0] == b"iperf3" and b"-c" in argv))
    knob = ["ip", "netns", "exec", "nb-e2ey-srv", "sysctl", "-n", "net.ipv4.tcp_fin_timeout"]
    deadline = time.time() + 60
    while not point_started():
        assert time.time() < deadline and p.poll() is None, p.poll()
        time.sleep(0.02)
    assert subprocess.run(knob, capture_output=True, text=True).stdout.strip() == "33"
    subprocess.run(["ip", "netns", "exec", "nb-e2ey-srv", "sysctl", "-qw", "net.ipv4.tcp_fin_timeout=44"], check=True)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 7, err                                   # a failed point
    assert "left as it is, not overwritten" in err and "tcp_fin_timeout" in err, err
    assert namespaces("e2ey") == []
    [run_dir] = (tmp_path / "store" / "runs").iterdir()
    from nicbench.store.reader import open_run_dir
    r = open_run_dir(run_dir)
    [t] = r.trials()
    assert t.status == "failed" and t.meta["tuning_drift"][0]["current"] == "44"
    assert "tuning drifted during the point" in t.error and "tcp_fin_timeout" in t.error
    assert "tcp_fin_timeout" in r.meta()["untune_left"][0]


def test_a_run_refuses_to_stack_on_tuning_already_in_force(lab, tmp_path):
    from nicbench.core.errors import PreflightError
    before = state(lab)
    engine.apply(profile(), targets(lab))
    text = 'tuning = "t"\n' + plan_text("t", "e2et", clients=1) + PROFILE
    with pytest.raises(PreflightError) as e:
        execute(parse_plan(text), text, store=tmp_path / "store")
    assert "tune restore" in e.value.one_line()
    assert lab.transport("srv").read_text(WATCHED[0]).strip() == "0"        # the earlier tuning is untouched
    for t in targets(lab):
        engine.restore(t.transport, t.restore_id)
    assert state(lab) == before
