"""fio's terse output (``--minimal``, ``--output-format=terse``; terse
versions 3 to 5), one ``;``-separated line per job, alone or among the
normal text it may be printed with.

Fields as fio's HOWTO lists them (the read block at fields 5-45, the write
block at 46-86 in versions 3, 4 and 5): per op its KiB moved (fio's "KB"
are KiB), KiB/s, IOPS, runtime (ms), submission/completion/total latency
(microseconds) with 20 ``P%=value`` completion-latency percentiles.  The
lines are turned into fio's JSON job objects and read by :mod:`.fio_json`'s
own builder: one set of storage records for both outputs.  The I/O count
of an op is its bytes over the block size the job's banner prints
(``bs=(R) 4096B-4096B, (W) ...``), else fio's IOPS x runtime (said).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from ..core.errors import InputError
from . import fio_json
from .model import ParsedFile, finite

FORMAT = "fio-terse"
HINT = "run fio with --output-format=json for the whole report (terse lines hold the totals only)"
_LINE = re.compile(r"^([345]);(fio-[^;]*);", re.M)
_BANNER = re.compile(r"^(\S+): \(g=(\d+)\): rw=(\w+), bs=\(R\) (\d+)B-(\d+)B, \(W\) (\d+)B-(\d+)B", re.M)
_READ, _WRITE = 5, 46            # where each op's block starts (terse versions 3, 4, 5)


def _op(f: list[str], at: int, bs: int | None, name: str, notes: list[str], op: str) -> dict[str, Any]:
    kib = finite(f[at], f"{op} KB", name)
    iops = finite(f[at + 2], f"{op} IOPS", name)
    runtime = finite(f[at + 3], f"{op} runtime", name)
    ios = kib * 1024 / bs if bs else iops * runtime / 1000
    if kib and not bs:
        notes.append(f"{op}: no block size in the file: its I/O count is fio's IOPS x runtime")
    pct: dict[str, float] = {}
    for cell in f[at + 12:at + 32]:
        k, _, v = cell.partition("%=")
        if k and v and float(k) > 0:
            pct[f"{float(k):.6f}"] = finite(v, f"{op} clat percentile", name) * 1000     # us -> ns
    return {"io_bytes": kib * 1024, "runtime": runtime, "iops": iops, "total_ios": round(ios),
            "clat_ns": {"percentile": pct}}


def parse(text: str, name: str) -> ParsedFile:
    lines = [ln.strip() for ln in text.splitlines() if _LINE.match(ln.strip())]
    if not lines:
        raise InputError("no fio terse line (\"3;fio-...;job;...\")", where=name, hint=HINT)
    banners = {m[1]: m for m in _BANNER.finditer(text)}
    notes = ["fio terse output: totals per job, no document timestamp (times are relative)"]
    jobs = []
    version = None
    for ln in lines:
        f = ln.split(";")
        if len(f) < _WRITE + 4:
            raise InputError(f"a fio terse line of {len(f)} fields, fewer than a version {f[0]} line has",
                             where=name, hint=HINT)
        version = f[1].removeprefix("fio-")
        b = banners.get(f[2])
        rbs = int(b[4]) if b and b[4] == b[5] else None
        wbs = int(b[6]) if b and b[6] == b[7] else None
        opts = {"rw": b[3]} if b else {}
        if rbs and rbs == wbs:
            opts["bs"] = str(rbs)
        jobs.append({"jobname": f[2], "groupid": int(f[3]) if f[3].isdigit() else 0,
                     "error": int(f[4]) if f[4].isdigit() else 0, "job options": opts,
                     "read": _op(f, _READ, rbs, name, notes, "read"),
                     "write": _op(f, _WRITE, wbs, name, notes, "write")})
    p = fio_json._one(jobs, {}, name, version, 3, None, notes, None)
    return dataclasses.replace(p, format=FORMAT, notes=tuple(dict.fromkeys(p.notes)))
