"""Counters on every host and host facts, from a real shaped TCP run (root)."""

from __future__ import annotations

import subprocess

import pytest
from helpers import lab_up, plan_text

from nicbench.analysis.aggregate import wire_rate
from nicbench.api import execute, load_run, render
from nicbench.lab import manager
from nicbench.plan import parse_plan
from nicbench.report.facts import differences
from nicbench.run.hosts import lab_spec
from nicbench.store.reader import open_run_dir

pytestmark = pytest.mark.lab


def test_counters_on_every_host_and_facts_with_differences(tmp_path):
    text = plan_text("ctr", "e2ec", clients=2, io_sizes=("128K",), connections=(2,), duration=3, omit=1,
                     speed="1G")
    plan = parse_plan(text)
    lab = lab_up(lab_spec(plan))
    try:
        # one client tuned differently: the report must point it out
        subprocess.run(["ip", "netns", "exec", lab.spec.host("c2").netns, "sysctl", "-qw",
                        "net.ipv4.tcp_mtu_probing=1"], check=True)
        out = execute(plan, text, store=tmp_path)      # reuses the lab
    finally:
        manager.down("e2ec")
    view = load_run(out.run_dir)
    [t] = view.trials
    assert t.status == "ok", t.error

    # facts: every lab host and the machine they share
    hosts = {h.host: h for h in view.facts}
    assert set(hosts) == {"srv", "c1", "c2", "machine"}
    assert hosts["srv"].value("if.eth0.driver") == "veth"
    assert hosts["srv"].value("tool.iperf3") and hosts["srv"].value("tool.ethtool")
    assert hosts["srv"].value("if.eth0.offload.generic-segmentation-offload") == "off"   # shaped: GSO off
    assert hosts["machine"].value("sysctl.net.core.netdev_max_backlog") is not None
    assert hosts["srv"].get("sysctl.net.core.netdev_max_backlog").unknown     # not visible in a namespace
    assert differences(view.facts) == {"client": ["sysctl.net.ipv4.tcp_mtu_probing"]}
    raws = [r for r in open_run_dir(out.run_dir).raw_outputs() if r.tool == "facts"]
    assert {r.host for r in raws} == set(hosts)
    assert "@@nicbench-section" in (out.run_dir / raws[0].path).read_text()

    # counters: what the server's interface sent is what the clients' received
    c = t.counters
    assert c is not None and {"srv", "c1", "c2"} <= set(c.per_host)
    r = open_run_dir(out.run_dir)
    samples = r.samples(t.trial_id)
    w = c.window
    sent = wire_rate(samples, direction="tx", window=w, host="srv")
    got = [wire_rate(samples, direction="rx", window=w, host=h) for h in ("c1", "c2")]
    assert sent and all(got)
    assert sum(g.bytes for g in got) == pytest.approx(sent.bytes, rel=0.03)
    # GSO/TSO off on a shaped link: each TCP segment the kernel sent is one frame
    assert c.per_host["srv"]["tcp.out_segs"] == pytest.approx(sent.frames, rel=0.03)
    assert sum(c.softirq_per_s["NET_RX"].values()) > 100

    page = render(view).read_text()
    assert "client hosts differ in sysctl.net.ipv4.tcp_mtu_probing" in page
    assert "NET_RX" in page and "veths (no IRQs)" in page
