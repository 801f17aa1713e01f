"""nbperf's argv builders and its parser, on output recorded from the real engine
(tests/fixtures/nbperf/1.0.0, see its README for the commands)."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections import defaultdict
from pathlib import Path

import pytest

from nicbench.core.errors import NicbenchError, ToolError
from nicbench.tools import nbperf

FIX = Path(__file__).parent.parent / "fixtures" / "nbperf" / "1.0.0"


def text(name: str) -> str:
    p = FIX / name
    return p.read_text() if p.exists() else ""


def client(name: str) -> nbperf.ClientRun:
    return nbperf.parse_client(text(f"{name}.client.out"), text(f"{name}.client.err"))


def server(name: str) -> nbperf.ServerRun:
    return nbperf.parse_server(text(f"{name}.server.out"), text(f"{name}.server.err"))


def per_conn(samples, field: str) -> dict[int, int]:
    out: dict[int, int] = defaultdict(int)
    for s in samples:
        out[s.conn] += getattr(s, field)
    return dict(out)


# ------------------------------------------------------------------ good runs


def test_tcp_tx_client_and_server_agree_byte_for_byte():
    c, s = client("tcp-tx"), server("tcp-tx")
    assert (c.version, c.test, c.proto, c.direction, c.io_size, c.conns, c.threads) == \
        ("1.0.0", "fx-tx", "tcp", "tx", 131072, 3, 2)
    assert c.ok and c.summary.peer_rx_bytes == c.summary.tx_bytes > 0
    sess = nbperf.check_session(s, c.session)
    assert sess.rx_bytes == sess.client_tx_bytes == c.summary.tx_bytes
    # the interval lines add up to each connection's totals, on both ends
    ends_c = {e.conn: e for e in c.ends}
    ends_s = {e.conn: e for e in s.ends if e.session == c.session}
    assert per_conn(c.samples, "tx_bytes") == {i: e.tx_bytes for i, e in ends_c.items()}
    assert per_conn(s.samples, "rx_bytes") == {i: e.rx_bytes for i, e in ends_s.items()}
    assert {i: e.rx_bytes for i, e in ends_s.items()} == {i: e.tx_bytes for i, e in ends_c.items()}


def test_intervals_are_absolute_contiguous_and_start_at_the_start():
    c = client("tcp-tx")
    by_conn = defaultdict(list)
    for smp in c.samples:
        by_conn[smp.conn].append(smp)
    assert set(by_conn) == {0, 1, 2}
    for ss in by_conn.values():
        assert ss[0].t0 == c.start                       # boundaries anchored at the absolute start
        for a, b in zip(ss, ss[1:], strict=False):
            assert b.t0 == a.t1 and a.t0 < a.t1          # no gap, no overlap
        assert abs(ss[-1].t1 - (c.start + c.duration)) < 0.5
        # a boundary is read within a few ms of start + k * interval
        for k, smp in enumerate(ss[:-1], start=1):
            assert 0 <= smp.t1 - (c.start + k * c.interval) < 0.05
    assert c.start > 1.7e9                               # CLOCK_REALTIME, not a monotonic clock


def test_tcp_info_and_thread_cpu_are_read():
    c = client("tcp-tx")
    tcp = [smp.tcp for smp in c.samples if smp.tcp]
    assert len(tcp) == len(c.samples)
    assert all(t.snd_mss > 0 and t.snd_cwnd > 0 for t in tcp)
    assert sum(t.retrans or 0 for t in tcp if t.retrans is not None) <= max(t.total_retrans for t in tcp) * 3
    assert {t.thread for t in c.cpu} == {0, 1}
    for th in (0, 1):
        cum = [t.utime + t.stime for t in c.cpu if t.thread == th]
        assert cum == sorted(cum) and cum[-1] > 0        # cumulative seconds
    assert {t.cpu for t in c.summary.threads} == set(c.cpus)


def test_rx_direction_truth_is_the_clients_receive_side():
    c, s = client("tcp-rx-sendfile-trunc"), server("tcp-rx-sendfile-trunc")
    assert (c.direction, c.send, c.recv) == ("rx", "sendfile", "trunc")
    assert c.summary.tx_bytes == 0 and c.summary.rx_bytes == c.summary.peer_tx_bytes > 0
    truth = nbperf.receiver_samples(c, s)
    assert {x.side for x in truth} == {"client"}
    assert sum(x.rx_bytes for x in truth) == c.summary.rx_bytes
    # the server sent: its first sends are the achieved start
    sk = nbperf.start_skew([c], s)
    assert 0 <= sk.late_max < 0.05 and sk.skew >= 0
    with pytest.raises(ToolError, match="server's output is needed"):
        nbperf.start_skew([c])


def test_bidir_truth_takes_both_receivers():
    c, s = client("tcp-bidir"), server("tcp-bidir")
    truth = nbperf.receiver_samples(c, s)
    assert {x.side for x in truth} == {"client", "server"}
    from_server = sum(x.rx_bytes for x in truth if x.side == "client")
    from_client = sum(x.rx_bytes for x in truth if x.side == "server")
    assert from_server == c.summary.peer_tx_bytes and from_client == c.summary.tx_bytes
    assert from_server > 0 and from_client > 0
    assert truth == tuple(sorted(truth, key=lambda x: (x.t0, x.side, x.conn)))


def test_zerocopy_completions_are_all_accounted():
    c = client("tcp-zerocopy")
    [e] = c.ends
    assert e.zerocopy is not None and e.zerocopy.sends == e.zerocopy.completed > 0
    assert e.zerocopy.copied == e.zerocopy.sends     # veth delivers locally: the kernel copies


def test_udp_loss_and_jitter_come_from_the_receiver():
    c, s = client("udp-tx"), server("udp-tx")
    assert c.proto == "udp" and c.rate_bps == 50_000_000
    for e in (x for x in s.ends if x.session == c.session):
        u = e.udp
        assert u is not None and u.peer_tx_packets is not None and u.lost is not None
        assert u.lost == u.peer_tx_packets - u.rx_packets >= 0
        assert u.jitter_us >= 0 and u.bad == 0
        assert e.rx_bytes == u.rx_packets * 1400
        sent = next(x for x in c.ends if x.conn == e.conn).udp
        assert sent is not None and sent.tx_packets == u.peer_tx_packets
        # paced: 50 Mbit/s of 1400-byte datagrams for 2 s, within a couple of datagrams
        assert abs(sent.tx_packets - 50e6 * 2 / (1400 * 8)) <= 2
    rx_intervals = [x.udp for x in s.samples if x.udp]
    assert sum(u.rx_packets for u in rx_intervals) == sum(e.udp.rx_packets for e in s.ends if e.udp)


def test_udp_bidir_both_ends_report_loss():
    c, s = client("udp-bidir"), server("udp-bidir")
    [ce] = c.ends
    [se] = [e for e in s.ends if e.session == c.session]
    assert ce.udp and se.udp and ce.udp.lost is not None and se.udp.lost is not None
    assert ce.udp.peer_tx_packets == se.udp.tx_packets and se.udp.peer_tx_packets == ce.udp.tx_packets


def test_two_clients_one_start_and_one_server():
    a, b = client("two-clients.a"), client("two-clients.b")
    s = server("two-clients")
    assert a.start == b.start and a.session != b.session
    assert {x.session for x in s.sessions} == {a.session, b.session}
    assert all(x.status == "ok" for x in s.sessions) and s.status == "ok"
    sk = nbperf.start_skew([a, b])
    assert sk.first >= a.start and sk.skew < 0.001      # exact alignment: well under 1 ms
    # over both clients at least each one's own (the engine's figure is from ns,
    # ours from the printed microseconds: 2 us of rounding allowed)
    assert sk.skew >= max(a.summary.start_skew or 0, b.summary.start_skew or 0) - 2e-6
    assert a.summary.rt_start == b.summary.rt_start == "on"


def test_start_skew_refuses_clients_of_different_starts():
    a, c = client("two-clients.a"), client("tcp-tx")
    with pytest.raises(ToolError, match="different start"):
        nbperf.start_skew([a, c])


# ------------------------------------------------------------------ failures


def test_killed_client_fails_its_session_on_the_server():
    with pytest.raises(ToolError, match="printed no result"):
        client("killed-client")
    s = server("killed-client")
    assert s.status == "error" and "went away" in s.error
    [sess] = s.sessions
    assert sess.status == "error" and sess.client_tx_bytes is None
    with pytest.raises(ToolError, match="went away"):
        nbperf.check_session(s, sess.session)


def test_killed_server_fails_the_client_with_one_line():
    err = text("killed-server.client.err")
    assert len(err.splitlines()) == 1
    with pytest.raises(ToolError, match="reset by peer"):
        client("killed-server")
    s = server("killed-server")                          # cut: no end line, session never ended
    assert s.status is None and s.sessions[0].status is None
    with pytest.raises(ToolError, match="ends before the session"):
        nbperf.check_session(s, s.sessions[0].session)


def test_sigterm_stops_the_client_cleanly_but_not_as_a_result():
    out = text("sigterm-client.client.out")
    assert '"status":"stopped"' in out.splitlines()[-1]  # the final line is printed
    with pytest.raises(ToolError, match="stopped by SIGTERM"):
        client("sigterm-client")
    assert server("sigterm-idle").status == "ok"


def test_foreign_peers():
    msg = nbperf.error_of(text("iperf3-server.client.err"))
    assert msg and "not nbperf's handshake" in msg and "iperf3" in msg
    s = server("iperf3-client")
    assert s.status == "ok" and len(s.rejects) == 1 and "not an nbperf client" in s.rejects[0].reason


@pytest.mark.parametrize("name, words", [
    ("bad-option", "unknown option --bogus"), ("bad-io-zero", "--io 0"), ("bad-io-big", "--io 8M"),
    ("bad-start-past", "in the past"), ("bad-start-far", "at most 60 s"),
    ("bad-fd-limit", "need 1022 file descriptors")])
def test_bad_input_is_one_line(name, words):
    err = text(f"{name}.client.err")
    assert len(err.splitlines()) == 1
    msg = nbperf.error_of(err)
    assert msg is not None and words in msg
    assert not (FIX / f"{name}.client.out").exists()       # nothing was printed: nothing started


# ------------------------------------------------------------------ robustness


def test_a_line_cut_by_a_kill_is_tolerated_but_garbage_inside_is_not():
    out = text("tcp-tx.server.out")
    cut = out.rstrip("\n")[:-20]                            # the last line, cut mid-way
    assert nbperf.parse_server(cut).sessions
    lines = out.splitlines()
    lines.insert(3, '{"event": "interval", "side"')
    with pytest.raises(ToolError, match="line 4 is not JSON"):
        nbperf.parse_server("\n".join(lines))
    with pytest.raises(ToolError, match="garbles a field"):
        nbperf.parse_client(text("tcp-tx.client.out").replace('"tx_bytes":', '"tx_bytez":', 1))


@pytest.mark.parametrize("name", ["tcp-tx.client.out", "tcp-bidir.server.out", "udp-tx.server.out",
                                  "killed-client.server.out", "two-clients.a.client.out"])
def test_truncated_output_raises_only_nicbench_errors(name):
    out = text(name)
    parse = nbperf.parse_client if ".client." in name else nbperf.parse_server
    for n in range(0, len(out), max(1, len(out) // 97)):
        with contextlib.suppress(NicbenchError):
            parse(out[:n])


def test_no_output_at_all():
    with pytest.raises(ToolError, match="never listened"):
        nbperf.parse_server("", "")
    with pytest.raises(ToolError, match="address already in use"):
        nbperf.parse_server("", "nbperf: error: cannot listen on :: port 5301: address already in use\n")


# ------------------------------------------------------------------ argv


def test_argv_builders():
    exe = "/x/nbperf"
    assert nbperf.server_argv(exe, port=5301, until=1795398000.5, clients=3, cpus=[0, 1]) == [
        exe, "server", "--port", "5301", "--until", "1795398000.500000", "--clients", "3", "--cpus", "0,1"]
    with pytest.raises(ValueError):
        nbperf.server_argv(exe, port=1, until=1.0, lifetime=2.0)
    argv = nbperf.client_argv(exe, server="10.0.0.1", port=5301, start=1795398000.123456, duration=10,
                              conns=12, direction="bidir", io_size=512, grace=1.5, nodelay=True, send="zerocopy",
                              recv="trunc", congestion="cubic", sndbuf=1 << 20, test="p3")
    assert argv[:8] == [exe, "client", "--server", "10.0.0.1", "--port", "5301", "--start", "1795398000.123456"]
    for pair in (["--conns", "12"], ["--dir", "bidir"], ["--io", "512"], ["--grace", "1.5"], ["--send", "zerocopy"],
                 ["--recv", "trunc"], ["--congestion", "cubic"], ["--sndbuf", "1048576"], ["--test", "p3"]):
        i = argv.index(pair[0])
        assert argv[i:i + 2] == pair
    assert "--nodelay" in argv and "--rate" not in argv and "--no-rt-start" not in argv
    assert nbperf.client_argv(exe, server="h", port=1, start=1.0, duration=1, rt_start=False)[-1] == "--no-rt-start"
    assert nbperf.server_argv(exe, port=1, lifetime=3, rt_start=False)[-1] == "--no-rt-start"


@pytest.mark.skipif(nbperf.binary() is None, reason="nbperf is not built (scripts/install.sh)")
def test_the_engine_accepts_every_option_the_builder_writes():
    """A start in the past is refused only after every option was parsed, so
    the engine's answer proves it took them all -- and nothing is started."""
    exe = nbperf.binary()
    assert exe
    argv = nbperf.client_argv(exe, server="127.0.0.1", port=9, start=time.time() - 5, duration=1, conns=2,
                              direction="rx", io_size=4096, grace=1, threads=1, cpus=[0], sndbuf=65536,
                              rcvbuf=65536, congestion="cubic", nodelay=True, mss=1000, busy_poll_us=0,
                              send="sendfile", recv="trunc", test="t", interval=0.5, rt_start=False)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "in the past" in (nbperf.error_of(r.stderr) or ""), r.stderr
    udp = nbperf.client_argv(exe, server="127.0.0.1", port=9, start=time.time() - 5, duration=1, proto="udp",
                             io_size=1400, rate_bps=1e8)
    r = subprocess.run(udp, capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "in the past" in r.stderr, r.stderr
    r = subprocess.run(nbperf.server_argv(exe, port=9, until=time.time() - 1), capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 2 and "in the past" in r.stderr
