"""The HTTPS study's view: seed 001's application vs wire Gbps and CPU
against connections, the table, and kTLS as the kernel's counters saw it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...analysis.trials import pct_of
from ...records import Sample, TrialRecord
from ...report.figures import new_figure, save
from ...report.numbers import num, whole
from ...report.render import pinned_tools, write_exports, write_page
from ...report.tables import Col, limit_text, ok_failed, table
from ...report.timeline import Panel, PanelsOf, busiest_host, interface_series, series_of, timelines
from ...report.view import Analysed, ChartSpec, CompareValues, Metric, PointSummary, RunView, StoredRun, summaries
from .analysis import HttpsPoint, HttpsTrial, https_points, https_trial

TEMPLATE = Path(__file__).with_name("report.html.j2")
COLS = ["point", "scheme", "connections", "threads", "repeats_ok", "repeats_failed", "app_bps", "app_min_bps",
        "app_max_bps", "wire_bps", "ceiling_bps", "app_gbps", "app_min", "app_max",
        "wire_gbps", "ceiling_gbps", "pct_of_ceiling", "cpu_pct_of_machine", "cores_busy", "nginx_cores",
        "wrk_cores", "gbps_per_core", "latency_p50_s", "latency_p99_s", "requests", "requests_per_s", "duration_s",
        "socket_errors", "bad_status", "ktls"]


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
    Metric("requests_per_s", "req/s", "requests completed per second (wrk's Requests/sec)"),
    Metric("socket_errors", "count", "wrk socket errors", higher_is_better=False),
    Metric("bad_status", "count", "non-2xx/3xx responses", higher_is_better=False),
)


def _values(p: HttpsPoint) -> dict[str, float | None]:
    return {"app_gbps": p.app_gbps, "app_min": p.app_min, "app_max": p.app_max, "wire_gbps": p.wire_gbps,
            "pct_of_ceiling": pct_of(p.app_gbps, p.ceiling_gbps), "cpu_pct": p.cpu_pct,
            "cores_busy": p.cores_busy, "gbps_per_core": p.gbps_per_core, "requests": float(p.requests),
            "requests_per_s": p.requests_per_s,
            "socket_errors": float(p.socket_errors), "bad_status": float(p.bad_status)}


CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec("throughput", "application Gbps vs connections", "connections", "connections", "app_gbps",
              "Gbit/s (application payload)", "{scheme}", series=("scheme",), ceiling="ceiling_gbps",
              low="app_min", high="app_max", x_size=False),
)


class HttpsView:
    kind = "https"
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
        hts = [https_trial(t, run.samples_of(t), run.link, run.clients) for t in run.records]
        return Analysed(hts, https_points(hts, run.link, run.clients))

    def rows(self, view: RunView) -> list[dict[str, Any]]:
        return https_rows(view.points)

    def render(self, view: RunView, out: Path) -> Path:
        """Seed 001's report: application vs wire Gbps and CPU vs connections, the table, kTLS evidence."""
        rows = https_rows(view.points)
        figs = https_figures(rows, out, view.info.name)
        trials = _trials(view)
        write_exports(view, out, rows, COLS,
                      {"app_gbps": "10^9 bit/s read by wrk (bodies + headers)", "wire_gbps": "10^9 bit/s on the wire",
                       "app_bps": "bit/s read by wrk (bodies + headers)", "wire_bps": "bit/s on the wire",
                       "latency_p50_s": "seconds, the slowest client's wrk percentile, median over repeats",
                       "latency_p99_s": "seconds, the slowest client's wrk percentile, median over repeats"},
                      [{"trial_id": t.trial_id, "point": t.point, "repeat": t.repeat, "status": t.status,
                        "error": t.error, "app_gbps": t.app_gbps, "wire_gbps": t.wire_gbps, "ktls": t.ktls,
                        "wrk": dict(t.wrk)} for t in trials])
        tl = timelines(view, out, timeline_panels)
        return write_page(out, TEMPLATE, view, rows=rows, headline=table(rows, HEADLINE),
                          timelines=tl.files, timeline_notes=tl.notes,
                          detail_table=table(rows, DETAIL), figures=[p.name for p in figs],
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
        return (f"{rec.spec.point} {num(h.app_gbps)} Gbps (application)" if h.app_gbps is not None
                else f"{rec.spec.point} {h.error}")


def timeline_panels(samples: Sequence[Sample], t: Any) -> tuple[list[Panel], list[str]]:
    """An HTTPS point over time: wrk reports totals only, so the server's
    interface per interval stands in, beside each client's average (dashed)."""
    server = busiest_host(samples)
    wire = interface_series(samples, server)
    avg = series_of(samples, "http.bytes", lambda s: f"{s.tag('host')} (wrk's average)")
    lacks = ["requests and bytes per interval: wrk reports its totals only (each client's average is dashed"
             + (f"; {server}'s interface per interval stands in)" if wire else ")")]
    if not wire:
        lacks.append("the server's interface per interval: no interface counters of this trial in the archive")
    return [Panel("Gbit/s", {**wire, **avg}, "rate", 8 / 1e9, styles=dict.fromkeys(avg, "--"))], lacks


def https_rows(points: Sequence[HttpsPoint]) -> list[dict[str, Any]]:
    """One row per HTTPS point, full precision: the seed 001 table and the exports
    (bit/s in ``*_bps``, Gbps unrounded, latency in seconds, counters whole)."""
    def bps(g: float | None) -> float | None:
        return None if g is None else g * 1e9
    return [{"point": p.point, "scheme": p.scheme, "connections": p.connections, "threads": p.threads,
             "repeats_ok": p.n_ok, "repeats_failed": p.n_failed,
             "app_bps": bps(p.app_gbps), "app_min_bps": bps(p.app_min), "app_max_bps": bps(p.app_max),
             "wire_bps": bps(p.wire_gbps), "ceiling_bps": bps(p.ceiling_gbps),
             "app_gbps": p.app_gbps, "app_min": p.app_min, "app_max": p.app_max, "wire_gbps": p.wire_gbps,
             "ceiling_gbps": p.ceiling_gbps, "pct_of_ceiling": pct_of(p.app_gbps, p.ceiling_gbps),
             "cpu_pct_of_machine": p.cpu_pct, "cores_busy": p.cores_busy,
             "nginx_cores": p.nginx_cores, "wrk_cores": p.wrk_cores,
             "gbps_per_core": p.gbps_per_core, "latency_p50_s": p.latency_p50_s, "latency_p99_s": p.latency_p99_s,
             "requests": whole(p.requests), "requests_per_s": p.requests_per_s, "duration_s": p.seconds,
             "socket_errors": whole(p.socket_errors),
             "bad_status": whole(p.bad_status), "ktls": "; ".join(p.ktls),
             "limit": p.verdict.limit if p.verdict else None, "verdict": p.verdict.as_dict() if p.verdict else None,
             "errors": list(p.errors),
             "warnings": list(p.warnings)} for p in points]


def _ms(key: str) -> Any:
    return lambda r: None if r.get(key) is None else r[key] * 1000


# p50 in the detail only: the headline keeps to 11 columns with the limit (p99 says more)
P50 = Col("latency p50 ms", _ms("latency_p50_s"), title="request latency, the slowest client's (wrk)")
HEADLINE = (
    Col("scheme", "scheme", "text"),
    Col("connections", "connections", "count"),
    Col("wrk threads", "threads", "count"),
    Col("app Gbps", "app_gbps", bold=True, title="what every wrk read x 8 over the shared span, median over repeats"),
    Col("% of ceiling", "pct_of_ceiling", alert=lambda r: (r.get("pct_of_ceiling") or 0) > 101),
    Col("p99 ms", _ms("latency_p99_s"), title="request latency, the slowest client's (wrk)"),
    # wrk's own headline (its min–max over repeats is in the detail table, as app min and max)
    Col("requests/s", "requests_per_s", title="requests completed per second over wrk's duration (its Requests/sec), "
        "median over repeats"),
    Col("CPU % of machine", "cpu_pct_of_machine"),
    Col("errors", lambda r: (r.get("socket_errors") or 0) + (r.get("bad_status") or 0), "count",
        alert=lambda r: bool(r.get("socket_errors") or r.get("bad_status")), title="socket errors + non-2xx"),
    Col("ok/failed", ok_failed, "text"),
    Col("limit", limit_text, "text", title="what held the point below line rate, from its measurements "
        "(nicbench explain RUN --point KEY: the evidence)"),
)
DETAIL = (
    Col("point", "point", "text"), *HEADLINE[:4],
    Col("min", "app_min"), Col("max", "app_max"), Col("wire Gbps", "wire_gbps"), Col("ceiling", "ceiling_gbps"),
    HEADLINE[4], P50, HEADLINE[5],
    Col("CPU % of machine", "cpu_pct_of_machine"), Col("cores busy", "cores_busy"),
    Col("nginx cores", "nginx_cores"), Col("wrk cores", "wrk_cores"), Col("Gbps per core", "gbps_per_core"),
    Col("requests", "requests", "count"), HEADLINE[6],
    Col("duration s", "duration_s", title="wrk's duration: the clients' span"),
    Col("socket errors", "socket_errors", "count", alert=lambda r: bool(r.get("socket_errors"))),
    Col("non-2xx", "bad_status", "count", alert=lambda r: bool(r.get("bad_status"))),
    Col("kTLS", "ktls", "text", wrap=True), Col("ok/failed", ok_failed, "text"),
)


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
            ax.axhline(max(ceil), color="#888", ls="--", lw=1, label=f"ceiling {num(max(ceil))} Gbps")
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


