"""Request/response results run elsewhere, as the latency study's trials:
netperf TCP_RR/UDP_RR (classic tables, omni ``-o``/``-k`` selectors),
sockperf ping-pong and under-load (its summary, or its ``--full-log``) and
irtt JSON -- the latter two the study's own engines, so their records are
the ones its runner stores.

Shape, as :mod:`.runner` records it: the point key of the plan schema
(``tcp/netperf/m1/idle``: protocol, engine, message size, condition); params
protocol, engine (the files' tool), message_size (bytes, request = response),
condition ``idle`` (netperf runs the round trips alone), rate ``max`` and
waiting "back to back" (netperf sends the next request when the answer came),
duration (s, when the file says it); trial meta ``probes``: one record per
file (each file is one netperf process: a probe), ``latency.requests``
(and ``latency.rtt_mean`` / ``latency.rtt_max``) Samples over the test when
the file gives its elapsed time.

Files with every round trip (sockperf's full log, irtt's JSON) make the
probe record the runner makes (:func:`.engines.base.exact`: the exact
histogram, the window, 0.5 s bins of ``latency.requests``/``rtt_mean``/
``rtt_max``).  A summary (netperf; sockperf's stdout) differs from a runner's in one way:
the tool states its percentiles, it keeps no per-request times, so the
record has no histogram (``percentiles_bound`` ``"stated"``) and carries the
figures the file states, in seconds: ``percentiles`` (p50/p90/p99 as
printed), ``mean``, ``min``, ``max`` (None when not printed), ``rate``
(transactions/s), ``count`` (transactions = rate x elapsed, when elapsed is
printed) and ``stated`` (everything the file said, stddev and burst
included). The one figure derived: a netperf file that states no latency at
all (its classic table, ``-o THROUGHPUT``) without a first burst has its
mean round trip as 1 / its transaction rate (one transaction outstanding:
each lasts that long, the client's own time between them included), the
record says ``derived`` and the notes say so; with a burst, or from another
tool, a file that states no round-trip time is refused. A netperf file that
does not say its request size ran with netperf's default of 1 byte, said so.
sockperf's "latency" without ``--full-rtt`` is half the round trip: its
parser doubles it, and the notes say so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ...core.errors import InputError
from ...importers.adapt import ImportedRun, ImportedTrial, ImportOptions, common, file_notes, labels
from ...importers.group import Group
from ...importers.model import ParsedFile, sample
from ...plan.studies.latency import BACK_TO_BACK, WAITING, point_key
from ...records import make_tags
from ...tools.rtt import RttSamples
from .engines.base import bins, exact, stated

# the omni output selectors that make a usable file (netperf 2.5+)
SELECTORS = ("THROUGHPUT,THROUGHPUT_UNITS,PROTOCOL,REQUEST_SIZE,RESPONSE_SIZE,ELAPSED_TIME,MIN_LATENCY,"
             "MEAN_LATENCY,P50_LATENCY,P90_LATENCY,P99_LATENCY,MAX_LATENCY,STDDEV_LATENCY")
HINT = f"run netperf -t TCP_RR (or UDP_RR) ... -- -o {SELECTORS}"
# the round-trip figures a file may state (totals ``latency.<name>``, seconds)
ROUND_TRIP = ("p50", "p90", "p99", "mean", "min", "max")


class LatencyImport:
    """The latency study's import adapter (``importers.adapt.StudyImport``)."""

    kinds = frozenset({"rr"})

    def adapt(self, groups: Sequence[Group], options: ImportOptions) -> ImportedRun:
        trials = [_trial(g, options) for g in groups]
        probes = [h for t in trials for h in t.meta["probes"]]
        durations = {t.params["duration"] for t in trials}
        engines = {str(t.params["engine"]): t.meta["engine_version"] or "(version not in the files)"
                   for t in trials}
        rates = {t.params["rate"] for t in trials}
        return ImportedRun(tuple(trials), {
            "engine": common(engines) or ", ".join(sorted(engines)),
            "engine_version": common(t.meta["engine_version"] for t in trials), "engines": engines,
            "probe_clients": list(dict.fromkeys(probes)), "load": None, "load_clients": [],
            "rate": rates.pop() if len(rates) == 1 else None,
            "duration": durations.pop() if len(durations) == 1 else None})


def _names(files: Sequence[ParsedFile]) -> str:
    return ", ".join(p.name for p in files)


def _protocol(files: Sequence[ParsedFile], options: ImportOptions) -> str:
    tests = {str(p.params.get("test") or "") for p in files}
    if any("CONNECT" in t for t in tests):
        raise InputError("TCP_CRR opens a connection for every transaction: its times are not the latency "
                         "study's round trips", where=_names(files), hint="import TCP_RR or UDP_RR results")
    protos = {p.params.get("protocol") or options.protocol for p in files}
    if len(protos) != 1 or None in protos:
        raise InputError("the file(s) do not say TCP or UDP" if None in protos else
                         f"files of one point say different protocols ({', '.join(sorted(map(str, protos)))})",
                         where=_names(files), hint="give it with --protocol tcp|udp, or import each protocol's "
                                                   f"files on their own; {HINT}")
    return str(protos.pop())


def _size(files: Sequence[ParsedFile], options: ImportOptions) -> tuple[int, str]:
    """(bytes of each request and answer, how it was known)."""
    req = {p.params.get("request_size", p.params.get("message_size")) for p in files}
    resp = {p.params.get("response_size", p.params.get("message_size")) for p in files}
    if req == {None} and resp == {None}:
        if options.io_size:
            return options.io_size, "as --io-size gave it (the file does not say it)"
        if files[0].tool == "netperf":
            # netperf's -r defaults to 1 byte each way: a file that does not say it ran with that
            return 1, "netperf's default (-r not in the file: 1 byte each way; --io-size gives another)"
        engine = files[0].tool
        raise InputError("the request and response sizes are not in the file", where=_names(files),
                         hint="give them with --io-size BYTES " + (
                             "(netperf's -r; its default is 1), or " + HINT if engine == "netperf" else
                             f"({engine}'s -m), or save the output with its command line"))
    if len(req) != 1 or req != resp or None in req:
        raise InputError(f"request size {'/'.join(sorted(map(str, req)))} B and response size "
                         f"{'/'.join(sorted(map(str, resp)))} B: the latency study's points send one size both "
                         "ways", where=_names(files), hint="import results of netperf -r N,N (or -r N)")
    return int(next(v for v in req if v is not None)), "file"


def _probe(p: ParsedFile) -> dict[str, Any]:
    """One file's probe record: what it states, in seconds (module docstring)."""
    if p.extra.get("rtt") is not None:
        return _exact(p)
    t = p.totals
    lat = {k: t[f"latency.{k}"] for k in (*ROUND_TRIP, "stddev") if f"latency.{k}" in t}
    secs = t.get("seconds")
    return {"percentiles_bound": "stated", "percentiles": {k: lat[k] for k in ("p50", "p90", "p99") if k in lat},
            "mean": lat.get("mean"), "min": lat.get("min"), "max": lat.get("max"),
            "rate": t["transactions_per_s"], "count": round(t["transactions"]) if "transactions" in t else None,
            "window": [0.0, secs] if secs else None,
            "stated": {**{f"{k}_s": v for k, v in lat.items()}, "transactions_per_s": t.get("transactions_per_s"),
                       "elapsed_s": secs, "burst": p.params.get("burst"), "test": p.params.get("test"),
                       **({"sent": int(t["sent"])} if "sent" in t else {}),
                       **({"lost": int(t["lost"])} if "lost" in t else {})}}


def _exact(p: ParsedFile) -> dict[str, Any]:
    """The runner's record from a file with every round trip: its exact
    histogram over the answered requests, the window on the file's clock
    (irtt: the wall clock; sockperf's full log: its process clock), the
    tool's own summary beside it."""
    rs: RttSamples = p.extra["rtt"]
    t = p.totals
    clock = "wall clock" if rs.clock == "epoch" else "sockperf's process clock"
    rec = exact(rs.rtt, list(rs.sent or ()), stated(p.extra["stated"]), sent=int(t.get("sent", len(rs))),
                lost=int(t.get("lost", 0)), clock=clock)
    rec["rate"] = t.get("transactions_per_s")
    return rec


def _trial(g: Group, options: ImportOptions) -> ImportedTrial:
    files = list(g.files)
    tools = {p.tool for p in files}
    if len(tools) > 1:
        raise InputError(f"files of one point from different tools ({', '.join(sorted(tools))})",
                         where=_names(files), hint="import each tool's files as their own run")
    engine = tools.pop()
    derived = []
    for i, p in enumerate(files):
        if not any(f"latency.{k}" in p.totals for k in ROUND_TRIP):
            rate = p.totals.get("transactions_per_s")
            if engine != "netperf" or not rate or p.params.get("burst"):
                raise InputError(f"no round-trip time in the file, only {rate or 0:.10g} transactions/s: the "
                                 "latency study needs netperf's latency selectors", where=p.name, hint=HINT)
            # one transaction outstanding (no burst): each lasts 1/rate, so that is the mean round
            # trip -- the client's own time between transactions included; marked derived
            files[i] = p = dataclasses.replace(p, totals={**p.totals, "latency.mean": 1.0 / rate})
            derived.append(p.name)
    proto = _protocol(files, options)
    size, how = _size(files, options)
    names = labels(files)
    probes: dict[str, dict[str, Any]] = {}
    samples = []
    for i, p in enumerate(files):
        rec = probes[names[i]] = _probe(p)
        if p.name in derived:
            rec["derived"] = ["mean"]
        tags = dict(host=names[i], engine=engine, protocol=proto)
        rec["engine"] = engine
        if "histogram" in rec:
            # every round trip: the runner's 0.5 s bins over the window
            rs: RttSamples = p.extra["rtt"]
            samples += bins("", make_tags(**tags), rs.sent or (), rs.rtt)
            continue
        if rec["window"]:
            a, b = rec["window"]
            if rec["count"] is not None:
                samples.append(sample("latency.requests", rec["count"], "count", a, b, **tags))
            for metric, k in (("latency.rtt_mean", "mean"), ("latency.rtt_max", "max")):
                if rec[k] is not None:
                    samples.append(sample(metric, rec[k], "s", a, b, **tags))
    notes = file_notes(files, skip=("classic netperf table", "sockperf's full log:"))
    for n in derived:
        notes.append(f"{n}: netperf printed no latency: the mean round trip is derived as 1 / its transaction "
                     "rate (one transaction outstanding; it includes the client's own time between "
                     "transactions), and there are no percentiles")
    if how != "file":
        notes.append(f"message size {size} B {how}")
    bursts = sorted({int(p.params["burst"]) for p in files if p.params.get("burst")})
    if bursts:
        notes.append(f"netperf's first burst {', '.join(map(str, bursts))}: more than one transaction was "
                     "outstanding, so its round trips include waiting behind each other (the study's probes "
                     "keep one outstanding)")
    if len(files) > 1 and any("histogram" not in r for r in probes.values()):
        notes.append(f"{len(files)} {engine} processes ran together: their stated percentiles cannot be merged, "
                     "so the point's p50/p90/p99 are left out (each probe's are under 'per probe')")
    duration = common(p.params.get("duration") or p.totals.get("seconds") for p in files)
    rates = {p.params.get("rate", "max") for p in files}
    rate = rates.pop() if len(rates) == 1 else None
    every = common(p.params.get("reply_every") for p in files)
    if rate == "max":
        waiting = BACK_TO_BACK if not bursts else f"{BACK_TO_BACK}, {bursts[-1] + 1} transactions outstanding"
    else:
        # as the study's runner says it (the engine's way of waiting between requests)
        waiting = WAITING.get(engine, "?") if rate is not None else "not in the file"
    if every and every != 1:
        waiting += f"; under-load: about one message in {every} answered"
    params = {"protocol": proto, "engine": engine, "message_size": size, "condition": "idle", "rate": rate,
              "duration": duration, "waiting": waiting}
    meta = {"engine": engine, "engine_version": common(p.version for p in files), "protocol": proto,
            "waiting": waiting, "probes": probes, "message_size_from": how}
    return ImportedTrial(point_key(proto, engine, size, "idle"), params, tuple(samples), meta, g.files,
                         notes=tuple(notes))
