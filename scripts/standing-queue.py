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
direction only.  Runs until SIGTERM or Ctrl-C.

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

SINK = "192.0.2.1"          # TEST-NET-1: no lab host has it; a /32 route sends it out of the test interface


def _fill(sndbuf: int) -> None:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    s.connect((SINK, 9))
    payload = bytes(1472)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            s.send(payload)         # blocks while SNDBUF worth waits in the shaper's queue
    except (KeyboardInterrupt, OSError):
        pass


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("lab")
    p.add_argument("--host", default="srv")
    p.add_argument("--ifname", default="eth0")
    p.add_argument("--sndbuf", type=int, default=80000)
    p.add_argument("--fill", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.fill:
        _fill(a.sndbuf)
        return
    ns, sw = f"nb-{a.lab}-{a.host}", f"nb-{a.lab}-sw"
    links = json.loads(subprocess.run(["ip", "-n", sw, "-j", "link", "show", "br0"], check=True,
                                      capture_output=True, text=True).stdout)
    mac = links[0]["address"]
    subprocess.run(["ip", "-n", ns, "route", "replace", f"{SINK}/32", "dev", a.ifname], check=True)
    subprocess.run(["ip", "-n", ns, "neigh", "replace", SINK, "lladdr", mac, "dev", a.ifname, "nud", "permanent"],
                   check=True)
    print(f"standing queue on {ns} {a.ifname} (sndbuf {a.sndbuf}), pid {os.getpid()}", flush=True)
    os.execvp("ip", ["ip", "netns", "exec", ns, sys.executable, os.path.abspath(__file__), a.lab, "--fill",
                     "--sndbuf", str(a.sndbuf)])


if __name__ == "__main__":
    main()
