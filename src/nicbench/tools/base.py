"""What every traffic-tool module shares: version/feature facts and flow intervals."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, NamedTuple, ParamSpec, TypeVar

from ..core.errors import NicbenchError, ToolError

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


@dataclass(frozen=True, slots=True)
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
    out_of_order: int | None = None   # UDP datagrams the receiver got out of order
    # a TCP sender's view at the interval's end (iperf3 on Linux), over its streams:
    rtt_s: float | None = None        # smoothed RTT, the streams' mean, seconds
    snd_cwnd: int | None = None       # congestion windows, summed, bytes
    snd_wnd: int | None = None        # the receivers' advertised windows, summed, bytes


class FlowRow(NamedTuple):
    """A :class:`FlowInterval` as a plain tuple: the same fields in the same
    order, with the same defaults, read the same way (``iv.bytes``);
    ``FlowInterval(*row)`` is the same interval.

    For parsers of long outputs: a frozen dataclass of 17 fields is 17
    attribute stores to build, a tuple one allocation -- building a
    FlowInterval was half the parse of a 200 MB iperf3 report's 227,000
    intervals.
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
    by_peer: bool = False
    packets: int | None = None
    lost: int | None = None
    jitter_s: float | None = None
    out_of_order: int | None = None
    rtt_s: float | None = None
    snd_cwnd: int | None = None
    snd_wnd: int | None = None


P = ParamSpec("P")
R = TypeVar("R")

# what a parser written for a tool's real output trips over in a damaged one
# (a key missing, a null or NaN where a number was, nesting beyond the stack)
DAMAGE = (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError, ZeroDivisionError,
          RecursionError)


def damage_is_a_tool_error(tool: str, hint: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """A parser of ``tool``'s output raises only nicbench's errors: whatever
    the damage (truncation, a flipped bit, ``NaN`` where bytes were), the
    point fails naming it, with the raw output kept -- never an internal error
    and never a number read from a report that is not one.  The parser's own
    ``where`` argument (a host or file), when it has one, is named."""
    def wrap(f: Callable[P, R]) -> Callable[P, R]:
        sig = inspect.signature(f)

        @functools.wraps(f)
        def parse(*args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return f(*args, **kwargs)
            except NicbenchError:
                raise
            except DAMAGE as e:
                try:
                    where = sig.bind_partial(*args, **kwargs).arguments.get("where") or None
                except TypeError:
                    where = None
                raise ToolError(f"{tool} output is damaged: {type(e).__name__}: {str(e)[:120]}",
                                where=where if isinstance(where, str) else None, hint=hint) from None
        return parse
    return wrap


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

