"""The packet study's view: seed 003's Mpps against frame size and line
rate, its single/dual-port table, and what each frame cost in CPU."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...analysis.trials import float_meta
from ...core.linerate import format_speed
from ...records import HostFacts, Sample, TrialRecord
from ...report.facts import facts_section
from ...report.figures import new_figure, save, size_axis
from ...report.render import cpu_sentence, pinned_tools, rounded, write_exports, write_page
from ...report.view import Analysed, CompareValues, RunView, StoredRun
from .analysis import PacketPoint, PacketTrial, packet_points, packet_trial, port_table

TEMPLATE = Path(__file__).with_name("report.html.j2")


class PacketView:
    kind = "packets"

    def analyse(self, run: StoredRun) -> Analysed:
        pts = [packet_trial(t, run.samples_of(t), run.trim) for t in run.records]
        return Analysed(pts, packet_points(pts, float_meta(run.info.meta, "line_rate_bps") or None))

    def rows(self, view: RunView) -> list[dict[str, Any]]:
        return packet_rows(view.points)

    def render(self, view: RunView, out: Path) -> Path:
        """Seed 003's report: Mpps vs frame size against line rate, the single/dual-port table, CPU."""
        rows = packet_rows(view.points)
        lr = view.info.meta.get("line_rate_bps")
        figs = packet_figures(rows, out, view.info.name, format_speed(float(lr)) if lr else None)
        cols = [
            "point",
            "engine",
            "ip",
            "ports",
            "threads",
            "frame_size",
            "repeats_ok",
            "repeats_failed",
            "rx_mpps",
            "rx_min",
            "rx_max",
            "tx_mpps",
            "loss_pct",
            "gbps_l2",
            "gbps_l1",
            "ceiling_mpps",
            "pct_of_ceiling",
            "cores_busy",
            "cpu_pct_of_machine",
            "engine_cores",
            "mpps_per_core",
            "if_tx_mpps",
            "if_rx_mpps",
            "tx_drops_mpps",
            "xdp_mode",
            "ndr_steps",
        ]
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
        table = port_table(view.points)
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
        return write_page(
            out,
            TEMPLATE,
            view,
            rows=rows,
            table=table,
            ports=ports,
            line_rate=format_speed(float(lr)) if lr else None,
            figures=[p.name for p in figs],
            failures=view.failures,
            cpu=cpu_sentence(view),
            facts=facts_section(view.facts),
            pinned=pinned_tools(view),
            others="; ".join(others),
        )

    def compare_values(self, view: RunView) -> CompareValues:
        values: dict[str, list[float]] = {}
        for t in view.trials:
            if isinstance(t, PacketTrial) and t.status == "ok" and t.rx_pps:
                values.setdefault(t.point, []).append(t.rx_pps / 1e6)
            elif isinstance(t, PacketTrial) and t.status == "ok" and t.tx_pps:
                # an imported point with only its senders' files: a rate sent is no rate received,
                # so it is compared only with other sent rates, under a point name that says so
                values.setdefault(f"{t.point} (sent)", []).append(t.tx_pps / 1e6)
        sent_only = bool(values) and all(k.endswith(" (sent)") for k in values)
        return CompareValues("Mpps sent" if sent_only else "Mpps received", values)

    def progress_line(self, rec: TrialRecord, samples: list[Sample], run_meta: Mapping[str, Any]) -> str:
        t = packet_trial(rec, samples, float(run_meta.get("trim", 0.0)))
        return f"{rec.spec.point} {t.rx_pps / 1e6:.3f} Mpps received" if t.rx_pps else f"{rec.spec.point} {t.error}"


def packet_rows(points: Sequence[PacketPoint]) -> list[dict[str, Any]]:
    """One row per packet point: Mpps received and sent, loss, Gbps, ceiling, CPU."""
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
            "rx_mpps": rounded(p.rx_mpps),
            "rx_min": rounded(p.rx_min),
            "rx_max": rounded(p.rx_max),
            "tx_mpps": rounded(p.tx_mpps),
            "loss_pct": rounded(p.loss * 100 if p.loss is not None else None, 3),
            "gbps_l2": rounded(p.gbps_l2),
            "gbps_l1": rounded(p.gbps_l1),
            "ceiling_mpps": rounded(p.ceiling_mpps),
            "pct_of_ceiling": rounded(p.of_ceiling * 100 if p.of_ceiling is not None else None, 1),
            "above_ceiling": p.above_ceiling,
            "cores_busy": rounded(p.cores_busy, 2),
            "cpu_pct_of_machine": rounded(p.cpu_pct, 1),
            "engine_cores": rounded(p.engine_cores, 2),
            "mpps_per_core": rounded(p.mpps_per_core),
            "if_tx_mpps": rounded(p.if_tx_mpps),
            "if_rx_mpps": rounded(p.if_rx_mpps),
            "tx_drops_mpps": rounded(p.tx_drops_mpps, 4),
            "xdp_mode": ", ".join(p.xdp_modes),
            "ndr_steps": p.ndr_steps,
            "errors": list(p.errors),
            "warnings": list(p.warnings),
        }
        for p in points
    ]


def packet_figures(rows: list[dict[str, Any]], out_dir: Path, title: str, line_rate: str | None) -> list[Path]:
    """Seed 003 as a figure: Mpps received vs frame size, one line per engine,
    IP version, ports and threads, with each port count's line-rate ceiling."""
    pts = [r for r in rows if r["rx_mpps"] is not None]
    if not pts:
        return []
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
    for ports in sorted({r["ports"] for r in pts}):
        cs = sorted((r["frame_size"], r["ceiling_mpps"]) for r in rows if r["ports"] == ports and r["ceiling_mpps"])
        if cs:
            ax.plot(
                [c[0] for c in dict(cs).items()],
                [c[1] for c in dict(cs).items()],
                "--" if ports == 1 else ":",
                lw=1,
                color="gray",
                label=f"line rate, {ports} x {line_rate}",
            )
    size_axis(ax, sizes, "frame size, bytes (with FCS)", str)
    ax.set_yscale("log")
    ax.set_ylabel("Mpps received")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    ax.set_title(f"{title}: packet rate vs frame size", fontsize=10)
    return [save(fig, out_dir, "packets-mpps")]


def _fact(h: HostFacts, key: str) -> str:
    f = h.get(key)
    return f.display() if f is not None else "not recorded"
