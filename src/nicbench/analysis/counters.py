"""Network counters over a point's window: drops, errors, retransmits, softirqs, IRQs.

The tools report their own view (iperf3: retransmits of its sockets only);
these are the kernel's, per host, over the same window the goodput was summed
on.  Counts are prorated from the sampled spans like the wire rate, and a
series that does not cover the whole window is left out rather than
understated.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..records import Sample
from .aggregate import covers, integrate

# protocol counters (``net.*`` samples) summed over hosts, and what a non-zero value means
PROTO_WARN = {
    "udp.rcvbuf_errors": "UDP receive buffers overflowed: raise net.core.rmem_max / the socket buffer",
    "udp.in_errors": "UDP datagrams were dropped on receive",
    "udp.sndbuf_errors": "UDP sends were dropped on the sending host (socket buffer, qdisc or device queue full)",
    "ip.reasm_fails": "fragmented datagrams could not be reassembled (a fragment was lost)",
    "ip.in_discards": "IP dropped packets on input (no buffer)",
}


@dataclass(frozen=True)
class Counters:
    """Totals over one window."""

    window: tuple[float, float]
    per_host: dict[str, dict[str, float]] = field(default_factory=dict)   # host -> metric -> count
    softirq_per_s: dict[str, dict[str, float]] = field(default_factory=dict)   # NET_RX -> cpu -> per s
    irq_per_s: dict[str, dict[str, float]] = field(default_factory=dict)       # irq label -> cpu -> per s

    def total(self, metric: str) -> float | None:
        vals = [m[metric] for m in self.per_host.values() if metric in m]
        return sum(vals) if vals else None


Key = tuple[str | None, ...]


# every metric the series of :func:`counters` read starts so
_COUNTER_PREFIXES = ("net.", "if.drops", "if.errors", "softirq.count", "irq.count")


def _series(samples: Iterable[Sample], key: Callable[[Sample], Key | None]) -> dict[Key, list[Sample]]:
    out: dict[Key, list[Sample]] = defaultdict(list)
    for s in samples:
        k = key(s)
        if k is not None and s.t_end > s.t_start:
            out[k].append(s)
    return {k: sorted(v, key=lambda x: x.t_start) for k, v in out.items()}


def counters(samples: Iterable[Sample], window: tuple[float, float]) -> Counters | None:
    # only the counters' samples, in their order: the series below read each
    # one's tags, and a long point is 100,000s of throughput samples with none
    samples = [s for s in samples if s.metric.startswith(_COUNTER_PREFIXES)]
    w0, w1 = window
    if w1 <= w0:
        return None
    secs = w1 - w0
    per_host: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    net = _series(samples, lambda s: (s.tag("host"), s.metric[4:], "") if s.metric.startswith("net.") else
                  (s.tag("host"), s.metric, s.tag("direction"))
                  if s.metric in ("if.drops", "if.errors") else None)
    for (host, metric, direction), v in net.items():
        if covers(v, w0, w1):
            name = f"{metric}.{direction}" if direction else str(metric)
            per_host[str(host)][name] += integrate(v, w0, w1)
    soft: dict[str, dict[str, float]] = defaultdict(dict)
    irq: dict[str, dict[str, float]] = defaultdict(dict)
    for metric, target, tag in (("softirq.count", soft, "kind"), ("irq.count", irq, "irq")):
        ser = _series(samples, lambda s, m=metric, t=tag: (s.tag(t), s.tag("cpu")) if s.metric == m else None)  # type: ignore[misc]
        for (label, cpu), v in ser.items():
            if covers(v, w0, w1):
                target[str(label)][str(cpu)] = integrate(v, w0, w1) / secs
    if not per_host and not soft and not irq:
        return None
    return Counters(window, {h: dict(m) for h, m in per_host.items()}, dict(soft), dict(irq))


def drops(c: Counters | None) -> dict[str, float]:
    """Every host's interface drops and errors over the window, as
    ``"host if.drops.rx"`` -> count (the verdict's evidence)."""
    return {f"{h} {k}": v for h, m in (c.per_host.items() if c else ()) for k, v in m.items()
            if k.startswith(("if.drops.", "if.errors."))}


def counter_warnings(c: Counters) -> list[str]:
    """Warnings that name the fix."""
    out = []
    for host, m in sorted(c.per_host.items()):
        for d in ("rx", "tx"):
            n = m.get(f"if.drops.{d}", 0.0)
            if n >= 1:
                out.append(f"{host} dropped {n:.0f} packets on {d}: "
                           + ("the ring or backlog overflowed; raise rings (ethtool -G) or "
                              "net.core.netdev_max_backlog" if d == "rx" else
                              "the device queue overflowed; raise txqueuelen or the ring (ethtool -G); "
                              "on a veth, the peer's backlog did (net.core.netdev_max_backlog)"))
            e = m.get(f"if.errors.{d}", 0.0)
            if e >= 1:
                out.append(f"{host} counted {e:.0f} interface {d} errors: check cabling/optics and "
                           "ethtool -S")
        for metric, why in PROTO_WARN.items():
            if m.get(metric, 0.0) >= 1:
                out.append(f"{host}: {m[metric]:.0f} x {metric}: {why}")
    return out
