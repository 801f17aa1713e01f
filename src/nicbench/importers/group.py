"""Grouping parsed files into points and repeats from what they contain.

Files of one point run in parallel (several clients, several ports) share a
point key and overlap in time; files of the same key that do not overlap are
repeats.  ``together=True`` forces every file into one point.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from operator import attrgetter

from .model import ParsedFile


@dataclass(frozen=True)
class Group:
    """Files measured together as one point; ``key`` names the point, ``repeat`` counts from 0."""

    key: str
    repeat: int
    files: tuple[ParsedFile, ...]


def engine_direction(p: ParsedFile) -> str | None:
    """A traffic file's direction as the engine's client sees it (tx = the
    client sent, the studies' "tx"): a server's file says the opposite of
    its own process (it received the client's tx)."""
    d = p.params.get("direction")
    if p.kind in ("tcp", "udp") and p.role == "server" and d in ("tx", "rx"):
        return "rx" if d == "tx" else "tx"
    return str(d) if d is not None else None


def point_key(p: ParsedFile) -> str:
    """What makes two files the same point: tool, kind, direction (the
    engine client's, so both ends of one test agree), streams, size, op; a
    packet point's sender and receiver files share it (no direction, no
    port); a fio job group is its own point; a request/response file's
    request size is part of its point."""
    pr = p.params
    what = "" if p.kind == "packets" else engine_direction(p) or pr.get("op") or pr.get("test") or ""
    parts = [p.tool, p.kind, str(what)]
    for k in ("streams", "io_size", "block_size", "bs", "connections", "protocol", "frame_size", "request_size"):
        if pr.get(k) is not None:
            parts.append(f"{k}={pr[k]}")
    if "group" in p.extra:
        parts.append(f"group={p.extra['group']}")
    return "/".join(parts)


def _span(p: ParsedFile) -> tuple[float, float] | None:
    if p.relative_time or not p.samples:
        return None
    return min(map(_T_START, p.samples)), max(map(_T_END, p.samples))


_T_START, _T_END = attrgetter("t_start"), attrgetter("t_end")


def group(files: Sequence[ParsedFile], together: bool = False) -> list[Group]:
    """Points and repeats.  Files with the same key whose time spans overlap
    (or that carry no wall clock, e.g. one pkt-gen file per port of the same
    run) are one point; a file of the same key that starts after the
    previous group ended is the next repeat."""
    if together:
        return [Group("together", 0, tuple(files))] if files else []
    out: list[Group] = []
    by_key: dict[str, list[list[ParsedFile]]] = {}
    span = {id(f): _span(f) for f in files}     # once per file: a long one has 100,000s of samples
    for p in sorted(files, key=lambda f: (span[id(f)] or (0.0, 0.0))[0]):
        runs = by_key.setdefault(point_key(p), [])
        sp = span[id(p)]
        last = runs[-1] if runs else None
        if last is not None:
            spans = [s for s in (span[id(x)] for x in last) if s]
            if sp is None or not spans or sp[0] < max(e for _, e in spans):
                last.append(p)
                continue
        runs.append([p])
    for key, runs in by_key.items():
        out += [Group(key, i, tuple(r)) for i, r in enumerate(runs)]
    return out
