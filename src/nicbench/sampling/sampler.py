"""Samplers that run beside a point, each in its own thread, at a fixed interval.

Every read is a file read (``/proc/...``), never a spawned process, so a
sampler costs almost nothing (see bench/sampler_cost.py).  Each turns its
reads into Samples of deltas between consecutive reads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import pairwise

from ..hosts.transport import Transport
from ..records import Sample, make_tags
from .netdev import delta, parse_net_dev
from .netstat import net_softirqs, parse_interrupts, parse_snmp, watched
from .procstat import USER_HZ, CpuTimes, cpu_deltas, cpus_allowed, parse_pid_stat, parse_proc_stat

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

    def start(self) -> PeriodicSampler:
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.samples()

    def samples(self) -> list[Sample]:
        raise NotImplementedError


@dataclass(frozen=True)
class NetTarget:
    """One host whose network counters are followed during a point.

    ``pids``: processes living in the host's network namespace (any one
    will do: /proc/PID/net/* is that namespace's view); ``ifname``: its
    test interface.
    """

    host: str
    transport: Transport
    pids: Callable[[], list[int]]
    ifname: str | None


# /proc/PID/net files read per host per tick
_NET_FILES = ("dev", "snmp", "netstat")


class NetSampler(PeriodicSampler):
    """Interface counters (bytes, packets, drops, errors) and protocol counters
    (TCP retransmits, UDP and IP errors) of every host taking part."""

    def __init__(self, targets: list[NetTarget], *, trial_id: str, interval: float):
        super().__init__("net-counters", interval)
        self.targets, self.trial_id = targets, trial_id

    def _read_files(self, tg: NetTarget) -> dict[str, str] | None:
        """The host's files through a live process of its namespace (file
        reads), else -- the last read, after the tools exit -- all three in
        one command inside the namespace (one spawn per host, not three).
        ``dev`` must be readable; the protocol files are read where they can be.

        A process that exits between its files (its /proc/PID/net goes with its
        namespace reference) gives no read at all through it, never ``dev``
        without the protocol counters: such a read left the UDP counters'
        series short of the window -- the last read of a point comes as the
        engine servers exit -- and the lab e2e's loss split came back None."""
        for base in [f"/proc/{pid}/net" for pid in tg.pids()]:
            try:
                out = {f: tg.transport.read_text(f"{base}/{f}") for f in _NET_FILES}
            except OSError:
                continue      # that process has exited: try the next
            return out
        try:
            r = tg.transport.run(["sh", "-c", "for f in dev snmp netstat; do echo @@nicbench-net $f; "
                                  "cat /proc/net/$f 2>/dev/null; done"], timeout=10)
        except Exception:  # noqa: BLE001 - a sampler read must never raise
            return None
        parts = dict((chunk.split("\n", 1) + [""])[:2] for chunk in r.stdout.split("@@nicbench-net ")[1:])
        return {f: parts.get(f, "") for f in _NET_FILES} if parts.get("dev") else None

    def read(self) -> None:
        for tg in self.targets:
            t0 = time.time()
            files = self._read_files(tg)
            if files is None:
                continue
            ts = (t0 + time.time()) / 2
            ifc = parse_net_dev(files["dev"]).get(tg.ifname) if tg.ifname else None
            proto = watched(parse_snmp(files["snmp"]) | parse_snmp(files["netstat"]))
            with self._lock:
                self.reads.append((tg.host, tg.ifname, ts, ifc.values if ifc else None, proto))

    def samples(self) -> list[Sample]:
        with self._lock:
            reads = list(self.reads)
        return net_samples(reads, self.trial_id)


def net_samples(reads: list[tuple[str, str | None, float, dict[str, int] | None, dict[str, int]]],
                trial_id: str) -> list[Sample]:
    """Interface and protocol counter Samples from reads ``(host, ifname, t,
    interface counters or None, watched protocol counters)``, ``t`` on this
    machine's clock (s): the deltas between consecutive reads of each
    (host, interface).  Shared by the reads made from here and the host
    sampler's (``sampling.remote``)."""
    # one series per (host, interface): a host followed on several ports
    # (the packet study) gives one target per port; its protocol counters
    # are taken from the first only, or they would count twice
    by_host: dict[tuple[str, str | None], list] = {}
    for r in sorted(reads, key=lambda r: r[2]):
        by_host.setdefault((r[0], r[1]), []).append(r)
    first_if: dict[str, str | None] = {}
    for h, ifn in by_host:
        first_if.setdefault(h, ifn)
    out = []
    for (host, ifn), rs in by_host.items():
        for (_, ifname, t0, a, pa), (_, _, t1, b, pb) in pairwise(rs):
            if t1 <= t0:
                continue
            if a is not None and b is not None:
                for d in ("tx", "rx"):
                    tags = make_tags(host=host, ifname=ifname, direction=DIRECTION[d])
                    for what, unit, keys in _IF_METRICS:
                        v = _sum_delta(a, b, [f"{d}_{k}" for k in keys])
                        if v is not None:
                            out.append(Sample(trial_id, f"if.{what}", float(v), unit,  # type: ignore[arg-type]
                                              t0, t1, tags))
            for name in (pa.keys() & pb.keys()) if first_if[host] == ifn else ():
                v = delta(pa[name], pb[name])
                if v is not None:
                    out.append(Sample(trial_id, f"net.{name}", float(v), "count", t0, t1,
                                      make_tags(host=host)))
    return out


# metric, unit, the /proc/net/dev columns summed into it
_IF_METRICS = (("bytes", "bytes", ("bytes",)), ("packets", "packets", ("packets",)),
               ("drops", "packets", ("drop", "fifo")), ("errors", "count", ("errs",)))


def _sum_delta(a: dict[str, int], b: dict[str, int], keys: list[str]) -> int | None:
    total = 0
    for k in keys:
        if k not in a or k not in b:
            continue              # old kernels lack some columns
        d = delta(a[k], b[k])
        if d is None:
            return None
        total += d
    return total


# what runs between a gate shim and the tool, or in a tool's PID before it execs
# the tool: pinning wrappers, coreutils timeout, the shim's shell
LAUNCHERS = frozenset({"taskset", "numactl", "timeout", "bash", "sh"})


class CpuSampler(PeriodicSampler):
    """Whole-machine per-CPU time (/proc/stat), NET_RX/NET_TX softirqs per CPU
    (/proc/softirqs), the NIC's interrupts per CPU (/proc/interrupts, when
    ``nic_irqs`` names any) and the tool processes' own CPU.

    ``procs`` returns the tool processes to follow: (pid, host, role, proc id).
    A process that has exited simply stops producing reads.  ``nic_irqs``:
    IRQ number -> label (``eth0:virtio2-input.0``); a lab's veths have none.
    """

    def __init__(self, transport: Transport, procs: Callable[[], list[tuple[int, str, str, str]]], *,
                 machine: str, trial_id: str, interval: float, nic_irqs: Mapping[str, str] | None = None):
        super().__init__(f"cpu-{machine}", interval)
        self.t, self.procs, self.machine, self.trial_id = transport, procs, machine, trial_id
        self.nic_irqs = dict(nic_irqs or {})
        self.proc_reads: dict[tuple[str, str, str], list[tuple[float, float, float]]] = {}
        self.irq_reads: list[tuple[float, dict[tuple[str, str], int]]] = []
        # (host, role, proc) -> {"allowed": "0-1", "seen": [0, 1]}: where each tool could and did run
        self.proc_cpus: dict[tuple[str, str, str], dict] = {}

    def tool_cpus(self) -> dict[str, dict]:
        with self._lock:
            return {" ".join(k): {"allowed": v["allowed"], "seen": sorted(v["seen"])}
                    for k, v in self.proc_cpus.items()}

    def read(self) -> None:
        t0 = time.time()
        stat = parse_proc_stat(self.t.read_text("/proc/stat"))
        counts: dict[tuple[str, str], int] = {}
        try:
            for kind, per_cpu in net_softirqs(self.t.read_text("/proc/softirqs")).items():
                counts.update({(f"softirq:{kind}", cpu): n for cpu, n in per_cpu.items()})
            if self.nic_irqs:
                rows = parse_interrupts(self.t.read_text("/proc/interrupts"))
                for irq, label in self.nic_irqs.items():
                    if irq in rows:
                        counts.update({(f"irq:{label}", cpu): n for cpu, n in rows[irq][0].items()})
        except OSError:
            pass
        ts = (t0 + time.time()) / 2
        with self._lock:
            self.reads.append((ts, stat))
            self.irq_reads.append((ts, counts))
        for pid, host, role, proc in self.procs():
            try:
                p = parse_pid_stat(self.t.read_text(f"/proc/{pid}/stat"))
            except (OSError, ValueError, IndexError):
                continue
            if p.comm in LAUNCHERS:
                continue  # not yet exec'd into the tool: its CPUs and time are the launcher's
            key = (host, role, proc)
            with self._lock:
                self.proc_reads.setdefault(key, []).append((time.time(), p.utime, p.stime))
            if key not in self.proc_cpus:
                try:
                    allowed = cpus_allowed(self.t.read_text(f"/proc/{pid}/status"))
                except OSError:
                    allowed = None
                with self._lock:
                    self.proc_cpus.setdefault(key, {"allowed": allowed, "seen": []})
            with self._lock:
                where = self.proc_cpus[key]
                if p.processor is not None and p.processor not in where["seen"]:
                    where["seen"].append(p.processor)

    def samples(self) -> list[Sample]:
        with self._lock:
            reads = list(self.reads)
            procs = {k: list(v) for k, v in self.proc_reads.items()}
            irqs = list(self.irq_reads)
        return cpu_samples(reads, irqs, procs, machine=self.machine, trial_id=self.trial_id)


def cpu_samples(reads: list[tuple[float, dict[str, CpuTimes]]], irqs: list[tuple[float, dict[tuple[str, str], int]]],
                procs: Mapping[tuple[str, str, str], list[tuple[float, float, float]]], *, machine: str,
                trial_id: str, hz: int = USER_HZ) -> list[Sample]:
    """CPU Samples from reads on this machine's clock (s): per-CPU time
    (``reads``: (t, parsed /proc/stat or kern.cp_times), ``hz`` ticks per
    second), softirq and NIC interrupt counts per CPU (``irqs``: (t,
    {(what, cpu): count})) and each tool process's own CPU (``procs``: (host,
    role, proc) -> [(t, utime s, stime s)]).  Shared by the reads made from
    here and the host sampler's (``sampling.remote``)."""
    reads = sorted(reads, key=lambda r: r[0])
    irqs = sorted(irqs, key=lambda r: r[0])
    out: list[Sample] = []
    for (t0, ca), (t1, cb) in pairwise(irqs):
        if t1 <= t0:
            continue
        for what, cpu in ca.keys() & cb.keys():
            # the kernel keeps both per-CPU counts in unsigned int
            d = delta(ca[(what, cpu)], cb[(what, cpu)], bits=32)
            if d is None:
                continue
            kind, _, name = what.partition(":")
            out.append(
                Sample(
                    trial_id,
                    f"{kind}.count",
                    float(d),
                    "count",
                    t0,
                    t1,
                    make_tags(host=machine, cpu=cpu, **{"kind" if kind == "softirq" else "irq": name}),
                )
            )
    for (t0, a), (t1, b) in pairwise(reads):
        if t1 <= t0:
            continue
        deltas = cpu_deltas(a, b, hz)
        # a CPU seen in either read but without a span here is a gap, said as
        # such: offline (hot-unplugged) or its counters went backwards
        for cpu in sorted((a.keys() | b.keys()) - deltas.keys() - {"all"}):
            why = "counters went backwards" if cpu in a and cpu in b else "offline"
            out.append(Sample(trial_id, "cpu.gap", t1 - t0, "s", t0, t1,
                              make_tags(host=machine, cpu=cpu, reason=why)))
        for cpu, per_state in deltas.items():
            if cpu == "all":
                continue
            for state, secs in per_state.items():
                out.append(
                    Sample(
                        trial_id,
                        "cpu.time",
                        secs,
                        "s",
                        t0,
                        t1,
                        make_tags(host=machine, cpu=cpu, state=state),
                    )
                )
    for (host, role, proc), rs in procs.items():
        for (t0, u0, s0), (t1, u1, s1) in pairwise(rs):
            if t1 <= t0 or u1 < u0 or s1 < s0:
                continue
            for kind, v in (("user", u1 - u0), ("system", s1 - s0)):
                out.append(
                    Sample(
                        trial_id,
                        "proc.cpu",
                        v,
                        "s",
                        t0,
                        t1,
                        make_tags(host=host, role=role, proc=proc, kind=kind),
                    )
                )
    return out


def tool_pid(t: Transport, shim_pid: int, depth: int = 4) -> int | None:
    """The tool below a gate shim: its first child, past any wrapper
    (timeout, taskset, numactl); None until the tool has been exec'd."""
    pid = shim_pid
    for _ in range(depth):
        kids = child_pids(t, pid)
        if not kids:
            return None
        pid = kids[0]
        try:
            comm = t.read_text(f"/proc/{pid}/comm").strip()
        except OSError:
            return None
        if comm not in LAUNCHERS:
            return pid
    return None


def tool_procs(
    t: Transport, fixed: Callable[[], list[tuple[int, str, str, str]]], gated: list[tuple[int, str, str, str]]
) -> Callable[[], list[tuple[int, str, str, str]]]:
    """The processes a CpuSampler follows: ``fixed`` ones (by PID) and the tool
    below each gate shim in ``gated`` (shim pid, host, role, proc id), found
    once it exists and remembered.  Over SSH ``t`` reads one real host: only
    that host's processes are its to look up (another host's PID there would
    be some other process)."""
    found: dict[int, int] = {}
    if getattr(t, "kind", "") == "ssh":
        gated = [g for g in gated if g[1] == t.host]
        only = t.host
    else:
        only = None

    def procs() -> list[tuple[int, str, str, str]]:
        out = [p for p in fixed() if only is None or p[1] == only]
        for shim, host, role, proc in gated:
            if shim not in found:
                pid = tool_pid(t, shim)
                if pid is not None:
                    found[shim] = pid
            if shim in found:
                out.append((found[shim], host, role, proc))
        return out

    return procs


def child_pids(t: Transport, pid: int) -> list[int]:
    """Children of PID (the tool under a gate shim), from /proc/PID/task/PID/children."""
    try:
        return [int(x) for x in t.read_text(f"/proc/{pid}/task/{pid}/children").split()]
    except (OSError, ValueError):
        return []
