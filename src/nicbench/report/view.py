"""A stored run as the results side reads it, and what every study's view
provides (the :class:`StudyView` protocol).

A report can be rebuilt for any past run from the store alone: nothing here
reads a live runner.  The front ends (CLI, dashboard) look a run's view up
in the study registry and hand it to :func:`load_run`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ..analysis.trials import LinkInfo, TrialHead, float_meta
from ..core.errors import StoreError
from ..records import HostFacts, RunInfo, Sample, TrialRecord
from ..store.archive import Archive, PointSummary
from ..store.reader import RunReader as ArchiveReader
from ..store.reader import open_run_dir
from ..store.runs import DB as LEGACY_DB
from ..store.runs import RunReader
from .tables import Col

__all__ = ["ChartSpec", "Metric", "PointSummary", "StudyView", "RunView", "StoredRun", "load_run", "read_run",
           "read_stored"]


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
    """A figure runs of a study are compared on, per point, one value per ok
    repeat; ``higher_is_better`` False for loss, latency and the like."""

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
    samples: Mapping[str, list[Sample]] = field(default_factory=dict)   # by trial id, as stored (timelines)

    @property
    def failures(self) -> list[TrialHead]:
        return [t for t in self.trials if t.status != "ok"]


@dataclass(frozen=True)
class Metric:
    """A per-point figure a study puts in the archive (for trends, exports,
    the dashboard).  ``unit`` is what the value is in, e.g. ``Gbit/s``."""

    name: str
    unit: str
    label: str
    higher_is_better: bool = True


@dataclass(frozen=True)
class ChartSpec:
    """One of a study's own figures as data, for the dashboard's interactive
    charts: ``y`` over ``x`` (keys of :meth:`StudyView.rows`), one chart per
    value of the ``split`` keys (a direction: tx, rx and bidir are never one
    line), one line per value of the ``series`` keys (the connection count),
    the line-rate ceiling from ``ceiling`` and each point's spread over its
    repeats from ``low`` and ``high``.  Rows keep base units; ``scale``
    turns them into ``y_label``'s (bit/s -> Gbit/s: 1e-9).  ``title`` and
    ``label`` are ``str.format`` templates over a row."""

    name: str
    title: str
    x: str
    x_label: str
    y: str
    y_label: str
    label: str
    split: tuple[str, ...] = ()
    series: tuple[str, ...] = ()
    ceiling: str | None = None
    low: str | None = None
    high: str | None = None
    scale: float = 1.0
    x_log: bool = True           # IO, frame and block sizes are swept in powers of two
    x_size: bool = True          # x is a size in bytes (ticks and hover say 64K, not 65536)


class StudyView(Protocol):
    """The results side of one study (``studies/<kind>/view.py``)."""

    kind: str
    # the per-point figures point_summaries() gives, the first one the run's
    # headline (the runs list shows its best value over the points)
    metrics: tuple[Metric, ...]
    # the study's own figures as data (the dashboard draws them live, per run and across runs)
    charts: tuple[ChartSpec, ...]

    @property
    def timeline_panels(self) -> Callable[[Sequence[Sample], TrialHead], tuple[list[Any], list[str]]] | None:
        """The first panels of a point's timeline (``report.timeline.PanelsOf``:
        a trial's samples -> its panels and what the archive lacks for them);
        None: each client's throughput."""
        ...

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

    def compare_values(self, view: RunView) -> list[CompareValues]:
        """The figures ``nicbench compare`` compares, the headline first."""
        ...

    def progress_line(self, rec: TrialRecord, samples: list[Sample], run_meta: Mapping[str, Any]) -> str:
        """The figure of a trial that just finished, as the live progress shows it."""
        ...

    def point_summaries(self, view: RunView) -> list[PointSummary]:
        """One summary per point: its parameters and a value (full precision,
        None when unknown) for every metric in :attr:`metrics`."""
        ...


@runtime_checkable
class PointMatcher(Protocol):
    """A study view whose points can meet another run's points of another
    name (``nicbench compare`` asks when two runs share no point by name):
    the latency study's points carry their engine in the key, and an
    imported engine's points meet the lab's engines' there."""

    def match_points(self, a: RunView, b: RunView) -> list[tuple[str, str, str]]:
        """(A's point, B's point, one sentence on how they differ) per pair; a point in one pair at most."""
        ...


def read_stored(r: RunReader | ArchiveReader, run_dir: Path) -> StoredRun:
    """A run from either reader: a run directory of an older nicbench, or the archive."""
    info = r.info()
    meta = r.meta()
    by_trial: dict[str, list[Sample]] = {}
    for s in r.samples():
        by_trial.setdefault(s.trial_id, []).append(s)
    return StoredRun(run_dir, info, meta, r.trials(), by_trial, tuple(r.facts()))


def read_run(run_dir: Path, archive: Archive | None = None, run_id: str | None = None) -> StoredRun:
    """A run as the store holds it: from ``archive`` (by ``run_id``), or from
    a run directory (an older one's own database, or the archive its
    ``run.json`` names)."""
    if archive is not None and run_id is not None:
        row = archive.resolve(run_id)
        return read_stored(ArchiveReader(archive, row), Path(row.run_dir))
    if (run_dir / LEGACY_DB).exists():
        r = RunReader(run_dir)
        try:
            return read_stored(r, run_dir)
        finally:
            r.close()
    ar = open_run_dir(run_dir)
    try:
        return read_stored(ar, run_dir)
    finally:
        ar.close()


def analyse(stored: StoredRun, views: Mapping[str, StudyView]) -> RunView:
    """A stored run analysed with its study's view."""
    view = views.get(stored.info.study)
    if view is None:
        raise StoreError(f"run of an unknown study {stored.info.study!r}", where=str(stored.run_dir),
                         hint=f"this nicbench knows {', '.join(sorted(views))}: a newer nicbench wrote it?")
    a = view.analyse(stored)
    return RunView(stored.run_dir, stored.info, stored.meta, a.trials, a.points, stored.link, stored.facts,
                   stored.samples)


def load_run(run_dir: Path, views: Mapping[str, StudyView], archive: Archive | None = None,
             run_id: str | None = None) -> RunView:
    """Read a run (see :func:`read_run`) and analyse it with its study's view."""
    return analyse(read_run(run_dir, archive, run_id), views)


def params_by_point(view: RunView) -> dict[str, Mapping[str, Any]]:
    """Each point's parameters, from its first trial (every repeat has the same)."""
    out: dict[str, Mapping[str, Any]] = {}
    for t in view.trials:
        out.setdefault(t.point, dict(t.params))
    return out


def summaries(view: RunView, values: Callable[[Any], Mapping[str, float | int | None]]) -> list[PointSummary]:
    """Every point of ``view`` as a :class:`PointSummary`: ``values`` maps one
    of the study's point objects (with ``point``, ``n_ok``, ``n_failed``, and
    ``n_partial``/``survivors_only`` where the study has partial points) to its
    metrics; a point's ``verdict`` (analysis/verdict.py), where the study
    gives one, is stored as its limit."""
    params = params_by_point(view)
    out = []
    for p in view.points:
        vals = {k: None if v is None else float(v) for k, v in values(p).items()}
        verdict = getattr(p, "verdict", None)
        out.append(PointSummary(p.point, params.get(p.point, {}), int(p.n_ok), int(p.n_failed), vals,
                                int(getattr(p, "n_partial", 0)), bool(getattr(p, "survivors_only", False)),
                                getattr(verdict, "limit", None)))
    return out
