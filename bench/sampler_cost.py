#!/usr/bin/env python3
"""What does sampling cost?  The samplers' own CPU at a 1 s interval.

Starts the CPU sampler (/proc/stat + N tool processes' /proc/PID/stat) and
the interface-counter sampler on a lab host, exactly as a point does, for a
fixed time, and reports the CPU time their threads used (thread CPU clock)
as a percentage of one core.  Goal: under 1 % of one core at a 1 s interval.
Needs root (builds a small lab).

    .venv/bin/python bench/sampler_cost.py [--seconds 30] [--interval 1.0] [--procs 6]
"""

from __future__ import annotations

import argparse
import subprocess
import tempfile
import time
from pathlib import Path

from nicbench.hosts.transport import LocalTransport
from nicbench.lab import manager
from nicbench.lab.topology import make_spec
from nicbench.sampling.sampler import CounterSampler, CpuSampler


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--interval", type=float, default=1.0)
    ap.add_argument("--procs", type=int, default=6, help="tool processes followed (sleepers)")
    a = ap.parse_args()
    spec = make_spec("bsamp", [("srv", "server"), ("c1", "client")], 1500)
    manager.down(spec.name)
    lab = manager.up(spec)
    try:
        with tempfile.TemporaryDirectory() as d:
            srv = lab.transport("srv")
            # stand-ins for tool processes: they only have to exist for --seconds
            sleepers = [srv.spawn(["sleep", str(int(a.seconds) + 5)], stdout=Path(d) / f"{i}.out",
                                  stderr=Path(d) / f"{i}.err") for i in range(a.procs)]
            pids = [p.pid for p in sleepers]
            cpu = CpuSampler(LocalTransport("machine"), lambda: [(p, "srv", "tool", str(p)) for p in pids],
                             machine="machine", trial_id="bench", interval=a.interval).start()
            ctr = CounterSampler(srv, lambda: pids, host="srv", ifname="eth0", trial_id="bench",
                                 interval=a.interval).start()
            t0 = time.monotonic()
            time.sleep(a.seconds)
            wall = time.monotonic() - t0
            n_cpu, n_ctr = len(cpu.stop()), len(ctr.stop())
            for p in sleepers:
                p.stop(0.2)
    finally:
        manager.down(spec.name)
    for name, s in (("CPU sampler (/proc/stat + %d processes)" % a.procs, cpu), ("counter sampler", ctr)):
        print(f"{name}: {s.cpu_seconds * 1000:.1f} ms CPU in {wall:.1f} s = "
              f"{100 * s.cpu_seconds / wall:.3f} % of one core ({len(s.reads)} reads)")
    total = (cpu.cpu_seconds + ctr.cpu_seconds) / wall * 100
    print(f"both: {total:.3f} % of one core at a {a.interval:g} s interval (goal < 1 %); "
          f"{n_cpu + n_ctr} samples")


if __name__ == "__main__":
    main()
