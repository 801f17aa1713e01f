"""The latency study's view: CDFs (log latency, idle against loaded on one
figure), what the load costs in p99 per message size, the percentile table,
engine agreement, the busy-poll and coalescing settings the points ran with."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...core.histogram import LatencyHistogram
from ...core.units import format_size
from ...records import HostFacts, Sample, TrialRecord
from ...report.facts import facts_section
from ...report.figures import new_figure, save, size_axis
from ...report.render import cpu_sentence, pinned_tools, write_exports, write_page
from ...report.tables import Col, limit_text, ok_failed
from ...report.timeline import Panel, PanelsOf, series_of, throughput_series, timelines
from ...report.view import Analysed, ChartSpec, CompareValues, Metric, PointSummary, RunView, StoredRun, summaries
from .analysis import Agreement, LatencyPoint, LatencyTrial, agreement, point_stats, trial_result

TEMPLATE = Path(__file__).with_name("report.html.j2")

# percentile -> the column suffix of the exports ("p99.9" is not a good CSV name)
COLUMN = {"p50": "p50", "p90": "p90", "p99": "p99", "p99.9": "p999", "max": "max"}
_CSV_COLS = ["point", "protocol", "engine", "message_size", "condition", "waiting", "rate", "repeats_ok",
             "repeats_failed", "p50_s", "p90_s", "p99_s", "p999_s", "max_s", "mean_s", "min_s", "p50_low_s",
             "p50_high_s", "p99_low_s", "p99_high_s", "percentiles_bound", "resolution_s", "requests_per_s",
             "lost_pct", "load_gbps", "load_gbps_min", "load_gbps_max", "idle_point", "p50_vs_idle", "p99_vs_idle",
             "p999_vs_idle", "cores_busy", "cpu_pct_of_machine", "probe_client_cores", "probe_server_cores",
             "load_cores"]
_UNITS = {"*_s": "seconds, round trip (request and answer)", "message_size": "bytes per request (and answer)",
          "rate": "requests per second per probe asked (\"max\": back to back)",
          "requests_per_s": "answered requests per second per probe", "load_gbps": "10^9 bit/s, the load's "
          "receiver-side payload inside the probes' window", "*_vs_idle": "loaded / idle, same protocol, engine "
          "and size", "lost_pct": "percent of requests unanswered"}
# the facts that say how a socket waits for a packet
BUSY_FACTS = ("sysctl.net.core.busy_poll", "sysctl.net.core.busy_read")
COALESCE = ("adaptive", "rx-usecs", "rx-frames", "tx-usecs", "tx-frames")


METRICS: tuple[Metric, ...] = (
    Metric("p99_us", "us", "99th percentile round trip, median over repeats", higher_is_better=False),
    Metric("p50_us", "us", "median round trip", higher_is_better=False),
    Metric("p90_us", "us", "90th percentile round trip", higher_is_better=False),
    Metric("p99.9_us", "us", "99.9th percentile round trip", higher_is_better=False),
    Metric("max_us", "us", "slowest round trip", higher_is_better=False),
    Metric("rate", "requests/s", "answered requests per probe"),
    Metric("lost_pct", "%", "requests never answered", higher_is_better=False),
    Metric("load_gbps", "Gbit/s", "the load's throughput beside the probes"),
    Metric("cores_busy", "cores", "CPU cores busy", higher_is_better=False),
)


def _values(p: LatencyPoint) -> dict[str, float | None]:
    out: dict[str, float | None] = {f"{k}_us": p.percentiles[k] * 1e6 if k in p.percentiles else None
                                    for k in ("p99", "p50", "p90", "p99.9", "max")}
    return {**out, "rate": p.rate, "lost_pct": p.lost_fraction * 100 if p.lost_fraction is not None else None,
            "load_gbps": p.load_gbps, "cores_busy": p.cores_busy}


def _in_us(key: str) -> Callable[[Mapping[str, Any]], float | None]:
    return lambda r: r[key] * 1e6 if r.get(key) is not None else None


# the results table at the end of a run (the rows stay at full precision, in seconds)
HEADLINE = (
    Col("point", "point", "text"),
    Col("p50 us", _in_us("p50_s")),
    Col("p99 us", _in_us("p99_s"), bold=True),
    Col("p99.9 us", _in_us("p999_s")),
    Col("max us", _in_us("max_s")),
    Col("requests/s", "requests_per_s"),
    Col("load Gbps", "load_gbps"),
    Col("p99 vs idle", "p99_vs_idle"),
    Col("ok/failed", ok_failed, "text"),
    Col("limit", limit_text, "text", title="what the round trips waited on, from the point's measurements "
        "(nicbench explain RUN --point KEY: the evidence)"),
)


CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec("p99", "p99 round trip vs message size, {protocol}", "message_size", "message size (bytes)", "p99_s",
              "p99 round trip (µs)", "{engine} {condition}", split=("protocol",), series=("engine", "condition"),
              low="p99_low_s", high="p99_high_s", scale=1e6),
    ChartSpec("p50", "median round trip vs message size, {protocol}", "message_size", "message size (bytes)",
              "p50_s", "p50 round trip (µs)", "{engine} {condition}", split=("protocol",),
              series=("engine", "condition"), low="p50_low_s", high="p50_high_s", scale=1e6),
)


class LatencyView:
    kind = "latency"
    metrics = METRICS
    charts = CHARTS

    @property
    def timeline_panels(self) -> PanelsOf:
        """The first panels of a point's timeline: this study's own."""
        return timeline_panels

    headline = HEADLINE      # the columns a reader compares first: the run's results table

    def point_summaries(self, view: RunView) -> list[PointSummary]:
        return summaries(view, _values)

    def analyse(self, run: StoredRun) -> Analysed:
        ceiling = load_ceiling(run)
        trials = [trial_result(t, run.samples_of(t), ceiling) for t in run.records]
        return Analysed(trials, point_stats(trials))

    def rows(self, view: RunView) -> list[dict[str, Any]]:
        return table_rows(_points(view))

    def render(self, view: RunView, out: Path) -> Path:
        points = _points(view)
        rows = table_rows(points)
        out.mkdir(parents=True, exist_ok=True)
        figs = cdf_figures(points, out, view.info.name) + cost_figures(points, out, view.info.name)
        csv_path, json_path = export(view, rows, out)
        agree = agreement(points)
        load = view.info.meta.get("load")
        tl = timelines(view, out, timeline_panels)
        return write_page(out, TEMPLATE, view, rows=rows, shown=[_shown(r) for r in rows],
                          timelines=tl.files, timeline_notes=tl.notes,
                          figures=[p.name for p in figs], failures=view.failures, csv=csv_path.name,
                          json=json_path.name, agreement=[_agreement_row(a) for a in agree],
                          load=load if isinstance(load, dict) else None, cpu=cpu_sentence(view),
                          settings=waiting_settings(view.facts), facts=facts_section(view.facts),
                          tuning=view.info.meta.get("tuning"), pinned=pinned_tools(view),
                          engines=view.info.meta.get("engines") or {},
                          stated=[r["point"] for r in rows if r["percentiles_bound"] == "stated"],
                          sample_interval=view.info.meta.get("sample_interval_s"))

    def compare_values(self, view: RunView) -> list[CompareValues]:
        """p99 first (what the load costs shows there), then p50 and p99.9; all in
        microseconds, lower is better."""
        out = []
        for k in ("p99", "p50", "p99.9"):
            values: dict[str, list[float]] = {}
            for t in view.trials:
                if isinstance(t, LatencyTrial) and t.status == "ok" and k in t.percentiles:
                    values.setdefault(t.point, []).append(t.percentiles[k] * 1e6)
            out.append(CompareValues(f"{k} RTT (us)", values, higher_is_better=False))
        return out

    def match_points(self, a: RunView, b: RunView) -> list[tuple[str, str, str]]:
        """Points of two runs that share no point by name, met by protocol,
        message size and condition across engines (``report.view.PointMatcher``):
        an imported netperf point against a lab run's.  Where one run has
        several engines there, its primary (sockperf) is taken, then the first
        by name; a point is in one pair at most."""
        pa, pb = _points(a), _points(b)
        names_a, names_b = {p.point for p in pa}, {p.point for p in pb}
        groups: dict[tuple[str, int, str], tuple[list[LatencyPoint], list[LatencyPoint]]] = defaultdict(
            lambda: ([], []))
        for p in pa:
            if p.point not in names_b:
                groups[(p.protocol, p.message_size, p.condition)][0].append(p)
        for p in pb:
            if p.point not in names_a:
                groups[(p.protocol, p.message_size, p.condition)][1].append(p)
        out = []
        for ua, ub in groups.values():
            if ua and ub:
                x, y = (min(ps, key=lambda p: (p.engine != "sockperf", p.engine)) for ps in (ua, ub))
                out.append((x.point, y.point, f"different engines: A {x.engine} ({_waits(x)}), B {y.engine} "
                                              f"({_waits(y)}); each times its own round trip"))
        return out

    def progress_line(self, rec: TrialRecord, samples: list[Sample], run_meta: Mapping[str, Any]) -> str:
        t = trial_result(rec, samples)
        if t.status != "ok":
            return f"{rec.spec.point} {t.status}: {t.error}"
        p = t.percentiles
        load = f", load {t.load_gbps:.2f} Gbps" if t.load_gbps is not None else ""
        return f"{rec.spec.point} p50 {_us(p['p50'])} p99 {_us(p['p99'])} us{load}"


def timeline_panels(samples: Sequence[Sample], t: Any) -> tuple[list[Panel], list[str]]:
    """A latency point over time: each probe's mean round trip per bin (its
    largest dashed), log scale, and the load's throughput where it had one."""
    mean = series_of(samples, "latency.rtt_mean", lambda s: f"{s.tag('host')} mean")
    top = series_of(samples, "latency.rtt_max", lambda s: f"{s.tag('host')} max")
    lacks = ["round-trip percentiles per interval: the archive keeps each probe's whole distribution, and per "
             "interval its mean and largest round trip (drawn)" if mean else
             "round trips per interval: no probe intervals of this trial in the archive"]
    panels = [Panel("round trip us", {**mean, **top}, "mean", 1e6, log=True, styles=dict.fromkeys(top, "--"),
                    hows=dict.fromkeys(top, "max"))]
    load = throughput_series(samples)
    if load:
        panels.append(Panel("load Gbit/s", load, "rate", 8 / 1e9))
    elif getattr(t, "condition", "") == "loaded":
        lacks.append("the load's throughput: no receiver intervals of the load in the archive")
    return panels, lacks


def load_ceiling(run: StoredRun) -> float | None:
    """The most TCP goodput the load's directions allow together (the run's
    link and load, as recorded), None when the link's speed is unknown."""
    load = run.info.meta.get("load")
    clients = run.info.meta.get("load_clients")
    ceil = run.link.ceiling(len(clients) if isinstance(clients, list) and clients else None) if run.link else None
    if ceil is None or not isinstance(load, dict):
        return None
    return ceil.goodput_bps * (2 if load.get("direction") == "bidir" else 1)


def _points(view: RunView) -> list[LatencyPoint]:
    return [p for p in view.points if isinstance(p, LatencyPoint)]


def _waits(p: LatencyPoint) -> str:
    rate = p.params.get("rate")
    how = p.params.get("waiting") or "?"
    return f"{how}" if rate in (None, "max") else f"{rate} requests/s, {how}"


def _us(x: float | None, nd: int = 1) -> str:
    return "—" if x is None else f"{x * 1e6:.{nd}f}"


def table_rows(points: Sequence[LatencyPoint]) -> list[dict[str, Any]]:
    """One row per point, full precision, seconds: the table and the exports."""
    rows = []
    for p in points:
        tools = p.tool_cores
        row: dict[str, Any] = {
            "point": p.point, "protocol": p.protocol, "engine": p.engine, "message_size": p.message_size,
            "condition": p.condition, "waiting": p.params.get("waiting"), "rate": p.params.get("rate"),
            "repeats_ok": p.n_ok, "repeats_failed": p.n_failed}
        for k, col in COLUMN.items():
            row[f"{col}_s"] = p.percentiles.get(k)
        row.update({
            "mean_s": p.mean, "min_s": p.min,
            "p50_low_s": p.low.get("p50"), "p50_high_s": p.high.get("p50"),
            "p99_low_s": p.low.get("p99"), "p99_high_s": p.high.get("p99"),
            "percentiles_bound": p.bound, "resolution_s": p.resolution_s, "requests_per_s": p.rate,
            "lost_pct": p.lost_fraction * 100 if p.lost_fraction is not None else None,
            "load_gbps": p.load_gbps, "load_gbps_min": p.load_gbps_low, "load_gbps_max": p.load_gbps_high,
            "idle_point": p.idle_point,
            "p50_vs_idle": p.vs_idle.get("p50"), "p99_vs_idle": p.vs_idle.get("p99"),
            "p999_vs_idle": p.vs_idle.get("p99.9"),
            "cores_busy": p.cores_busy, "cpu_pct_of_machine": p.cpu_percent,
            "probe_client_cores": tools.get("latency-client"), "probe_server_cores": tools.get("latency-server"),
            "load_cores": (tools.get("load-client") or 0.0) + (tools.get("load-server") or 0.0)
            if ("load-client" in tools or "load-server" in tools) else None,
            "per_host": {h: dict(v) for h, v in p.per_host.items()},
            "limit": p.verdict.limit if p.verdict else None, "verdict": p.verdict.as_dict() if p.verdict else None,
            "errors": list(p.errors), "warnings": list(p.warnings)})
        rows.append(row)
    return rows


def _shown(r: dict[str, Any]) -> dict[str, str]:
    """A row as the page shows it: microseconds, ratios, Gbps."""
    up = "≤ " if r["percentiles_bound"] == "upper" else ""

    def ratio(x: float | None) -> str:
        return "" if x is None else f"{x:.2f}×"
    return {"size": format_size(r["message_size"]), **{c: (up if c != "max" else "") + _us(r[f"{c}_s"])
                                                       for c in COLUMN.values()},
            "mean": _us(r["mean_s"]), "min": _us(r["min_s"]),
            "p99_spread": f"{_us(r['p99_low_s'])} .. {_us(r['p99_high_s'])}" if r["p99_low_s"] is not None else "",
            "rate": "—" if r["requests_per_s"] is None else f"{r['requests_per_s']:.0f}",
            "lost": "—" if r["lost_pct"] is None else f"{r['lost_pct']:.2f}",
            "load": "" if r["load_gbps"] is None else f"{r['load_gbps']:.2f}",
            "p50_cost": ratio(r["p50_vs_idle"]), "p99_cost": ratio(r["p99_vs_idle"]),
            "p999_cost": ratio(r["p999_vs_idle"]), "limit": limit_text(r) or "—",
            "cores": "—" if r["cores_busy"] is None else f"{r['cores_busy']:.2f}",
            "probe_cores": "—" if r["probe_client_cores"] is None else f"{r['probe_client_cores']:.2f}",
            "per_host": ", ".join(f"{h} {_us(v.get('p50'))}/{_us(v.get('p99'))}" for h, v in r["per_host"].items())}


def _agreement_row(a: Agreement) -> dict[str, str]:
    def f(k: str) -> str:
        return f"{a.ratios[k]:.2f}" if k in a.ratios else "—"
    return {"protocol": a.protocol.upper(), "size": format_size(a.message_size), "condition": a.condition,
            "pair": f"{a.engine_b} / {a.engine_a}", "min": f("min"), "p50": f("p50"), "mean": f("mean"),
            "p99": f("p99"), "p999": f("p99.9"), "bound": "upper bounds" if a.bound_b == "upper" else ""}


def waiting_settings(facts: Sequence[HostFacts]) -> list[dict[str, str]]:
    """Per host: busy polling and the test interfaces' interrupt coalescing, as recorded."""
    out = []
    for h in facts:
        row = {"host": h.host, "role": h.role}
        for key in BUSY_FACTS:
            f = h.get(key)
            row[key.rsplit(".", 1)[1]] = f.display() if f is not None else "not recorded"
        co = []
        for f in h.facts:
            parts = f.key.split(".")
            if len(parts) >= 3 and parts[0] == "if" and parts[2] == "coalesce":
                what = ".".join(parts[3:]) or "coalescing"
                co.append(f"{parts[1]} {what} {f.display()}")
        row["coalescing"] = "; ".join(co) if co else "no test interface recorded"
        out.append(row)
    return out


def export(view: RunView, rows: list[dict[str, Any]], out: Path) -> tuple[Path, Path]:
    flat = [{**r, "per_host": ";".join(f"{h}={v.get('p50')}/{v.get('p99')}" for h, v in r["per_host"].items())}
            for r in rows]
    trials = []
    for t in view.trials:
        if not isinstance(t, LatencyTrial):
            continue
        trials.append({"trial_id": t.trial_id, "point": t.point, "repeat": t.repeat, "status": t.status,
                       "error": t.error, "percentiles_s": dict(t.percentiles), "mean_s": t.mean, "min_s": t.min,
                       "window": list(t.window) if t.window else None, "load_gbps": t.load_gbps,
                       "probes": {h: {"count": p.count, "sent": p.sent, "lost": p.lost, "rate": p.rate,
                                      "percentiles_s": dict(p.percentiles), "mean_s": p.mean, "min_s": p.min,
                                      "bound": p.bound, **({"stated": dict(p.stated)} if p.bound == "stated" else {})}
                                  for h, p in t.probes.items()},
                       "tool_cpus": dict(t.tool_cpus)})
    return write_exports(view, out, rows, _CSV_COLS + ["per_host"], _UNITS, trials, csv_rows=flat)


# ---- figures ---------------------------------------------------------------------------

_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c"]


def _cdf_xy(h: LatencyHistogram) -> tuple[list[float], list[float]]:
    """A step CDF in microseconds from the histogram's buckets, starting at its exact minimum."""
    pts = h.cdf()
    xs = [h.min * 1e6] + [x * 1e6 for x, _ in pts]
    ys = [0.0] + [y for _, y in pts]
    return xs, ys


def _binned(points: Sequence[LatencyPoint], text: str) -> str:
    """``text`` with the bin width when the points' percentiles are bins' upper
    edges (an engine without per-request samples: iperf 2), else nothing."""
    res = [p.resolution_s for p in points if p.bound == "upper" and p.resolution_s]
    return text.format(engine=points[0].engine, us=f"{max(res) * 1e6:g}") if res else ""


def cdf_figures(points: Sequence[LatencyPoint], out: Path, title: str) -> list[Path]:
    """One figure per protocol and engine: a CDF per message size, idle solid
    and loaded dashed, on a log latency axis."""
    groups: dict[tuple[str, str], list[LatencyPoint]] = defaultdict(list)
    for p in points:
        if p.merged is not None and p.merged.count:
            groups[(p.protocol, p.engine)].append(p)
    paths = []
    for (proto, engine), ps in sorted(groups.items()):
        fig, ax = new_figure()
        sizes = sorted({p.message_size for p in ps})
        for p in sorted(ps, key=lambda p: (p.message_size, p.condition)):
            assert p.merged is not None
            xs, ys = _cdf_xy(p.merged)
            load = f", load {p.load_gbps:.2f} Gbps" if p.load_gbps is not None else ""
            ax.step(xs, ys, where="post", color=_COLORS[sizes.index(p.message_size) % len(_COLORS)],
                    linestyle="--" if p.condition == "loaded" else "-", linewidth=1.4,
                    label=f"{format_size(p.message_size)} B {p.condition}{load}")
        ax.set_xscale("log")
        ax.set_xlabel("round-trip time (us, log scale)" + _binned(ps, " — {engine}: {us} us bins, upper edges"))
        ax.set_ylabel("fraction of requests ≤ x")
        ax.set_ylim(0, 1.0)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
        ax.set_title(f"{title}: {proto.upper()} {engine}: RTT distribution, idle (solid) vs loaded (dashed)",
                     fontsize=10)
        paths.append(save(fig, out, f"cdf-{proto}-{engine}"))
    return paths


def cost_figures(points: Sequence[LatencyPoint], out: Path, title: str) -> list[Path]:
    """One figure per protocol and engine (engines are never compared on one
    figure): p99 (bars: min..max over repeats) and p50 against message size,
    idle solid and loaded dashed: what the load costs."""
    groups: dict[tuple[str, str], list[LatencyPoint]] = defaultdict(list)
    for p in points:
        if "p99" in p.percentiles:
            groups[(p.protocol, p.engine)].append(p)
    paths = []
    for (proto, engine), ps in sorted(groups.items()):
        fig, ax = new_figure()
        loads = [p.load_gbps for p in ps if p.load_gbps is not None]
        for cond in ("idle", "loaded"):
            lp = sorted((p for p in ps if p.condition == cond), key=lambda p: p.message_size)
            if not lp:
                continue
            style = "--" if cond == "loaded" else "-"
            for k, color, alpha in (("p99", "#c44e52", 1.0), ("p99.9", "#8172b3", 0.6), ("p50", "#4c72b0", 1.0)):
                have = [p for p in lp if k in p.percentiles]
                ys = [p.percentiles[k] * 1e6 for p in have]
                lo = [y - p.low[k] * 1e6 for y, p in zip(ys, have, strict=True)]
                hi = [p.high[k] * 1e6 - y for y, p in zip(ys, have, strict=True)]
                ax.errorbar([p.message_size for p in have], ys, yerr=[lo, hi], marker="o", capsize=3, color=color,
                            linestyle=style, alpha=alpha, label=f"{k} {cond}")
        size_axis(ax, {p.message_size for p in ps}, "message size (bytes)")
        ax.set_yscale("log")
        bound = _binned(ps, " (upper bounds: {us} us bins)")
        ax.set_ylabel("round-trip time (us, log scale)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
        load = (f" under {min(loads):.2f}..{max(loads):.2f} Gbps of load" if loads and not
                math.isclose(min(loads), max(loads)) else f" under {loads[0]:.2f} Gbps of load" if loads else "")
        ax.set_title(f"{title}: {proto.upper()} {engine}{bound}: what the load costs{load}", fontsize=10)
        paths.append(save(fig, out, f"cost-{proto}-{engine}"))
    return paths
