"""What the UDP study reads from the tools and the kernel: iperf3 and iperf 2
UDP reports (recorded here by tests/fixtures/capture_udp.sh), the UDP
counters of /proc/net/snmp, UDP server readiness from /proc/net/udp, and the
UDP line rate of fragmented datagrams.  Expected figures are read off the
fixture files by hand."""

from __future__ import annotations

import pytest

from conftest import fixture_text
from nicbench.core import linerate as L
from nicbench.core.errors import ToolError
from nicbench.run.procnet import bound_udp
from nicbench.sampling.netstat import fragment_memory, parse_snmp, watched
from nicbench.tools import iperf2, iperf3

INFO = iperf3.info_from("iperf 3.12", "--bidir --get-server-output")


def v3(name: str) -> iperf3.Iperf3Report:
    return iperf3.parse(fixture_text("iperf3", "3.12", name))


def v2(name: str, role: str, **kw) -> iperf2.Iperf2Report:
    return iperf2.parse(fixture_text("iperf2", "2.1.8", name), role=role, server_port=5001, interval=0.5, **kw)


def test_iperf3_udp_totals_by_flow_and_side():
    r = v3("udp_p2_omit.json")
    # the sender's count comes from the client, the receiver's from the server's own report
    assert r.udp["fwd.sender"] == iperf3.UdpTotal(10000, streams=2)
    assert r.udp["fwd.receiver"].packets == 9998 and r.udp["fwd.receiver"].lost == 0
    assert r.udp["fwd.receiver"].out_of_order == 0 and r.udp["fwd.receiver"].streams == 2
    assert r.udp["fwd.receiver"].jitter_s == pytest.approx(0.013060214299735327e-3)
    rev = v3("udp_rev.json")
    assert set(rev.udp) == {"rev.sender", "rev.receiver"} and rev.udp["rev.receiver"].packets == 5001
    bidir = v3("udp_bidir.json")
    assert {k: t.packets for k, t in bidir.udp.items()} == {"fwd.sender": 4998, "rev.receiver": 5001,
                                                          "fwd.receiver": 4998, "rev.sender": 5001}
    loss = v3("udp_unpaced_loss.json").udp["fwd.receiver"]
    assert (loss.packets, loss.lost) == (254910, 152309)


def test_iperf3_udp_receiver_intervals_carry_datagrams_and_loss():
    r = v3("udp_unpaced_loss.json")
    rcv = [i for i in r.intervals if i.side == "receiver" and i.flow == "fwd"]
    assert [(i.packets, i.lost) for i in rcv] == [(54845, 30279), (55073, 29551), (45034, 29436), (99317, 62464),
                                                  (641, 579)]
    # the bytes are what arrived: (expected - lost) datagrams of 1472 bytes
    assert all(i.bytes == (i.packets - i.lost) * 1472 for i in rcv)
    snd = [i for i in r.intervals if i.side == "sender"]
    assert snd and all(i.packets and i.lost is None for i in snd)
    omit = v3("udp_p2_omit.json")
    assert [i.omitted for i in omit.intervals if i.side == "receiver"] == [True, True, False, False, False, False]


def test_iperf3_udp_with_every_datagram_dropped_counts_nothing_received():
    """The trap a runner must catch: the test "succeeds" with 0 lost of 0 expected."""
    r = v3("udp_all_dropped.json")
    assert r.error is None and r.udp["fwd.sender"].packets == 4998
    assert r.udp["fwd.receiver"].packets == 0 and r.udp["fwd.receiver"].lost == 0


def test_iperf3_udp_blocked_by_a_firewall_never_starts():
    r = v3("udp_firewalled.json")
    assert r.error == "interrupt - the client has terminated" and r.protocol is None
    assert r.intervals == () and r.udp == {}


def test_iperf3_refuses_a_datagram_below_its_header():
    assert "minimum = 16 bytes, maximum = 65507 bytes" in fixture_text("iperf3", "3.12", "udp_blksize_8.err")
    with pytest.raises(ToolError, match="no JSON"):
        iperf3.parse(fixture_text("iperf3", "3.12", "udp_blksize_8.out"))


def test_iperf2_udp_server_lines_are_the_receiver_with_loss_per_interval():
    r = v2("udp_server_p2.csv", "server")
    rcv = [i for i in r.intervals if i.side == "receiver"]
    assert [(i.start, i.streams, i.packets, i.lost, i.out_of_order) for i in rcv] == [
        (0.0, 2, 2625, 1, 1), (0.5, 2, 2622, 0, 0), (1.0, 2, 2622, 0, 0), (1.5, 2, 2621, 0, 0)]
    assert rcv[0].jitter_s == pytest.approx(0.003e-3)
    # the whole-test summaries of both streams, summed (one stream lost one datagram)
    assert r.udp["fwd.receiver"] == (0.002, 1.0, 10492.0, pytest.approx(100 / 10492), 1.0)


def test_iperf2_udp_sender_lines_count_sent_datagrams_and_nothing_else():
    r = v2("udp_client_p2.csv", "client")
    snd = [i for i in r.intervals if i.side == "sender"]
    assert snd and all(i.packets and i.lost is None and i.jitter_s is None for i in snd)
    assert sum(i.packets for i in snd) == sum(i.bytes for i in snd) // 1000


def test_iperf2_udp_reverse_and_full_duplex_flows():
    rev = v2("udp_client_rev.csv", "client")
    assert {(i.flow, i.side) for i in rev.intervals} == {("rev", "receiver")}
    assert [i.lost for i in rev.intervals] == [0, 151, 255, 0]
    fd = v2("udp_client_fd.csv", "client")
    assert {(i.flow, i.side) for i in fd.intervals} == {("fwd", "sender"), ("rev", "receiver")}
    fds = v2("udp_server_fd.csv", "server")
    assert {(i.flow, i.side) for i in fds.intervals} == {("fwd", "receiver"), ("rev", "sender")}


def test_iperf2_udp_behind_a_firewall_leaves_the_server_silent():
    assert fixture_text("iperf2", "2.1.8", "udp_server_firewalled.csv") == ""
    r = v2("udp_client_firewalled.csv", "client")
    assert {i.side for i in r.intervals} == {"sender"} and "fwd.receiver" not in r.udp


def test_udp_argv_always_paces_each_stream():
    a = iperf3.udp_client_argv(INFO, target="10.0.0.2", port=5201, duration=2, omit=1, interval=0.5, size=1472,
                               streams=4, mode="rev", rate_bps=250e6, window=1 << 20)
    assert a[a.index("-b") + 1] == "250000000" and "-u" in a and a[a.index("-l") + 1] == "1472"
    assert "-R" in a and a[a.index("-w") + 1] == "1048576" and a[a.index("-P") + 1] == "4"
    unpaced = iperf3.udp_client_argv(INFO, target="x", port=1, duration=2, omit=0, interval=1, size=64, streams=1,
                                     mode="bidir", rate_bps=None)
    assert unpaced[unpaced.index("-b") + 1] == "0" and "--bidir" in unpaced
    b = iperf2.udp_client_argv(target="x", port=5001, duration=2, omit=1, interval=0.5, size=64, streams=2,
                               mode="bidir", rate_bps=None)
    assert b[b.index("-b") + 1] == "1000000000000" and "--full-duplex" in b and b[b.index("-t") + 1] == "3"
    s = iperf2.udp_server_argv(port=5001, interval=0.5, size=64, lifetime=20, window=212992)
    assert s[:5] == ["env", "TZ=UTC0", "iperf", "-s", "-u"] and s[s.index("-w") + 1] == "212992"


def test_udp_counters_that_tell_where_datagrams_were_lost():
    w = watched(parse_snmp(fixture_text("proc", "net_snmp.txt")))
    assert {k: w[k] for k in ("udp.in_datagrams", "udp.out_datagrams", "udp.sndbuf_errors", "udp.rcvbuf_errors",
                              "udp.no_ports", "ip.reasm_fails")} == {
        "udp.in_datagrams": 53, "udp.out_datagrams": 54, "udp.sndbuf_errors": 0, "udp.rcvbuf_errors": 0,
        "udp.no_ports": 0, "ip.reasm_fails": 0}


def test_a_bound_udp_socket_is_a_ready_udp_server():
    table = ("   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref"
             " pointer drops\n"
             " 7537: 00000000:1389 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 404923 2 "
             "000000009c95dadc 0\n"
             " 7538: 0200CE0A:1451 0100CE0A:9C40 01 00000000:00000000 00:00000000 00000000     0        0 404924 2 "
             "000000009c95dadd 0\n")
    assert bound_udp(table) == {5001: {404923}}     # (recorded in nbF-b with iperf -s -u -p 5001; the connected
                                                    # row is a made-up second socket: state 01 is not "bound")


def test_udp_ceiling_of_fragmented_datagrams():
    # 8000 B: 8008 bytes of UDP split 5 x 1480 + 608 -> L3 packets 5 x 1500 + 628
    assert L.udp_fragments(8000) == [1500] * 5 + [628]
    c = L.udp(1e9, 1500, payload=8000)
    wire = 5 * (1500 + 38) + (628 + 38)                  # + Ethernet 14, FCS 4, preamble 8, IFG 12 each
    assert c.fragments == 6 and c.goodput_bps == pytest.approx(1e9 / (wire * 8) * 8000 * 8)
    assert L.udp(1e9, 1500, payload=1472).fragments is None            # fits one packet
    assert L.udp_fragments(8000, 1500, 6) == [1496] * 5 + [816]          # + 8-byte fragment header, 1448 per
    with pytest.raises(L.ModelError, match="1..65507"):
        L.udp(1e9, 1500, payload=65508)


def test_fragment_memory_held_by_incomplete_datagrams():
    assert fragment_memory(fixture_text("proc", "net_sockstat.txt")) == 0
    # recorded after fragments were dropped: the reassembly memory is over ipfrag_high_thresh (4 MiB)
    assert fragment_memory(fixture_text("proc", "net_sockstat_frag_held.txt")) == 4195712
    assert fragment_memory("TCP: inuse 0\n") is None
