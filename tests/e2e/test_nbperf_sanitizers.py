"""nbperf built with AddressSanitizer and UndefinedBehaviorSanitizer
(``make sanitize``: build/nbperf-asan) moves data on loopback -- TCP and
UDP, tx, rx and bidir, several send and receive modes, one server serving
three clients at once -- and stops cleanly on SIGTERM, with not one
sanitizer report (a UBSan finding aborts, LeakSanitizer checks at exit) and
output nicbench's own parser reads.  Needs no root: one loopback port the
kernel picks.  The first run builds the binary (7 s of CPU: 10-25 s on a
busy 2-CPU machine); make skips it while the sources are unchanged.  The
runs take about 11 s.  Run alone on a shared machine:

    flock /tmp/nicbench-lab.lock .venv/bin/python -m pytest -q tests/e2e/test_nbperf_sanitizers.py
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from typing import Any

import pytest
from helpers import finish

from nicbench.native import build as nb
from nicbench.tools import nbperf

TOOLS = ("nbperf-asan",)          # none may outlive a test (conftest.py checks)

LEAD = 2.0                        # s from the clients' launch to the start: ASan start-up, a busy machine
DURATION = 1.5
# any report ends the process with these codes (none of nbperf's own 0-3); a
# UBSan finding aborts (built with -fno-sanitize-recover), leaks are checked at exit
SAN_ENV = {"ASAN_OPTIONS": "detect_leaks=1:detect_stack_use_after_return=1:strict_string_checks=1:exitcode=86",
           "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1:exitcode=87"}
REPORT_MARKS = ("Sanitizer", "runtime error:", "==ERROR", "SUMMARY:")


@pytest.fixture(scope="module")
def asan_exe() -> str:
    make, cc = shutil.which("make"), shutil.which("gcc") or shutil.which("cc")
    if make is None or cc is None:
        pytest.skip("no C tool chain (make and gcc) to build nbperf's sanitizer binary")
    r = subprocess.run([make, "-s", "-C", str(nb.NBPERF.sources), f"CC={cc}", "sanitize"], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, ("make sanitize failed (on Debian/Ubuntu, gcc brings libasan and libubsan; "
                               f"elsewhere install them):\n{r.stderr[-3000:]}")
    exe = nb.NBPERF.sources / "build" / "nbperf-asan"
    assert os.access(exe, os.X_OK), exe
    return str(exe)


STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def _no_process_left():
    """A test that fails half-way kills what it started (none is left for the next)."""
    yield
    while STARTED:
        p = STARTED.pop()
        if p.poll() is None:
            p.kill()
            p.communicate()


def spawn(argv: list[str]) -> subprocess.Popen:
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, **SAN_ENV})
    STARTED.append(p)
    return p


def no_report(who: str, rc: int, err: str) -> None:
    found = rc in (86, 87) or any(m in err for m in REPORT_MARKS)
    assert not found, f"{who}: exit {rc}, a sanitizer report:\n{err}"


def server(exe: str, clients: int) -> tuple[subprocess.Popen, str, int]:
    """A server on a loopback port of the kernel's choosing: (process, its listening line, the port)."""
    p = spawn(nbperf.server_argv(exe, port=0, lifetime=LEAD + DURATION + 30, clients=clients, bind="127.0.0.1"))
    assert p.stdout is not None and p.stderr is not None
    first = p.stdout.readline()
    if '"listening"' not in first:
        p.kill()
        raise AssertionError(f"the server did not listen: {first}{p.communicate()[1]}")
    return p, first, int(json.loads(first)["address"].rsplit(":", 1)[1])


CASES: dict[str, list[dict[str, Any]]] = {
    "tcp": [dict(direction="tx"),
            dict(direction="rx", send="sendfile", recv="trunc"),
            dict(direction="bidir", send="zerocopy", io_size=65536)],
    "udp": [dict(direction="tx", rate_bps=50e6),
            dict(direction="rx", io_size=8000),                      # unpaced
            dict(direction="bidir", rate_bps=20e6, recv="trunc")],
}


@pytest.mark.parametrize("proto", ["tcp", "udp"])
def test_sanitized_nbperf_moves_data_both_ways_without_a_report(asan_exe, proto):
    """Three clients of one server at once, one start: tx, rx and bidir."""
    srv, first, port = server(asan_exe, clients=len(CASES[proto]))
    start = time.time() + LEAD
    clients = [spawn(nbperf.client_argv(asan_exe, server="127.0.0.1", port=port, start=start, duration=DURATION,
                                        conns=2, proto=proto, interval=0.5, test=f"asan-{proto}-{i}", **kw))
               for i, kw in enumerate(CASES[proto])]
    results = [finish(c, LEAD + DURATION + 20) for c in clients]
    src, sout, serr = finish(srv, 20)
    for (rc, _, err), kw in zip(results, CASES[proto], strict=True):
        no_report(f"client {kw}", rc, err)
        assert rc == 0 and err == "", f"client {kw}: exit {rc}: {err}"
    no_report("server", src, serr)
    assert src == 0 and serr == "", f"server: exit {src}: {serr}"

    s = nbperf.parse_server(first + sout, serr)
    assert s.status == "ok" and len(s.sessions) == len(CASES[proto])
    for (_, out, err), kw in zip(results, CASES[proto], strict=True):
        c = nbperf.parse_client(out, err)
        sess = nbperf.check_session(s, c.session)
        assert (c.proto, c.direction, sess.connected) == (proto, kw["direction"], 2)
        assert c.samples and all(e.status == "ok" for e in c.ends)
        if c.direction in ("tx", "bidir"):
            assert c.summary.tx_bytes > 0 and sess.rx_bytes > 0, (kw, c.summary, sess)
        if c.direction in ("rx", "bidir"):
            assert sess.tx_bytes > 0 and c.summary.rx_bytes > 0, (kw, c.summary, sess)
        if proto == "tcp":        # every byte, both ends agreeing (the engine checks; so does the parser's input)
            assert (c.summary.peer_rx_bytes, c.summary.peer_tx_bytes) == (c.summary.tx_bytes, c.summary.rx_bytes)


def test_sanitized_nbperf_stops_cleanly_on_sigterm(asan_exe):
    """The failure path -- a client stopped mid-test resets everything, the
    server fails that session -- frees and exits as cleanly as the good one."""
    srv, first, port = server(asan_exe, clients=1)
    start = time.time() + LEAD
    cli = spawn(nbperf.client_argv(asan_exe, server="127.0.0.1", port=port, start=start, duration=3, conns=2,
                                   direction="bidir"))
    time.sleep(max(0.0, start + 0.7 - time.time()))
    cli.send_signal(signal.SIGTERM)
    crc, cout, cerr = finish(cli, 15)
    src, sout, serr = finish(srv, 15)
    no_report("client", crc, cerr)
    no_report("server", src, serr)
    assert crc == 3 and "stopped by SIGTERM" in (nbperf.error_of(cerr) or ""), cerr
    assert src == 1 and nbperf.error_of(serr), serr
    ends = [json.loads(ln) for ln in cout.splitlines() if ln.startswith("{")]
    assert ends[-1]["event"] == "end" and ends[-1]["status"] == "stopped"
    s = nbperf.parse_server(first + sout, serr)
    assert s.status == "error" and [x.status for x in s.sessions] == ["error"]

