"""nbperf end to end (root), on namespaces of its own.

A server namespace and two client namespaces joined by a bridge (``nbB-*``,
10.202.0.0/25); the server's link is shaped as nicbench shapes a lab link
(GSO/TSO off on every port, a tbf per direction with nicbench's rate and
burst formulas).  A second, unshaped veth joins the server and the second
client directly (10.202.0.128/30) for the 1,000-connection test: through a
300 Mbit/s bottleneck, TCP itself starves some of 1,000 connections for
seconds (RTO backoff), which would test TCP, not the engine.  Run it alone
(a shared development machine: under ``flock /tmp/nicbench-load.lock``; the
test takes no lock itself, so it cannot deadlock under one):

    .venv/bin/python -m pytest -q -m lab tests/e2e/test_nbperf_engine.py
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest
from helpers import alive, finish

from nicbench.lab.topology import tbf_burst, tbf_rate
from nicbench.tools import nbperf

pytestmark = pytest.mark.lab
TOOLS = ("nbperf", "iperf3")      # none may outlive a test (conftest.py checks)

PREFIX = "nbB-e2e"
SUBNET = "10.202.0"
MTU = 1500
SPEED = 300e6                     # the server's link, bits/s on the wire, both directions
HEADERS = 14 + 20 + 32            # Ethernet + IPv4 + TCP with timestamps: what rx_bytes counts per segment
MSS = MTU - 20 - 32


@dataclass(frozen=True)
class Lab:
    exe: str
    server_ns: str
    server_ip: str
    clients: tuple[str, ...]      # client namespaces
    direct_ip: str                # the server's end of the unshaped link to clients[1]


def sh(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if check and r.returncode:
        raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")
    return r


def _teardown(names: Sequence[str]) -> None:
    for ns in names:
        for pid in sh("ip", "netns", "pids", ns, check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        sh("ip", "netns", "del", ns, check=False)


@pytest.fixture(scope="module")
def lab() -> Iterator[Lab]:
    exe = nbperf.binary()
    if exe is None:
        pytest.fail("nbperf is not built: run scripts/install.sh (the test command builds it)")
    sw, hosts = f"{PREFIX}-sw", {"srv": 1, "c1": 2, "c2": 3}
    names = [sw, *(f"{PREFIX}-{h}" for h in hosts)]
    _teardown(names)
    try:
        sh("ip", "netns", "add", sw)
        sh("ip", "-n", sw, "link", "add", "br0", "type", "bridge", "stp_state", "0")
        sh("ip", "-n", sw, "link", "set", "lo", "up")
        for h, n in hosts.items():
            ns = f"{PREFIX}-{h}"
            sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", "eth0", "netns", ns, "type", "veth", "peer", "name", f"p-{h}", "netns", sw)
            sh("ip", "-n", sw, "link", "set", f"p-{h}", "mtu", str(MTU), "master", "br0", "up")
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "set", "eth0", "mtu", str(MTU), "up")
            sh("ip", "-n", ns, "addr", "add", f"{SUBNET}.{n}/25", "dev", "eth0")
        sh("ip", "-n", sw, "link", "set", "br0", "up")
        for knob in ("iptables", "ip6tables", "arptables"):
            sh("ip", "netns", "exec", sw, "sysctl", "-qw", f"net.bridge.bridge-nf-call-{knob}=0", check=False)
        # shaped as nicbench shapes (lab/topology.py): wire-sized frames, one tbf per direction
        for h in hosts:
            sh("ip", "netns", "exec", f"{PREFIX}-{h}", "ethtool", "-K", "eth0", "tso", "off", "gso", "off")
            sh("ip", "netns", "exec", sw, "ethtool", "-K", f"p-{h}", "tso", "off", "gso", "off")
        for ns, dev in ((f"{PREFIX}-srv", "eth0"), (sw, "p-srv")):
            sh("tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", f"{tbf_rate(SPEED, MTU)}bit",
               "burst", str(tbf_burst(SPEED, MTU)), "latency", "10ms")
        srv, c2 = f"{PREFIX}-srv", f"{PREFIX}-c2"
        sh("ip", "link", "add", "d0", "netns", srv, "type", "veth", "peer", "name", "d0", "netns", c2)
        for ns, n in ((srv, 129), (c2, 130)):
            sh("ip", "-n", ns, "link", "set", "d0", "mtu", str(MTU), "up")
            sh("ip", "-n", ns, "addr", "add", f"{SUBNET}.{n}/30", "dev", "d0")
        # every address answers before the first test (ARP, bridge learning)
        for h in ("c1", "c2"):
            sh("ip", "netns", "exec", f"{PREFIX}-{h}", "ping", "-c", "1", "-W", "2", f"{SUBNET}.1")
        sh("ip", "netns", "exec", c2, "ping", "-c", "1", "-W", "2", f"{SUBNET}.129")
        yield Lab(exe, srv, f"{SUBNET}.1", (f"{PREFIX}-c1", c2), f"{SUBNET}.129")
    finally:
        _teardown(names)


# ------------------------------------------------------------------ helpers


def spawn(ns: str, argv: list[str], **kw) -> subprocess.Popen:
    """``ip netns exec`` execs the command: the Popen's pid is the engine's own."""
    return subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)


def server(lab: Lab, *, clients: int, lifetime: float, port: int = 5301) -> subprocess.Popen:
    p = spawn(lab.server_ns, nbperf.server_argv(lab.exe, port=port, lifetime=lifetime, clients=clients))
    assert p.stdout is not None
    first = p.stdout.readline()           # listening: the port is bound
    assert '"listening"' in first, first + (p.stderr.read() if p.stderr else "")
    p.first_line = first                  # type: ignore[attr-defined]
    return p


def server_output(p: subprocess.Popen, timeout: float) -> tuple[int, str, str]:
    rc, out, err = finish(p, timeout)
    return rc, p.first_line + out, err    # type: ignore[attr-defined]


def one_line(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("nbperf: error: "), err
    return lines[0]


def counters(ns: str) -> tuple[int, int]:
    """(eth0 rx_bytes, TCP InSegs) of a namespace."""
    rx = int(sh("ip", "netns", "exec", ns, "cat", "/sys/class/net/eth0/statistics/rx_bytes").stdout)
    snmp = sh("ip", "netns", "exec", ns, "cat", "/proc/net/snmp").stdout.splitlines()
    tcp = [ln.split()[1:] for ln in snmp if ln.startswith("Tcp:")]
    return rx, int(dict(zip(tcp[0], tcp[1], strict=True))["InSegs"])


def run_point(lab: Lab, *, duration: float, conns: int, clients: int = 1, lead: float = 1.0,
              **kw) -> tuple[list[nbperf.ClientRun], nbperf.ServerRun]:
    srv = server(lab, clients=clients, lifetime=lead + duration + 15)
    start = time.time() + lead
    procs = [spawn(ns, nbperf.client_argv(lab.exe, server=lab.server_ip, port=5301, start=start, duration=duration,
                                          conns=conns, test=f"e2e{i}", **kw))
             for i, ns in enumerate(lab.clients[:clients])]
    results = [finish(p, lead + duration + 10) for p in procs]
    src, sout, serr = server_output(srv, 10)
    for rc, _, err in results:
        assert rc == 0, err
    assert src == 0, serr
    runs = [nbperf.parse_client(out, err) for _, out, err in results]
    return runs, nbperf.parse_server(sout, serr)


# ------------------------------------------------------------------ tests


def test_receiver_bytes_match_the_interface_counters(lab):
    """What nbperf's server received is what its interface delivered, less
    exactly the framing of each TCP segment (the link is shaped: GSO off,
    so every segment is one wire frame)."""
    rx0, segs0 = counters(lab.server_ns)
    [c], s = run_point(lab, duration=3, conns=4)
    rx1, segs1 = counters(lab.server_ns)
    sess = nbperf.check_session(s, c.session)
    payload = sess.rx_bytes
    assert payload == c.summary.tx_bytes > 0
    wire = rx1 - rx0
    # exact accounting: payload + the headers of every segment; beyond that
    # only segments the sender sent twice (a retransmission whose original
    # had arrived, a tail loss probe) and a few KB of handshakes and ARP
    retrans = sum(e.tcp.total_retrans for e in c.ends if e.tcp)
    extra = wire - (payload + (segs1 - segs0) * HEADERS)
    assert 0 <= extra < retrans * MSS + 20_000, (wire, payload, segs1 - segs0, retrans)
    # and the overhead is that of full segments, not more
    assert (MSS + HEADERS) / MSS <= wire / payload < (MSS + HEADERS) / MSS * 1.002


def _iperf3_steady_rate(data: dict, omit: float) -> float:
    """The receiver's bits/s after ``omit`` s, from the server's own intervals."""
    ivs = data["server_output_json"]["intervals"]
    kept = [iv["sum"] for iv in ivs if iv["sum"]["start"] >= omit - 1e-6]
    return sum(k["bytes"] for k in kept) * 8 / sum(k["end"] - k["start"] for k in kept)


def _nbperf_rates(lab: Lab, duration: float, conns: int) -> tuple[float, float]:
    """(receiver bits/s after the first second, over the whole test)."""
    [c], s = run_point(lab, duration=duration, conns=conns)
    mine = nbperf.receiver_samples(c, s)
    end = c.start + duration
    steady = [x for x in mine if x.t0 >= c.start + 1 - 1e-6 and x.t1 <= end + 0.01]
    rate = sum(x.rx_bytes for x in steady) * 8 / (max(x.t1 for x in steady) - (c.start + 1))
    # the total over the test's time, as iperf3's receiver counts it: what
    # drains after the senders stopped (their socket buffers) is not in it
    total = sum(x.rx_bytes for x in mine if x.t1 <= end + 0.01) * 8 / duration
    return rate, total


def _iperf3_rates(lab: Lab, duration: float, conns: int) -> tuple[float, float]:
    srv = spawn(lab.server_ns, ["iperf3", "-s", "-1", "-J", "-p", "5201"])
    time.sleep(0.3)
    cli = spawn(lab.clients[0], ["iperf3", "-c", lab.server_ip, "-p", "5201", "-t", f"{duration:g}", "-P",
                                 str(conns), "-l", "128K", "-i", "1", "-J", "--get-server-output"])
    rc, out, err = finish(cli, duration + 20)
    finish(srv, 10)
    assert rc == 0, err
    data = json.loads(out)
    return _iperf3_steady_rate(data, 1), data["end"]["sum_received"]["bits_per_second"]


def test_udp_paced_through_the_shaper_counts_every_datagram(lab):
    """Two flows paced at 100 Mbit/s through the 300 Mbit/s link: the sender
    keeps its pace to the datagram, the receiver's count is exactly what its
    interface delivered (one 1,514-byte frame per 1,472-byte datagram) and
    what was sent less what it reports lost.  (Driven past the link, this lab
    pushes back on the sending socket -- EAGAIN, no loss -- so loss itself is
    checked on recorded output, tests/unit/test_nbperf_parse.py.)"""
    rx0, _ = counters(lab.server_ns)
    [c], s = run_point(lab, duration=3, conns=2, proto="udp", io_size=1472, rate_bps=100e6)
    rx1, _ = counters(lab.server_ns)
    ends = [e for e in s.ends if e.session == c.session]
    got = sum(e.udp.rx_packets for e in ends if e.udp)
    sent = sum(e.udp.tx_packets for e in c.ends if e.udp)
    lost = sum(e.udp.lost or 0 for e in ends if e.udp)
    assert got + lost == sent and abs(sent - 2 * 100e6 * 3 / (1472 * 8)) <= 4    # paced to the datagram
    assert 0 <= (rx1 - rx0) - got * (1472 + 8 + 20 + 14) < 20_000, (rx1 - rx0, got)
    steady = [x for x in nbperf.receiver_samples(c, s) if x.t0 >= c.start + 1 - 1e-6 and x.t1 <= c.start + 3.01]
    rate = sum(x.rx_bytes for x in steady) * 8 / (max(x.t1 for x in steady) - (c.start + 1))
    assert rate == pytest.approx(2 * 100e6 * (1 - lost / sent), rel=0.02), rate
    assert all(e.udp and e.udp.jitter_us > 0 and e.udp.bad == 0 for e in ends)


def test_totals_agree_with_iperf3_on_the_same_shaped_point(lab):
    """Alternated, three pairs, medians: the shaped link's own rate moves by
    1-2 % from run to run when other programs load this 2-CPU machine (tbf's
    timer fires late and loses tokens), more than the 1 % asked of the
    engines."""
    duration, conns = 4, 4
    nb, ip3 = [], []
    for _ in range(3):
        nb.append(_nbperf_rates(lab, duration, conns))
        ip3.append(_iperf3_rates(lab, duration, conns))
    for k, what in enumerate(("steady rate", "total")):
        a, b = statistics.median(x[k] for x in nb), statistics.median(x[k] for x in ip3)
        # the link's own rate moves 1-2 % run to run on a quiet machine, more with other
        # work on it (the 1 % goal is a bench's, measured side by side): here the two
        # engines must agree on what one shaped link carried, as a double count or a
        # lost connection would not
        print(f"{what}: nbperf / iperf3 = {a / b:.4f}")
        assert a == pytest.approx(b, rel=0.05), (what, nb, ip3)


def test_two_clients_start_within_a_millisecond(lab):
    runs, s = run_point(lab, duration=1, conns=2, clients=2, io_size=16384)
    skew = nbperf.start_skew(runs)
    assert skew.skew < 0.001, skew
    assert 0 <= skew.late_max < 0.002, skew
    assert all(x.status == "ok" for x in s.sessions) and len(s.sessions) == 2


def _killed(lab: Lab, victim: str, sig: int) -> tuple[int, str, int, str]:
    srv = server(lab, clients=1, lifetime=20)
    start = time.time() + 0.5
    cli = spawn(lab.clients[0], nbperf.client_argv(lab.exe, server=lab.server_ip, port=5301, start=start,
                                                   duration=6, conns=3))
    time.sleep(2.0)
    (cli if victim == "client" else srv).send_signal(sig)
    t0 = time.monotonic()
    crc, _, cerr = finish(cli, 10)
    src, _, serr = server_output(srv, 10)
    assert time.monotonic() - t0 < 3, "the other side took long to notice"
    assert not alive(cli.pid) and not alive(srv.pid)
    return crc, cerr, src, serr


def test_a_killed_client_fails_cleanly_on_both_sides(lab):
    crc, cerr, src, serr = _killed(lab, "client", signal.SIGKILL)
    assert crc == -signal.SIGKILL and cerr == ""
    # a sender finds its killed peer's RST as ECONNRESET or, writing after it, EPIPE: both are that
    assert src == 1 and re.search(r"went away|reset by peer|Broken pipe", one_line(serr)), serr


def test_a_killed_server_fails_cleanly_on_both_sides(lab):
    crc, cerr, src, serr = _killed(lab, "server", signal.SIGKILL)
    assert src == -signal.SIGKILL and serr == ""
    assert crc == 1 and re.search(r"reset by peer|went away|Broken pipe", one_line(cerr)), cerr


@pytest.mark.parametrize("victim", ["client", "server"])
def test_sigterm_is_clean_and_fails_the_test_on_both_sides(lab, victim):
    crc, cerr, src, serr = _killed(lab, victim, signal.SIGTERM)
    stopped, other = (crc, src) if victim == "client" else (src, crc)
    assert stopped == 3 and other == 1
    assert "stopped" in one_line(cerr if victim == "client" else serr)
    one_line(serr if victim == "client" else cerr)


def test_a_thousand_connections_from_one_client_host(lab):
    def more_fds() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (4096, 4096))

    srv = server(lab, clients=1, lifetime=30)
    start = time.time() + 2
    cli = spawn(lab.clients[1], nbperf.client_argv(lab.exe, server=lab.direct_ip, port=5301, start=start,
                                                   duration=3, conns=1000, io_size=16384),
                preexec_fn=more_fds)
    crc, out, err = finish(cli, 20)
    src, sout, serr = server_output(srv, 10)
    assert crc == 0 and src == 0, err + serr
    c = nbperf.parse_client(out, err)
    s = nbperf.parse_server(sout, serr)
    ends = [e for e in s.ends if e.session == c.session]
    assert len(ends) == 1000 and all(e.status == "ok" and e.rx_bytes > 0 for e in ends)
    assert c.fd_limit >= 1000 and nbperf.check_session(s, c.session).rx_bytes == c.summary.tx_bytes


def test_every_send_and_receive_mode_moves_data(lab):
    """Unshaped (the direct link), one second each: every mode ends with both
    ends agreeing byte for byte (the engine checks), and none is far slower
    than plain send -- a sendfile that sent 1 KB per call once was 100x."""
    rates = {}
    for send, recv in (("send", "copy"), ("sendmsg", "trunc"), ("zerocopy", "copy"), ("sendfile", "trunc")):
        srv = server(lab, clients=1, lifetime=10)
        p = spawn(lab.clients[1], nbperf.client_argv(lab.exe, server=lab.direct_ip, port=5301, start=time.time() + 0.5,
                                                     duration=1, conns=2, send=send, recv=recv))
        rc, out, err = finish(p, 10)
        src, sout, serr = server_output(srv, 10)
        assert rc == 0 and src == 0, err + serr
        c = nbperf.parse_client(out, err)
        assert nbperf.check_session(nbperf.parse_server(sout, serr), c.session).rx_bytes == c.summary.tx_bytes
        if send == "zerocopy":
            zc = [e.zerocopy for e in c.ends]
            assert all(z is not None and z.completed == z.sends > 0 for z in zc)
        rates[send] = c.summary.tx_bytes / c.duration
    assert all(r > 0.25 * rates["send"] for r in rates.values()), rates


def test_the_fd_limit_is_checked_up_front(lab):
    def few_fds() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    t0 = time.monotonic()
    cli = spawn(lab.clients[0], nbperf.client_argv(lab.exe, server=lab.server_ip, port=5301, start=time.time() + 2,
                                                   duration=3, conns=1000), preexec_fn=few_fds)
    rc, out, err = finish(cli, 10)
    assert rc == 2 and out == "" and time.monotonic() - t0 < 1
    assert re.search(r"1000 connections need \d+ file descriptors; the limit is 256", one_line(err))


BAD = [(["--bogus"], "unknown option --bogus"), (["--io", "0"], "--io 0"), (["--io", "5M"], "--io 5M"),
       (["--proto", "udp", "--io", "65508"], "--io 65508"), (["--start", "PAST"], "in the past"),
       (["--start", "FAR"], "at most 60 s"), (["--dir", "sideways"], "--dir sideways")]


@pytest.mark.parametrize("extra, words", BAD)
def test_bad_input_is_one_line_and_starts_nothing(lab, extra, words):
    srv = server(lab, clients=1, lifetime=5)
    start = {"PAST": time.time() - 3, "FAR": time.time() + 75}
    argv = nbperf.client_argv(lab.exe, server=lab.server_ip, port=5301, start=time.time() + 1, duration=1)
    if extra[0] == "--start":
        argv[argv.index("--start") + 1] = f"{start[extra[1]]:.6f}"
    else:
        argv += extra
    rc, out, err = finish(spawn(lab.clients[0], argv), 5)
    assert rc == 2 and out == ""
    assert words in one_line(err)
    srv.send_signal(signal.SIGTERM)        # nobody came: an idle server stops cleanly
    src, sout, _ = server_output(srv, 5)
    s = nbperf.parse_server(sout)
    assert src == 0 and s.status == "ok" and s.sessions == () and s.rejects == ()


def test_a_peer_speaking_another_protocol(lab):
    ip3 = spawn(lab.server_ns, ["iperf3", "-s", "-1", "-p", "5301"])
    time.sleep(0.3)
    rc, out, err = finish(spawn(lab.clients[0], nbperf.client_argv(
        lab.exe, server=lab.server_ip, port=5301, start=time.time() + 1, duration=1, conns=4)), 5)
    ip3.kill()
    ip3.communicate()
    assert rc == 1 and "another program (an iperf3 server?)" in one_line(err)
    # the other way round: an iperf3 client against nbperf is turned away, the server carries on
    srv = server(lab, clients=1, lifetime=10)
    ip3c = spawn(lab.clients[0], ["iperf3", "-c", lab.server_ip, "-p", "5301", "-t", "1"])
    irc, _, _ = finish(ip3c, 10)
    assert irc != 0
    crc, cout, cerr = finish(spawn(lab.clients[1], nbperf.client_argv(
        lab.exe, server=lab.server_ip, port=5301, start=time.time() + 0.5, duration=0.5)), 5)
    assert crc == 0, cerr
    c = nbperf.parse_client(cout, cerr)
    src, sout, serr = server_output(srv, 5)
    s = nbperf.parse_server(sout, serr)
    assert src == 0 and len(s.rejects) == 1 and "not an nbperf client" in s.rejects[0].reason
    assert nbperf.check_session(s, c.session).rx_bytes > 0


def test_hard_deadlines_hold_without_a_peer(lab):
    # a server whose clients never come stops at its deadline, with one line
    t0 = time.monotonic()
    srv = server(lab, clients=1, lifetime=1.5)
    src, _, serr = server_output(srv, 5)
    assert src == 1 and "only 0 of 1 clients" in one_line(serr) and time.monotonic() - t0 < 2.5
    # a client whose server stalls (SIGSTOP: no reset, no FIN) gives up at start + duration + grace
    srv = server(lab, clients=1, lifetime=20)
    start = time.time() + 0.5
    cli = spawn(lab.clients[0], nbperf.client_argv(lab.exe, server=lab.server_ip, port=5301, start=start,
                                                   duration=1.5, grace=1, conns=2))
    time.sleep(1.2)
    srv.send_signal(signal.SIGSTOP)
    try:
        rc, _, err = finish(cli, 8)
        ended = time.time()
    finally:
        srv.send_signal(signal.SIGCONT)
    assert rc == 1 and "deadline" in one_line(err)
    assert start + 2.5 <= ended < start + 3.5
    src, _, serr = server_output(srv, 10)
    assert src == 1
    one_line(serr)
