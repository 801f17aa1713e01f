"""Tuning profiles as data: validation, the NIC IRQ policy, checks (no root needed)."""

import pytest
from helpers_plan import PLAN

from conftest import fixture_text
from nicbench.core.errors import InputError
from nicbench.core.validation import validate
from nicbench.hosts.factparse import parse_facts
from nicbench.hosts.fake import FakeTransport, Script
from nicbench.plan import parse_plan
from nicbench.tuning import knobs
from nicbench.tuning.audit import audit, check_profile
from nicbench.tuning.profile import Profile, load, shipped
from nicbench.tuning.types import Target


def prof(text: str) -> Profile:
    import tomllib
    return validate(Profile, tomllib.loads(text), "p.toml")


def test_shipped_profiles_load_and_the_stock_one_only_audits():
    assert {"stock", "throughput"} <= set(shipped())
    assert load("stock").audit_only and not load("throughput").audit_only
    kinds = {s.kind for s in load("throughput").settings}
    assert kinds == {"sysctl", "service", "governor", "tuned", "irq_affinity", "pinning"}


@pytest.mark.parametrize("text, where, what", [
    ('[[settings]]\nkind = "sysctrl"\nkey = "a.b"\nvalue = 1\n', "settings[0]", "sysctrl"),
    ('[[settings]]\nkind = "sysctl"\nkey = "a.b"\nvalue = [1]\n', "settings[0].sysctl.value", ""),
    ('[[settings]]\nkind = "governor"\nvalue = "turbo"\n', "settings[0].governor.value", "performance"),
    ('[[settings]]\nkind = "ethtool"\nfeature = "ring"\nparams = { rx = "big" }\n', "params", "max"),
    ('[[settings]]\nkind = "ethtool"\nfeature = "offload"\nparams = { tso = 1 }\n', "params", "on"),
    ('[[settings]]\nkind = "pinning"\ncpus = "3-1"\n', "cpus", "backwards"),
    ('[[settings]]\nkind = "rps"\ncpus = "3-1"\n', "cpus", "backwards"),
    ('[[settings]]\nkind = "rps"\ncpus = "some"\n', "rps.cpus", ""),
    ('[[settings]]\nkind = "rps"\nflow_cnt = -1\n', "rps.flow_cnt", ""),
    ('[[settings]]\nkind = "service"\nname = "irqbalance"\nstate = "paused"\n', "state", "stopped"),
    ('[[settings]]\nkind = "sysctl"\nkey = "a.b"\nvalue = 1\n[[settings]]\nkind = "sysctl"\nkey = "a.b"\nvalue = 2\n',
     "settings", "twice"),
])
def test_bad_profiles_are_one_line_errors_naming_the_field(text, where, what):
    with pytest.raises(InputError) as e:
        prof(text)
    line = e.value.one_line()
    assert "\n" not in line and "p.toml" in line and where in line and what in line


def test_plan_names_a_profile_that_exists():
    with pytest.raises(InputError) as e:
        parse_plan('tuning = "fast"\n' + PLAN, "x.toml")
    assert "neither a shipped profile" in e.value.one_line()
    p = parse_plan('tuning = "mine"\n' + PLAN + '[profiles.mine]\n[[profiles.mine.settings]]\n'
                          'kind = "sysctl"\nkey = "net.ipv4.tcp_timestamps"\nvalue = 0\n', "x.toml")
    assert load("mine", dict(p.profiles)).settings[0].key == "net.ipv4.tcp_timestamps"
    with pytest.raises(InputError) as e:
        parse_plan(PLAN + '[profiles.mine]\n[[profiles.mine.settings]]\nkind = "bogus"\n', "x.toml")
    assert "profiles.mine.settings[0]" in e.value.one_line()


def test_cpu_lists_compare_as_sets():
    assert knobs.cpu_set("0-3,8") == {0, 1, 2, 3, 8} and knobs.cpu_set("x") is None
    assert knobs.same("irq:38", "0-1", "0,1") and not knobs.same("irq:38", "0", "1")
    assert knobs.same("sysctl:net.ipv4.tcp_rmem", "4096\t131072  6291456", "4096 131072 6291456")


def test_rps_masks_compare_as_numbers_and_live_under_the_queue():
    assert knobs.path_of("rps:eth0:rx-1") == "/sys/class/net/eth0/queues/rx-1/rps_cpus"
    assert knobs.path_of("rfs:eth0:rx-0") == "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt"
    assert knobs.cpu_mask({0, 1}) == "3" and knobs.cpu_mask({4, 32}) == "100000010"
    assert knobs.same("rps:eth0:rx-0", "00000000,00000003", "3")
    assert not knobs.same("rps:eth0:rx-0", "0", "3") and not knobs.same("rps:eth0:rx-0", "zz", "zz")


def _rps_host(queues: str, online: str | None = "0-1"):
    files = {"/sys/devices/system/cpu/online": online} if online else {}
    files |= {f"/sys/class/net/eth0/queues/{q}/rps_cpus": "0" for q in queues.split()}
    files |= {f"/sys/class/net/eth0/queues/{q}/rps_flow_cnt": "0" for q in queues.split()}
    t = FakeTransport("c1", responder=lambda argv: Script(stdout=queues + "\n" if "rx-*" in " ".join(argv) else ""),
                      files=files)
    return Target("c1", "client", t, "c1", "eth0", None, lab=True)


def test_rps_spreads_every_receive_queue_onto_the_online_cpus_in_the_hosts_own_namespace():
    rows = audit(prof('[[settings]]\nkind = "rps"\nflow_cnt = 4096\n'), [_rps_host("rx-0 rx-1")]).rows
    got = {r.key: (r.current, r.wanted, r.status, r.host, r.scope) for r in rows}
    assert got == {"rps:eth0:rx-0": ("0", "3", "differs", "c1", "host"),
                   "rps:eth0:rx-1": ("0", "3", "differs", "c1", "host"),
                   "rfs:eth0:rx-0": ("0", "4096", "differs", "c1", "host"),
                   "rfs:eth0:rx-1": ("0", "4096", "differs", "c1", "host")}
    [row] = audit(prof('[[settings]]\nkind = "rps"\ncpus = "1"\n'), [_rps_host("rx-0")]).rows
    assert (row.wanted, row.status) == ("2", "differs")


def test_rps_on_a_host_without_it_is_said_not_an_error():
    [row] = audit(prof('[[settings]]\nkind = "rps"\n'), [_rps_host("")]).rows
    assert row.status == "unsupported" and "no receive queue with rps_cpus" in row.note
    [row] = audit(prof('[[settings]]\nkind = "rps"\n'), [_rps_host("rx-0", online=None)]).rows
    assert row.status == "unknown" and "online CPUs are unknown" in row.note


def _virtio(host="srv", ifname="eth0", cpus_files=None):
    facts = parse_facts(fixture_text("facts", "local_virtio.txt"), host=host, role="server", collected=0)
    files = cpus_files or {"/proc/irq/37/smp_affinity_list": "0-1", "/proc/irq/38/smp_affinity_list": "0-1",
                           "/proc/irq/39/smp_affinity_list": "0-1"}
    t = FakeTransport(host, responder=lambda argv: Script(stdout="/usr/bin/taskset\n"), files=files)
    return Target(host, "server", t, host, ifname, facts, lab=False)


def test_irq_policy_puts_one_queue_per_core_of_the_nics_cpus():
    """Recorded virtio NIC: node -1, local CPUs 0-1; its config IRQ is not a queue."""
    p = prof('[[settings]]\nkind = "irq_affinity"\n[[settings]]\nkind = "pinning"\npolicy = "nic-node"\n')
    rows = {r.setting: r for r in audit(p, [_virtio()]).rows}
    assert rows["irq 38 (virtio2-input.0)"].wanted == "0" and rows["irq 38 (virtio2-input.0)"].status == "differs"
    assert rows["irq 39 (virtio2-output.0)"].wanted == "1"
    assert not any("virtio2-config" in s for s in rows)
    assert rows["pinning"].wanted == "0-1" and "local CPUs" in rows["pinning"].note
    shared = rows["check: eth0 IRQs on the tools' cores"]
    assert shared.status == "note" and "virtio2-input.0" in str(shared.current)
    assert rows["check: eth0 NUMA node"].status == "unknown"


def test_irq_policy_on_a_virtual_interface_is_unsupported_not_an_error():
    facts = parse_facts(fixture_text("facts", "netns_veth.txt"), host="c1", role="client", collected=0)
    t = Target("c1", "client", FakeTransport("c1"), "c1", "eth0", facts, lab=False)
    [row, *_] = audit(prof('[[settings]]\nkind = "irq_affinity"\n'), [t]).rows
    assert row.status == "unsupported" and "no queue IRQs" in row.note


def test_profile_problems_are_raised_before_anything_changes():
    facts = parse_facts(fixture_text("facts", "netns_veth.txt"), host="c1", role="client", collected=0)
    t = FakeTransport("c1")
    bad_if = Target("c1", "client", t, "c1", "eth9", facts, lab=False)
    with pytest.raises(InputError) as e:
        check_profile(prof('[[settings]]\nkind = "irq_affinity"\n'), [bad_if])
    assert "no interface eth9" in e.value.one_line()
    with pytest.raises(InputError) as e:
        audit(prof('[[settings]]\nkind = "pinning"\npolicy = "cpus"\ncpus = "0-7"\n'),
              [Target("c1", "client", t, "c1", "eth0", facts)])
    assert "names CPU 2, but the host has 2" in e.value.one_line()
    assert t.commands == []                                     # not even a read was made


@pytest.mark.parametrize("text, what", [
    ('[[settings]]\nkind = "pinning"\npolicy = "cpus"\n', "needs cpus"),
    ('[[settings]]\nkind = "pinning"\npolicy = "nic-node"\ncpus = "1"\n', "only for policy"),
    ('[[settings]]\nkind = "ethtool"\nfeature = "ring"\nparams = { rx = true }\n', "params.rx"),
])
def test_settings_that_would_silently_do_nothing_are_refused(text, what):
    with pytest.raises(InputError) as e:
        prof(text)
    assert what in e.value.one_line()


def test_a_renumbered_irq_is_left_alone_on_restore():
    from nicbench.tuning.apply import _vanished
    t = FakeTransport("h", files={"/proc/interrupts": fixture_text("proc", "interrupts.txt")})
    assert _vanished(t, "irq:38", "irq 38 (virtio2-input.0)", "0-1") is None
    assert "no longer virtio2-output.0" in _vanished(t, "irq:38", "irq 38 (virtio2-output.0)", "0-1")
    assert "gone" in _vanished(t, "sysctl:net.x", "sysctl net.x", None)


def test_damaged_restore_files_are_reported_and_kept(tmp_path, monkeypatch):
    from nicbench.tuning import restorefile
    monkeypatch.setenv("NICBENCH_RESTORE_DIR", str(tmp_path))
    (tmp_path / "machine.json").write_text("{not json")
    [(rid, doc)] = restorefile.pending()
    assert rid == "machine" and doc is restorefile.DAMAGED
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "tune", "restore"], capture_output=True,
                       text=True, env={**__import__("os").environ, "NICBENCH_RESTORE_DIR": str(tmp_path)})
    assert r.returncode == 5 and "damaged" in r.stderr and r.stderr.count("\n") == 1
    assert (tmp_path / "machine.json").exists()


def test_tuning_lock_refuses_a_second_holder_and_names_the_first(tmp_path, monkeypatch):
    from nicbench.tuning.lock import TuningLock
    monkeypatch.setenv("NICBENCH_RESTORE_DIR", str(tmp_path))
    first = TuningLock().acquire("run of demo")
    with pytest.raises(InputError) as e:
        TuningLock().acquire("tune restore")
    assert "in use by another nicbench" in e.value.one_line() and "run of demo" in e.value.one_line()
    first.release()
    TuningLock().acquire("tune restore").release()       # free again


def test_drift_reads_the_applied_settings_back_in_one_command_per_host():
    from nicbench.tuning.audit import drift
    from nicbench.tuning.types import Row
    now = {"/proc/sys/net/ipv4/tcp_timestamps": "1", "/proc/sys/net/core/optmem_max": "524288"}

    def states(argv):
        if argv[:2] == ["sh", "-c"]:
            return Script("".join(f"{p}\trw\t{now[p]}\n" for p in argv[4:] if p in now))
        return Script()
    t = FakeTransport("srv", states)
    rows = [Row("srv", "sysctl net.ipv4.tcp_timestamps", "sysctl:net.ipv4.tcp_timestamps", "0", "0", "applied"),
            Row("srv", "sysctl net.core.optmem_max", "sysctl:net.core.optmem_max", "524288", "524288", "applied"),
            Row("srv", "sysctl net.core.rmem_max", "sysctl:net.core.rmem_max", None, "1", "host-wide")]
    [moved] = drift(rows, [Target("srv", "server", t, "r-srv", "eth0")])
    assert moved.setting == "sysctl net.ipv4.tcp_timestamps" and moved.current == "1" and moved.status == "drifted"
    assert "the profile set '0'" in moved.note
    assert len([c for c in t.commands if c[:2] == ["sh", "-c"]]) == 1          # one read for the host


def test_a_profile_setting_may_be_marked_optional():
    p = prof('[[settings]]\nkind = "sysctl"\nkey = "net.ipv4.nosuch"\nvalue = 1\noptional = true\n'
             '[[settings]]\nkind = "tuned"\nprofile = "network-throughput"\n')
    assert [s.optional for s in p.settings] == [True, False]
    thr = load("throughput")
    assert {s.kind for s in thr.settings if s.optional} == {"service", "governor", "tuned", "irq_affinity"}


def test_a_queues_own_settings_are_restored_before_the_count_that_removes_the_queue(monkeypatch, tmp_path):
    """Apply twice with ``channels rx = max`` and RPS: the second audit saw the
    queue the first apply added (rx-1) and saved its RPS prior.  Restoring
    the channel count first would remove rx-1 and leave its setting 'gone';
    a queue's own settings come back first."""
    import json

    from nicbench.tuning.apply import restore
    monkeypatch.setenv("NICBENCH_RESTORE_DIR", str(tmp_path))
    q = "/sys/class/net/eth0/queues/rx-{}/rps_cpus"
    doc = {"version": 1, "items": {
        "ethtool:eth0:channels:rx": {"prior": "1", "setting": "ethtool eth0 channels rx", "applied": "2"},
        "rps:eth0:rx-0": {"prior": "0", "setting": "rps eth0 rx-0", "applied": "3"},
        "rps:eth0:rx-1": {"prior": "0", "setting": "rps eth0 rx-1", "applied": "3"}}}
    t = FakeTransport("c1", files={q.format(0): "3", q.format(1): "3"})
    rx = {"n": 2}

    def respond(argv):
        if argv[:2] == ["sh", "-c"] and "exit 3" in argv[2]:
            return Script(stdout=json.dumps(doc))
        if argv[:2] == ["sh", "-c"] and argv[2] == knobs._WRITE:
            value, path = argv[4], argv[5]
            if path not in t.files:
                return Script(returncode=1, stderr="No such file or directory")
            t.files[path] = value
        elif argv[:2] == ["ethtool", "-l"]:
            return Script(stdout=f"Channel parameters for eth0:\nPre-set maximums:\nRX:\t\t2\nTX:\t\t2\nOther:\t\tn/a\n"
                                 f"Combined:\tn/a\nCurrent hardware settings:\nRX:\t\t{rx['n']}\nTX:\t\t1\n"
                                 "Other:\t\tn/a\nCombined:\tn/a\n")
        elif argv[:2] == ["ethtool", "-L"]:
            rx["n"] = int(argv[4])
            if rx["n"] < 2:
                t.files.pop(q.format(1), None)          # the queue goes, and its sysfs with it
        return Script()
    t.responder = respond
    rows = restore(t, "c1")
    assert {r.key: r.status for r in rows} == {
        "rps:eth0:rx-0": "restored", "rps:eth0:rx-1": "restored", "ethtool:eth0:channels:rx": "restored"}
    assert t.files == {q.format(0): "0"} and rx["n"] == 1
