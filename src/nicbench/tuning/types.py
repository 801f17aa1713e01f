"""What tuning works with: a host to tune, one line of an audit, and what an
audit found (with the pinning it decided for the tools)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..hosts.transport import Transport
from ..records import HostFacts

# ok | differs | unsupported | unknown | host-wide | applied | failed | restored | left | drifted | note | warn
Status = str


@dataclass(frozen=True)
class Target:
    """A host to tune: where its settings live and what is known about it."""

    host: str
    role: str
    transport: Transport
    restore_id: str                     # file name of its restore file
    ifname: str | None
    facts: HostFacts | None = None
    lab: bool = False                   # an embedded-lab namespace: host-wide settings are the machine's


@dataclass(frozen=True)
class Row:
    """One line of an audit: a setting on a host, or a check that explains results."""

    host: str
    setting: str
    key: str
    current: str | None
    wanted: str | None
    status: Status
    note: str = ""
    scope: str = "host"                 # host | machine | process | check
    optional: bool = False              # its setting may be missing or refused without stopping a run

    @property
    def not_in_force(self) -> bool:
        """A setting of the profile that is not in force on its host after an
        apply: failed, missing on the host, or unknown (checks are not settings;
        a host-wide setting the lab leaves to the machine is in force by design)."""
        return self.scope != "check" and self.status in ("failed", "unsupported", "unknown")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class TuningPlan:
    """What an audit found, host by host, and what apply would change."""

    rows: list[Row] = field(default_factory=list)
    pin: dict[str, list[str]] = field(default_factory=dict)     # host -> argv prefix for the tools
    pin_cpus: dict[str, str] = field(default_factory=dict)      # host -> CPU list the tools get
