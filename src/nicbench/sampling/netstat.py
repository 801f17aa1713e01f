"""Protocol counters from /proc/net/snmp and /proc/net/netstat (pure).

Both files are pairs of lines: ``Proto: name name ...`` then ``Proto: v v ...``.
Per network namespace; read through a process or a shell inside it.
"""

from __future__ import annotations


def parse_snmp(text: str) -> dict[str, dict[str, int]]:
    """``{"Tcp": {"RetransSegs": 12, ...}, "Udp": {...}, "TcpExt": {...}}``."""
    out: dict[str, dict[str, int]] = {}
    lines = [ln for ln in text.splitlines() if ":" in ln]
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        proto, _, keys = names.partition(":")
        proto_v, _, vals = values.partition(":")
        if proto != proto_v:
            continue
        d = out.setdefault(proto.strip(), {})
        for k, v in zip(keys.split(), vals.split(), strict=False):
            try:
                d[k] = int(v)
            except ValueError:
                continue
    return out


# the counters a throughput study wants beside its results.  UDP's say where
# datagrams were lost: SndbufErrors on the sender (a full socket buffer, or a
# qdisc or device queue refusing the packet: the kernel counts ENOBUFS there
# and the application never hears of it), RcvbufErrors on the receiver (its
# socket buffer was full; InErrors includes them), NoPorts (nobody listened),
# ReasmFails (a fragmented datagram missed a fragment)
WATCHED = {("Tcp", "RetransSegs"): "tcp.retrans_segs", ("Tcp", "OutSegs"): "tcp.out_segs",
           ("Udp", "InErrors"): "udp.in_errors", ("Udp", "RcvbufErrors"): "udp.rcvbuf_errors",
           ("Udp", "SndbufErrors"): "udp.sndbuf_errors", ("Udp", "InDatagrams"): "udp.in_datagrams",
           ("Udp", "OutDatagrams"): "udp.out_datagrams", ("Udp", "NoPorts"): "udp.no_ports",
           ("Ip", "InDiscards"): "ip.in_discards", ("Ip", "ReasmFails"): "ip.reasm_fails",
           ("TcpExt", "TCPLostRetransmit"): "tcp.lost_retransmit"}


def watched(counters: dict[str, dict[str, int]]) -> dict[str, int]:
    return {name: counters[p][k] for (p, k), name in WATCHED.items() if p in counters and k in counters[p]}


def fragment_memory(sockstat: str) -> int | None:
    """Bytes held by incomplete IPv4 fragmented datagrams (``FRAG: inuse N
    memory M`` of /proc/net/sockstat, per network namespace); None if absent.

    Held until the datagram completes or ``net.ipv4.ipfrag_time`` passes;
    above ``ipfrag_high_thresh`` every new fragment is dropped."""
    for line in sockstat.splitlines():
        f = line.split()
        if f[:1] == ["FRAG:"] and "memory" in f:
            i = f.index("memory")
            if i + 1 < len(f) and f[i + 1].isdigit():
                return int(f[i + 1])
    return None


def parse_interrupts(text: str) -> dict[str, tuple[dict[str, int], str]]:
    """IRQ -> ({cpu: count}, description) from /proc/interrupts.

    CPUs are named by the header (``CPU0 CPU1 ...`` -> "0", "1"): with a CPU
    offline its column is gone from header and rows alike, so names, not
    positions, say which CPU a count belongs to.  Rows with fewer counts than
    the header (``ERR:``, ``MIS:``) keep what they have.  /proc/softirqs has
    the same layout (``NET_RX: counts``, no description).
    """
    lines = text.splitlines()
    if not lines:
        return {}
    cpus = [c[3:] if c.startswith("CPU") else c for c in lines[0].split()]
    out = {}
    for line in lines[1:]:
        irq, sep, rest = line.partition(":")
        if not sep:
            continue
        f = rest.split()
        counts: dict[str, int] = {}
        for cpu, x in zip(cpus, f, strict=False):
            if not x.isdigit():
                break
            counts[cpu] = int(x)
        out[irq.strip()] = (counts, " ".join(f[len(counts):]))
    return out


# softirqs a network stack spends its receive and transmit work in
NET_SOFTIRQS = ("NET_RX", "NET_TX")


def net_softirqs(text: str) -> dict[str, dict[str, int]]:
    """``{"NET_RX": {cpu: count}, "NET_TX": {...}}`` from /proc/softirqs."""
    rows = parse_interrupts(text)
    return {k: rows[k][0] for k in NET_SOFTIRQS if k in rows}
