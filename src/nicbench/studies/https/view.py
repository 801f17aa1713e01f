"""The HTTPS study's view: seed 001's application vs wire Gbps and CPU
against connections, the table, and kTLS as the kernel's counters saw it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...records import Sample, TrialRecord
from ...report.figures import new_figure, save
from ...report.render import pinned_tools, rounded, write_exports, write_page
from ...report.view import Analysed, CompareValues, Metric, PointSummary, RunView, StoredRun, summaries
from .analysis import HttpsPoint, HttpsTrial, https_points, https_trial

TEMPLATE = Path(__file__).with_name("report.html.j2")
COLS = ["point", "scheme", "connections", "threads", "repeats_ok", "repeats_failed", "app_gbps", "app_min", "app_max",
        "wire_gbps", "ceiling_gbps", "pct_of_ceiling", "cpu_pct_of_machine", "cores_busy", "nginx_cores",
        "wrk_cores", "gbps_per_core", "requests", "socket_errors", "bad_status", "ktls"]


def _trials(view: RunView) -> list[HttpsTrial]:
    return [t for t in view.trials if isinstance(t, HttpsTrial)]


METRICS: tuple[Metric, ...] = (
    Metric("app_gbps", "Gbit/s", "read by wrk (bodies + headers), median over repeats"),
    Metric("app_min", "Gbit/s", "lowest repeat"),
    Metric("app_max", "Gbit/s", "highest repeat"),
    Metric("wire_gbps", "Gbit/s", "on the wire"),
    Metric("pct_of_ceiling", "%", "of the line-rate ceiling"),
    Metric("cpu_pct", "%", "CPU of the machine", higher_is_better=False),
    Metric("cores_busy", "cores", "CPU cores busy", higher_is_better=False),
    Metric("gbps_per_core", "Gbit/s per core", "application throughput per busy core"),
    Metric("requests", "count", "requests completed"),
    Metric("socket_errors", "count", "wrk socket errors", higher_is_better=False),
    Metric("bad_status", "count", "non-2xx/3xx responses", higher_is_better=False),
)


def _values(p: HttpsPoint) -> dict[str, float | None]:
    return {"app_gbps": p.app_gbps, "app_min": p.app_min, "app_max": p.app_max, "wire_gbps": p.wire_gbps,
            "pct_of_ceiling": p.of_ceiling * 100 if p.of_ceiling else None, "cpu_pct": p.cpu_pct,
            "cores_busy": p.cores_busy, "gbps_per_core": p.gbps_per_core, "requests": float(p.requests),
            "socket_errors": float(p.socket_errors), "bad_status": float(p.bad_status)}


class HttpsView:
    kind = "https"
    metrics = METRICS

    def point_summaries(self, view: RunView) -> list[PointSummary]:
        return summaries(view, _values)

    def analyse(self, run: StoredRun) -> Analysed:
        hts = [https_trial(t, run.samples_of(t), run.link) for t in run.records]
        return Analysed(hts, https_points(hts, run.link, run.clients))

    def rows(self, view: RunView) -> list[dict[str, Any]]:
        return https_rows(view.points)

    def render(self, view: RunView, out: Path) -> Path:
        """Seed 001's report: application vs wire Gbps and CPU vs connections, the table, kTLS evidence."""
        rows = https_rows(view.points)
        figs = https_figures(rows, out, view.info.name)
        trials = _trials(view)
        write_exports(view, out, rows, COLS,
                      {"app_gbps": "10^9 bit/s read by wrk (bodies + headers)", "wire_gbps": "10^9 bit/s on the wire"},
                      [{"trial_id": t.trial_id, "point": t.point, "repeat": t.repeat, "status": t.status,
                        "error": t.error, "app_gbps": t.app_gbps, "wire_gbps": t.wire_gbps, "ktls": t.ktls,
                        "wrk": dict(t.wrk)} for t in trials])
        return write_page(out, TEMPLATE, view, rows=rows, figures=[p.name for p in figs],
                          failures=view.failures, csv="points.csv", pinned=pinned_tools(view),
                          json="points.json", ktls=sorted({t.ktls for t in trials
                                                           if t.ktls and t.ktls != "n/a (plain HTTP)"}))

    def compare_values(self, view: RunView) -> list[CompareValues]:
        values: dict[str, list[float]] = {}
        for t in _trials(view):
            if t.status == "ok" and t.app_gbps is not None:
                values.setdefault(t.point, []).append(float(t.app_gbps))
        return [CompareValues("application Gbps", values)]

    def progress_line(self, rec: TrialRecord, samples: list[Sample], run_meta: Mapping[str, Any]) -> str:
        h = https_trial(rec, samples, None)
        return (f"{rec.spec.point} {h.app_gbps:.2f} Gbps (application)" if h.app_gbps is not None
                else f"{rec.spec.point} {h.error}")


def https_rows(points: Sequence[HttpsPoint]) -> list[dict[str, Any]]:
    """One row per HTTPS point: the seed 001 table and the exports."""
    return [{"point": p.point, "scheme": p.scheme, "connections": p.connections, "threads": p.threads,
             "repeats_ok": p.n_ok,
             "repeats_failed": p.n_failed, "app_gbps": rounded(p.app_gbps), "app_min": rounded(p.app_min),
             "app_max": rounded(p.app_max), "wire_gbps": rounded(p.wire_gbps), "ceiling_gbps": rounded(p.ceiling_gbps),
             "pct_of_ceiling": rounded(p.of_ceiling * 100 if p.of_ceiling else None, 1),
             "cpu_pct_of_machine": rounded(p.cpu_pct, 1), "cores_busy": rounded(p.cores_busy, 2),
             "nginx_cores": rounded(p.nginx_cores, 2), "wrk_cores": rounded(p.wrk_cores, 2),
             "gbps_per_core": rounded(p.gbps_per_core), "requests": p.requests, "socket_errors": p.socket_errors,
             "bad_status": p.bad_status, "ktls": "; ".join(p.ktls), "errors": list(p.errors),
             "warnings": list(p.warnings)} for p in points]



def https_figures(rows: list[dict[str, Any]], out_dir: Path, title: str) -> list[Path]:
    """Seed 001's figure, one per scheme: application and wire Gbps (bars) and
    server CPU % (line) against connections, with the line-rate ceiling."""
    paths = []
    for scheme in ("https", "http"):
        pts = sorted((r for r in rows if r["scheme"] == scheme and r["app_gbps"] is not None),
                     key=lambda r: (r["connections"], r["threads"]))
        if not pts:
            continue
        xs = list(range(len(pts)))
        fig, ax = new_figure(max(6.0, 0.7 * len(pts) + 3))
        w = 0.38
        ax.bar([x - w / 2 for x in xs], [r["app_gbps"] for r in pts], w, color="#4c72b0",
               label="application (Gbps)")
        if any(r["wire_gbps"] for r in pts):
            ax.bar([x + w / 2 for x in xs], [r["wire_gbps"] or 0 for r in pts], w, color="#55a868",
                   label="wire (Gbps)")
        ceil = [r["ceiling_gbps"] for r in pts if r["ceiling_gbps"]]
        if ceil:
            ax.axhline(max(ceil), color="#888", ls="--", lw=1, label=f"ceiling {max(ceil):.2f} Gbps")
        ax.set_xticks(xs)
        several = len({r["threads"] for r in pts}) > 1
        ax.set_xticklabels([f"{r['connections']}" + (f"/t{r['threads']}" if several else "") for r in pts])
        ax.set_xlabel("connections (all clients)" + (" / wrk threads per client" if several else ""))
        ax.set_ylabel("Gbps")
        if any(r["cpu_pct_of_machine"] is not None for r in pts):
            ax2 = ax.twinx()
            ax2.plot(xs, [r["cpu_pct_of_machine"] for r in pts], "o-", color="#c44e52", label="CPU % of machine")
            ax2.set_ylim(0, 105)
            ax2.set_ylabel("CPU %")
            h2, l2 = ax2.get_legend_handles_labels()
        else:
            h2, l2 = [], []
        h1, l1 = ax.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=4,
                  frameon=False)
        ax.set_title(f"{title}: {scheme.upper()} throughput and CPU vs connections", fontsize=10)
        paths.append(save(fig, out_dir, f"https-{scheme}"))
    return paths


