"""fio JSON, 2.x and 3.x: ``jobs`` or client/server ``client_stats`` (the
"All clients" entry is the sum and is used alone when present), embedded in
a log or after ``--output-format=json,normal`` text.

The document is the object that parses and carries "fio version" (never
first-``{``-to-last-``}``: logs hold other braces).  2.x has no ``bw_bytes``
or ``total_ios`` and its ``io_bytes`` is KiB (named ``io_bytes`` all the
same); 3.x gives ``io_bytes`` in bytes.  Latency percentiles come from
``clat_ns`` (3.x) or ``clat`` in microseconds (2.x).
"""

from __future__ import annotations

from typing import Any

from ..core.errors import InputError, ToolError
from ..tools import fio as tool
from .model import ParsedFile, finite, no_point, sample

FORMAT = "fio-json"
HINT = "run fio with --output-format=json (or json+)"
_PCT = {"50.000000": "p50", "90.000000": "p90", "99.000000": "p99", "99.900000": "p99.9"}


def find_document(text: str, name: str) -> dict[str, Any]:
    """The fio run's summary in ``text``, the last document when ``--status-interval``
    printed reports before it (see :func:`nicbench.tools.fio.documents`)."""
    try:
        return tool.final_document(text)
    except ToolError as e:
        raise InputError(e.message, where=name, hint=HINT) from None


def parse(text: str, name: str) -> ParsedFile:
    d = find_document(text, name)
    ver = str(d.get("fio version") or "").replace("fio-", "") or None
    major = int(ver.split(".")[0]) if ver and ver.split(".")[0].isdigit() else 3
    jobs = d.get("client_stats") if isinstance(d.get("client_stats"), list) else d.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise no_point(name, "the fio document has no jobs", HINT)
    notes: list[str] = []
    allc = [j for j in jobs if isinstance(j, dict) and j.get("jobname") == "All clients"]
    if allc:
        jobs = allc
        notes.append("client/server run: the \"All clients\" entry is used (it sums every client)")
    ts = d.get("timestamp")
    t_end = finite(ts, "timestamp", name) if ts is not None else None
    totals: dict[str, float] = {}
    samples = []
    dropped = []
    params: dict[str, Any] = {"engine": "fio", "jobs": len(jobs)}
    for j in jobs:
        if not isinstance(j, dict):
            continue
        if j.get("error"):
            dropped.append(f"job {j.get('jobname')!r} reported error {j.get('error')}")
        opts = j.get("job options") if isinstance(j.get("job options"), dict) else {}
        for k in ("rw", "bs", "iodepth", "numjobs", "ioengine"):
            if isinstance(opts, dict) and k in opts:
                params.setdefault(k, opts[k])
        for op in ("read", "write"):
            io = j.get(op)
            if not isinstance(io, dict):
                continue
            raw = finite(io.get("io_bytes", 0), f"{op}.io_bytes", name)
            nbytes = raw * 1024 if major < 3 else raw
            ios = io.get("total_ios")
            runtime = finite(io.get("runtime", 0), f"{op}.runtime", name) / 1000
            if nbytes <= 0:
                continue
            n_ios = finite(ios, f"{op}.total_ios", name) if ios is not None else \
                finite(io.get("iops", 0), f"{op}.iops", name) * runtime
            totals[f"{op}.bytes"] = totals.get(f"{op}.bytes", 0) + nbytes
            totals[f"{op}.ios"] = totals.get(f"{op}.ios", 0) + round(n_ios)
            totals[f"{op}.seconds"] = max(totals.get(f"{op}.seconds", 0), runtime)
            t1 = t_end if t_end is not None else runtime
            t0 = t1 - runtime
            tags = dict(host=name, proc=str(j.get("jobname")), op=op)
            samples.append(sample("storage.bytes", nbytes, "bytes", t0, t1, **tags))
            samples.append(sample("storage.ios", round(n_ios), "count", t0, t1, **tags))
            clat = io.get("clat_ns") if isinstance(io.get("clat_ns"), dict) else None
            scale = 1e-9
            if clat is None and isinstance(io.get("clat"), dict):
                clat, scale = io["clat"], 1e-6
            pct = clat.get("percentile") if isinstance(clat, dict) else None
            if isinstance(pct, dict):
                for k, label in _PCT.items():
                    if k in pct:
                        v = finite(pct[k], f"{op}.clat percentile {k}", name) * scale
                        samples.append(sample(f"storage.latency.{label}", v, "s", t0, t1, **tags))
                        totals[f"{op}.latency.{label}"] = max(totals.get(f"{op}.latency.{label}", 0.0), v)
    if not any(totals.get(f"{op}.bytes") for op in ("read", "write")):
        raise no_point(name, "no job moved any bytes", "check the job's target and its error lines")
    if len(jobs) > 1 and any(k.startswith(("read.latency", "write.latency")) for k in totals):
        notes.append("latency percentiles: the worst job's value (fio gives no merged percentiles per job list)")
    ops = [op for op in ("read", "write") if totals.get(f"{op}.bytes")]
    params["op"] = "readwrite" if len(ops) == 2 else ops[0]
    if t_end is not None:
        notes.append("times end at the document's timestamp (whole seconds), each job spans its runtime")
    return ParsedFile(name=name, format=FORMAT, tool="fio", version=ver, role="client" if allc else None,
                      kind="storage", params=params, samples=samples, totals=totals,
                      relative_time=t_end is None, notes=tuple(notes), dropped=tuple(dropped), start=None)
