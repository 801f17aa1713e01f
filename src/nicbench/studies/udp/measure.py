"""What every engine's measurement in the UDP study shares: the context the
preflight decided, the counts a step is judged by (:class:`Tally`,
:class:`Measured`), the prelude of a point (fragmented datagrams drained
first), the samples of an interval, and the check that a receiver counted
something (with the kernel's counters saying why not).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...core import linerate
from ...hosts.transport import Transport
from ...plan.studies.udp import UdpStudy
from ...records import RawOutput, Sample, TrialRecord, TrialSpec
from ...run import iperf
from ...run.iperf import DIRECTION, ProcSlot
from ...run.nbperf import NbperfHosts
from ...sampling.netstat import fragment_memory
from ...tools.base import FlowInterval, ToolInfo

FRAG_TIME_S = 30.0    # Linux's default net.ipv4.ipfrag_time, when a host does not say
EXPECTED = {"tx": ("tx",), "rx": ("rx",), "bidir": ("tx", "rx")}


@dataclass(frozen=True)
class UdpContext:
    """What the UDP study's preflight decided, for every point."""

    study: UdpStudy
    server: str
    clients: list[str]
    transports: dict[str, Transport]
    addresses: dict[str, str]             # host -> test address
    tool: ToolInfo
    mtu: int
    speed_bps: float | None = None        # the server's link, for the search's upper bound
    client_speed_bps: float | None = None
    exes: dict[str, str] = field(default_factory=dict)    # engine nbperf: host -> nbperf there

    @property
    def nbperf(self) -> NbperfHosts:
        return NbperfHosts(self.server, self.clients, self.transports, self.addresses, self.exes,
                                         self.tool)


@dataclass
class Tally:
    """One engine process pair's counts in one direction over its measured
    part (warm-up left out): datagrams and bytes, and the seconds they span."""

    sent: int = 0
    sent_bytes: int = 0
    sent_s: float = 0.0
    expected: int = 0
    lost: int = 0
    got_bytes: int = 0
    got_s: float = 0.0
    receiver_seen: bool = False
    lost_unknown: bool = False     # an interval's lost count could not be true (iperf3 3.12): the loss is unknown

    def add(self, iv: FlowInterval) -> None:
        if iv.omitted:
            return
        if iv.side == "sender":
            self.sent += iv.packets or 0
            self.sent_bytes += iv.bytes
            self.sent_s += iv.end - iv.start
        else:
            self.receiver_seen = True
            self.expected += iv.packets or 0
            self.lost += iv.lost or 0
            self.lost_unknown = self.lost_unknown or (iv.lost is None and bool(iv.packets))
            self.got_bytes += iv.bytes
            self.got_s += iv.end - iv.start


@dataclass
class Measured:
    """A measurement as it ran, and what the search judges it by."""

    record: TrialRecord
    samples: list[Sample]
    raws: list[RawOutput]
    tallies: dict[tuple[str, str], Tally] = field(default_factory=dict)   # (client:port, direction) -> counts
    nothing: str | None = None       # a receiver counted nothing while its sender sent: why (the point failed)

    def figures(self) -> tuple[float, float, float | None]:
        """(sent, received bit/s of payload, loss) of the point: rates summed
        over processes, the loss the worst direction's."""
        sent = sum(t.sent_bytes * 8 / t.sent_s for t in self.tallies.values() if t.sent_s > 0)
        got = sum(t.got_bytes * 8 / t.got_s for t in self.tallies.values() if t.got_s > 0)
        losses = []
        for d in {d for _, d in self.tallies}:
            ts = [t for (_, dd), t in self.tallies.items() if dd == d]
            if any(t.lost_unknown for t in ts):
                return sent, got, None          # never a loss made of the counts that were known
            expected = sum(t.expected for t in ts)
            if expected:
                losses.append(sum(t.lost for t in ts) / expected)
        return sent, got, max(losses) if losses else None


def fragment_warnings(s: UdpStudy, mtu: int) -> list[str]:
    warnings: list[str] = []
    frag = [f"{n} B: {len(linerate.udp_fragments(n, mtu))} fragments" for n in s.datagram_sizes
            if len(linerate.udp_fragments(n, mtu)) > 1]
    if frag:
        warnings.append(f"datagrams above {mtu - 28} B do not fit one packet at MTU {mtu} and travel as IP "
                        f"fragments ({', '.join(frag)}): losing one fragment loses the datagram, and incomplete ones "
                        "hold the receiver's reassembly memory (net.ipv4.ipfrag_high_thresh) for "
                        "net.ipv4.ipfrag_time; such points first wait until no host holds any")
    return warnings


def clients_of(ctx: UdpContext, spec: TrialSpec) -> list[str]:
    n = spec.params.get("clients")
    return ctx.clients[:int(n)] if n else list(ctx.clients)


def prelude(ctx: UdpContext, spec: TrialSpec, rate: float | None, slots: Sequence[ProcSlot]) -> dict[str, Any]:
    """What every engine's measurement starts with: a point of fragmented
    datagrams waits until no host holds incomplete ones; its meta."""
    s, p = ctx.study, spec.params
    streams, size = int(p["streams"]), int(p["datagram_size"])
    hosts = [ctx.server, *dict.fromkeys(sl.client for sl in slots)]
    drained = drain_fragments(ctx.transports, hosts) if len(linerate.udp_fragments(size, ctx.mtu)) > 1 else None
    meta: dict[str, Any] = {"layout": [vars(x) for x in slots], "engine": s.engine, "server": ctx.server,
                            "engine_version": ctx.tool.version_str, "rate_per_client_bps": rate,
                            "rate_per_stream_bps": None if rate is None else rate / streams, "datagram_size": size,
                            "window": s.window}
    if drained:
        meta["fragment_wait_s"] = drained[0]
        if drained[1]:
            meta["warnings"] = [f"{', '.join(drained[1])} still held incomplete fragmented datagrams after "
                                f"{drained[0]:.0f} s: new fragments may be dropped (net.ipv4.ipfrag_high_thresh)"]
    return meta


def drain_fragments(transports: dict[str, Transport], hosts: Sequence[str]) -> tuple[float, list[str]]:
    """Wait until no host holds incomplete fragmented datagrams (their memory in
    /proc/net/sockstat), at most the longest ``net.ipv4.ipfrag_time`` of them
    plus a second; (seconds waited, hosts still holding some)."""
    t0 = time.monotonic()
    limit = max(_frag_time(transports[h]) for h in hosts) + 1.0
    while True:
        held = [h for h in hosts if (_read_frag(transports[h]) or 0) > 0]
        if not held or time.monotonic() - t0 > limit:
            return time.monotonic() - t0, held
        time.sleep(0.5)


def _read_frag(t: Transport) -> int | None:
    try:
        return fragment_memory(t.read_text("/proc/net/sockstat"))
    except OSError:
        return None


def _frag_time(t: Transport) -> float:
    try:
        return float(t.read_text("/proc/sys/net/ipv4/ipfrag_time").strip())
    except (OSError, ValueError):
        return FRAG_TIME_S


def udp_samples(trial_id: str, host: str, port: int, anchor: float | None, intervals: Sequence[FlowInterval],
             peer_anchor: float | None = None) -> list[Sample]:
    """Each interval's bytes and datagram counts on the wall clock."""
    out = []
    for iv, t0, t1, tags in iperf.placed(intervals, host, port, anchor, peer_anchor):
        out.append(Sample(trial_id, "udp.bytes", float(iv.bytes), "bytes", t0, t1, tags))
        for metric, v, unit in (("udp.packets", iv.packets, "packets"), ("udp.lost", iv.lost, "packets"),
                                ("udp.out_of_order", iv.out_of_order, "count"), ("udp.jitter", iv.jitter_s, "s")):
            if v is not None:
                out.append(Sample(trial_id, metric, float(v), unit, t0, t1, tags))  # type: ignore[arg-type]
    return out


def tally(tallies: dict[tuple[str, str], Tally], key: str, intervals: Sequence[FlowInterval]) -> None:
    for iv in intervals:
        tallies.setdefault((key, DIRECTION[iv.flow]), Tally()).add(iv)


def check_received(ctx: UdpContext, direction: str, slots: Sequence[ProcSlot], tallies: dict[tuple[str, str], Tally],
                    counters: Sequence[Sample], size: int) -> str | None:
    """Why a receiver counted nothing while its sender sent (None: every one got
    something).  The point's own kernel counters on the receiving host tell
    whether nothing arrived at its interface, or arrived and never reached UDP."""
    for slot in slots:
        key = f"{slot.client}:{slot.port}"
        for d in EXPECTED[direction]:
            t = tallies.get((key, d), Tally())
            if t.expected > 0 or t.got_bytes > 0:
                continue
            src, dst = (ctx.server, slot.client) if d == "tx" else (slot.client, ctx.server)
            what = "reported nothing" if not t.receiver_seen else "counted no datagram"
            sent = f"{t.sent} sent" if t.sent else "the sender's count unknown"
            head = f"{d} {key}: the receiver on {dst} {what} ({sent}): "
            return head + why_nothing(ctx, src, dst, slot.port, counters, t.sent * len(
                linerate.udp_fragments(size, ctx.mtu)))
    return None


def _host_sum(counters: Sequence[Sample], host: str, metric: str, direction: str | None = None) -> float | None:
    vals = [x.value for x in counters if x.metric == metric and x.tag("host") == host
            and (direction is None or x.tag("direction") == direction)]
    return sum(vals) if vals else None


def why_nothing(ctx: UdpContext, src: str, dst: str, port: int, counters: Sequence[Sample],
                 frames_sent: int) -> str:
    addr = f"{dst} ({ctx.addresses.get(dst, '?')}, port {port})"
    frames = _host_sum(counters, dst, "if.packets", "rx")
    reasm = _host_sum(counters, dst, "net.ip.reasm_fails")
    delivered = _host_sum(counters, dst, "net.udp.in_datagrams")
    hint = "0 % loss of 0 datagrams would not be a result"
    if frames is None or (frames_sent and frames < 0.01 * frames_sent):
        came = "" if frames is None else f", {frames:.0f} frames came in"
        return (f"UDP from {src} to {addr} does not arrive{came} (hint: a firewall on {dst} or on the way dropping "
                f"UDP, or a wrong test address; {hint})")
    if reasm:
        return (f"{frames:.0f} frames reached {dst} but no datagram was reassembled ({reasm:.0f} reassembly "
                "failures): fragments were lost on the way, and one lost fragment loses its datagram (hint: "
                "incomplete datagrams hold the reassembly memory, net.ipv4.ipfrag_high_thresh, until "
                f"net.ipv4.ipfrag_time: offer less, or use datagrams that fit the MTU; {hint})")
    return (f"{frames:.0f} frames reached {dst}'s interface but UDP delivered {delivered or 0:.0f} datagrams "
            f"(hint: a firewall on {dst} dropping UDP to port {port}?; {hint})")
