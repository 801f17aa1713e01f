"""Grouping parsed files into points and repeats from what they contain.

Files of one point run in parallel (several clients, several ports) share a
point key and overlap in time; files of the same key that do not overlap are
repeats.  ``together=True`` forces every file into one point.  Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .model import ParsedFile


@dataclass(frozen=True)
class Group:
    """Files measured together as one point; ``key`` names the point, ``repeat`` counts from 0."""

    key: str
    repeat: int
    files: tuple[ParsedFile, ...]


def point_key(p: ParsedFile) -> str:
    """What makes two files the same point: tool, kind, direction, streams, size, op."""
    pr = p.params
    parts = [p.tool, p.kind, str(pr.get("direction") or pr.get("op") or pr.get("test") or "")]
    for k in ("streams", "io_size", "bs", "connections", "protocol"):
        if pr.get(k) is not None:
            parts.append(f"{k}={pr[k]}")
    return "/".join(parts)


def _span(p: ParsedFile) -> tuple[float, float] | None:
    if p.relative_time or not p.samples:
        return None
    return min(s.t_start for s in p.samples), max(s.t_end for s in p.samples)


def group(files: Sequence[ParsedFile], together: bool = False) -> list[Group]:
    """Points and repeats.  Files with the same key whose time spans overlap
    (or that carry no wall clock, e.g. one pkt-gen file per port of the same
    run) are one point; a file of the same key that starts after the
    previous group ended is the next repeat."""
    if together:
        return [Group("together", 0, tuple(files))] if files else []
    out: list[Group] = []
    by_key: dict[str, list[list[ParsedFile]]] = {}
    for p in sorted(files, key=lambda f: (_span(f) or (0.0, 0.0))[0]):
        runs = by_key.setdefault(point_key(p), [])
        sp = _span(p)
        last = runs[-1] if runs else None
        if last is not None:
            spans = [s for s in (_span(x) for x in last) if s]
            if sp is None or not spans or sp[0] < max(e for _, e in spans):
                last.append(p)
                continue
        runs.append([p])
    for key, runs in by_key.items():
        out += [Group(key, i, tuple(r)) for i, r in enumerate(runs)]
    return out
