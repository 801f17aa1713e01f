"""fio as the storage study's initiator: argv and its JSON output.

fio prints progress and engine lines around its JSON (``fio: connected to
NBD server``), so the document is cut from the first ``{`` to the last ``}``.
One fio process per initiator host runs one job per LUN it drives; a job's
``read``/``write`` sections carry bytes, IOs, bandwidth (bytes/s), IOPS and
latency in ns, measured after ``ramp_time`` for ``runtime`` ms.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Literal

from ..core.errors import ToolError, tail
from .base import MinVersion

MIN_NBD = MinVersion("fio", (3, 19), "the nbd ioengine the lab's NBD LUNs are driven with came in fio 3.19")

Op = Literal["read", "write", "readwrite"]
RW = {("read", "sequential"): "read", ("write", "sequential"): "write", ("readwrite", "sequential"): "rw",
      ("read", "random"): "randread", ("write", "random"): "randwrite", ("readwrite", "random"): "randrw"}


def argv(uris: list[tuple[str, str]], *, op: Op, pattern: str, block_size: int, iodepth: int, numjobs: int,
         runtime: float, ramp: float, engine: str = "nbd") -> list[str]:
    """One fio run: global options, then one job per (name, uri)."""
    # --thread: jobs are threads of one process, so its CPU is the tool's CPU
    out = ["fio", "--output-format=json", "--thread", "--time_based", f"--runtime={int(round(runtime))}",
           f"--ramp_time={int(round(ramp))}", f"--ioengine={engine}", f"--rw={RW[(op, pattern)]}",
           f"--bs={block_size}", f"--iodepth={iodepth}", f"--numjobs={numjobs}", "--direct=1"]
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


def _io(d: dict) -> IoStats:
    clat = d.get("clat_ns") or {}
    pct = {k.rstrip("0").rstrip(".") if "." in k else k: float(v)
           for k, v in (clat.get("percentile") or {}).items()}
    return IoStats(int(d.get("io_bytes", 0)), int(d.get("total_ios", 0)), float(d.get("runtime", 0)) / 1000,
                   float(d.get("iops", 0.0)), float(d.get("bw_bytes", 0.0)),
                   {k: float(clat[k]) for k in ("min", "max", "mean", "stddev") if k in clat}, pct)


def find_document(text: str) -> dict:
    """fio's JSON document in ``text``: the first object opening at a line start
    that parses and names "fio version" (logs around it may hold braces, and
    ``--output-format=json,normal`` appends text)."""
    dec = json.JSONDecoder()
    err = None
    for m in re.finditer(r"^[ \t]*\{", text, re.M):
        try:
            obj, _ = dec.raw_decode(text, m.end() - 1)
        except json.JSONDecodeError as e:
            err = err or f"{e.msg} at char {e.pos}"
            continue
        except RecursionError:
            raise ToolError("fio JSON is nested too deeply to be fio output") from None
        if isinstance(obj, dict) and "fio version" in obj:
            return obj
    if err:
        raise ToolError(f"fio JSON not understood: {err}: {tail(text)}")
    raise ToolError(f"fio printed no JSON: {tail(text) or 'no output'}")


def parse(text: str) -> FioReport:
    """The JSON document of one fio run; ToolError when there is none."""
    errors = tuple(ln.strip() for ln in text.splitlines()
                   if ln.startswith("fio: ") and "connected to" not in ln)
    d = find_document(text)
    jobs = tuple(Job(str(j.get("jobname")), int(j.get("error", 0)), _io(j.get("read", {})), _io(j.get("write", {})),
                     float(j.get("usr_cpu", 0.0)), float(j.get("sys_cpu", 0.0))) for j in d.get("jobs", []))
    return FioReport(jobs, d.get("timestamp_ms"), errors)
