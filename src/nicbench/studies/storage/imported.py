"""fio results run elsewhere (JSON 2.x/3.x, client/server, embedded in logs)
as the storage study's trials.

Shape, as :mod:`.runner` records it without fio's status reports:
``storage.bytes`` and ``storage.ios`` samples tagged host (the file), op
(read/write), side "initiator", one per job over its runtime, with no
``proc`` tag -- a file holds each job's totals only, not the per-report
timeline the analysis' shared-window method needs, so it sums them over
the union of their spans; params op, block_size, iodepth, pattern, duration, engine; the
point key ``read/bs4K`` of the plan schema (``read`` alone when no file says
one block size and ``--io-size`` does not either); trial meta ``fio`` per
file with its jobs' IOPS, bytes/s and completion-latency percentiles (ns),
as the runner keeps them.  Files run together (several initiators) are
taken as started together: fio stamps its document with whole seconds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ...core.units import format_size
from ...importers.adapt import ImportedRun, ImportedTrial, ImportOptions, common, file_notes, labels, retag, shifted
from ...importers.group import Group
from ...importers.model import ParsedFile
from ...records import Sample

_PCT = {"p50": "50", "p90": "90", "p99": "99", "p99.9": "99.9"}


def _jobs(p: ParsedFile) -> dict[str, dict[str, Any]]:
    """Per job, what the runner keeps of fio's report (``read_iops``, ``read_bw``
    bytes/s, ``read_p99_ns`` ...), from the parsed samples."""
    jobs: dict[str, dict[str, Any]] = defaultdict(dict)
    for s in p.samples:
        op, job = s.tag("op"), str(s.tag("proc"))
        secs = s.t_end - s.t_start
        if s.metric == "storage.ios" and secs > 0:
            jobs[job][f"{op}_iops"] = s.value / secs
        elif s.metric == "storage.bytes" and secs > 0:
            jobs[job][f"{op}_bw"] = s.value / secs
        elif s.metric.startswith("storage.latency."):
            pct = _PCT.get(s.metric.removeprefix("storage.latency."))
            if pct:
                jobs[job][f"{op}_p{pct}_ns"] = s.value * 1e9
    return dict(jobs)


def _int(v: object) -> int | None:
    return int(v) if isinstance(v, (int, str)) and str(v).isdigit() else None


class StorageImport:
    """The storage study's import adapter (``importers.adapt.StudyImport``)."""

    kinds = frozenset({"storage"})

    def adapt(self, groups: Sequence[Group], options: ImportOptions) -> ImportedRun:
        trials = []
        for g in groups:
            files = list(g.files)
            names = labels(files)
            samples: list[Sample] = []
            fio: dict[str, Any] = {}
            for i, p in enumerate(files):
                ss = [s for s in p.samples if s.metric in ("storage.bytes", "storage.ios")]
                if len(files) > 1 and ss:
                    t0 = min(s.t_start for s in ss)
                    ss = [shifted(s, t0) for s in ss]
                samples += [retag(s, host=names[i], side="initiator", job=s.tag("proc"), proc=None, group=None)
                            for s in ss]
                fio[names[i]] = {"jobs": _jobs(p), "bytes": sum(s.value for s in ss if s.metric == "storage.bytes"),
                                 "iops": sum(v for j in _jobs(p).values() for k, v in j.items()
                                             if k.endswith("_iops"))}
            ops = {str(p.params.get("op")) for p in files}
            op = ops.pop() if len(ops) == 1 else "readwrite"
            bs = common(p.params.get("block_size") for p in files) or options.io_size
            key = f"{op}/bs{format_size(int(bs))}" if bs else op
            runtime = max((s.t_end - s.t_start for s in samples), default=0.0)
            params = {"op": op, "block_size": bs, "iodepth": _int(common(p.params.get("iodepth") for p in files)),
                      "pattern": common(p.params.get("pattern") for p in files), "duration": runtime,
                      "engine": "fio", "jobs": sum(int(p.params.get("jobs") or 1) for p in files)}
            meta = {"fio": fio, "layout": [{"client": n} for n in names.values()],
                    "engine_version": common(p.version for p in files)}
            notes = file_notes(files, skip=("times end at the document's timestamp",))
            if not bs:
                notes.append("no block size: the files do not say one (give it with --io-size)")
            trials.append(ImportedTrial(key, params, tuple(samples), meta, g.files, notes=tuple(notes)))
        versions = {t.meta["engine_version"] for t in trials} - {None}
        return ImportedRun(tuple(trials), {"engine_version": "fio " + ", ".join(sorted(versions)) if versions
                                           else "fio", "trim": 0.0})
