"""The TCP study's view: its table, figures (seed 000's Gbps vs IO size per
direction, seed 001's throughput-and-CPU chart), exports and live figure."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...analysis.aggregate import NoSharedWindow, aggregate, directions_in
from ...core.linerate import format_speed
from ...core.units import format_size
from ...records import Sample, TrialRecord
from ...report.facts import facts_section
from ...report.figures import DIRECTION_TITLES, cpu_axis, new_figure, save, size_axis
from ...report.render import cpu_sentence, pinned_tools, rounded, write_exports, write_page
from ...report.view import Analysed, CompareValues, Metric, PointSummary, RunView, StoredRun, summaries
from .analysis import PointStats, TrialResult, point_stats, trial_result

TEMPLATE = Path(__file__).with_name("report.html.j2")

_CSV_COLS = ["point", "direction", "connections", "io_size", "io", "engine", "repeats_ok",
             "repeats_failed", "repeats_partial", "survivors_only", "gbps_median", "gbps_min", "gbps_max",
             "gbps_stdev", "tx_gbps",
             "rx_gbps", "sender_gbps", "ceiling_gbps", "pct_of_ceiling", "max_pct_of_ceiling", "above_ceiling",
             "wire_gbps", "wire_pct_of_link", "wire_above_link", "cores_busy", "cpu_pct_of_machine",
             "gbps_per_core", "cpu_s_per_gb", "cycles_per_byte_est", "busiest_cpu", "max_start_skew_ms", "retransmits",
             "stack_retrans", "drops", "net_rx_softirq_per_s", "net_rx_by_cpu", "nic_irq_per_s"]




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
            "pct_of_ceiling": p.of_ceiling * 100 if p.of_ceiling is not None else None, "wire_gbps": p.wire_gbps,
            "cores_busy": p.cores_busy, "cpu_pct": p.cpu_percent, "gbps_per_core": p.gbps_per_core,
            "cpu_s_per_gb": p.cpu_s_per_gb, "retransmits": float(p.retransmits), "drops": p.drops}


class TcpView:
    kind = "tcp"
    metrics = METRICS

    def point_summaries(self, view: RunView) -> list[PointSummary]:
        return summaries(view, _values)

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
        csv_path, json_path = export(view, rows, out)
        above = [r for r in rows if r["above_ceiling"]]
        over_link = [r for r in rows if r["wire_above_link"]]
        return write_page(out, TEMPLATE, view, rows=rows, figures=[p.name for p in figs],
                          failures=view.failures, csv=csv_path.name, json=json_path.name, above=above,
                          over_link=over_link, cpu=cpu_sentence(view), facts=facts_section(view.facts),
                          tuning=view.info.meta.get("tuning"), pinned=pinned_tools(view),
                          has_cpu=any(r["cores_busy"] is not None for r in rows))

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
        return f"{rec.spec.point} {g:.2f} Gbps"


def table_rows(points: Sequence[PointStats]) -> list[dict[str, Any]]:
    """One row per point: the table of the report and of the CSV/JSON exports."""
    rows = []
    for p in points:
        io = p.params.get("io_size")
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
            "gbps_median": rounded(p.median),
            "gbps_min": rounded(p.low),
            "gbps_max": rounded(p.high),
            "gbps_stdev": rounded(p.stdev),
            "tx_gbps": rounded(p.by_direction.get("tx")),
            "rx_gbps": rounded(p.by_direction.get("rx")),
            "sender_gbps": rounded(p.sender_median),
            "per_host_gbps": {h: rounded(g) for h, g in p.per_host.items()},
            "max_start_skew_ms": rounded(p.max_skew_s * 1000 if p.max_skew_s is not None else None),
            "ceiling_gbps": rounded(p.ceiling_gbps),
            "pct_of_ceiling": rounded(p.of_ceiling * 100 if p.of_ceiling is not None else None, 1),
            "above_ceiling": p.above_ceiling,
            "max_pct_of_ceiling": rounded(p.max_of_ceiling * 100 if p.max_of_ceiling is not None else None, 1),
            "wire_above_link": p.wire_above_link,
            "cores_busy": rounded(p.cores_busy, 2),
            "cpu_pct_of_machine": rounded(p.cpu_percent, 1),
            "gbps_per_core": rounded(p.gbps_per_core),
            "cpu_s_per_gb": rounded(p.cpu_s_per_gb, 3),
            "cycles_per_byte_est": rounded(p.cycles_per_byte, 2),
            "busiest_cpu": p.busiest_cpu,
            "cpu_warnings": list(p.cpu_warnings),
            "wire_gbps": rounded(p.wire_gbps),
            "wire_pct_of_link": rounded(p.wire_gbps / p.link_gbps * 100 if p.wire_gbps and p.link_gbps else None, 1),
            "retransmits": p.retransmits,
            "stack_retrans": rounded(p.stack_retrans, 0),
            "drops": rounded(p.drops, 0),
            "net_rx_softirq_per_s": rounded(p.net_rx_per_s, 0),
            "net_rx_by_cpu": p.net_rx_by_cpu,
            "nic_irq_per_s": rounded(p.nic_irq_per_s, 0),
            "net_warnings": list(p.net_warnings),
            "errors": list(p.errors),
        })
    return rows



def export(view: RunView, rows: list[dict[str, Any]], out: Path) -> tuple[Path, Path]:
    flat = [{**r, "per_host_gbps": ";".join(f"{h}={g}" for h, g in r["per_host_gbps"].items())} for r in rows]
    return write_exports(
        view, out, rows, _CSV_COLS + ["per_host_gbps"],
        {"gbps": "10^9 bit/s, receiver-side payload", "io_size": "bytes"},
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
                       label=f"line-rate ceiling {ceil:.2f} Gbps")
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


