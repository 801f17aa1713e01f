"""Samplers that run beside a point, each in its own thread, at a fixed interval.

Every read is a file read (``/proc/...``), never a spawned process, so a
sampler costs almost nothing (see bench/sampler_cost.py).  Each turns its
reads into Samples of deltas between consecutive reads.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from ..hosts.transport import Transport
from ..records import Sample, make_tags
from .netdev import delta, parse_net_dev
from .procstat import cpu_deltas, parse_pid_stat, parse_proc_stat

# interface counters seen from the study server: tx = server sends = study "tx"
DIRECTION = {"tx": "tx", "rx": "rx"}


class PeriodicSampler:
    """The thread, the loop and the lock; subclasses say what one read is."""

    def __init__(self, name: str, interval: float):
        self.interval = interval
        self.reads: list = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self.cpu_seconds = 0.0           # the sampler's own cost (thread CPU time)

    def read(self) -> None:
        raise NotImplementedError

    def _loop(self) -> None:
        t_cpu = time.thread_time()
        nxt = time.monotonic()
        while not self._stop.is_set():
            try:
                self.read()
            except Exception:  # noqa: BLE001 - a sampler error must not kill the thread
                pass
            self.cpu_seconds = time.thread_time() - t_cpu
            nxt += self.interval
            self._stop.wait(max(0.0, nxt - time.monotonic()))

    def start(self) -> "PeriodicSampler":
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.samples()

    def samples(self) -> list[Sample]:
        raise NotImplementedError


class CounterSampler(PeriodicSampler):
    def __init__(self, transport: Transport, pids: Callable[[], list[int]], *, host: str, ifname: str,
                 trial_id: str, interval: float):
        """``pids``: processes living in the host's network namespace (any one will do)."""
        super().__init__(f"counters-{host}", interval)
        self.t, self.pids, self.host, self.ifname = transport, pids, host, ifname
        self.trial_id = trial_id

    def read(self) -> None:
        """One read, stamped at its midpoint.  Through a process of the host's
        namespace when one lives (a file read), else through the transport
        (``cat`` inside the namespace: the last read, after the tools exit)."""
        text = None
        t0 = time.time()
        for pid in self.pids():
            try:
                text = self.t.read_text(f"/proc/{pid}/net/dev")
                break
            except OSError:
                continue      # that process has exited: try the next
        if text is None:
            t0 = time.time()
            try:
                text = self.t.read_text("/proc/net/dev")
            except OSError:
                return
        ts = (t0 + time.time()) / 2
        c = parse_net_dev(text).get(self.ifname)
        if c is not None:
            with self._lock:
                self.reads.append((ts, c.values))

    def samples(self) -> list[Sample]:
        with self._lock:
            reads = sorted(self.reads, key=lambda r: r[0])
        out = []
        for (t0, a), (t1, b) in zip(reads, reads[1:]):
            if t1 <= t0:
                continue
            for d in ("tx", "rx"):
                for what, unit in (("bytes", "bytes"), ("packets", "packets")):
                    v = delta(a.get(f"{d}_{what}", 0), b.get(f"{d}_{what}", 0))
                    if v is None:
                        continue
                    out.append(Sample(self.trial_id, f"if.{what}", float(v), unit, t0, t1,  # type: ignore[arg-type]
                                      make_tags(host=self.host, ifname=self.ifname, direction=DIRECTION[d])))
        return out


class CpuSampler(PeriodicSampler):
    """Whole-machine per-CPU time (/proc/stat) and the tool processes' own CPU.

    ``procs`` returns the tool processes to follow: (pid, host, role, proc id).
    A process that has exited simply stops producing reads.
    """

    def __init__(self, transport: Transport, procs: Callable[[], list[tuple[int, str, str, str]]], *,
                 machine: str, trial_id: str, interval: float):
        super().__init__(f"cpu-{machine}", interval)
        self.t, self.procs, self.machine, self.trial_id = transport, procs, machine, trial_id
        self.proc_reads: dict[tuple[str, str, str], list[tuple[float, float, float]]] = {}

    def read(self) -> None:
        t0 = time.time()
        stat = parse_proc_stat(self.t.read_text("/proc/stat"))
        ts = (t0 + time.time()) / 2
        with self._lock:
            self.reads.append((ts, stat))
        for pid, host, role, proc in self.procs():
            try:
                p = parse_pid_stat(self.t.read_text(f"/proc/{pid}/stat"))
            except (OSError, ValueError, IndexError):
                continue
            with self._lock:
                self.proc_reads.setdefault((host, role, proc), []).append((time.time(), p.utime, p.stime))

    def samples(self) -> list[Sample]:
        with self._lock:
            reads = sorted(self.reads, key=lambda r: r[0])
            procs = {k: list(v) for k, v in self.proc_reads.items()}
        out = []
        for (t0, a), (t1, b) in zip(reads, reads[1:]):
            if t1 <= t0:
                continue
            for cpu, d in cpu_deltas(a, b).items():
                if cpu == "all":
                    continue
                for state, secs in d.items():
                    out.append(Sample(self.trial_id, "cpu.time", secs, "s", t0, t1,
                                      make_tags(host=self.machine, cpu=cpu, state=state)))
        for (host, role, proc), rs in procs.items():
            for (t0, u0, s0), (t1, u1, s1) in zip(rs, rs[1:]):
                if t1 <= t0 or u1 < u0 or s1 < s0:
                    continue
                for kind, v in (("user", u1 - u0), ("system", s1 - s0)):
                    out.append(Sample(self.trial_id, "proc.cpu", v, "s", t0, t1,
                                      make_tags(host=host, role=role, proc=proc, kind=kind)))
        return out


def child_pids(t: Transport, pid: int) -> list[int]:
    """Children of PID (the tool under a gate shim), from /proc/PID/task/PID/children."""
    try:
        return [int(x) for x in t.read_text(f"/proc/{pid}/task/{pid}/children").split()]
    except (OSError, ValueError):
        return []
