"""The host-side sampler: its shell is POSIX, it runs for real under dash and
stops by itself, and its stream parses into the existing parsers' structures
with host timestamps mapped to the controller clock."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from nicbench.core.errors import ToolError
from nicbench.sampling.hostrecords import (
    ClockMap,
    clock_map,
    parse_reads,
    parse_stream,
    sampler_argv,
    script,
    to_controller,
)
from nicbench.sampling.netdev import delta
from nicbench.sampling.procstat import cpu_deltas

SCRIPT = Path(__file__).parents[2] / "src" / "nicbench" / "sampling" / "hostsampler.sh"
FIX = Path(__file__).parent.parent / "fixtures" / "hostsampler"


@pytest.mark.parametrize("checker", [["dash", "-n"], ["posh", "-n"], ["shellcheck", "-s", "sh"]])
def test_the_sampler_is_posix_sh(checker):
    if shutil.which(checker[0]) is None:
        pytest.skip(f"{checker[0]} is not installed (apt-get install {checker[0]})")
    r = subprocess.run([*checker, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_script_ships_as_package_data():
    assert script() == SCRIPT.read_text()
    argv = sampler_argv(0.25, 60, ["cpu", "net:eth0", "pid:42"])
    assert argv[:2] == ["sh", "-c"] and argv[3:] == ["nicbench-sampler", "0.25", "60", "cpu", "net:eth0", "pid:42"]
    for bad in (["pid:x"], ["net:a b"], ["net:$(reboot)"], ["disk"]):
        with pytest.raises(ValueError, match="not a sampler item"):
            sampler_argv(0.25, 60, bad)
    with pytest.raises(ValueError, match="interval"):
        sampler_argv(0.001, 60, [])


# -- the recorded streams ---------------------------------------------------

def test_a_recorded_stream_parses_into_the_linux_parsers_structures():
    s = parse_stream((FIX / "linux-6.18-mono.txt").read_text(), "h1")
    assert (s.os, s.clock, s.resolution, s.interval, s.end, s.problems) == ("Linux", "mono_ns", 1e-9, 0.2,
                                                                             "deadline", ())
    assert len(s.ticks) == 5 and len(s.pairs) == 4
    reads = parse_reads(s)
    for a, b in zip(reads, reads[1:], strict=False):
        assert 0.19 < b.t - a.t < 0.25                 # host stamps, 0.2 s apart
        assert 0 < b.t1 - b.t0 < 0.05                   # one tick's reads take well under a ms or so
        d = cpu_deltas(a.cpu or {}, b.cpu or {})
        assert set(d) >= {"0", "1", "all"}
        assert 0 < sum(d["all"].values()) <= 2 * (b.t1 - a.t0) + 0.02   # 2 CPUs' seconds in the span
        assert delta(a.net_dev["lo"]["rx_bytes"], b.net_dev["lo"]["rx_bytes"]) is not None  # type: ignore[index]
    r0 = reads[0]
    assert r0.softirqs and set(r0.softirqs) == {"NET_RX", "NET_TX"} and r0.interrupts
    assert r0.proto and "RetransSegs" in r0.proto["Tcp"] and "TCPLostRetransmit" in r0.proto["TcpExt"]
    # the tree below the followed shell: its two children, each with its CPUs
    tree = min(r0.kids)
    assert len(r0.kids[tree]) == 2 and set(r0.kids[tree]) <= set(r0.procs)
    assert all(p.comm in ("sh", "sleep") for p in r0.procs.values()) and r0.allowed[tree] == "0-1"
    # the short process exited during the run: it is gone, not zero
    short = max(p for p in reads[0].procs if p not in r0.kids[tree] and p != tree)
    assert short not in reads[-1].procs and f"pid/{short}" in reads[-1].gone


def test_host_stamps_map_to_the_controller_clock():
    s = parse_stream((FIX / "linux-6.18-mono.txt").read_text(), "h1")
    cm = clock_map(s, offset=0.0, offset_uncertainty=0.0)
    best = min(s.pairs, key=lambda p: p.after - p.before)
    assert cm.uncertainty == pytest.approx((best.after - best.before) / 2 + 1e-9)
    assert cm.uncertainty < 0.005
    r = parse_reads(s)[0]
    t, unc = to_controller(r.t, cm)
    assert abs(t - best.real) < 1.0                      # on the wall clock, within the 1 s run
    # a host whose clock is 2.5 s ahead (+-1 ms) maps 2.5 s earlier, with both uncertainties
    cm2 = clock_map(s, offset=2.5, offset_uncertainty=0.001)
    t2, unc2 = to_controller(r.t, cm2)
    assert t2 == pytest.approx(t - 2.5) and unc2 == pytest.approx(unc + 0.001)


def test_the_uptime_clock_says_its_10ms_resolution():
    s = parse_stream((FIX / "linux-6.18-uptime.txt").read_text(), "h2")
    assert s.clock == "uptime_s" and s.resolution == 0.01 and s.end == "deadline"
    cm = clock_map(s, 0.0, 0.0)
    assert 0.01 <= cm.uncertainty <= 0.02
    reads = parse_reads(s)
    assert reads and all(r.procs == {} and r.softirqs is None for r in reads)   # not asked: None, not empty


def test_a_stepped_wall_clock_is_refused():
    text = (FIX / "linux-6.18-mono.txt").read_text()
    lines = text.splitlines(keepends=True)
    last = max(i for i, ln in enumerate(lines) if ln.startswith("@@nbs offset "))
    w = lines[last].split()
    lines[last] = f"{w[0]} {w[1]} {w[2]} {float(w[3]) + 0.2:.9f} {w[4]}\n"    # the wall clock jumped 200 ms
    with pytest.raises(ToolError, match="moved by \\+200"):
        clock_map(parse_stream("".join(lines), "h1"), 0.0, 0.0)


@pytest.mark.parametrize("cut_at", ["@@nbs src net/snmp", "@@nbs tock 3", "Ip: "])
def test_a_stream_cut_short_keeps_its_complete_ticks_and_says_so(cut_at):
    text = (FIX / "linux-6.18-mono.txt").read_text()
    i = text.index(cut_at, text.index("@@nbs tick 3"))
    s = parse_stream(text[:i + len(cut_at) // 2], "h1")
    assert [t.seq for t in s.ticks] == [1, 2] and s.end is None
    assert any("cut short" in p for p in s.problems) and any("without the sampler saying why" in p for p in s.problems)


def test_a_refusal_or_silence_is_an_error_naming_the_host():
    with pytest.raises(ToolError, match="refused to start: unknown item: disk") as e:
        parse_stream("@@nbs error unknown item: disk\n", "gen3")
    assert e.value.where == "gen3"
    with pytest.raises(ToolError, match="no hello"):
        parse_stream("bash: sh: not found\n", "gen3")
    with pytest.raises(ToolError, match="version"):
        parse_stream("@@nbs hello 9 os=Linux clock=mono_ns res=1e-9 interval=1\n", "gen3")


# -- running it ---------------------------------------------------------------

def _run(argv: list[str], env_mark: str, seconds_limit: float) -> tuple[str, float]:
    env = dict(os.environ, NB_TEST_MARK=env_mark)
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        out = p.stdout.read()  # type: ignore[union-attr]   # to its end: the sampler stops by itself
        p.wait(timeout=seconds_limit)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.stdin.close()  # type: ignore[union-attr]
    return out, time.monotonic() - t0


def _left_behind(mark: str) -> list[int]:
    """Processes still carrying the test's environment mark."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"NB_TEST_MARK={mark}".encode() in f.read():
                    out.append(int(pid))
        except OSError:
            continue
    return out


@pytest.mark.skipif(shutil.which("dash") is None, reason="dash is not installed")
@pytest.mark.parametrize("ticker", ["bash", "sleep"])
def test_it_runs_under_dash_and_stops_at_its_deadline_with_stdin_open(ticker):
    mark = uuid.uuid4().hex
    argv = sampler_argv(0.05, 1, ["cpu", "net", "snmp", "softirqs", f"pid:{os.getpid()}"], shell="dash")
    if ticker == "sleep":
        argv = ["env", "NBS_TICKER=sleep", *argv]
    out, took = _run(argv, mark, 10)
    s = parse_stream(out, "local")
    assert s.end == "deadline" and not s.problems and 1.0 <= took < 3.0
    reads = parse_reads(s)
    assert len(reads) >= 10
    gaps = sorted(b.t - a.t for a, b in zip(reads, reads[1:], strict=False))
    assert gaps[0] > 0 and 0.04 < gaps[len(gaps) // 2] < 0.08      # (2 shared cores: a late tick happens)
    assert os.getpid() in reads[0].procs
    time.sleep(0.1)
    assert _left_behind(mark) == []


@pytest.mark.skipif(shutil.which("dash") is None, reason="dash is not installed")
def test_closing_stdin_stops_it_and_sigterm_leaves_nothing_behind():
    mark = uuid.uuid4().hex
    env = dict(os.environ, NB_TEST_MARK=mark)
    p = subprocess.Popen(sampler_argv(0.05, 60, ["cpu"], shell="dash"), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    time.sleep(0.3)
    t0 = time.monotonic()
    p.stdin.close()  # type: ignore[union-attr]
    out = p.stdout.read()  # type: ignore[union-attr]
    assert p.wait(timeout=5) == 0 and time.monotonic() - t0 < 1.0
    assert parse_stream(out, "local").end == "stdin"
    time.sleep(0.1)
    assert _left_behind(mark) == []
    # SIGTERM to the sampler alone (not its group): it ends its helpers itself
    p = subprocess.Popen(sampler_argv(0.05, 60, ["cpu"], shell="dash"), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, env=env, start_new_session=True)
    time.sleep(0.3)
    p.terminate()
    assert p.wait(timeout=5) == 143
    p.stdin.close()  # type: ignore[union-attr]
    p.stdout.close()  # type: ignore[union-attr]
    time.sleep(0.3)
    left = _left_behind(mark)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == []


@pytest.mark.skipif(shutil.which("dash") is None, reason="dash is not installed")
def test_a_slow_reader_does_not_move_the_host_stamps():
    """The stamps are taken on the host: however late the controller reads
    the stream (a delayed round trip), the intervals are the host's."""
    p = subprocess.Popen(sampler_argv(0.05, 1, ["cpu", "net"], shell="dash"), stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, start_new_session=True)
    chunks, arrived = [], []
    fd = p.stdout.fileno()  # type: ignore[union-attr]
    while True:
        time.sleep(0.25)                            # the link delivers in bursts, 250 ms late
        b = os.read(fd, 1 << 20)
        if not b:
            break
        chunks.append(b)
        arrived.append(time.monotonic())
    p.wait(timeout=5)
    p.stdin.close()  # type: ignore[union-attr]
    reads = parse_reads(parse_stream(b"".join(chunks).decode(), "slow"))
    gaps = sorted(b.t - a.t for a, b in zip(reads, reads[1:], strict=False))
    # re-timed on arrival, the reads of one delivery would share its time (gaps of 0) and the
    # deliveries be 250 ms apart: the host's stamps are spaced by the interval instead.  Only lower
    # bounds: a busy machine (the suite's neighbours) makes a tick late, never early
    assert len(reads) >= 5 and gaps[0] > 0 and gaps[len(gaps) // 2] > 0.03
    assert len(arrived) < len(reads)                # several ticks per delivery, none of them re-timed


def test_clock_map_needs_a_tie():
    s = parse_stream("@@nbs hello 1 os=Linux clock=mono_ns res=1e-9 interval=1\n@@nbs bye stdin 1\n", "h")
    with pytest.raises(ToolError, match="no reading of the host's wall clock"):
        clock_map(s, 0, 0)
    real = parse_stream("@@nbs hello 1 os=FreeBSD clock=real_s res=1e-9 interval=1\n@@nbs bye stdin 1\n", "h")
    assert clock_map(real, 0.25, 0.002) == ClockMap(-0.25, 0.002 + 1e-9, 1e-9)
