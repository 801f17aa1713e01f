"""The NIC's counters of a point: read at its start and end through each
host's transport (faked here), kept as ``nic.stat`` samples, and what the
analysis and the verdict make of them (queue spread, drops by driver name,
the NIC ring's loss, the core that takes every queue's interrupts)."""

from __future__ import annotations

from pathlib import Path

from nicbench.analysis.cpu import CpuUsage
from nicbench.analysis.nicstats import nic_findings
from nicbench.analysis.verdict import Evidence, decide, with_nic
from nicbench.hosts.fake import FakeTransport
from nicbench.records import Sample, make_tags
from nicbench.sampling.nicstats import NicStatSampler, nic_samples, parse_read
from nicbench.sampling.sampler import NetTarget

FIX = Path(__file__).parents[1] / "fixtures" / "ethtool"
MLX5 = (FIX / "mlx5_core" / "lore_xdp_regression_6.5.txt").read_text()


def bump(text: str, changes: dict[str, int]) -> str:
    """An ethtool -S text with some counters moved on (as a later read shows it)."""
    out = []
    for line in text.splitlines():
        name, _, v = line.rpartition(":")
        if name.strip() in changes:
            line = f"{name}: {int(v) + changes[name.strip()]}"
        out.append(line)
    return "\n".join(out) + "\n"


def two_reads(t: FakeTransport, driver: str, first: str, second: str) -> None:
    texts = iter([first, second])
    t.nic_stats = lambda: (driver, next(texts))


def sampled(targets: list[NetTarget]) -> tuple[list[Sample], dict]:
    s = NicStatSampler(targets, trial_id="t1").start()
    s.end()
    meta: dict = {}
    return s.stop(meta), meta


def test_every_host_read_at_start_and_end_through_its_transport():
    srv, cli = FakeTransport("srv"), FakeTransport("cli")
    two_reads(srv, "mlx5_core", MLX5, bump(MLX5, {"rx0_packets": 5000, "rx_out_of_buffer": 7}))
    samples, meta = sampled([NetTarget("srv", srv, lambda: [], "eth0"), NetTarget("cli", cli, lambda: [], "eth1"),
                             NetTarget("srv", srv, lambda: [], "eth0")])     # one host on one port: read once
    assert [c[0] for c in srv.commands] == ["sh", "sh"] and len(cli.commands) == 2
    got = {x.tag("stat"): x.value for x in samples}
    assert got["rx0_packets"] == 5000 and got["rx_out_of_buffer"] == 7
    # counters the table names are kept at 0; others only when they moved
    assert got["rx_discards_phy"] == 0 and "rx0_csum_none" not in got
    assert {x.tag("host") for x in samples} == {"srv"} and samples[0].tag("driver") == "mlx5_core"
    # the host without ethtool is said, not guessed
    assert meta["nic_stats_missing"] == {"cli eth1": "ethtool -S eth1: ethtool not found"}


def test_a_read_the_tool_refuses_or_prints_oddly_is_said():
    r = parse_read("h", "lo", 1.0, "@@nicbench-driver\n\n@@nicbench-stats\nno stats available\n@@nicbench-rc 94\n")
    assert r.counters is None and r.why == "ethtool -S lo: no stats available"
    r = parse_read("h", "e", 1.0, "@@nicbench-driver\nx\n@@nicbench-stats\nNIC statistics:\n a: b\n@@nicbench-rc 0\n")
    assert r.counters is None and "output not understood" in str(r.why)


def stat(host: str, name: str, v: float, driver: str = "mlx5_core", ifname: str = "eth0") -> Sample:
    return Sample("t1", "nic.stat", v, "count", 0.0, 10.0, make_tags(host=host, ifname=ifname, driver=driver,
                                                                     stat=name))


def irq(label: str, cpu: str, v: float) -> Sample:
    return Sample("t1", "irq.count", v, "count", 0.0, 10.0, make_tags(host="machine", irq=label, cpu=cpu))


def test_queue_spread_and_moved_counters_by_driver_name():
    f = nic_findings([stat("srv", "rx0_packets", 9000), stat("srv", "rx1_packets", 0),
                      stat("srv", "rx2_packets", 0), stat("srv", "rx3_packets", 1000),
                      stat("srv", "tx_pause_ctrl_phy", 12), stat("srv", "rx_discards_phy", 0)], {})
    assert f is not None
    (rx,) = f.spreads
    assert rx.direction == "rx" and rx.packets == {0: 9000, 1: 0, 2: 0, 3: 1000}
    assert rx.index is not None and abs(rx.index - (9000 / 2500 - 1) / 3) < 1e-9 and rx.uneven
    assert [c.stat for c in f.moved] == ["tx_pause_ctrl_phy"]
    lines = f.lines()
    assert any("srv eth0 (mlx5_core) rx queues: 10000 packets over 4 queues, queue 0 90 %" in x and "uneven" in x
               for x in lines)
    assert any("srv eth0 tx_pause_ctrl_phy 12 (pause" in x for x in lines)
    # an even spread is not flagged, nor a trickle of packets
    even = nic_findings([stat("s", "rx0_packets", 5000), stat("s", "rx1_packets", 4800)], {})
    assert even is not None and not even.spreads[0].uneven
    few = nic_findings([stat("s", "rx0_packets", 90), stat("s", "rx1_packets", 0)], {})
    assert few is not None and not few.spreads[0].uneven
    assert nic_findings([], {}) is None


def test_nothing_moved_is_none_found_and_a_missing_host_is_said():
    f = nic_findings([stat("srv", "rx_out_of_buffer", 0)], {"nic_stats_missing": {"cli eth1": "ethtool not found"}})
    assert f is not None
    assert "nic: no drop, pause or error counter moved: none found" in f.lines()
    assert "nic: not read on cli eth1: ethtool not found" in f.lines()


G = 1e9


def cpu_at(top: str, busy: float, state: str = "softirq") -> CpuUsage:
    per = {top: {state: busy, "idle": 1 - busy}, "1": {"idle": 1.0}}
    return CpuUsage("machine", (0.0, 10.0), 2, per, busy, top, busy, state, {})


def test_loss_at_the_nic_ring_is_located_by_driver_name():
    samples = [stat("srv", "rx_out_of_buffer", 500), stat("srv", "rx0_packets", 100000)]
    v = decide(with_nic(Evidence({"rx": 0.5 * G}, 1.88 * G), samples, {}))
    assert v.limit == "loss"
    assert "at the NIC ring: srv eth0 rx_out_of_buffer 500 (0.5 % of the frames carried)" in v.evidence[0]
    # under the bar: said as checked, and as where the loss happened when another loss holds
    few = [stat("srv", "rx_out_of_buffer", 5), stat("srv", "rx0_packets", 100000)]
    v = decide(with_nic(Evidence({"rx": 0.5 * G}, 1.88 * G), few, {}))
    assert v.limit == "none found"
    assert any(c.startswith("loss: at the NIC ring: srv eth0 rx_out_of_buffer 5, 0.0 %") for c in v.checked)
    v = decide(with_nic(Evidence({"rx": 0.5 * G}, 1.88 * G, retrans_segs=300, out_segs=1000), few, {}))
    assert v.limit == "loss" and v.evidence[0].endswith("; at the NIC ring: srv eth0 rx_out_of_buffer 5")
    # none moved: the ring is cleared by name
    v = decide(with_nic(Evidence({"rx": 0.5 * G}, 1.88 * G), [stat("srv", "rx_out_of_buffer", 0)], {}))
    assert "loss: the NIC rings dropped nothing (no ring, missed or no-buffer counter moved)" in v.checked


def test_a_saturated_core_that_takes_every_queues_interrupts_is_named():
    irqs = [irq("eth0:q0", "3", 9900), irq("eth0:q0", "0", 50), irq("eth0:q1", "3", 8000),
            irq("eth0:q2", "3", 7000), irq("eth0:q3", "3", 7500)]
    v = decide(with_nic(Evidence({"rx": 0.3 * G}, 1.88 * G, cpu=cpu_at("3", 0.99)), irqs, {}))
    assert v.limit == "cpu"
    assert "it takes 99.8 % of the interrupts of every one of the NIC's 4 queues" in v.evidence[0]
    # spread interrupts: the core is named without it, and where they landed is said
    spread = [irq("eth0:q0", "0", 9000), irq("eth0:q1", "1", 9000)]
    v = decide(with_nic(Evidence({"rx": 0.3 * G}, 1.88 * G, cpu=cpu_at("0", 0.99)), spread, {}))
    assert v.limit == "cpu" and "interrupts of every one" not in v.evidence[0]
    assert any(c.startswith("irq: machine: 2 NIC queue interrupt(s) over 2 CPU(s)") for c in v.checked)
    # a lab veth has no interrupts: said, none found
    v = decide(with_nic(Evidence({"rx": 0.3 * G}, 1.88 * G), [stat("h", "rx_queue_0_drops", 0, "veth")], {}))
    assert any(c.startswith("irq: no NIC interrupts sampled") and c.endswith("none found") for c in v.checked)


def test_uneven_queues_are_named_on_a_softirq_core():
    samples = [stat("srv", "rx0_packets", 10000), stat("srv", "rx1_packets", 10)]
    v = decide(with_nic(Evidence({"rx": 0.3 * G}, 1.88 * G, cpu=cpu_at("0", 0.99)), samples, {}))
    assert v.limit == "cpu" and "the NIC's queues are uneven: srv eth0 rx imbalance 1.00" in v.evidence[0]


def test_the_interfaces_irqs_are_read_with_its_counters():
    """This VM's virtio_net eth0, read by the sampler's own command (recorded:
    tests/fixtures/ethtool/README.md): its counters and its three IRQs per CPU."""
    out = (FIX / "virtio_net" / "local_eth0_read.txt").read_text()
    r = parse_read("vm", "eth0", 1.0, out)
    assert r.driver == "virtio_net" and r.why is None and r.counters is not None and len(r.counters) == 20
    assert r.irqs == {"eth0:virtio2-config": {"0": 0, "1": 0}, "eth0:virtio2-input.0": {"0": 0, "1": 48689},
                      "eth0:virtio2-output.0": {"0": 34455, "1": 0}}
    later = out.replace(" 0 48689 ", " 0 48789 ").replace(" 34455 0 ", " 34475 0 ")
    samples = nic_samples([r, parse_read("vm", "eth0", 3.0, later)], "t1")
    irqs = {(x.tag("irq"), x.tag("cpu")): x.value for x in samples if x.metric == "nic.irq"}
    assert irqs == {("eth0:virtio2-input.0", "1"): 100, ("eth0:virtio2-output.0", "0"): 20}
    f = nic_findings(samples, {})
    assert f is not None and f.irq_hold is None
    assert f.irq_note == "vm: 2 NIC queue interrupt(s) over 2 CPU(s), CPU 1 the most (83 %)"


def test_every_hosts_irqs_win_over_the_servers_periodic_count():
    both = [Sample("t1", "nic.irq", 500, "count", 0.0, 9.0, make_tags(host="cli", ifname="e", irq="e:q0", cpu="2")),
            Sample("t1", "nic.irq", 500, "count", 0.0, 9.0, make_tags(host="cli", ifname="e", irq="e:q1", cpu="2")),
            irq("eth0:q0", "0", 100), irq("eth0:q1", "1", 100)]
    f = nic_findings(both, {})
    assert f is not None and f.irq_hold is not None and (f.irq_hold.host, f.irq_hold.cpu) == ("cli", "2")
    # real hosts: a saturated CPU 2 of the server is not the client's CPU 2
    srv = CpuUsage("srv", (0.0, 10.0), 2, {"2": {"softirq": 0.99}}, 0.99, "2", 0.99, "softirq", {})
    reads = both + [stat("cli", "rx0_packets", 0, ifname="e"), stat("srv", "rx0_packets", 0)]
    v = decide(with_nic(Evidence({"rx": 0.3 * G}, 1.88 * G, cpu=srv), reads, {}))
    assert v.limit == "cpu" and "interrupts of every one" not in v.evidence[0]
    # the lab: every namespace on the machine whose CPUs were sampled
    v = decide(with_nic(Evidence({"rx": 0.3 * G}, 1.88 * G, cpu=cpu_at("2", 0.99)), reads, {}))
    assert "interrupts of every one of the NIC's 2 queues" in v.evidence[0]
