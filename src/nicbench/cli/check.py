"""``nicbench check PLAN``: validate a plan and say what it would run."""

from __future__ import annotations

from pathlib import Path

import click

from ..plan.load import load_plan
from ..plan.matrix import trials
from .options import emit, json_option


@click.command("check")
@click.argument("plan", type=click.Path(path_type=Path))
@json_option
@click.pass_context
def check(ctx: click.Context, plan: Path) -> None:
    """Validate PLAN and show the trials it would run, without running anything."""
    p, _ = load_plan(plan)
    ts = trials(p)
    secs = len(ts) * p.study.measured_seconds()
    emit(ctx, {"plan": p.name, "trials": len(ts), "measured_seconds": secs,
               "points": sorted({t.point for t in ts})},
         f"{p.name}: valid; {len(ts)} trials, at least {secs:g} s of traffic")
