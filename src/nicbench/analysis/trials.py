"""What every study's analysis shares: the link a run used, the head of an
analysed trial, and grouping trials into points.

Pure: takes records, returns frozen results.  A point's figure is the
median over its repeats.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..core import linerate
from ..records import DIRECTIONS, TrialRecord

ABOVE_CEILING_TOLERANCE = 0.005   # 0.5 %: rounding of windows and counters, no more


def fraction_of(value: float | None, ceiling: float | None) -> float | None:
    """A point's figure over its line-rate ceiling (both in one unit), every
    study's rule: 0.0 for a point that moved nothing under a known ceiling --
    a measurement, shown as 0 % --, None only when the figure is unknown (no
    ok repeat) or the ceiling is (no link speed, or a ceiling of 0)."""
    if value is None or not ceiling:
        return None
    return value / ceiling


def pct_of(value: float | None, ceiling: float | None) -> float | None:
    """:func:`fraction_of` in percent: every study's per-point ``pct_of_ceiling``."""
    f = fraction_of(value, ceiling)
    return None if f is None else f * 100

EXPECTED_DIRECTIONS = DIRECTIONS

T = TypeVar("T", bound="TrialHead")


@dataclass(frozen=True)
class LinkInfo:
    """What the results side knows of the link a run used (from the run's meta)."""

    mtu: int
    speed_bps: float | None
    ip: int = 4
    timestamps: bool | None = None
    counters_count_frames: bool = False
    client_speed_bps: float | None = None

    @classmethod
    def from_meta(cls, meta: Mapping[str, object]) -> LinkInfo | None:
        link = meta.get("link")
        if not isinstance(link, dict):
            return None
        ts = link.get("tcp_timestamps") or {}
        vals = [v for v in ts.values() if v is not None] if isinstance(ts, dict) else []
        return cls(int(link.get("mtu") or 1500), link.get("speed_bps"), int(link.get("ip") or 4),
                   all(v != 0 for v in vals) if vals else None, bool(link.get("counters_count_frames")),
                   link.get("client_speed_bps"))

    def speed_for(self, clients: int | None) -> float | None:
        """The line rate one direction of a point can use: the server's link, or
        the clients' links together if those are slower."""
        caps = [c for c in (self.speed_bps,
                            self.client_speed_bps * clients if self.client_speed_bps and clients else None) if c]
        return min(caps) if caps else None

    def ceiling(self, clients: int | None = None) -> linerate.Ceiling | None:
        """Per direction; TCP timestamps count as on when unknown (Linux default)."""
        speed = self.speed_for(clients)
        if not speed:
            return None
        return linerate.tcp(speed, self.mtu, ip=self.ip,
                            timestamps=True if self.timestamps is None else self.timestamps)


@dataclass(frozen=True)
class TrialHead:
    """What every study's analysed trial starts with: which trial and point,
    which repeat, its parameters, and how it went."""

    trial_id: str
    point: str
    repeat: int
    params: Mapping[str, object]
    status: str
    error: str | None
    # tool -> {"allowed", "seen"} CPUs, as the CPU sampler saw them (every study)
    tool_cpus: Mapping[str, object] = field(default_factory=dict, kw_only=True)
    # why the analysis rejected a trial whose tools reported success (empty: it did not)
    problems: tuple[str, ...] = field(default=(), kw_only=True)
    # the profile's settings that moved during the point (on_tuning_drift = "flag"), one line each
    tuning_drift: tuple[str, ...] = field(default=(), kw_only=True)


def head(rec: TrialRecord) -> dict[str, Any]:
    """A TrialHead's fields from the stored record (status and error are the
    analysis' to set)."""
    return dict(trial_id=rec.spec.trial_id, point=rec.spec.point, repeat=rec.spec.repeat,
                params=dict(rec.spec.params), tool_cpus=dict(rec.meta.get("tool_cpus") or {}),
                tuning_drift=drift_lines(rec.meta))


def drift_lines(meta: Mapping[str, Any]) -> tuple[str, ...]:
    """The tuning settings a point's record says moved while it ran (the
    session's ``tuning_drift``: host, setting, note), one line each."""
    return tuple(f"{d.get('host')} {d.get('setting')}: {d.get('note')}"
                 for d in meta.get("tuning_drift") or () if isinstance(d, Mapping))


def median_of(values: Iterable[float | None]) -> float | None:
    """Median of the values that are known (None left out); None if none are."""
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def by_point(results: Iterable[T]) -> dict[str, list[T]]:
    """Results grouped by point, in the order points first appear (run order)."""
    groups: dict[str, list[T]] = defaultdict(list)
    for r in results:
        groups[r.point].append(r)
    return groups


def int_param(params: Mapping[str, object], key: str, default: int) -> int:
    """A whole-number point parameter as stored (JSON), or ``default`` when absent or 0."""
    v = params.get(key)
    return int(v) if isinstance(v, (int, float, str)) and v else default


def float_meta(meta: Mapping[str, object], key: str, default: float = 0.0) -> float:
    """A number from a run's meta (JSON), or ``default`` when absent."""
    v = meta.get(key)
    return float(v) if isinstance(v, (int, float, str)) and v not in ("", None) else default
