"""The records both sides of nicbench agree on: the narrow waist of the hourglass.

The execution side (plan, hosts, lab, tools, run) produces these; the results
side (store, analysis, report) only reads them.  All are frozen.  Every numeric
value carries a unit from the closed set :data:`UNITS`; every time is absolute
(seconds since the Unix epoch, wall clock of the host that measured it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

Unit = Literal["bytes", "bit/s", "s", "count", "percent", "packets"]
UNITS: frozenset[str] = frozenset(Unit.__args__)  # type: ignore[attr-defined]

# partial: some of the point's hosts or processes were lost (killed, unreachable),
# the survivors' data is kept and said to be survivors-only, never as a whole point
TrialStatus = Literal["ok", "partial", "failed", "interrupted"]
TRIAL_STATUSES: tuple[str, ...] = get_args(TrialStatus)
# the directions of a point's traffic, from the study server's side (bidir: both at once)
DIRECTIONS: Mapping[str, tuple[str, ...]] = {"tx": ("tx",), "rx": ("rx",), "bidir": ("tx", "rx")}

# /proc/stat's per-CPU states, as the CPU sampler names its samples (cpu.<state>),
# and the ones that count as busy: work done here (steal is another guest's)
CPU_STATES = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
CPU_BUSY = ("user", "nice", "system", "irq", "softirq")

Tags = tuple[tuple[str, str], ...]
# Tag sets by identity.  Samples share a few tag set objects, but a tuple
# keeps no hash: looking one up by value hashes its every pair again (about
# half a microsecond for six tags; a long import makes millions of such
# lookups).  A pass over many samples that caches what a tag set says keys
# that cache by ``id(tags)`` and stores ``(tags, what it says)`` -- holding
# the tags, so no other object can take their identity while the cache
# lives; equal tag sets that are distinct objects take an entry each, with
# the same value.  Grouping samples *by* tag set (a sum per set) keys by value.


def make_tags(**tags: object) -> Tags:
    """Tags as a sorted tuple of (name, value) strings: hashable and stable."""
    return tuple(sorted((k, str(v)) for k, v in tags.items() if v is not None))


@dataclass(frozen=True, slots=True, init=False)
class Sample:
    """One measured quantity over one time span.

    ``metric`` names what was counted (``tcp.bytes``: payload bytes that crossed
    a socket in the span); ``tags`` say where: host, proc (one tool process),
    direction (tx/rx, from the study server's side), side (sender/receiver).
    """

    trial_id: str
    metric: str
    value: float
    unit: Unit
    t_start: float
    t_end: float
    tags: Tags = ()

    def __init__(self, trial_id: str, metric: str, value: float, unit: Unit, t_start: float, t_end: float,
                 tags: Tags = ()) -> None:
        # Written out: the generated __init__ of a frozen dataclass sets each
        # field through object.__setattr__ and then calls __post_init__,
        # twice the time of setting the slots directly -- and a long import
        # makes a million samples (issue 33 item 6).  The same checks, the
        # same errors.
        if unit not in UNITS:
            raise ValueError(f"unit {unit!r} not in {sorted(UNITS)}")
        if t_end < t_start:
            raise ValueError(f"sample ends before it starts: {t_start} > {t_end}")
        _S_TRIAL_ID(self, trial_id)
        _S_METRIC(self, metric)
        _S_VALUE(self, value)
        _S_UNIT(self, unit)
        _S_T_START(self, t_start)
        _S_T_END(self, t_end)
        _S_TAGS(self, tags)

    def tag(self, name: str, default: str | None = None) -> str | None:
        for k, v in self.tags:
            if k == name:
                return v
        return default


# the slots' own setters (a frozen class refuses setattr; its __init__ uses these)
_S_TRIAL_ID, _S_METRIC, _S_VALUE, _S_UNIT, _S_T_START, _S_T_END, _S_TAGS = (
    Sample.__dict__[f].__set__ for f in ("trial_id", "metric", "value", "unit", "t_start", "t_end", "tags"))


@dataclass(frozen=True, slots=True)
class RawOutput:
    """A tool's output as it was written, kept before any parsing.

    ``path`` is relative to the run directory.
    """

    trial_id: str
    host: str
    role: str
    tool: str
    stream: Literal["stdout", "stderr"]
    path: str


@dataclass(frozen=True, slots=True)
class TrialSpec:
    """One point of the plan's matrix, one repeat of it."""

    trial_id: str
    index: int
    study: str
    point: str                       # stable key shared by repeats, e.g. "tx/c12/io64K"
    repeat: int
    params: Mapping[str, Any] = field(default_factory=dict)

    def params_json(self) -> str:
        return json.dumps(dict(self.params), sort_keys=True)


@dataclass(frozen=True, slots=True)
class TrialRecord:
    """What happened when a trial ran (its samples are stored beside it)."""

    spec: TrialSpec
    status: TrialStatus
    started: float
    ended: float
    error: str | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RunInfo:
    """A run as a whole."""

    run_id: str
    name: str
    study: str
    created: float
    plan_text: str
    source: str                      # "plan" | "import"
    nicbench_version: str
    meta: Mapping[str, Any] = field(default_factory=dict)


FactValue = str | int | float | bool | list | dict | None


@dataclass(frozen=True, slots=True)
class Fact:
    """One thing known about a host, or known to be unknown.

    ``key`` is dotted (``kernel``, ``sysctl.net.ipv4.tcp_rmem``,
    ``if.eth0.offload.tcp-segmentation-offload``); ``value`` is None exactly
    when the fact is unknown, and ``unknown`` then says why.  ``source`` names
    what it was read from (a file, a command).
    """

    key: str
    value: FactValue
    unknown: str | None = None
    source: str = ""

    def __post_init__(self) -> None:
        if (self.value is None) == (self.unknown is None):
            raise ValueError(f"fact {self.key}: give a value or a reason it is unknown, not both or neither")

    def display(self) -> str:
        if self.value is None:
            return f"unknown: {self.unknown}"
        if isinstance(self.value, list):
            return ", ".join(map(str, self.value))
        if isinstance(self.value, dict):
            return ", ".join(f"{k}={v}" for k, v in self.value.items())
        return str(self.value)


@dataclass(frozen=True, slots=True)
class HostFacts:
    """Every fact of one host as it was when the run started."""

    host: str
    role: str
    collected: float
    facts: tuple[Fact, ...]

    def get(self, key: str) -> Fact | None:
        for f in self.facts:
            if f.key == key:
                return f
        return None

    def value(self, key: str) -> FactValue:
        f = self.get(key)
        return None if f is None else f.value
