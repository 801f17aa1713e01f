"""An import, stored: the files as read (bytes, digest), the trials a study's
adapter made of them numbered as a plan's would be, and the run written in
one piece into the archive -- invisibly (a hidden row, a ``.tmp-`` directory),
shown and moved into place only when complete, so an error leaves nothing
behind and a kill -9 leaves only what ``nicbench recover`` clears.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path
from typing import Any

from ..core.errors import InputError
from ..records import RawOutput, RunInfo, Sample, TrialRecord, TrialSpec
from ..store.archive import Archive
from ..store.writer import RunWriter
from .adapt import ImportedRun, label
from .model import ParsedFile


@dataclass(frozen=True)
class SourceFile:
    """One file as the user gave it: ``given`` (the name on the command
    line), its absolute ``path``, ``size`` in bytes, ``sha256`` and the bytes read."""

    given: str
    path: Path
    size: int
    sha256: str
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", "replace")


def read_source(given: str) -> SourceFile:
    """A file's text, refused when it is missing, unreadable, empty or binary."""
    path = Path(given).expanduser().absolute()
    try:
        data = path.read_bytes()
    except IsADirectoryError:
        raise InputError("is a directory, not a tool's output", where=given,
                         hint="give the files themselves (a shell glob: DIR/*.json)") from None
    except OSError as e:
        raise InputError(f"cannot read: {e.strerror or e}", where=given, hint="check the path and its permissions") \
            from None
    if not data or data.isspace():          # (not data.strip(): a copy of the whole file to say so)
        raise InputError("empty file", where=given, hint="the tool wrote nothing: save its output (e.g. "
                         "iperf3 -J > out.json) and import that")
    if b"\0" in data[:65536]:
        raise InputError("binary file, not a tool's text output", where=given,
                         hint="import the tool's saved output (JSON, CSV or text), not a capture or an archive")
    return SourceFile(given, path, len(data), hashlib.sha256(data).hexdigest(), data)


def provenance(src: SourceFile, p: ParsedFile, forced: bool, points: Sequence[str]) -> dict[str, Any]:
    """What a run keeps of each file it was made of."""
    return {"name": src.given, "path": str(src.path), "size": src.size, "sha256": src.sha256,
            "format": p.format, "format_forced": forced, "tool": p.tool, "version": p.version, "role": p.role,
            "kind": p.kind, "notes": list(p.notes), "dropped": list(p.dropped), "points": list(points)}


_T_START, _T_END = attrgetter("t_start"), attrgetter("t_end")


def records(study: str, run: ImportedRun) -> list[tuple[TrialRecord, list[Sample]]]:
    """The trials numbered in order (``t0001`` ...), repeats counted per
    point.  Their samples are the adapter's, trial_id "": the archive's
    writer stores them under their trial's id (a long import's 340,000
    samples are not copied to carry it; the analysis reads them by trial)."""
    out = []
    seen: dict[str, int] = {}
    for i, t in enumerate(run.trials):
        tid = f"t{i + 1:04d}"
        rep = seen.get(t.point, 0)
        seen[t.point] = rep + 1
        samples = list(t.samples)
        started = min(map(_T_START, samples), default=0.0)
        ended = max(map(_T_END, samples), default=started)
        meta = {**t.meta, "imported": [p.name for p in t.files]}
        out.append((TrialRecord(TrialSpec(tid, i, study, t.point, rep, dict(t.params)), t.status, started, ended,
                                t.error, meta), samples))
    return out


def write_run(archive: Archive, info: RunInfo, trials: Sequence[tuple[TrialRecord, list[Sample]]],
              files: Mapping[str, Sequence[tuple[ParsedFile, SourceFile]]]) -> Path:
    """The run, complete, in ``archive`` (its directory under the archive's
    runs root): ``files`` by trial id are copied into its ``raw/`` (once
    each; later trials refer to the copy).  Returns the run directory."""
    w = RunWriter.create(archive, info, total=len(trials), visible=False)
    try:
        copied: dict[str, str] = {}
        for rec, samples in trials:
            tid = rec.spec.trial_id
            raws = []
            for p, src in files.get(tid, ()):
                if src.given not in copied:
                    # the bytes that were parsed, not the file as it is now (their digest is src's)
                    copied[src.given] = w.write_raw(tid, f"{len(copied) + 1:02d}-{src.path.name}", src.data,
                                                    src.sha256)
                raws.append(RawOutput(tid, label(p), p.role or "client", p.tool, "stdout", copied[src.given]))
            w.write_trial(rec, samples, raws)
        partial = sum(r.status == "partial" for r, _ in trials)
        failed = sum(r.status not in ("ok", "partial") for r, _ in trials)
        w.finish("done-with-failures" if failed else "done-with-partial-points" if partial else "done",
                 ok=len(trials) - failed - partial, failed=failed, partial=partial)
    except BaseException:
        # nothing of a failed import is kept
        archive.delete_run(info.run_id)
        shutil.rmtree(w.run_dir, ignore_errors=True)
        raise
    return w.run_dir
