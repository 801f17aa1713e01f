#!/usr/bin/env python3
"""Does the HTTPS harness cost throughput?  nicbench vs nginx + wrk by hand, side by side.

In one embedded lab (server + 2 clients, unshaped, so the CPU is the limit
and any harness cost would show), the same HTTPS point is run alternately
(a) by hand: nginx started with a config file and wrk run in both client
namespaces at once, as an engineer would script it, and (b) through nicbench
(a one-point plan reusing the lab).  Both report wrk's bytes over its run
time, summed over the clients.  Prints per pair and in summary the ratio
nicbench / hand (goal >= 0.97).  Needs root.

    .venv/bin/python bench/https_overhead.py [--pairs 3] [--duration 5] [--connections 8]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from nicbench.api import execute, load_run
from nicbench.lab import manager
from nicbench.plan import parse_plan
from nicbench.run.hosts import lab_spec
from nicbench.tools import nginx, wrk

PLAN = """name = "bench-https"
[lab]
name = "benchh"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
[study]
kind = "https"
schemes = ["https"]
connections = [{conns}]
duration = {duration}
file_size = "64M"
tls_versions = ["1.3"]
"""


def by_hand(spec, conns: int, duration: int, tmp: Path) -> float:
    """nginx + wrk as a shell script would run them: wrk's bytes x 8 / its time, summed (Gbps)."""
    srv = spec.host("srv")
    p = tmp / "nginx"
    for d in ("logs", "tmp", "www"):
        (p / d).mkdir(parents=True, exist_ok=True)
    p.chmod(0o755)
    (p / "www").chmod(0o755)
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "1", "-subj", "/CN=b", "-keyout", str(p / "key.pem"),
                    "-out", str(p / "cert.pem")], check=True, capture_output=True)
    if not (p / "www" / "payload.bin").exists():
        subprocess.run(["sh", "-c", f"head -c {64 << 20} /dev/urandom > {p}/www/payload.bin && "
                        f"chmod 644 {p}/www/payload.bin"], check=True)
    (p / "nginx.conf").write_text(nginx.render(nginx.NginxConf(str(p), srv.ip, 443, 80, tls_versions=("1.3",))))
    server = subprocess.Popen(["ip", "netns", "exec", srv.netns, *nginx.argv(str(p))],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    time.sleep(0.5)
    (p / "wrk.lua").write_text(wrk.lua_text())
    try:
        clients = [h for h in spec.hosts if h.role == "client"]
        runs = [
            subprocess.Popen(
                [
                    "ip",
                    "netns",
                    "exec",
                    h.netns,
                    *wrk.client_argv(
                        f"https://{srv.ip}:443/payload.bin",
                        script=str(p / "wrk.lua"),
                        threads=2,
                        connections=conns // len(clients),
                        duration=duration,
                        timeout=duration + 5,
                    ),
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for h in clients
        ]
        results = [wrk.parse(*r.communicate(timeout=duration + 30)) for r in runs]
        bad = sum(r.bad_status + r.socket_errors for r in results)
        if bad:
            raise SystemExit(f"by hand: {bad} error responses/sockets: the comparison would be meaningless")
    finally:
        import os
        import signal

        os.killpg(server.pid, signal.SIGQUIT)
        server.wait(10)
    return sum(r.gbps for r in results)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--connections", type=int, default=8)
    a = ap.parse_args()
    text = PLAN.format(conns=a.connections, duration=a.duration)
    plan = parse_plan(text)
    spec = lab_spec(plan)
    manager.down(spec.name)
    manager.up(spec)
    ratios = []
    try:
        with tempfile.TemporaryDirectory() as d:
            Path(d).chmod(0o755)  # nginx's workers (nobody) must traverse to the docroot
            for i in range(a.pairs):
                hand = by_hand(spec, a.connections, a.duration, Path(d))
                out = execute(plan, text, store=Path(d) / "store")
                [t] = load_run(out.run_dir).trials
                nb = t.app_gbps or 0.0
                ratios.append(nb / hand)
                print(f"pair {i + 1}: by hand {hand:.3f} Gbps, nicbench {nb:.3f} Gbps, ratio {nb / hand:.3f}")
    finally:
        manager.down(spec.name)
    print(
        f"nicbench / hand: median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f}) "
        f"over {len(ratios)} pairs; goal >= 0.97"
    )


if __name__ == "__main__":
    main()
