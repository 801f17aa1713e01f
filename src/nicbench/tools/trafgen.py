"""trafgen (netsniff-ng), the AF_PACKET generator: argv and its summary.

trafgen has no machine-readable output: its exit summary is parsed only as
a cross-check, the sent rate comes from the generator's interface counters.
It runs under ``timeout -s INT``, so every load stops by itself, and on
SIGINT it prints that summary.  ``--no-sock-mem`` because it otherwise
rewrites net.core.*mem* host-wide (and its ``-A`` short form is broken in
0.6.8, see LAB-NOTES); qdisc bypass is its default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .base import damage_is_a_tool_error

RING_FRAME = 2048        # its default ring frame size: bigger frames need -J


def argv(dev: str, conf: str, *, duration: float, cpus: int, rate: float | None = None,
         frame_size: int = 64) -> list[str]:
    a = ["timeout", "-s", "INT", f"{duration:g}", "trafgen", "--dev", dev, "--conf", conf, "--cpus", str(cpus),
         "--no-sock-mem", "--notouch-irq"]
    if rate:
        a += ["--rate", f"{rate:.0f}pps"]
    if frame_size > RING_FRAME:
        a.append("--jumbo-support")
    return a


# trafgen 0.6.x flushes its TX ring with sendto(MSG_DONTWAIT) and panics on
# EAGAIN (it lets only ENOBUFS pass): the socket's send buffer was full of
# frames the receiver had not taken yet.  Seen over veth into an XDP receiver
# (the peer's 256-frame XDP ring holds about net.core.wmem_default's 212992
# bytes of 64-byte skbs) in 5 of 25 SSH lab runs at full rate; never paced.
# --no-sock-mem keeps trafgen from raising the host's wmem_* itself.
FULL_SNDBUF = "Flushing TX_RING failed: Resource temporarily unavailable"


def failure_hint(stderr: str) -> str | None:
    """What to do about a trafgen failure nicbench recognises (None: not one)."""
    if FULL_SNDBUF in stderr:
        return ("trafgen 0.6.x gives up when its socket's send buffer is full (EAGAIN), i.e. the receiver fell "
                "behind: run the point again, pace it (study.rate), or raise net.core.wmem_default on the "
                "generator host (a tuning profile's sysctl; nicbench never lets trafgen change it)")
    return None


@dataclass(frozen=True)
class Summary:
    packets: int
    bytes: int
    per_cpu: dict[int, int]            # CPU -> packets
    seconds: float                     # the longest CPU's sending time


_PKTS = re.compile(r"^\s*(\d+) packets outgoing", re.M)
_BYTES = re.compile(r"^\s*(\d+) bytes outgoing", re.M)
_CPU = re.compile(r"^\s*(\d+) sec, (\d+) usec on CPU(\d+) \((\d+) packets\)", re.M)


@damage_is_a_tool_error("trafgen", "see the raw output file")
def parse(stdout: str) -> Summary | None:
    """trafgen's exit summary, or None if it never printed one (killed)."""
    text = stdout.replace("\r", "\n")
    p, b = _PKTS.search(text), _BYTES.search(text)
    if p is None or b is None:
        return None
    cpus = {int(m[3]): int(m[4]) for m in _CPU.finditer(text)}
    secs = max((int(m[1]) + int(m[2]) / 1e6 for m in _CPU.finditer(text)), default=0.0)
    return Summary(int(p[1]), int(b[1]), cpus, secs)
