"""Network counters: the sampler's deltas (recorded /proc files) and their totals over a window."""

import pytest

from conftest import fixture_text
from nicbench.analysis.counters import counter_warnings, counters
from nicbench.records import Sample, TrialRecord, TrialSpec, make_tags
from nicbench.sampling.sampler import CpuSampler, NetSampler, NetTarget
from nicbench.studies.tcp.analysis import point_stats, trial_result


class Files:
    """A transport stand-in whose /proc files change between reads."""

    host = "srv"
    kind = "fake"

    def __init__(self, files):
        self.files = files          # path -> list of successive contents
        self.reads: dict[str, int] = {}

    def run(self, argv, timeout=30):
        """The namespace fallback: one shell printing /proc/net/{dev,snmp,netstat}, each after a marker."""
        from types import SimpleNamespace
        self.runs = getattr(self, "runs", 0) + 1
        out = "".join(f"@@nicbench-net {f}\n" + (self.read_text(f"/proc/net/{f}") if f"/proc/net/{f}" in self.files
                                                   else "") for f in ("dev", "snmp", "netstat"))
        return SimpleNamespace(stdout=out, returncode=0)

    def read_text(self, path):
        if path not in self.files:
            raise FileNotFoundError(path)
        i = self.reads.get(path, 0)
        self.reads[path] = i + 1
        seq = self.files[path]
        return seq[min(i, len(seq) - 1)]


def _bump(text: str, proto: str, key: str, by: int) -> str:
    """The same snmp file with one counter raised."""
    lines = text.splitlines()
    for i in range(0, len(lines) - 1):
        if lines[i].startswith(proto + ":") and lines[i + 1].startswith(proto + ":"):
            names, vals = lines[i].split(), lines[i + 1].split()
            if key in names:
                j = names.index(key)
                vals[j] = str(int(vals[j]) + by)
                lines[i + 1] = " ".join(vals)
    return "\n".join(lines) + "\n"


def test_net_sampler_deltas_per_host_from_recorded_files():
    snmp = fixture_text("proc", "net_snmp.txt")
    dev = fixture_text("proc", "net_dev_netns.txt")
    t = Files({"/proc/7/net/dev": [dev, dev], "/proc/7/net/snmp": [snmp, _bump(snmp, "Tcp", "RetransSegs", 5)],
               "/proc/7/net/netstat": [fixture_text("proc", "net_netstat.txt")] * 2})
    s = NetSampler([NetTarget("srv", t, lambda: [7], "lo")], trial_id="t", interval=1)
    s.read()
    s.read()
    got = {(x.metric, x.tag("direction")): x.value for x in s.samples()}
    assert got[("net.tcp.retrans_segs", None)] == 5
    assert got[("net.udp.in_errors", None)] == 0
    assert got[("if.bytes", "tx")] == 0 and ("if.drops", "rx") in got


def test_net_sampler_falls_back_to_the_namespace_when_the_tools_have_exited():
    dev = fixture_text("proc", "net_dev_netns.txt")
    t = Files({"/proc/net/dev": [dev], "/proc/net/snmp": [fixture_text("proc", "net_snmp.txt")]})
    s = NetSampler([NetTarget("c1", t, lambda: [99], "lo")], trial_id="t", interval=1)
    s.read()
    s.read()
    got = s.samples()
    assert {x.tag("host") for x in got} == {"c1"} and any(x.metric == "net.tcp.retrans_segs" for x in got)
    assert t.runs == 2 and t.reads["/proc/net/dev"] == 2      # one command per read, through the namespace


def test_net_sampler_read_through_a_process_exiting_between_its_files_comes_from_the_namespace():
    # /proc/7/net/dev read, then the process exited: its snmp is gone.  A read of dev alone would leave the
    # protocol counters' series a span short (the lab e2e's loss split came back None); the namespace answers
    dev = fixture_text("proc", "net_dev_netns.txt")
    snmp = fixture_text("proc", "net_snmp.txt")
    t = Files({"/proc/7/net/dev": [dev], "/proc/net/dev": [dev], "/proc/net/snmp": [snmp, snmp],
               "/proc/net/netstat": [fixture_text("proc", "net_netstat.txt")] * 2})
    s = NetSampler([NetTarget("c1", t, lambda: [7], "lo")], trial_id="t", interval=1)
    s.read()
    s.read()
    assert t.runs == 2 and {x.metric for x in s.samples()} >= {"net.udp.in_datagrams", "net.udp.sndbuf_errors"}


def test_cpu_sampler_counts_net_softirqs_and_nic_irqs_per_cpu():
    stat = fixture_text("proc", "stat.txt")
    soft = fixture_text("proc", "softirqs.txt")
    soft2 = soft.replace("NET_RX:   71046519", "NET_RX:   71046619")
    irq = fixture_text("proc", "interrupts.txt")
    irq2 = irq.replace(" 38:          0       3365", " 38:          0       3465")
    t = Files({"/proc/stat": [stat, stat], "/proc/softirqs": [soft, soft2], "/proc/interrupts": [irq, irq2]})
    s = CpuSampler(t, lambda: [], machine="m", trial_id="t", interval=1, nic_irqs={"38": "eth0:virtio2-input.0"})
    s.read()
    s.read()
    got = {(x.metric, x.tag("kind") or x.tag("irq"), x.tag("cpu")): x.value for x in s.samples()
           if x.metric.endswith(".count")}
    assert got[("softirq.count", "NET_RX", "0")] == 100 and got[("softirq.count", "NET_RX", "1")] == 0
    assert got[("irq.count", "eth0:virtio2-input.0", "1")] == 100


def _series(metric, per_s, t0=0.0, t1=4.0, step=1.0, **tags):
    out, t = [], t0
    while t < t1:
        out.append(Sample("t", metric, per_s * step, "count", t, t + step, make_tags(**tags)))
        t += step
    return out


def test_counters_prorate_over_the_window_and_refuse_partial_cover():
    s = (_series("net.tcp.retrans_segs", 10, host="srv") + _series("net.tcp.retrans_segs", 2, host="c1")
         + _series("if.drops", 3, host="c1", direction="rx")
         + _series("softirq.count", 1000, host="m", cpu="0", kind="NET_RX")
         + _series("net.udp.in_errors", 1, t0=2.0, host="srv"))          # starts late: not covering
    c = counters(s, (0.5, 3.5))
    assert c.total("tcp.retrans_segs") == pytest.approx(36)
    assert c.per_host["c1"]["if.drops.rx"] == pytest.approx(9)
    assert c.softirq_per_s["NET_RX"]["0"] == pytest.approx(1000)
    assert c.total("udp.in_errors") is None
    w = counter_warnings(c)
    assert any("c1 dropped 9 packets on rx" in x and "netdev_max_backlog" in x for x in w)


def test_point_stats_carry_stack_counters():
    from test_netdev_wire import _samples  # goodput and interface samples of one trial
    samples = (_samples(0.9, 80000) + _series("net.tcp.retrans_segs", 4, host="srv")
               + _series("softirq.count", 500, host="machine", cpu="0", kind="NET_RX")
               + _series("softirq.count", 1500, host="machine", cpu="1", kind="NET_RX"))
    spec = TrialSpec("t1", 0, "tcp", "tx/c1/io128K", 0, {"direction": "tx", "duration": 4.0})
    rec = TrialRecord(spec, "ok", 0, 4, None, {"layout": [{"client": "c1", "port": 5201, "streams": 1}]})
    r = trial_result(rec, samples, 0.5)
    assert r.counters is not None
    [p] = point_stats([r])
    assert p.stack_retrans == pytest.approx(12)        # 4/s over the 3 s trimmed window
    assert p.net_rx_per_s == pytest.approx(2000) and p.net_rx_by_cpu == "0 25%, 1 75%"
    assert p.nic_irq_per_s is None
