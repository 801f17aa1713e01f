"""What the session asks of a study's runner, and what it hands it.

The session builds or connects the hosts, collects facts, tunes, and then
drives a :class:`StudyRunner` it got from the CLI (which asked the study
registry): ``preflight`` once, ``start`` once, ``trial`` per point, ``stop``
always.  What the session decided on the way (where raw outputs go, CPU
pinning, the NIC's IRQs, whose CPUs are sampled) reaches the study once, in
a frozen :class:`~nicbench.run.kit.PointEnv`; nothing is written back into
the study.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..hosts.base import Hosts
from ..plan.model import Plan
from ..records import RawOutput, Sample, TrialRecord, TrialSpec
from .kit import PointEnv


@dataclass(frozen=True)
class Preflight:
    """What a study's preflight found: nothing blocking (else it raised a
    PreflightError listing every problem), what to warn about, which tools'
    versions the host facts record, and what the run's info records of it."""

    tools: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TrialOutcome:
    """One trial as it ran: its record, its samples, its raw outputs."""

    record: TrialRecord
    samples: list[Sample]
    raws: list[RawOutput]

    def __iter__(self) -> Iterator[Any]:
        """``record, samples, raws = outcome``."""
        return iter((self.record, self.samples, self.raws))


class StudyRunner(Protocol):
    kind: str

    def preflight(self) -> Preflight:
        """Check every host at once; raise PreflightError listing all problems."""
        ...

    def start(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        """Start what lives for the whole study (nginx, the LUN targets)."""
        ...

    def trial(self, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
        """Run one point; a point-level failure is recorded, never raised."""
        ...

    def stop(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        """Stop what ``start`` started (also after a failed start); its raw outputs."""
        ...


RunnerFactory = Callable[[Plan, Hosts], StudyRunner]
