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
        fig.tight_layout()
        png = out_dir / f"throughput-{direction}.png"
        fig.savefig(png)
        fig.savefig(out_dir / f"throughput-{direction}.svg")
        plt.close(fig)
        paths.append(png)
    return paths
