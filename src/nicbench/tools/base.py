"""What every traffic-tool module shares: version/feature facts and flow intervals."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Flow = Literal["fwd", "rev"]      # fwd: engine client -> engine server
Side = Literal["sender", "receiver"]


@dataclass(frozen=True)
class ToolInfo:
    """A tool as found on one host: version and the optional features it has."""

    name: str
    version: tuple[int, ...]
    version_text: str
    features: frozenset[str] = field(default_factory=frozenset)

    @property
    def version_str(self) -> str:
        return ".".join(map(str, self.version))

    def has(self, feature: str) -> bool:
        return feature in self.features


@dataclass(frozen=True)
class FlowInterval:
    """Payload bytes one tool process saw for one flow, on one side, in one interval.

    ``start``/``end`` are seconds from the process's test start; ``abs_start`` is
    set when the tool itself reports wall-clock times (iperf2 CSV).
    """

    start: float
    end: float
    flow: Flow
    side: Side
    bytes: int
    streams: int
    omitted: bool = False
    retransmits: int | None = None
    abs_start: float | None = None
    by_peer: bool = False     # measured by the other end (iperf3 --get-server-output), on its own clock
    packets: int | None = None        # UDP datagrams in the interval
    lost: int | None = None           # UDP datagrams the receiver counted as lost
    jitter_s: float | None = None     # UDP jitter the receiver reported, seconds


def parse_version(text: str) -> tuple[int, ...]:
    m = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text)
    if not m:
        return ()
    return tuple(int(g) for g in m.groups() if g is not None)


@dataclass(frozen=True)
class MinVersion:
    """The oldest version of a tool nicbench runs, and why (checked at preflight)."""

    tool: str
    version: tuple[int, ...]
    reason: str

    def problem(self, found: tuple[int, ...], host: str) -> str | None:
        """A preflight problem naming the host, or None when ``found`` is new enough."""
        if found >= self.version:
            return None
        have = ".".join(map(str, found)) or "an unknown version"
        want = ".".join(map(str, self.version))
        return f"{host}: {self.tool} {have} is older than {want}, the oldest nicbench runs: {self.reason}"

