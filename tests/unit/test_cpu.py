"""CPU parsers on recorded /proc files (and the odd ones), usage and warnings."""

import pytest

from conftest import fixture_text
from nicbench.analysis.cpu import cpu_notes, cpu_usage, cpu_warnings, efficiency
from nicbench.records import Sample, make_tags
from nicbench.sampling.netstat import net_softirqs, parse_interrupts, parse_snmp, watched
from nicbench.sampling.procstat import STATES, cpu_deltas, parse_pid_stat, parse_proc_stat


def test_recorded_proc_stat():
    s = parse_proc_stat(fixture_text("proc", "stat.txt"))
    assert {"all", "0", "1"} <= set(s) and set(s["0"].ticks) == set(STATES)
    # the total line is rounded on its own: within a tick per CPU of the sum
    assert abs(s["all"].ticks["user"] - s["0"].ticks["user"] - s["1"].ticks["user"]) <= 2


def test_old_kernel_columns_missing_are_zero():
    s = parse_proc_stat("cpu0 10 0 20 30 1 2 3\n")          # 2.6.11-style: no steal
    assert s["0"].ticks["softirq"] == 3 and s["0"].ticks["steal"] == 0


def test_hotplug_and_backwards_counters_are_left_out():
    a = parse_proc_stat("cpu0 100 0 100 100 0 0 0 0\ncpu1 100 0 100 100 0 0 0 0\ncpu2 5 0 5 5 0 0 0 0\n")
    b = parse_proc_stat("cpu0 150 0 120 130 0 0 0 0\ncpu1 10 0 10 10 0 0 0 0\ncpu3 1 0 1 1 0 0 0 0\n")
    d = cpu_deltas(a, b)
    assert set(d) == {"0"}                                 # cpu1 went backwards, cpu2/3 are not in both
    assert d["0"]["user"] == pytest.approx(0.5) and d["0"]["idle"] == pytest.approx(0.3)


def test_pid_stat_recorded_and_comm_with_parens():
    p = parse_pid_stat(fixture_text("proc", "pid_stat_iperf3.txt"))
    assert p.comm == "iperf3" and p.utime >= 0 and p.stime >= 0
    odd = parse_pid_stat("42 (a) (b c) S 1 1 1 0 -1 0 0 0 0 0 250 130 0 0 20 0 1 0 5 0 0")
    assert odd.comm == "a) (b c" and odd.utime == 2.5 and odd.stime == 1.3


def test_snmp_netstat_and_interrupts():
    snmp = parse_snmp(fixture_text("proc", "net_snmp.txt"))
    assert "RetransSegs" in snmp["Tcp"] and "InErrors" in snmp["Udp"]
    w = watched(snmp)
    assert "tcp.retrans_segs" in w and "udp.in_errors" in w
    ext = parse_snmp(fixture_text("proc", "net_netstat.txt"))
    assert "TcpExt" in ext and "TCPLostRetransmit" in ext["TcpExt"]
    irqs = parse_interrupts(fixture_text("proc", "interrupts.txt"))
    assert irqs["24"][0] == {"0": 1, "1": 0} and "ACPI:Ged" in irqs["24"][1]
    assert irqs["38"] == ({"0": 0, "1": 3365}, "PCI-MSIX-0000:00:03.0 1-edge virtio2-input.0")
    assert irqs["ERR"] == ({"0": 0}, "")             # rows with one count keep it, no more
    nic = parse_interrupts("   CPU0 CPU1\n 40:  5 7  PCI-MSI 524288-edge  eth0-TxRx-0\n 41: 1 0 PCI-MSI x eth10\n")
    assert nic["40"] == ({"0": 5, "1": 7}, "PCI-MSI 524288-edge eth0-TxRx-0")


def test_cpu_offline_recorded_real_files():
    """Recorded with CPU 1 offlined on this VM: /proc/interrupts drops its
    column, /proc/softirqs keeps every possible CPU, /proc/stat drops its line."""
    irqs = parse_interrupts(fixture_text("proc", "interrupts_cpu1_offline.txt"))
    assert irqs["39"] == ({"0": 4331}, "PCI-MSIX-0000:00:03.0 2-edge virtio2-output.0")
    soft = net_softirqs(fixture_text("proc", "softirqs_cpu1_offline.txt"))
    assert set(soft["NET_RX"]) == {"0", "1"}
    stat_off = parse_proc_stat(fixture_text("proc", "stat_cpu1_offline.txt"))
    assert set(stat_off) == {"all", "0"}
    # across the hot-plug, only the CPU present in both reads counts
    assert set(cpu_deltas(parse_proc_stat(fixture_text("proc", "stat.txt")), stat_off)) == {"all", "0"}


def test_net_softirqs_recorded():
    soft = net_softirqs(fixture_text("proc", "softirqs.txt"))
    assert set(soft) == {"NET_RX", "NET_TX"} and soft["NET_RX"]["0"] > 0 and set(soft["NET_TX"]) == {"0", "1"}


def _cpu_samples(per_cpu_busy, state="softirq", seconds=4, tools=None):
    out = []
    for i in range(seconds):
        for cpu, busy in per_cpu_busy.items():
            out.append(Sample("t", "cpu.time", busy, "s", i, i + 1, make_tags(host="machine", cpu=cpu, state=state)))
            out.append(
                Sample("t", "cpu.time", 1 - busy, "s", i, i + 1, make_tags(host="machine", cpu=cpu, state="idle"))
            )
        for (role, proc), cores in (tools or {}).items():
            out.append(
                Sample(
                    "t", "proc.cpu", cores, "s", i, i + 1, make_tags(host="srv", role=role, proc=proc, kind="system")
                )
            )
    return out


def test_usage_busiest_and_warnings_that_name_the_fix():
    u = cpu_usage(_cpu_samples({"0": 0.97, "1": 0.30}), (0.5, 3.5))
    assert u.cores_busy == pytest.approx(1.27) and u.busiest_cpu == "0" and u.busiest_state == "softirq"
    assert u.percent_of_machine == pytest.approx(63.5)
    [w] = cpu_warnings(u)
    assert "softirq" in w and "spread IRQs" in w
    t = cpu_usage(_cpu_samples({"0": 0.5, "1": 0.5}, "user", tools={("engine-client", "c1:5201"): 0.99}), (0.5, 3.5))
    [w] = cpu_warnings(t)
    assert "single-threaded" in w and "engine-client srv c1:5201" in w


def test_usage_needs_samples_over_the_whole_window():
    assert cpu_usage(_cpu_samples({"0": 0.5}, seconds=2), (0.5, 3.5)) is None
    assert cpu_usage([], (0, 1)) is None
    # and says why, where reads were made
    [why] = cpu_notes(_cpu_samples({"0": 0.5}, seconds=2), (0.5, 3.5), None)
    assert "CPU cost not given: the CPU reads covered 50% of the window" in why
    assert cpu_notes([], (0, 1), None) == []


def test_a_read_every_cpu_missed_is_bridged_and_said():
    """Issue 33.5: every CPU's read of one interval went backwards (or was
    missed): the union of spans had a hole and the point's CPU cost was
    dropped with no reason.  It is kept, each CPU's gap said with why."""
    samples = [x for x in _cpu_samples({"0": 0.9, "1": 0.3}, seconds=8) if not 2 <= x.t_start < 3]
    why = "counters went backwards"
    samples += [Sample("t", "cpu.gap", 1.0, "s", 2, 3, make_tags(host="machine", cpu=c, reason=why)) for c in "01"]
    u = cpu_usage(samples, (0.0, 8.0))
    assert u is not None and u.cores_busy == pytest.approx(1.2)
    assert u.gaps == {"0": (0.875, "counters went backwards"), "1": (0.875, "counters went backwards")}
    assert any("CPU 0 was sampled over 88% of the window (counters went backwards)" in w
               for w in cpu_notes(samples, (0.0, 8.0), u))


def test_efficiency_figures():
    u = cpu_usage(_cpu_samples({"0": 1.0, "1": 1.0}, "system"), (0, 4))
    e = efficiency(u, 16.0, 2000.0)  # 16 Gbps = 2 GB/s on 2 busy cores
    assert e.gbps_per_core == pytest.approx(8.0) and e.cpu_s_per_gb == pytest.approx(1.0)
    assert e.cycles_per_byte == pytest.approx(2 * 2000e6 / 2e9)
    assert efficiency(u, 16.0, None).cycles_per_byte is None  # unknown, never invented


def test_a_cpu_offline_for_part_of_the_window_is_a_marked_gap_and_counts_for_its_time_only():
    """The audit's case: a CPU hot-unplugged mid-point left an unmarked gap,
    and its busy share counted as a whole core for the whole window."""
    from nicbench.hosts.fake import FakeTransport
    from nicbench.sampling.sampler import CpuSampler
    reads = iter([
        "cpu0 0 0 0 100 0 0 0 0\ncpu1 0 0 0 100 0 0 0 0\n",
        "cpu0 50 0 0 150 0 0 0 0\ncpu1 100 0 0 100 0 0 0 0\n",      # 1 s: cpu0 50 % busy, cpu1 100 %
        "cpu0 100 0 0 200 0 0 0 0\n",                                 # cpu1 hot-unplugged
        "cpu0 150 0 0 250 0 0 0 0\n",
    ])
    t = FakeTransport("m")
    s = CpuSampler(t, lambda: [], machine="m", trial_id="t", interval=1.0)
    clock = iter([100.0, 100.0, 101.0, 101.0, 102.0, 102.0, 103.0, 103.0])
    import nicbench.sampling.sampler as sampler_mod
    real_time = sampler_mod.time.time
    sampler_mod.time.time = lambda: next(clock)
    try:
        for _ in range(4):
            t.files["/proc/stat"] = next(reads)
            s.read()
    finally:
        sampler_mod.time.time = real_time
    samples = s.samples()
    gaps = [x for x in samples if x.metric == "cpu.gap"]
    # marked where it went away (after that it is in no read at all)
    assert [(x.tag("cpu"), x.tag("reason"), x.t_start, x.t_end) for x in gaps] == [("1", "offline", 101.0, 102.0)]
    u = cpu_usage(samples, (100.0, 103.0))
    assert u.gaps["1"] == (pytest.approx(1 / 3), "offline")
    # cpu0 half busy for 3 s, cpu1 fully busy for 1 s: 1.5 + 1 = 2.5 core-seconds over 3 s
    assert u.cores_busy == pytest.approx(0.5 + 1 / 3)
    # of the CPU time there was (3 s + 1 s = 4/3 CPUs): 62.5 %, not 41.7 % (2 CPUs) nor 83 % (1 CPU)
    assert u.cpus_present == pytest.approx(4 / 3) and u.percent_of_machine == pytest.approx(62.5)
    assert any("CPU 1 was sampled over 33% of the window (offline)" in w for w in cpu_warnings(u))
