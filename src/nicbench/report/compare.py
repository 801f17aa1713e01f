"""Two runs of one study as a page: the points' figures with both runs
overlaid, the per-point comparison, and what differs between the runs'
hosts and tuning (each differing fact once).

The figures are drawn from the study's compare values (one number per ok
repeat of each point) and the shape of its point keys: the first part of a
key names the figure (``tx``, ``nbgen``, ``read``, ``https``), the last the
x position (``io8K``, ``64B``, ``bs4K``, ``c40``), what lies between one
line (``c3``, ``ipv4/p1/t1``).  Run A is drawn solid, run B dashed, in the
same colour per line; bars span min..max over repeats.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import jinja2
import matplotlib

from ..analysis.compare import Diff
from . import numbers
from .figures import new_figure, save
from .view import CompareValues, RunView

TEMPLATE = Path(__file__).with_name("compare.html.j2")
CYCLE: list[str] = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]


def _split(point: str) -> tuple[str, str, str]:
    parts = point.split("/")
    if len(parts) == 1:
        return "", "", parts[0]
    return parts[0], "/".join(parts[1:-1]), parts[-1]


def overlay_figures(a: CompareValues, b: CompareValues, out: Path, names: tuple[str, str]) -> list[Path]:
    """One PNG (+SVG) per figure group, A solid and B dashed; returns the PNGs."""
    order = list(dict.fromkeys([*a.values, *b.values]))
    groups: dict[str, dict[str, list[str]]] = {}
    for point in order:
        fig_key, line, _x = _split(point)
        groups.setdefault(fig_key, {}).setdefault(line, []).append(point)
    paths = []
    for n, (fig_key, series) in enumerate(groups.items()):
        xs = list(dict.fromkeys(_split(p)[2] for pts in series.values() for p in pts))
        fig, ax = new_figure(max(6.0, 0.6 * len(xs) + 4))
        top = 0.0
        for k, (label, pts) in enumerate(series.items()):
            colour = CYCLE[k % len(CYCLE)]          # A and B of one line share its colour
            for run, vals, style, marker in (("A", a.values, "-", "o"), ("B", b.values, "--", "s")):
                got = [(xs.index(_split(p)[2]), vals[p]) for p in pts if vals.get(p)]
                if not got:
                    continue
                pos = [i + (-0.03 if run == "A" else 0.03) for i, _ in got]   # side by side, both visible
                med = [statistics.median(v) for _, v in got]
                err = [[m - min(v) for m, (_, v) in zip(med, got, strict=True)],
                       [max(v) - m for m, (_, v) in zip(med, got, strict=True)]]
                top = max([top, *(max(v) for _, v in got)])
                ax.errorbar(pos, med, yerr=err, color=colour, ls=style, marker=marker, capsize=3,
                            label=f"{run}" + (f" · {label}" if label else f" {names[0 if run == 'A' else 1]}"))
        ax.set_xticks(range(len(xs)))
        ax.set_xticklabels(xs)
        ax.set_ylim(0, top * 1.12 if top else None)        # room above the highest bar
        ax.set_ylabel(a.metric)
        ax.grid(True, alpha=0.3)
        ax.set_title(f"{fig_key or 'points'}: A solid, B dashed", fontsize=10)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
        paths.append(save(fig, out, f"compare-{n}-{(fig_key or 'points').replace('/', '-')}"))
    return paths


def write_compare_page(out: Path, a: RunView, b: RunView, values: tuple[CompareValues, CompareValues],
                       diffs: Sequence[Diff], facts: Sequence[Mapping[str, Any]],
                       tuning: tuple[Any, Any] | None) -> Path:
    """``out``/index.html with the overlaid figures, the point table and the differences."""
    out.mkdir(parents=True, exist_ok=True)
    figs = overlay_figures(values[0], values[1], out, (a.info.run_id, b.info.run_id))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE.parent), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["num"] = numbers.num

    def created(v: RunView) -> str:
        return dt.datetime.fromtimestamp(v.info.created).isoformat(timespec="seconds")
    index = out / "index.html"
    index.write_text(env.get_template(TEMPLATE.name).render(
        a=a.info, b=b.info, created_a=created(a), created_b=created(b), metric=values[0].metric,
        figures=[p.name for p in figs], diffs=[asdict(d) for d in diffs], facts=facts, tuning=tuning))
    return index
