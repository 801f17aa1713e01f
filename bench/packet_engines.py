#!/usr/bin/env python3
"""nbgen vs trafgen: Mpps per busy core on the same lab path, side by side.

Builds a generator and a receiver joined back to back by one veth port
(``queues`` TX/RX queues), then alternates the two engines ``--pairs`` times
for each thread count, 64-byte frames, ``--seconds`` each.  The receiver is
the same for both: nbgen's XDP counter, which drops the frames.  For each
run: frames the receiver counted / the engine's own sending time = Mpps
(nbgen's start..end, trafgen's per-CPU time), and frames / the machine's
busy CPU-seconds over the run (/proc/stat, every CPU: the generator and the
receiver share this machine) = Mpps per busy core.  Prints every
run, the medians and nbgen/trafgen.  Goal: nbgen >= 4 Mpps per busy core
here and >= 8x trafgen.  Needs root.

    .venv/bin/python bench/packet_engines.py [--pairs 3] [--seconds 3] [--threads 1 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from nicbench.lab import manager
from nicbench.lab.topology import DirectLink, make_spec
from nicbench.tools import frames, nbgen, trafgen


def busy_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from the first line of /proc/stat."""
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v[:8]) - idle, sum(v[:8])


def one_run(engine: str, threads: int, seconds: float, lab, exe: str, cfg_dir: Path) -> dict:
    gen, sink = lab.spec.host("gen"), lab.spec.host("sink")
    mac = lambda ns: subprocess.run(["ip", "netns", "exec", ns, "cat", "/sys/class/net/pk0/address"],  # noqa: E731
                                    capture_output=True, text=True).stdout.strip()
    fs = frames.thread_frames(threads, src_mac=mac(gen.netns), dst_mac=mac(sink.netns), src_ip="198.19.0.1",
                              dst_ip="198.19.0.2", size=64)
    cpus = list(range(threads))
    rx = subprocess.Popen(["ip", "netns", "exec", sink.netns, *nbgen.rx_argv(exe, "pk0", duration=seconds + 10,
                                                                             port=9)],
                          stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        first = rx.stdout.readline() if rx.stdout else ""
        assert '"attached"' in first, first
        if engine == "nbgen":
            argv = nbgen.tx_argv(exe, "pk0", fs, duration=seconds, cpus=cpus)
        else:
            conf = cfg_dir / f"tg{threads}.cfg"
            conf.write_text(frames.trafgen_config(fs, cpus))
            argv = trafgen.argv("pk0", str(conf), duration=seconds, cpus=threads)
        b0, t0, w0 = *busy_ticks(), time.monotonic()
        r = subprocess.run(["ip", "netns", "exec", gen.netns, *argv], capture_output=True, text=True,
                           timeout=seconds + 20)
        b1, t1, w1 = *busy_ticks(), time.monotonic()
    finally:
        rx.terminate()
        out, _ = rx.communicate(timeout=10)
    got = nbgen.parse_rx(first + out)
    # the engine's own sending time (not the exec, XDP load or ring set-up around it)
    if engine == "nbgen":
        tx = nbgen.parse_tx(r.stdout, r.stderr)
        span = tx.t_end - tx.t_start
    else:
        sm = trafgen.parse(r.stdout)
        assert sm is not None, r.stdout + r.stderr
        span = sm.seconds
    # busy CPU-seconds of the whole machine over the run, and frames per busy
    # CPU-second: independent of the span above
    busy_s = (b1 - b0) / (t1 - t0) * (os.cpu_count() or 1) * (w1 - w0)
    mpps = got.packets / span / 1e6
    per_core = got.packets / busy_s / 1e6
    return {"engine": engine, "threads": threads, "mpps": mpps, "busy_cores": busy_s / span,
            "mpps_per_core": per_core}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    a = ap.parse_args()
    exe = nbgen.binary()
    if exe is None:
        raise SystemExit("nbgen is not built: run scripts/install.sh")
    spec = make_spec("bpkt", [("gen", "server"), ("sink", "client")], 1500,
                     direct=(DirectLink(0, "gen", "sink", max(a.threads)),))
    manager.down(spec.name)
    lab = manager.up(spec)
    runs = []
    try:
        with tempfile.TemporaryDirectory() as d:
            for threads in a.threads:
                for i in range(a.pairs):
                    order = ("nbgen", "trafgen") if i % 2 == 0 else ("trafgen", "nbgen")
                    for eng in order:
                        r = one_run(eng, threads, a.seconds, lab, exe, Path(d))
                        runs.append(r)
                        print(f"{eng:8s} threads {threads}: {r['mpps']:7.3f} Mpps, {r['busy_cores']:.2f} busy cores,"
                              f" {r['mpps_per_core']:6.3f} Mpps/core", flush=True)
    finally:
        manager.down(spec.name)
    print()
    print("| threads | engine | Mpps (median) | busy cores | Mpps per busy core |")
    print("|---|---|---|---|---|")
    for threads in a.threads:
        med = {}
        for eng in ("nbgen", "trafgen"):
            rs = [r for r in runs if r["engine"] == eng and r["threads"] == threads]
            med[eng] = statistics.median(r["mpps_per_core"] for r in rs)
            print(f"| {threads} | {eng} | {statistics.median(r['mpps'] for r in rs):.3f} | "
                  f"{statistics.median(r['busy_cores'] for r in rs):.2f} | {med[eng]:.3f} |")
        print(f"| {threads} | nbgen / trafgen | | | **{med['nbgen'] / med['trafgen']:.1f}x** |")


if __name__ == "__main__":
    main()
