"""netmap pkt-gen as the packet study's engine, on fakes: this machine has no
netmap, so no pkt-gen runs here.  The fake hosts answer the recorded pkt-gen
outputs of tests/fixtures/import/pktgen/ext (luigirizzo/netmap issues #368
and #102, see SOURCES.md) and FreeBSD's recorded ``ifconfig`` outputs; the
argv nicbench builds is checked against pkt-gen's own option string
(getopt in apps/pkt-gen/pkt-gen.c)."""

from __future__ import annotations

import getopt
from pathlib import Path

import pytest

from conftest import FIXTURES, fixture_text
from nicbench.core.errors import PreflightError, ToolError
from nicbench.hosts.fake import FakeHosts, FakeTransport, Script
from nicbench.hosts.spec import HostSpec, HostsSpec
from nicbench.plan import parse_plan
from nicbench.plan.matrix import trials
from nicbench.run.kit import PointEnv
from nicbench.run.preflight import os_problems
from nicbench.studies.packets.analysis import packet_trial
from nicbench.studies.packets.runner import PacketRunner, netmap_problems
from nicbench.tools import pktgen

# pkt-gen.c main(): getopt(arc, argv, "46a:f:F:Nn:i:Il:d:s:D:S:b:c:o:p:" "T:w:WvR:XC:H:rP:zZAhBM:")
OPTSTRING = "46a:f:F:Nn:i:Il:d:s:D:S:b:c:o:p:T:w:WvR:XC:H:rP:zZAhBM:"
BSD = FIXTURES / "freebsd"
TX = fixture_text("import", "pktgen", "ext", "pktgen_netmap368_tx.txt")
RX = fixture_text("import", "pktgen", "ext", "pktgen_netmap102_rx.txt")

PLAN = """name = "p"
[hosts.gen]
role = "server"
ssh = "gen.example"
test_ip = "192.0.2.1"
[hosts.sink]
role = "client"
ssh = "sink.example"
test_ip = "192.0.2.2"
[study]
kind = "packets"
engines = ["pkt-gen"]
frame_sizes = [64]
ports = [1]
threads = [1]
duration = 2
trim = 0.25
timeout_margin = 3
interfaces = { gen = ["dc0"], sink = ["vtnet0"] }
"""

NETMAP_OK = Script("netmap=yes\nopen=yes\npkt-gen=/usr/local/bin/pkt-gen\n")


def bsd_host(ifconfig: Path, **over: Script):
    def respond(argv: list[str]) -> Script:
        if argv[:2] == ["sh", "-c"] and "/dev/netmap" in argv[2]:
            return over.get("netmap", NETMAP_OK)
        if argv[0] == "ifconfig":
            return Script(ifconfig.read_text())
        if argv == ["sysctl", "-n", "hw.ncpu"]:
            return Script("4\n")
        if argv[0] == "pkt-gen" and "rx" in argv:          # the console: its D() lines are stderr
            return Script(stderr=RX, hang=True)
        if argv[0] == "timeout" and "pkt-gen" in argv:
            return Script(stderr=TX, runtime=2.0)
        return Script()
    return respond


def hosts_for(plan, gen, sink) -> FakeHosts:
    spec = HostsSpec(plan.name, 1500, (HostSpec("gen", "server", "", "192.0.2.1", 24),
                                       HostSpec("sink", "client", "", "192.0.2.2", 24)), None, None, ())
    return FakeHosts(spec, {"gen": FakeTransport("gen", gen, os="FreeBSD"),
                            "sink": FakeTransport("sink", sink, os="FreeBSD")})


def test_pkt_gen_argv_is_what_pkt_gen_parses():
    argv = pktgen.tx_argv("ix0", frame_size=64, ip=6, src_ip="2001:db8::1", dst_ip="2001:db8::2",
                          src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:02", sport=1024, dport=9, threads=4,
                          duration=10, wait=2, rate=1_000_000, first_cpu=4)
    assert argv[:5] == ["timeout", "-s", "INT", "12", "pkt-gen"]               # duration + the link wait
    opts, rest = getopt.getopt(argv[5:], OPTSTRING)
    o = dict(opts)
    assert rest == [] and o["-i"] == "netmap:ix0" and o["-f"] == "tx" and o["-l"] == "60" and "-6" in o
    assert o["-s"] == "[2001:db8::1]:1024-[2001:db8::1]:1027" and o["-d"] == "[2001:db8::2]:9"
    assert (o["-p"], o["-R"], o["-a"], o["-T"]) == ("4", "250000", "4", "250")    # -R paces each thread
    opts, rest = getopt.getopt(pktgen.rx_argv("ix0", threads=2, wait=2)[1:], OPTSTRING)
    assert rest == [] and dict(opts)["-f"] == "rx"


def test_stamps_modulo_1000_come_back_on_the_host_clock():
    assert pktgen.unwrap(802.259513, near=1_763_884_801.0) == pytest.approx(1_763_884_802.259513)
    assert pktgen.unwrap(1.5, near=1_763_884_999.0) == pytest.approx(1_763_885_001.5)      # across the wrap
    assert pktgen.unwrap(998.0, near=1_763_885_001.0) == pytest.approx(1_763_884_998.0)
    run = pktgen.parse_run("", TX, near=1_763_884_801.0, where="gen")
    assert [i.packets for i in run.intervals] == [908221, 910273, 910533, 910603] and run.ready
    assert run.intervals[0].t_end == pytest.approx(1_763_884_802.259513)
    assert run.intervals[0].t_end - run.intervals[0].t_start == pytest.approx(1.000378)
    with pytest.raises(ToolError, match="pkt-gen printed no rate line: .*Unable to open netmap:ix0"):
        pktgen.parse_run("", "123.456 nm_open [123] Unable to open netmap:ix0: Device not configured\n",
                         near=0.0, where="gen")


def test_a_pkt_gen_point_on_freebsd_hosts_counts_both_ends(tmp_path):
    plan = parse_plan(PLAN)
    hosts = hosts_for(plan, bsd_host(BSD / "handbook" / "ifconfig-dc.txt"),
                      bsd_host(BSD / "14" / "ifconfig-a-vtnet.txt"))
    assert os_problems(plan, {"gen": "FreeBSD", "sink": "FreeBSD"}) == []      # netmap runs on FreeBSD
    r = PacketRunner(plan, hosts)
    pre = r.preflight()
    assert pre.meta["versions"] == {"pkt-gen": "/usr/local/bin/pkt-gen"}
    [spec] = trials(plan)
    out = r.trial(PointEnv(rel=lambda p: str(Path(p).relative_to(tmp_path))), spec, tmp_path / spec.trial_id)
    assert out.record.status == "ok", out.record.error
    [rx] = hosts.transport("sink").spawned
    [tx] = hosts.transport("gen").spawned
    assert rx.argv[:5] == ("pkt-gen", "-i", "netmap:vtnet0", "-f", "rx") and not rx.gated
    assert tx.gated and rx.spawned_at <= (tx.released_at or 0)       # counting before the first frame
    assert rx.signals == [2]                                        # SIGINT: pkt-gen's clean end
    o = dict(getopt.getopt(list(tx.argv[5:]), OPTSTRING)[0])
    assert o["-S"] == "00:a0:cc:da:da:da" and o["-D"] == "fa:16:3e:ba:3e:25"      # each end's recorded ether
    assert o["-c"] == "4" and o["-a"] == "0"
    sent = [s for s in out.samples if s.metric == "pkt.sent"]
    got = [s for s in out.samples if s.metric == "pkt.received"]
    assert sum(s.value for s in sent) == 908221 + 910273 + 910533 + 910603
    assert sum(s.value for s in got) == 103 and {s.tag("engine") for s in sent + got} == {"pkt-gen"}
    assert out.record.meta["tx"]["dc0"]["sent"] == 3639630 and out.record.meta["rx"]["vtnet0"]["packets"] == 103
    # the two recordings come from different runs: their spans do not meet, and the analysis says so
    assert packet_trial(out.record, out.samples, plan.study.trim).status == "failed"


def test_preflight_refuses_a_host_without_netmap_in_one_line_naming_it():
    plan = parse_plan(PLAN)
    hosts = hosts_for(plan, bsd_host(BSD / "handbook" / "ifconfig-dc.txt",
                                     netmap=Script("netmap=no\nopen=no\npkt-gen=\n")),
                      bsd_host(BSD / "14" / "ifconfig-a-vtnet.txt", netmap=Script("netmap=yes\nopen=yes\npkt-gen=\n")))
    with pytest.raises(PreflightError) as e:
        PacketRunner(plan, hosts).preflight()
    msg = e.value.message
    assert "gen: pkt-gen needs netmap, and this host has no /dev/netmap" in msg
    assert "sink: pkt-gen is not installed" in msg and "\n" not in e.value.one_line()
    assert netmap_problems("h", "netmap=yes\nopen=no\npkt-gen=/x\n") == [
        "h: /dev/netmap is not readable and writable by this user (run as root)"]


def test_a_freebsd_host_may_run_pkt_gen_but_not_nbgen():
    plan = parse_plan(PLAN.replace('engines = ["pkt-gen"]', 'engines = ["pkt-gen", "nbgen"]'))
    got = os_problems(plan, {"gen": "FreeBSD", "sink": "FreeBSD"})
    assert got[0].startswith("gen: a FreeBSD host, but the packets study would run nbgen")
    assert "pkt-gen" not in got[0] and "sink: " in got[1] and "XDP receiver" in got[1]
    with pytest.raises(Exception, match="does not fit one netmap buffer"):
        parse_plan(PLAN.replace("frame_sizes = [64]", "frame_sizes = [4000]"))
