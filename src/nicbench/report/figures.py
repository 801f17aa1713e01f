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


def throughput_figures(rows: list[dict[str, Any]], out_dir: Path, title: str, mtu: int | None) -> list[Path]:
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
        ax.set_xscale("log", base=2)
        ticks = sorted(sizes)
        ax.xaxis.set_major_locator(FixedLocator(ticks))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels([format_size(t) for t in ticks], rotation=0)
        ax.set_xlabel("IO size (bytes)")
        ax.set_ylabel("Throughput (Gbps, receiver side)")
        ax.set_ylim(bottom=0)
        mtu_s = f", MTU {mtu}" if mtu else ""
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
