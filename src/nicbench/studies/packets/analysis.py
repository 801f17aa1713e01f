"""Packet-rate points (seed 003): Mpps sent and received, loss, against line rate.

Per trial the window is the span every generator process shares (latest
start to earliest end, over the ports), trimmed by ``trim`` at both ends.
Received frames are the receiver's XDP counts of the test flow inside the
window (pro rata within a read interval), sent frames the generator's own
counts (nbgen) or its interface's transmit counter (trafgen, whose only
output is an exit summary).  Loss = 1 - received / sent over the same window.

Rates: Mpps = 10^6 frames/s.  Gbps are frame bits with the FCS ("L2"), and
on the wire with the 20 bytes of preamble, SFD and inter-frame gap that no
counter sees ("L1").  The ceiling is each port's line rate in frames of that
size: ``speed / ((size + 20) * 8)``, times the ports used (64 B at 40G: 59.52
Mpps per port; seed 003 reached 45 on one port, 54 on two).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ...analysis.aggregate import covers, frames_carried, integrate
from ...analysis.counters import counters, drops
from ...analysis.cpu import CpuUsage, cpu_usage
from ...analysis.trials import ABOVE_CEILING_TOLERANCE, TrialHead, by_point, fraction_of, head, int_param, median_of
from ...analysis.verdict import Evidence, Verdict, decide, point_verdict, tool_cores, with_nic
from ...core import linerate
from ...records import Sample, TrialRecord

WIRE_EXTRA = linerate.PREAMBLE_SFD + linerate.IFG
RATE_TOLERANCE = 0.05      # a rate-limited point off by more than this from what was asked says so
# received > sent by more than this is a counting error; less is the window's
# interpolation between the two ends' 0.25 s reads (up to 0.2 % seen here)
OVERCOUNT = 0.005


@dataclass(frozen=True)
class PacketTrial(TrialHead):
    window: tuple[float, float] | None = None
    rx_pps: float | None = None
    tx_pps: float | None = None
    per_port_rx_pps: Mapping[str, float] = field(default_factory=dict)
    if_tx_pps: float | None = None            # generator's interface counters, all ports
    if_rx_pps: float | None = None            # receiver's interface counters, all ports
    tx_drops_pps: float | None = None         # frames the generator's interface refused
    cpu: CpuUsage | None = None
    xdp_modes: Mapping[str, str] = field(default_factory=dict)
    ndr: Mapping[str, object] | None = None   # the search's steps, when the point was a no-drop-rate search
    warnings: tuple[str, ...] = ()
    asked_pps: float | None = None            # the rate the generator was paced to, all ports (None: flat out)
    verdict: Verdict | None = None            # what held it below line rate (analysis/verdict.py)

    @property
    def loss(self) -> float | None:
        if self.rx_pps is None or not self.tx_pps:
            return None
        return max(0.0, 1.0 - self.rx_pps / self.tx_pps)


def _series(samples: Sequence[Sample], metric: str, **tags: str) -> dict[str, list[Sample]]:
    """Samples of ``metric`` with ``tags``, one time-ordered list per port."""
    out: dict[str, list[Sample]] = {}
    for s in samples:
        if s.metric == metric and s.t_end > s.t_start and all(s.tag(k) == v for k, v in tags.items()):
            out.setdefault(s.tag("port") or s.tag("ifname") or "?", []).append(s)
    return {k: sorted(v, key=lambda x: x.t_start) for k, v in out.items()}


def _rate(series: dict[str, list[Sample]], w0: float, w1: float, ports: int | None = None
          ) -> tuple[float | None, dict[str, float]]:
    """Frames/s summed over ports; None unless every port (all ``ports`` of
    them, when given) covers the window."""
    per = {}
    if ports is not None and len(series) != ports:
        return None, {}
    for port, v in series.items():
        if not covers(v, w0, w1, slack=0.05):
            return None, {}
        per[port] = integrate(v, w0, w1) / (w1 - w0)
    return (sum(per.values()) if per else None), per


def packet_trial(rec: TrialRecord, samples: Sequence[Sample], trim: float,
                 line_rate_bps: float | None = None) -> PacketTrial:
    t = _packet_trial(rec, samples, trim)
    if t.status != "ok" or t.rx_pps is None:
        return t
    return replace(t, verdict=decide(with_nic(evidence(t, line_rate_bps, samples), samples, rec.meta)))


def evidence(t: PacketTrial, line_rate_bps: float | None, samples: Sequence[Sample] = ()) -> Evidence:
    """What a packet trial measured, for the verdict (analysis/verdict.py):
    frames received against the link's frame rate, what the generator sent
    (short of the line with the receiver keeping up: the generator is the
    limit), the frames lost between them and where, the receiver's CPU.  A
    paced generator spins on its cores by design (flat out, or waiting for
    each frame's slot): its busy cores are then no finding."""
    engine = str(t.params.get("engine"))
    size, ports = int_param(t.params, "frame_size", 0), int_param(t.params, "ports", 1)
    ceil = ceiling_mpps(line_rate_bps, size, ports)
    w = t.window
    secs = w[1] - w[0] if w else 0.0
    where: dict[str, float] = {}
    if t.tx_drops_pps:
        where["refused by the generator's interface (its transmit queue full)"] = t.tx_drops_pps * secs
    if t.if_tx_pps is not None and t.if_rx_pps is not None and t.if_tx_pps > t.if_rx_pps:
        where["between the interfaces"] = (t.if_tx_pps - t.if_rx_pps) * secs
    if t.if_rx_pps is not None and t.rx_pps is not None and t.if_rx_pps > t.rx_pps:
        where["at the receiver: its interface counted them, its XDP program did not"] = (t.if_rx_pps - t.rx_pps) * secs
    # nbgen and pkt-gen run a port's threads in one process; trafgen one process per thread
    threads = {engine: float(int_param(t.params, "threads", 1)) if engine != "trafgen" else 1.0}
    paced = {engine: f"paced to {t.asked_pps / 1e6:.3g} Mpps, it spins between frames by design"} \
        if t.asked_pps else {}
    c = counters(samples, w) if w else None
    return Evidence({"rx": t.rx_pps or 0.0}, ceil * 1e6 if ceil else None, cpu=t.cpu, tool_cpus=t.tool_cpus,
                    drops=drops(c), frames=frames_carried(samples, w, None) if w else None,
                    offered_bps=t.asked_pps, datagram_loss=t.loss, loss_where=where, tcp=False, unit="frames/s",
                    what="frames received", tool_cores=tool_cores(t.tool_cpus, threads), spinning=paced,
                    sent_bps=t.tx_pps, sender=f"the generator ({engine})", lost_what="frames")


def _packet_trial(rec: TrialRecord, samples: Sequence[Sample], trim: float) -> PacketTrial:
    common = head(rec)
    if rec.status != "ok":
        return PacketTrial(status=rec.status, error=rec.error, **common)
    # an imported point may have only its receivers' files: their spans then
    spans = [tuple(v["span"]) for v in (rec.meta.get("tx") or rec.meta.get("rx") or {}).values() if v.get("span")]
    if not spans:
        return PacketTrial(status="failed", error="no generator span recorded", **common)
    w0, w1 = max(a for a, _ in spans) + trim, min(b for _, b in spans) - trim
    if w1 <= w0:
        return PacketTrial(status="failed", error=f"the generators shared no window after trimming {trim}s", **common)
    gen, rxh = str(rec.meta.get("generator")), str(rec.meta.get("receiver"))
    ports = int(rec.spec.params.get("ports") or 1)
    rx, per_port = _rate(_series(samples, "pkt.received"), w0, w1, ports)
    if_tx, _ = _rate(_series(samples, "if.packets", host=gen, direction="tx"), w0, w1)
    if_rx, _ = _rate(_series(samples, "if.packets", host=rxh, direction="rx"), w0, w1)
    # frames the generator's interface refused (a full transmit ring; on a veth,
    # the peer's queue): sent by the engine, never on the wire
    tx_drops, _ = _rate(_series(samples, "if.drops", host=gen, direction="tx"), w0, w1)
    warnings = list(rec.meta.get("warnings") or ())
    if rec.spec.params.get("engine") in ("nbgen", "pkt-gen") or if_tx is None:
        # nbgen's own counts; pkt-gen's (netmap transmits around the host stack, whose
        # interface counters may not see those frames); or an engine whose interface was
        # not sampled (an imported pkt-gen or trafgen file): its own count over its own span
        tx, _ = _rate(_series(samples, "pkt.sent"), w0, w1, ports if rec.meta.get("tx") else None)
        if rec.spec.params.get("engine") not in ("nbgen", "pkt-gen") and "imported" not in rec.meta \
                and tx is not None:
            warnings.append("the generator's interface was not sampled: the sent rate is the engine's own count")
    else:
        # trafgen reports one total: its rate is the interface's, what left plus what was refused
        tx = if_tx + (tx_drops or 0.0)
    if tx and tx_drops and tx_drops > 0.001 * tx:
        warnings.append(f"the generator's interface refused {tx_drops / tx:.2%} of the frames sent (its transmit "
                        "queue was full): that loss is at the sender, not on the path")
    if tx and rx and rx > tx * (1 + OVERCOUNT):
        warnings.append(f"the receiver counted {rx / tx - 1:.2%} more frames than were sent: a counting error "
                        "(the loss shows as 0)")
    asked = rec.meta.get("rate_per_port", rec.spec.params.get("rate"))
    if asked and tx:
        want = float(asked) * int(rec.spec.params.get("ports") or 1)       # study.rate is per port
        if abs(tx / want - 1) > RATE_TOLERANCE:
            warnings.append(f"{rec.spec.params.get('engine')} sent {tx / 1e3:.1f} kframes/s of the {want / 1e3:.1f} "
                            f"asked ({tx / want:.0%}): its pacing, not the path, set this point's rate")
    # no CPU warnings: a generator spins on its cores by design (flat out, or
    # dropping frames before their slot when paced), so "CPU-bound" says nothing
    u = cpu_usage(samples, (w0, w1))
    # an imported point with only its senders' files: what was sent, said so (a lab
    # run always has its receiver, so a missing count there is a failure)
    sender_only = rx is None and tx is not None and rec.meta.get("receiver") is None and not rec.meta.get("rx")
    if sender_only:
        warnings.append("no receiver counts: the figure is what was sent, not what arrived")
    if rx is None and not sender_only:
        return PacketTrial(status="failed", error=f"the receiver's counts of the {ports} port(s) do not cover the "
                                                  "measured window",
                           window=(w0, w1), **common)
    modes = {k: str(v.get("mode")) for k, v in (rec.meta.get("rx") or {}).items()}
    return PacketTrial(
        status="ok",
        error=None,
        window=(w0, w1),
        rx_pps=rx,
        tx_pps=tx,
        per_port_rx_pps=per_port,
        if_tx_pps=if_tx,
        if_rx_pps=if_rx,
        tx_drops_pps=tx_drops,
        cpu=u,
        xdp_modes=modes,
        ndr=rec.meta.get("ndr"),
        warnings=tuple(warnings),
        asked_pps=float(asked) * ports if asked else None,
        **common,
    )


@dataclass(frozen=True)
class PacketPoint:
    point: str
    engine: str
    ip: int
    ports: int
    threads: int
    frame_size: int
    n_ok: int
    n_failed: int
    rx_mpps: float | None
    rx_min: float | None
    rx_max: float | None
    tx_mpps: float | None
    loss: float | None
    ceiling_mpps: float | None
    cores_busy: float | None
    cpu_pct: float | None
    engine_cores: float | None  # the generator processes' own CPU (user + system)
    if_tx_mpps: float | None
    if_rx_mpps: float | None
    tx_drops_mpps: float | None  # refused by the generator's interface
    xdp_modes: tuple[str, ...]
    ndr_steps: int | None  # steps of the no-drop-rate search, when it was one
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    verdict: Verdict | None = None  # the limit of the point, over its ok repeats

    @property
    def gbps_l2(self) -> float | None:
        """Frame bits (header .. FCS) per second."""
        return None if self.rx_mpps is None or not self.frame_size else self.rx_mpps * 1e6 * self.frame_size * 8 / 1e9

    @property
    def gbps_l1(self) -> float | None:
        """Wire bits, with preamble, SFD and inter-frame gap."""
        if self.rx_mpps is None or not self.frame_size:
            return None
        return self.rx_mpps * 1e6 * (self.frame_size + WIRE_EXTRA) * 8 / 1e9

    @property
    def of_ceiling(self) -> float | None:
        return fraction_of(self.rx_mpps, self.ceiling_mpps)

    @property
    def above_ceiling(self) -> bool:
        """More frames than the nominal line rate carries (a veth has no wire)."""
        return self.of_ceiling is not None and self.of_ceiling > 1 + ABOVE_CEILING_TOLERANCE

    @property
    def mpps_per_core(self) -> float | None:
        return self.rx_mpps / self.cores_busy if self.rx_mpps and self.cores_busy else None


def ceiling_mpps(line_rate_bps: float | None, frame_size: int, ports: int) -> float | None:
    if not line_rate_bps or not frame_size:
        return None
    return linerate.frame_rate(line_rate_bps, frame_size) * ports / 1e6


def _engine_cores(t: PacketTrial) -> float | None:
    if t.cpu is None:
        return None
    eng = str(t.params.get("engine"))
    return sum(v for k, v in t.cpu.tools.items() if k.split(" ")[0] == eng)


def packet_points(trials: Iterable[PacketTrial], line_rate_bps: float | None) -> list[PacketPoint]:
    med = median_of
    out = []
    for point, ts in by_point(trials).items():
        ok = [t for t in ts if t.status == "ok"]
        p = ts[0].params
        # 0: not known (an imported file that does not say it), never a guessed 64
        size, ports = int_param(p, "frame_size", 0), int_param(p, "ports", 1)
        rx = [t.rx_pps / 1e6 for t in ok if t.rx_pps is not None]
        out.append(
            PacketPoint(
                point,
                str(p.get("engine")),
                int_param(p, "ip", 4),
                ports,
                int_param(p, "threads", 1),
                size,
                len(ok),
                len(ts) - len(ok),
                med(rx),
                min(rx, default=None),
                max(rx, default=None),
                med(t.tx_pps / 1e6 if t.tx_pps else None for t in ok),
                med(t.loss for t in ok),
                ceiling_mpps(line_rate_bps, size, ports),
                med(t.cpu.cores_busy if t.cpu else None for t in ok),
                med(t.cpu.percent_of_machine if t.cpu else None for t in ok),
                med(_engine_cores(t) for t in ok),
                med(t.if_tx_pps / 1e6 if t.if_tx_pps else None for t in ok),
                med(t.if_rx_pps / 1e6 if t.if_rx_pps else None for t in ok),
                med(t.tx_drops_pps / 1e6 if t.tx_drops_pps is not None else None for t in ok),
                tuple(sorted({m for t in ok for m in t.xdp_modes.values()})),
                max((len(t.ndr.get("steps") or []) for t in ok if t.ndr), default=None),  # type: ignore[arg-type]
                tuple(sorted({t.error for t in ts if t.error})),
                tuple(sorted({w for t in ts for w in t.warnings})),
                point_verdict([t.verdict for t in ok if t.verdict is not None]),
            )
        )
    return sorted(out, key=lambda q: (q.engine, q.ip, q.ports, q.threads, q.frame_size))


def port_table(points: Sequence[PacketPoint]) -> list[dict]:
    """Seed 003's table: Mpps by number of ports, per engine, IP version,
    threads and frame size (one row each, a column per port count)."""
    rows: dict[tuple, dict] = {}
    for q in points:
        key = (q.engine, q.ip, q.threads, q.frame_size)
        row = rows.setdefault(
            key, {"engine": q.engine, "ip": q.ip, "threads": q.threads, "frame_size": q.frame_size, "mpps": {}}
        )
        row["mpps"][q.ports] = q.rx_mpps
    return list(rows.values())
