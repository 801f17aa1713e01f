"""Latency engines: parsers on the recorded outputs (tests/fixtures/sockperf/3.7,
irtt/0.9.0, iperf2/2.1.8/bounceback; commands in each README), argv builders,
version checks and bad input.  Expected numbers were read off the fixture
files by hand (awk/sort over the CSV, the JSON's own fields) and are noted."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from nicbench.core.errors import InputError, PreflightError, ToolError
from nicbench.tools import bounceback, irtt, sockperf
from nicbench.tools.rtt import bounded

FX = Path(__file__).resolve().parents[1] / "fixtures"
SP = FX / "sockperf" / "3.7"
IR = FX / "irtt" / "0.9.0"
BB = FX / "iperf2" / "2.1.8" / "bounceback"
US = 1e-6


def approx(x: float, tol: float = 1.5e-9) -> object:
    """Equal to the ns: sockperf's column and its TSC statistics differ by 1 ns at most."""
    return pytest.approx(x, abs=tol)


# ---------------------------------------------------------------- sockperf
def test_sockperf_udp_full_log() -> None:
    r = sockperf.parse_full_log((SP / "pp_udp_m64_mps1000.csv").read_text())
    s = r.summary
    assert not r.halved and r.samples.clock == "process"
    assert len(r.samples) == s.count == 1550 and s.sent == 1550
    # first and last table lines: "0, 2.401883803, 2.401911285, 27.482", "1549, ..., 29.856"
    assert r.samples.rtt[0] == approx(27.482 * US) and r.samples.sent is not None
    assert r.samples.sent[0] == pytest.approx(2.401883803, abs=1e-12)
    assert r.samples.rtt[-1] == approx(29.856 * US)
    assert s.duration == 1.549 and s.rate == pytest.approx(1550 / 1.549)
    assert s.median == approx(29.024 * US) and s.percentiles[99.0] == approx(75.270 * US)
    assert (s.min, s.max) == (approx(20.959 * US), approx(1911.226 * US))
    assert (s.mean, s.stdev) == (approx(38.716 * US), approx(112.289 * US))
    assert s.lost == 0 and dict(s.counters) == {"dropped": 0, "duplicated": 0, "out_of_order": 0}
    assert (r.warmup, r.total_sent, r.total_received) == (0.4, 2001, 2001)
    assert r.params.startswith("--mps=1000 --burst=1 --reply-every=1 --msg-size=64 --time=2")


@pytest.mark.parametrize("name", ["pp_udp_m64_mps1000", "pp_tcp_m64_mps1000_loaded", "pp_udp_m64_mps200_halfrtt",
                                  "ul_udp_m64_mps10000", "pp_tcp_m65536_mps200"])
def test_sockperf_stated_percentiles_follow_its_rank_rule(name: str) -> None:
    """sockperf's percentile p is the sample of rank int(0.5 + p/100 n): the
    parsed samples reproduce every stated percentile, min and max to the ns."""
    r = sockperf.parse_full_log((SP / f"{name}.csv").read_text())
    ordered = sorted(r.samples.rtt)
    n = len(ordered)
    for p, v in r.summary.percentiles.items():
        assert ordered[int(0.5 + p / 100 * n) - 1] == approx(v, 2.5e-9), p
    assert ordered[0] == approx(r.summary.min or 0, 2.5e-9) and ordered[-1] == approx(r.summary.max or 0, 2.5e-9)


def test_sockperf_half_rtt_log_is_doubled() -> None:
    r = sockperf.parse_full_log((SP / "pp_udp_m64_mps200_halfrtt.csv").read_text())
    assert r.halved
    # "0, 2.406010792, 2.406041950, 15.579": latency 15.579 us = RTT/2
    assert r.samples.rtt[0] == approx(31.158 * US)
    assert r.summary.median == approx(2 * 48.145 * US) and r.summary.max == approx(2 * 2848.991 * US)
    assert len(r.samples) == 109


def test_sockperf_under_load_counts_only_answered() -> None:
    r = sockperf.parse_full_log((SP / "ul_udp_m64_mps10000.csv").read_text())
    # [Valid Duration] RunTime=1.520 sec; SentMessages=15201; ReceivedMessages=153
    assert (r.summary.sent, r.summary.count, len(r.samples)) == (15201, 153, 153)
    assert r.summary.rate == pytest.approx(153 / 1.520)
    assert r.samples.rtt[3] == approx(761.184 * US)           # the line "3, ..., 761.184"


def test_sockperf_summary_from_stdout() -> None:
    s, halved = sockperf.parse_summary((SP / "pp_tcp_m65536_mps200.out").read_text())
    full = sockperf.parse_full_log((SP / "pp_tcp_m65536_mps200.csv").read_text())
    assert not halved and s == full.summary and s.count == 310


@pytest.mark.parametrize(("name", "words"), [
    ("err_msg_size_13.out", "argument '-m': Invalid message size: 13 (min: 14)"),
    ("err_time_fraction.out", "argument '-t': Invalid duration: 0.5"),
    ("err_tcp_refused.out", "Can`t connect socket (errno=111 Connection refused)"),
    ("err_udp_no_server.out", "No messages were received from the server"),
    ("err_udp_no_server.csv", "No messages were received from the server"),
])
def test_sockperf_failures_despite_exit_0(name: str, words: str) -> None:
    text = (SP / name).read_text()
    with pytest.raises(ToolError) as e:
        if name.endswith(".csv"):
            sockperf.parse_full_log(text, where="client1")
        else:
            sockperf.check_text(text, where="client1")
    assert words in e.value.message and e.value.message.startswith("sockperf")
    assert "\n" not in e.value.one_line() and "client1" in e.value.one_line()


def test_sockperf_damaged_logs() -> None:
    good = (SP / "pp_udp_m64_mps1000.csv").read_text()
    with pytest.raises(ToolError, match="summary counts 1550"):
        sockperf.parse_full_log(good.replace("1549, 3.950883423, 3.950913279, 29.856\n", ""))
    with pytest.raises(ToolError, match="disagrees with rx - tx"):
        sockperf.parse_full_log(good.replace("2.401911285, 27.482", "2.401911285, 2.482"))
    with pytest.raises(ToolError, match="no per-request table"):
        sockperf.parse_full_log((SP / "pp_udp_m64_mps1000.out").read_text())
    with pytest.raises(ToolError, match="no \\[Total Run\\] line"):
        sockperf.parse_summary("sockperf: == version #3.7-no.git ==\n")


def test_sockperf_argv() -> None:
    argv = sockperf.client_argv(target="10.0.0.1", port=11111, protocol="tcp", size=64, duration=5,
                                log_path="/tmp/x.csv", rate=1000)
    assert argv == ["timeout", "-s", "INT", "-k", "2", "15", "sockperf", "ping-pong", "--tcp", "-i", "10.0.0.1",
                    "-p", "11111", "-m", "64", "-t", "5", "--mps=1000", "--full-rtt", "--full-log", "/tmp/x.csv"]
    assert "--mps=max" in sockperf.client_argv(target="h", port=1, protocol="udp", size=14, duration=1, log_path="l")
    ul = sockperf.client_argv(target="h", port=1, protocol="udp", size=64, duration=2, log_path="l",
                              rate=10000, mode="under-load", reply_every=100)
    assert ul[ul.index("sockperf") + 1] == "under-load" and ul[-2:] == ["--reply-every", "100"]
    srv = sockperf.server_argv(bind="10.0.0.1", port=11112, protocol="tcp", max_size=65536, lifetime=30)
    assert srv == ["timeout", "-s", "INT", "-k", "2", "30", "sockperf", "server", "-i", "10.0.0.1", "-p", "11112",
                   "--tcp", "-m", "65536"]
    assert "-m" not in sockperf.server_argv(bind="h", port=1, protocol="udp", max_size=65507, lifetime=5)


@pytest.mark.parametrize(("protocol", "size", "words"), [
    ("udp", 13, "below its minimum 14 B"), ("tcp", 1, "below its minimum 14 B"),
    ("udp", 65508, "above its maximum 65507 B"), ("tcp", 1048576, "above its maximum 1048575 B")])
def test_sockperf_sizes_out_of_range(protocol: str, size: int, words: str) -> None:
    with pytest.raises(InputError) as e:
        sockperf.client_argv(target="h", port=1, protocol=protocol, size=size, duration=1,  # type: ignore[arg-type]
                             log_path="l")
    assert words in e.value.message and e.value.where == "message_size" and "sockperf" in e.value.message


def test_sockperf_bad_duration_and_mode() -> None:
    for bad in (0.5, 0, True):
        with pytest.raises(InputError, match="whole seconds"):
            sockperf.client_argv(target="h", port=1, protocol="udp", size=64, duration=bad, log_path="l")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="needs a rate"):
        sockperf.client_argv(target="h", port=1, protocol="udp", size=64, duration=1, log_path="l", mode="under-load")


# ---------------------------------------------------------------- irtt
def test_irtt_round_trips() -> None:
    r = irtt.parse((IR / "udp_l64_i10ms.json").read_text())
    s = r.summary
    assert (len(r.samples), r.sent, r.expected, s.lost, dict(r.lost)) == (100, 100, 100, 0, {})
    assert (r.interval, r.duration, r.length) == (0.01, 1.0, 64)
    # round_trips[0]: client mono 9033706 - 8922107 = 111599 ns; server mono
    # 312679463 - 312673883 = 5580 ns; irtt's rtt 111599 - 5580 = 106019 ns
    assert r.client_rtt[0] == pytest.approx(111599e-9, abs=1e-15)
    assert r.server_time is not None and r.server_time[0] == pytest.approx(5580e-9, abs=1e-15)
    assert r.samples.rtt[0] == pytest.approx(106019e-9, abs=1e-15)
    # one-way: server rx wall - client tx wall = 47779 ns; client rx - server tx = 58209 ns
    assert r.send_delay is not None and r.send_delay[0] == pytest.approx(47779e-9, abs=1e-15)
    assert r.receive_delay is not None and r.receive_delay[0] == pytest.approx(58209e-9, abs=1e-15)
    assert r.samples.clock == "epoch" and r.samples.sent is not None
    assert r.samples.sent[0] == pytest.approx(1795398885.677878306, abs=1e-6)
    # stats.rtt: median 166562, min 106019, max 3516586, mean 223088 (ns); duration 991090868 ns
    assert (s.median, s.min, s.max, s.mean) == (166562e-9, 106019e-9, 3516586e-9, 223088e-9)
    assert s.duration == 0.991090868 and s.rate == pytest.approx(100 / 0.991090868)
    # irtt's median: mean of the two middle values, truncated to the ns
    ordered = sorted(round(x * 1e9) for x in r.samples.rtt)
    assert (ordered[49] + ordered[50]) // 2 == 166562
    irtt.check_complete(r)


def test_irtt_without_server_timestamps() -> None:
    r = irtt.parse((IR / "udp_l64_i10ms_nostamps.json").read_text())
    assert r.server_time is None and r.send_delay is None and r.receive_delay is None
    # no server stamps: irtt's rtt is the client's whole time (10396322 - 10288700 = 107622 ns)
    assert r.samples.rtt[0] == r.client_rtt[0] == pytest.approx(107622e-9, abs=1e-15)


def test_irtt_big_packets_and_load() -> None:
    big = irtt.parse((IR / "udp_l65507_i20ms.json").read_text())
    assert (big.length, len(big.samples), big.summary.median) == (65507, 50, 586135e-9)
    loaded = irtt.parse((IR / "udp_l64_i10ms_loaded.json").read_text())
    assert (loaded.sent, loaded.expected) == (98, 100)             # 2 timer misses under load
    irtt.check_complete(loaded)                                     # within the 5 % tolerance


def test_irtt_server_dies_mid_test() -> None:
    r = irtt.parse((IR / "udp_l64_server_dies.json").read_text())
    assert (r.sent, len(r.samples), dict(r.lost), r.summary.lost) == (49, 48, {48: "true"}, 1)
    with pytest.raises(ToolError, match="sent 49 of 100 requests"):
        irtt.check_complete(r, where="client1")


def test_irtt_nothing_answered_is_an_error() -> None:
    with pytest.raises(ToolError, match="none of 1 requests was answered") as e:
        irtt.parse((IR / "udp_l4096_bound_addr.json").read_text(), where="client2")
    assert "client2" in e.value.one_line()
    with pytest.raises(ToolError, match="connection refused"):
        irtt.check_stderr((IR / "err_no_server.out").read_text())


def test_irtt_bad_json() -> None:
    with pytest.raises(ToolError, match="not JSON"):
        irtt.parse("irtt: something\n")
    with pytest.raises(ToolError, match="no version.json_format"):
        irtt.parse("{}")
    text = (IR / "udp_l64_i10ms.json").read_text()
    with pytest.raises(ToolError, match="JSON format 2"):
        irtt.parse(text.replace('"json_format": 1', '"json_format": 2'))
    with pytest.raises(ToolError, match="rtt 106018 ns != client time 111599 - server time 5580"):
        irtt.parse(text.replace('"rtt": 106019', '"rtt": 106018'))


def test_irtt_argv_and_sizes() -> None:
    argv = irtt.client_argv(target="10.0.0.1", size=64, interval=0.001, duration=5, out_path="/r/x.json")
    assert argv == ["timeout", "-s", "INT", "-k", "2", "20.5", "irtt", "client", "-i", "1000000ns",
                    "-d", "5000000000ns", "-l", "64", "--wait=500000000ns", "-Q", "-o", "/r/x.json",
                    "10.0.0.1:2112"]
    busy = irtt.client_argv(target="h", size=64, interval=0.01, duration=1, out_path="x.json", timer="busy")
    assert busy[-2:] == ["--timer=busy", "h:2112"]
    with pytest.raises(InputError, match="unknown timer"):
        irtt.client_argv(target="h", size=64, interval=0.01, duration=1, out_path="x.json", timer="fast")
    assert irtt.server_argv(lifetime=30)[6:] == ["irtt", "server", "-b", ":2112", "-i", "0", "-d", "30000000000ns"]
    with pytest.raises(InputError, match="must end in .json"):
        irtt.client_argv(target="h", size=64, interval=0.01, duration=1, out_path="/r/x")
    for size, words in ((59, "below its minimum 60 B"), (65508, "above its maximum 65507 B")):
        with pytest.raises(InputError, match=words):
            irtt.client_argv(target="h", size=size, interval=0.01, duration=1, out_path="x.json")


# ---------------------------------------------------------------- iperf 2 bounce-back
def test_bounceback_report() -> None:
    r = bounceback.parse((BB / "client_l64_period1ms.txt").read_text())
    assert (r.size, r.hold, r.quickack, r.connect_time) == (64, 0.0, True, pytest.approx(0.26e-3))
    assert r.connected_at == "2026-11-23 01:53:35 (UTC)"
    # "0.0000-1.0000 sec ... 8400=0.043/0.020/4.872/0.183 ms    0  195K/12 us    23439 rps"
    first = r.intervals[0]
    assert (first.start, first.end, first.count, first.retries, first.rps) == (0.0, 1.0, 8400, 0, 23439)
    assert (first.mean, first.min, first.max, first.stdev) == (0.043e-3, 0.020e-3, 4.872e-3, 0.183e-3)
    assert first.tcp_rtt == 12e-6
    assert [i.count for i in r.intervals] == [8400, 7910]
    assert r.total is not None and (r.total.end, r.total.count, r.total.max) == (2.0022, 16310, 5.183e-3)
    s = r.summary
    assert s is not None and s.rate == pytest.approx(16310 / 2.0022) and s.mean == 0.052e-3
    h = r.histogram
    assert h is not None and (h.width, h.count, h.below, h.above, h.outliers) == (1e-4, 16310, 0, 0, 0)
    assert (h.bins[1], h.bins[2], h.bins[52]) == (16067, 84, 1) and sum(h.bins.values()) == 16310
    # the max, 5.183 ms, sits in bin 52 = [5.1, 5.2) ms
    assert h.edges(52) == (0.0051, 0.0052)
    assert h.bounds == {5.0: 0.0001, 95.0: 0.0001, 99.7: 0.003}
    # rank ceil(0.99 * 16310) = 16147: bins 1+2 hold 16067 + 84 = 16151 >= 16147 -> below 200 us
    assert h.upper_bound(99) == 0.0002 and h.upper_bound(100) == 0.0052


def test_bounceback_congest_keeps_only_the_bb_flow() -> None:
    r = bounceback.parse((BB / "client_l64_congest.txt").read_text())
    assert [i.count for i in r.intervals] == [5160, 8230]
    assert r.total is not None and r.total.count == 13400 and r.histogram is not None
    assert r.histogram.bounds[99.7] == pytest.approx(0.0037)


def test_bounceback_single_interval_and_default_bursts() -> None:
    r = bounceback.parse((BB / "client_txstart.txt").read_text())
    assert [i.count for i in r.intervals] == [7490] and r.total is not None and r.total.end == 1.0122
    d = bounceback.parse((BB / "client_default.txt").read_text())
    assert d.size == 100 and [i.count for i in d.intervals] == [10, 10] and d.total is not None
    assert d.histogram is not None and d.histogram.bins == {1: 18, 2: 1, 83: 1}


@pytest.mark.parametrize(("name", "words"), [
    ("err_refused.txt", "tcp connect failed: Connection refused"),
    ("err_l63_client.txt", "tcp bounce-back read failed"),
    ("client_csv.csv", "no BB cnt=avg/min/max/stdev line"),
])
def test_bounceback_failures(name: str, words: str) -> None:
    with pytest.raises(ToolError, match=words):
        bounceback.parse((BB / name).read_text())


def test_bounceback_damaged_histogram() -> None:
    text = (BB / "client_default.txt").read_text()
    with pytest.raises(ToolError, match="bins add up to 19"):
        bounceback.parse(text.replace("=1:18,2:1,83:1", "=1:17,2:1,83:1"))
    killed = "\n".join(ln for ln in text.splitlines() if "0.0000-2.0036" not in ln)
    r = bounceback.parse(killed)
    assert r.total is None and r.summary is None and [i.count for i in r.intervals] == [10, 10]


def test_bounceback_argv_and_sizes() -> None:
    argv = bounceback.client_argv(target="10.0.0.1", size=64, duration=5, rate=1000, start_at=1800000000.25)
    assert argv == ["timeout", "-s", "INT", "-k", "2", "20", "iperf", "-c", "10.0.0.1", "-p", "5001",
                    "--bounceback=1", "--bounceback-period=0.001", "-l", "64", "-t", "5", "-i", "1", "-e",
                    "--txstart-time", "1800000000.250000"]
    b2b = bounceback.client_argv(target="h", size=1024, duration=1, congest="bidir")
    assert "--bounceback-period=0" in b2b and b2b[-1] == "--bounceback-congest=bidir,1"
    assert bounceback.server_argv(lifetime=30)[6:] == ["iperf", "-s", "-p", "5001", "-e", "-l", "131072", "-t", "30"]
    for size, words in ((63, "below its minimum 64 B"), (131073, "above its maximum 131072 B")):
        with pytest.raises(InputError, match=words):
            bounceback.client_argv(target="h", size=size, duration=1)
    with pytest.raises(InputError, match="rate 200000"):
        bounceback.client_argv(target="h", size=64, duration=1, rate=200000)


# ---------------------------------------------------------------- versions, missing engines
@pytest.mark.parametrize(("mod", "fixture", "version"), [
    (sockperf, SP / "version.txt", (3, 7)), (irtt, IR / "version.txt", (0, 9, 0)),
    (bounceback, BB / "version.txt", (2, 1, 8))])
def test_versions_from_real_output(mod: object, fixture: Path, version: tuple[int, ...]) -> None:
    info = mod.info_from(fixture.read_text(), "server")  # type: ignore[attr-defined]
    assert info.version == version


@pytest.mark.parametrize(("mod", "old", "words"), [
    (sockperf, "sockperf, version 3.5-no.git", "sockperf 3.5 is older than 3.6: --full-rtt"),
    (irtt, "irtt version: 0.1.0", "irtt 0.1.0 is older than 0.9.0"),
    (bounceback, "iperf version 2.1.7 (6 June 2022) pthreads", "iperf 2.1.7 is older than 2.1.8"),
])
def test_versions_too_old(mod: object, old: str, words: str) -> None:
    with pytest.raises(PreflightError) as e:
        mod.info_from(old, "client2")  # type: ignore[attr-defined]
    assert words in e.value.message and e.value.where == "client2" and e.value.hint


@pytest.mark.parametrize(("mod", "package"), [(sockperf, "sockperf"), (irtt, "irtt"), (bounceback, "iperf")])
def test_missing_engine_names_the_host(mod: object, package: str) -> None:
    with pytest.raises(PreflightError) as e:
        mod.info_from(None, "client3")  # type: ignore[attr-defined]
    assert e.value.where == "client3" and "is not installed" in e.value.message
    assert e.value.one_line() == (f"nicbench: preflight: client3: {e.value.message} "
                                  f"(hint: apt-get install {package})")
    with pytest.raises(PreflightError, match="cannot read a version"):
        mod.info_from("bash: command output without digits", "client3")  # type: ignore[attr-defined]


def test_bounded() -> None:
    assert bounded(["x", "-y"], 2.5) == ["timeout", "-s", "INT", "-k", "2", "2.5", "x", "-y"]
    with pytest.raises(InputError):
        bounded(["x"], math.nan)


def test_irtt_sends_its_timer_missed_are_not_an_early_end() -> None:
    """On a busy host irtt's sleeping timer skips sends (stats.timer_misses);
    the test still ran its whole duration, unlike one whose server went away."""
    from dataclasses import replace
    r = irtt.parse((IR / "udp_l64_i10ms.json").read_text())
    busy = replace(r, summary=replace(r.summary, sent=60, counters={**r.summary.counters, "timer_misses": 40}))
    assert irtt.timer_misses(busy) == 40
    irtt.check_complete(busy)
    short = replace(busy, summary=replace(busy.summary, counters={**r.summary.counters, "timer_misses": 0}))
    with pytest.raises(ToolError, match="sent 60 of 100 requests .* 0 missed by its timer"):
        irtt.check_complete(short)
