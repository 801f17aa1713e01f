"""What an imported file turns into: :class:`ParsedFile`, plus the small
helpers every format module shares (finite numbers, sample building).

Units: bytes, seconds, packets and counts as in :data:`nicbench.records.UNITS`;
rates are never stored, they are computed from a total over its span.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..core.errors import InputError
from ..records import Sample, Unit, make_tags

Kind = Literal["tcp", "udp", "storage", "http", "packets", "rr"]
Role = Literal["client", "server"]


@dataclass(frozen=True)
class ParsedFile:
    """One tool output file, parsed.

    ``params``: the point it measured as far as the file says (``direction``
    tx/rx/bidir from this file's own process: tx = it sent; ``streams``,
    ``io_size``/``block_size`` bytes, ``protocol``, ``duration`` s, ``rate``
    bit/s or pps, ``op``, ``connections``, ``threads``, ...).
    ``samples``: trial_id is "" (the importer fills it); times are epoch
    seconds when the file carries a wall clock, else seconds from the test
    start and ``relative_time`` is True.
    ``totals``: the tool's whole-test figures, keyed ``<direction>.<side>.<what>``
    for traffic (``tx.receiver.bytes``, ``tx.receiver.seconds``), ``<op>.<what>``
    for storage, plain names otherwise; bytes, seconds, counts.
    ``notes``: what a reader must know (e.g. that intervals are sender-side);
    ``dropped``: what a partial parse left out, one sentence each.
    """

    name: str
    format: str
    tool: str
    version: str | None
    role: Role | None
    kind: Kind
    params: Mapping[str, Any]
    samples: list[Sample]
    totals: Mapping[str, float]
    relative_time: bool = False
    notes: tuple[str, ...] = ()
    dropped: tuple[str, ...] = ()
    start: float | None = None               # epoch seconds of the test start, when known
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def partial(self) -> bool:
        return bool(self.dropped)


# the hint of a field that cannot be what the tool wrote
DAMAGED = "the file is damaged or edited; import the tool's own output (re-run the tool if it is lost)"


def finite(value: object, what: str, name: str, *, allow_negative: bool = False) -> float:
    """A finite number from a parsed field, or an InputError naming the field."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise InputError(f"{what} is {value!r}, not a number", where=name, hint=DAMAGED)
    try:
        x = float(value)
    except (ValueError, OverflowError):
        raise InputError(f"{what} is {value!r}, not a number", where=name, hint=DAMAGED) from None
    if not math.isfinite(x):
        raise InputError(f"{what} is {value!r}", where=name, hint="the tool printed a non-number; the file is damaged")
    if x < 0 and not allow_negative:
        raise InputError(f"{what} is negative ({value!r}): a count or a time cannot be", where=name, hint=DAMAGED)
    return x


def sample(metric: str, value: float, unit: Unit, t0: float, t1: float, **tags: object) -> Sample:
    """A Sample with trial_id "" (filled by the importer)."""
    return Sample("", metric, float(value), unit, t0, max(t0, t1), make_tags(**tags))


def no_point(name: str, what: str, hint: str) -> InputError:
    """The error for a file that yields no valid point."""
    return InputError(f"no usable result: {what}", where=name, hint=hint)
