#!/usr/bin/env python3
"""A path delay for the embedded lab without netem: a standing queue on one
lab host's shaped link, which every packet it sends waits behind.

This kernel has no netem (docs/measurement.md), and a shaped link's queue
delays only what the flow itself puts in it: a window-limited flow keeps it
short, so a small socket buffer never shows as a limit.  This keeps the queue
full from outside the flow: a UDP sender on HOST (default: the lab's server)
to an address that takes nothing (the switch's own MAC, no IP behind it),
blocking on its socket buffer, so it sends only as the shaper drains and
holds about SNDBUF worth of frames queued.  On a link shaped to 100 Mbit/s,
--sndbuf 80000 (the kernel doubles it; ~60 datagrams of 1472 bytes) made a
round trip of ~6 ms for the flows whose ACKs leave HOST (an ``rx`` point).
It takes the link's capacity in HOST's sending direction: measure the other
direction only.  The filler runs at nice -10 (a queue that drains while its
filler waits for a CPU makes the round trip come and go; a loss-based
congestion control such as cubic does not mind, BBR takes the short round
trip as the path's), and stops itself if it ever sends faster than the
shaper passes.  Runs until
SIGTERM or Ctrl-C.

    sudo python3 scripts/standing-queue.py LAB [--host srv] [--sndbuf 80000]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time

SINK = "192.0.2.1"          # TEST-NET-1: no lab host has it; a /32 route sends it out of the test interface


def _fill(sndbuf: int, rate_bps: float) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    s.connect((SINK, 9))
    payload = bytes(1472)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # first in line for a CPU when the shaper frees its socket buffer: a queue that drains while its
    # filler waits is a round trip that comes and goes.  Not real-time: a real-time filler delays the
    # softirq threads that run the shapers themselves (goodput then dipped in 0.5 s intervals)
    os.nice(-10)
    most = 2 * rate_bps / 8 / len(payload)     # datagrams per second a filler behind the shaper can send
    sent, since = 0, time.monotonic()
    try:
        while True:
            s.send(payload)         # blocks while SNDBUF worth waits in the shaper's queue
            sent += 1
            if sent == 2000:
                now = time.monotonic()
                if sent / (now - since) > most:     # not held back: no shaper under it, never spin
                    sys.exit(f"standing queue: {sent / (now - since):.0f} datagrams/s, more than the shaper "
                             "passes: is the link still shaped? stopping")
                sent, since = 0, now
    except (KeyboardInterrupt, OSError):
        pass


def _tbf_rate(ns: str, ifname: str) -> float | None:
    """The rate of the root tbf on the host's interface, bit/s (tc says bytes/s)."""
    out = subprocess.run(["tc", "-n", ns, "-j", "qdisc", "show", "dev", ifname], capture_output=True, text=True)
    for q in json.loads(out.stdout or "[]"):
        if q.get("kind") == "tbf" and q.get("root"):
            return float(q["options"]["rate"]) * 8
    return None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("lab")
    p.add_argument("--host", default="srv")
    p.add_argument("--ifname", default="eth0")
    p.add_argument("--sndbuf", type=int, default=80000)
    p.add_argument("--fill", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--rate", type=float, default=0.0, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.fill:
        _fill(a.sndbuf, a.rate)
        return
    ns, sw = f"nb-{a.lab}-{a.host}", f"nb-{a.lab}-sw"
    rate = _tbf_rate(ns, a.ifname)
    if rate is None:
        sys.exit(f"{ns} {a.ifname} is not shaped (no tbf): a queue there never stands; give the plan's [link] a "
                 "speed")
    links = json.loads(subprocess.run(["ip", "-n", sw, "-j", "link", "show", "br0"], check=True,
                                      capture_output=True, text=True).stdout)
    mac = links[0]["address"]
    subprocess.run(["ip", "-n", ns, "route", "replace", f"{SINK}/32", "dev", a.ifname], check=True)
    subprocess.run(["ip", "-n", ns, "neigh", "replace", SINK, "lladdr", mac, "dev", a.ifname, "nud", "permanent"],
                   check=True)
    print(f"standing queue on {ns} {a.ifname} (sndbuf {a.sndbuf}), pid {os.getpid()}", flush=True)
    os.execvp("ip", ["ip", "netns", "exec", ns, sys.executable, os.path.abspath(__file__), a.lab, "--fill",
                     "--sndbuf", str(a.sndbuf), "--rate", str(rate)])


if __name__ == "__main__":
    main()
