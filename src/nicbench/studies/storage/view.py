"""The storage study's view: seed 004's op x block size table of MB/s, IOPS
and CPU %, IOPS and MB/s against block size, and where line rate is reached."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...core.units import format_size
from ...records import Sample, TrialRecord
from ...report.figures import new_figure, save, size_axis
from ...report.render import cpu_sentence, pinned_tools, rounded, write_exports, write_page
from ...report.view import Analysed, CompareValues, RunView, StoredRun
from .analysis import StoragePoint, StorageTrial, line_rate_from, storage_points, storage_trial

TEMPLATE = Path(__file__).with_name("report.html.j2")
COLS = ["point", "op", "block_size", "bs", "repeats_ok", "repeats_failed", "mb_s", "iops", "ceiling_mb_s",
        "pct_of_ceiling", "above_ceiling", "cpu_pct_of_machine", "cores_busy", "max_start_skew_ms"]


class StorageView:
    kind = "storage"

    def analyse(self, run: StoredRun) -> Analysed:
        sts = [storage_trial(t, run.samples_of(t)) for t in run.records]
        transport = str(run.info.meta.get("transport") or run.info.meta.get("target") or "nbd")
        return Analysed(sts, storage_points(sts, run.link, transport, run.clients))

    def rows(self, view: RunView) -> list[dict[str, Any]]:
        return storage_rows(view.points)

    def render(self, view: RunView, out: Path) -> Path:
        """Seed 004's report: the op x block size table of MB/s, IOPS and CPU %, figures, line-rate block size."""
        rows = storage_rows(view.points)
        figs = storage_figures(rows, out, view.info.name)

        write_exports(view, out, rows, COLS,
                      {"mb_s": "10^6 bytes/s, all initiators", "iops": "I/Os per second, all initiators"},
                      [{"trial_id": t.trial_id, "point": t.point, "repeat": t.repeat, "status": t.status,
                        "error": t.error, "mb_s": t.mb_s, "iops": t.iops,
                        "per_initiator_mb_s": dict(t.per_initiator_mb_s), "start_skew_s": t.start_skew_s,
                        "window_trim_s": t.trim_s}
                       for t in view.trials if isinstance(t, StorageTrial)])
        sizes = sorted({r["block_size"] for r in rows})
        ops = [o for o in ("read", "write", "readwrite") if any(r["op"] == o for r in rows)]
        table = [{"bs": format_size(bs), **{op: next((r for r in rows if r["op"] == op and r["block_size"] == bs), None)
                                            for op in ops}} for bs in sizes]
        reached = {op: (format_size(v) if v else None) for op, v in line_rate_from(view.points).items()}
        trims = {t.trim_s for t in view.trials if isinstance(t, StorageTrial) and t.status == "ok"}
        return write_page(out, TEMPLATE, view, rows=rows, table=table, ops=ops, reached=reached,
                          per_job=bool(trims) and None not in trims,
                          trim_ms=sorted(round(x * 1000) for x in trims if x is not None),
                          figures=[p.name for p in figs], failures=view.failures,
                          cpu=cpu_sentence(view), pinned=pinned_tools(view))



    def compare_values(self, view: RunView) -> CompareValues:
        values: dict[str, list[float]] = {}
        for t in view.trials:
            if isinstance(t, StorageTrial) and t.status == "ok" and t.mb_s is not None:
                values.setdefault(t.point, []).append(float(t.mb_s))
        return CompareValues("MB/s (10^6 B/s)", values)

    def progress_line(self, rec: TrialRecord, samples: list[Sample], run_meta: Mapping[str, Any]) -> str:
        st = storage_trial(rec, samples)
        return f"{rec.spec.point} {st.mb_s:.0f} MB/s" if st.mb_s is not None else f"{rec.spec.point} {st.error}"


def storage_rows(points: Sequence[StoragePoint]) -> list[dict[str, Any]]:
    """One row per storage point (op x block size): seed 004's table and the exports."""
    return [
        {
            "point": p.point,
            "op": p.op,
            "block_size": p.block_size,
            "bs": format_size(p.block_size),
            "repeats_ok": p.n_ok,
            "repeats_failed": p.n_failed,
            "mb_s": rounded(p.mb_s, 1),
            "iops": rounded(p.iops, 0),
            "ceiling_mb_s": rounded(p.ceiling_mb_s, 1),
            "pct_of_ceiling": rounded(p.of_ceiling * 100 if p.of_ceiling else None, 1),
            "above_ceiling": p.above_ceiling,
            "cpu_pct_of_machine": rounded(p.cpu_pct, 1),
            "cores_busy": rounded(p.cores_busy, 2),
            "max_start_skew_ms": rounded(p.max_skew_s * 1000 if p.max_skew_s is not None else None),
            "errors": list(p.errors),
            "warnings": list(p.warnings),
        }
        for p in points
    ]


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
