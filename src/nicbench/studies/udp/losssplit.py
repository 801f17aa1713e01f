"""Where a UDP point's datagrams were lost, from the kernel's counters over
the point's window (pure).

The tool says how many datagrams its receivers missed; the counters of every
host say where, for a one-way point (tx or rx; a bidir point mixes both ways
in every counter, so it gets no split):

- on the sending host: ``Udp SndbufErrors`` -- a send the kernel dropped for
  want of buffer: the socket's, or a qdisc or device queue refusing the
  packet (ENOBUFS, counted and not returned to a UDP application);
- on the wire: frames the senders' interfaces transmitted minus frames the
  receivers' interfaces received (the switch, the links, their shapers);
- on the receiving host before UDP: frames received that never reached UDP
  (firewall, IP discards, reassembly failures of fragmented datagrams);
- in the receiver's socket buffer: ``Udp RcvbufErrors`` (the application did
  not read fast enough; ``net.core.rmem_max`` caps what ``-w`` can ask).

Datagrams, not frames: interface frames are divided by the IP fragments one
datagram takes.  Every count is prorated over the window from the sampled
spans, like the goodput; a series that does not cover the window is left
out (None), never understated.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ...analysis.aggregate import covers, integrate, wire_rate
from ...analysis.counters import Counters
from ...records import Sample


@dataclass(frozen=True)
class LossSplit:
    """One direction's datagrams over the window, counted at each stage."""

    direction: str
    fragments: int                  # IP fragments per datagram (1: it fits one packet)
    sent: float | None              # the senders' own count (tool)
    sndbuf_errors: float | None     # dropped on the sending hosts
    wire_out: float | None          # left the senders' interfaces
    wire_in: float | None           # reached the receivers' interfaces
    delivered: float | None         # reached UDP sockets on the receivers (Udp InDatagrams)
    in_errors: float | None         # UDP receive errors on the receivers (RcvbufErrors among them)
    rcvbuf_errors: float | None     # the receivers' socket buffers were full
    received: float                 # the receivers' own count (tool)

    @staticmethod
    def _minus(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a - b

    @property
    def on_wire(self) -> float | None:
        return self._minus(self.wire_out, self.wire_in)

    @property
    def before_udp(self) -> float | None:
        """Received by the interfaces, never seen by UDP (firewall, IP, reassembly)."""
        if self.wire_in is None or self.delivered is None or self.in_errors is None:
            return None
        return self.wire_in - self.delivered - self.in_errors

    @property
    def lost(self) -> float | None:
        """Datagrams the counters saw go missing: on the sending host, on the
        wire, before UDP and in the socket buffer."""
        parts = (self.sndbuf_errors, self.on_wire, self.before_udp, self.rcvbuf_errors)
        return None if any(x is None for x in parts) else sum(x for x in parts if x is not None)

    @property
    def loss(self) -> float | None:
        """The counters' loss, as a fraction of the datagrams sent (lost + delivered),
        to set beside the tool's."""
        if self.lost is None or self.delivered is None or self.lost + self.delivered <= 0:
            return None
        return self.lost / (self.lost + self.delivered)

    @property
    def agreement(self) -> float | None:
        """UDP's deliveries over the tool's received count (1.0: they agree)."""
        return self.delivered / self.received if self.delivered is not None and self.received else None


def _host_total(c: Counters | None, hosts: Iterable[str], metric: str) -> float | None:
    if c is None:
        return None
    vals = [c.per_host.get(h, {}).get(metric) for h in hosts]
    return None if any(v is None for v in vals) else sum(v for v in vals if v is not None)


def _frames(samples: Sequence[Sample], hosts: Iterable[str], direction: str,
            window: tuple[float, float]) -> float | None:
    total = 0.0
    for h in hosts:
        w = wire_rate(samples, direction=direction, window=window, host=h)
        if w is None:
            return None
        total += w.frames
    return total


def tool_count(samples: Sequence[Sample], metric: str, direction: str, side: str,
               window: tuple[float, float]) -> float | None:
    """A tool's count (``udp.packets``, ``udp.lost``, ...) over the window,
    summed over its processes; None unless every process covers the window."""
    procs: dict[tuple[str | None, str | None], list[Sample]] = {}
    for s in samples:
        if (s.metric == metric and s.tag("direction") == direction and s.tag("side") == side
                and s.tag("omitted", "0") != "1" and s.t_end > s.t_start):
            procs.setdefault((s.tag("host"), s.tag("proc")), []).append(s)
    if not procs:
        return None
    total = 0.0
    for v in procs.values():
        v.sort(key=lambda x: x.t_start)
        if not covers(v, *window, slack=0.05):
            return None
        total += integrate(v, *window)
    return total


def loss_split(samples: Sequence[Sample], direction: str, window: tuple[float, float], *, senders: list[str],
               receivers: list[str], counters: Counters | None, fragments: int, received: float,
               sent: float | None) -> LossSplit:
    """The split of one direction (``tx``: the study server sends) over
    ``window``.  ``sent``: the senders' count over it (from their own rate:
    their intervals sit on their own clock and need not cover the receivers'
    window)."""
    out_f = _frames(samples, senders, "tx", window)
    in_f = _frames(samples, receivers, "rx", window)
    return LossSplit(
        direction, fragments, sent,
        _host_total(counters, senders, "udp.sndbuf_errors"),
        out_f / fragments if out_f is not None else None, in_f / fragments if in_f is not None else None,
        _host_total(counters, receivers, "udp.in_datagrams"), _host_total(counters, receivers, "udp.in_errors"),
        _host_total(counters, receivers, "udp.rcvbuf_errors"), received)
