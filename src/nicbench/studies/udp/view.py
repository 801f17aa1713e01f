"""The UDP study's view: the headline figure (throughput at <= the loss
threshold vs datagram size, against the UDP ceiling), received Gbps, loss
and datagram rate per offered rate, CPU, where datagrams were lost, the
receive buffers, tables and exports.

Rows keep full precision in base units (bit/s, datagrams/s, bytes,
seconds, loss as a fraction); the page rounds what a person reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...analysis.trials import float_meta, pct_of
from ...core.linerate import format_speed
from ...records import HostFacts, Sample, TrialRecord
from ...report.facts import facts_section
from ...report.render import cpu_sentence, pinned_tools, write_exports, write_page
from ...report.tables import Col, limit_text, ok_failed
from ...report.timeline import timelines
from ...report.view import Analysed, ChartSpec, CompareValues, Metric, PointSummary, RunView, StoredRun, summaries
from .analysis import SPLIT_STAGES, UdpPoint, UdpTrial, ceiling_gbps, udp_points, udp_trial
from .figures import cpu_figure, headline_figure, rate_figures

TEMPLATE = Path(__file__).with_name("report.html.j2")

CSV_COLS = ["point", "direction", "clients", "streams", "rate", "rate_per_client_bps", "datagram_size", "fragments",
            "engine", "repeats_ok", "repeats_failed", "repeats_partial", "survivors_only",
            "received_bps", "received_bps_min", "received_bps_max",
            "received_bps_stdev", "tx_received_bps", "rx_received_bps", "datagrams_per_s", "sent_bps", "loss",
            "loss_max", "counted_loss", "jitter_s", "jitter_max_s", "out_of_order", "ceiling_bps", "of_ceiling",
            "max_of_ceiling", "above_ceiling", "search_rate_per_client_bps", "search_steps",
            "receive_buffer_bytes", "cores_busy", "cpu_pct_of_machine", "max_start_skew_s",
            *[f"split_{k}_per_s" for k in SPLIT_STAGES]]
UNITS = {"*_bps": "bit/s of UDP payload (received: at the receivers)", "datagrams_per_s": "datagrams/s received",
         "loss": "fraction of the datagrams the receivers expected (worst direction)", "jitter_s": "seconds",
         "datagram_size": "UDP payload bytes", "receive_buffer_bytes": "bytes", "split_*_per_s": "datagrams/s",
         "of_ceiling": "fraction", "cpu_by_host": "cores used by the engine processes on each host"}


METRICS: tuple[Metric, ...] = (
    Metric("gbps", "Gbit/s", "UDP payload received, median over repeats"),
    Metric("gbps_min", "Gbit/s", "lowest repeat"),
    Metric("gbps_max", "Gbit/s", "highest repeat"),
    Metric("datagrams_per_s", "datagrams/s", "datagrams received"),
    Metric("sent_gbps", "Gbit/s", "UDP payload sent"),
    Metric("loss_pct", "%", "datagrams the receivers missed (worst direction)", higher_is_better=False),
    Metric("jitter_ms", "ms", "receivers' jitter, median interval", higher_is_better=False),
    Metric("pct_of_ceiling", "%", "of the UDP line-rate ceiling"),
    Metric("rate_found_bps", "bit/s", "the max-rate search's rate per client"),
    Metric("cores_busy", "cores", "CPU cores busy", higher_is_better=False),
    Metric("cpu_pct", "%", "CPU of the machine", higher_is_better=False),
)


def _values(p: UdpPoint) -> dict[str, float | None]:
    return {"gbps": p.gbps, "gbps_min": p.gbps_min, "gbps_max": p.gbps_max, "datagrams_per_s": p.datagrams_per_s,
            "sent_gbps": p.sent_gbps, "loss_pct": p.loss * 100 if p.loss is not None else None,
            "jitter_ms": p.jitter_s * 1e3 if p.jitter_s is not None else None,
            "pct_of_ceiling": pct_of(p.gbps, p.ceiling_gbps),
            "rate_found_bps": p.rate_found_bps, "cores_busy": p.cores_busy, "cpu_pct": p.cpu_percent}


def _gbps(key: str) -> Callable[[Mapping[str, Any]], float | None]:
    return lambda r: r[key] / 1e9 if r.get(key) is not None else None


def _pct(key: str) -> Callable[[Mapping[str, Any]], float | None]:
    return lambda r: r[key] * 100 if r.get(key) is not None else None


# the results table at the end of a run (the rows stay at full precision, in base units)
HEADLINE = (
    Col("point", "point", "text"),
    Col("datagram B", "datagram_size", "count"),
    Col("Gbps received", _gbps("received_bps"), bold=True, alert=lambda r: bool(r.get("survivors_only")),
        title="UDP payload the receivers counted, median (red: the survivors' aggregate only)"),
    Col("% of ceiling", _pct("of_ceiling"), alert=lambda r: bool(r.get("above_ceiling"))),
    Col("loss %", _pct("loss"), title="datagrams the receivers missed, worst direction"),
    Col("jitter ms", lambda r: r["jitter_s"] * 1e3 if r.get("jitter_s") is not None else None),
    Col("cores busy", "cores_busy"),
    Col("ok/failed", ok_failed, "text"),
    Col("limit", limit_text, "text", title="what held the point, from its measurements (nicbench explain)"),
)


CHARTS: tuple[ChartSpec, ...] = (
    ChartSpec("throughput", "received Gbps vs datagram size, {direction}", "datagram_size", "datagram size (bytes)",
              "received_bps", "Gbit/s received (median)", "{streams} streams at {rate}", split=("direction",),
              series=("streams", "rate"), ceiling="ceiling_bps", low="received_bps_min", high="received_bps_max",
              scale=1e-9),
    ChartSpec("loss", "loss vs datagram size, {direction}", "datagram_size", "datagram size (bytes)", "loss",
              "loss (share of datagrams)", "{streams} streams at {rate}", split=("direction",),
              series=("streams", "rate")),
)


class UdpView:
    kind = "udp"
    metrics = METRICS
    charts = CHARTS
    timeline_panels = None        # each client's throughput

    headline = HEADLINE      # the columns a reader compares first: the run's results table

    def point_summaries(self, view: RunView) -> list[PointSummary]:
        return summaries(view, _values)

    def analyse(self, run: StoredRun) -> Analysed:
        trials = [udp_trial(t, run.samples_of(t), run.trim, run.link) for t in run.records]
        return Analysed(trials, udp_points(trials, run.link))

    def rows(self, view: RunView) -> list[dict[str, Any]]:
        return table_rows(view.points)

    def render(self, view: RunView, out: Path) -> Path:
        out.mkdir(parents=True, exist_ok=True)
        rows = table_rows(view.points)
        threshold = float_meta(view.info.meta, "loss_threshold", 0.001)
        mtu = view.link.mtu if view.link else 1500
        speed = view.link.speed_for(None) if view.link else None
        title = view.info.name + (f", {format_speed(speed)}bit/s" if speed else "") + f", MTU {mtu}"
        sizes = sorted({int(r["datagram_size"]) for r in rows})
        curve = {s: ceiling_gbps(view.link, s, None) for s in sizes}
        figs = headline_figure(rows, out, title, threshold, curve, mtu)
        figs += rate_figures(rows, out, title, mtu)
        figs += cpu_figure(rows, out, view.info.name)
        csv_path, json_path = export(view, rows, out)
        return write_page(
            out, TEMPLATE, view, rows=rows, figures=[p.name for p in figs], failures=view.failures,
            csv=csv_path.name, json=json_path.name, threshold=threshold, mtu=mtu,
            above=[r for r in rows if r["above_ceiling"]], searches=search_tables(view.trials),
            buffers=buffer_facts(view.facts, view.info.meta), cpu=cpu_sentence(view),
            facts=facts_section(view.facts), tuning=view.info.meta.get("tuning"), pinned=pinned_tools(view),
            stages=SPLIT_STAGES, has_split=any(r["split_received_per_s"] is not None for r in rows),
            udp_link=link_sentence(view, sizes), **_timelines(view, out))

    def compare_values(self, view: RunView) -> list[CompareValues]:
        gbps: dict[str, list[float]] = {}
        loss: dict[str, list[float]] = {}
        for t in view.trials:
            # a partial repeat's figures are its survivors': not the point's, so not compared
            if isinstance(t, UdpTrial) and t.status == "ok" and t.gbps is not None:
                gbps.setdefault(t.point, []).append(t.gbps)
                if t.loss is not None:
                    loss.setdefault(t.point, []).append(t.loss * 100)
        return [CompareValues("Gbps received (UDP payload)", gbps),
                CompareValues("loss % (receivers)", loss, higher_is_better=False)]

    def progress_line(self, rec: TrialRecord, samples: list[Sample], run_meta: Mapping[str, Any]) -> str:
        """The report's figures of a trial that just finished (its own window)."""
        if rec.status not in ("ok", "partial"):
            return f"{rec.spec.point} {rec.status}"
        t = udp_trial(rec, samples, float(run_meta.get("trim", 0.0)))
        if t.gbps is None:
            return f"{rec.spec.point} no window ({t.error})"
        loss = f"{t.loss * 100:.3g} % loss" if t.loss is not None else "loss unknown"
        found = ""
        if t.search:
            rate = t.search.get("rate_per_client_bps")
            steps = len(t.search.get("steps") or [])  # type: ignore[arg-type]
            found = (f", found at {format_speed(float(rate))}bit/s per client" if isinstance(rate, (int, float))
                     else ", unpaced") + f" in {steps} steps"
        part = f" (partial: survivors only; {rec.error})" if rec.status == "partial" else ""
        return f"{rec.spec.point} {t.gbps:.3f} Gbps, {t.datagrams_per_s or 0:.0f} datagrams/s, {loss}{found}{part}"


def _timelines(view: RunView, out: Path) -> dict[str, Any]:
    tl = timelines(view, out)
    return {"timelines": tl.files, "timeline_notes": tl.notes}


def table_rows(points: Sequence[UdpPoint]) -> list[dict[str, Any]]:
    """One row per point, full precision, base units."""
    rows = []
    for p in points:
        g = (lambda v: v * 1e9 if v is not None else None)  # noqa: E731 - Gbps -> bit/s
        rate = p.params.get("rate_bps")
        rows.append({
            "point": p.point, "direction": p.params.get("direction"), "clients": p.params.get("clients"),
            "streams": p.params.get("streams"), "rate": p.params.get("rate"),
            "rate_per_client_bps": rate, "datagram_size": p.size, "fragments": p.fragments,
            "engine": p.params.get("engine"), "repeats_ok": p.n_ok, "repeats_failed": p.n_failed,
            "repeats_partial": p.n_partial, "survivors_only": p.survivors_only,
            "limit": p.verdict.limit if p.verdict else None, "verdict": p.verdict.as_dict() if p.verdict else None,
            "received_bps": g(p.gbps), "received_bps_min": g(p.gbps_min), "received_bps_max": g(p.gbps_max),
            "received_bps_stdev": g(p.gbps_stdev), "tx_received_bps": g(p.by_direction.get("tx")),
            "rx_received_bps": g(p.by_direction.get("rx")), "datagrams_per_s": p.datagrams_per_s,
            "sent_bps": g(p.sent_gbps), "loss": p.loss, "loss_max": p.loss_max, "counted_loss": p.counted_loss,
            "jitter_s": p.jitter_s,
            "jitter_max_s": p.jitter_max_s, "out_of_order": p.out_of_order, "ceiling_bps": g(p.ceiling_gbps),
            "of_ceiling": p.of_ceiling, "max_of_ceiling": p.max_of_ceiling, "above_ceiling": p.above_ceiling,
            "search_rate_per_client_bps": p.rate_found_bps, "search_steps": p.search_steps,
            "receive_buffer_bytes": p.receive_buffer, "cores_busy": p.cores_busy,
            "cpu_pct_of_machine": p.cpu_percent, "cpu_by_host": dict(p.cpu_by_host),
            "max_start_skew_s": p.max_skew_s,
            **{f"split_{k}_per_s": p.split.get(k) for k in SPLIT_STAGES},
            "errors": list(p.errors), "warnings": list(p.warnings),
        })
    return rows


def export(view: RunView, rows: list[dict[str, Any]], out: Path) -> tuple[Path, Path]:
    flat = [{**r, "cpu_by_host": ";".join(f"{h}={c}" for h, c in r["cpu_by_host"].items())} for r in rows]
    trials = [{"trial_id": t.trial_id, "point": t.point, "repeat": t.repeat, "status": t.status, "error": t.error,
               "received_bps": t.gbps * 1e9 if t.gbps is not None else None, "loss": t.loss,
               "window_s": {d: r.received.seconds for d, r in t.directions.items()},
               "start_skew_s": t.start_skew_s, "search": t.search, "tool_cpus": dict(t.tool_cpus)}
              for t in view.trials if isinstance(t, UdpTrial)]
    return write_exports(view, out, rows, CSV_COLS + ["cpu_by_host"], UNITS, trials, csv_rows=flat)


def search_tables(trials: Sequence[Any]) -> list[dict[str, Any]]:
    """Every search's steps, as the report lists them."""
    out = []
    for t in trials:
        if isinstance(t, UdpTrial) and t.search:
            out.append({"trial_id": t.trial_id, "point": t.point, "status": t.status,
                        "upper": t.search.get("upper_per_client_bps"), "best": t.search.get("best_step"),
                        "steps": list(t.search.get("steps") or [])})  # type: ignore[call-overload]
    return out


def link_sentence(view: RunView, sizes: Sequence[int]) -> str:
    """What the link was, and so what the ceiling column means, for UDP."""
    link = view.link
    if link is None:
        return "Link: unknown (imported results): no line-rate ceiling."
    if not link.speed_bps and not link.client_speed_bps:
        return (f"Link: unshaped lab veth, MTU {link.mtu}: it has no line rate, so points carry no ceiling; give "
                "the plan [link] speed to shape it.")
    speed = link.speed_for(None if link.speed_bps else 1)
    assert speed is not None
    where = (f"server link {format_speed(link.speed_bps)}bit/s" if link.speed_bps else "server link unshaped") + (
        f", each client link {format_speed(link.client_speed_bps)}bit/s" if link.client_speed_bps else "")
    each = "; ".join(f"{s} B {c:.4f} Gbps" for s in sizes if (c := ceiling_gbps(link, s, None)) is not None)
    return (f"Link: {where}, MTU {link.mtu}, IPv{link.ip}. UDP payload ceiling per direction at line rate "
            f"(Ethernet, IP, UDP headers, FCS, preamble and gap per frame; fragments of larger datagrams each a "
            f"frame): {each}; a bidirectional point's is twice that.")


def buffer_facts(facts: Sequence[HostFacts], meta: Mapping[str, Any]) -> dict[str, Any]:
    """What capped the receive buffers: each host's rmem_max and rmem_default, and what -w asked."""
    hosts = [{"host": h.host, "role": h.role, "rmem_max": h.value("sysctl.net.core.rmem_max"),
              "rmem_default": h.value("sysctl.net.core.rmem_default"),
              "wmem_max": h.value("sysctl.net.core.wmem_max")} for h in facts if h.role != "machine"]
    return {"hosts": hosts, "window": meta.get("window")}
