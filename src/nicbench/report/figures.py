"""Figures in the seeds' style: Gbps vs IO size, one line per connection count."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import FixedLocator, NullLocator  # noqa: E402

from ..core.units import format_size  # noqa: E402

TITLES = {"tx": "Transmit (server -> clients)", "rx": "Receive (clients -> server)",
          "bidir": "Bidirectional (tx + rx)"}


def throughput_figures(rows: list[dict[str, Any]], out_dir: Path, title: str, mtu: int | None,
                       speed: str | None = None) -> list[Path]:
    """One PNG+SVG per direction; returns the PNG paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    by_dir: dict[str, dict[int, list[dict]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if r["gbps_median"] is not None and isinstance(r["io_size"], int):
            by_dir[r["direction"]][r["connections"]].append(r)
    paths = []
    for direction in [d for d in ("tx", "rx", "bidir") if d in by_dir]:
        fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=110)
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
        ax.set_xscale("log", base=2)
        ticks = sorted(sizes)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([format_size(t) for t in ticks], rotation=0)
        ax.set_xlabel("IO size (bytes)")
        ax.set_ylabel("Throughput (Gbps, receiver side)")
        top = max([ceil or 0.0] + [r["gbps_max"] or 0.0 for pts in by_dir[direction].values() for r in pts])
        ax.set_ylim(0, top * 1.12 if top else None)   # room to see the ceiling line
        mtu_s = (f", {speed}bit/s" if speed else "") + (f", MTU {mtu}" if mtu else "")
        ax.set_title(f"{title}: {TITLES.get(direction, direction)}{mtu_s}", fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        paths.append(_save(fig, out_dir, f"throughput-{direction}"))
    return paths


def _save(fig, out_dir: Path, stem: str) -> Path:
    """PNG for the page, SVG for print; returns the PNG."""
    fig.tight_layout()
    png = out_dir / f"{stem}.png"
    fig.savefig(png, bbox_inches="tight")          # keep a legend placed below the axes
    fig.savefig(out_dir / f"{stem}.svg", bbox_inches="tight")
    plt.close(fig)
    return png


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
        fig, ax = plt.subplots(figsize=(max(6.0, 0.5 * len(pts) + 3), 4.2), dpi=110)
        ax.bar(xs, [r["gbps_median"] for r in pts], color="#4c72b0", label="goodput (Gbps)")
        if any(r.get("wire_gbps") for r in pts):
            ax.plot(xs, [r.get("wire_gbps") for r in pts], "s", color="#55a868", label="wire (Gbps)")
        ax.set_ylabel("Gbps")
        ax.set_xticks(xs)
        ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
        ax2 = ax.twinx()
        ax2.plot(xs, [r["cpu_pct_of_machine"] for r in pts], "o-", color="#c44e52", label="CPU % of machine")
        ax2.set_ylim(0, 105)
        ax2.set_ylabel("CPU % (all cores)")
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.22),
                  ncol=3, frameon=False)
        ax.set_title(f"{title}: {TITLES.get(direction, direction)}: throughput and CPU", fontsize=10)
        paths.append(_save(fig, out_dir, f"cpu-{direction}"))
    return paths


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
        fig, ax = plt.subplots(figsize=(max(6.0, 0.7 * len(pts) + 3), 4.2), dpi=110)
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
        paths.append(_save(fig, out_dir, f"https-{scheme}"))
    return paths


def storage_figures(rows: list[dict[str, Any]], out_dir: Path, title: str) -> list[Path]:
    """Seed 004 as figures: IOPS and MB/s against block size, one line per op,
    with each op's ceiling in MB/s."""
    paths = []
    ops = [o for o in ("read", "write", "readwrite") if any(r["op"] == o and r["mb_s"] is not None for r in rows)]
    if not ops:
        return paths
    for metric, label in (("iops", "IOPS"), ("mb_s", "MB/s (10^6 B/s)")):
        fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=110)
        sizes: set[int] = set()
        for op in ops:
            pts = sorted((r for r in rows if r["op"] == op and r[metric] is not None), key=lambda r: r["block_size"])
            xs = [r["block_size"] for r in pts]
            sizes.update(xs)
            line, = ax.plot(xs, [r[metric] for r in pts], "o-", label=op.upper())
            if metric == "mb_s" and any(r["ceiling_mb_s"] for r in pts):
                ax.plot(xs, [r["ceiling_mb_s"] for r in pts], "--", color=line.get_color(), lw=1,
                        label=f"{op.upper()} ceiling")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(sorted(sizes)))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([format_size(x) for x in sorted(sizes)])
        ax.set_xlabel("block size")
        ax.set_ylabel(label)
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=6, frameon=False)
        ax.set_title(f"{title}: {label} vs block size", fontsize=10)
        paths.append(_save(fig, out_dir, f"storage-{metric}"))
    return paths


def packet_figures(rows: list[dict[str, Any]], out_dir: Path, title: str, line_rate: str | None) -> list[Path]:
    """Seed 003 as a figure: Mpps received vs frame size, one line per engine,
    IP version, ports and threads, with each port count's line-rate ceiling."""
    pts = [r for r in rows if r["rx_mpps"] is not None]
    if not pts:
        return []
    fig, ax = plt.subplots(figsize=(7.5, 4.2), dpi=110)
    series: dict[tuple, list] = defaultdict(list)
    for r in pts:
        series[(r["engine"], r["ip"], r["ports"], r["threads"])].append(r)
    sizes = sorted({r["frame_size"] for r in pts})
    for (eng, ip, ports, threads), rs in sorted(series.items()):
        rs.sort(key=lambda r: r["frame_size"])
        ax.plot([r["frame_size"] for r in rs], [r["rx_mpps"] for r in rs], "o-",
                label=f"{eng} IPv{ip}, {ports} port{'s' if ports > 1 else ''}, {threads} thread{'s' if threads > 1 else ''}")
    for ports in sorted({r["ports"] for r in pts}):
        cs = sorted(((r["frame_size"], r["ceiling_mpps"]) for r in rows if r["ports"] == ports and r["ceiling_mpps"]))
        if cs:
            ax.plot([c[0] for c in dict(cs).items()], [c[1] for c in dict(cs).items()], "--" if ports == 1 else ":",
                    lw=1, color="gray",
                    label=f"line rate, {ports} x {line_rate}")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(FixedLocator(sizes))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticklabels([str(x) for x in sizes])
    ax.set_yscale("log")
    ax.set_xlabel("frame size, bytes (with FCS)")
    ax.set_ylabel("Mpps received")
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    ax.set_title(f"{title}: packet rate vs frame size", fontsize=10)
    return [_save(fig, out_dir, "packets-mpps")]
