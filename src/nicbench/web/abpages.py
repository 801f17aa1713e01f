"""What the dashboard's A/B pages show: the A/Bs in the archive, and one
with its judgement as stored (analysis/ab.py's, written by ``nicbench ab``),
its points drawn as both sides' medians.  Nothing is re-analysed: the page
shows what was decided when the A/B finished."""

from __future__ import annotations

from typing import Any

from ..store.ab import ab_result, ab_results
from ..store.archive import Archive
from .svg import Series, chart


def ab_list(a: Archive, limit: int = 200) -> dict[str, Any]:
    rows = ab_results(a, limit=limit)
    return {"abs": [{"row": r, "summary": r.result.get("summary")} for r in rows]}


def ab_context(a: Archive, ab_id: str) -> dict[str, Any]:
    row = ab_result(a, ab_id)
    doc = row.result or {}
    points = doc.get("points") or []
    figure = ""
    if points:
        labels = [str(p["point"]) for p in points]
        figure = chart(labels, [Series(f"A {row.profile_a}", [p.get("median_a") for p in points]),
                                Series(f"B {row.profile_b}", [p.get("median_b") for p in points])],
                       y_label=str(doc.get("metric") or ""), title="median over each side's repeats", bars=True)
    return {"row": row, "doc": doc, "points": points, "figure": figure}
