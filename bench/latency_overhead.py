#!/usr/bin/env python3
"""What does nicbench add to latency?  The same sockperf ping-pong by hand and through nicbench.

In one embedded lab (server + one client), the same latency point is run
alternately (a) by hand: ``ip netns exec`` + sockperf server and ping-pong
client with exactly the argv nicbench builds, nothing else running, and (b)
through nicbench (a one-point latency plan reusing the lab: gate shim,
samplers every ``sample_interval`` seconds, the session around it), once per
sampler interval given.  Both read the same way: nicbench's histogram over
sockperf's per-request log (--full-log), p50 and p99 of the timed window.

Per pair: p50/p99 by hand and through nicbench, the ratios nicbench/hand.
Summary per sampler interval: the median over pairs of each ratio (goals:
p50 <= 1.02, p99 <= 1.05) with min..max, and the pooled ratio (every pair's
requests merged, each side).  Every pair holds /tmp/nicbench-load.lock,
unless ``--lock-held`` says the caller already holds it for the whole bench
(``flock /tmp/nicbench-load.lock ... --lock-held``: taking it again from inside
would wait for ever).  Needs root.

    .venv/bin/python bench/latency_overhead.py [--pairs 8] [--rate 1000] [--duration 3]
        [--protocol udp] [--intervals 1.0 0.25] [--lock-held]
"""

from __future__ import annotations

import argparse
import fcntl
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nicbench.api import execute, load_run
from nicbench.core.histogram import LatencyHistogram
from nicbench.lab import manager
from nicbench.plan import parse_plan
from nicbench.run.hosts import lab_spec
from nicbench.tools import sockperf

LOCK = "/tmp/nicbench-load.lock"
PORT = 11111
PLAN = """name = "bench-latency"
[lab]
name = "lovh"
subnet = "10.207.0.128/25"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[study]
kind = "latency"
protocols = ["{proto}"]
engines = ["sockperf"]
message_sizes = [{size}]
rate = {rate}
duration = {duration}
sample_interval = {interval}
port_base = {port}
"""


@contextmanager
def locked(held: bool) -> Iterator[None]:
    if held:            # the caller holds the lock for the whole bench
        yield
        return
    with open(LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def by_hand(spec, proto: str, size: int, rate: int | None, duration: int, tmp: Path) -> LatencyHistogram:
    """sockperf as a shell script would run it, with nicbench's own argv."""
    srv = next(h for h in spec.hosts if h.role == "server")
    cli = next(h for h in spec.hosts if h.role == "client")
    server = subprocess.Popen(["ip", "netns", "exec", srv.netns,
                               *sockperf.server_argv(bind=srv.ip, port=PORT, protocol=proto, max_size=size,
                                                     lifetime=duration + 30)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        time.sleep(0.3)
        log = tmp / "hand.csv"
        out = subprocess.run(["ip", "netns", "exec", cli.netns,
                              *sockperf.client_argv(target=srv.ip, port=PORT, protocol=proto, size=size,
                                                    duration=duration, log_path=str(log), rate=rate)],
                             capture_output=True, text=True, timeout=duration + 30)
        sockperf.check_text(out.stdout + out.stderr, "by hand")
        return LatencyHistogram.of(sockperf.parse_full_log(log.read_text(), "by hand").samples.rtt)
    finally:
        server.send_signal(2)
        server.wait(10)


def through_nicbench(text: str, store: Path) -> LatencyHistogram:
    plan = parse_plan(text)
    out = execute(plan, text, store=store)
    [t] = load_run(out.run_dir).trials
    if t.status != "ok" or t.merged is None:
        raise SystemExit(f"nicbench point failed: {t.error}")
    return t.merged


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=8)
    ap.add_argument("--rate", default="1000", help="requests/s, or max (back to back)")
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--protocol", choices=("udp", "tcp"), default="udp")
    ap.add_argument("--intervals", type=float, nargs="+", default=[1.0, 0.25],
                    help="nicbench's sample_interval values to run, each against the same hand run")
    ap.add_argument("--lock-held", action="store_true", help=f"the caller holds {LOCK} (flock) for the whole bench")
    a = ap.parse_args()
    rate = None if a.rate == "max" else int(a.rate)
    texts = {iv: PLAN.format(proto=a.protocol, size=a.size, rate='"max"' if rate is None else rate,
                             duration=a.duration, interval=iv, port=PORT) for iv in a.intervals}
    spec = lab_spec(parse_plan(texts[a.intervals[0]]))
    manager.down(spec.name)
    manager.up(spec)
    hand: list[LatencyHistogram] = []
    nb: dict[float, list[LatencyHistogram]] = {iv: [] for iv in a.intervals}
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            for i in range(a.pairs):
                # rotate who goes first so drift of the machine favours no one
                runs: list[float | None] = [None, *a.intervals]
                k = i % len(runs)
                order = runs[k:] + runs[:k]
                with locked(a.lock_held):
                    for who in order:
                        if who is None:
                            hand.append(by_hand(spec, a.protocol, a.size, rate, a.duration, tmp))
                        else:
                            nb[who].append(through_nicbench(texts[who], tmp / "store"))
                h = hand[-1]
                line = f"pair {i + 1}: hand p50 {h.percentile(50) * 1e6:7.1f} p99 {h.percentile(99) * 1e6:8.1f} us"
                for iv in a.intervals:
                    n = nb[iv][-1]
                    line += (f" | nicbench@{iv:g}s p50 {n.percentile(50) * 1e6:7.1f} "
                             f"({n.percentile(50) / h.percentile(50):5.3f}) p99 {n.percentile(99) * 1e6:8.1f} "
                             f"({n.percentile(99) / h.percentile(99):5.3f})")
                print(line, flush=True)
    finally:
        manager.down(spec.name)
    pooled_hand = LatencyHistogram.merged(hand)
    print(f"\n{a.pairs} pairs, {a.protocol.upper()} {a.size} B, rate {a.rate}, {a.duration} s each; "
          f"by hand pooled: p50 {pooled_hand.percentile(50) * 1e6:.1f} us, "
          f"p99 {pooled_hand.percentile(99) * 1e6:.1f} us")
    for iv in a.intervals:
        for pct, goal in ((50, 1.02), (99, 1.05)):
            ratios = [n.percentile(pct) / h.percentile(pct) for n, h in zip(nb[iv], hand, strict=True)]
            pooled = LatencyHistogram.merged(nb[iv]).percentile(pct) / pooled_hand.percentile(pct)
            print(f"  sample_interval {iv:g} s: p{pct} ratio nicbench/hand median {statistics.median(ratios):.3f} "
                  f"(min {min(ratios):.3f}, max {max(ratios):.3f}), pooled {pooled:.3f}   goal <= {goal}")


if __name__ == "__main__":
    main()
