"""What the latency runner asks of a probe engine, and what the engines share.

A probe engine is one ping-pong tool: a server per probe on the study server,
a client on each probe client, and a reading of what the client left (its
stdout and stderr, and the per-request log some engines write on the probe
host).  :class:`ProbeEngine` is all the runner knows of one; the point's
sequence (spawning, the barrier with the load, the guard, the samplers, the
record) is the runner's and ``run.point``'s.

What an engine's reading gives the runner (:class:`ProbeRead`): the probe's
record for ``meta["probes"][host]`` (a bounded HDR histogram as JSON, how far
its percentiles are exact, counts, the window on the wall clock, the engine's
own summary; see the runner's module notes) and its Samples per ``BIN``
seconds (``latency.requests``, ``latency.rtt_mean``, ``latency.rtt_max``).
Round-trip times are seconds, send times are this machine's wall clock.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ....core.errors import PreflightError
from ....core.histogram import LatencyHistogram
from ....hosts.transport import Process, Transport, read_output
from ....records import Sample, Tags
from ....tools.base import ToolInfo
from ....tools.rtt import Protocol as Proto
from ....tools.rtt import StatedSummary

BIN = 0.5                  # s, the width of the per-probe time series


@dataclass(frozen=True)
class ProbeSpec:
    """One point's probe as every probe client runs it."""

    protocol: Proto
    size: int                  # bytes of payload per request (the response is as large)
    rate: int | None           # requests per second; None: back to back
    duration: int              # s of requests the plan asked for


@dataclass(frozen=True)
class ProbeOutput:
    """What one probe client left, as its engine reads it."""

    trial_id: str
    host: str                          # the probe client
    where: str                         # how its errors name it: "c1 (sockperf to srv:11111)"
    proc: Process                      # its client process: stdout, stderr, its host's clock offset
    launched: float                    # its gate stamp, this machine's clock
    tags: Tags
    fetch: Callable[[str], str]        # the engine's log from the probe host, kept with the run under this name
    warn: Callable[[str], None]        # a warning for the point's meta

    @property
    def out(self) -> str:
        return read_output(self.proc.stdout_path)

    @property
    def err(self) -> str:
        return read_output(self.proc.stderr_path)


@dataclass(frozen=True)
class ProbeRead:
    """A probe's record (``meta["probes"][host]``, less the engine, port and
    launch the runner adds) and its binned Samples."""

    record: dict[str, Any]
    samples: list[Sample] = field(default_factory=list)


class ProbeEngine(Protocol):
    """One probe engine of the latency study (one file under ``engines/``,
    one line in ``ENGINES``)."""

    name: str                  # as the plan and the point key name it (study.engines)
    tool: str                  # the program on PATH, whose version the host facts record
    log_ext: str | None        # the per-request log it writes on the probe host (None: all on stdout)

    def version_argv(self) -> list[str]: ...

    def info_from(self, out: str | None, host: str) -> ToolInfo:
        """Its version output (None: not installed) -> facts, or PreflightError naming ``host``."""
        ...

    def warnings(self, rate: int | None, probes: Sequence[str]) -> list[str]:
        """What the run should warn about before it starts (a core spun per probe
        at a fixed ``rate``, requests/s; None: back to back)."""
        ...

    def server_argv(self, p: ProbeSpec, bind: str, port: int, lifetime: float) -> list[str]: ...

    def client_argv(self, p: ProbeSpec, target: str, port: int, log: str | None) -> list[str]:
        """``log``: where it writes its per-request log on the probe host (when ``log_ext``)."""
        ...

    def read(self, o: ProbeOutput) -> ProbeRead:
        """The probe's figures, or a ToolError saying why there are none."""
        ...


def engine_info(engine: ProbeEngine, t: Transport) -> ToolInfo:
    """The engine's version on one host, or PreflightError naming the host."""
    try:
        r = t.run(engine.version_argv(), timeout=10)
        out: str | None = r.stdout + r.stderr
    except PreflightError:          # command not found
        out = None
    return engine.info_from(out, t.host)


# ---- what engines with per-request samples share -------------------------------------------


def bins(trial_id: str, tags: Tags, sent: Sequence[float], rtt: Sequence[float]) -> list[Sample]:
    """Per BIN seconds of the window (from the first send): answered requests,
    their mean and largest RTT.  ``sent``: wall-clock send times, in order."""
    if not sent:
        return []
    t0 = sent[0]
    groups: dict[int, list[float]] = {}
    for t, r in zip(sent, rtt, strict=True):
        groups.setdefault(int((t - t0) / BIN), []).append(r)
    out = []
    for k in range(max(groups) + 1):
        rs = groups.get(k, [])
        a, b = t0 + k * BIN, t0 + (k + 1) * BIN
        out.append(Sample(trial_id, "latency.requests", float(len(rs)), "count", a, b, tags))
        if rs:
            out.append(Sample(trial_id, "latency.rtt_mean", sum(rs) / len(rs), "s", a, b, tags))
            out.append(Sample(trial_id, "latency.rtt_max", max(rs), "s", a, b, tags))
    return out


def exact(rtt: Sequence[float], sent_abs: Sequence[float], stated: dict[str, Any], *, sent: int, lost: int,
          clock: str) -> dict[str, Any]:
    """A probe's record from per-request samples: the exact histogram and its window."""
    h = LatencyHistogram.of(rtt)
    return {"histogram": h.to_json(), "percentiles_bound": "exact", "resolution_s": None,
            "count": h.count, "sent": sent, "lost": lost, "mean": h.mean, "min": h.min, "max": h.max,
            "window": [sent_abs[0], sent_abs[-1] + rtt[-1]], "clock": clock, "stated": stated}


def stated(summary: StatedSummary) -> dict[str, Any]:
    """The engine's own summary, kept to cross-check the histogram."""
    return {"count": summary.count, "sent": summary.sent, "lost": summary.lost, "duration_s": summary.duration,
            "rate": summary.rate, "mean": summary.mean, "stdev": summary.stdev, "min": summary.min,
            "max": summary.max, "median": summary.median,
            "percentiles": {str(k): v for k, v in summary.percentiles.items()}, "counters": dict(summary.counters)}
