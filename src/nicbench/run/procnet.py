"""Readiness of a server: is PORT in LISTEN state (TCP), or bound (UDP), *on a
socket that process owns*?

Read from ``/proc/PID/net/{tcp,udp}{,6}`` (the table of PID's network namespace) and
matched against the socket inodes among ``/proc/PID/fd``: a LISTEN row alone
could belong to another process, or to the root namespace in the instant
before ``ip netns exec`` switched namespace.  No extra process is started.
"""

from __future__ import annotations


def listening(text: str, state: str = "0A") -> dict[int, set[int]]:
    """Port -> socket inodes in state LISTEN (0A), from a /proc/net/tcp or tcp6 table."""
    out: dict[int, set[int]] = {}
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) > 3 and f[3] == state:
            try:
                port = int(f[1].rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):
                continue
            inode = int(f[9]) if len(f) > 9 and f[9].isdigit() else 0
            out.setdefault(port, set()).add(inode)
    return out


def bound_udp(text: str) -> dict[int, set[int]]:
    """Port -> inodes of UDP sockets bound and not connected (state 07), from a
    /proc/net/udp or udp6 table: a UDP server waiting for its first datagram."""
    return listening(text, "07")


def connected_udp(text: str) -> dict[int, set[int]]:
    """Port -> inodes of connected UDP sockets (state 01): an iperf3 UDP server
    connects one per stream once the stream's set-up datagram arrived."""
    return listening(text, "01")


def listening_ports(text: str) -> set[int]:
    return set(listening(text))


def socket_inodes(fd_links: list[str]) -> set[int]:
    """Inodes from ``readlink /proc/PID/fd/*`` targets such as ``socket:[12345]``."""
    out = set()
    for link in fd_links:
        if link.startswith("socket:[") and link.endswith("]"):
            try:
                out.add(int(link[8:-1]))
            except ValueError:
                continue
    return out


def _addr(hexaddr: str) -> str:
    """``0100007F:1F90`` (/proc/net/tcp, little-endian words) -> ``127.0.0.1``; tcp6 as IPv6."""
    ip = bytes.fromhex(hexaddr)
    words = [ip[i:i + 4][::-1] for i in range(0, len(ip), 4)]
    raw = b"".join(words)
    if len(raw) == 4:
        return ".".join(str(b) for b in raw)
    if raw[:12] == b"\0" * 10 + b"\xff\xff":
        return ".".join(str(b) for b in raw[12:])          # an IPv4-mapped IPv6 address
    return ":".join(raw[i:i + 2].hex() for i in range(0, 16, 2))


def established_peers(text: str, port: int) -> list[tuple[str, int]]:
    """(address, port) of every ESTABLISHED connection to local ``port``, from a
    /proc/net/tcp or tcp6 table (rows it cannot read are skipped)."""
    out: list[tuple[str, int]] = []
    for line in text.splitlines()[1:]:
        f = line.split()
        if len(f) > 3 and f[3] == "01":
            try:
                lport = int(f[1].rsplit(":", 1)[1], 16)
                rhex, rport = f[2].rsplit(":", 1)
                if lport == port:
                    out.append((_addr(rhex), int(rport, 16)))
            except (IndexError, ValueError):
                continue
    return out
