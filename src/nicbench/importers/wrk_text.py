"""wrk and wrk2 text output (and nicbench's own wrk.lua result block).

Figures as wrk prints them: Requests/sec, bytes read (binary units, 3
significant digits), socket errors, non-2xx/3xx responses, the --latency
percentiles (wrk's four, or wrk2's HdrHistogram block).  No wall clock.
"""

from __future__ import annotations

import re

from ..core.errors import InputError, ToolError
from ..tools import wrk as tool
from .model import ParsedFile, finite, no_point, sample

FORMAT = "wrk-text"
HINT = "save wrk's whole output (run it with --latency for percentiles)"
_LABELS = {50.0: "p50", 90.0: "p90", 99.0: "p99"}
_URL = re.compile(r"\b(https?)://[^\s]+", re.I)
# the last line of wrk's (and wrk2's) summary: after it only a Lua done() hook prints
_LAST = re.compile(r"^\s*Transfer/sec:", re.M)


def parse(text: str, name: str) -> ParsedFile:
    if tool.BEGIN in text:
        try:
            r = tool.parse(text)
        except ToolError as e:
            raise InputError(e.message, where=name, hint=e.hint) from None
        w = tool.WrkText(r.requests, r.duration_s, r.bytes, r.requests / r.duration_s if r.duration_s else None,
                         None, {k: v for k, v in r.errors.items() if k != "status"}, r.bad_status, None, None,
                         {float(k): v / 1e6 for k, v in r.percentiles_us.items()}, False)
        fmt = "wrk-lua"
    else:
        parsed = tool.parse_text(text)
        if parsed is None:
            raise InputError("no wrk summary (\"N requests in T, X read\") in the text", where=name, hint=HINT)
        w, fmt = parsed, FORMAT
        if not _LAST.search(text, text.find(" requests in ")):
            # cut off: the socket error and non-2xx lines come before Transfer/sec, so
            # a clean-looking point could be one whose responses were errors
            raise InputError("wrk's summary ends before its last line (Transfer/sec:): the text was cut off, and "
                             "the socket error and non-2xx/3xx counts wrk prints before that line may be lost",
                             where=name, hint=HINT)
    dur = finite(w.duration_s, "duration", name)
    if w.requests == 0:
        raise no_point(name, f"0 requests completed in {dur:g} s "
                       f"(socket errors: {sum(w.socket_errors.values())})",
                       "the server refused or reset every request; check the URL and the server")
    notes = ["wrk prints bytes read to 3 significant digits; the point uses Requests/sec as printed"]
    if w.hdr:
        notes.append("latency percentiles from wrk2's HdrHistogram block (corrected for coordinated omission)")
    errs = sum(w.socket_errors.values())
    if errs or w.bad_status:
        notes.append(f"{errs} socket errors and {w.bad_status} non-2xx/3xx responses against {w.requests} requests")
    totals = {"requests": float(w.requests), "seconds": dur, "bytes": w.bytes, "socket_errors": float(errs),
              "bad_status": float(w.bad_status)}
    if w.requests_per_s is not None:
        totals["requests_per_s"] = w.requests_per_s
    tags = dict(host=name, proc="0")
    samples = [sample("http.requests", w.requests, "count", 0.0, dur, **tags),
               sample("http.bytes", w.bytes, "bytes", 0.0, dur, **tags),
               sample("http.socket_errors", errs, "count", 0.0, dur, **tags),
               sample("http.bad_status", w.bad_status, "count", 0.0, dur, **tags)]
    for pct, label in _LABELS.items():
        if pct in w.percentiles_s:
            totals[f"latency.{label}"] = w.percentiles_s[pct]
            samples.append(sample(f"http.latency.{label}", w.percentiles_s[pct], "s", 0.0, dur, **tags))
    params: dict[str, object] = {"engine": "wrk2" if w.hdr or "calibration" in text else "wrk",
                                 "threads": w.threads, "connections": w.connections}
    url = _URL.search(text)
    if url:
        params["scheme"], params["url"] = url[1].lower(), url[0]
    return ParsedFile(name=name, format=fmt, tool="wrk", version=None, role="client", kind="http", params=params,
                      samples=samples, totals=totals, relative_time=True, notes=tuple(notes),
                      extra={"socket_errors": dict(w.socket_errors)})
