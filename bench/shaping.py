#!/usr/bin/env python3
"""Do shaped lab links deliver their configured speed?  Goodput vs the model ceiling.

For each speed, a lab with the server's link shaped to it (GSO/TSO off, tbf;
see nicbench.lab.topology) runs large-IO TCP points in both directions, and
nicbench measures receiver goodput and, from the interface counters over the
same window, the wire rate.  Prints goodput / model ceiling (goal 0.97..1.00 at
every speed this machine's CPU can sustain) and wire / speed.  Needs root.

    .venv/bin/python bench/shaping.py [--speeds 1G,2G,3G,5G,10G] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

from nicbench.api import execute, load_run
from nicbench.core.linerate import format_speed, parse_speed
from nicbench.plan import parse_plan

PLAN = """name = "bench-shaping"
[lab]
name = "bshape"
[link]
mtu = {mtu}
speed = "{speed}"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
[study]
directions = ["tx", "rx"]
io_sizes = ["128K"]
connections = [4]
duration = {duration}
omit = 1
interval = 0.5
trim = 0.5
repeats = {repeats}
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--speeds", default="1G,2G,3G,5G,10G")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--mtu", type=int, default=1500)
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as d:
        for sp in a.speeds.split(","):
            text = PLAN.format(speed=sp, mtu=a.mtu, duration=a.duration, repeats=a.repeats)
            view = load_run(execute(parse_plan(text), text, store=Path(d)).run_dir)
            for p in view.points:
                goods = [t.gbps for t in view.trials if t.point == p.point and t.gbps is not None]
                rows.append((sp, p.params["direction"], p.ceiling_gbps, statistics.median(goods),
                             p.of_ceiling, p.wire_gbps, p.wire_gbps / p.link_gbps if p.wire_gbps else None,
                             min(goods) / p.ceiling_gbps, max(goods) / p.ceiling_gbps))
                print(f"{format_speed(parse_speed(sp))}bit/s {p.params['direction']}: goodput {p.median:.3f} Gbps "
                      f"= {p.of_ceiling:.4f} of the {p.ceiling_gbps:.3f} Gbps ceiling "
                      f"(repeats {min(goods) / p.ceiling_gbps:.4f}..{max(goods) / p.ceiling_gbps:.4f}); "
                      f"wire {p.wire_gbps:.3f} Gbps = {p.wire_gbps / p.link_gbps:.4f} of the speed", flush=True)
    print("\n| speed | direction | ceiling Gbps | goodput Gbps | goodput / ceiling | wire Gbps | wire / speed |")
    print("|---|---|---|---|---|---|---|")
    for sp, d, c, g, f, w, wf, lo, hi in rows:
        print(f"| {sp} | {d} | {c:.3f} | {g:.3f} | {f:.4f} ({lo:.3f}..{hi:.3f}) | {w:.3f} | {wf:.4f} |")


if __name__ == "__main__":
    main()
