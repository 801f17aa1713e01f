"""The TCP study's analysis: stored trials and samples -> per-trial results and per-point statistics.

Pure: takes records, returns frozen results; the report only formats these.
A point's figure is the median over its repeats; the spread is min..max and
the sample standard deviation.  A ``bidir`` point's figure is tx + rx, as the
seeds report it (seed 000: ~744 Gbps bidirectional).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ...analysis.aggregate import (
    DirectionAggregate,
    NoSharedWindow,
    WireRate,
    aggregate,
    directions_in,
    processes_with_data,
    timeline_problems,
    wire_rate,
)
from ...analysis.capacity import Capacity, Repeat, capacity
from ...analysis.counters import Counters, counter_warnings, counters
from ...analysis.counters import drops as if_drops
from ...analysis.cpu import CpuUsage, cpu_notes, cpu_usage, cpu_warnings, efficiency
from ...analysis.trials import (
    ABOVE_CEILING_TOLERANCE,
    EXPECTED_DIRECTIONS,
    LinkInfo,
    TrialHead,
    by_point,
    drift_lines,
    fraction_of,
    median_of,
)
from ...analysis.verdict import Evidence, Verdict, decide, point_verdict, with_nic
from ...core import linerate
from ...records import Sample, Tags, TrialRecord


@dataclass(frozen=True)
class TrialResult(TrialHead):
    # per direction, the aggregate the figure is: the receivers', or (an imported
    # direction no file has a receiver figure of) the senders' -- its .side says which
    receiver: Mapping[str, DirectionAggregate]
    sender: Mapping[str, DirectionAggregate]      # the senders' totals, without a time series
    start_skew_s: float | None
    overhead_s: float | None
    retransmits: int
    warnings: tuple[str, ...] = ()
    wire: Mapping[str, WireRate] = field(default_factory=dict)
    clients_used: int | None = None
    cpu: CpuUsage | None = None
    counters: Counters | None = None
    # per direction: the receivers' bytes / the TCP payload the server's interface
    # carried, where that is under GOODPUT_OF_CARRIED_FLOOR (see goodput_of_carried)
    below_carried: Mapping[str, float] = field(default_factory=dict)
    verdict: Verdict | None = None               # what held it below line rate (analysis/verdict.py)

    @property
    def gbps(self) -> float | None:
        if not self.receiver:
            return None
        return sum(a.gbps for a in self.receiver.values())

    @property
    def wire_gbps(self) -> float | None:
        if not self.wire:
            return None
        return sum(w.wire_bps for w in self.wire.values()) / 1e9


@dataclass(frozen=True)
class PointStats:
    point: str
    params: Mapping[str, object]
    n_ok: int
    n_failed: int
    median: float | None
    low: float | None
    high: float | None
    stdev: float | None
    by_direction: Mapping[str, float] = field(default_factory=dict)   # median Gbps per tx/rx
    sender_median: float | None = None
    per_host: Mapping[str, float] = field(default_factory=dict)       # median receiver Gbps per client host
    max_skew_s: float | None = None
    retransmits: int = 0
    errors: tuple[str, ...] = ()
    ceiling_gbps: float | None = None        # for the point: per-direction ceiling x directions
    wire_gbps: float | None = None           # median wire rate from counters, all directions
    link_gbps: float | None = None           # link speed x directions
    max_of_ceiling: float | None = None      # highest one-direction goodput / its ceiling, any repeat
    max_wire_of_link: float | None = None    # highest one-direction wire rate / link speed, any repeat
    cores_busy: float | None = None          # medians over repeats
    cpu_percent: float | None = None         # of the whole machine
    gbps_per_core: float | None = None
    cpu_s_per_gb: float | None = None
    cycles_per_byte: float | None = None     # estimated (nominal MHz), None when unknown
    busiest_cpu: str | None = None           # e.g. "1 97% softirq", the worst repeat
    cpu_warnings: tuple[str, ...] = ()
    stack_retrans: float | None = None       # kernel TCP RetransSegs, all hosts, median over repeats
    drops: float | None = None               # interface drops, all hosts and directions, median
    net_rx_per_s: float | None = None        # NET_RX softirqs per second, all CPUs, median
    net_rx_by_cpu: str | None = None         # how NET_RX spread over CPUs, e.g. "0 48%, 1 52%"
    nic_irq_per_s: float | None = None       # the NIC's interrupts per second (None: it has none, e.g. veth)
    net_warnings: tuple[str, ...] = ()
    n_partial: int = 0                       # repeats that lost some pairs (their survivors' data kept)
    survivors_only: bool = False             # no repeat was complete: the figures are the survivors'
    min_of_carried: float | None = None      # lowest goodput / payload the interface carried, flagged repeats
    verdict: Verdict | None = None           # the limit of the point, over its ok repeats
    capacity: Capacity | None = None         # cores at faster links, at this point's cost per byte

    @property
    def of_ceiling(self) -> float | None:
        return fraction_of(self.median, self.ceiling_gbps)

    @property
    def above_ceiling(self) -> bool:
        """Loud flag: goodput above what the wire allows, in any direction of any
        repeat, means the model or the measurement is wrong (e.g. the model
        assumed TCP timestamps that were off)."""
        return self.max_of_ceiling is not None and self.max_of_ceiling > 1 + ABOVE_CEILING_TOLERANCE

    @property
    def wire_above_link(self) -> bool:
        """The wire carried more than the link's speed: a shaper passing more
        than its rate (tbf here charges small frames less than their wire time)."""
        return self.max_wire_of_link is not None and self.max_wire_of_link > 1 + ABOVE_CEILING_TOLERANCE


def trial_result(rec: TrialRecord, samples: Sequence[Sample], trim: float,
                 link: LinkInfo | None = None) -> TrialResult:
    r = _trial_result(rec, samples, trim, link)
    if r.status != "ok" or not r.receiver:
        return r
    # CPU over the window the goodput was summed on (the longest if two directions)
    window = max((a.window for a in r.receiver.values()), key=lambda w: w[1] - w[0])
    u = cpu_usage(samples, window)
    r = replace(r, cpu=u, warnings=tuple(r.warnings) + tuple(cpu_notes(samples, window, u)))
    c = counters(samples, window)
    if c is not None:
        r = replace(r, counters=c, warnings=tuple(r.warnings) + tuple(counter_warnings(c)))
    below = goodput_of_carried(r, samples, link, rec.meta.get("server"))
    if below:
        r = replace(r, below_carried=below, warnings=tuple(r.warnings) + tuple(
            f"{d}: the receivers counted {v:.0%} of the TCP payload the server's interface carried in the window "
            "(frames less their headers): the engine's sum misses traffic that crossed the wire (a pair that "
            "reported nothing?)" for d, v in below.items()))
    return replace(r, verdict=decide(with_nic(evidence(r, link, samples), samples, rec.meta)))


# an interval whose sender moved at least this share of a receiver window per
# round trip (snd_wnd / rtt), with that window under its congestion window,
# was waiting on the window; the window and rtt are read at the interval's
# end, so a window that opened within it reads a little high -- hence not 1.0
WINDOW_PACE = 0.8
# a window under this many bytes is closed, not small: a receiver advertises
# no less than one segment (silly-window avoidance; an MSS is over 1,200 bytes
# on any IPv4 or IPv6 link), so the sender is waiting on the receiving
# application to read, which no larger buffer helps
CLOSED_WINDOW = 1024


def window_share(samples: Sequence[Sample], receiver: Mapping[str, DirectionAggregate],
                 ceiling_bps: float | None) -> tuple[float, str] | None:
    """The share of the senders' bytes in the window sent while they waited
    on the receivers' windows, with the figures that show it; None when the
    engine reported no sender TCP state (rtt, snd_cwnd, snd_wnd)."""
    if not any(x.metric == "tcp.rtt" for x in samples):
        # no interval can have all four figures: None, without keying every
        # byte sample first (an import's 100,000s of them, none with an rtt)
        return None
    state: dict[tuple[str | None, ...], dict[str, float]] = defaultdict(dict)
    for x in samples:
        if x.metric in ("tcp.bytes", "tcp.rtt", "tcp.snd_cwnd", "tcp.snd_wnd") and x.tag("side") == "sender" \
                and x.tag("omitted", "0") != "1" and x.tag("direction") in receiver:
            w = receiver[x.tag("direction") or ""].window
            if w[0] <= (x.t_start + x.t_end) / 2 <= w[1]:
                state[(x.tag("host"), x.tag("proc"), x.tag("direction"), str(x.t_start), str(x.t_end))][x.metric] = (
                    x.value if x.metric != "tcp.bytes" else x.value / (x.t_end - x.t_start))
    full = [v for v in state.values() if len(v) == 4 and v["tcp.rtt"] > 0]
    if not full:
        return None
    total = sum(v["tcp.bytes"] for v in full)
    closed = [v for v in full if v["tcp.snd_wnd"] < CLOSED_WINDOW]
    waiting = [v for v in full if CLOSED_WINDOW <= v["tcp.snd_wnd"] < v["tcp.snd_cwnd"]
               and v["tcp.bytes"] >= WINDOW_PACE * v["tcp.snd_wnd"] / v["tcp.rtt"]]
    share = sum(v["tcp.bytes"] for v in waiting) / total if total > 0 else 0.0
    shut = sum(v["tcp.bytes"] for v in closed) / total if total > 0 else 0.0
    wnd = statistics.median(v["tcp.snd_wnd"] for v in full)
    rtt = statistics.median(v["tcp.rtt"] for v in full)
    text = (f"{share:.0%} of the bytes were sent waiting on the receivers' windows (median window "
            f"{wnd / 1024:.0f} KiB per sender process at {rtt * 1e6:.0f} us RTT: at most "
            f"{wnd * 8 / rtt / 1e9:.3g} Gbit/s each)")
    if ceiling_bps:
        bdp = ceiling_bps / 8 * rtt
        text += f"; the path's bandwidth-delay product at its ceiling is {bdp / 1024:.0f} KiB"
    if shut >= 0.005:
        text += (f"; {shut:.0%} were sent as a closed window reopened (under {CLOSED_WINDOW} bytes: the "
                 "receiving application not reading, which no larger window helps)")
    return share, text


def evidence(r: TrialResult, link: LinkInfo | None, samples: Sequence[Sample] = ()) -> Evidence:
    """What a TCP trial measured, for the verdict (analysis/verdict.py)."""
    ceil = link.ceiling(r.clients_used) if link else None
    c = r.counters
    return Evidence({d: a.gbps * 1e9 for d, a in r.receiver.items()}, ceil.goodput_bps if ceil else None,
                    {d: w.wire_bps for d, w in r.wire.items()}, link.speed_for(r.clients_used) if link else None,
                    r.cpu, r.tool_cpus, c.total("tcp.retrans_segs") if c else None,
                    c.total("tcp.out_segs") if c else None, if_drops(c),
                    sum(w.frames for w in r.wire.values()) if r.wire else None,
                    window=window_share(samples, r.receiver, ceil.goodput_bps if ceil else None))


# Receivers' bytes under this share of the TCP payload the server's interface
# carried in the same window are flagged: the carried payload is the counted
# bytes less a full header per frame (Ethernet 14 + IP 20/40 + TCP with
# timestamps 32), so ACK-only frames count as nothing and a header that was
# shorter makes the carried figure smaller, never a false flag; what is left
# is retransmissions (a few % on a lossy link) -- a pair missing from the
# engine's sum shows as 1/pairs or more.
GOODPUT_OF_CARRIED_FLOOR = 0.8


def goodput_of_carried(r: TrialResult, samples: Sequence[Sample], link: LinkInfo | None,
                       server: object) -> dict[str, float]:
    """Per direction, the receivers' bytes / the payload the server's
    interface carried over the same window, where under the floor."""
    hdr = 14 + (40 if link is not None and link.ip == 6 else 20) + 32
    out = {}
    for d, agg in r.receiver.items():
        w = wire_rate(samples, direction=d, window=agg.window, uncounted_per_frame=0,
                      host=str(server) if server else None)
        carried = w.bytes - w.frames * hdr if w is not None else 0.0
        if carried > 0 and agg.bytes < GOODPUT_OF_CARRIED_FLOOR * carried:
            out[d] = agg.bytes / carried
    return out


def _measured_values(samples: Sequence[Sample], metric: str) -> Iterator[float]:
    """The values of ``metric`` that are not warm-up, in sample order; the
    ``omitted`` tag read once per tag set, not per sample (a 200 MB import
    has 100,000s of samples and a handful of tag sets; looked up by
    identity: the rule in :mod:`nicbench.records`)."""
    omitted: dict[int, tuple[Tags, bool]] = {}
    for s in samples:
        if s.metric == metric:
            t = s.tags
            e = omitted.get(id(t))
            if e is None:
                e = omitted[id(t)] = (t, s.tag("omitted") == "1")
            if not e[1]:
                yield s.value


def _trial_result(rec: TrialRecord, samples: Sequence[Sample], trim: float,
                  link: LinkInfo | None = None) -> TrialResult:
    """Aggregate one trial, refusing data that is incomplete or inconsistent.

    A point is only "ok" when every planned process delivered receiver data
    for every direction the point has, no process timeline overlaps or has
    gaps, and the shared window is at least 60 % of duration - 2 x trim (a
    busy iperf3 server's clock was seen to start 0.5 s late: its shorter
    measured span is real data, a much shorter window is misplacement).
    """
    receiver: dict[str, DirectionAggregate] = {}
    sender: dict[str, DirectionAggregate] = {}
    problems: list[str] = []
    params = rec.spec.params
    # imported files with no receiver figure for a direction: its figure is the
    # senders' (the aggregate's side says so), never a failed point for want of it
    sender_only = set(rec.meta.get("sender_only") or ())
    lost = rec.meta.get("lost") or {}
    # a partial point is judged on its survivors: the lost pairs are named already
    layout = [x for x in rec.meta.get("layout") or [] if f"{x['client']}:{x['port']}" not in lost]
    if rec.status in ("ok", "partial"):
        wanted = EXPECTED_DIRECTIONS.get(str(params.get("direction")), ())
        for d in wanted or directions_in(samples):
            side = "sender" if d in sender_only else "receiver"
            have = processes_with_data(samples, direction=d, side=side)
            missing = [f"{x['client']}:{x['port']}" for x in layout
                       if (x["client"], str(x["port"])) not in have]
            if missing:
                problems.append(f"no {d} receiver data from {', '.join(missing)}")
            problems += timeline_problems(samples, direction=d, side=side)
        for d in directions_in(samples):
            try:
                receiver[d] = aggregate(samples, direction=d, side="sender" if d in sender_only else "receiver",
                                        trim=trim)
            except NoSharedWindow as e:
                problems.append(str(e))
                continue
            try:
                # (the senders' figure is their total: their time series is never read)
                sender[d] = aggregate(samples, direction=d, side="sender", trim=trim, series=False)
            except NoSharedWindow:
                pass
            duration = params.get("duration")
            if layout and isinstance(duration, (int, float)):
                expected = float(duration) - 2 * trim
                if receiver[d].seconds < 0.6 * expected:
                    problems.append(f"{d} window is {receiver[d].seconds:.2f}s, expected about {expected:.2f}s "
                                    "(start skew or misplaced intervals)")
        for d, agg in receiver.items():
            if agg.bytes <= 0:
                problems.append(f"no {d} bytes reached the receivers in the window: the point asked for traffic "
                                "and none arrived (a stalled or firewalled path?)")
        if not receiver and not problems:
            problems.append("no receiver-side samples")
    retr = int(sum(_measured_values(samples, "tcp.retransmits")))
    wire: dict[str, WireRate] = {}
    if link is not None and link.counters_count_frames and not problems:
        for d, agg in receiver.items():
            w = wire_rate(samples, direction=d, window=agg.window,
                          uncounted_per_frame=linerate.per_frame_uncounted(), host=rec.meta.get("server"))
            if w is not None:
                wire[d] = w
    meta = rec.meta
    return TrialResult(rec.spec.trial_id, rec.spec.point, rec.spec.repeat, dict(params),
                       rec.status if not problems else "failed",
                       rec.error or ("; ".join(problems) if problems else None),
                       receiver if not problems else {}, sender if not problems else {},
                       meta.get("start_skew_s"), meta.get("overhead_s"), retr,
                       tuple(meta.get("warnings") or ()), wire,
                       len({x["client"] for x in layout}) or None,
                       tool_cpus=dict(meta.get("tool_cpus") or {}), problems=tuple(problems),
                       tuning_drift=drift_lines(meta))


def _stats(values: list[float]) -> tuple[float | None, float | None, float | None, float | None]:
    if not values:
        return None, None, None, None
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return statistics.median(values), min(values), max(values), sd


def point_stats(results: Iterable[TrialResult], link: LinkInfo | None = None,
                mhz: float | None = None) -> list[PointStats]:
    out = []
    for point, rs in by_point(results).items():
        complete = [r for r in rs if r.status == "ok" and r.gbps is not None]
        partial = [r for r in rs if r.status == "partial" and r.gbps is not None]
        # a partial repeat's figure is its survivors': used only when no repeat was
        # complete, and then said so -- never mixed with complete ones in one median
        ok = complete or partial
        med, lo, hi, sd = _stats([r.gbps for r in ok])  # type: ignore[misc]
        by_dir = {}
        for d in ("tx", "rx"):
            vals = [r.receiver[d].gbps for r in ok if d in r.receiver]
            if vals:
                by_dir[d] = statistics.median(vals)
        snd = [sum(a.gbps for a in r.sender.values()) for r in ok if r.sender]
        hosts: dict[str, list[float]] = defaultdict(list)
        for r in ok:
            per: dict[str, float] = defaultdict(float)
            for a in r.receiver.values():
                for h, g in a.per_host.items():
                    per[h] += g
            for h, g in per.items():
                hosts[h].append(g)
        skews = [r.start_skew_s for r in rs if r.start_skew_s is not None]
        ndir = len(EXPECTED_DIRECTIONS.get(str(rs[0].params.get("direction")), ("tx",)))
        clients = rs[0].clients_used
        ceil = link.ceiling(clients) if link else None
        speed = link.speed_for(clients) if link else None
        wires = [r.wire_gbps for r in ok if r.wire_gbps is not None]
        per_dir = [a.gbps * 1e9 / ceil.goodput_bps for r in ok for a in r.receiver.values()] if ceil else []
        per_wire = [w.wire_bps / speed for r in ok for w in r.wire.values()] if speed else []
        out.append(replace(PointStats(
            point, rs[0].params, len(complete), len(rs) - len(complete) - len(partial), med, lo, hi, sd, by_dir,
            statistics.median(snd) if snd else None,
            {h: statistics.median(v) for h, v in sorted(hosts.items())},
            max(skews) if skews else None, sum(r.retransmits for r in ok),
            tuple(sorted({r.error for r in rs if r.error})),
            ceil.goodput_bps * ndir / 1e9 if ceil else None,
            statistics.median(wires) if wires else None,
            speed * ndir / 1e9 if speed else None,
            max(per_dir) if per_dir else None, max(per_wire) if per_wire else None,
            *_cpu_stats([r for r in ok if r.cpu is not None], mhz),
            *_counter_stats([r.counters for r in ok if r.counters is not None])),
            n_partial=len(partial), survivors_only=not complete and bool(partial),
            min_of_carried=min((v for r in ok for v in r.below_carried.values()), default=None),
            verdict=point_verdict([r.verdict for r in ok if r.verdict is not None]),
            capacity=capacity([Repeat(r.gbps or 0.0, r.cpu, [sum(v) for v in zip(
                *([g for _, g in a.series] for a in r.receiver.values()), strict=False)]) for r in complete])))
    return out


def _counter_stats(cs: list[Counters]) -> tuple:
    med = median_of
    if not cs:
        return (None,) * 5 + ((),)

    def drops(c: Counters) -> float | None:
        vals = [v for m in c.per_host.values() for k, v in m.items() if k.startswith("if.drops.")]
        return sum(vals) if vals else None
    rx = [sum(c.softirq_per_s.get("NET_RX", {}).values()) if c.softirq_per_s.get("NET_RX") else None for c in cs]
    spread = None
    last = cs[-1].softirq_per_s.get("NET_RX") or {}
    if last and sum(last.values()) > 0:
        spread = ", ".join(f"{cpu} {v / sum(last.values()) * 100:.0f}%" for cpu, v in sorted(last.items()))
    irq = [sum(sum(v.values()) for v in c.irq_per_s.values()) if c.irq_per_s else None for c in cs]
    return (med(c.total("tcp.retrans_segs") for c in cs), med(drops(c) for c in cs), med(rx), spread,
            med(irq), tuple(sorted({w for c in cs for w in counter_warnings(c)})))


def _cpu_stats(rs: list[TrialResult], mhz: float | None) -> tuple:
    if not rs:
        return (None,) * 6 + ((),)
    effs = [efficiency(r.cpu, r.gbps or 0.0, mhz) for r in rs]  # type: ignore[arg-type]

    med = median_of
    worst = max(rs, key=lambda r: r.cpu.busiest)  # type: ignore[union-attr]
    u = worst.cpu
    return (med(e.cores_busy for e in effs), med(r.cpu.percent_of_machine for r in rs),  # type: ignore[union-attr]
            med(e.gbps_per_core for e in effs), med(e.cpu_s_per_gb for e in effs),
            med(e.cycles_per_byte for e in effs),
            f"{u.busiest_cpu} {u.busiest * 100:.0f}% {u.busiest_state}",  # type: ignore[union-attr]
            tuple(sorted({w for r in rs for w in cpu_warnings(r.cpu)})))  # type: ignore[arg-type]
