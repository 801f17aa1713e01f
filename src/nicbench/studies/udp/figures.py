"""The UDP study's figures, in the seeds' style (one panel per direction, log2
axis of sizes, the line-rate ceiling dashed in crimson), drawn from the
report's rows (bit/s in the rows, Gbps on the axes)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...analysis.trials import EXPECTED_DIRECTIONS
from ...report.figures import DIRECTION_TITLES, cpu_axis, new_figure, save, size_axis

Row = dict[str, Any]
CEILING: dict[str, Any] = {"color": "crimson", "linestyle": "--", "linewidth": 1.2}


def _g(v: float | None) -> float:
    return float("nan") if v is None else v / 1e9


def directions_of(rows: Sequence[Row]) -> list[str]:
    return [d for d in EXPECTED_DIRECTIONS if any(r["direction"] == d for r in rows)]


def _series_label(r: Row) -> str:
    c, st = r["clients"], r["streams"]
    return f"{c if c else 'all'} client{'s' if c != 1 else ''} x {st} stream{'s' if st != 1 else ''}"


def _fragment_mark(ax: Any, sizes: Sequence[int], mtu: int) -> None:
    """A dotted line where datagrams stop fitting one packet."""
    one = mtu - 28
    if any(s > one for s in sizes) and any(s <= one for s in sizes):
        ax.axvline(one, color="grey", linestyle=":", linewidth=1)
        ax.annotate("fragmented ->", (one, 0), xytext=(4, 4), textcoords="offset points", fontsize=7,
                    color="grey", xycoords=("data", "axes fraction"))


def _ceiling_curve(ax: Any, curve: Mapping[int, float | None], sizes: Sequence[int], ndir: int) -> float:
    pts = [(s, c * ndir) for s in sorted(sizes) if (c := curve.get(s))]
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="_", label="UDP ceiling", **CEILING)
    return max((p[1] for p in pts), default=0.0)


def headline_figure(rows: Sequence[Row], out: Path, title: str, threshold: float,
                    curve: Mapping[int, float | None], mtu: int) -> list[Path]:
    """The study's headline: received Gbps at <= ``threshold`` loss (the
    maximum-rate search's answer) vs datagram size, against the ceiling."""
    found = [r for r in rows if r["rate"] == "max" and r["received_bps"] is not None]
    paths = []
    for d in directions_of(found):
        fig, ax = new_figure()
        by: dict[str, list[Row]] = defaultdict(list)
        for r in found:
            if r["direction"] == d:
                by[_series_label(r)].append(r)
        sizes = sorted({r["datagram_size"] for rs in by.values() for r in rs})
        for label, rs in sorted(by.items()):
            rs.sort(key=lambda r: r["datagram_size"])
            ys = [_g(r["received_bps"]) for r in rs]
            lo = [y - _g(r["received_bps_min"]) for y, r in zip(ys, rs, strict=True)]
            hi = [_g(r["received_bps_max"]) - y for y, r in zip(ys, rs, strict=True)]
            ax.errorbar([r["datagram_size"] for r in rs], ys, yerr=[lo, hi], marker="o", capsize=3, label=label)
        top = _ceiling_curve(ax, curve, sizes, len(EXPECTED_DIRECTIONS[d]))
        _fragment_mark(ax, sizes, mtu)
        size_axis(ax, sizes, "datagram size (UDP payload bytes)")
        ax.set_ylabel("Throughput (Gbps received)")
        ax.set_ylim(0, max([top] + [_g(r["received_bps_max"]) for rs in by.values() for r in rs]) * 1.12 or None)
        ax.set_title(f"{title}: {DIRECTION_TITLES.get(d, d)}\nthroughput at <= {threshold * 100:g} % loss",
                     fontsize=10)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
        paths.append(save(fig, out, f"max-rate-{d}"))
    return paths


def _by_rate(rows: Sequence[Row], d: str) -> dict[str, list[Row]]:
    by: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        if r["direction"] == d and r["rate"] != "max":
            by[f"{r['rate']} per client, {_series_label(r)}"].append(r)
    return by


def rate_figures(rows: Sequence[Row], out: Path, title: str, mtu: int) -> list[Path]:
    """At the offered rates: received Gbps and loss vs datagram size (a line per
    rate), datagrams/s vs size, and received vs offered Gbps (a line per size)."""
    paths = []
    for d in directions_of([r for r in rows if r["rate"] != "max"]):
        by = _by_rate(rows, d)
        sizes = sorted({r["datagram_size"] for rs in by.values() for r in rs})
        if len(sizes) > 1:
            for stem, key, label, scale in (
                    ("throughput", "received_bps", "Throughput (Gbps received)", 1e-9),
                    ("loss", "loss", "Loss (% of datagrams, receivers)", 100.0),
                    ("datagrams", "datagrams_per_s", "Datagrams received per second (millions)", 1e-6)):
                fig, ax = new_figure()
                for name, rs in sorted(by.items()):
                    rs.sort(key=lambda r: r["datagram_size"])
                    ax.plot([r["datagram_size"] for r in rs],
                            [float("nan") if r[key] is None else r[key] * scale for r in rs], marker="o", label=name)
                if stem == "throughput":
                    ceil = {r["datagram_size"]: r["ceiling_bps"] / 1e9 for rs in by.values() for r in rs
                            if r["ceiling_bps"]}
                    _ceiling_curve(ax, ceil, sizes, 1)
                if stem == "loss":
                    ax.set_yscale("symlog", linthresh=0.01)
                _fragment_mark(ax, sizes, mtu)
                size_axis(ax, sizes, "datagram size (UDP payload bytes)")
                ax.set_ylabel(label)
                ax.set_title(f"{title}: {DIRECTION_TITLES.get(d, d)}", fontsize=10)
                ax.grid(True, alpha=0.3)
                ax.legend(fontsize=7)
                paths.append(save(fig, out, f"{stem}-{d}"))
        rates = {r["rate"] for rs in by.values() for r in rs}
        if len(rates) > 1:
            paths.append(_load_figure(rows, out, title, d))
    return paths


def _load_figure(rows: Sequence[Row], out: Path, title: str, d: str) -> Path:
    """Received vs offered: on the diagonal nothing is lost."""
    fig, ax = new_figure()
    by: dict[int, list[Row]] = defaultdict(list)
    for r in rows:
        if r["direction"] == d and r["rate"] != "max" and r["sent_bps"] is not None:
            by[r["datagram_size"]].append(r)
    top = 0.0
    for size, rs in sorted(by.items()):
        rs.sort(key=lambda r: r["sent_bps"])
        xs, ys = [_g(r["sent_bps"]) for r in rs], [_g(r["received_bps"]) for r in rs]
        ax.plot(xs, ys, marker="o", label=f"{size} B datagrams")
        top = max([top, *xs])
        ceil = next((r["ceiling_bps"] for r in rs if r["ceiling_bps"]), None)
        if ceil:
            ax.axhline(ceil / 1e9, **CEILING)
    ax.plot([0, top], [0, top], color="grey", linestyle=":", linewidth=1, label="no loss")
    ax.set_xlabel("Offered (Gbps sent)")
    ax.set_ylabel("Throughput (Gbps received)")
    ax.set_title(f"{title}: {DIRECTION_TITLES.get(d, d)}: received vs offered (ceilings dashed)", fontsize=10)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    return save(fig, out, f"load-{d}")


def cpu_figure(rows: Sequence[Row], out: Path, title: str) -> list[Path]:
    """Seed 001's chart: throughput bars and CPU % of the machine, every point."""
    pts = [r for r in rows if r["received_bps"] is not None and r["cpu_pct_of_machine"] is not None]
    if not pts:
        return []
    fig, ax = new_figure(max(6.0, 0.45 * len(pts) + 3))
    xs = list(range(len(pts)))
    ax.bar(xs, [_g(r["received_bps"]) for r in pts], color="#4c72b0", label="received (Gbps)")
    ax.set_ylabel("Gbps")
    ax.set_xticks(xs)
    ax.set_xticklabels([r["point"] for r in pts], rotation=60, ha="right", fontsize=7)
    cpu_axis(ax, xs, [r["cpu_pct_of_machine"] for r in pts], legend_below=-0.35, ncol=2)
    ax.set_title(f"{title}: throughput and CPU", fontsize=10)
    return [save(fig, out, "cpu")]
