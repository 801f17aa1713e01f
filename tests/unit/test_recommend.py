"""From verdicts to settings (analysis/recommend.py): each limit's settings,
sized from what the point measured, each citing its evidence and points;
what a host cannot take listed as such; nothing at the wire.  The profile
written is what 'tune apply' and a plan's profiles take."""

from __future__ import annotations

import json
import tomllib

import pytest
from test_analysed_status import runs  # noqa: F401 - the module's fixture: two fake runs in one archive
from test_archive_cli import nb

from nicbench.analysis.recommend import (
    IN_PROFILE,
    WINDOW_MARGIN,
    HostInput,
    PointInput,
    RunInput,
    profile_toml,
    recommend,
)
from nicbench.core.errors import InputError
from nicbench.core.validation import validate
from nicbench.tuning.profile import Profile, load, load_file

WINDOW_LINE = ("85% of the bytes were sent waiting on the receivers' windows (median window 19 KiB per sender "
               "process at 7330 us RTT: at most 0.0213 Gbit/s each)")
STOCK = {"net.ipv4.tcp_rmem": "4096 32768 32768", "net.ipv4.tcp_wmem": "4096 16384 4194304",
         "net.core.rmem_max": "4194304", "net.core.wmem_max": "4194304"}


def lab(points, study_options=None, *, lab_=True, driver="veth", sysctls=None, machine=None, max_mtu=None):
    own = dict(STOCK if sysctls is None else sysctls)
    hosts = [HostInput(h, role, own, driver, "eth0", max_mtu) for h, role in (("srv", "server"), ("c1", "client"))]
    if lab_:
        own_ns = {k: v for k, v in own.items() if not k.startswith("net.core.")}
        hosts = [HostInput(h.host, h.role, own_ns, h.driver, h.ifname, h.max_mtu) for h in hosts]
        hosts.append(HostInput("machine", "machine", machine or {**STOCK, "net.core.netdev_max_backlog": "1000"}))
    return RunInput("r1", "tcp", points, hosts, study_options or {"engine": "iperf3"}, "3.12", 1500, lab_, "srv")


def window_point(key="rx/c1/io128K", rtt=0.00713, ceiling=94.15e6, direction="rx"):
    return PointInput(key, {"direction": direction, "connections": 1, "engine": "iperf3"}, "window",
                      (WINDOW_LINE,), rtt_s=rtt, ceiling_bps=ceiling)


def by_what(rec):
    return {a.what: a for a in rec.advice}


def test_a_window_verdict_sizes_the_receive_buffers_from_the_measured_bdp():
    rec = recommend(lab([window_point(), window_point("rx/c2/io128K", rtt=0.0077)]))
    a = by_what(rec)["sysctl net.ipv4.tcp_rmem"]
    bdp = 94.15e6 / 8 * 0.0077                          # the larger of the two points' needs
    assert a.status == IN_PROFILE and a.limit == "window" and a.because == WINDOW_LINE
    assert a.points == ("rx/c1/io128K", "rx/c2/io128K")
    # 4 x the BDP is 512K, under the kernel's own default maximum: that, then
    assert a.setting == {"kind": "sysctl", "key": "net.ipv4.tcp_rmem", "value": "4096 131072 6291456"}
    assert 524288 >= WINDOW_MARGIN * bdp > 524288 / 2 and "it was 32768" in a.note
    assert "= 512K, raised to the kernel's own default maximum 6M" in a.note
    # the senders' buffers (4 MiB) already hold it; autotuning is not capped by rmem_max: neither is asked for
    assert set(by_what(rec)) == {"sysctl net.ipv4.tcp_rmem"}
    assert rec.settings == [a.setting] and rec.limits == {"rx/c1/io128K": "window", "rx/c2/io128K": "window"}
    # a long fat path: 4 x a 12.5 MB BDP, past the kernel's default, and both ends' buffers
    fat = by_what(recommend(lab([window_point(rtt=0.01, ceiling=10e9)])))
    assert fat["sysctl net.ipv4.tcp_rmem"].setting["value"] == "4096 131072 67108864"
    assert fat["sysctl net.ipv4.tcp_wmem"].setting["value"] == "4096 16384 67108864"
    # tx: the clients receive, the server sends -- the same sysctl, on the profile's every host
    assert by_what(recommend(lab([window_point(direction="tx")])))["sysctl net.ipv4.tcp_rmem"].status == IN_PROFILE


def test_the_profile_is_what_tune_apply_takes_each_setting_with_its_reason(tmp_path):
    rec = recommend(lab([window_point()]))
    text = profile_toml(rec, "recommended from r1: window at 1 point(s)", header=("from run r1",))
    prof = validate(Profile, tomllib.loads(text), "p.toml")
    assert [s.key for s in prof.settings] == ["net.ipv4.tcp_rmem"] and prof.settings[0].value == "4096 131072 6291456"
    assert "# window at rx/c1/io128K: 85% of the bytes were sent waiting" in text and text.startswith("# from run r1")
    f = tmp_path / "rec.toml"
    f.write_text(text)
    assert load(str(f)) == prof == load_file(f)         # by path, where 'tune apply --profile' and 'ab' read it


def test_an_engine_that_sets_its_own_buffers_gets_the_plan_changed_and_rmem_max_said_host_wide_in_the_lab():
    small = {**STOCK, "net.core.rmem_max": "212992", "net.core.wmem_max": "212992"}
    rec = recommend(lab([window_point()], {"engine": "iperf3", "window": "64K"}, machine=small))
    a = by_what(rec)
    assert a["plan study.window"].status == "plan" and 'window = "512K"' in a["plan study.window"].note
    assert a["sysctl net.core.rmem_max"].status == "host-wide" and "--host-wide" in a["sysctl net.core.rmem_max"].note
    assert rec.settings == []
    # on real hosts the same maxima are settings of the profile
    real = recommend(lab([window_point()], {"engine": "iperf3", "window": "64K"}, lab_=False, sysctls=small))
    assert {s["key"] for s in real.settings} == {"net.core.rmem_max", "net.core.wmem_max"}
    assert all(s["value"] == 524288 for s in real.settings)


def test_nothing_is_recommended_at_the_wire():
    wire = PointInput("rx/c1/io128K", {"direction": "rx"}, "wire", ("rx goodput 93.9 Mbit/s = 99.7 % of its ceiling",))
    rec = recommend(lab([wire, PointInput("rx/c2/io128K", {}, None)]))
    assert rec.advice == () and rec.settings == [] and rec.limits == {"rx/c1/io128K": "wire"}
    assert rec.quiet == ("rx/c1/io128K: wire: the link was full; nothing to tune",)
    text = profile_toml(rec, "nothing")
    assert validate(Profile, tomllib.loads(text), "p.toml").settings == [] and "No setting: rx/c1/io128K: wire" in text


def test_receiver_drops_raise_the_backlog_and_rings_where_the_host_has_them():
    loss = PointInput("tx/c2/io4K", {"direction": "tx"}, "loss", ("loss: drops: c1 if.drops.rx 840 (0.5 %)",),
                      drops={"c1 if.drops.rx": 840.0})
    a = by_what(recommend(lab([loss])))
    # the lab: the backlog is the machine's, a veth has no rings -- both listed, neither in the profile
    assert a["sysctl net.core.netdev_max_backlog"].status == "host-wide"
    assert a["sysctl net.core.netdev_max_backlog"].setting["value"] == 10000
    assert a["ethtool ring rx"].status == "absent" and "veth: it has no rings" in a["ethtool ring rx"].note
    assert a["ethtool ring rx"].because == "drops: c1 if.drops.rx 840 (0.5 %)"
    real = by_what(recommend(lab([loss], lab_=False, driver="mlx5_core",
                                 sysctls={**STOCK, "net.core.netdev_max_backlog": "4096"})))
    assert real["sysctl net.core.netdev_max_backlog"].status == IN_PROFILE
    assert real["sysctl net.core.netdev_max_backlog"].setting["value"] == 8 * 4096
    assert real["ethtool ring rx"].setting == {"kind": "ethtool", "feature": "ring", "params": {"rx": "max"}}
    # lost, but nowhere the counters say (a few drops beside it are not where it was lost): nothing to size
    blind = PointInput("tx/c2/io4K", {}, "loss", ("loss: the kernel retransmitted 900 of 9000 TCP segments",),
                       drops={"c2 if.drops.rx": 20.0})
    assert [(x.what, x.status) for x in recommend(lab([blind])).advice] == [("loss", "manual")]


def test_a_full_udp_socket_buffer_raises_the_receive_buffers():
    p = PointInput("rx/1472/1G", {"direction": "rx"}, "loss",
                   ("loss: 3.0 % of the datagrams were lost (c1 socket buffer full 5000)",),
                   ceiling_bps=957e6, drops={"c1 udp.rcvbuf_errors": 5000.0})
    a = by_what(recommend(lab([p], lab_=False, sysctls={**STOCK, "net.core.rmem_default": "212992"})))
    # 20 ms at 957 Mbit/s = 2.4 MB -> 4 MiB
    assert a["sysctl net.core.rmem_default"].setting["value"] == 4 << 20
    assert a["sysctl net.core.rmem_max"].setting["value"] == 4 * 4194304


def test_a_core_saturated_in_softirq_gets_rps_on_a_veth_and_queues_on_a_nic():
    p = PointInput("tx/c2/io512", {}, "cpu", ("CPU 1 of machine 99.0 % busy, mostly softirq (80.0 %); the network "
                                              "stack on that core: spread it",),
                   cpu_state="softirq", cpu_host="machine")
    got = by_what(recommend(lab([p])))
    assert set(got) == {"rps", "sysctl net.core.rps_sock_flow_entries"}
    a = got["rps"]
    assert a.status == "recommended" and a.setting == {"kind": "rps", "cpus": "all", "flow_cnt": 32768}
    assert "veth has no RSS queues and no IRQs to spread: RPS is what exists" in a.note
    assert got["sysctl net.core.rps_sock_flow_entries"].status == "host-wide"     # the machine's in a lab
    nic = by_what(recommend(lab([p], lab_=False, driver="ice")))
    assert nic["ethtool channels"].setting["params"] == {"combined": "max"}
    assert nic["irq_affinity"].setting == {"kind": "irq_affinity", "policy": "nic-node", "optional": True}


def test_an_engine_at_a_full_core_changes_the_plan_not_the_tuning():
    p = PointInput("tx/c4/io128K", {"direction": "tx", "connections": 4, "engine": "iperf3"}, "engine",
                   ("engine-client iperf3 on srv used 99.0 % of one core (one thread cannot go faster)",))
    rec = recommend(lab([p]))
    a = by_what(rec)
    assert set(a) == {"plan study.streams_per_process", "plan study.engine", "plan study.zerocopy",
                      "plan study.skip_rx_copy", "plan link.mtu"}
    assert all(x.status == "plan" for x in a.values()) and rec.settings == []
    assert "veths and bridge take it" in a["plan link.mtu"].note
    assert "iperf3 3.12 here" in a["plan study.skip_rx_copy"].note
    # an interface that cannot take 9000 is said, and nbperf already has what iperf3 lacks
    a = by_what(recommend(lab([p], {"engine": "nbperf", "zerocopy": True, "skip_rx_copy": True}, lab_=False,
                              max_mtu=1500)))
    assert set(a) == {"plan link.mtu"} and a["plan link.mtu"].status == "absent"
    assert "srv 1500" in a["plan link.mtu"].note


def test_a_cpu_busy_with_other_work_is_not_tuned():
    p = PointInput("tx/c1/io128K", {"engine": "iperf3"}, "cpu", ("CPU 0 of machine 99.6 % busy, mostly user",),
                   cpu_state="user", cpu_host="machine", tool_cores=0.03)
    [a] = recommend(lab([p])).advice
    assert (a.what, a.status) == ("quiet host", "manual") and "3% of a core" in a.note


def test_a_mixed_verdict_is_advised_for_both_its_limits():
    p = PointInput("rx/c1/io128K", {"direction": "rx"}, "mixed",
                   (f"window: {WINDOW_LINE}", "cpu: CPU 1 of machine 99.0 % busy, mostly softirq"),
                   leading="window", second="cpu", rtt_s=0.007, ceiling_bps=94e6, cpu_state="softirq")
    a = by_what(recommend(lab([p])))
    assert a["sysctl net.ipv4.tcp_rmem"].because == WINDOW_LINE and a["rps"].because.startswith("CPU 1 of machine")


def test_a_bad_profile_file_is_one_line_naming_the_file_and_the_knob(tmp_path):
    f = tmp_path / "b.toml"
    f.write_text('[[settings]]\nkind = "sysctrl"\nkey = "net.ipv4.tcp_rmem"\nvalue = "4096 131072 524288"\n')
    with pytest.raises(InputError) as e:
        load(str(f))
    line = e.value.one_line()
    assert "\n" not in line and str(f) in line and "settings[0]" in line and "sysctrl" in line
    with pytest.raises(InputError, match="cannot read the profile"):
        load(str(tmp_path / "none.toml"))


def test_recommend_from_a_stored_run_and_a_run_without_verdicts(capsys, tmp_path, runs):  # noqa: F811
    store, good, bad = runs
    out_file = tmp_path / "p.toml"
    code, out, err = nb(capsys, "tune", "recommend", good, "-o", str(out_file), "--json", "--store", store)
    assert code == 0, err
    doc = json.loads(out)
    assert doc["run_id"] == good and doc["output"] == str(out_file) and set(doc["limits"]) == {"tx/c4/io128K"}
    assert validate(Profile, tomllib.loads(out_file.read_text()), "p").settings == \
        validate(Profile, doc["profile"], "p").settings
    code, out, err = nb(capsys, "tune", "recommend", bad, "--store", store)
    assert code == 2 and err.count("\n") == 1 and "has no verdicts to recommend from: no point has an ok repeat" in err
    assert "nicbench explain" in err


def test_the_example_profile_is_what_tune_recommend_wrote_and_tune_apply_takes():
    """examples/profiles/ab-window-recommended.toml: written by 'nicbench tune
    recommend' from a run of examples/ab-window.toml (the README shows it)."""
    from pathlib import Path
    f = Path(__file__).resolve().parents[2] / "examples" / "profiles" / "ab-window-recommended.toml"
    prof = load(str(f))
    assert [(s.key, s.value) for s in prof.settings] == [("net.ipv4.tcp_rmem", "4096 131072 6291456")]
    assert "# window at rx/c1/io128K:" in f.read_text()


def test_a_run_made_before_verdicts_existed_is_judged_from_the_archive(capsys):
    """The stored golden TCP run (a lab run of 2026-11-23, before verdicts):
    its verdicts are recomputed; nothing at its wire points; bidir 8K's loss
    (retransmissions in the shaper, the hosts' drops under 0.1 %) sizes
    nothing, bidir 128K's drops (0.1 % of the frames, in its verdict) the
    backlog -- the machine's in this lab -- and no ring (veths have none);
    RPS and RFS for the veths' softirq core: the one setting the lab's hosts
    take (RFS's global table is the machine's)."""
    from pathlib import Path
    run = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "tcp"
    code, out, err = nb(capsys, "tune", "recommend", str(run), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["settings"] == [{"kind": "rps", "cpus": "all", "flow_cnt": 32768}]
    assert {p for p, lim in doc["limits"].items() if lim == "wire"} == {
        "tx/c3/io8K", "tx/c3/io128K", "rx/c3/io8K", "rx/c3/io128K"}
    got = {a["what"]: (a["status"], a["points"]) for a in doc["advice"]}
    assert got == {"loss": ("manual", ["bidir/c3/io8K"]),
                   "sysctl net.core.netdev_max_backlog": ("host-wide", ["bidir/c3/io128K"]),
                   "ethtool ring rx": ("absent", ["bidir/c3/io128K"]),
                   "ethtool ring tx": ("absent", ["bidir/c3/io128K"]),
                   "rps": ("recommended", ["bidir/c3/io8K", "bidir/c3/io128K"]),
                   "sysctl net.core.rps_sock_flow_entries": ("host-wide", ["bidir/c3/io8K", "bidir/c3/io128K"])}


def test_a_sysctl_the_hosts_lack_is_absent_but_one_their_facts_never_read_is_recommended():
    """Absent only when the facts read the key and the host had none: a run
    recorded by a nicbench that did not read it (rps_sock_flow_entries came
    later) is no evidence the kernel lacks it -- the audit at apply reads it."""
    p = PointInput("tx/c2/io512", {}, "cpu", ("CPU 1 of srv 99.0 % busy, mostly softirq (80.0 %)",),
                   cpu_state="softirq", cpu_host="srv")
    never_read = by_what(recommend(lab([p], lab_=False)))
    assert never_read["sysctl net.core.rps_sock_flow_entries"].status == IN_PROFILE
    lacking = by_what(recommend(lab([p], lab_=False, sysctls={**STOCK, "net.core.rps_sock_flow_entries": None})))
    assert lacking["sysctl net.core.rps_sock_flow_entries"].status == "absent"
    on_machine = by_what(recommend(lab([p], machine={**STOCK, "net.core.rps_sock_flow_entries": None})))
    assert on_machine["sysctl net.core.rps_sock_flow_entries"].status == "absent"
