"""The TCP study as the session drives it: its engine, one point at a time.

Each engine is a unit of its own under :mod:`.engines` (iperf3, iperf 2,
nbperf); the point's sequence around it is the kit's
(:class:`nicbench.run.point.Point`).
"""

from __future__ import annotations

from pathlib import Path

from ...hosts.base import Hosts
from ...plan.model import Plan
from ...plan.studies.tcp import TcpStudy
from ...records import RawOutput, TrialSpec
from ...run.kit import PointEnv
from ...run.study import Preflight, TrialOutcome
from .engines import ENGINES, TcpEngine, TcpHosts


class TcpRunner:
    """The TCP study as the session drives it (see ``run.study.StudyRunner``)."""

    kind = "tcp"

    def __init__(self, plan: Plan, hosts: Hosts):
        assert isinstance(plan.study, TcpStudy)
        self.study: TcpStudy = plan.study
        self.engine: TcpEngine = ENGINES[self.study.engine](TcpHosts(
            self.study, plan.server, list(plan.clients), hosts.transports(),
            {h.name: h.ip for h in hosts.spec.hosts}))

    def preflight(self) -> Preflight:
        return self.engine.preflight()

    def start(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return []

    def trial(self, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
        return self.engine.trial(env, spec, raw_dir)

    def stop(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return []
