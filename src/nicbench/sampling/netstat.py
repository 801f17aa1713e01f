"""Protocol counters from /proc/net/snmp and /proc/net/netstat (pure).

Both files are pairs of lines: ``Proto: name name ...`` then ``Proto: v v ...``.
Per network namespace; read through a process or a shell inside it.
"""

from __future__ import annotations


def parse_snmp(text: str) -> dict[str, dict[str, int]]:
    """``{"Tcp": {"RetransSegs": 12, ...}, "Udp": {...}, "TcpExt": {...}}``."""
    out: dict[str, dict[str, int]] = {}
    lines = [ln for ln in text.splitlines() if ":" in ln]
    for names, values in zip(lines[::2], lines[1::2]):
        proto, _, keys = names.partition(":")
        proto_v, _, vals = values.partition(":")
        if proto != proto_v:
            continue
        d = out.setdefault(proto.strip(), {})
        for k, v in zip(keys.split(), vals.split()):
            try:
                d[k] = int(v)
            except ValueError:
                continue
    return out


# the counters a throughput study wants beside its results
WATCHED = {("Tcp", "RetransSegs"): "tcp.retrans_segs", ("Tcp", "OutSegs"): "tcp.out_segs",
           ("Udp", "InErrors"): "udp.in_errors", ("Udp", "RcvbufErrors"): "udp.rcvbuf_errors",
           ("Ip", "InDiscards"): "ip.in_discards", ("TcpExt", "TCPLostRetransmit"): "tcp.lost_retransmit"}


def watched(counters: dict[str, dict[str, int]]) -> dict[str, int]:
    return {name: counters[p][k] for (p, k), name in WATCHED.items() if p in counters and k in counters[p]}


def parse_interrupts(text: str) -> dict[str, tuple[list[int], str]]:
    """IRQ -> (count per CPU, description) from /proc/interrupts."""
    lines = text.splitlines()
    if not lines:
        return {}
    ncpu = len(lines[0].split())
    out = {}
    for line in lines[1:]:
        irq, _, rest = line.partition(":")
        f = rest.split()
        counts = []
        for x in f[:ncpu]:
            if not x.isdigit():
                break
            counts.append(int(x))
        out[irq.strip()] = (counts, " ".join(f[len(counts):]))
    return out


def irqs_of(interrupts: dict[str, tuple[list[int], str]], ifname: str) -> dict[str, list[int]]:
    """The IRQs whose description names the interface (``eth0-TxRx-0``, ``eth0``)."""
    return {irq: c for irq, (c, desc) in interrupts.items()
            if any(tok == ifname or tok.startswith(ifname + "-") for tok in desc.split())}
