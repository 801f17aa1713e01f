#!/usr/bin/env python3
"""What does the host-side sampler cost on the host?  Its CPU at 0.25 s.

Runs ``hostsampler.sh`` (under dash) for a fixed time reading what a point
reads -- /proc/stat, /proc/softirqs, /proc/interrupts, /proc/net/dev,
/proc/net/snmp + netstat, and N tool processes (sleepers standing in for
iperf3 and friends) with their descendants -- and reports the CPU time the
sampler and every process it started used (the children's rusage, which
counts the sleep(1) per tick, awk and the one-off date reads), as a
percentage of one core.  Goal: under 1 % of one core at 0.25 s.

``--sleep-ticker`` measures the portable pacing (a host without bash 5).
``--as nobody`` runs it unprivileged: /proc/timer_list is then unreadable
and the sampler falls back to /proc/uptime (10 ms resolution).

    .venv/bin/python bench/hostsampler_cost.py [--seconds 30] [--interval 0.25] [--procs 6]
        [--sleep-ticker] [--as nobody]
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import time

from nicbench.sampling.hostrecords import parse_reads, parse_stream, sampler_argv


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--interval", type=float, default=0.25)
    ap.add_argument("--procs", type=int, default=6, help="tool processes followed (sleepers)")
    ap.add_argument("--as", dest="user", default=None, help="run the sampler as this user (runuser -u)")
    ap.add_argument("--sleep-ticker", action="store_true", help="the portable ticker (one sleep(1) per tick), "
                    "as on a host without bash 5")
    a = ap.parse_args()
    sleepers = [subprocess.Popen(["sleep", str(a.seconds + 10)]) for _ in range(a.procs)]
    items = ["cpu", "softirqs", "interrupts", "net", "snmp", *(f"pid:{p.pid}" for p in sleepers)]
    argv = sampler_argv(a.interval, a.seconds, items, shell="dash")
    if a.sleep_ticker:
        argv = ["env", "NBS_TICKER=sleep", *argv]
    if a.user:
        argv = ["runuser", "-u", a.user, "--", *argv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    # stdin stays open (the sampler stops at end of file): it must stop at its own deadline
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdin is not None
    out = p.stdout.read()
    p.wait(timeout=30)
    wall = time.monotonic() - t0
    p.stdin.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    for s in sleepers:
        s.kill()
        s.wait()
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    stream = parse_stream(out, "local")
    reads = parse_reads(stream)
    spans = sorted(r.t1 - r.t0 for r in reads)
    gaps = sorted(b.t - a_.t for a_, b in zip(reads, reads[1:], strict=False))
    ticker = "sleep(1) per tick" if a.sleep_ticker else "bash read -t"
    print(f"host sampler, dash, {ticker}, clock {stream.clock} (resolution {stream.resolution:g} s), "
          f"interval {a.interval} s, "
          f"{len(items)} items ({a.procs} processes), {wall:.1f} s: {cpu * 1000:.0f} ms CPU = "
          f"{100 * cpu / wall:.3f} % of one core ({len(reads)} ticks, "
          f"{1e6 * cpu / max(1, len(reads)):.0f} us per tick); stopped by {stream.end}")
    if spans:
        print(f"  one tick's reads span: median {spans[len(spans) // 2] * 1e6:.0f} us, max {spans[-1] * 1e6:.0f} us; "
              f"tick spacing median {gaps[len(gaps) // 2]:.4f} s, max {gaps[-1]:.4f} s")


if __name__ == "__main__":
    main()
