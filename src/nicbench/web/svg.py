"""Small charts drawn on the server as SVG text: the live run's figure
filling in, compare's overlaid series, a trend line.

Drawn here rather than with matplotlib because they are redrawn on every
update of a live page (matplotlib takes seconds to import and ~100 ms a
figure) and because every label is text from the archive, escaped here once.
No ``style`` attributes: the pages' Content-Security-Policy allows no inline
styles; presentation attributes (``fill``, ``stroke``) are not styles.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

PALETTE = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c")


@dataclass(frozen=True)
class Series:
    label: str
    values: Sequence[float | None]       # one per x position; None: no value there
    flags: Sequence[bool] = ()            # points drawn as a red ring (e.g. a regression)
    partial: Sequence[bool] = ()          # points drawn as a hollow square: survivors of a partial point only


def _nice_top(v: float) -> float:
    if v <= 0:
        return 1.0
    exp = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 2.5, 5, 10):
        if v <= m * exp:
            return m * exp
    return 10 * exp


def _fmt(v: float) -> str:
    return f"{v:.4g}"


def chart(x_labels: Sequence[str], series: Sequence[Series], *, y_label: str, title: str = "",
          bars: bool = False, width: int = 860, height: int = 320, band: tuple[float, float] | None = None) -> str:
    """A categorical chart: one x position per label, one line (or bar group)
    per series, y from 0 (or the lowest value, if negative).  ``band``: a
    shaded range (the spread a trend is checked against)."""
    left, right, top, bottom = 64, 16, 28, 128
    w, h = width - left - right, height - top - bottom
    vals = [v for s in series for v in s.values if v is not None and math.isfinite(v)]
    if band:
        vals += list(band)
    lo = min(0.0, min(vals)) if vals else 0.0
    hi = _nice_top(max(vals)) if vals else 1.0
    if hi <= lo:
        hi = lo + 1
    n = max(1, len(x_labels))

    def x(i: int) -> float:
        return left + (i + 0.5) * w / n

    def y(v: float) -> float:
        return top + h - (v - lo) / (hi - lo) * h

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width} {height}" '
           f'width="{width}" height="{height}" role="img" aria-label="{escape(title or y_label)}">']
    if title:
        out.append(f'<text x="{left}" y="16" font-size="13" font-weight="bold">{escape(title)}</text>')
    if band:
        y0, y1 = y(band[1]), y(band[0])
        out.append(f'<rect x="{left}" y="{y0:.1f}" width="{w}" height="{max(1.0, y1 - y0):.1f}" fill="#55a868" '
                   'fill-opacity="0.15"><title>spread of the earlier runs</title></rect>')
    for k in range(5):
        v = lo + (hi - lo) * k / 4
        out.append(f'<line x1="{left}" x2="{left + w}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y(v) + 4:.1f}" font-size="11" text-anchor="end">{_fmt(v)}</text>')
    out.append(f'<text x="14" y="{top + h / 2:.1f}" font-size="11" transform="rotate(-90 14 {top + h / 2:.1f})" '
               f'text-anchor="middle">{escape(y_label)}</text>')
    step = max(1, math.ceil(n / 40))            # at most ~40 x labels
    for i, lab in enumerate(x_labels):
        if i % step:
            continue
        tx, ty = x(i), top + h + 12
        short = lab if len(lab) <= 24 else lab[:23] + "…"
        out.append(f'<text x="{tx:.1f}" y="{ty}" font-size="10" text-anchor="end" '
                   f'transform="rotate(-45 {tx:.1f} {ty})">{escape(short)}</text>')
    ns = max(1, len(series))
    for si, s in enumerate(series):
        color = PALETTE[si % len(PALETTE)]
        pts = [(i, v) for i, v in enumerate(s.values) if v is not None and math.isfinite(v)]
        if bars:
            bw = w / n * 0.8 / ns
            for i, v in pts:
                bx = x(i) - w / n * 0.4 + si * bw
                out.append(f'<rect x="{bx:.1f}" y="{y(max(v, 0)):.1f}" width="{bw:.1f}" '
                           f'height="{abs(y(v) - y(0)):.1f}" fill="{color}"><title>{escape(s.label)} '
                           f'{escape(x_labels[i])}: {_fmt(v)}</title></rect>')
        else:
            if len(pts) > 1:
                path = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in pts)
                out.append(f'<polyline points="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
            dense = len(pts) > 400        # thousands of marks say nothing the line does not: flagged ones only
            for i, v in pts:
                flagged = i < len(s.flags) and s.flags[i]
                if i < len(s.partial) and s.partial[i]:
                    out.append(f'<rect class="partial" x="{x(i) - 4.5:.1f}" y="{y(v) - 4.5:.1f}" width="9" '
                               f'height="9" fill="#fff" stroke="{color}" stroke-width="2"><title>{escape(s.label)} '
                               f'{escape(x_labels[i])}: {_fmt(v)} (partial: survivors only)</title></rect>')
                    continue
                if dense and not flagged:
                    continue
                out.append(f'<circle cx="{x(i):.1f}" cy="{y(v):.1f}" r="{6 if flagged else 3.5}" '
                           f'fill="{"none" if flagged else color}" stroke="{"#c00" if flagged else color}" '
                           f'stroke-width="{3 if flagged else 1}"><title>{escape(s.label)} '
                           f'{escape(x_labels[i])}: {_fmt(v)}</title></circle>')
    lx = left
    for si, s in enumerate(series):
        color = PALETTE[si % len(PALETTE)]
        label = s.label if len(s.label) <= 40 else s.label[:39] + "…"
        out.append(f'<rect x="{lx}" y="{height - 14}" width="10" height="10" fill="{color}"/>'
                   f'<text x="{lx + 14}" y="{height - 5}" font-size="11">{escape(label)}</text>')
        lx += 24 + 7 * len(label)
    out.append("</svg>")
    return "".join(out)
