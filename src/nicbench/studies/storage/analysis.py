"""Storage points (seed 004): MB/s, IOPS and CPU per op and block size.

Per trial, each op direction (read, write) sums every fio job's bytes and
IOs over the window all jobs share, as the TCP study does for its clients.
fio's status reports place each job's bytes on its own timeline: jobs
connect to their LUNs one after another, so their measured spans are
staggered (tens of ms under load), and a job that runs before the others
have started moves more than its share.  Summing each job's average over its
own span read above what the wire carries (seen: 103 % of the ceiling).  The
window runs from the latest job start to the earliest job end, trimmed by
one report interval at each end so no interval that saw the stagger counts;
inside it every job's reports are whole or cut pro rata.  Runs recorded
before per-interval samples (one sample per initiator, no ``proc`` tag), and
iscsi-perf's whole seconds, keep the sum over the union of the initiators'
spans.  MB = 10^6 bytes.
The ceiling is the transport's (NBD over TCP here) at the link's speed and
MTU for that block size; ``readwrite`` uses both directions of the link.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ...analysis.aggregate import NoSharedWindow, aggregate, frames_carried
from ...analysis.counters import Counters, counter_warnings, counters, drops
from ...analysis.cpu import CpuUsage, cpu_usage, cpu_warnings
from ...analysis.trials import (
    ABOVE_CEILING_TOLERANCE,
    LinkInfo,
    TrialHead,
    by_point,
    fraction_of,
    head,
    int_param,
    median_of,
)
from ...analysis.verdict import Evidence, Verdict, decide, point_verdict, tool_cores, with_nic
from ...core import linerate
from ...records import Sample, TrialRecord

# a point "reaches line rate" at this fraction of its ceiling
LINE_RATE = 0.95


@dataclass(frozen=True)
class StorageTrial(TrialHead):
    mb_s: float | None = None                 # all ops, 10^6 bytes/s
    iops: float | None = None
    per_initiator_mb_s: Mapping[str, float] = field(default_factory=dict)
    window: tuple[float, float] | None = None
    start_skew_s: float | None = None
    trim_s: float | None = None                # per-job reports: the window trimmed by this at each end
    cpu: CpuUsage | None = None
    counters: Counters | None = None
    warnings: tuple[str, ...] = ()
    fio: Mapping[str, object] = field(default_factory=dict)
    frames: float | None = None               # the target's interface, both ways, over the window
    verdict: Verdict | None = None            # what held it below line rate (analysis/verdict.py)
    # per op (read, write), its own (MB/s, IOPS): a readwrite/randrw point's two figures fio reports
    per_op: Mapping[str, tuple[float, float]] = field(default_factory=dict)

    def latency_s(self, percent: str) -> float | None:
        """Completion latency at ``percent`` ("50", "99"), seconds: the slowest fio
        job's of any initiator and op (fio's clat percentiles; jobs' percentiles
        cannot be merged).  None when the run did not record it (p50 only from
        runs after it was added)."""
        vals = []
        for res in self.fio.values():
            jobs = res.get("jobs") if isinstance(res, Mapping) else None
            for job in (jobs or {}).values() if isinstance(jobs, Mapping) else ():
                for op in ("read", "write"):
                    v = job.get(f"{op}_p{percent}_ns") if isinstance(job, Mapping) else None
                    if isinstance(v, (int, float)) and v > 0:
                        vals.append(float(v) / 1e9)
        return max(vals) if vals else None


@dataclass(frozen=True)
class Setting:
    """What the verdict of a storage trial needs of its run: the link, the
    transport (for the ceiling), how many initiators, and what backs the LUNs."""

    link: LinkInfo | None = None
    transport: str = "nbd"
    initiators: int | None = None
    backing: str = ""            # e.g. "nbdkit memory LUNs": said where the device side is not measured


def storage_trial(rec: TrialRecord, samples: Sequence[Sample], setting: Setting | None = None) -> StorageTrial:
    t = _storage_trial(rec, samples)
    if t.status != "ok" or setting is None:
        return t
    return replace(t, verdict=decide(with_nic(evidence(t, setting), samples, rec.meta)))


def evidence(t: StorageTrial, s: Setting) -> Evidence:
    """What a storage trial measured, for the verdict (analysis/verdict.py):
    MB/s against the transport's ceiling at its block size, fio (its jobs are
    threads of one process per initiator) and the target (a thread pool: up
    to the CPUs it may use), CPU, the kernel's retransmits and the drops.
    The backing device is not sampled: said, never guessed."""
    op, bs = str(t.params.get("op")), int_param(t.params, "block_size", 0)
    ceil = ceiling_mb_s(s.link, s.transport, bs, op, s.initiators)
    jobs = [len(r["jobs"]) for r in t.fio.values() if isinstance(r, Mapping) and isinstance(r.get("jobs"), Mapping)]
    threads = {"fio": float(max(jobs)) if jobs else 1.0, "target": float("inf")}
    c = t.counters
    return Evidence({op: (t.mb_s or 0.0) * 1e6}, ceil * 1e6 if ceil else None, cpu=t.cpu, tool_cpus=t.tool_cpus,
                    retrans_segs=c.total("tcp.retrans_segs") if c else None,
                    out_segs=c.total("tcp.out_segs") if c else None, drops=drops(c), frames=t.frames,
                    unit="B/s", what="throughput", tool_cores=tool_cores(t.tool_cpus, threads),
                    notes=("device: not measured (no device counters are sampled"
                           + (f"; {s.backing}" if s.backing else "") + ")",))


def _storage_trial(rec: TrialRecord, samples: Sequence[Sample]) -> StorageTrial:
    common = dict(head(rec), fio=dict(rec.meta.get("fio") or {}))
    by = [s for s in samples if s.metric == "storage.bytes" and s.t_end > s.t_start]
    ios = [s for s in samples if s.metric == "storage.ios" and s.t_end > s.t_start]
    if rec.status != "ok" or not by:
        return StorageTrial(status="failed" if rec.status == "ok" else rec.status,
                            error=rec.error or "no fio result", **common)
    trim = None
    if all(s.tag("proc") for s in by):
        trim = report_interval(by)
        try:
            window, mb_s, iops, per, skew, per_op = _shared_window(samples, by, trim)
        except NoSharedWindow as e:
            return StorageTrial(status="failed", error=f"fio jobs: {e}", **common)
    else:
        window, mb_s, iops, per, skew, per_op = _union_window(by, ios)
    u = cpu_usage(samples, window)
    c = counters(samples, window)
    return StorageTrial(status="ok", error=None, mb_s=mb_s, iops=iops, per_initiator_mb_s=per, window=window,
                        start_skew_s=skew, trim_s=trim, cpu=u, counters=c, per_op=per_op,
                        frames=frames_carried(samples, window, str(rec.meta.get("server") or "") or None),
                        warnings=tuple(rec.meta.get("warnings") or ()) + tuple(cpu_warnings(u) if u else ())
                        + tuple(counter_warnings(c) if c else ()), **common)


Totals = tuple[tuple[float, float], float, float, dict[str, float], float, dict[str, tuple[float, float]]]


def report_interval(by: Sequence[Sample]) -> float:
    """The jobs' report interval: the median span of their samples, s."""
    spans = sorted(s.t_end - s.t_start for s in by)
    return spans[len(spans) // 2]


def _shared_window(samples: Sequence[Sample], by: Sequence[Sample], trim: float) -> Totals:
    """Per op, every job's bytes and IOs over the window all jobs of that op
    share, less one report interval at each end; MB/s and IOPS add over ops
    (readwrite: both run on the same jobs)."""
    mb_s = iops = 0.0
    per: dict[str, float] = defaultdict(float)
    per_op: dict[str, tuple[float, float]] = {}
    windows, starts = [], []
    for op in sorted({s.tag("op") or "?" for s in by}):
        b = aggregate(samples, direction=op, side="initiator", metric="storage.bytes", along="op", trim=trim)
        n = aggregate(samples, direction=op, side="initiator", metric="storage.ios", along="op", trim=trim)
        mb_s += b.bytes / 1e6 / b.seconds
        iops += n.bytes / n.seconds
        per_op[op] = (b.bytes / 1e6 / b.seconds, n.bytes / n.seconds)
        for share in b.processes:
            per[share.host] += share.bytes / 1e6 / b.seconds
        windows.append(b.window)
        starts += [share.span[0] for share in b.processes]
    window = (min(w[0] for w in windows), max(w[1] for w in windows))
    return window, mb_s, iops, dict(per), max(starts) - min(starts), per_op


def _union_window(by: Sequence[Sample], ios: Sequence[Sample]) -> Totals:
    """One sample per initiator: the sum over the union of their spans."""
    window = (min(s.t_start for s in by), max(s.t_end for s in by))
    secs = window[1] - window[0]
    per: dict[str, float] = defaultdict(float)
    for s in by:
        per[s.tag("host") or "?"] += s.value / 1e6 / (s.t_end - s.t_start)
    starts = sorted({s.t_start for s in by})
    per_op = {op: (sum(s.value for s in by if s.tag("op") == op) / 1e6 / secs,
                   sum(s.value for s in ios if s.tag("op") == op) / secs)
              for op in sorted({s.tag("op") or "?" for s in by})}
    return (window, sum(s.value for s in by) / 1e6 / secs, sum(s.value for s in ios) / secs, dict(per),
            starts[-1] - starts[0], per_op)


@dataclass(frozen=True)
class StoragePoint:
    point: str
    op: str
    block_size: int
    n_ok: int
    n_failed: int
    mb_s: float | None
    iops: float | None
    ceiling_mb_s: float | None
    cpu_pct: float | None
    cores_busy: float | None
    max_skew_s: float | None
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    latency_p50_s: float | None = None        # the slowest job's, median over repeats
    latency_p99_s: float | None = None
    verdict: Verdict | None = None            # the limit of the point, over its ok repeats
    # per op, median over ok repeats: fio's own per-operation figures (readwrite, randrw)
    read_mb_s: float | None = None
    read_iops: float | None = None
    write_mb_s: float | None = None
    write_iops: float | None = None

    @property
    def of_ceiling(self) -> float | None:
        return fraction_of(self.mb_s, self.ceiling_mb_s)

    @property
    def above_ceiling(self) -> bool:
        """More than the wire can carry: the initiators' own accounting is off
        (or the model is), and the report says so rather than printing it plain."""
        return self.of_ceiling is not None and self.of_ceiling > 1 + ABOVE_CEILING_TOLERANCE


def ceiling_mb_s(link: LinkInfo | None, transport: str, io_size: int, op: str, initiators: int | None) -> float | None:
    if link is None:
        return None
    speed = link.speed_for(initiators)
    if not speed:
        return None
    ts = True if link.timestamps is None else link.timestamps
    try:
        return linerate.storage(speed, link.mtu, transport, io_size, op=op, ip=link.ip, timestamps=ts).mb_per_s
    except linerate.ModelError:
        return None          # e.g. FCoE on a link whose MTU cannot carry its frames: no ceiling, not a crash


def _per_op(ok: Sequence[StorageTrial]) -> dict[str, float | None]:
    """Each op's MB/s and IOPS, median over the ok repeats (None where no repeat ran it)."""
    out: dict[str, float | None] = {}
    for op in ("read", "write"):
        out[f"{op}_mb_s"] = median_of(t.per_op[op][0] for t in ok if op in t.per_op)
        out[f"{op}_iops"] = median_of(t.per_op[op][1] for t in ok if op in t.per_op)
    return out


def storage_points(trials: Iterable[StorageTrial], link: LinkInfo | None, transport: str,
                   initiators: int | None) -> list[StoragePoint]:
    med = median_of
    out = []
    for point, ts in by_point(trials).items():
        ok = [t for t in ts if t.status == "ok"]
        op, bs = str(ts[0].params.get("op")), int_param(ts[0].params, "block_size", 0)
        skews = [t.start_skew_s for t in ok if t.start_skew_s is not None]
        out.append(StoragePoint(point, op, bs, len(ok), len(ts) - len(ok), med(t.mb_s for t in ok),
                                med(t.iops for t in ok), ceiling_mb_s(link, transport, bs, op, initiators),
                                med(t.cpu.percent_of_machine if t.cpu else None for t in ok),
                                med(t.cpu.cores_busy if t.cpu else None for t in ok),
                                max(skews) if skews else None,
                                tuple(sorted({t.error for t in ts if t.error})),
                                tuple(sorted({w for t in ts for w in t.warnings})),
                                med(t.latency_s("50") for t in ok), med(t.latency_s("99") for t in ok),
                                point_verdict([t.verdict for t in ok if t.verdict is not None]),
                                **_per_op(ok)))
    return sorted(out, key=lambda p: (["read", "write", "readwrite"].index(p.op), p.block_size))


def line_rate_from(points: Sequence[StoragePoint]) -> dict[str, int | None]:
    """Per op, the smallest block size from which every larger one runs at
    >= 95 % of its ceiling (seed 004: line rate from 2 KiB)."""
    out: dict[str, int | None] = {}
    for op in dict.fromkeys(p.op for p in points):
        pts = sorted((p for p in points if p.op == op), key=lambda p: p.block_size)
        first = None
        for p in pts:
            if p.of_ceiling is not None and p.of_ceiling >= LINE_RATE:
                first = p.block_size if first is None else first
            else:
                first = None
        out[op] = first
    return out
