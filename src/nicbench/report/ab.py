"""An A/B read back from the archive: its two runs judged against each
other (analysis/ab.py) on their study's headline figure, with each side's
verdict per point, as the document the archive keeps and as a page in the
reports' style (both sides' figures overlaid, the point table, what each
side's profile set)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jinja2

from ..analysis.ab import METHOD, ABResult, ab
from ..store.ab import ABRow
from . import numbers
from .compare import overlay_figures
from .view import RunView, StudyView

TEMPLATE = Path(__file__).with_name("ab.html.j2")


def _limits(view: RunView) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for p in view.points:
        v = getattr(p, "verdict", None)
        out[p.point] = v.limit if v is not None else None
    return out


def _evidence(view: RunView) -> dict[str, str]:
    """Each point's first evidence line (what its limit rests on)."""
    out = {}
    for p in view.points:
        v = getattr(p, "verdict", None)
        if v is not None and v.evidence:
            out[p.point] = v.evidence[0]
    return out


def judge(a: RunView, b: RunView, study: StudyView) -> ABResult:
    """B against A on the study's headline figure (its first compare values)."""
    ca, cb = study.compare_values(a)[0], study.compare_values(b)[0]
    return ab(ca.metric, ca.values, cb.values, higher_is_better=ca.higher_is_better, limits_a=_limits(a),
              limits_b=_limits(b))


def _settings(view: RunView) -> list[dict[str, Any]]:
    """What the side's profile set: the rows its apply put in force (audit-only: none)."""
    t = view.info.meta.get("tuning") or {}
    rows = t.get("rows") if isinstance(t, dict) else None
    return [r for r in rows or [] if isinstance(r, dict) and r.get("status") in ("applied", "differs", "ok")
            and r.get("scope") != "check" and t.get("applied")]


def document(row: ABRow, result: ABResult, a: RunView, b: RunView) -> dict[str, Any]:
    """What the archive keeps of the judgement (store/ab.py's ``result``)."""
    ea, eb = _evidence(a), _evidence(b)
    doc = result.as_dict()
    for p in doc["points"]:
        p["evidence_a"], p["evidence_b"] = ea.get(p["point"]), eb.get(p["point"])
    return {**doc, "ab_id": row.ab_id, "runs": {"A": row.run_a, "B": row.run_b},
            "profiles": {"A": row.profile_a, "B": row.profile_b}, "rounds": row.rounds,
            "order": "ABBA: per point, A then B in even rounds, B then A in odd ones",
            "settings": {"A": _settings(a), "B": _settings(b)}}


def write_ab_page(out: Path, row: ABRow, doc: Mapping[str, Any], a: RunView, b: RunView,
                  study: StudyView, reports: Mapping[str, str | None] | None = None) -> Path:
    """``out``/index.html: the A/B as a page, both sides' figures overlaid."""
    out.mkdir(parents=True, exist_ok=True)
    figs = overlay_figures(study.compare_values(a)[0], study.compare_values(b)[0], out, ("A", "B"))
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATE.parent), autoescape=True,
                             undefined=jinja2.StrictUndefined)
    env.filters["num"] = numbers.num
    env.filters["pct"] = lambda v: "—" if v is None else f"{v * 100:+.1f} %"
    index = out / "index.html"
    index.write_text(env.get_template(TEMPLATE.name).render(
        row=row, doc=doc, method=METHOD, study=a.info.study,
        created=dt.datetime.fromtimestamp(row.created).isoformat(timespec="seconds"),
        figures=[p.name for p in figs], reports=dict(reports or {})))
    return index
