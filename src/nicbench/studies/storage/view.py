"""The storage study's view: seed 004's op x block size table of MB/s, IOPS
and CPU %, IOPS and MB/s against block size, and where line rate is reached."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...analysis.trials import pct_of
from ...core.units import format_size
from ...records import Sample, TrialRecord
from ...report.figures import new_figure, save, size_axis
from ...report.numbers import num
from ...report.render import cpu_sentence, pinned_tools, write_exports, write_page
from ...report.tables import Col, limit_text, ok_failed, table
from ...report.timeline import Panel, PanelsOf, series_of, timelines
from ...report.view import Analysed, ChartSpec, CompareValues, Metric, PointSummary, RunView, StoredRun, summaries
from .analysis import Setting, StoragePoint, StorageTrial, line_rate_from, storage_points, storage_trial

TEMPLATE = Path(__file__).with_name("report.html.j2")
COLS = ["point", "op", "block_size", "bs", "repeats_ok", "repeats_failed", "bytes_per_s", "ceiling_bytes_per_s",
        "mb_s", "iops", "ceiling_mb_s", "pct_of_ceiling", "above_ceiling", "latency_p50_s", "latency_p99_s",
        "cpu_pct_of_machine", "cores_busy", "max_start_skew_s", "max_start_skew_ms", "read_mb_s", "read_iops",
        "write_mb_s", "write_iops"]


METRICS: tuple[Metric, ...] = (
    Metric("mb_s", "MB/s", "10^6 bytes/s, all initiators, median over repeats"),
    Metric("iops", "IO/s", "I/Os per second, all initiators"),
    Metric("read_mb_s", "MB/s", "reads' 10^6 bytes/s (readwrite, randrw: fio's per-operation figure)"),
    Metric("read_iops", "IO/s", "reads per second (readwrite, randrw)"),
    Metric("write_mb_s", "MB/s", "writes' 10^6 bytes/s (readwrite, randrw)"),
    Metric("write_iops", "IO/s", "writes per second (readwrite, randrw)"),
    Metric("pct_of_ceiling", "%", "of the line-rate ceiling"),
    Metric("cpu_pct", "%", "CPU of the machine", higher_is_better=False),
    Metric("cores_busy", "cores", "CPU cores busy", higher_is_better=False),
)


def _values(p: StoragePoint) -> dict[str, float | None]:
    return {"mb_s": p.mb_s, "iops": p.iops, "read_mb_s": p.read_mb_s, "read_iops": p.read_iops,
            "write_mb_s": p.write_mb_s, "write_iops": p.write_iops, "pct_of_ceiling": pct_of(p.mb_s, p.ceiling_mb_s),
            "cpu_pct": p.cpu_pct, "cores_busy": p.cores_busy}


CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec("throughput", "MB/s vs block size, {op}", "block_size", "block size (bytes)", "mb_s", "MB/s",
              "{op}", split=("op",), series=("op",), ceiling="ceiling_mb_s"),
    ChartSpec("iops", "IOPS vs block size, {op}", "block_size", "block size (bytes)", "iops", "IOPS",
              "{op}", split=("op",), series=("op",)),
)


class StorageView:
    kind = "storage"
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
        transport = str(run.info.meta.get("transport") or run.info.meta.get("target") or "nbd")
        sts = [storage_trial(t, run.samples_of(t), Setting(run.link, transport, run.clients, backing(run.info.meta)))
               for t in run.records]
        return Analysed(sts, storage_points(sts, run.link, transport, run.clients))

    def rows(self, view: RunView) -> list[dict[str, Any]]:
        return storage_rows(view.points)

    def render(self, view: RunView, out: Path) -> Path:
        """Seed 004's report: the op x block size table of MB/s, IOPS and CPU %, figures, line-rate block size."""
        rows = storage_rows(view.points)
        figs = storage_figures(rows, out, view.info.name)

        write_exports(view, out, rows, COLS,
                      {"mb_s": "10^6 bytes/s, all initiators", "iops": "I/Os per second, all initiators",
                       "bytes_per_s": "bytes/s, all initiators",
                       "latency_p50_s": "seconds, fio completion latency, the slowest job's, median over repeats",
                       "latency_p99_s": "seconds, fio completion latency, the slowest job's, median over repeats",
                       "max_start_skew_s": "seconds", "max_start_skew_ms": "milliseconds"},
                      [{"trial_id": t.trial_id, "point": t.point, "repeat": t.repeat, "status": t.status,
                        "error": t.error, "mb_s": t.mb_s, "iops": t.iops,
                        "per_initiator_mb_s": dict(t.per_initiator_mb_s), "start_skew_s": t.start_skew_s,
                        "window_trim_s": t.trim_s}
                       for t in view.trials if isinstance(t, StorageTrial)])
        sizes = sorted({r["block_size"] for r in rows})
        ops = [o for o in ("read", "write", "readwrite") if any(r["op"] == o for r in rows)]
        seed = [{"bs": format_size(bs), **{op: next((r for r in rows if r["op"] == op and r["block_size"] == bs), None)
                                           for op in ops}} for bs in sizes]
        reached = {op: (format_size(v) if v else None) for op, v in line_rate_from(view.points).items()}
        trims = {t.trim_s for t in view.trials if isinstance(t, StorageTrial) and t.status == "ok"}
        tl = timelines(view, out, timeline_panels)
        return write_page(out, TEMPLATE, view, rows=rows, table=seed, ops=ops, reached=reached,
                          timelines=tl.files, timeline_notes=tl.notes,
                          headline=table(rows, HEADLINE), detail_table=table(rows, DETAIL),
                          per_job=bool(trims) and None not in trims,
                          trim_ms=sorted(round(x * 1000) for x in trims if x is not None),
                          figures=[p.name for p in figs], failures=view.failures,
                          cpu=cpu_sentence(view), pinned=pinned_tools(view))



    def compare_values(self, view: RunView) -> list[CompareValues]:
        values: dict[str, list[float]] = {}
        for t in view.trials:
            if isinstance(t, StorageTrial) and t.status == "ok" and t.mb_s is not None:
                values.setdefault(t.point, []).append(float(t.mb_s))
        return [CompareValues("MB/s (10^6 B/s)", values)]

    def progress_line(self, rec: TrialRecord, samples: list[Sample], run_meta: Mapping[str, Any]) -> str:
        st = storage_trial(rec, samples)
        return f"{rec.spec.point} {num(st.mb_s)} MB/s" if st.mb_s is not None else f"{rec.spec.point} {st.error}"


def timeline_panels(samples: Sequence[Sample], t: Any) -> tuple[list[Panel], list[str]]:
    """A storage point over time: each initiator's IOPS per fio report
    interval (its jobs summed, per op)."""
    ios = [s for s in samples if s.metric == "storage.ios"]
    series = series_of(ios, "storage.ios", lambda s: f"{s.tag('host')} {s.tag('op')}")
    lacks = []
    if not series:
        lacks.append("fio's IOPS: no I/O counts of this trial in the archive")
    elif not all(s.tag("proc") for s in ios):
        lacks.append("fio's IOPS per interval: this run kept each initiator's total only (recorded before fio's "
                     "per-interval reports were kept, or imported): its average over the run is drawn")
    return [Panel("IOPS", series, "rate")], lacks


def backing(meta: Mapping[str, Any]) -> str:
    """What backs the LUNs, as the run recorded it (for the verdict's word on the device side)."""
    kind, target = meta.get("lun_kind"), meta.get("target")
    if target == "devices":
        return "the LUNs are the initiators' block devices"
    return {"memory": "the LUNs are in the target's memory: no device behind them",
            "null": "the LUNs are null (reads give zeros, writes are dropped): no device behind them"}.get(
                str(kind), f"the LUNs are {kind}" if kind else "")


def storage_rows(points: Sequence[StoragePoint]) -> list[dict[str, Any]]:
    """One row per storage point (op x block size), full precision: seed 004's table
    and the exports (bytes/s, and MB/s unrounded; latency and skew in seconds)."""
    return [
        {
            "point": p.point,
            "op": p.op,
            "block_size": p.block_size,
            "bs": format_size(p.block_size),
            "repeats_ok": p.n_ok,
            "repeats_failed": p.n_failed,
            "bytes_per_s": p.mb_s * 1e6 if p.mb_s is not None else None,
            "ceiling_bytes_per_s": p.ceiling_mb_s * 1e6 if p.ceiling_mb_s is not None else None,
            "mb_s": p.mb_s,
            "iops": p.iops,
            "ceiling_mb_s": p.ceiling_mb_s,
            "pct_of_ceiling": pct_of(p.mb_s, p.ceiling_mb_s),
            "above_ceiling": p.above_ceiling,
            "latency_p50_s": p.latency_p50_s,
            "latency_p99_s": p.latency_p99_s,
            "cpu_pct_of_machine": p.cpu_pct,
            "cores_busy": p.cores_busy,
            "max_start_skew_s": p.max_skew_s,
            "max_start_skew_ms": p.max_skew_s * 1000 if p.max_skew_s is not None else None,
            "read_mb_s": p.read_mb_s,
            "read_iops": p.read_iops,
            "write_mb_s": p.write_mb_s,
            "write_iops": p.write_iops,
            "limit": p.verdict.limit if p.verdict else None,
            "verdict": p.verdict.as_dict() if p.verdict else None,
            "errors": list(p.errors),
            "warnings": list(p.warnings),
        }
        for p in points
    ]


def _us(key: str) -> Any:
    return lambda r: None if r.get(key) is None else r[key] * 1e6


HEADLINE = (
    Col("op", "op", "text"),
    Col("block size", "bs", "text"),
    Col("MB/s", "mb_s", bold=True, title="10^6 bytes/s, all initiators, median over repeats"),
    Col("IOPS", "iops", title="all initiators"),
    Col("% of ceiling", "pct_of_ceiling", alert=lambda r: bool(r.get("above_ceiling"))),
    Col("latency p50 µs", _us("latency_p50_s"), title="fio completion latency, the slowest job's"),
    Col("p99 µs", _us("latency_p99_s"), title="fio completion latency, the slowest job's"),
    Col("CPU % of machine", "cpu_pct_of_machine"),
    Col("ok/failed", ok_failed, "text"),
    Col("limit", limit_text, "text", title="what held the point below line rate, from its measurements "
        "(nicbench explain RUN --point KEY: the evidence)"),
)
DETAIL = (
    Col("point", "point", "text"), *HEADLINE[:4], Col("ceiling MB/s", "ceiling_mb_s"), *HEADLINE[4:8],
    Col("read MB/s", "read_mb_s", title="the reads' own, per operation (readwrite, randrw)"),
    Col("read IOPS", "read_iops"), Col("write MB/s", "write_mb_s", title="the writes' own, per operation"),
    Col("write IOPS", "write_iops"),
    Col("cores busy", "cores_busy"), Col("start skew ms", "max_start_skew_ms"), HEADLINE[8],
)


def storage_figures(rows: list[dict[str, Any]], out_dir: Path, title: str) -> list[Path]:
    """Seed 004 as figures: IOPS and MB/s against block size, one line per op,
    with each op's ceiling in MB/s."""
    paths: list[Path] = []
    ops = [o for o in ("read", "write", "readwrite") if any(r["op"] == o and r["mb_s"] is not None for r in rows)]
    if not ops:
        return paths
    for metric, label in (("iops", "IOPS"), ("mb_s", "MB/s (10^6 B/s)")):
        fig, ax = new_figure()
        sizes: set[int] = set()
        for op in ops:
            pts = sorted((r for r in rows if r["op"] == op and r[metric] is not None), key=lambda r: r["block_size"])
            xs = [r["block_size"] for r in pts]
            sizes.update(xs)
            (line,) = ax.plot(xs, [r[metric] for r in pts], "o-", label=op.upper())
            if metric == "mb_s" and any(r["ceiling_mb_s"] for r in pts):
                ax.plot(
                    xs,
                    [r["ceiling_mb_s"] for r in pts],
                    "--",
                    color=line.get_color(),
                    lw=1,
                    label=f"{op.upper()} ceiling",
                )
        size_axis(ax, sizes, "block size")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=6, frameon=False)
        ax.set_title(f"{title}: {label} vs block size", fontsize=10)
        paths.append(save(fig, out_dir, f"storage-{metric}"))
    return paths
