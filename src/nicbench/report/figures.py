"""The figure kit every study's view draws with: matplotlib on the Agg
backend, PNG for the page and SVG for print, the seeds' direction titles,
and a log2 axis of sizes labelled 4K, 64K, ..."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..core.units import format_size

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DIRECTION_TITLES = {"tx": "Transmit (server -> clients)", "rx": "Receive (clients -> server)",
                    "bidir": "Bidirectional (tx + rx)"}


@cache
def pyplot() -> ModuleType:
    """matplotlib's pyplot on the Agg backend, imported on the first figure."""
    # Imported here, not at the top of the module: every study's view imports
    # this kit, so the study registry did, and commands that draw nothing
    # (import, runs, trend, archive) paid matplotlib's ~2.5 s import at each
    # start (issue 33 item 6).
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def new_figure(width: float = 7.5, height: float = 4.2) -> tuple[Figure, Axes]:
    fig, ax = pyplot().subplots(figsize=(width, height), dpi=110)
    return fig, ax


def save(fig: Figure, out_dir: Path, stem: str) -> Path:
    """PNG for the page, SVG for print; returns the PNG."""
    fig.tight_layout()
    png = out_dir / f"{stem}.png"
    fig.savefig(png, bbox_inches="tight")          # keep a legend placed below the axes
    fig.savefig(out_dir / f"{stem}.svg", bbox_inches="tight")
    pyplot().close(fig)
    return png


def size_axis(ax: Axes, sizes: Any, label: str, fmt: Any = format_size) -> None:
    """A log2 x axis with a tick at each size, labelled in binary units (4K, 64K)."""
    ticks = sorted(sizes)
    ax.set_xscale("log", base=2)
    from matplotlib import ticker  # lazily, as pyplot(): an axis means matplotlib is loaded
    ax.xaxis.set_major_locator(ticker.FixedLocator(ticks))
    ax.xaxis.set_minor_locator(ticker.NullLocator())
    ax.set_xticklabels([fmt(t) for t in ticks])
    ax.set_xlabel(label)


def cpu_axis(ax: Axes, xs: Any, cpu_percent: Any, legend_below: float = -0.22, ncol: int = 3) -> None:
    """Seed 001's chart: CPU % of the machine on a second axis over throughput
    bars, one legend for both below the axes."""
    ax2 = ax.twinx()
    ax2.plot(xs, cpu_percent, "o-", color="#c44e52", label="CPU % of machine")
    ax2.set_ylim(0, 105)
    ax2.set_ylabel("CPU % (all cores)")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, legend_below), ncol=ncol,
              frameon=False)


def plain_log_axis(ax: Axes) -> None:
    """A log y axis labelled 0.1, 1, 10 (and 2, 5 between when a decade is all
    there is), never 6x10^0."""
    ax.set_yscale("log")
    from matplotlib import ticker  # lazily, as pyplot(): an axis means matplotlib is loaded
    ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(ticker.NullFormatter())
