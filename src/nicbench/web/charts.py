"""The study's own figures as data for the dashboard's interactive charts
(``static/charts.js`` draws them with uPlot): pure, from the rows a study's
view gives (:meth:`StudyView.rows`) and its :class:`ChartSpec` list.

One chart per value of the spec's ``split`` keys (a direction: tx, rx and
bidir points are never joined as one line), one line per run and value of
its ``series`` keys, over the sorted union of the x values; a line has
``None`` where it has no point (uPlot leaves a gap).  Each value keeps the
point key it came from (a click opens that point's timeline) and its spread
over repeats.  Values are scaled to the spec's unit, nothing is rounded.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..report.view import ChartSpec

Rows = Sequence[Mapping[str, Any]]


def _num(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def _scaled(v: Any, scale: float) -> float | None:
    f = _num(v)
    return None if f is None else f * scale


def _fmt(template: str, row: Mapping[str, Any]) -> str:
    try:
        return template.format(**row)
    except (KeyError, IndexError, ValueError):
        return template


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "all"


def chart_data(specs: Sequence[ChartSpec], runs: Sequence[tuple[str, Rows]]) -> list[dict[str, Any]]:
    """Every chart of ``specs`` over ``runs`` ((label, rows) each; one run's
    label may be empty), in the order of the specs, then of the split values
    as the rows first show them.  A chart no row has a value for is left out."""
    out: list[dict[str, Any]] = []
    for spec in specs:
        splits: dict[tuple[Any, ...], list[tuple[int, Mapping[str, Any]]]] = {}
        for i, (_, rows) in enumerate(runs):
            for r in rows:
                x = _num(r.get(spec.x))
                if x is None or (spec.x_log and x <= 0) or _num(r.get(spec.y)) is None:
                    continue
                splits.setdefault(tuple(r.get(k) for k in spec.split), []).append((i, r))
        for key, members in splits.items():
            xs = sorted({float(r[spec.x]) for _, r in members})
            at = {x: j for j, x in enumerate(xs)}
            lines: dict[tuple[Any, ...], dict[str, Any]] = {}
            ceiling: list[float | None] = [None] * len(xs)
            for i, r in members:
                label = _fmt(spec.label, r)
                run = runs[i][0]
                line = lines.setdefault((i, *(r.get(k) for k in spec.series)), {
                    "label": f"{run}: {label}" if run else label, "run": run,
                    "y": [None] * len(xs), "low": [None] * len(xs), "high": [None] * len(xs),
                    "points": [None] * len(xs)})
                j = at[float(r[spec.x])]
                line["y"][j] = _scaled(r.get(spec.y), spec.scale)
                line["low"][j] = _scaled(r.get(spec.low), spec.scale) if spec.low else None
                line["high"][j] = _scaled(r.get(spec.high), spec.scale) if spec.high else None
                line["points"][j] = str(r.get("point"))
                c = _scaled(r.get(spec.ceiling), spec.scale) if spec.ceiling else None
                had = ceiling[j]
                if c is not None:
                    ceiling[j] = c if had is None else max(c, had)
            title = _fmt(spec.title, members[0][1])
            ordered = [lines[k] for k in sorted(lines, key=lambda k: tuple((v is None, str(type(v)), v) for v in k))]
            out.append({"id": f"{spec.name}-{_slug('-'.join(str(v) for v in key))}", "title": title,
                        "x_label": spec.x_label, "y_label": spec.y_label, "x_log": spec.x_log, "x_size": spec.x_size,
                        "x": xs, "series": ordered,
                        "ceiling": ceiling if any(c is not None for c in ceiling) else None})
    return out
