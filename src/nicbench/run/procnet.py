"""Readiness of a server: is PORT in LISTEN state in the process's namespace?

Read from ``/proc/PID/net/tcp{,6}``, which shows the network namespace of
PID; no extra process is started, so waiting costs almost nothing.
"""

from __future__ import annotations


def listening_ports(text: str) -> set[int]:
    """Ports in state LISTEN (0A) in a /proc/net/tcp or tcp6 table."""
    ports = set()
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) > 3 and f[3] == "0A":
            try:
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
            except (IndexError, ValueError):
                continue
    return ports
