"""The packet study's view: seed 003's Mpps against frame size and line
rate, its single/dual-port table, and what each frame cost in CPU."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...analysis.trials import float_meta, pct_of
from ...core.linerate import format_speed
from ...records import HostFacts, Sample, TrialRecord
from ...report.facts import facts_section
from ...report.figures import new_figure, plain_log_axis, save, size_axis
from ...report.numbers import num
from ...report.render import cpu_sentence, pinned_tools, write_exports, write_page
from ...report.tables import Col, limit_text, ok_failed, spread, table
from ...report.timeline import Panel, PanelsOf, busiest_host, interface_series, series_of, timelines
from ...report.view import Analysed, ChartSpec, CompareValues, Metric, PointSummary, RunView, StoredRun, summaries
from .analysis import PacketPoint, PacketTrial, packet_points, packet_trial, port_table

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

TEMPLATE = Path(__file__).with_name("report.html.j2")


METRICS: tuple[Metric, ...] = (
    Metric("rx_mpps", "Mpps", "10^6 frames/s received, median over repeats"),
    Metric("rx_min", "Mpps", "lowest repeat"),
    Metric("rx_max", "Mpps", "highest repeat"),
    Metric("tx_mpps", "Mpps", "10^6 frames/s sent"),
    Metric("loss_pct", "%", "frames sent but not received", higher_is_better=False),
    Metric("gbps_l2", "Gbit/s", "frame bits with FCS"),
    Metric("gbps_l1", "Gbit/s", "wire bits (+20 B per frame)"),
    Metric("pct_of_ceiling", "%", "of the line-rate frame rate"),
    Metric("cores_busy", "cores", "CPU cores busy", higher_is_better=False),
    Metric("cpu_pct", "%", "CPU of the machine", higher_is_better=False),
    Metric("mpps_per_core", "Mpps per core", "frames per busy core"),
)


def _values(p: PacketPoint) -> dict[str, float | None]:
    return {"rx_mpps": p.rx_mpps, "rx_min": p.rx_min, "rx_max": p.rx_max, "tx_mpps": p.tx_mpps,
            "loss_pct": p.loss * 100 if p.loss is not None else None, "gbps_l2": p.gbps_l2, "gbps_l1": p.gbps_l1,
            "pct_of_ceiling": pct_of(p.rx_mpps, p.ceiling_mpps), "cores_busy": p.cores_busy,
            "cpu_pct": p.cpu_pct, "mpps_per_core": p.mpps_per_core}


CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec("rate", "Mpps received vs frame size", "frame_size", "frame size (bytes)", "rx_mpps", "Mpps received",
              "{engine} IPv{ip}, {ports} ports, {threads} threads", series=("engine", "ip", "ports", "threads"),
              ceiling="ceiling_mpps", low="rx_min", high="rx_max"),
)


class PacketView:
    kind = "packets"
    metrics = METRICS
    charts = CHARTS

    @property
    def timeline_panels(self) -> PanelsOf:
        """The first panels of a point's timeline: this study's own."""
        return timeline_panels

    def point_summaries(self, view: RunView) -> list[PointSummary]:
        return summaries(view, _values)

    @property
    def headline(self) -> Sequence[Col]:
        """The columns a reader compares first: the report's headline table and the run's results table."""
        return HEADLINE

    def analyse(self, run: StoredRun) -> Analysed:
        line_rate = float_meta(run.info.meta, "line_rate_bps") or None
        pts = [packet_trial(t, run.samples_of(t), run.trim, line_rate) for t in run.records]
        return Analysed(pts, packet_points(pts, line_rate))

    def rows(self, view: RunView) -> list[dict[str, Any]]:
        return packet_rows(view.points)

    def render(self, view: RunView, out: Path) -> Path:
        """Seed 003's report: Mpps vs frame size against line rate, the single/dual-port table, CPU."""
        rows = packet_rows(view.points)
        lr = view.info.meta.get("line_rate_bps")
        figs = packet_figures(rows, out, view.info.name, format_speed(float(lr)) if lr else None)
        cols = ["point", "engine", "ip", "ports", "threads", "frame_size", "repeats_ok", "repeats_failed",
                "rx_pps", "rx_min_pps", "rx_max_pps", "tx_pps", "loss", "bps_l2", "bps_l1", "ceiling_pps",
                "rx_mpps", "rx_min", "rx_max", "tx_mpps", "loss_pct", "gbps_l2", "gbps_l1", "ceiling_mpps",
                "pct_of_ceiling", "cores_busy", "cpu_pct_of_machine", "engine_cores", "mpps_per_core", "pps_per_core",
                "if_tx_pps", "if_rx_pps", "tx_drops_pps", "if_tx_mpps", "if_rx_mpps", "tx_drops_mpps", "xdp_mode",
                "ndr_steps"]
        write_exports(
            view,
            out,
            rows,
            cols,
            {
                "rx_mpps": "10^6 frames/s counted by the receiver's XDP program",
                "tx_mpps": "10^6 frames/s sent",
                "gbps_l2": "10^9 bit/s of frames with FCS",
                "gbps_l1": "10^9 bit/s on the wire (+20 B/frame)",
                "frame_size": "bytes, destination MAC to FCS",
                "rx_pps": "frames/s counted by the receiver's XDP program",
                "tx_pps": "frames/s sent",
                "bps_l2": "bit/s of frames with FCS",
                "bps_l1": "bit/s on the wire (+20 B/frame)",
                "loss": "fraction of the frames sent that were not received",
            },
            [
                {
                    "trial_id": t.trial_id,
                    "point": t.point,
                    "repeat": t.repeat,
                    "status": t.status,
                    "error": t.error,
                    "rx_pps": t.rx_pps,
                    "tx_pps": t.tx_pps,
                    "loss": t.loss,
                    "per_port_rx_pps": dict(t.per_port_rx_pps),
                    "window": t.window,
                    "ndr": t.ndr,
                }
                for t in view.trials
                if isinstance(t, PacketTrial)
            ],
        )
        seed = port_table(view.points)
        ports = sorted({p.ports for p in view.points})
        gen = str(view.info.meta.get("generator"))
        others = [
            f"{h.host}: kernel pktgen {_fact(h, k)}"
            if k == "packet.pktgen"
            else f"netmap {_fact(h, k)}"
            for h in view.facts
            if h.host == gen
            for k in ("packet.pktgen", "packet.netmap")
        ]
        tl = timelines(view, out, timeline_panels)
        return write_page(
            out,
            TEMPLATE,
            view,
            rows=rows,
            timelines=tl.files,
            timeline_notes=tl.notes,
            table=seed,
            headline=table(rows, HEADLINE),
            detail_table=table(rows, DETAIL),
            ports=ports,
            line_rate=format_speed(float(lr)) if lr else None,
            figures=[p.name for p in figs],
            failures=view.failures,
            cpu=cpu_sentence(view),
            facts=facts_section(view.facts),
            pinned=pinned_tools(view),
            others="; ".join(others),
        )

    def compare_values(self, view: RunView) -> list[CompareValues]:
        values: dict[str, list[float]] = {}
        loss: dict[str, list[float]] = {}
        for t in view.trials:
            if isinstance(t, PacketTrial) and t.status == "ok" and t.rx_pps:
                values.setdefault(t.point, []).append(t.rx_pps / 1e6)
                if t.loss is not None:
                    loss.setdefault(t.point, []).append(t.loss * 100)
            elif isinstance(t, PacketTrial) and t.status == "ok" and t.tx_pps:
                # an imported point with only its senders' files: a rate sent is no rate received,
                # so it is compared only with other sent rates, under a point name that says so
                values.setdefault(f"{t.point} (sent)", []).append(t.tx_pps / 1e6)
        sent_only = bool(values) and all(k.endswith(" (sent)") for k in values)
        return [CompareValues("Mpps sent" if sent_only else "Mpps received", values),
                CompareValues("loss %", loss, higher_is_better=False)]

    def progress_line(self, rec: TrialRecord, samples: list[Sample], run_meta: Mapping[str, Any]) -> str:
        t = packet_trial(rec, samples, float(run_meta.get("trim", 0.0)))
        return f"{rec.spec.point} {num(t.rx_pps / 1e6)} Mpps received" if t.rx_pps else f"{rec.spec.point} {t.error}"


def timeline_panels(samples: Sequence[Sample], t: Any) -> tuple[list[Panel], list[str]]:
    """A packet point over time: frames received per port (the receiver's
    XDP counts) and sent (the generator's, dashed), in Mpps."""
    rx = series_of(samples, "pkt.received", lambda s: f"received {s.tag('port')}")
    tx = series_of(samples, "pkt.sent", lambda s: f"sent {s.tag('port')}")
    lacks = [] if rx else ["frames received per interval: no receiver counts of this trial in the archive"]
    if not tx or all(len(v) < 3 for v in tx.values()):
        # trafgen says one total: its interface's transmit counter is what it sent per interval
        gen = busiest_host(samples, "if.packets")
        wire = {k: v for k, v in interface_series(samples, gen, "if.packets").items() if " tx " in k}
        lacks.append("frames sent per interval: the generator reported "
                     + ("a total only" if tx else "none") + (f"; {gen}'s interface stands in" if wire else ""))
        tx = {**tx, **wire} if wire else tx
    return [Panel("Mpps", {**tx, **rx}, "rate", 1e-6, styles=dict.fromkeys(tx, "--"))], lacks


def packet_rows(points: Sequence[PacketPoint]) -> list[dict[str, Any]]:
    """One row per packet point, full precision: frames/s (``*_pps``) and bit/s
    (``bps_*``), and unrounded Mpps and Gbps; loss as a fraction and a percent."""
    def pps(m: float | None) -> float | None:
        return None if m is None else m * 1e6

    def bps(g: float | None) -> float | None:
        return None if g is None else g * 1e9
    return [
        {
            "point": p.point,
            "engine": p.engine,
            "ip": p.ip,
            "ports": p.ports,
            "threads": p.threads,
            "frame_size": p.frame_size,
            "repeats_ok": p.n_ok,
            "repeats_failed": p.n_failed,
            "rx_pps": pps(p.rx_mpps),
            "rx_min_pps": pps(p.rx_min),
            "rx_max_pps": pps(p.rx_max),
            "tx_pps": pps(p.tx_mpps),
            "loss": p.loss,
            "bps_l2": bps(p.gbps_l2),
            "bps_l1": bps(p.gbps_l1),
            "ceiling_pps": pps(p.ceiling_mpps),
            "rx_mpps": p.rx_mpps,
            "rx_min": p.rx_min,
            "rx_max": p.rx_max,
            "tx_mpps": p.tx_mpps,
            "loss_pct": p.loss * 100 if p.loss is not None else None,
            "gbps_l2": p.gbps_l2,
            "gbps_l1": p.gbps_l1,
            "ceiling_mpps": p.ceiling_mpps,
            "pct_of_ceiling": pct_of(p.rx_mpps, p.ceiling_mpps),
            "above_ceiling": p.above_ceiling,
            "cores_busy": p.cores_busy,
            "cpu_pct_of_machine": p.cpu_pct,
            "engine_cores": p.engine_cores,
            "mpps_per_core": p.mpps_per_core,
            "pps_per_core": pps(p.mpps_per_core),
            "if_tx_pps": pps(p.if_tx_mpps),
            "if_rx_pps": pps(p.if_rx_mpps),
            "tx_drops_pps": pps(p.tx_drops_mpps),
            "if_tx_mpps": p.if_tx_mpps,
            "if_rx_mpps": p.if_rx_mpps,
            "tx_drops_mpps": p.tx_drops_mpps,
            "xdp_mode": ", ".join(p.xdp_modes),
            "ndr_steps": p.ndr_steps,
            "limit": p.verdict.limit if p.verdict else None,
            "verdict": p.verdict.as_dict() if p.verdict else None,
            "errors": list(p.errors),
            "warnings": list(p.warnings),
        }
        for p in points
    ]


# Mpps per busy core in the detail only: the headline keeps to 11 columns with the limit
PER_CORE = Col("Mpps / busy core", "mpps_per_core")
HEADLINE = (
    Col("engine", "engine", "text"),
    Col("IP", lambda r: f"v{r['ip']}", "text"),
    Col("ports", "ports", "count"),
    Col("threads", "threads", "count"),
    Col("frame B", "frame_size", "count"),
    Col("rx Mpps", "rx_mpps", bold=True, title="10^6 frames/s the receiver counted, median over repeats"),
    Col("min–max", spread("rx_min", "rx_max"), "text", title="over repeats"),
    Col("loss %", "loss_pct"),
    Col("% of ceiling", "pct_of_ceiling", alert=lambda r: bool(r.get("above_ceiling"))),
    Col("ok/failed", ok_failed, "text"),
    Col("limit", limit_text, "text", title="what held the point below line rate, from its measurements "
        "(nicbench explain RUN --point KEY: the evidence)"),
)
DETAIL = (
    Col("point", "point", "text"), *HEADLINE[:6],
    Col("tx Mpps", "tx_mpps"), HEADLINE[7], Col("Gbps L2", "gbps_l2"), Col("Gbps L1", "gbps_l1"),
    Col("ceiling Mpps", "ceiling_mpps"), HEADLINE[8], Col("cores busy", "cores_busy"),
    Col("engine cores", "engine_cores"), PER_CORE,
    Col("if tx / rx Mpps", lambda r: f"{num(r.get('if_tx_mpps'))} / {num(r.get('if_rx_mpps'))}", "text"),
    Col("tx refused Mpps", "tx_drops_mpps"), Col("receiver XDP", "xdp_mode", "text"),
    Col("NDR steps", "ndr_steps", "count"), HEADLINE[9],
)


def packet_figures(rows: list[dict[str, Any]], out_dir: Path, title: str, line_rate: str | None) -> list[Path]:
    """Seed 003 as a figure: Mpps received vs frame size, one line per engine,
    IP version, ports and threads, with each port count's line-rate ceiling
    (a level line when the run has one frame size).  The y axis is linear from
    zero unless the values span more than a factor of 20, then logarithmic
    with plain labels (1, 10, never 6x10^0)."""
    drawn = packet_axes(rows, title, line_rate)
    return [] if drawn is None else [save(drawn[0], out_dir, "packets-mpps")]


def packet_axes(rows: list[dict[str, Any]], title: str, line_rate: str | None) -> tuple[Figure, Axes] | None:
    """The figure of :func:`packet_figures`, not yet saved (None: nothing to draw)."""
    pts = [r for r in rows if r["rx_mpps"] is not None]
    if not pts:
        return None
    fig, ax = new_figure()
    series: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
    for r in pts:
        series[(r["engine"], r["ip"], r["ports"], r["threads"])].append(r)
    sizes = sorted({r["frame_size"] for r in pts})
    for (eng, ip, ports, threads), rs in sorted(series.items()):
        rs.sort(key=lambda r: r["frame_size"])
        ax.plot(
            [r["frame_size"] for r in rs],
            [r["rx_mpps"] for r in rs],
            "o-",
            label=f"{eng} IPv{ip}, {ports} port{'s' if ports > 1 else ''}, "
                  f"{threads} thread{'s' if threads > 1 else ''}",
        )
    levels = [r["rx_mpps"] for r in pts]
    for ports in sorted({r["ports"] for r in pts}):
        cs = sorted({r["frame_size"]: r["ceiling_mpps"] for r in rows
                     if r["ports"] == ports and r["ceiling_mpps"]}.items())
        if not cs:
            continue
        style = dict(ls="--" if ports == 1 else ":", lw=1.2, color="crimson" if ports == 1 else "gray",
                     label=f"line rate, {ports} x {line_rate}" + (f": {num(cs[0][1])} Mpps" if len(cs) == 1 else ""))
        if len(cs) == 1:           # one frame size: a line through one point draws nothing
            ax.axhline(cs[0][1], **style)  # type: ignore[arg-type]
        else:
            ax.plot([c[0] for c in cs], [c[1] for c in cs], **style)  # type: ignore[arg-type]
        levels += [c[1] for c in cs]
    size_axis(ax, sizes, "frame size, bytes (with FCS)", str)
    low, high = min(v for v in levels if v > 0), max(levels)
    if high / low > 20:
        plain_log_axis(ax)
    else:
        ax.set_ylim(0, high * 1.12)
    ax.grid(True, alpha=0.3)
    ax.set_ylabel("Mpps received")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    ax.set_title(f"{title}: packet rate vs frame size", fontsize=10)
    return fig, ax


def _fact(h: HostFacts, key: str) -> str:
    f = h.get(key)
    return f.display() if f is not None else "not recorded"
