"""The TCP study's view: its table, figures (seed 000's Gbps vs IO size per
direction, seed 001's throughput-and-CPU chart), exports and live figure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...analysis.aggregate import NoSharedWindow, aggregate, directions_in
from ...analysis.capacity import ASSUMPTION, TARGETS_GBPS
from ...analysis.trials import pct_of
from ...core.linerate import format_speed
from ...core.units import format_size
from ...records import Sample, TrialRecord
from ...report.facts import facts_section
from ...report.figures import DIRECTION_TITLES, cpu_axis, new_figure, save, size_axis
from ...report.numbers import num, whole
from ...report.render import cpu_sentence, pinned_tools, write_exports, write_page
from ...report.tables import Col, limit_text, ok_failed, per_host, spread, table
from ...report.timeline import timelines
from ...report.view import Analysed, ChartSpec, CompareValues, Metric, PointSummary, RunView, StoredRun, summaries
from .analysis import PointStats, TrialResult, point_stats, trial_result

TEMPLATE = Path(__file__).with_name("report.html.j2")

_CSV_COLS = ["point", "direction", "connections", "io_size", "io", "engine", "repeats_ok",
             "repeats_failed", "repeats_partial", "survivors_only", "bps_median", "bps_min", "bps_max", "bps_stdev",
             "tx_bps", "rx_bps", "sender_bps", "ceiling_bps", "wire_bps", "gbps_median", "gbps_min", "gbps_max",
             "gbps_stdev", "tx_gbps",
             "rx_gbps", "sender_gbps", "ceiling_gbps", "pct_of_ceiling", "max_pct_of_ceiling", "above_ceiling",
             "wire_gbps", "wire_pct_of_link", "wire_above_link", "cores_busy", "cpu_pct_of_machine",
             "gbps_per_core", "bps_per_core", "cpu_s_per_gb", "cycles_per_byte_est", "busiest_cpu",
             "max_start_skew_s", "max_start_skew_ms", "retransmits", "stack_retrans", "drops",
             "net_rx_softirq_per_s", "net_rx_by_cpu", "nic_irq_per_s"]




METRICS: tuple[Metric, ...] = (
    Metric("gbps", "Gbit/s", "receiver payload, median over repeats"),
    Metric("gbps_min", "Gbit/s", "lowest repeat"),
    Metric("gbps_max", "Gbit/s", "highest repeat"),
    Metric("gbps_stdev", "Gbit/s", "standard deviation over repeats", higher_is_better=False),
    Metric("tx_gbps", "Gbit/s", "tx direction (bidirectional points)"),
    Metric("rx_gbps", "Gbit/s", "rx direction (bidirectional points)"),
    Metric("sender_gbps", "Gbit/s", "sender side"),
    Metric("pct_of_ceiling", "%", "of the line-rate ceiling"),
    Metric("wire_gbps", "Gbit/s", "on the wire, from interface counters"),
    Metric("cores_busy", "cores", "CPU cores busy", higher_is_better=False),
    Metric("cpu_pct", "%", "CPU of the machine", higher_is_better=False),
    Metric("gbps_per_core", "Gbit/s per core", "throughput per busy core"),
    Metric("cpu_s_per_gb", "CPU s per GB", "CPU seconds per GB moved", higher_is_better=False),
    Metric("retransmits", "count", "TCP retransmits reported by the engine", higher_is_better=False),
    Metric("drops", "count", "interface drops", higher_is_better=False),
)


def _values(p: PointStats) -> dict[str, float | None]:
    return {"gbps": p.median, "gbps_min": p.low, "gbps_max": p.high, "gbps_stdev": p.stdev,
            "tx_gbps": p.by_direction.get("tx"), "rx_gbps": p.by_direction.get("rx"), "sender_gbps": p.sender_median,
            "pct_of_ceiling": pct_of(p.median, p.ceiling_gbps), "wire_gbps": p.wire_gbps,
            "cores_busy": p.cores_busy, "cpu_pct": p.cpu_percent, "gbps_per_core": p.gbps_per_core,
            "cpu_s_per_gb": p.cpu_s_per_gb, "retransmits": float(p.retransmits), "drops": p.drops}


CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec("throughput", "Gbps vs IO size, {direction}", "io_size", "IO size (bytes)", "gbps_median",
              "Gbit/s (receiver payload, median)", "{connections} connections", split=("direction",),
              series=("connections",), ceiling="ceiling_gbps", low="gbps_min", high="gbps_max"),
    ChartSpec("cpu", "cores busy vs IO size, {direction}", "io_size", "IO size (bytes)", "cores_busy",
              "cores busy", "{connections} connections", split=("direction",), series=("connections",)),
)


class TcpView:
    kind = "tcp"
    metrics = METRICS
    charts = CHARTS
    timeline_panels = None        # each client's throughput

    def point_summaries(self, view: RunView) -> list[PointSummary]:
        return summaries(view, _values)

    @property
    def headline(self) -> Sequence[Col]:
        """The columns a reader compares first: the report's headline table and the run's results table."""
        return HEADLINE

    def analyse(self, run: StoredRun) -> Analysed:
        results = [trial_result(t, run.samples_of(t), run.trim, run.link) for t in run.records]
        cpu = run.info.meta.get("cpu") or {}
        mhz = cpu.get("mhz") if isinstance(cpu, dict) else None
        return Analysed(results, point_stats(results, run.link, mhz))

    def rows(self, view: RunView) -> list[dict[str, Any]]:
        return table_rows(view.points)

    def render(self, view: RunView, out: Path) -> Path:
        rows = table_rows(view.points)
        lab = view.info.meta.get("lab") or {}
        mtu = lab.get("mtu") if isinstance(lab, dict) else None
        speed = format_speed(view.link.speed_bps) if view.link and view.link.speed_bps else None
        figs = throughput_figures(rows, out, view.info.name, mtu, speed)
        figs += cpu_figures(rows, out, view.info.name)
        tl = timelines(view, out)
        csv_path, json_path = export(view, rows, out)
        above = [r for r in rows if r["above_ceiling"]]
        over_link = [r for r in rows if r["wire_above_link"]]
        return write_page(out, TEMPLATE, view, rows=rows, headline=table(rows, HEADLINE),
                          detail_table=table(rows, DETAIL),
                          cpu_table=table(rows, CPU), capacity_table=table(rows, CAPACITY),
                          capacity_assumption=ASSUMPTION, figures=[p.name for p in figs],
                          failures=view.failures, csv=csv_path.name, json=json_path.name, above=above,
                          over_link=over_link, cpu=cpu_sentence(view), facts=facts_section(view.facts),
                          tuning=view.info.meta.get("tuning"), pinned=pinned_tools(view),
                          has_cpu=any(r["cores_busy"] is not None for r in rows), timelines=tl.files,
                          timeline_notes=tl.notes)

    def compare_values(self, view: RunView) -> list[CompareValues]:
        values: dict[str, list[float]] = {}
        for t in view.trials:
            if isinstance(t, TrialResult) and t.status == "ok" and t.gbps is not None:
                values.setdefault(t.point, []).append(float(t.gbps))
        return [CompareValues("Gbps (receiver payload)", values)]

    def progress_line(self, rec: TrialRecord, samples: list[Sample], run_meta: Mapping[str, Any]) -> str:
        """The figure the report will show, from the study's own aggregation (summing
        per-client rates over different windows overstates them)."""
        trim = float(run_meta.get("trim", 0.0))
        try:
            g = sum(aggregate(samples, direction=d, trim=trim).gbps for d in directions_in(samples))
        except NoSharedWindow as e:
            return f"{rec.spec.point} no window ({e})"
        return f"{rec.spec.point} {num(g)} Gbps"


def table_rows(points: Sequence[PointStats]) -> list[dict[str, Any]]:
    """One row per point, full precision: the report's tables and the CSV/JSON
    exports.  Rates in bit/s (``*_bps``) and, unrounded, in Gbps (``*gbps*``);
    counters as integers."""
    rows = []
    for p in points:
        io = p.params.get("io_size")
        gbps = {"gbps_median": p.median, "gbps_min": p.low, "gbps_max": p.high, "gbps_stdev": p.stdev,
                "tx_gbps": p.by_direction.get("tx"), "rx_gbps": p.by_direction.get("rx"),
                "sender_gbps": p.sender_median, "ceiling_gbps": p.ceiling_gbps, "wire_gbps": p.wire_gbps,
                "gbps_per_core": p.gbps_per_core}
        rows.append({
            "point": p.point,
            "direction": p.params.get("direction"),
            "connections": p.params.get("connections"),
            "io_size": io,
            "io": format_size(int(io)) if isinstance(io, int) else io,
            "engine": p.params.get("engine"),
            "repeats_ok": p.n_ok,
            "repeats_failed": p.n_failed,
            "repeats_partial": p.n_partial,
            "survivors_only": p.survivors_only,
            "min_of_carried": p.min_of_carried,
            "limit": p.verdict.limit if p.verdict else None,
            "verdict": p.verdict.as_dict() if p.verdict else None,
            "capacity": p.capacity.as_dict() if p.capacity else None,
            **gbps,
            **{_bps_key(k): _bps(v) for k, v in gbps.items()},
            "per_host_gbps": dict(p.per_host),
            "per_host_bps": {h: g * 1e9 for h, g in p.per_host.items()},
            "max_start_skew_ms": p.max_skew_s * 1000 if p.max_skew_s is not None else None,
            "max_start_skew_s": p.max_skew_s,
            "pct_of_ceiling": pct_of(p.median, p.ceiling_gbps),
            "above_ceiling": p.above_ceiling,
            "max_pct_of_ceiling": p.max_of_ceiling * 100 if p.max_of_ceiling is not None else None,
            "wire_above_link": p.wire_above_link,
            "cores_busy": p.cores_busy,
            "cpu_pct_of_machine": p.cpu_percent,
            "cpu_s_per_gb": p.cpu_s_per_gb,
            "cycles_per_byte_est": p.cycles_per_byte,
            "busiest_cpu": p.busiest_cpu,
            "cpu_warnings": list(p.cpu_warnings),
            "wire_pct_of_link": p.wire_gbps / p.link_gbps * 100 if p.wire_gbps and p.link_gbps else None,
            "retransmits": whole(p.retransmits),
            "stack_retrans": whole(p.stack_retrans),
            "drops": whole(p.drops),
            "net_rx_softirq_per_s": p.net_rx_per_s,
            "net_rx_by_cpu": p.net_rx_by_cpu,
            "nic_irq_per_s": p.nic_irq_per_s,
            "net_warnings": list(p.net_warnings),
            "errors": list(p.errors),
        })
    return rows


def _bps_key(gbps_key: str) -> str:
    """gbps_median -> bps_median, tx_gbps -> tx_bps, gbps_per_core -> bps_per_core."""
    return gbps_key.replace("gbps", "bps")


def _bps(gbps: float | None) -> float | None:
    return None if gbps is None else gbps * 1e9


def _ceiling_alert(r: Mapping[str, Any]) -> bool:
    return bool(r.get("above_ceiling"))


# The headline: what a reader compares first; also the results table at the end of 'nicbench run'
HEADLINE = (
    Col("direction", "direction", "text"),
    Col("connections", "connections", "count"),
    Col("IO size", "io", "text"),
    Col("Gbps (median)", "gbps_median", bold=True,
        alert=lambda r: bool(r.get("survivors_only")) or r.get("min_of_carried") is not None,
        title="receiver-side payload, 10^9 bit/s, median over repeats (red: the survivors' aggregate only, "
              "or under 80 % of the payload the server's interface carried)"),
    Col("min–max", spread("gbps_min", "gbps_max"), "text", title="over repeats"),
    Col("ceiling Gbps", "ceiling_gbps", title="the most goodput the link allows (core/linerate.py)"),
    Col("% of ceiling", "pct_of_ceiling", alert=_ceiling_alert,
        title="above 100 %: the model or the measurement is wrong"),
    Col("cores busy", "cores_busy", title="CPU cores busy over the point's window (the whole machine)"),
    Col("retrans", "retransmits", "count", title="TCP retransmits the tool's sockets counted"),
    Col("ok/failed", ok_failed, "text", title="repeats"),
    Col("limit", limit_text, "text", title="what held the point below line rate, from its measurements "
        "(nicbench explain RUN --point KEY: the evidence)"),
)
DETAIL = (
    Col("point", "point", "text"),
    *HEADLINE[:4],
    Col("min", "gbps_min"), Col("max", "gbps_max"), Col("stdev", "gbps_stdev"),
    Col("ceiling", "ceiling_gbps"),
    Col("% of ceiling", "pct_of_ceiling", alert=_ceiling_alert),
    Col("max % of ceiling", "max_pct_of_ceiling", alert=_ceiling_alert,
        title="highest one-direction goodput / its ceiling, any repeat"),
    Col("wire Gbps", "wire_gbps", title="counted bytes + 24 B per frame, all directions"),
    Col("wire % of link", "wire_pct_of_link", alert=lambda r: bool(r.get("wire_above_link"))),
    Col("tx", "tx_gbps"), Col("rx", "rx_gbps"), Col("sender", "sender_gbps"),
    Col("per client Gbps", per_host("per_host_gbps"), "text"),
    Col("start skew ms", "max_start_skew_ms"),
    Col("retrans (tool)", "retransmits", "count", title="the tool's sockets"),
    Col("retrans (stack)", "stack_retrans", "count", title="kernel TCP RetransSegs, all hosts"),
    Col("drops", "drops", "count", title="interface drops, all hosts", alert=lambda r: bool(r.get("drops"))),
    Col("ok/failed", ok_failed, "text"),
)
def _cores_at(target: int) -> Callable[[Mapping[str, Any]], float | None]:
    def get(r: Mapping[str, Any]) -> float | None:
        c = r.get("capacity") or {}
        v = (c.get("cores_at") or {}).get(str(target))
        return float(v) if isinstance(v, (int, float)) else None
    return get


# the capacity model (analysis/capacity.py): cores at faster links at each point's cost per byte
CAPACITY = (
    *HEADLINE[:4],
    Col("cores per Gbit/s", lambda r: (r.get("capacity") or {}).get("cores_per_gbps"),
        title="cores busy (every state, softirq included) per Gbit/s of goodput, median over ok repeats"),
    *(Col(f"cores at {t}G", _cores_at(t)) for t in TARGETS_GBPS),
    Col("withheld", lambda r: (r.get("capacity") or {}).get("withheld"), "text", wrap=True),
)

CPU = (
    *HEADLINE[:4],
    Col("cores busy", "cores_busy"), Col("CPU % of machine", "cpu_pct_of_machine"),
    Col("Gbps per busy core", "gbps_per_core"), Col("CPU-s per GB", "cpu_s_per_gb"),
    Col("cycles/byte (est.)", "cycles_per_byte_est"), Col("busiest CPU", "busiest_cpu", "text"),
    Col("NET_RX softirqs/s", "net_rx_softirq_per_s"), Col("NET_RX by CPU", "net_rx_by_cpu", "text"),
    Col("NIC IRQs/s", "nic_irq_per_s"),
    Col("warnings", lambda r: len(r["cpu_warnings"] + r["net_warnings"]), "count",
        title="listed below the table"),
)


def export(view: RunView, rows: list[dict[str, Any]], out: Path) -> tuple[Path, Path]:
    flat = [{**r, "per_host_gbps": ";".join(f"{h}={g}" for h, g in r["per_host_gbps"].items()),
             "per_host_bps": ";".join(f"{h}={g}" for h, g in r["per_host_bps"].items())} for r in rows]
    return write_exports(
        view, out, rows, _CSV_COLS + ["per_host_gbps", "per_host_bps"],
        {"gbps": "10^9 bit/s, receiver-side payload", "bps": "bit/s, receiver-side payload", "io_size": "bytes",
         "max_start_skew_s": "seconds", "max_start_skew_ms": "milliseconds", "pct": "percent"},
        [{"trial_id": t.trial_id, "point": t.point, "repeat": t.repeat, "status": t.status, "error": t.error,
          "gbps": t.gbps, "window_s": {d: a.seconds for d, a in t.receiver.items()},
          "start_skew_s": t.start_skew_s, "overhead_s": t.overhead_s, "tool_cpus": dict(t.tool_cpus)}
         for t in view.trials if isinstance(t, TrialResult)], csv_rows=flat)



def throughput_figures(rows: list[dict[str, Any]], out_dir: Path, title: str, mtu: int | None,
                       speed: str | None = None) -> list[Path]:
    """One PNG+SVG per direction; returns the PNG paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    by_dir: dict[str, dict[int, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["gbps_median"] is not None and isinstance(r["io_size"], int):
            by_dir[r["direction"]][r["connections"]].append(r)
    paths = []
    for direction in [d for d in ("tx", "rx", "bidir") if d in by_dir]:
        fig, ax = new_figure()
        sizes: set[int] = set()
        for conns, pts in sorted(by_dir[direction].items()):
            pts.sort(key=lambda r: r["io_size"])
            xs = [p["io_size"] for p in pts]
            ys = [p["gbps_median"] for p in pts]
            lo = [p["gbps_median"] - p["gbps_min"] for p in pts]
            hi = [p["gbps_max"] - p["gbps_median"] for p in pts]
            sizes.update(xs)
            ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=3, label=f"{conns} connections")
        ceil = max((r["ceiling_gbps"] for pts in by_dir[direction].values() for r in pts
                    if r.get("ceiling_gbps")), default=None)
        if ceil:
            ax.axhline(ceil, color="crimson", linestyle="--", linewidth=1.2,
                       label=f"line-rate ceiling {num(ceil)} Gbps")
        above = [r for pts in by_dir[direction].values() for r in pts if r.get("above_ceiling")]
        for r in above:
            ax.annotate("ABOVE CEILING", (r["io_size"], r["gbps_median"]), color="crimson", fontsize=7,
                        xytext=(0, 8), textcoords="offset points", ha="center")
        size_axis(ax, sizes, "IO size (bytes)")
        ax.set_ylabel("Throughput (Gbps, receiver side)")
        top = max([ceil or 0.0] + [r["gbps_max"] or 0.0 for pts in by_dir[direction].values() for r in pts])
        ax.set_ylim(0, top * 1.12 if top else None)   # room to see the ceiling line
        mtu_s = (f", {speed}bit/s" if speed else "") + (f", MTU {mtu}" if mtu else "")
        ax.set_title(f"{title}: {DIRECTION_TITLES.get(direction, direction)}{mtu_s}", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        paths.append(save(fig, out_dir, f"throughput-{direction}"))
    return paths


def cpu_figures(rows: list[dict[str, Any]], out_dir: Path, title: str) -> list[Path]:
    """Seed 001's figure: throughput and CPU % on one chart, one panel per direction."""
    paths = []
    for direction in ("tx", "rx", "bidir"):
        pts = [r for r in rows if r["direction"] == direction and r["gbps_median"] is not None
               and r.get("cpu_pct_of_machine") is not None]
        if not pts:
            continue
        pts.sort(key=lambda r: (r["connections"], r["io_size"] if isinstance(r["io_size"], int) else 0))
        labels = [f"{r['connections']}c/{r['io']}" for r in pts]
        xs = list(range(len(pts)))
        fig, ax = new_figure(max(6.0, 0.5 * len(pts) + 3))
        ax.bar(xs, [r["gbps_median"] for r in pts], color="#4c72b0", label="goodput (Gbps)")
        if any(r.get("wire_gbps") for r in pts):
            wire = [float("nan") if r.get("wire_gbps") is None else r["wire_gbps"] for r in pts]
            ax.plot(xs, wire, "s", color="#55a868", label="wire (Gbps)")
        ax.set_ylabel("Gbps")
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
        cpu_axis(ax, xs, [r["cpu_pct_of_machine"] for r in pts])
        ax.set_title(f"{title}: {DIRECTION_TITLES.get(direction, direction)}: throughput and CPU", fontsize=10)
        paths.append(save(fig, out_dir, f"cpu-{direction}"))
    return paths


