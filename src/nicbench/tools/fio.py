"""fio as the storage study's initiator: argv and its JSON output.

fio prints progress and engine lines around its JSON (``fio: connected to
NBD server``), so the document is cut from the first ``{`` to the last ``}``.
One fio process per initiator host runs one job per LUN it drives; a job's
``read``/``write`` sections carry bytes, IOs, bandwidth (bytes/s), IOPS and
latency in ns, measured after ``ramp_time`` for ``runtime`` ms.

With ``--status-interval`` fio prints one whole document per interval before
the final one: each job's counts so far, its ``runtime`` (ms measured so far)
and the report's ``timestamp_ms`` (the host's clock).  Reports made during
the ramp count from the job's start; at the ramp's end fio resets the counts
and the runtime, so a report belongs to the measured span when its anchor
(``timestamp_ms - runtime``) is the measured span's.  ``progress`` gives each
job's measured readings, from which the storage study places every job's
bytes on its own timeline.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal

from ..core.errors import ToolError, tail
from .base import MinVersion, damage_is_a_tool_error

MIN_NBD = MinVersion("fio", (3, 19), "the nbd ioengine the lab's NBD LUNs are driven with came in fio 3.19")

Op = Literal["read", "write", "readwrite"]
RW = {("read", "sequential"): "read", ("write", "sequential"): "write", ("readwrite", "sequential"): "rw",
      ("read", "random"): "randread", ("write", "random"): "randwrite", ("readwrite", "random"): "randrw"}


def argv(uris: list[tuple[str, str]], *, op: Op, pattern: str, block_size: int, iodepth: int, numjobs: int,
         runtime: float, ramp: float, engine: str = "nbd", status_ms: int | None = None) -> list[str]:
    """One fio run: global options, then one job per (name, uri); a status
    report every ``status_ms`` ms when given."""
    # --thread: jobs are threads of one process, so its CPU is the tool's CPU
    out = ["fio", "--output-format=json", "--thread", "--time_based", f"--runtime={int(round(runtime))}",
           f"--ramp_time={int(round(ramp))}", f"--ioengine={engine}", f"--rw={RW[(op, pattern)]}",
           f"--bs={block_size}", f"--iodepth={iodepth}", f"--numjobs={numjobs}", "--direct=1"]
    if status_ms:
        out.append(f"--status-interval={status_ms}ms")
    if op == "readwrite":
        out.append("--rwmixread=50")
    for name, where in uris:
        # a block device visible on the initiator (iSCSI/NVMe-TCP/FCoE LUNs logged in by the host), else an NBD URI
        out += [f"--name={name}", f"--filename={where}" if where.startswith("/dev/") else f"--uri={where}"]
    return out


@dataclass(frozen=True)
class IoStats:
    bytes: int
    ios: int
    runtime_s: float
    iops: float
    bw_bytes: float                           # bytes/s as fio computed it
    lat_ns: dict[str, float] = field(default_factory=dict)
    percentiles_ns: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Job:
    name: str
    error: int
    read: IoStats
    write: IoStats
    usr_cpu: float                            # percent of one CPU, fio's own threads
    sys_cpu: float


@dataclass(frozen=True)
class FioReport:
    jobs: tuple[Job, ...]
    timestamp_ms: int | None
    errors: tuple[str, ...]                   # fio's own error lines around the JSON

    def total(self, op: str) -> IoStats:
        parts = [getattr(j, op) for j in self.jobs]
        runtime = max((p.runtime_s for p in parts), default=0.0)
        return IoStats(sum(p.bytes for p in parts), sum(p.ios for p in parts), runtime,
                       sum(p.iops for p in parts), sum(p.bw_bytes for p in parts))


def status_ms(duration: float) -> int:
    """The status report interval for a run of ``duration`` measured seconds:
    an eighth of it, between 100 ms and 1 s, in steps of 50 ms.  The storage
    study trims one interval at each end of the window its jobs share, so at
    least three quarters of the run is measured; each report costs about 6 kB
    of JSON per job, so it is no finer than it needs to be."""
    return int(round(min(1000.0, max(100.0, duration * 1000 / 8)) / 50) * 50)


def _io(d: dict) -> IoStats:
    clat = d.get("clat_ns") or {}
    pct = {k.rstrip("0").rstrip(".") if "." in k else k: float(v)
           for k, v in (clat.get("percentile") or {}).items()}
    return IoStats(int(d.get("io_bytes", 0)), int(d.get("total_ios", 0)), float(d.get("runtime", 0)) / 1000,
                   float(d.get("iops", 0.0)), float(d.get("bw_bytes", 0.0)),
                   {k: float(clat[k]) for k in ("min", "max", "mean", "stddev") if k in clat}, pct)


def documents(text: str) -> list[dict]:
    """fio's JSON documents in ``text``, in order: objects opening at a line
    start that parse and name "fio version" (logs around them may hold braces,
    ``--output-format=json,normal`` appends text, ``--status-interval`` prints
    one document per report).  ToolError when there is none."""
    dec = json.JSONDecoder()
    err = None
    out: list[dict] = []
    pos = 0
    for m in re.finditer(r"^[ \t]*\{", text, re.M):
        if m.start() < pos:
            continue                          # inside a document already read
        try:
            obj, end = dec.raw_decode(text, m.end() - 1)
        except json.JSONDecodeError as e:
            err = err or f"{e.msg} at char {e.pos}"
            continue
        except RecursionError:
            raise ToolError("fio JSON is nested too deeply to be fio output") from None
        if isinstance(obj, dict) and "fio version" in obj:
            out.append(obj)
            pos = end
    if out:
        return out
    if err:
        raise ToolError(f"fio JSON not understood: {err}: {tail(text)}")
    raise ToolError(f"fio printed no JSON: {tail(text) or 'no output'}")


@damage_is_a_tool_error("fio", "see the raw output file")
def final_document(text: str) -> dict:
    """The run's summary: the last fio document in ``text`` (status reports
    come before it; see ``documents``)."""
    return documents(text)[-1]


@dataclass(frozen=True)
class Reading:
    """One job's counts for one direction as one status report gave them."""

    at_ms: int                                # the report's timestamp_ms: the host's clock
    runtime_ms: int                           # the job's measured time so far
    bytes: int
    ios: int

    @property
    def anchor_ms(self) -> int:
        """When this reading says the job's counting began."""
        return self.at_ms - self.runtime_ms


def _jobs(d: dict) -> list[dict]:
    jobs = d.get("jobs")
    if not isinstance(jobs, list) or not all(isinstance(j, dict) for j in jobs):
        raise ToolError("fio JSON has no list of jobs")
    return jobs


def progress(text: str) -> dict[tuple[str, str], list[Reading]]:
    """(job key, "read"|"write") -> the readings of the measured span, in time
    order, the final document's last.  A job's key is ``name#index`` (numjobs
    clones share a name).  Readings made during the ramp (an earlier anchor,
    counts reset after them) and repeats are left out; a job that never moved
    data in a direction has no entry for it."""
    series: dict[tuple[str, str], list[Reading]] = {}
    for d in documents(text):
        at = d.get("timestamp_ms")
        if not isinstance(at, int) or isinstance(at, bool):
            raise ToolError("fio JSON report has no timestamp_ms")
        for i, j in enumerate(_jobs(d)):
            for op in ("read", "write"):
                sec = j.get(op) or {}
                try:
                    r = Reading(at, int(sec.get("runtime", 0)), int(sec.get("io_bytes", 0)),
                                int(sec.get("total_ios", 0)))
                except (TypeError, ValueError, OverflowError):
                    raise ToolError(f"fio job {j.get('jobname')}: {op} counts are not numbers") from None
                if r.runtime_ms <= 0 or r.ios <= 0:
                    continue
                series.setdefault((f"{j.get('jobname')}#{i}", op), []).append(r)
    out = {}
    for key, rs in series.items():
        final = rs[-1]
        # the measured span's readings: counts never fall and runtime grows; a
        # ramp report's anchor lies a whole ramp (>= 1 s) before the span's
        kept: list[Reading] = []
        for r in rs:
            if abs(r.anchor_ms - final.anchor_ms) > 500 and r is not final:
                continue
            if kept and r.runtime_ms <= kept[-1].runtime_ms:
                if r.bytes == kept[-1].bytes:
                    continue                  # the final document repeats the last report
                kept = [k for k in kept if k.runtime_ms < r.runtime_ms]
            kept.append(r)
        if any(b.bytes < a.bytes or b.ios < a.ios for a, b in zip(kept, kept[1:], strict=False)):
            raise ToolError(f"fio job {key[0]}: its {key[1]} counts went backwards between reports")
        out[key] = kept
    return out


@damage_is_a_tool_error("fio", "see the raw output file: was fio killed mid-report?")
def parse(text: str) -> FioReport:
    """The final JSON document of one fio run; ToolError when there is none."""
    errors = tuple(ln.strip() for ln in text.splitlines()
                   if ln.startswith("fio: ") and "connected to" not in ln)
    d = final_document(text)
    jobs = tuple(Job(str(j.get("jobname")), int(j.get("error", 0)), _io(j.get("read", {})), _io(j.get("write", {})),
                     float(j.get("usr_cpu", 0.0)), float(j.get("sys_cpu", 0.0))) for j in _jobs(d))
    return FioReport(jobs, d.get("timestamp_ms"), errors)
