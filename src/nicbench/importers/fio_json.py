"""fio JSON, 2.x and 3.x: ``jobs`` or client/server ``client_stats`` (the
"All clients" entry is the sum and is used alone when present), embedded in
a log or after ``--output-format=json,normal`` text.

The document is the object that parses and carries "fio version" (never
first-``{``-to-last-``}``: logs hold other braces).  2.x has no ``bw_bytes``
or ``total_ios`` and its ``io_bytes`` is KiB (named ``io_bytes`` all the
same); 3.x gives ``io_bytes`` in bytes.  Latency percentiles come from
``clat_ns`` (3.x) or ``clat`` in microseconds (2.x).

Jobs of one ``groupid`` run together; groups run one after another
(``stonewall``/``new_group``), so a document with several groups holds one
point per group: :func:`parse` returns the whole document with the
per-group files in ``extra["points"]`` (see :func:`nicbench.importers.points`),
each placed back to back ending at the document's timestamp.
"""

from __future__ import annotations

from typing import Any

from ..core.errors import InputError, ToolError
from ..core.units import UnitError, parse_size
from ..records import Sample
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


def _size(v: object) -> int | None:
    """fio's ``bs`` option as bytes (fio's k = 1024), None for ranges and split sizes."""
    try:
        return parse_size(str(v)) if isinstance(v, (str, int)) and not isinstance(v, bool) else None
    except UnitError:
        return None


def _op_samples(j: dict, op: str, major: int, name: str, t1: float, totals: dict[str, float],
                samples: list[Sample]) -> None:
    """One job's one op: bytes, I/Os and clat percentiles as samples ending at ``t1``."""
    io = j.get(op)
    if not isinstance(io, dict):
        return
    raw = finite(io.get("io_bytes", 0), f"{op}.io_bytes", name)
    nbytes = raw * 1024 if major < 3 else raw
    ios = io.get("total_ios")
    runtime = finite(io.get("runtime", 0), f"{op}.runtime", name) / 1000
    if nbytes <= 0:
        return
    n_ios = finite(ios, f"{op}.total_ios", name) if ios is not None else \
        finite(io.get("iops", 0), f"{op}.iops", name) * runtime
    totals[f"{op}.bytes"] = totals.get(f"{op}.bytes", 0) + nbytes
    totals[f"{op}.ios"] = totals.get(f"{op}.ios", 0) + round(n_ios)
    totals[f"{op}.seconds"] = max(totals.get(f"{op}.seconds", 0), runtime)
    t0 = t1 - runtime
    tags = dict(host=name, proc=str(j.get("jobname")), op=op, group=j.get("groupid", 0))
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


def _runtime(j: dict, major: int) -> float:
    """The longest op runtime of one job, seconds (0 when it moved nothing)."""
    out = 0.0
    for op in ("read", "write"):
        io = j.get(op)
        if isinstance(io, dict) and isinstance(io.get("runtime"), (int, float)) and io.get("io_bytes"):
            out = max(out, float(io["runtime"]) / 1000)
    return out


def _one(jobs: list[dict], d: dict, name: str, ver: str | None, major: int, t_end: float | None,
         notes: list[str], role: str | None, options_from: list[dict] | None = None) -> ParsedFile:
    """The ParsedFile of jobs that ran together (one group); their options
    from ``options_from`` when given (client/server: "All clients" has none)."""
    totals: dict[str, float] = {}
    samples: list[Sample] = []
    dropped = []
    glob = d.get("global options") if isinstance(d.get("global options"), dict) else {}
    assert isinstance(glob, dict)
    params: dict[str, Any] = {"engine": "fio", "jobs": len(jobs)}
    for j in options_from or jobs:
        opts = j.get("job options") if isinstance(j.get("job options"), dict) else {}
        assert isinstance(opts, dict)
        for k in ("rw", "bs", "iodepth", "numjobs", "ioengine"):
            v = opts.get(k, glob.get(k))
            if v is not None:
                params.setdefault(k, v)
    for j in jobs:
        if j.get("error"):
            dropped.append(f"job {j.get('jobname')!r} reported error {j.get('error')}")
        for op in ("read", "write"):
            _op_samples(j, op, major, name, t_end if t_end is not None else _runtime(j, major), totals, samples)
    if not any(totals.get(f"{op}.bytes") for op in ("read", "write")):
        raise no_point(name, "no job moved any bytes", "check the job's target and its error lines")
    notes = list(notes)
    if len(jobs) > 1 and any(k.startswith(("read.latency", "write.latency")) for k in totals):
        notes.append("latency percentiles: the worst job's value (fio gives no merged percentiles per job list)")
    ops = [op for op in ("read", "write") if totals.get(f"{op}.bytes")]
    params["op"] = "readwrite" if len(ops) == 2 else ops[0]
    bs = _size(params.get("bs"))
    if bs is not None:
        params["block_size"] = bs
    elif "bs" in params:
        notes.append(f"block size {params['bs']!r} is not one size: the point carries none")
    if isinstance(params.get("rw"), str):
        params["pattern"] = "random" if params["rw"].startswith("rand") else "sequential"
    return ParsedFile(name=name, format=FORMAT, tool="fio", version=ver, role=role,  # type: ignore[arg-type]
                      kind="storage", params=params, samples=samples, totals=totals,
                      relative_time=t_end is None, notes=tuple(notes), dropped=tuple(dropped), start=None)


def parse(text: str, name: str) -> ParsedFile:
    d = find_document(text, name)
    ver = str(d.get("fio version") or "").replace("fio-", "") or None
    major = int(ver.split(".")[0]) if ver and ver.split(".")[0].isdigit() else 3
    jobs = d.get("client_stats") if isinstance(d.get("client_stats"), list) else d.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise no_point(name, "the fio document has no jobs", HINT)
    jobs = [j for j in jobs if isinstance(j, dict)]
    notes: list[str] = []
    allc = [j for j in jobs if j.get("jobname") == "All clients"]
    each = [j for j in jobs if j.get("jobname") != "All clients"] if allc else None
    if allc:
        jobs = allc
        notes.append("client/server run: the \"All clients\" entry is used (it sums every client)")
    ts = d.get("timestamp")
    t_end = finite(ts, "timestamp", name) if ts is not None else None
    if t_end is not None:
        notes.append("times end at the document's timestamp (whole seconds), each job spans its runtime")
    role = "client" if allc else None
    groups: dict[int, list[dict]] = {}
    for j in jobs:
        gid = j.get("groupid", 0)
        groups.setdefault(gid if isinstance(gid, int) and not isinstance(gid, bool) else 0, []).append(j)
    moved = {g: js for g, js in groups.items() if any(_runtime(j, major) > 0 for j in js)}
    whole = _one(jobs, d, name, ver, major, t_end, notes, role, each)
    if len(moved) < 2:
        return whole
    # groups ran one after another: back to back, the last ending at the timestamp
    points = []
    end = t_end
    for g in sorted(moved, reverse=True):
        span = max(_runtime(j, major) for j in moved[g])
        g_end = end if end is not None else None
        note = (f"job group {g} of {len(moved)} (fio runs groups one after another): one point of its own"
                + ("; placed back to back before the later groups" if t_end is not None else ""))
        p = _one(moved[g], d, name, ver, major, g_end, [*notes, note], role,
                 [j for j in each if j.get("groupid", 0) == g] if each else None)
        points.append(ParsedFile(**{**p.__dict__, "extra": {"group": g}}))
        end = g_end - span if g_end is not None else None
    points.reverse()
    return ParsedFile(**{**whole.__dict__, "extra": {"points": tuple(points)},
                         "notes": (*whole.notes, f"{len(moved)} job groups ran one after another: one point each")})
