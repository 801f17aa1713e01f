"""A stored run as the results side reads it, and what every study's view
provides (the :class:`StudyView` protocol).

A report can be rebuilt for any past run from the store alone: nothing here
reads a live runner.  The front ends (CLI, dashboard) look a run's view up
in the study registry and hand it to :func:`load_run`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..analysis.trials import LinkInfo, TrialHead, float_meta
from ..core.errors import StoreError
from ..records import HostFacts, RunInfo, Sample, TrialRecord
from ..store.runs import RunReader
from .tables import Col


@dataclass(frozen=True)
class StoredRun:
    """Everything the store holds of a run, before any analysis."""

    run_dir: Path
    info: RunInfo
    meta: dict[str, Any]
    records: list[TrialRecord]
    samples: dict[str, list[Sample]]          # by trial id
    facts: tuple[HostFacts, ...]

    @property
    def link(self) -> LinkInfo | None:
        return LinkInfo.from_meta(self.info.meta)

    @property
    def trim(self) -> float:
        return float_meta(self.info.meta, "trim")

    @property
    def clients(self) -> int | None:
        c = self.info.meta.get("clients")
        return len(c) if isinstance(c, list) else None

    def samples_of(self, rec: TrialRecord) -> list[Sample]:
        return self.samples.get(rec.spec.trial_id, [])


@dataclass(frozen=True)
class Analysed:
    """A study's analysis of a run: one result per trial, one per point."""

    trials: Sequence[TrialHead]
    points: Sequence[Any]


@dataclass(frozen=True)
class CompareValues:
    """The figure runs of a study are compared on, per point, one value per ok repeat."""

    metric: str
    values: dict[str, list[float]]
    higher_is_better: bool = True


@dataclass(frozen=True)
class RunView:
    """A run read back and analysed: what a report, an export or a comparison shows."""

    run_dir: Path
    info: RunInfo
    meta: dict[str, Any]
    trials: Sequence[TrialHead]
    points: Sequence[Any]
    link: LinkInfo | None = None
    facts: tuple[HostFacts, ...] = field(default_factory=tuple)

    @property
    def failures(self) -> list[TrialHead]:
        return [t for t in self.trials if t.status != "ok"]


class StudyView(Protocol):
    """The results side of one study (``studies/<kind>/view.py``)."""

    kind: str

    @property
    def headline(self) -> Sequence[Col]:
        """The columns a reader compares first, over ``rows``: the report's headline
        table and the results table at the end of a run."""
        ...

    def analyse(self, run: StoredRun) -> Analysed:
        """Stored trials and samples -> per-trial results and per-point statistics."""
        ...

    def rows(self, view: RunView) -> list[dict[str, Any]]:
        """One row per point, full precision in base units: the report's table and the exports."""
        ...

    def render(self, view: RunView, out: Path) -> Path:
        """The report (figures, tables, exports) into ``out``; returns its index.html."""
        ...

    def compare_values(self, view: RunView) -> CompareValues: ...

    def progress_line(self, rec: TrialRecord, samples: list[Sample], run_meta: Mapping[str, Any]) -> str:
        """The figure of a trial that just finished, as the live progress shows it."""
        ...


def read_run(run_dir: Path) -> StoredRun:
    """A run as the store holds it."""
    r = RunReader(run_dir)
    try:
        info = r.info()
        meta = r.meta()
        by_trial: dict[str, list[Sample]] = {}
        for s in r.samples():
            by_trial.setdefault(s.trial_id, []).append(s)
        return StoredRun(run_dir, info, meta, r.trials(), by_trial, tuple(r.facts()))
    finally:
        r.close()


def load_run(run_dir: Path, views: Mapping[str, StudyView]) -> RunView:
    """Read a run and analyse it with its study's view."""
    stored = read_run(run_dir)
    view = views.get(stored.info.study)
    if view is None:
        raise StoreError(f"run of an unknown study {stored.info.study!r}", where=str(run_dir),
                         hint=f"this nicbench knows {', '.join(sorted(views))}: a newer nicbench wrote it?")
    a = view.analyse(stored)
    return RunView(run_dir, stored.info, stored.meta, a.trials, a.points, stored.link, stored.facts)
