"""wrk and wrk2 results run elsewhere (their text, or nicbench's wrk.lua
block) as the HTTPS study's trials.

Shape, as :mod:`.runner` records it: ``http.bytes``, ``http.requests``,
``http.socket_errors``, ``http.bad_status`` samples tagged host (the file),
scheme, side "receiver", direction "tx", over wrk's duration; params
scheme (from the URL wrk printed), connections (every file's), threads,
duration, engine; the point key ``https/c40`` of the plan schema (with
``/t4`` when one scheme and connection count was run with several thread
counts); trial meta ``wrk`` per file with requests, errors and the latency
percentiles in microseconds, as the runner keeps them.  The runner's rule
holds: a file with non-2xx/3xx responses is a failed point (its bytes are
not the payload).  Files run together (several clients) started together:
wrk prints no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...importers.adapt import ImportedRun, ImportedTrial, ImportOptions, common, file_notes, labels, retag
from ...importers.group import Group
from ...records import Sample, TrialStatus

_SAMPLES = ("http.bytes", "http.requests", "http.socket_errors", "http.bad_status")
_PCT = {"p50": "50", "p90": "90", "p99": "99"}


class HttpsImport:
    """The HTTPS study's import adapter (``importers.adapt.StudyImport``)."""

    kinds = frozenset({"http"})

    def adapt(self, groups: Sequence[Group], options: ImportOptions) -> ImportedRun:
        made: list[tuple[str, int, int, ImportedTrial]] = []
        for g in groups:
            files = list(g.files)
            names = labels(files)
            scheme = str(common(p.params.get("scheme") for p in files) or "unknown")
            samples: list[Sample] = []
            wrk: dict[str, Any] = {}
            status: TrialStatus = "ok"
            error = None
            for i, p in enumerate(files):
                tot = p.totals
                samples += [retag(s, host=names[i], proc=None, scheme=scheme, side="receiver", direction="tx")
                            for s in p.samples if s.metric in _SAMPLES]
                errors = {**{k: int(v) for k, v in (p.extra.get("socket_errors") or {}).items()},
                          "status": int(tot.get("bad_status", 0))}
                wrk[names[i]] = {"gbps": tot["bytes"] * 8 / tot["seconds"] / 1e9 if tot.get("seconds") else None,
                                 "requests": int(tot["requests"]), "errors": errors, "latency_us": {},
                                 "requests_per_s": tot.get("requests_per_s"), "seconds": tot.get("seconds"),
                                 "percentiles_us": {pct: round(tot[f"latency.{k}"] * 1e6) for k, pct in _PCT.items()
                                                    if f"latency.{k}" in tot}}
                if tot.get("bad_status") and status == "ok":
                    status, error = "failed", (f"wrk in {names[i]}: {int(tot['bad_status'])} of "
                                               f"{int(tot['requests'])} responses were not 2xx/3xx, so its bytes "
                                               "are not the payload")
            conns = sum(int(p.params.get("connections") or 0) for p in files)
            threads = common(p.params.get("threads") for p in files)
            duration = max((float(p.totals.get("seconds") or 0) for p in files), default=0.0)
            params = {"scheme": scheme, "connections": conns, "threads": threads, "duration": duration,
                      "direction": "tx", "engine": common(p.params.get("engine") for p in files) or "wrk"}
            notes = file_notes(files, skip=("uses Requests/sec as printed",))
            notes.append("wrk prints the bytes it read to 3 significant digits: the application Gbps carries "
                         "that precision")
            if scheme == "unknown":
                notes.append("the files do not say the URL wrk fetched: the scheme is unknown")
            made.append((scheme, conns, int(threads or 0), ImportedTrial(
                f"{scheme}/c{conns}", params, tuple(samples), {"wrk": wrk, "layout": [{"client": n} for n in
                                                                                       names.values()]},
                g.files, status=status, error=error, notes=tuple(notes))))
        trials = []
        for scheme, conns, threads, t in made:
            several = len({th for s, c, th, _ in made if (s, c) == (scheme, conns)}) > 1
            trials.append(t if not several else ImportedTrial(**{**t.__dict__, "point": f"{t.point}/t{threads}"}))
        return ImportedRun(tuple(trials), {"trim": 0.0})
