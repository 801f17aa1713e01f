"""What the request/response latency engines share: samples, the tool's own
summary, message-size limits, version checks and a hard time bound.

Units: every time here is in seconds (float), every size in bytes.  Each
engine module (``sockperf``, ``irtt``, ``bounceback``) turns its tool's
output into these types; the engines differ in what they can give (per-request
samples with or without absolute send times, or only the tool's histogram),
and the types say which.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from ..core.errors import InputError, PreflightError
from .base import ToolInfo, parse_version

Protocol = Literal["tcp", "udp"]
# which clock a sample's send time is on:
#   "epoch"   - wall clock, UNIX seconds (comparable across hosts as far as their clocks agree)
#   "process" - seconds since the engine's process started (sockperf's TSC base): only
#               differences within one run mean anything
Clock = Literal["epoch", "process"]

UDP_MAX_PAYLOAD = 65507          # IPv4: 65535 - 20 (IP) - 8 (UDP)
KILL_GRACE = 2.0                 # s between the polite signal and SIGKILL (see bounded())


@dataclass(frozen=True)
class RttSamples:
    """One run's answered requests, in send order.

    ``rtt``: round-trip times (s).  ``sent``: the send time of each (s, on
    ``clock``), or None when the tool does not give one.
    """

    rtt: tuple[float, ...]
    sent: tuple[float, ...] | None
    clock: Clock | None

    def __len__(self) -> int:
        return len(self.rtt)


@dataclass(frozen=True)
class StatedSummary:
    """A run's summary exactly as the tool printed it, converted to seconds.

    Percentiles use the tool's own rank rule (documented per engine); nicbench
    computes its own from the samples (core.histogram) and keeps these to
    cross-check.  ``None``: the tool does not state it.
    """

    count: int                          # answered requests the statistics cover
    sent: int | None = None             # requests sent in that window
    lost: int | None = None             # sent - answered, where the tool can tell
    duration: float | None = None       # s, the window the statistics cover
    rate: float | None = None           # answered requests per second over `duration`
    mean: float | None = None
    stdev: float | None = None
    min: float | None = None
    max: float | None = None
    median: float | None = None
    percentiles: Mapping[float, float] = field(default_factory=dict)   # percent -> s
    counters: Mapping[str, int] = field(default_factory=dict)          # duplicates, out_of_order, ...


def check_size(tool: str, size: int, protocol: Protocol, low: int, high: int, why_low: str,
               why_high: str) -> None:
    """InputError naming the tool when a message size is outside what it can send."""
    if not isinstance(size, int) or isinstance(size, bool):
        raise InputError(f"{tool}: message size must be a whole number of bytes, not {size!r}",
                         where="message_size")
    if size < low:
        raise InputError(f"{tool}: {protocol.upper()} message size {size} B is below its minimum {low} B ({why_low})",
                         where="message_size", hint=f"use message sizes >= {low} with {tool}")
    if size > high:
        raise InputError(f"{tool}: {protocol.upper()} message size {size} B is above its maximum {high} B ({why_high})",
                         where="message_size", hint=f"use message sizes <= {high} with {tool}")


def require_version(name: str, version_out: str | None, host: str, minimum: tuple[int, ...], reason: str,
                    package: str) -> ToolInfo:
    """The tool's facts from its version output, or PreflightError naming ``host``.

    ``version_out`` None means the command was not found on the host.
    """
    if version_out is None:
        raise PreflightError(f"{name} is not installed", where=host, hint=f"apt-get install {package}")
    first = next((ln.strip() for ln in version_out.splitlines() if ln.strip()), "")
    v = parse_version(first)
    if not v:
        raise PreflightError(f"{name}: cannot read a version from {first[:80]!r}", where=host,
                             hint=f"is {name} really the {package} tool?")
    if v < minimum:
        need = ".".join(map(str, minimum))
        raise PreflightError(f"{name} {'.'.join(map(str, v))} is older than {need}: {reason}", where=host,
                             hint=f"install {package} >= {need}")
    return ToolInfo(name, v, first)


def bounded(argv: list[str], seconds: float, signal: str = "INT") -> list[str]:
    """``argv`` under coreutils ``timeout``: ``signal`` after ``seconds``, SIGKILL
    ``KILL_GRACE`` s later.  For tools that have no lifetime of their own
    (sockperf's server) or that can hang past theirs (iperf 2.1.8's
    bounce-back client ignores -t and SIGTERM when the server drops it)."""
    if not seconds > 0:
        raise InputError(f"{argv[0]}: time bound must be > 0 s, not {seconds}", where="duration")
    return ["timeout", "-s", signal, "-k", f"{KILL_GRACE:g}", f"{seconds:g}", *argv]
