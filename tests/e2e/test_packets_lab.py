"""The packet-rate study with the real engines in the lab (root): nbgen's XDP
live frames and trafgen, the receiver's XDP counter, and no XDP program left
attached on any exit path."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest
from helpers import lab_up, namespaces, nicbench, overcount_flagged

from nicbench.api import execute, load_run, render
from nicbench.core.errors import PreflightError
from nicbench.hosts.transport import NetnsTransport
from nicbench.lab import manager
from nicbench.lab.topology import DirectLink, make_spec
from nicbench.plan import parse_plan
from nicbench.store.archive import Archive
from nicbench.studies.packets import runner as packets
from nicbench.tools import nbgen

pytestmark = pytest.mark.lab

TOOLS = ("nbgen", "trafgen")   # none may outlive a test (conftest.py checks)


def plan(lab: str, study: str) -> str:
    return f'''name = "packets-e2e"
[lab]
name = "{lab}"
[hosts.gen]
role = "server"
[hosts.sink]
role = "client"
[study]
kind = "packets"
line_rate = "40G"
duration = 2
trim = 0.25
{study}
'''


def xdp_on(ns: str, dev: str) -> bool:
    """Is an XDP program attached?  A port or namespace that is gone is an
    error, not a "no": it would let a torn-down lab pass for a clean one."""
    r = subprocess.run(["ip", "-n", ns, "-j", "-d", "link", "show", "dev", dev], capture_output=True, text=True)
    assert r.returncode == 0, f"{ns} {dev}: {r.stderr}"
    return bool(json.loads(r.stdout)[0].get("xdp"))


def xdp_up(ns: str, dev: str) -> bool:
    """For waiting: the port may not exist yet."""
    r = subprocess.run(["ip", "-n", ns, "-j", "-d", "link", "show", "dev", dev], capture_output=True, text=True)
    return r.returncode == 0 and bool(json.loads(r.stdout)[0].get("xdp"))


def test_both_engines_single_and_dual_port_counted_at_both_ends(tmp_path):
    text = plan("e2ep1", 'engines = ["nbgen", "trafgen"]\nframe_sizes = [64, 1024]\nports = [1, 2]')
    out = execute(parse_plan(text), text, store=tmp_path)
    assert namespaces("e2ep1") == []
    view = load_run(out.run_dir)
    assert [t.error for t in view.trials if t.status != "ok"] == []
    for t in view.trials:
        ports = int(t.params["ports"])
        assert len(t.per_port_rx_pps) == ports and all(v > 0 for v in t.per_port_rx_pps.values())
        # every frame the engine sent either left the generator's interface or was
        # refused by it (nbgen's own XDP count against the kernel's counters), and
        # the receiver counting more than was sent is flagged
        if t.params["engine"] == "nbgen":         # (trafgen's sent rate is these counters)
            left = t.if_tx_pps + (t.tx_drops_pps or 0.0)
            assert t.tx_pps == pytest.approx(left, rel=0.02), t.point
        overcount_flagged(t)
        assert t.rx_pps == pytest.approx(t.if_rx_pps, rel=0.02), t.point
        assert t.xdp_modes and set(t.xdp_modes.values()) == {"native"}
        assert t.cpu is not None and t.cpu.cores_busy > 0
    for p in view.points:
        assert p.ceiling_mpps == pytest.approx(40e9 / ((p.frame_size + 20) * 8) * p.ports / 1e6)
    page = render(view).read_text()
    assert "Seed 003" in page and (out.run_dir / "report" / "packets-mpps.png").exists()
    rows = (out.run_dir / "report" / "points.csv").read_text().splitlines()
    assert rows[0].startswith("point,engine,ip,ports") and len(rows) == 9


def test_ipv6_at_a_set_rate(tmp_path):
    text = plan("e2ep2", 'engines = ["nbgen", "trafgen"]\nip_versions = [6]\nframe_sizes = [128]\nrate = 100000')
    out = execute(parse_plan(text), text, store=tmp_path)
    view = load_run(out.run_dir)
    assert [t.error for t in view.trials if t.status != "ok"] == []
    # nbgen paces in the XDP program, frame by frame; trafgen's own --rate sleeps between frames
    # and fell short (65 % of 100k measured here), or overshot (118 % with other work on the
    # machine).  Either way nicbench says when an engine missed the pace by more than 5 %: how
    # near each kept to it is this shared machine's scheduling
    nb = next(t for t in view.trials if t.params["engine"] == "nbgen")
    tg = next(t for t in view.trials if t.params["engine"] == "trafgen")
    for t in (nb, tg):
        assert t.rx_pps > 0
        overcount_flagged(t)
        assert any("asked" in w for w in t.warnings) == (abs(t.tx_pps / 1e5 - 1) > 0.05), (t.params["engine"],
                                                                                        t.tx_pps, t.warnings)
    print(f"nicbench-e2e ipv6 at 100k pps: nbgen {nb.tx_pps:.0f} sent, {nb.rx_pps:.0f} received (loss {nb.loss}); "
          f"trafgen {tg.tx_pps:.0f} sent")


def test_a_generator_short_of_the_line_is_the_engine_and_explain_says_so(tmp_path):
    """Issue 26 on the packet study: no 2-core machine sends 64-byte frames at
    40G, the receiver keeps up with what it gets, so the point's limit is the
    generator -- alone, or beside the CPU its frames' softirq fills -- with
    the figures that show it, in the report and in ``nicbench explain``."""
    text = plan("e2ep5", 'engines = ["nbgen"]\nframe_sizes = [64]\nports = [1]')
    out = execute(parse_plan(text), text, store=tmp_path)
    assert namespaces("e2ep5") == []
    view = load_run(out.run_dir)
    [p] = view.points
    v = p.verdict
    assert p.n_ok == 1 and v is not None, p.errors
    assert "engine" in (v.limit, v.leading, v.second), v
    assert any("the generator (nbgen) sent only" in e and "the sender is the limit" in e for e in v.evidence), v
    assert any(c.startswith("wire: rx frames received") for c in v.checked), v
    print(f"nicbench-e2e packets verdict: {v.limit} ({v.leading}/{v.second}): {'; '.join(v.evidence)}")
    proc = nicbench("explain", out.run_id, "--json", "--store", tmp_path)
    got, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(got)["points"][0]["verdict"]["limit"] == v.limit
    page = render(view).read_text()
    assert "Timelines and limits" in page and "timeline-nbgen_ipv4_p1_t1_64B.png" in page


def test_the_nic_counters_of_a_point_show_its_queues_and_one_queue_is_flagged(tmp_path):
    """Issue 31: every point reads each host's ``ethtool -S``.  On the lab's
    2-queue veth (threads = [1, 2] builds it) the receiver's XDP program puts
    veth on its NAPI path, whose per-queue counters count every frame; veth
    picks the rx queue from the sending CPU, so one generator thread lands
    every frame on one queue: the imbalance is flagged, and said by
    ``nicbench explain``.  veth has no interrupts: said, none found."""
    text = plan("e2ep6", 'engines = ["nbgen"]\nframe_sizes = [64]\nports = [1]\nthreads = [1, 2]')
    out = execute(parse_plan(text), text, store=tmp_path)
    assert namespaces("e2ep6") == []
    view = load_run(out.run_dir)
    points = {p.point: p for p in view.points}
    assert set(points) == {"nbgen/ipv4/p1/t1/64B", "nbgen/ipv4/p1/t2/64B"}, points
    for key, p in points.items():
        v = p.verdict
        assert p.n_ok == 1 and v is not None, p.errors
        read = [c for c in v.checked if c.startswith("nic: counters read on ")]
        assert len(read) == 1 and read[0].count("(veth)") == 2, v.checked
        assert any(c.startswith("irq: no NIC interrupts sampled") for c in v.checked), v.checked
        spread = [c for c in v.checked if "(veth) rx queues:" in c and "over 2 queues" in c]
        assert spread, v.checked
        print(f"nicbench-e2e nic {key}: {'; '.join(spread)}")
    one = [c for c in points["nbgen/ipv4/p1/t1/64B"].verdict.checked if "(veth) rx queues:" in c]
    assert any("100 %, imbalance 1.00: uneven" in c for c in one), one
    proc = nicbench("explain", out.run_id, "--point", "nbgen/ipv4/p1/t1/64B", "--store", tmp_path)
    got, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert "imbalance 1.00: uneven" in got, got


@pytest.fixture
def one_port_lab():
    spec = make_spec("e2ep3", [("gen", "server"), ("sink", "client")], 1500,
                     direct=(DirectLink(0, "gen", "sink", 1),))
    lab = lab_up(spec)
    yield lab
    manager.down("e2ep3")


def test_preflight_lists_every_problem_at_once(one_port_lab):
    lab = one_port_lab
    sink = lab.spec.host("sink").netns
    exe = nbgen.binary()
    holder = subprocess.Popen(["ip", "netns", "exec", sink, exe, "rx", "--dev", "pk0", "--duration", "20"],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        assert '"attached"' in holder.stdout.readline()

        class Unprivileged(NetnsTransport):
            def wrap(self, argv):
                return super().wrap(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                     "--inh-caps=-all", "--bounding-set=-all", *argv])

        ts = {"gen": Unprivileged("gen", lab.spec.host("gen").netns), "sink": lab.transport("sink")}
        p = parse_plan(plan("e2ep3", 'engines = ["nbgen", "trafgen"]\nports = [2]'))
        with pytest.raises(PreflightError) as e:
            packets.preflight(p, ts, {})
        line = e.value.one_line()
        assert "gen: nbgen needs CAP_NET_ADMIN, CAP_BPF, CAP_PERFMON" in line
        assert "gen: trafgen needs CAP_NET_RAW" in line
        assert "interface pk1 does not exist" in line
        assert "sink: pk0 already has an XDP program attached" in line and "nb_rx" in line
    finally:
        os.killpg(holder.pid, signal.SIGKILL)
        holder.wait()
    assert not xdp_on(sink, "pk0")                     # SIGKILL: the BPF link went with the process


def test_receiver_falls_back_to_generic_xdp_and_says_why(one_port_lab):
    sink = one_port_lab.transport("sink")
    r = sink.run([nbgen.binary(), "rx", "--dev", "lo", "--duration", "0.3"], timeout=10)
    rx = nbgen.parse_rx(r.stdout, r.stderr)
    assert rx.mode == "generic" and "native XDP refused by the driver" in rx.why
    r = sink.run([nbgen.binary(), "rx", "--dev", "lo", "--xdp", "native", "--duration", "0.3"], timeout=10)
    assert r.returncode == 4 and "has no native XDP" in nbgen.error_of(r.stderr)
    assert not xdp_on(one_port_lab.spec.host("sink").netns, "lo")


def test_an_interrupted_run_leaves_no_xdp_program_attached(tmp_path):
    """SIGTERM to nicbench during its first point, lab kept: the receivers are
    stopped and every port is free of XDP, and the run is stored as interrupted."""
    path = tmp_path / "p.toml"
    path.write_text(plan("e2ep4", "frame_sizes = [64, 128]\nports = [2]").replace("duration = 2", "duration = 4"))
    proc = nicbench("run", "--keep-lab", "--store", tmp_path / "st", path, start_new_session=True)
    try:
        ns = "nb-e2ep4-sink"
        deadline = time.monotonic() + 30
        while not (xdp_up(ns, "pk0") and xdp_up(ns, "pk1")):
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else ""
            time.sleep(0.05)
        time.sleep(1.0)
        os.killpg(proc.pid, signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert namespaces("e2ep4"), "the lab was to be kept"
        assert not xdp_on(ns, "pk0") and not xdp_on(ns, "pk1")
        assert not xdp_on("nb-e2ep4-gen", "pk0")
        with Archive.open(tmp_path / "st") as a:
            assert [r.status for r in a.runs()] == ["interrupted"]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        manager.down("e2ep4")
