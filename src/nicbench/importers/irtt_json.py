"""irtt client JSON (``irtt client -o FILE.json``, json_format 1, irtt 0.9+).

Read with :mod:`nicbench.tools.irtt`'s parser (the latency study's engine):
every time in irtt's JSON is nanoseconds; here seconds.  Its per-request
round trips are kept whole (``client_rtt``: the client's receive less its
send, the server's turnaround included, as the latency study's engines time
a round trip; irtt's own ``rtt`` leaves the turnaround out and is kept as
its stated mean/median).  Send times are the client's wall clock.

Kind ``rr`` (the latency study's probes): params ``protocol`` udp,
``message_size`` (irtt's ``length``, bytes per packet, its header
included), ``rate`` (requests/s from the interval), ``duration``; totals as
:mod:`.sockperf_text` (``latency.*`` seconds, ``transactions``, ``sent``,
``lost``, ``transactions_per_s``); ``extra["rtt"]`` the round trips.  The
headline is irtt's own: its mean RTT.
"""

from __future__ import annotations

import json
from typing import Any

from ..core.errors import InputError, ToolError
from ..core.histogram import LatencyHistogram
from ..tools import irtt as tool
from ..tools.rtt import RttSamples
from .model import ParsedFile

FORMAT = "irtt-json"
HINT = "save irtt's JSON: irtt client -o FILE.json ... (irtt 0.9 or later)"


def parse(text: str, name: str) -> ParsedFile:
    try:
        run = tool.parse(text, name)
    except ToolError as e:
        raise InputError(e.message, where=name, hint=e.hint or HINT) from None
    s = run.summary
    rtt = RttSamples(run.client_rtt, run.samples.sent, "epoch")
    whole = LatencyHistogram.of(run.client_rtt)
    totals: dict[str, float] = {"transactions": float(s.count), "sent": float(run.sent), "lost": float(len(run.lost)),
                                "latency.mean": whole.mean, "latency.min": whole.min, "latency.max": whole.max}
    for k, pct in (("p50", 50.0), ("p90", 90.0), ("p99", 99.0)):
        totals[f"latency.{k}"] = whole.percentile(pct)
    if s.duration:
        totals["seconds"] = s.duration
        totals["transactions_per_s"] = s.count / s.duration
    own = s.mean if s.mean is not None else whole.mean
    notes = [f"irtt: {s.count} of {run.sent} requests answered ({len(run.lost)} lost), every {run.interval:g} s; "
             f"round trips are the client's receive less its send (the server's turnaround included); irtt's own "
             f"rtt, without it, has mean {own * 1e3:.6g} ms"]
    misses = tool.timer_misses(run)
    if misses:
        notes.append(f"irtt's timer missed {misses} of {run.expected} sends (a busy client)")
    params: dict[str, Any] = {"engine": "irtt", "protocol": "udp", "message_size": run.length,
                              "rate": round(1.0 / run.interval) if run.interval > 0 else None,
                              "duration": run.duration, "mode": "isochronous"}
    sent = run.samples.sent
    extra: dict[str, Any] = {"stated": s, "rtt": rtt, "expected": run.expected,
                             "headline": ("round trip, mean (irtt's rtt, turnaround excluded)", own, "s")}
    if run.server_time is not None:
        extra["server_turnaround_max"] = max(run.server_time)
    return ParsedFile(name=name, format=FORMAT, tool="irtt", version=_version(text), role="client", kind="rr",
                      params=params, samples=[], totals=totals, relative_time=False, notes=tuple(notes),
                      start=sent[0] if sent else None, extra=extra)


def _version(text: str) -> str | None:
    """irtt's version string (``version.irtt``), when the JSON has one."""
    try:
        v = json.loads(text).get("version", {}).get("irtt")
    except (ValueError, AttributeError, RecursionError):
        return None
    return str(v) if v else None
