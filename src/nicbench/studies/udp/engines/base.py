"""What the UDP study's runner asks of an engine."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ....hosts.transport import Transport
from ....plan.model import Plan
from ....records import TrialSpec
from ....run.kit import PointEnv
from ..measure import Measured, UdpContext


class UdpEngine(Protocol):
    """One engine of the UDP study: its preflight, and one measurement at a
    rate per client (the runner's maximum-rate search calls it per step)."""

    @property
    def tools(self) -> tuple[str, ...]:
        """The programs whose versions the host facts record."""
        ...

    def preflight(self, plan: Plan, transports: dict[str, Transport], addresses: dict[str, str],
                  mtu: int) -> tuple[UdpContext, list[str]]:
        """Every host at once; raise PreflightError listing all problems."""
        ...

    def measure(self, ctx: UdpContext, env: PointEnv, spec: TrialSpec, raw_dir: Path,
                rate: float | None) -> Measured:
        """One measurement at ``rate`` bit/s per client (None: unpaced)."""
        ...
