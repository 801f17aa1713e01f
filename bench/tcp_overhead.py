#!/usr/bin/env python3
"""Does the harness cost throughput or time?  nicbench vs plain iperf3, side by side.

In one embedded lab (server + 3 clients), the same TCP point is run
alternately (a) by hand: `ip netns exec` + plain iperf3 servers and clients,
exactly as an engineer would script it, and (b) through nicbench (a one-point
plan reusing the lab).  Throughput for both is receiver-side: iperf3's own
receiver totals by hand, nicbench's aggregate over the shared window.

Prints per pair and in summary: Gbps by hand, Gbps through nicbench, the ratio
nicbench/hand (goal >= 0.98) and nicbench's per-point overhead beyond the
measured omit + duration (goal < 0.5 s).  Needs root.

    .venv/bin/python bench/tcp_overhead.py [--pairs 5] [--duration 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from nicbench.api import execute, load_run
from nicbench.lab import manager
from nicbench.plan import parse_plan
from nicbench.run.hosts import lab_spec

PLAN = """name = "bench-tcp"
[lab]
name = "bench"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
[hosts.c3]
role = "client"
[study]
io_sizes = ["{io}"]
connections = [{conns}]
duration = {duration}
omit = {omit}
interval = 1
trim = 0
"""


def by_hand(spec, io: str, per_client: int, duration: int, omit: int, tmp: Path) -> tuple[float, float]:
    """Plain iperf3, as a shell script would: returns (receiver Gbps, wall seconds)."""
    t0 = time.monotonic()
    clients = [h for h in spec.hosts if h.role == "client"]
    srv = next(h for h in spec.hosts if h.role == "server")
    servers = [subprocess.Popen(["ip", "netns", "exec", h.netns, "iperf3", "-s", "-1", "-p", "5201"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for h in clients]
    time.sleep(0.3)
    outs = [tmp / f"hand-{h.name}.json" for h in clients]
    procs = [
        subprocess.Popen(
            [
                "ip",
                "netns",
                "exec",
                srv.netns,
                "iperf3",
                "-c",
                h.ip,
                "-p",
                "5201",
                "-t",
                str(duration),
                "-O",
                str(omit),
                "-l",
                io,
                "-P",
                str(per_client),
                "-J",
            ],
            stdout=open(o, "w"),
            stderr=subprocess.DEVNULL,
        )
        for h, o in zip(clients, outs, strict=True)
    ]
    for p in procs + servers:
        p.wait(timeout=duration + omit + 30)
    wall = time.monotonic() - t0
    gbps = sum(json.loads(o.read_text())["end"]["sum_received"]["bits_per_second"] for o in outs) / 1e9
    return gbps, wall


def through_nicbench(text: str, store: Path) -> tuple[float, float, float]:
    """(receiver Gbps, per-point overhead s, whole-run wall s)."""
    plan = parse_plan(text)
    t0 = time.monotonic()
    out = execute(plan, text, store=store)
    wall = time.monotonic() - t0
    [t] = load_run(out.run_dir).trials
    if t.status != "ok":
        raise SystemExit(f"nicbench point failed: {t.error}")
    return t.gbps, t.overhead_s, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--omit", type=int, default=1)
    ap.add_argument("--io", default="128K")
    ap.add_argument("--per-client", type=int, default=2)
    a = ap.parse_args()
    text = PLAN.format(io=a.io, conns=3 * a.per_client, duration=a.duration, omit=a.omit)
    spec = lab_spec(parse_plan(text))
    manager.down(spec.name)
    manager.up(spec)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            for i in range(a.pairs):
                # alternate who goes first so drift does not favour either
                order = ["hand", "nb"] if i % 2 == 0 else ["nb", "hand"]
                res = {}
                for who in order:
                    if who == "hand":
                        res["hand"] = by_hand(spec, a.io, a.per_client, a.duration, a.omit, tmp)
                    else:
                        res["nb"] = through_nicbench(text, tmp / "store")
                hg, hw = res["hand"]
                ng, nov, nw = res["nb"]
                rows.append((hg, ng, ng / hg, nov, nw - (a.omit + a.duration), hw - (a.omit + a.duration)))
                print(
                    f"pair {i + 1}: hand {hg:6.2f} Gbps   nicbench {ng:6.2f} Gbps   ratio {ng / hg:5.3f}   "
                    f"point overhead {nov:5.3f} s   run overhead {nw - a.omit - a.duration:5.2f} s "
                    f"(hand script {hw - a.omit - a.duration:5.2f} s)",
                    flush=True,
                )
    finally:
        manager.down(spec.name)

    def med(k):
        return statistics.median(r[k] for r in rows)

    print(
        f"\nsummary over {len(rows)} pairs ({a.io}, {3 * a.per_client} connections over 3 clients, "
        f"{a.duration} s + {a.omit} s omit):"
    )
    print(
        f"  ratio nicbench/hand: median {med(2):.3f} (min {min(r[2] for r in rows):.3f}, "
        f"max {max(r[2] for r in rows):.3f})   goal >= 0.98"
    )
    print(f"  nicbench per-point overhead: median {med(3):.3f} s (max {max(r[3] for r in rows):.3f} s)   goal < 0.5 s")
    print(
        f"  whole one-point run incl. lab check + preflight + report data: median {med(4):.2f} s; "
        f"hand script with its sleep: {med(5):.2f} s"
    )


if __name__ == "__main__":
    main()
