"""The archive's per-point figures, computed by each study's view: what
trends, exports and the dashboard's lists read instead of analysing samples.

Written when a run finishes (``nicbench run``), when runs are added or
synced, and on demand (``nicbench archive summarise``); the front ends call
this with the study registry's views.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from .. import __version__
from ..store.archive import Archive
from .view import Metric, RunView, StudyView, analyse, read_run

# a summary made by another version is redone by 'nicbench archive summarise --stale'
# (summary3: the analysis' decisions are stored too -- runs summarised before
# keep the runner's status on a point the analysis rejects until redone;
# summary4: pct_of_ceiling is 0 for a point that moved nothing under a known
# ceiling in every study -- the https, storage and packet studies stored none;
# summary5: each point's verdict is stored, for trends to say what held it)
SUMMARY_VERSION = f"{__version__}+summary5"


def summarise(archive: Archive, run_id: str, views: Mapping[str, StudyView],
              analysed: RunView | None = None) -> RunView:
    """Analyse run ``run_id`` of ``archive`` with its study's view and store
    what it decided: each trial's status (a point the analysis rejects is
    failed in the archive, not only on the console), the run's status that
    follows, and its per-point figures; the analysed run.

    ``analysed``: the run's analysis already made from the very records and
    samples just written (``nicbench import`` analyses before it writes): it
    is stored as it is, not read back and analysed again -- that second
    analysis was a sixth of a 200 MB import (issue 33 item 6).
    """
    if analysed is not None and analysed.info.run_id != run_id:
        raise ValueError(f"the analysis given is of run {analysed.info.run_id}, not {run_id}")
    view = analysed if analysed is not None else analyse(read_run(Path(), archive, run_id), views)
    sv = views[view.info.study]
    status = archive.record_decisions(run_id, [(t.trial_id, t.status, t.error) for t in view.trials])
    archive.write_summary(run_id, sv.point_summaries(view), sv.metrics[0].name if sv.metrics else None,
                          SUMMARY_VERSION)
    return replace(view, meta={**view.meta, "status": status}) if view.meta.get("status") != status else view


def metric_of(views: Mapping[str, StudyView], metric: str, study: str | None = None) -> list[tuple[str, Metric]]:
    """Every (study, Metric) called ``metric`` (in ``study`` only, when given)."""
    return [(k, m) for k, v in views.items() if study in (None, k) for m in v.metrics if m.name == metric]
