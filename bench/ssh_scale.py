#!/usr/bin/env python3
"""SSH at scale: preflight, a dead host, start skew against this machine's
wake-up floor, the controller's memory and descriptors, a point's overhead.

Builds a lab of N hosts in SSH mode (an sshd per host), then, as a run does:

- preflight: connects to every host and checks each (ssh -G, master
  connection, one round trip of checks, five clock reads), all in parallel,
  ``--repeats`` times -- timed;
- a dead host: one host's link down, preflight again: the others must pass
  and the whole must take about that host's own timeout, not more;
- a point: the host samplers started on every host (interface counters at
  0.5 s, as a point runs them), a gated ``sleep 1`` on every host, released
  together with one start time; the spread of the start stamps is the start
  skew (every host shares this machine's clock, so it is exact), compared
  with ``bench/wake_herd.py``'s floor at the same count (N local bash
  processes woken at one instant: no SSH, no lab); the point's overhead is
  its wall time beyond the 1 s the tools run; the controller's memory (its
  own RSS and its ssh clients') and open descriptors are read at its peak.

Needs root; holds nothing itself: run it under the load lock.

    flock /tmp/nicbench-load.lock .venv/bin/python bench/ssh_scale.py --hosts 16 32 64 \\
        [--repeats 3] [--lab bssh] [--subnet 198.18.0.0/24]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from nicbench.hosts.ssh import SshTransport, close_all
from nicbench.hosts.sshcheck import preflight
from nicbench.hosts.transport import parse_gate_stamp
from nicbench.lab import manager, sshd
from nicbench.lab.topology import make_spec
from nicbench.run.kit import PointSamplers, release_together
from nicbench.sampling.sampler import NetTarget

_spec = importlib.util.spec_from_file_location("wake_herd", Path(__file__).with_name("wake_herd.py"))
assert _spec is not None and _spec.loader is not None
wake_herd = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wake_herd)


def _rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _descendants(root: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                ppid = int((p / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(p.name))
    out, todo = [], [root]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def controller_load() -> dict:
    """This process's RSS, its children's (the ssh clients), and its open descriptors."""
    me = os.getpid()
    kids = _descendants(me)
    return {"rss_mib": _rss_kib(me) / 1024, "children": len(kids),
            "children_rss_mib": sum(_rss_kib(k) for k in kids) / 1024, "fds": len(os.listdir("/proc/self/fd"))}


def one(n: int, repeats: int, lab: str, subnet: str) -> dict:
    names = [("srv", "server")] + [(f"c{i}", "client") for i in range(1, n)]
    spec = make_spec(lab, names, 1500, subnet)
    manager.down(spec.name)
    t0 = time.monotonic()
    lab_ = manager.up(spec)
    out: dict = {"hosts": n, "lab_up_s": time.monotonic() - t0, "preflight_s": [], "skew_ms": [], "point_s": [],
                 "load": []}
    try:
        t0 = time.monotonic()
        targets = sshd.start(lab_)
        out["sshd_start_s"] = time.monotonic() - t0
        want = {h.name: {h.ifname: (h.ip, spec.mtu)} for h in spec.hosts}
        with tempfile.TemporaryDirectory() as d:
            for r in range(repeats):
                ts = {h: SshTransport(h, t, lab_.tracker) for h, t in targets.items()}
                t0 = time.monotonic()
                checks, problems = preflight(ts, want)
                out["preflight_s"].append(time.monotonic() - t0)
                assert not problems, problems
                out["slowest_host_preflight_s"] = max(c.seconds or 0 for c in checks.values())
                # a point: host samplers everywhere, a gated sleep 1 everywhere, one release
                t0 = time.monotonic()
                procs = {h: t.spawn(["sleep", "1"], stdout=Path(d, f"{h}-{r}.out"), stderr=Path(d, f"{h}-{r}.err"),
                                    gated=True) for h, t in ts.items()}
                samplers = PointSamplers(f"b{r}", [NetTarget(h, t, lambda: [], "eth0") for h, t in ts.items()],
                                         None, lambda: [], machine="machine", nic_irqs={}).start(first_read=True)
                at = release_together(list(procs.values()), "sleep", "bench")
                for p in procs.values():
                    p.wait(30)
                out["load"].append(controller_load())           # all sessions and samplers still open
                samplers.last_read()
                meta: dict = {}
                samples = samplers.stop(meta)
                out["point_s"].append(time.monotonic() - t0 - 1.0)
                assert not meta.get("counters_missing"), meta.get("counters_missing")
                assert {s.tag("host") for s in samples} == set(ts), "a host's counters are missing"
                stamps = [parse_gate_stamp(Path(p.stderr_path).read_text()) for p in procs.values()]
                assert all(s is not None for s in stamps), stamps
                out["skew_ms"].append((max(stamps) - min(stamps)) * 1000)  # type: ignore[type-var,operator]
                out.setdefault("late_ms", []).append((max(stamps) - at) * 1000)  # type: ignore[operator]
                for p in procs.values():
                    p.stop(0.5)
                close_all(ts)
            # one host down: the others pass, and the whole takes that host's own timeout once
            dead = spec.hosts[-1]
            subprocess.run(["ip", "-n", dead.netns, "link", "set", dead.ifname, "down"], check=True)
            ts = {h: SshTransport(h, t, lab_.tracker) for h, t in targets.items()}
            t0 = time.monotonic()
            checks, problems = preflight(ts, want)
            out["dead_host_preflight_s"] = time.monotonic() - t0
            out["dead_host_timeout_s"] = ts[dead.name].target.connect_timeout + 5
            assert set(checks) == set(ts) - {dead.name} and all(p.startswith(f"{dead.name}:") for p in problems), \
                problems
            close_all(ts)
    finally:
        manager.down(spec.name)
    out["floor_ms"] = [wake_herd.spread(n, "read-t", False) for _ in range(repeats)]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, nargs="+", default=[16, 32, 64])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lab", default="bssh", help="the lab's name (namespaces nb-LAB-*)")
    ap.add_argument("--subnet", default="198.18.0.0/24")
    ap.add_argument("--json", type=Path, help="also write every measurement here")
    a = ap.parse_args()
    rows = [one(n, a.repeats, a.lab, a.subnet) for n in a.hosts]
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))
    med = statistics.median
    print("| SSH hosts | lab up s | sshd start s | preflight s (median, max) | one host dead: preflight s "
          "(its timeout) | start skew ms (median, max) | wake-up floor ms (median) | skew / floor | point "
          "overhead s (median) | controller RSS MiB (+ ssh clients) | open fds |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        load = max(r["load"], key=lambda x: x["fds"])
        print(f"| {r['hosts']} | {r['lab_up_s']:.2f} | {r['sshd_start_s']:.2f} | {med(r['preflight_s']):.2f}, "
              f"{max(r['preflight_s']):.2f} | {r['dead_host_preflight_s']:.2f} ({r['dead_host_timeout_s']:g}) | "
              f"{med(r['skew_ms']):.2f}, {max(r['skew_ms']):.2f} | {med(r['floor_ms']):.2f} | "
              f"{med(r['skew_ms']) / med(r['floor_ms']):.2f} | {med(r['point_s']):.2f} | "
              f"{load['rss_mib']:.0f} (+ {load['children_rss_mib']:.0f} in {load['children']}) | {load['fds']} |")


if __name__ == "__main__":
    main()
