#!/usr/bin/env python3
"""SSH at scale: preflight time, point start time and start skew on N SSH hosts.

Builds a lab of N hosts in SSH mode (an sshd per host), then, as a run does:
connects to every host and runs the SSH preflight (one round trip of checks
and five clock reads per host, all hosts in parallel) -- timed; spawns a gated
process on every host (the wrapper: own process group, PID, watchdog) and
waits until every gate is ready -- timed as "start a point"; releases them
back to back and reads each host's gate stamp: the spread of the stamps is
the start skew (every host shares this machine's clock, so it is exact).
Goals: preflight of 16 hosts under 5 s, start skew under 5 ms.  Needs root.

    .venv/bin/python bench/ssh_scale.py [--hosts 3 16] [--repeats 3] [--same-clock]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from nicbench.hosts.ssh import SshTransport, close_all
from nicbench.hosts.sshcheck import preflight
from nicbench.hosts.transport import parse_gate_stamp
from nicbench.lab import manager, sshd
from nicbench.lab.topology import make_spec
from nicbench.run.kit import release_together


def one(n: int, repeats: int, same_clock: bool) -> dict:
    names = [("srv", "server")] + [(f"c{i}", "client") for i in range(1, n)]
    spec = make_spec("bssh", names, 1500)
    manager.down(spec.name)
    lab = manager.up(spec)
    out: dict = {"hosts": n, "preflight_s": [], "start_s": [], "skew_ms": []}
    try:
        t0 = time.monotonic()
        targets = sshd.start(lab)
        out["sshd_start_s"] = time.monotonic() - t0
        want = {h.name: {h.ifname: (h.ip, spec.mtu)} for h in spec.hosts}
        with tempfile.TemporaryDirectory() as d:
            for r in range(repeats):
                ts = {h: SshTransport(h, t, lab.tracker) for h, t in targets.items()}
                t0 = time.monotonic()
                checks, problems = preflight(ts, want)
                if same_clock:           # the lab's hosts share this clock: a measured offset is noise
                    for t in ts.values():
                        t.clock_offset = 0.0
                out["preflight_s"].append(time.monotonic() - t0)
                assert not problems, problems
                out["max_clock_offset_ms"] = max(abs(c.clock_offset_s or 0) for c in checks.values()) * 1000
                t0 = time.monotonic()
                procs = [
                    t.spawn(["sleep", "1"], stdout=Path(d, f"{h}-{r}.out"), stderr=Path(d, f"{h}-{r}.err"), gated=True)
                    for h, t in ts.items()
                ]
                while not all(p.is_ready() for p in procs):
                    time.sleep(0.001)
                out["start_s"].append(time.monotonic() - t0)
                at = release_together(procs, "true", "bench")
                for p in procs:
                    p.wait(10)
                stamps = [parse_gate_stamp(Path(p.stderr_path).read_text()) for p in procs]
                assert all(s is not None for s in stamps), stamps
                out["skew_ms"].append((max(stamps) - min(stamps)) * 1000)  # type: ignore[type-var,operator]
                out.setdefault("late_ms", []).append((max(stamps) - at) * 1000)  # type: ignore[operator]
                out.setdefault("early_ms", []).append((min(stamps) - at) * 1000)  # type: ignore[operator]
                for p in procs:
                    p.stop(0.5)
                close_all(ts)
    finally:
        manager.down(spec.name)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, nargs="+", default=[3, 16])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--same-clock",
        action="store_true",
        help="do not apply the measured clock offsets (all lab hosts share this machine's clock)",
    )
    a = ap.parse_args()
    rows = [one(n, a.repeats, a.same_clock) for n in a.hosts]
    print(
        "| SSH hosts | sshd start s | preflight s (median, max) | point start s (median) | start skew ms "
        "(median, max) | max clock offset ms |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['hosts']} | {r['sshd_start_s']:.2f} | {statistics.median(r['preflight_s']):.2f}, "
            f"{max(r['preflight_s']):.2f} | {statistics.median(r['start_s']):.2f} | "
            f"{statistics.median(r['skew_ms']):.2f}, {max(r['skew_ms']):.2f} | {r['max_clock_offset_ms']:.2f} |"
            f" first/last start vs the time asked, ms: {[round(x, 2) for x in r['early_ms']]} / "
            f"{[round(x, 2) for x in r['late_ms']]}"
        )


if __name__ == "__main__":
    main()
