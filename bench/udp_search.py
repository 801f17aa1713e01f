#!/usr/bin/env python3
"""Is the maximum-rate search's answer a rate plain iperf3 confirms?

In one embedded lab (server + 2 clients, the server's link shaped), nicbench
searches the highest rate per client whose loss stays at or below the
threshold (a one-point UDP plan, rate "max", reusing the lab); then plain
iperf3, run by hand exactly as an engineer would script it (`ip netns exec`,
one `iperf3 -u -b RATE` per client at once), offers that rate, and 5 % more.
Throughput for both is receiver-side: nicbench's aggregate over the shared
window, iperf3's own `sum_received` totals by hand; loss is the receivers'.

Prints per pair: the rate found, nicbench's received Gbps and loss, the hand
run's received Gbps and loss at that rate (goal: within the threshold, Gbps
ratio ~1) and at 5 % above it (expected: above the threshold, received no
higher: the link is full).  Needs root; run it under the shared load lock:

    flock /tmp/nicbench-load.lock .venv/bin/python bench/udp_search.py [--pairs 3] [--size 1472]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

from nicbench.api import execute, load_run
from nicbench.core import linerate
from nicbench.lab import manager
from nicbench.plan import parse_plan
from nicbench.run.hosts import lab_spec
from nicbench.studies.udp.analysis import UdpTrial

PLAN = """name = "bench-udp"
[lab]
name = "ubench"
[link]
mtu = 1500
speed = "{speed}"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
[study]
kind = "udp"
directions = ["tx"]
datagram_sizes = [{size}]
rates = ["max"]
window = "{window}"
duration = {duration}
omit = {omit}
interval = 0.5
trim = 0.25
loss_threshold = {threshold}
search_steps = 10
search_resolution = 0.005
"""


def by_hand(spec, rate: float, size: int, window: str, duration: int, omit: int, tmp: Path) -> tuple[float, float]:
    """Plain iperf3 to every client at once at ``rate`` bit/s each: (received Gbps, loss)."""
    clients = [h for h in spec.hosts if h.role == "client"]
    srv = next(h for h in spec.hosts if h.role == "server")
    servers = [subprocess.Popen(["ip", "netns", "exec", h.netns, "iperf3", "-s", "-1", "-p", "5201"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for h in clients]
    subprocess.run(["sleep", "0.3"], check=True)
    outs = [tmp / f"hand-{h.name}.json" for h in clients]
    procs = [subprocess.Popen(["ip", "netns", "exec", srv.netns, "iperf3", "-c", h.ip, "-p", "5201", "-u",
                               "-b", f"{rate:.0f}", "-l", str(size), "-w", window, "-t", str(duration),
                               "-O", str(omit), "-J"], stdout=open(o, "w"), stderr=subprocess.DEVNULL)
             for h, o in zip(clients, outs, strict=True)]
    for p in procs + servers:
        p.wait(timeout=duration + omit + 30)
    ends = [json.loads(o.read_text())["end"]["sum_received"] for o in outs]
    lost, packets = sum(e["lost_packets"] for e in ends), sum(e["packets"] for e in ends)
    return sum(e["bits_per_second"] for e in ends) / 1e9, lost / packets if packets else float("nan")


def searched(text: str, store: Path) -> UdpTrial:
    out = execute(parse_plan(text), text, store=store)
    [t] = load_run(out.run_dir).trials
    if not isinstance(t, UdpTrial) or t.status != "ok" or not t.search:
        raise SystemExit(f"nicbench point failed: {t.error}")
    return t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--size", type=int, default=1472)
    ap.add_argument("--speed", default="500M")
    ap.add_argument("--window", default="1M")
    ap.add_argument("--duration", type=int, default=3)
    ap.add_argument("--omit", type=int, default=1)
    ap.add_argument("--threshold", type=float, default=0.001)
    a = ap.parse_args()
    text = PLAN.format(speed=a.speed, size=a.size, window=a.window, duration=a.duration, omit=a.omit,
                       threshold=a.threshold)
    spec = lab_spec(parse_plan(text))
    ceiling = linerate.udp(linerate.parse_speed(a.speed), 1500, payload=a.size).goodput_bps / 1e9
    manager.down(spec.name)
    manager.up(spec)
    rows = []
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            for i in range(a.pairs):
                t = searched(text, tmp / "store")
                rate = t.search.get("rate_per_client_bps") if t.search else None
                if not isinstance(rate, (int, float)):
                    raise SystemExit("the search's answer was the unpaced step: nothing to offer by hand")
                hg, hl = by_hand(spec, float(rate), a.size, a.window, a.duration, a.omit, tmp)
                og, ol = by_hand(spec, float(rate) * 1.05, a.size, a.window, a.duration, a.omit, tmp)
                assert t.gbps is not None and t.loss is not None
                steps = t.search.get("steps") if t.search else None
                rows.append((float(rate), t.gbps, t.loss, hg, hl, og, ol, len(steps) if isinstance(steps, list) else 0))
                print(f"pair {i + 1}: found {rate / 1e6:7.2f} Mbit/s per client in {rows[-1][7]} steps | "
                      f"nicbench {t.gbps:.4f} Gbps loss {t.loss * 100:.3f} % | by hand at it {hg:.4f} Gbps loss "
                      f"{hl * 100:.3f} % (ratio {t.gbps / hg:.3f}) | by hand 5 % above {og:.4f} Gbps loss "
                      f"{ol * 100:.3f} %", flush=True)
    finally:
        manager.down(spec.name)

    def med(k: int) -> float:
        return statistics.median(r[k] for r in rows)

    print(f"\nsummary over {len(rows)} pairs ({a.size} B datagrams, 2 clients, {a.speed}bit/s link: UDP ceiling "
          f"{ceiling:.4f} Gbps, threshold {a.threshold * 100:g} %):")
    print(f"  rate found per client: median {med(0) / 1e6:.2f} Mbit/s (x 2 clients = {2 * med(0) / 1e9 / ceiling:.3f}"
          " of the ceiling)")
    print(f"  received at it: nicbench {med(1):.4f} Gbps, by hand {med(3):.4f} Gbps (ratio {med(1) / med(3):.3f})")
    worst, least = max(r[4] for r in rows), min(r[6] for r in rows)
    print(f"  loss at it: nicbench {med(2) * 100:.4f} %, by hand {med(4) * 100:.4f} % (max {worst * 100:.4f} %)")
    print(f"  5 % above it, by hand: {med(5):.4f} Gbps, loss {med(6) * 100:.3f} % (min {least * 100:.3f} %)")


if __name__ == "__main__":
    main()
