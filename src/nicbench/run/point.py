"""One point's sequence, written once for every engine of every study.

Every point does the same things around its engine: its meta and raw files,
processes spawned under the tuning profile's pinning (their argv recorded,
their outputs kept before any parsing), the samplers, a guard that turns
Ctrl-C and nicbench's own errors into the point's fate and stops every
process of the point on the way out, the engine clients awaited with a time
limit (one still running is lost, all of them fail the point), and the
record: status, error, the sequence's overhead, the samples with the
counters'.  An engine says only what is its own: which processes, which
argv, how to read what they wrote.

    pt = Point(spec, env, raw_dir, "iperf3", meta, nominal_s=omit + duration)
    with pt:
        srv = pt.spawn(t, host, "engine-server", name, argv, key=...)
        ...
        pt.sample(PointSamplers(...))
        pt.await_clients(clis, limit, key_of, why_hung)
    status, error = pt.status, pt.error          # the guard's decision
    ... parse, decide ...
    return pt.outcome(status, error, samples)
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from ..core.errors import NicbenchError, ToolError
from ..hosts.transport import Process, Transport
from ..records import DIRECTIONS, Sample, TrialRecord, TrialSpec, TrialStatus
from .kit import PointEnv, PointGuard, PointSamplers, RawFiles
from .study import TrialOutcome

K = TypeVar("K")
T = TypeVar("T")


class Point:
    """One point of one engine, from its first process to its record."""

    def __init__(self, spec: TrialSpec, env: PointEnv, raw_dir: Path, tool: str, meta: dict[str, Any] | None = None,
                 *, nominal_s: float, grace: float = 0.5, sig: int = signal.SIGTERM):
        self.spec, self.env, self.raw_dir = spec, env, raw_dir
        self.started = time.time()
        self.nominal_s = nominal_s          # the traffic's own length: the rest is the sequence's overhead
        self.meta: dict[str, Any] = meta if meta is not None else {}
        self.meta.setdefault("argv", {})
        self.raws = RawFiles(spec.trial_id, env, raw_dir, tool)
        self.procs: list[Process] = []
        # on the way out the last started is stopped first: clients before their servers (an
        # iperf3 client stopped writes what it had; its server gone first, it could not)
        self.guard = PointGuard(self.meta, lambda: self.procs[::-1], grace=grace, sig=sig)
        self.lost: dict[str, str] = {}       # "client:port" -> why that pair delivered nothing usable
        raw_dir.mkdir(parents=True, exist_ok=True)

    # -- the guarded part -------------------------------------------------
    def __enter__(self) -> Point:
        self.guard.__enter__()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> bool:
        return self.guard.__exit__(et, ev, tb)

    def spawn(self, t: Transport, host: str, role: str, name: str, argv: Sequence[str], *, key: str,
              gated: bool = False, pin: bool = True, tool: str | None = None) -> Process:
        """Start ``argv`` on ``host`` (under its pinning unless ``pin`` is
        false), its stdout and stderr kept as ``name.out``/``name.err`` (the
        output of ``tool``, when it is not the point's: a latency probe's TCP
        load, a packet point's receiver counting with nbgen whatever
        generates), its argv recorded in meta under ``key``; stopped with the
        point."""
        full = self.env.pinned(host, argv) if pin else list(argv)
        files = self.raws if tool is None else RawFiles(self.spec.trial_id, self.env, self.raw_dir, tool)
        out, err = files.pair(host, role, name)
        if files is not self.raws:
            self.raws.outputs += files.outputs
        proc = t.spawn(full, stdout=out, stderr=err, gated=gated)
        self.procs.append(proc)
        self.meta["argv"][key] = full
        return proc

    def sample(self, samplers: PointSamplers, *, first_read: bool = False) -> PointSamplers:
        """Start the point's samplers; the guard stops them, their samples become the counters."""
        self.guard.samplers = samplers.start(first_read=first_read)
        return self.guard.samplers

    def await_clients(self, clis: Sequence[tuple[K, Process]], limit: float, key: Callable[[K], str],
                      why_hung: Callable[[K, Process], ToolError], *, lose: bool = True) -> None:
        """Wait at most ``limit`` s for every client.  With ``lose``, one
        still running then is lost (into :attr:`lost`, with why) and all of
        them fail the point; without, any one fails it (a study whose figure
        is every client's together: the server's bytes, the target's IOPS).
        A failure raises the first hung client's error."""
        end_by = time.monotonic() + limit
        hung = [(k, p) for k, p in clis if p.wait(end_by - time.monotonic()) is None]
        if hung and (not lose or len(hung) == len(clis)):
            raise why_hung(*hung[0])
        for k, p in hung:
            self.lost[key(k)] = why_hung(k, p).one_line().removeprefix("nicbench: ")

    # -- after the guard --------------------------------------------------
    @property
    def status(self) -> TrialStatus:
        return self.guard.status

    @property
    def error(self) -> str | None:
        return self.guard.error

    @property
    def counters(self) -> list[Sample]:
        return self.guard.counters

    def outcome(self, status: TrialStatus, error: str | None, samples: list[Sample]) -> TrialOutcome:
        """The point's record: the samples with the counters', the time the
        sequence took beyond the traffic (``overhead_s``)."""
        ended = time.time()
        self.meta["overhead_s"] = (ended - self.started) - self.nominal_s
        return TrialOutcome(TrialRecord(self.spec, status, self.started, ended, error, self.meta),
                            [*samples, *self.counters], list(self.raws.outputs))


# -- the rules of a point made of pairs (an engine client and its server) --

def parsed_or_lost(key: str, lost: dict[str, str], what: str, parse: Callable[[], T], *,
                   label: str | None = None) -> T | None:
    """``parse()`` of one engine pair's output, or None with the pair in ``lost``
    and why: nicbench's own errors in their words (after ``label``, for errors
    that do not name the pair themselves), a parser bug (ValueError, KeyError,
    TypeError) as output not understood -- it loses the pair, never the run."""
    try:
        return parse()
    except NicbenchError as e:
        lost[key] = (f"{label}: " if label else "") + e.message + (f" (hint: {e.hint})" if e.hint else "")
    except (ValueError, KeyError, TypeError) as e:
        lost[key] = f"{label or f'{what} to {key}'}: tool output not understood: {type(e).__name__}: {e}"
    return None


def silent_pairs(samples: Sequence[Sample], keys: Sequence[str], direction: str, lost: dict[str, str],
                 metric: str = "tcp.bytes") -> list[Sample]:
    """The samples less those of pairs that moved nothing: a pair (``client:port``)
    whose receiver counted 0 bytes over the whole test in a direction the point
    asked for, with no error said, is lost (its zero was summed as a
    measurement: a point recorded at half its rate while its wire carried the
    whole); the pair goes into ``lost`` with why.  A pair with no receiver
    figure at all is the analysis' to reject, as before."""
    moved: dict[tuple[str, str], float] = {}
    for x in samples:
        if x.metric == metric and x.tag("side") == "receiver" and x.tag("omitted", "0") != "1":
            k = (f"{x.tag('host')}:{x.tag('proc')}", x.tag("direction") or "?")
            moved[k] = moved.get(k, 0.0) + x.value
    for key in keys:
        for d in DIRECTIONS.get(direction, ()):
            if key not in lost and moved.get((key, d), 1.0) <= 0:
                lost[key] = (f"{key} moved no {d} bytes: its engine reported 0 bytes received over the whole "
                             "test and exited without an error (a connection that never carried data?)")
    return kept(samples, lost)


def read_pairs(procs: Sequence[tuple[Any, Process]], lost: dict[str, str], what: str,
               read: Callable[[Any, Process], list[Sample]], *,
               label: Callable[[str], str] | None = None) -> list[Sample]:
    """``read(slot, proc)`` of every process of the pairs (``slot`` with
    ``client`` and ``port``) whose pair is not already lost; a pair whose
    output cannot be used goes into ``lost`` (:func:`parsed_or_lost`)."""
    out: list[Sample] = []
    for slot, proc in procs:
        key = f"{slot.client}:{slot.port}"
        if key not in lost:
            out += parsed_or_lost(key, lost, what, partial(read, slot, proc),
                                  label=label(key) if label else None) or []
    return out


def kept(samples: Sequence[Sample], lost: dict[str, str]) -> list[Sample]:
    """The samples less the lost pairs': a lost pair's bytes would be part of
    an interval of an unknown span."""
    return [x for x in samples if f"{x.tag('host')}:{x.tag('proc')}" not in lost]


def pair_fate(status: TrialStatus, error: str | None, lost: dict[str, str], pairs: int,
              meta: dict[str, Any]) -> tuple[TrialStatus, str | None]:
    """A point whose every pair delivered is ok; one that lost some pairs
    (a client killed, its link down, its engine server gone) is partial --
    the survivors' data kept, the lost pairs and hosts named -- never ok; one
    that lost them all failed."""
    if not lost or status != "ok":
        return status, error
    meta["lost"] = dict(lost)
    if len(lost) >= pairs:
        return "failed", "; ".join(lost.values())
    return "partial", "partial: " + "; ".join(f"{k} lost: {why}" for k, why in lost.items())
