"""What a study's import adapter (``studies/<kind>/imported.py``) is, and
the small helpers every adapter shares.

An adapter turns groups of parsed files (:class:`~nicbench.importers.group.Group`:
the files of one point run together) into trials in exactly the shape the
study's own runner records them: the same metric names and tags, the
``TrialSpec.params`` keys its analysis reads, the point key of its plan
schema, the trial meta its view reads.  The importer (``importers/write.py``)
numbers the trials and repeats, copies the raw files and writes the run; the
study's own analysis then reads it like any lab run.

Execution side: no analysis, no report, no other study.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from ..records import Sample, Tags, TrialStatus, make_tags
from .group import Group
from .model import ParsedFile


@dataclass(frozen=True)
class ImportOptions:
    """What the user said beside the files.  ``io_size``: bytes, the IO (or
    block) size of points whose files do not say it (iperf 2, text outputs)."""

    io_size: int | None = None
    protocol: str | None = None          # "tcp"/"udp" of request/response files that do not say (sockperf's full log)


@dataclass(frozen=True)
class ImportedTrial:
    """One repeat of one point, ready to store: ``samples`` with trial_id ""
    (the writer fills it), times as the files give them (epoch seconds, or
    seconds from the test start for files without a wall clock).  ``notes``:
    what a reader of the report must know about this point, one sentence
    each (the report shows them as the run's warnings); ``basis``: how the
    point's figure was taken when not as the study's runner takes it (e.g.
    "sender-side"), empty otherwise."""

    point: str
    params: Mapping[str, Any]
    samples: tuple[Sample, ...]
    meta: Mapping[str, Any]
    files: tuple[ParsedFile, ...]
    status: TrialStatus = "ok"
    error: str | None = None
    notes: tuple[str, ...] = ()
    basis: str = ""


@dataclass(frozen=True)
class ImportedRun:
    """Every trial of one study's import, and the run's meta as its runner
    would record it (engine, versions, trim ...; provenance is the writer's)."""

    trials: tuple[ImportedTrial, ...]
    meta: Mapping[str, Any]


class StudyImport(Protocol):
    """A study's import adapter: which kinds of parsed file it takes and how
    groups of them become its trials.  Raises InputError (naming the file)
    for a group it cannot turn into a point."""

    kinds: frozenset[str]                  # ParsedFile kinds: tcp, udp, storage, http, packets, rr

    def adapt(self, groups: Sequence[Group], options: ImportOptions) -> ImportedRun: ...


def label(p: ParsedFile) -> str:
    """A file's short name for hosts and tables: its base name."""
    return Path(p.name).name or p.name


def labels(files: Sequence[ParsedFile]) -> dict[int, str]:
    """Unique short names, by position: ``a.json``, ``a.json#2`` for a second file of that name."""
    seen: dict[str, int] = {}
    out = {}
    for i, p in enumerate(files):
        base = label(p)
        seen[base] = seen.get(base, 0) + 1
        out[i] = base if seen[base] == 1 else f"{base}#{seen[base]}"
    return out


def retag(s: Sample, **tags: object) -> Sample:
    """``s`` with tags replaced (None removes one)."""
    return Sample(s.trial_id, s.metric, s.value, s.unit, s.t_start, s.t_end, _merged(s.tags, typed(tags)))


def typed(tags: Mapping[str, object]) -> tuple[tuple[str, type, object], ...]:
    """Tags as a cache key: with each value's type, as 1, 1.0 and True are
    equal keys but different tags ("1", "1.0", "True")."""
    return tuple((k, v.__class__, v) for k, v in tags.items())


def retagger(**tags: object) -> Callable[[Sample], Sample]:
    """:func:`retag` with the same ``tags`` for many samples: each distinct
    tag set is merged once (a 200 MB iperf3 report makes 340,000 samples of
    a few tag sets)."""
    done: dict[Tags, Tags] = {}
    new = typed(tags)

    def one(s: Sample) -> Sample:
        t = done.get(s.tags)
        if t is None:
            t = done[s.tags] = _merged(s.tags, new)
        return Sample(s.trial_id, s.metric, s.value, s.unit, s.t_start, s.t_end, t)
    return one


def retagged(samples: Iterable[Sample], **tags: object) -> list[Sample]:
    """:func:`retagger` over many samples: one loop, not a call per sample
    (a 200 MB iperf3 report makes 340,000 samples of a few tag sets).  A
    sample whose tags are already these is kept as it is (samples are
    frozen: the same sample, not a copy of it).  Tag sets are looked up by
    identity (the rule in :mod:`nicbench.records`)."""
    done: dict[int, tuple[Tags, Tags]] = {}
    new = typed(tags)
    out: list[Sample] = []
    add = out.append
    for s in samples:
        old = s.tags
        e = done.get(id(old))
        if e is None:
            t = _merged(old, new)
            e = done[id(old)] = (old, old if t == old else t)
        t = e[1]
        add(s if t is old else Sample(s.trial_id, s.metric, s.value, s.unit, s.t_start, s.t_end, t))
    return out


@lru_cache(maxsize=4096)
def _merged(old: Tags, new: tuple[tuple[str, type, object], ...]) -> Tags:
    """Tags ``old`` with ``new`` replacing theirs, once per distinct pair
    (samples share a few tag sets: see :func:`retagger`)."""
    merged: dict[str, object] = dict(old)
    merged.update({k: v for k, _, v in new})
    return make_tags(**merged)


def shifted(s: Sample, by: float) -> Sample:
    """``s`` moved ``by`` seconds earlier."""
    return dataclasses.replace(s, t_start=s.t_start - by, t_end=s.t_end - by)


def common(values: Iterable[object]) -> Any:
    """The one value every file agrees on, or None when they differ or none has it."""
    vals = {v for v in values if v is not None}
    return vals.pop() if len(vals) == 1 else None


def file_notes(files: Sequence[ParsedFile], skip: Sequence[str] = ()) -> list[str]:
    """Each file's notes and dropped items, named by file (notes containing
    one of ``skip`` are the adapter's to say, after it chose what to use)."""
    out = []
    for p in files:
        out += [f"{label(p)}: {n}" for n in p.notes if not any(k in n for k in skip)]
        out += [f"{label(p)}: dropped: {d}" for d in p.dropped]
    return out
