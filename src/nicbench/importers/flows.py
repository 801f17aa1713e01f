"""One traffic point (TCP or UDP) from the files of one group: what the TCP
and UDP studies' import adapters share.

The files of a group may be both ends of one test (a client's and a
server's report), several clients run in parallel, or both.  Files that name
the same connections (their port pairs, :func:`nicbench.importers.traffic.connection_pairs`)
are one engine process pair, a *process* below; every other file is a
process of its own.  Per process, direction and side, the samples come from
one file: the one that measured that side itself (a server's own receiver
intervals before the copy a client carries with ``--get-server-output``),
then any file with intervals, then a whole-test total.  Directions are the
engine client's (tx = the client sent), as the studies record them.

Receiver truth: a direction whose receivers left only whole-test totals
uses them (one sample over the receiver's seconds, tagged ``whole``) and
says so; a direction with no receiver figure at all is sender-side
(``sender_only``) and says so -- never a failed point for want of receiver
intervals.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..core.errors import InputError
from ..records import Sample, Tags
from .adapt import common, file_notes, label, retag, retagged, shifted
from .group import Group, engine_direction
from .model import ParsedFile

# notes of the parsers this kit replaces with its own, once it has chosen the samples
_OWN_NOTES = ("per-interval data is sender-side", "has no receiver figure", "start time from start.timestamp")
_OWN_SIDE = {("client", "tx", "sender"), ("client", "rx", "receiver"),
             ("server", "tx", "receiver"), ("server", "rx", "sender")}


@dataclass(frozen=True)
class FlowPoint:
    """One point's traffic: ``samples`` tagged host = process label, proc =
    process number; ``sender_only`` lists directions whose figure is the
    senders' (no receiver figure in any file); ``processes`` maps each
    process label to its files' names."""

    direction: str                         # tx, rx or bidir
    connections: int                       # streams over every process
    io_size: int | None                    # bytes, when every file agrees
    samples: tuple[Sample, ...]
    sender_only: tuple[str, ...]
    whole: tuple[str, ...]                 # directions some receiver gave only a whole-test total of
    processes: dict[str, list[str]]
    notes: tuple[str, ...]
    engine: str | None
    engine_version: str | None
    duration: float | None
    omit: float | None


def _flip(d: str | None) -> str | None:
    return {"tx": "rx", "rx": "tx"}.get(d or "", d)


def _engine_frame(p: ParsedFile) -> list[Sample]:
    """A server's samples with the engine client's directions."""
    if p.role != "server":
        return list(p.samples)
    done: dict[Tags, Tags] = {}          # per tag set, not per sample (a long file has 100,000s)
    out = []
    for s in p.samples:
        t = done.get(s.tags)
        if t is None:
            t = done[s.tags] = retag(s, direction=_flip(s.tag("direction"))).tags
        out.append(Sample(s.trial_id, s.metric, s.value, s.unit, s.t_start, s.t_end, t))
    return out


def _tag(tags: Tags, name: str) -> str | None:
    """Sample.tag of a tag set."""
    return next((v for k, v in tags if k == name), None)


def _by_side(samples: list[Sample]) -> dict[tuple[str | None, str | None], list[Sample]]:
    """Samples by (direction, side) tag, each list in the samples' order; the
    tags read once per tag set (looked up by identity: the rule in
    :mod:`nicbench.records`)."""
    key_of: dict[int, tuple[Tags, tuple[str | None, str | None]]] = {}
    out: dict[tuple[str | None, str | None], list[Sample]] = defaultdict(list)
    for s in samples:
        t = s.tags
        e = key_of.get(id(t))
        if e is None:
            e = key_of[id(t)] = (t, (_tag(t, "direction"), _tag(t, "side")))
        out[e[1]].append(s)
    return out


def _all_whole(ss: Iterable[Sample]) -> bool:
    return all(_tag(t, "whole") == "1" for t in {id(s.tags): s.tags for s in ss}.values())


def _processes(files: Sequence[ParsedFile]) -> list[list[int]]:
    """Files joined when they name a common connection (both ends of one test)."""
    parent = list(range(len(files)))

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i
    pairs = [{tuple(x) for x in p.extra.get("pairs") or ()} for p in files]
    for i in range(len(files)):
        for j in range(i):
            if pairs[i] & pairs[j]:
                parent[root(i)] = root(j)
    out: dict[int, list[int]] = defaultdict(list)
    for i in range(len(files)):
        out[root(i)].append(i)
    return list(out.values())


def _rank(p: ParsedFile, ss: list[Sample], d: str, side: str) -> int:
    """Lower is better: measured by this file's own process, with intervals."""
    whole = _all_whole(ss)
    own = (p.role or "client", d, side) in _OWN_SIDE
    return (2 if whole else 0) + (0 if own else 1)


def flow_point(group: Group, kind: str) -> FlowPoint:
    """The traffic of ``group`` (its files all of ``kind`` "tcp" or "udp")."""
    files = list(group.files)
    procs = _processes(files)
    # whole-second (iperf3 JSON) or no wall clock: parallel processes are
    # taken as started together rather than misaligned by up to a second
    align = len(files) > 1 and (any(p.relative_time for p in files)
                                or (len(procs) > 1 and any(p.format == "iperf3-json" for p in files)))
    frames = []
    for p in files:
        ss = _engine_frame(p)
        if align and not p.relative_time and p.start is not None:
            ss = [shifted(s, p.start) for s in ss]
        frames.append(ss)
    metric = f"{kind}.bytes"
    out: list[Sample] = []
    names: dict[str, list[str]] = {}
    notes: list[str] = []
    have: dict[tuple[str, str], set[int]] = defaultdict(set)       # (direction, side) -> processes
    used: set[str] = set()
    whole: set[str] = set()
    split = [_by_side(f) for f in frames]
    for n, members in enumerate(procs):
        base = label(files[next((i for i in members if files[i].role != "server"), members[0])])
        plabel = base if base not in used else f"{base}#{n + 1}"
        used.add(plabel)
        names[plabel] = [files[i].name for i in members]
        keys = sorted({(dd or "", sd or "") for i in members for (dd, sd), ss in split[i].items()
                       if any(s.metric == metric for s in ss)})
        for d, side in keys:
            cands = [(i, split[i].get((d, side), [])) for i in members]
            cands = [(i, ss) for i, ss in cands if any(s.metric == metric for s in ss)]
            # (one file: no ranking to do, and no pass over its samples for it)
            i, ss = cands[0] if len(cands) == 1 else \
                min(cands, key=lambda c: _rank(files[c[0]], [s for s in c[1] if s.metric == metric], d, side))
            out += retagged(ss, host=plabel, proc=str(n))
            have[(d, side)].add(n)
            if side == "receiver" and _all_whole(s for s in ss if s.metric == metric):
                whole.add(d)
                secs = max(s.t_end for s in ss) - min(s.t_start for s in ss)
                notes.append(f"{d}: {plabel}: no receiver intervals in the file(s); the figure is the receiver's "
                             f"whole-test total over {secs:g} s, a total without intervals (per-interval data "
                             "is sender-side)")
    directions = sorted({d for d, _ in have})
    sender_only = []
    for d in directions:
        # the processes that carried this direction (with --together, a tx test and an rx test
        # are one bidir point: each direction has its own)
        rcv, snd = have.get((d, "receiver"), set()), have.get((d, "sender"), set())
        involved = rcv | snd
        if rcv == involved:
            continue
        if snd == involved:
            sender_only.append(d)
            which = "no file has" if not rcv else f"only {len(rcv)} of the {len(involved)} processes have"
            notes.append(f"{d}: {which} a receiver figure: the point's figure is sender-side (what was sent, "
                         "not what arrived)")
            continue
        some = [p for n, p in enumerate(names) if n in rcv - snd]
        raise InputError(f"direction {d}: {', '.join(some)} have only a receiver figure and the other files only "
                         "a sender figure: neither side is whole", where=", ".join(p.name for p in files),
                         hint="import both ends of every test together, or each test on its own")
    wanted = {d for d in (engine_direction(f) for f in files) if d}
    direction = "bidir" if "bidir" in wanted or len(wanted) > 1 else \
        wanted.pop() if wanted else ("bidir" if len(directions) > 1 else directions[0] if directions else "tx")
    streams = sum(max(int(files[i].params.get("streams") or 1) for i in m) for m in procs)
    io = common(f.params.get("io_size") for f in files)
    durations = [float(f.params["duration"]) for f in files if f.params.get("duration")]
    omits = [float(f.params["omit"]) for f in files if f.params.get("omit") is not None]
    return FlowPoint(direction=direction, connections=streams, io_size=int(io) if io else None,
                     samples=tuple(out), sender_only=tuple(sender_only),
                     whole=tuple(sorted(whole - set(sender_only))), processes=names,
                     notes=tuple(notes + file_notes(files, skip=_OWN_NOTES)),
                     engine=common(f.params.get("engine") for f in files),
                     engine_version=common(f.version for f in files),
                     duration=max(durations) if durations else None, omit=max(omits) if omits else None)
