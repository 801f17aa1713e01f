"""The UDP study's analysis: stored trials and samples -> per-trial results
and per-point statistics (pure).

Per trial and direction the window is the one every receiving process
shares (as in the TCP study: latest first start to earliest last end,
warm-up left out, trimmed by ``trim`` at both ends).  Over it:

- received Gbps = receiver payload bytes x 8 / window (10^9 bit/s), the
  truth; datagrams/s = those bytes / the datagram size (every datagram of a
  point has the same size);
- loss = datagrams the receivers missed / datagrams they expected (by
  sequence number), both prorated over the window;
- sent Gbps and datagrams/s from the senders' own intervals;
- jitter: the median and the worst of the receivers' interval jitters whose
  middle falls in the window; out-of-order: per interval (iperf 2) or the
  test's total (iperf3 reports it only at the end);
- where the lost datagrams went: :mod:`.losssplit`.

A point's figure is the median over its repeats.  A partial repeat (some
pairs lost mid-point, named in its error) is judged on its survivors; its
figures are used only when no repeat of the point was complete, and then the
point says so (``survivors_only``): never mixed with complete ones.  A bidir point's Gbps is
tx + rx; its loss, the worse direction's (what the maximum-rate search
judged).  The ceiling is the UDP payload a link carries in datagrams of the
point's size (:func:`nicbench.core.linerate.udp`, fragments included).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ...analysis.aggregate import (
    DirectionAggregate,
    NoSharedWindow,
    aggregate,
    processes_with_data,
    timeline_problems,
)
from ...analysis.counters import Counters, counter_warnings, counters
from ...analysis.counters import drops as if_drops
from ...analysis.cpu import CpuUsage, cpu_notes, cpu_usage
from ...analysis.trials import (
    ABOVE_CEILING_TOLERANCE,
    EXPECTED_DIRECTIONS,
    LinkInfo,
    TrialHead,
    by_point,
    fraction_of,
    head,
    int_param,
    median_of,
)
from ...analysis.verdict import Evidence, Verdict, decide, point_verdict, with_nic
from ...core import linerate
from ...records import Sample, TrialRecord
from .losssplit import LossSplit, loss_split, tool_count

METRIC = "udp.bytes"


@dataclass(frozen=True)
class DirectionResult:
    """One direction of a trial over its window."""

    direction: str
    received: DirectionAggregate           # receiver payload bytes, Gbps, per client host
    datagrams_per_s: float                 # received
    expected: float | None                 # datagrams the receivers expected (by sequence number)
    lost: float | None                     # datagrams they missed
    sent_gbps: float | None = None
    sent_per_s: float | None = None
    jitter_s: float | None = None          # median of the receivers' interval jitters
    jitter_max_s: float | None = None
    out_of_order: float | None = None

    @property
    def gbps(self) -> float:
        return self.received.gbps

    @property
    def loss(self) -> float | None:
        if self.expected is None or self.lost is None:
            return None
        return self.lost / self.expected if self.expected > 0 else None


@dataclass(frozen=True)
class UdpTrial(TrialHead):
    size: int = 0
    fragments: int = 1
    directions: Mapping[str, DirectionResult] = field(default_factory=dict)
    split: Mapping[str, LossSplit] = field(default_factory=dict)
    start_skew_s: float | None = None
    cpu: CpuUsage | None = None
    counters: Counters | None = None
    search: Mapping[str, object] | None = None
    receive_buffer: int | None = None      # bytes the receiving sockets got (iperf3 reports it)
    out_of_order_test: float | None = None  # the test's whole out-of-order count (iperf3 end report)
    warnings: tuple[str, ...] = ()
    verdict: Verdict | None = None          # what held it below line rate (analysis/verdict.py)

    @property
    def gbps(self) -> float | None:
        return sum(d.gbps for d in self.directions.values()) if self.directions else None

    @property
    def datagrams_per_s(self) -> float | None:
        return sum(d.datagrams_per_s for d in self.directions.values()) if self.directions else None

    @property
    def loss(self) -> float | None:
        losses = [d.loss for d in self.directions.values() if d.loss is not None]
        return max(losses) if losses else None

    def cpu_by_host(self) -> dict[str, float]:
        """Cores the engine processes used on each host (user + system)."""
        out: dict[str, float] = {}
        for key, cores in (self.cpu.tools if self.cpu else {}).items():
            host = key.split(" ")[1] if len(key.split(" ")) > 1 else "?"
            out[host] = out.get(host, 0.0) + cores
        return out


def _jitter(samples: Sequence[Sample], d: str, window: tuple[float, float]) -> tuple[float | None, float | None]:
    vals = [s.value for s in samples if s.metric == "udp.jitter" and s.tag("direction") == d
            and s.tag("side") == "receiver" and s.tag("omitted", "0") != "1"
            and window[0] <= (s.t_start + s.t_end) / 2 <= window[1]]
    return (statistics.median(vals), max(vals)) if vals else (None, None)


def _direction(samples: Sequence[Sample], d: str, trim: float, size: int) -> DirectionResult:
    rcv = aggregate(samples, direction=d, side="receiver", trim=trim, metric=METRIC)
    w = rcv.window
    secs = w[1] - w[0]
    try:
        snd = aggregate(samples, direction=d, side="sender", trim=trim, metric=METRIC, series=False)
        sent_gbps: float | None = snd.gbps
        sent_n = tool_count(samples, "udp.packets", d, "sender", snd.window)
        sent_per_s = sent_n / snd.seconds if sent_n is not None else None
    except NoSharedWindow:
        sent_gbps = sent_per_s = None
    jit, jmax = _jitter(samples, d, w)
    return DirectionResult(d, rcv, rcv.bytes / size / secs, tool_count(samples, "udp.packets", d, "receiver", w),
                           tool_count(samples, "udp.lost", d, "receiver", w), sent_gbps, sent_per_s, jit, jmax,
                           tool_count(samples, "udp.out_of_order", d, "receiver", w))


def udp_trial(rec: TrialRecord, samples: Sequence[Sample], trim: float, link: LinkInfo | None = None) -> UdpTrial:
    """One trial, refusing data that is incomplete: every planned process must
    have receiver data for every direction of the point, timelines without
    gaps or overlaps, a window of at least 60 % of duration - 2 x trim."""
    params, meta = rec.spec.params, rec.meta
    size = int_param(params, "datagram_size", 1)
    mtu = link.mtu if link else 1500
    frags = len(linerate.udp_fragments(size, mtu)) if size <= linerate.UDP_MAX_PAYLOAD[4] else 1
    base = UdpTrial(**head(rec), status=rec.status, error=rec.error, size=size, fragments=frags,
                    start_skew_s=meta.get("start_skew_s"), search=meta.get("search"),
                    receive_buffer=_receive_buffer(meta, str(params.get("direction"))),
                    out_of_order_test=_ooo_total(meta), warnings=tuple(meta.get("warnings") or ()))
    if rec.status not in ("ok", "partial"):
        return base
    problems: list[str] = []
    lost = meta.get("lost") or {}
    # a partial trial is judged on its survivors: the lost pairs are named already
    layout = [x for x in meta.get("layout") or [] if f"{x['client']}:{x['port']}" not in lost]
    wanted = EXPECTED_DIRECTIONS.get(str(params.get("direction")), ())
    dirs: dict[str, DirectionResult] = {}
    for d in wanted:
        have = processes_with_data(samples, direction=d, metric=METRIC)
        missing = [f"{x['client']}:{x['port']}" for x in layout if (x["client"], str(x["port"])) not in have]
        if missing:
            problems.append(f"no {d} receiver data from {', '.join(missing)}")
            continue
        problems += timeline_problems(samples, direction=d, metric=METRIC)
        try:
            dirs[d] = _direction(samples, d, trim, size)
        except NoSharedWindow as e:
            problems.append(str(e))
            continue
        duration = params.get("duration")
        expected = float(duration) - 2 * trim if isinstance(duration, (int, float)) else None
        if expected and dirs[d].received.seconds < 0.6 * expected:
            problems.append(f"{d} window is {dirs[d].received.seconds:.2f}s, expected about {expected:.2f}s "
                            "(start skew or misplaced intervals)")
    if problems:
        return replace(base, status="failed", error="; ".join(([rec.error] if rec.error else []) + problems),
                       problems=tuple(problems))
    window = max((r.received.window for r in dirs.values()), key=lambda x: x[1] - x[0])
    u = cpu_usage(samples, window)
    c = counters(samples, window)
    split = {}
    server = str(meta.get("server") or "")
    clients = list(dict.fromkeys(str(x["client"]) for x in layout))
    if len(dirs) == 1 and server and clients:
        d, r = next(iter(dirs.items()))
        senders, receivers = ([server], clients) if d == "tx" else (clients, [server])
        split[d] = loss_split(samples, d, r.received.window, senders=senders, receivers=receivers, counters=c,
                              fragments=frags, received=r.received.bytes / size,
                              sent=r.sent_per_s * r.received.seconds if r.sent_per_s is not None else None)
    warns = tuple(base.warnings) + tuple(cpu_notes(samples, window, u)) + tuple(counter_warnings(c) if c else ())
    t = replace(base, directions=dirs, split=split, cpu=u, counters=c, warnings=warns)
    return replace(t, verdict=decide(with_nic(evidence(t, link, len(clients) or None), samples, rec.meta)))


def evidence(t: UdpTrial, link: LinkInfo | None, clients: int | None) -> Evidence:
    """What a UDP trial measured, for the verdict (analysis/verdict.py): the
    offered rate (per client x clients, a searched or unlimited rate offers
    none), the receivers' loss and where the counters lost it."""
    rate = t.params.get("rate_bps")
    offered = float(rate) * clients if isinstance(rate, (int, float)) and clients else None
    ceil = ceiling_gbps(link, t.size, clients)
    where: dict[str, float] = {}
    for host, m in (t.counters.per_host.items() if t.counters else ()):
        for k, what in (("udp.rcvbuf_errors", "socket buffer full"),
                        ("udp.sndbuf_errors", "send buffer or queue full")):
            if m.get(k):
                where[f"{host} {what}"] = m[k]
    for sp in t.split.values():
        for k, what in (("on_wire", "between the interfaces"), ("before_udp", "in the receivers' stack before UDP")):
            v = getattr(sp, k)
            if v is not None and v > 0:
                where[what] = where.get(what, 0.0) + v
    return Evidence({d: r.gbps * 1e9 for d, r in t.directions.items()}, ceil * 1e9 if ceil else None,
                    cpu=t.cpu, tool_cpus=t.tool_cpus, drops=if_drops(t.counters), offered_bps=offered,
                    datagram_loss=t.loss, loss_where=where, tcp=False,
                    link_bps=link.speed_for(clients) if link else None)


def _receive_buffer(meta: Mapping[str, object], direction: str) -> int | None:
    """What the receiving sockets got (iperf3's rcvbuf_actual: the server's for
    tx, the client's own for rx; bidir: the smaller)."""
    bufs = meta.get("socket_buffers")
    if not isinstance(bufs, dict):
        return None
    keys = {"tx": ("peer_rcvbuf",), "rx": ("rcvbuf",), "bidir": ("rcvbuf", "peer_rcvbuf")}.get(direction, ())
    vals = [int(b[k]) for b in bufs.values() if isinstance(b, dict) for k in keys if k in b]
    return min(vals) if vals else None


def _ooo_total(meta: Mapping[str, object]) -> float | None:
    totals = meta.get("udp_totals")
    if not isinstance(totals, dict):
        return None
    vals = [t.get("out_of_order") for per in totals.values() if isinstance(per, dict)
            for k, t in per.items() if k.endswith(".receiver") and isinstance(t, dict)]
    known = [float(v) for v in vals if v is not None]
    return sum(known) if known else None


@dataclass(frozen=True)
class UdpPoint:
    point: str
    params: Mapping[str, object]
    size: int
    fragments: int
    n_ok: int
    n_failed: int
    gbps: float | None                    # received, median over repeats
    gbps_min: float | None
    gbps_max: float | None
    gbps_stdev: float | None
    by_direction: Mapping[str, float]     # median received Gbps per direction
    datagrams_per_s: float | None
    sent_gbps: float | None
    loss: float | None                    # median of the repeats' worst-direction loss
    loss_max: float | None
    jitter_s: float | None
    jitter_max_s: float | None
    out_of_order: float | None
    ceiling_gbps: float | None            # per direction x directions
    max_of_ceiling: float | None          # highest one-direction Gbps / its ceiling, any repeat
    rate_found_bps: float | None = None   # the search's rate per client (median over repeats)
    search_steps: int | None = None
    receive_buffer: int | None = None
    cores_busy: float | None = None
    cpu_percent: float | None = None
    cpu_by_host: Mapping[str, float] = field(default_factory=dict)
    split: Mapping[str, float | None] = field(default_factory=dict)   # stage -> datagrams/s, median
    counted_loss: float | None = None     # the counters' loss (median), beside the tool's
    max_skew_s: float | None = None
    errors: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    n_partial: int = 0                    # repeats that lost some pairs (their survivors' data kept)
    survivors_only: bool = False          # no repeat was complete: the figures are the survivors'
    verdict: Verdict | None = None        # the limit of the point, over its ok repeats

    @property
    def of_ceiling(self) -> float | None:
        return fraction_of(self.gbps, self.ceiling_gbps)

    @property
    def above_ceiling(self) -> bool:
        return self.max_of_ceiling is not None and self.max_of_ceiling > 1 + ABOVE_CEILING_TOLERANCE


def ceiling_gbps(link: LinkInfo | None, size: int, clients: int | None) -> float | None:
    """One direction's UDP payload ceiling for ``size``-byte datagrams."""
    speed = link.speed_for(clients) if link else None
    if not speed or not link:
        return None
    return linerate.udp(speed, link.mtu, ip=link.ip, payload=size).goodput_bps / 1e9


SPLIT_STAGES = ("sent", "sndbuf_errors", "wire_out", "wire_in", "on_wire", "before_udp", "delivered",
                "rcvbuf_errors", "received", "lost")


def _split_rates(t: UdpTrial) -> dict[str, float | None]:
    """The one-way split per second of window (a bidir point has none)."""
    if len(t.split) != 1:
        return {}
    d, s = next(iter(t.split.items()))
    secs = t.directions[d].received.seconds
    return {k: (v / secs if v is not None else None) for k in SPLIT_STAGES for v in [getattr(s, k)]}


def udp_points(trials: Iterable[UdpTrial], link: LinkInfo | None = None) -> list[UdpPoint]:
    med = median_of
    out = []
    for point, ts in by_point(trials).items():
        complete = [t for t in ts if t.status == "ok" and t.gbps is not None]
        partial = [t for t in ts if t.status == "partial" and t.gbps is not None]
        ok = complete or partial
        p = ts[0].params
        g = [t.gbps for t in ok if t.gbps is not None]
        ndir = len(EXPECTED_DIRECTIONS.get(str(p.get("direction")), ("tx",)))
        clients = len({x for t in ok for x in (t.directions[next(iter(t.directions))].received.per_host)}) or None
        ceil = ceiling_gbps(link, ts[0].size, clients)
        per_dir = [r.gbps / ceil for t in ok for r in t.directions.values()] if ceil else []
        splits = [_split_rates(t) for t in ok]
        rates = [t.search.get("rate_per_client_bps") for t in ok if t.search]
        skews = [t.start_skew_s for t in ts if t.start_skew_s is not None]
        out.append(UdpPoint(
            point, p, ts[0].size, ts[0].fragments, len(complete), len(ts) - len(complete) - len(partial), med(g),
            min(g, default=None),
            max(g, default=None), statistics.stdev(g) if len(g) > 1 else (0.0 if g else None),
            {d: statistics.median(v) for d in ("tx", "rx")
             if (v := [t.directions[d].gbps for t in ok if d in t.directions])},
            med(t.datagrams_per_s for t in ok), med(_sum(r.sent_gbps for r in t.directions.values()) for t in ok),
            med(t.loss for t in ok), max((t.loss for t in ok if t.loss is not None), default=None),
            med(med(r.jitter_s for r in t.directions.values()) for t in ok),
            max((r.jitter_max_s for t in ok for r in t.directions.values() if r.jitter_max_s is not None),
                default=None),
            med(_sum(r.out_of_order for r in t.directions.values()) if any(
                r.out_of_order is not None for r in t.directions.values()) else t.out_of_order_test for t in ok),
            ceil * ndir if ceil else None, max(per_dir) if per_dir else None,
            med(float(r) if isinstance(r, (int, float)) else None for r in rates) if rates else None,
            max((len(t.search.get("steps") or []) for t in ts if t.search), default=None),  # type: ignore[arg-type]
            min((t.receive_buffer for t in ok if t.receive_buffer is not None), default=None),
            med(t.cpu.cores_busy if t.cpu else None for t in ok),
            med(t.cpu.percent_of_machine if t.cpu else None for t in ok),
            {h: statistics.median(v) for h in sorted({h for t in ok for h in t.cpu_by_host()})
             if (v := [t.cpu_by_host()[h] for t in ok if h in t.cpu_by_host()])},
            {k: med(s.get(k) for s in splits) for k in SPLIT_STAGES} if any(splits) else {},
            med(next(iter(t.split.values())).loss if t.split else None for t in ok),
            max(skews) if skews else None,
            tuple(sorted({t.error for t in ts if t.error})), tuple(sorted({w for t in ts for w in t.warnings})),
            len(partial), not complete and bool(partial),
            point_verdict([t.verdict for t in ok if t.verdict is not None])))
    return out


def _sum(vals: Iterable[float | None]) -> float | None:
    known = [v for v in vals if v is not None]
    return sum(known) if known else None
