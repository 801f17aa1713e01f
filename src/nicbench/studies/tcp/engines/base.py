"""What every engine of the TCP study is handed, and what the runner asks of it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ....hosts.transport import Transport
from ....plan.studies.tcp import TcpStudy
from ....records import TrialSpec
from ....run.kit import PointEnv
from ....run.study import Preflight, TrialOutcome


@dataclass(frozen=True)
class TcpHosts:
    """The study and where it runs: the study server runs the engine clients,
    each client host its engine servers (the seeds' layout)."""

    study: TcpStudy
    server: str
    clients: list[str]
    transports: dict[str, Transport]
    addresses: dict[str, str]             # host -> test address


class TcpEngine(Protocol):
    """One engine of the TCP study: checked once, then one point at a time."""

    def preflight(self) -> Preflight:
        """Check every host at once; raise PreflightError listing all problems."""
        ...

    def trial(self, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
        """Run one point; a point-level failure is recorded, never raised."""
        ...
