"""Two runs of one study compared: the one comparison every front end shows
(``nicbench compare`` and the dashboard's compare page), and the page of it.

:func:`compare_runs` pairs the runs' points -- by name, or, when they share
no point by name, as the study meets them (``report.view.PointMatcher``:
another engine's points) -- and gives, for every figure the study is
compared on (the headline first), each pair's medians, factor B/A, Welch's
t-test and verdict (``analysis.compare``), with the host facts and tuning
profile that differ.  Pure: two runs read back in, data out.

The page draws the figures from the study's compare values (one number per
ok repeat of each point) and the shape of its point keys: the first part of
a key names the figure (``tx``, ``nbgen``, ``read``, ``https``), the last
the x position (``io8K``, ``64B``, ``bs4K``, ``c40``), what lies between one
line (``c3``, ``ipv4/p1/t1``).  Run A is drawn solid, run B dashed, in the
same colour per line; bars span min..max over repeats.
"""

from __future__ import annotations

import datetime as dt
import statistics
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import jinja2
import matplotlib

from ..analysis.ab import PointAB, point_ab
from ..analysis.compare import Diff, compare
from . import numbers
from .facts import fact_changes, grouped_changes
from .figures import new_figure, save
from .view import CompareValues, PointMatcher, RunView, StudyView

TEMPLATE = Path(__file__).with_name("compare.html.j2")
CYCLE: list[str] = matplotlib.rcParams["axes.prop_cycle"].by_key()["color"]


@dataclass(frozen=True)
class Figure:
    """One figure of two runs compared: A's values, B's (under A's point
    names where points were matched), and the difference per point."""

    a: CompareValues
    b: CompareValues
    diffs: list[Diff]             # every point of either run, A's first

    @property
    def metric(self) -> str:
        return self.a.metric

    @property
    def higher_is_better(self) -> bool:
        return self.a.higher_is_better

    def intervals(self) -> dict[str, PointAB]:
        """Each point both runs measured: B's mean less A's as a share of A's,
        with its Welch interval (``analysis.ab.point_ab``, the A/B's method;
        untested below two repeats a side)."""
        return {d.point: point_ab(d.point, self.a.values[d.point], self.b.values[d.point],
                                  higher_is_better=self.higher_is_better)
                for d in self.diffs if d.point in self.a.values and d.point in self.b.values}


@dataclass(frozen=True)
class Comparison:
    """Run B against run A."""

    figures: list[Figure]                        # the headline first
    matched: list[tuple[str, str, str]]          # (A's point, B's point, how they differ): met across names
    facts_changed: list[tuple[str, str, str, str]]   # (host, fact, A, B)
    facts_differing: list[dict[str, Any]]        # each differing fact once, with its hosts
    tuning: tuple[Any, Any] | None               # the tuning profiles, when they differ

    @property
    def shared(self) -> list[str]:
        """The points both runs measured (after matching), in A's order."""
        head = self.figures[0]
        return [p for p in head.a.values if p in head.b.values]


def compare_runs(view: StudyView, a: RunView, b: RunView, *, alpha: float = 0.05,
                 threshold: float = 0.01) -> Comparison:
    """B against A, two runs of ``view``'s study: the points paired (by name;
    when no name is shared, as the study meets them), every figure's
    difference per pair (``analysis.compare.compare``), and what differs
    between the runs' hosts and tuning."""
    pairs = list(zip(view.compare_values(a), view.compare_values(b), strict=True))
    matched = _matched(view, a, b, pairs)
    if matched:
        # B's points take the names of A's they meet, so each pair is one row (and one place in a figure)
        names = {pb: pa for pa, pb, _ in matched}
        pairs = [(ca, replace(cb, values={names.get(k, k): v for k, v in cb.values.items()})) for ca, cb in pairs]
    figures = [Figure(ca, cb, compare(ca.values, cb.values, alpha=alpha, threshold=threshold,
                                      higher_is_better=ca.higher_is_better)) for ca, cb in pairs]
    changes = fact_changes(a.facts, b.facts)
    ta, tb = (a.info.meta.get("tuning") or {}), (b.info.meta.get("tuning") or {})
    tuning = (ta.get("profile"), tb.get("profile")) if ta.get("profile") != tb.get("profile") else None
    return Comparison(figures, matched, changes, grouped_changes(changes), tuning)


def _matched(view: StudyView, a: RunView, b: RunView,
             pairs: list[tuple[CompareValues, CompareValues]]) -> list[tuple[str, str, str]]:
    """Pairs of points of other names the study meets across runs that share
    no point by name, else none: a point of the same name is always the one
    compared."""
    if not pairs or set(pairs[0][0].values) & set(pairs[0][1].values) or not isinstance(view, PointMatcher):
        return []
    return view.match_points(a, b)


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


def write_compare_page(out: Path, a: RunView, b: RunView, cmp: Comparison) -> Path:
    """``out``/index.html with the headline figure overlaid, its point table and the differences."""
    out.mkdir(parents=True, exist_ok=True)
    head = cmp.figures[0]
    figs = overlay_figures(head.a, head.b, out, (a.info.run_id, b.info.run_id))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE.parent), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["num"] = numbers.num

    def created(v: RunView) -> str:
        return dt.datetime.fromtimestamp(v.info.created).isoformat(timespec="seconds")
    index = out / "index.html"
    index.write_text(env.get_template(TEMPLATE.name).render(
        a=a.info, b=b.info, created_a=created(a), created_b=created(b), metric=head.metric,
        figures=[p.name for p in figs], diffs=[asdict(d) for d in head.diffs], facts=cmp.facts_differing,
        tuning=cmp.tuning))
    return index
