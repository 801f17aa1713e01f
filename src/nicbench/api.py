"""nicbench as a library: run a plan, read a run back, render its report.

A front end like the CLI (it joins the execution and the results sides
through the study registry), for scripts, benches and tests.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .plan.model import Plan
from .registry import VIEWS, study
from .report.catalogue import summarise as _summarise
from .report.view import RunView
from .report.view import load_run as _load_run
from .run.session import RunOutcome
from .run.session import execute as _execute
from .store.archive import Archive


def execute(plan: Plan, plan_text: str, **kw: Any) -> RunOutcome:
    """Run ``plan`` with its study's runner (keywords as for ``run.session.execute``;
    ``store``: the archive, a path or URL; default the per-user one)."""
    return _execute(plan, plan_text, runner=study(plan.study.kind).runner, **kw)


def load_run(run_dir: Path, archive: Archive | None = None, run_id: str | None = None) -> RunView:
    """A stored run, analysed by its study's view: from its run directory (an
    older one's own database, or the archive its run.json names), or by id
    from ``archive``."""
    return _load_run(run_dir, VIEWS, archive, run_id)


def summarise(archive: Archive, run_id: str) -> RunView:
    """Store the run's per-point figures in the archive (what trends read)."""
    return _summarise(archive, run_id, VIEWS)


def render(view: RunView, out: Path | None = None) -> Path:
    """The run's report into ``out`` (default ``<run>/report``); its index.html."""
    out = out or view.run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    return VIEWS[view.info.study].render(view, out)


def rows(view: RunView) -> list[dict[str, Any]]:
    """The run's table: one row per point."""
    return VIEWS[view.info.study].rows(view)
