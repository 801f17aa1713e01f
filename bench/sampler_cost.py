#!/usr/bin/env python3
"""What does sampling cost?  The samplers' own CPU at a 1 s interval.

Starts the CPU sampler (/proc/stat, /proc/softirqs + N tool processes'
/proc/PID/stat) and the network sampler (/proc/PID/net/dev, snmp, netstat)
on every host of a server + 3 clients lab, exactly as a point does, for a
fixed time, and reports the CPU time their threads used (thread CPU clock)
as a percentage of one core.  Goal: under 1 % of one core at a 1 s interval.
Needs root (builds a small lab).

    .venv/bin/python bench/sampler_cost.py [--seconds 30] [--interval 1.0] [--procs 6]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from nicbench.hosts.transport import LocalTransport
from nicbench.lab import manager
from nicbench.lab.topology import make_spec
from nicbench.sampling.sampler import CpuSampler, NetSampler, NetTarget


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--procs", type=int, default=6, help="tool processes followed (sleepers)")
    a = ap.parse_args()
    hosts = ["srv", "c1", "c2", "c3"]
    spec = make_spec("bsamp", [("srv", "server")] + [(h, "client") for h in hosts[1:]], 1500)
    manager.down(spec.name)
    lab = manager.up(spec)
    try:
        with tempfile.TemporaryDirectory() as d:
            # stand-ins for tool processes, spread over the hosts: they only
            # have to exist for --seconds
            sleepers = [lab.transport(hosts[i % len(hosts)]).spawn(
                ["sleep", str(int(a.seconds) + 5)], stdout=Path(d) / f"{i}.out", stderr=Path(d) / f"{i}.err")
                for i in range(max(a.procs, len(hosts)))]
            pids = [p.pid for p in sleepers]
            cpu = CpuSampler(LocalTransport("machine"), lambda: [(p, "srv", "tool", str(p)) for p in pids],
                             machine="machine", trial_id="bench", interval=a.interval).start()
            targets = [NetTarget(h, lab.transport(h), lambda h=h: [p.pid for p in sleepers if p.host == h], "eth0")
                       for h in hosts]
            ctr = NetSampler(targets, trial_id="bench", interval=a.interval).start()
            t0 = time.monotonic()
            time.sleep(a.seconds)
            wall = time.monotonic() - t0
            n_cpu, n_ctr = len(cpu.stop()), len(ctr.stop())
            for p in sleepers:
                p.stop(0.2)
    finally:
        manager.down(spec.name)
    for name, s in (
        (f"CPU sampler (/proc/stat, softirqs + {len(pids)} processes)", cpu),
        (f"network sampler ({len(hosts)} hosts)", ctr),
    ):
        print(
            f"{name}: {s.cpu_seconds * 1000:.1f} ms CPU in {wall:.1f} s = "
            f"{100 * s.cpu_seconds / wall:.3f} % of one core ({len(s.reads)} reads)"
        )
    total = (cpu.cpu_seconds + ctr.cpu_seconds) / wall * 100
    print(f"both: {total:.3f} % of one core at a {a.interval:g} s interval (goal < 1 %); {n_cpu + n_ctr} samples")


if __name__ == "__main__":
    main()
