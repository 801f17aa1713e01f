#!/usr/bin/env python3
"""Latency engines side by side on one path: sockperf, irtt, iperf 2 --bounceback, qperf.

Builds a server and a client namespace joined by one veth pair (MTU 1500),
then for each message size runs every engine at the same request rate
(``--rate`` per second, isochronous), idle and under a concurrent iperf3 TCP
stream client -> server (started 0.5 s before, ending after), alternating
engines ``--repeats`` times; then the same back to back (as fast as each
engine goes) at 64 B, where qperf's mean (its only number) joins in.

Per run: count, RTT p50/p90/p99/p99.9/max/mean (s) from nicbench's
histogram of the engine's per-request samples (sockperf: its full log;
irtt: client receive - send, the server's turnaround included, like the
others; iperf 2: no samples, its mean/min/max and its 100 us histogram's
upper bounds), and the CPU time of the engine's client and server processes
(wait4 rusage: user + system, ``timeout`` wrapper included) per request.
Every run holds /tmp/nicbench-load.lock.  Prints a table; ``--out`` keeps
every run as JSON lines.  Needs root, sockperf, irtt, iperf, iperf3, qperf.

    .venv/bin/python bench/latency_engines.py [--repeats 2] [--seconds 4] [--rate 100]
        [--sizes 64 16384] [--prefix nbD-] [--net 10.204.0] [--out FILE]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from nicbench.core.histogram import LatencyHistogram
from nicbench.tools import bounceback, irtt, sockperf

LOCK = "/tmp/nicbench-load.lock"
PCTS = [50, 90, 99, 99.9]


class Path2:
    """The two namespaces: server (.1) and client (.2)."""

    def __init__(self, prefix: str, net: str) -> None:
        self.srv, self.cli = f"{prefix}srv", f"{prefix}cli"
        self.sip = f"{net}.1"
        self.net = net

    def down(self) -> None:
        for ns in (self.srv, self.cli):
            r = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True)
            for tok in r.stdout.split():
                with suppress(ProcessLookupError, ValueError):
                    os.kill(int(tok), signal.SIGKILL)
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)

    def up(self) -> None:
        self.down()
        for cmd in (["ip", "netns", "add", self.srv], ["ip", "netns", "add", self.cli],
                    ["ip", "link", "add", "eth0", "netns", self.srv, "type", "veth", "peer", "name", "eth0",
                     "netns", self.cli],
                    ["ip", "-n", self.srv, "addr", "add", f"{self.sip}/24", "dev", "eth0"],
                    ["ip", "-n", self.cli, "addr", "add", f"{self.net}.2/24", "dev", "eth0"]):
            subprocess.run(cmd, check=True)
        for ns in (self.srv, self.cli):
            subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
            subprocess.run(["ip", "-n", ns, "link", "set", "eth0", "up"], check=True)


def popen(ns: str, argv: list[str], out: Path) -> subprocess.Popen[bytes]:
    f = out.open("wb")
    return subprocess.Popen(["ip", "netns", "exec", ns, *argv], stdout=f, stderr=subprocess.STDOUT,
                            start_new_session=True)


def reap(p: subprocess.Popen[bytes], stop: bool = False, timeout: float = 30) -> float:
    """Wait for ``p`` (SIGINT first when ``stop``); its CPU seconds, children included."""
    if stop:
        with suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGINT)
    deadline = time.monotonic() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return ru.ru_utime + ru.ru_stime
        if time.monotonic() > deadline:
            os.killpg(p.pid, signal.SIGKILL)
            deadline = time.monotonic() + 5
        time.sleep(0.02)


@contextmanager
def locked() -> Iterator[None]:
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextmanager
def load(path: Path2, seconds: float, on: bool, work: Path) -> Iterator[None]:
    """An iperf3 TCP stream client -> server for ``seconds`` (when ``on``)."""
    if not on:
        yield
        return
    s = popen(path.srv, ["iperf3", "-s", "-1", "-p", "5201"], work / "load_srv.txt")
    time.sleep(0.3)
    c = popen(path.cli, ["iperf3", "-c", path.sip, "-p", "5201", "-t", f"{seconds:g}", "-J"], work / "load_cli.json")
    time.sleep(0.5)
    try:
        yield
    finally:
        reap(c, timeout=seconds + 10)
        reap(s, timeout=5)


def stats(rtts: list[float] | tuple[float, ...]) -> dict[str, Any]:
    h = LatencyHistogram.of(rtts)
    p = h.percentiles(PCTS)
    return {"n": h.count, "p50": p[50], "p90": p[90], "p99": p[99], "p999": p[99.9], "max": h.max, "mean": h.mean,
            "min": h.min}


def run_sockperf(path: Path2, proto: str, size: int, rate: int | None, seconds: int, work: Path) -> dict[str, Any]:
    port = 11111 if proto == "udp" else 11112
    srv = popen(path.srv, sockperf.server_argv(bind=path.sip, port=port, protocol=proto,  # type: ignore[arg-type]
                                               max_size=size, lifetime=seconds + 20), work / "srv.txt")
    time.sleep(0.3)
    log = work / "full.csv"
    cli = popen(path.cli, sockperf.client_argv(target=path.sip, port=port, protocol=proto,  # type: ignore[arg-type]
                                               size=size, duration=seconds, log_path=str(log), rate=rate),
                work / "cli.txt")
    cpu_c = reap(cli, timeout=seconds + 20)
    cpu_s = reap(srv, stop=True)
    sockperf.check_text((work / "cli.txt").read_text(errors="replace"))
    r = sockperf.parse_full_log(log.read_text())
    return {**stats(r.samples.rtt), "cpu_client": cpu_c, "cpu_server": cpu_s, "requests": r.total_received,
            "window": r.summary.duration, "stated_p50": r.summary.median, "stated_p99": r.summary.percentiles[99.0]}


def run_irtt(path: Path2, size: int, rate: int, seconds: int, work: Path, timer: str | None = None) -> dict[str, Any]:
    srv = popen(path.srv, irtt.server_argv(lifetime=seconds + 20), work / "srv.txt")
    time.sleep(0.3)
    out = work / "irtt.json"
    cli = popen(path.cli, irtt.client_argv(target=path.sip, size=size, interval=1 / rate, duration=seconds,
                                           out_path=str(out), wait=0.2, timer=timer), work / "cli.txt")
    cpu_c = reap(cli, timeout=seconds + 30)
    cpu_s = reap(srv, stop=True)
    irtt.check_stderr((work / "cli.txt").read_text(errors="replace"))
    r = irtt.parse(out.read_text())
    # not irtt.check_complete: on a busy 2-vCPU host its sleeping timer misses
    # sends at 1 ms; the bench reports the fraction sent instead of failing
    own = stats(r.samples.rtt)
    return {**stats(r.client_rtt), "irtt_p50": own["p50"], "irtt_p99": own["p99"], "cpu_client": cpu_c,
            "cpu_server": cpu_s, "requests": r.sent, "window": r.summary.duration, "sent_fraction": r.sent / r.expected,
            "send_p50": statistics.median(r.send_delay) if r.send_delay else None,
            "recv_p50": statistics.median(r.receive_delay) if r.receive_delay else None}


def run_bb(path: Path2, size: int, rate: int | None, seconds: int, work: Path) -> dict[str, Any]:
    srv = popen(path.srv, bounceback.server_argv(lifetime=seconds + 20), work / "srv.txt")
    time.sleep(0.3)
    cli = popen(path.cli, bounceback.client_argv(target=path.sip, size=size, duration=seconds, rate=rate),
                work / "cli.txt")
    cpu_c = reap(cli, timeout=seconds + 20)
    cpu_s = reap(srv, stop=True)
    r = bounceback.parse((work / "cli.txt").read_text(errors="replace"))
    assert r.total is not None and r.histogram is not None and r.summary is not None
    return {"n": r.total.count, "mean": r.total.mean, "min": r.total.min, "max": r.total.max,
            "p50": None, "p99": None, "p50_ub": r.histogram.upper_bound(50), "p99_ub": r.histogram.upper_bound(99),
            "cpu_client": cpu_c, "cpu_server": cpu_s, "requests": r.total.count, "window": r.summary.duration}


def run_qperf(path: Path2, proto: str, size: int, seconds: int, work: Path) -> dict[str, Any]:
    srv = popen(path.srv, ["timeout", "-s", "INT", "-k", "2", str(seconds + 20), "qperf"], work / "srv.txt")
    time.sleep(0.3)
    cli = popen(path.cli, ["timeout", "-s", "INT", "-k", "2", str(seconds + 20), "qperf", path.sip, "-t",
                           str(seconds), "-m", str(size), "-vu", f"{proto}_lat"], work / "cli.txt")
    cpu_c = reap(cli, timeout=seconds + 20)
    cpu_s = reap(srv, stop=True)
    text = (work / "cli.txt").read_text()
    m = re.search(r"latency\s*=\s*([\d.]+) (us|ms|sec)", text)
    assert m, text
    one_way = float(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "sec": 1.0}[m.group(2)]
    # qperf states one-way latency = RTT/2 of back-to-back round trips; requests unknown
    return {"n": None, "mean": 2 * one_way, "p50": None, "p99": None, "cpu_client": cpu_c, "cpu_server": cpu_s,
            "requests": None, "window": seconds}


def one(path: Path2, engine: str, proto: str, size: int, rate: int | None, seconds: int, loaded: bool,
        root: Path, tag: str) -> dict[str, Any]:
    work = root / tag
    work.mkdir(parents=True, exist_ok=True)
    with locked(), load(path, seconds + 1.5, loaded, work):
        t0 = time.monotonic()
        if engine == "sockperf":
            res = run_sockperf(path, proto, size, rate, seconds, work)
        elif engine in ("irtt", "irtt-busy"):
            assert rate is not None
            res = run_irtt(path, size, rate, seconds, work, "busy" if engine == "irtt-busy" else None)
        elif engine == "iperf2-bb":
            res = run_bb(path, size, rate, seconds, work)
        else:
            res = run_qperf(path, proto, size, seconds, work)
        wall = time.monotonic() - t0
    return {"engine": engine, "proto": proto, "size": size, "rate": rate, "loaded": loaded, "wall": wall,
            "seconds": seconds, **res}


def us(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e6:8.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--seconds", type=int, default=4)
    ap.add_argument("--rate", type=int, default=100)
    ap.add_argument("--sizes", type=int, nargs="+", default=[64, 16384])
    ap.add_argument("--prefix", default="nbD-")
    ap.add_argument("--net", default="10.204.0")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--engines", nargs="+", default=["sockperf/udp", "irtt/udp", "sockperf/tcp", "iperf2-bb/tcp"],
                    help="engine/protocol pairs at --rate (irtt-busy/udp: irtt with its spinning timer)")
    ap.add_argument("--no-b2b", action="store_true", help="skip the back-to-back runs")
    a = ap.parse_args()
    path = Path2(a.prefix, a.net)
    path.up()
    rows: list[dict[str, Any]] = []
    iso = [tuple(e.split("/")) for e in a.engines]
    b2b = [] if a.no_b2b else [("sockperf", "udp"), ("qperf", "udp"), ("sockperf", "tcp"), ("iperf2-bb", "tcp"),
                               ("qperf", "tcp")]
    try:
        with tempfile.TemporaryDirectory(prefix="nblat-") as tmp:
            n = 0
            for rep in range(a.repeats):
                for loaded in (False, True):
                    plan = [(e, p, s, a.rate) for s in a.sizes for e, p in iso] + \
                           [(e, p, 64, None) for e, p in b2b]
                    for engine, proto, size, rate in plan:
                        n += 1
                        row = one(path, engine, proto, size, rate, a.seconds, loaded, Path(tmp), f"r{n}")
                        row["repeat"] = rep
                        rows.append(row)
                        print(f"{engine:9} {proto} {size:6} B rate={rate or 'b2b':>5} "
                              f"{'loaded' if loaded else 'idle  '} n={row['n']} p50={us(row['p50'])} "
                              f"p99={us(row['p99'])} mean={us(row['mean'])} us cpu c/s={row['cpu_client']:.2f}/"
                              f"{row['cpu_server']:.2f} s", flush=True)
                        if a.out:
                            with a.out.open("a") as f:
                                f.write(json.dumps(row) + "\n")
    finally:
        path.down()
    summarise(rows)
    return 0


def summarise(rows: list[dict[str, Any]]) -> None:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        groups[(r["proto"], r["size"], r["rate"], r["loaded"], r["engine"])].append(r)
    print("\nmedians over repeats (us); cpu = client+server CPU us per request")
    print(f"{'proto':5} {'size':>6} {'rate':>5} {'load':6} {'engine':9} {'p50':>8} {'p99':>8} {'p99.9':>8} "
          f"{'mean':>8} {'p50ub':>8} {'p99ub':>8} {'cpu/req':>8} {'cores':>5}")
    for key in sorted(groups, key=lambda k: (k[0], k[1], str(k[2]), k[3], k[4])):
        g = groups[key]

        def med(f: str, g: list[dict[str, Any]] = g) -> float | None:
            v = [r[f] for r in g if r.get(f) is not None]
            return statistics.median(v) if v else None
        reqs = [r["requests"] for r in g if r.get("requests")]
        cpu = statistics.median([(r["cpu_client"] + r["cpu_server"]) / r["requests"] for r in g
                                 if r.get("requests")]) if reqs else None
        cores = statistics.median([(r["cpu_client"] + r["cpu_server"]) / r["seconds"] for r in g])
        print(f"{key[0]:5} {key[1]:6} {str(key[2] or 'b2b'):>5} {'loaded' if key[3] else 'idle':6} {key[4]:9} "
              f"{us(med('p50'))} {us(med('p99'))} {us(med('p999'))} {us(med('mean'))} {us(med('p50_ub'))} "
              f"{us(med('p99_ub'))} {us(cpu)} {cores:5.2f}")


if __name__ == "__main__":
    sys.exit(main())
