"""``nicbench explain RUN [--point KEY]``: what held each point below line
rate, with the measurements that show it (analysis/verdict.py), recomputed
from the archive for any run."""

from __future__ import annotations

from typing import Any

import click

from ..core.errors import InputError
from ..core.validation import closest
from ..registry import VIEWS
from .options import emit, json_option, store_option
from .report import load_ref


@click.command()
@click.argument("run_ref", metavar="RUN", default="latest")
@click.option("--point", "point", default=None, metavar="KEY", help="One point (e.g. tx/c12/io128K).")
@store_option
@json_option
@click.pass_context
def explain(ctx: click.Context, run_ref: str, point: str | None, store: str | None) -> None:
    """Why each point of RUN (id, id prefix, run directory or 'latest') is where
    it is against line rate: its limit (wire, engine, cpu, loss, window, none
    found, mixed) and the evidence, from the run's stored samples.  Every
    study: TCP, UDP, HTTPS, storage and packets say what held the rate; the
    latency study what the round trips waited on (a loaded point's load
    filling the link is its wire)."""
    view = load_ref(run_ref, store)
    rows = VIEWS[view.info.study].rows(view)
    if point is not None:
        keys = [str(r.get("point")) for r in rows]
        if point not in keys:
            near = closest(point, keys)
            raise InputError(f"run {view.info.run_id} has no point {point!r}", where="--point",
                             hint=f"did you mean {near}?" if near else
                             f"its points: {', '.join(keys[:8])}" + (" ..." if len(keys) > 8 else ""))
        rows = [r for r in rows if r.get("point") == point]
    out: list[dict[str, Any]] = [{"point": r.get("point"), "verdict": r.get("verdict")} for r in rows]
    what = "what the round trips waited on" if view.info.study == "latency" else "what held each point"
    lines = [f"run {view.info.run_id} ({view.info.study}): {what}"]
    for r in rows:
        v = r.get("verdict")
        if not v:
            lines.append(f"{r.get('point')}: no verdict (no ok repeat to judge)")
            continue
        head = v["limit"] + (f" (leading {v['leading']}, then {v['second']})" if v["limit"] == "mixed" else "")
        head += " -- repeats disagree" if v["confidence"] == "split" and v["limit"] != "mixed" else ""
        lines.append(f"{r.get('point')}: {head}")
        lines += [f"    because: {e}" for e in v["evidence"]]
        lines += [f"    checked: {c}" for c in v["checked"]]
    emit(ctx, {"run_id": view.info.run_id, "study": view.info.study, "points": out}, "\n".join(lines))
