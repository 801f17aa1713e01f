"""A shaped lab link is shaped to its configured speed, and what the tools
read over it agrees with the interface counters (root).

What is asserted is what nicbench decides and how two counts of the same
traffic agree, never how fast this shared machine was: a goodput "at >= 95 %
of its ceiling" read 92 % once with other work on the machine."""

from __future__ import annotations

import json
import subprocess

import pytest
from helpers import goodput_agrees_with_the_wire, lab_up, namespaces, plan_text

from nicbench.api import execute, load_run
from nicbench.lab import manager
from nicbench.lab.topology import tbf_rate
from nicbench.plan import parse_plan
from nicbench.run.hosts import lab_spec

pytestmark = pytest.mark.lab


def _sh(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def test_a_shaped_link_reads_within_its_ceiling_and_agrees_with_its_counters(tmp_path):
    lab_name = "e2es"
    text = plan_text("shaped", lab_name, clients=1, directions=("tx", "rx"), io_sizes=("128K",),
                     connections=(1,), duration=5, omit=1, trim=0.25, speed="1G")
    # 5 s, not less: a receiver that was starved for a moment reads its socket
    # buffer's backlog faster than the wire delivers (seen: 2 MB = 17 ms at
    # 1 Gbit/s, 100.7 % of the ceiling over a 2.5 s window); over 4.5 s the
    # same backlog stays inside the analysis's 0.5 % tolerance
    plan = parse_plan(text)
    lab = lab_up(lab_spec(plan))
    try:
        srv = lab.spec.host("srv").netns
        # both directions of the server's link shaped to the speed asked (tc says bytes/s)
        for ns, dev in ((srv, "eth0"), (lab.spec.switch_ns, "p-srv")):
            [q] = json.loads(_sh("tc", "-n", ns, "-j", "qdisc", "show", "dev", dev))
            assert q["kind"] == "tbf" and q["options"]["rate"] * 8 == pytest.approx(tbf_rate(1e9, 1500), rel=1e-6)
        assert "generic-segmentation-offload: off" in _sh("ip", "netns", "exec", srv, "ethtool", "-k", "eth0")

        view = load_run(execute(plan, text, store=tmp_path).run_dir)
        assert view.link.timestamps is True and view.link.speed_bps == 1e9
        assert [t.status for t in view.trials] == ["ok", "ok"], [t.error for t in view.trials]
        for p in view.points:
            assert p.ceiling_gbps == pytest.approx(1448 / 1538, abs=1e-6)
            # no more: neither the goodput above its ceiling nor the wire above the link
            assert not p.above_ceiling and not p.wire_above_link, (p.point, p.max_of_ceiling, p.max_wire_of_link)
            goodput_agrees_with_the_wire(p)

        # Timestamps off in every lab host: the ceiling must follow what is in force
        for h in lab.spec.hosts:
            _sh("ip", "netns", "exec", h.netns, "sysctl", "-qw", "net.ipv4.tcp_timestamps=0")
        view = load_run(execute(plan, text, store=tmp_path).run_dir)
        assert view.link.timestamps is False
        assert [t.status for t in view.trials] == ["ok", "ok"], [t.error for t in view.trials]
        for p in view.points:
            assert p.ceiling_gbps == pytest.approx(1460 / 1538, abs=1e-6)
            # without timestamps loss recovery is coarser: retransmits on the shaper's
            # drops take wire time (seen: 13k retransmits, goodput 0.94 x the wire's),
            # and nothing exceeds the ceiling the timestamps in force give
            assert not p.above_ceiling and not p.wire_above_link, (p.point, p.max_of_ceiling, p.max_wire_of_link)
            goodput_agrees_with_the_wire(p)
    finally:
        manager.down(lab_name)
    assert namespaces(lab_name) == []


def test_iperf2_timeline_is_placed_inside_the_sampled_span(tmp_path):
    """iperf 2.1.8 stamps its CSV one interval late; placed right, its window
    is covered by the CPU and counter samples (no CPU, no wire rate otherwise)."""
    text = plan_text("shaped2", "e2es2", engine="iperf2", clients=1, directions=("tx", "rx"),
                     io_sizes=("128K",), connections=(1,), duration=3, omit=1, speed="1G")
    view = load_run(execute(parse_plan(text), text, store=tmp_path).run_dir)
    assert namespaces("e2es2") == []
    for t in view.trials:
        assert t.status == "ok", t.error
        assert t.cpu is not None and t.counters is not None and t.wire, t.point
        assert not any("past the process's exit" in w for w in t.warnings)
    for p in view.points:
        # the window placed right reads what the wire carried in it (placed an interval
        # late, it read a different stretch of the flow, or past its end)
        assert not p.above_ceiling and not p.wire_above_link, (p.point, p.max_of_ceiling, p.max_wire_of_link)
        goodput_agrees_with_the_wire(p)


def test_a_reused_lab_that_no_longer_matches_its_plan_is_refused_naming_what_changed(tmp_path):
    """The audit's case: a reused lab whose interface MTU differed from the plan
    said 'healthy' and the report's Link line showed the plan's MTU."""
    from nicbench.core.errors import LabError
    text = plan_text("reuse", "e2ez", clients=1, speed="1G", duration=1, omit=0)
    plan = parse_plan(text)
    lab_up(lab_spec(plan))
    try:
        assert manager.status("e2ez")["problems"] == [] and manager.status("e2ez")["healthy"]
        subprocess.run(["ip", "-n", "nb-e2ez-c1", "link", "set", "eth0", "mtu", "1400"], check=True)
        subprocess.run(["tc", "-n", "nb-e2ez-srv", "qdisc", "del", "dev", "eth0", "root"], check=True)
        st = manager.status("e2ez")
        assert not st["healthy"]
        assert "c1: eth0 has MTU 1400, the plan wants 1500" in st["problems"]
        assert any(p.startswith("srv: eth0 is not shaped") for p in st["problems"])
        with pytest.raises(LabError) as e:
            execute(plan, text, store=tmp_path)
        assert "no longer matches this plan" in e.value.one_line() and "MTU 1400" in e.value.one_line()
        assert not (tmp_path / "store").exists() or not list(tmp_path.iterdir())
    finally:
        manager.down("e2ez")
    assert namespaces("e2ez") == []
