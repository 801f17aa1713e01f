"""Counters and CPU of hosts reached over SSH, sampled on the host itself.

A read over SSH is a round trip timed here (~7 ms in the lab, more across a
real network and under load), so a rate between two such reads carries the
round trip's jitter.  Instead, for each point, :class:`HostSampler` starts
``hostsampler.sh`` on the host over the open SSH connection (one session of
its ControlMaster): it reads /proc (Linux) or sysctl/netstat (FreeBSD) at
the interval, stamps every read with the host's own clock and streams the
records back.  However late a record arrives, its stamps are the host's;
they are mapped to this machine's clock with the offset preflight measured
(:func:`hostrecords.clock_map`), the one also applied to the tools' own
stamps (``Process.clock_offset``), so counters and tool intervals share one
time line.  The Samples are made by the same functions as the local reads'
(``sampler.net_samples``, ``sampler.cpu_samples``).

A sampler that dies (or never starts) on a host is said in the point's
meta, naming the host and from when its counters are missing; its series
simply stop there (no zeros are made up).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

from ..core.errors import NicbenchError, ToolError, tail
from ..records import Sample
from .hostrecords import ClockMap, HostRead, HostStream, clock_map, parse_reads, parse_stream, sampler_argv
from .netstat import watched
from .sampler import LAUNCHERS, cpu_samples, net_samples

# the sampler's own limit on its run time, s: it stops when its SSH session's
# stdin closes (the point ends, the controller dies, the connection drops),
# so this is only the backstop
MAX_SECONDS = 6 * 3600
# how long a sampler may take to print its first read (login shell start-up
# over SSH: ~0.4 s here) before the point goes on without its counters
FIRST_READ_S = 10.0


class Stream(Protocol):
    """A remote command's local end (``subprocess.Popen``-like): its stdin
    reaches the command's stdin, its stdout carries the command's stdout."""

    stdin: IO[bytes] | None
    stdout: IO[bytes] | None
    stderr: IO[bytes] | None

    def poll(self) -> int | None: ...
    def wait(self, timeout: float | None = None) -> int: ...
    def kill(self) -> None: ...


class StreamTransport(Protocol):
    """A transport that can run a command with its stdin and stdout streamed
    (``SshTransport.stream``), and knows the host's clock offset."""

    host: str
    clock_offset: float            # host clock - this clock, s, as applied to every host stamp
    clock_uncertainty: float       # s

    def stream(self, argv: Sequence[str]) -> Stream: ...
    def read_text(self, path: str) -> str: ...


def samples_on_host(t: object) -> bool:
    """Is ``t`` a host whose counters are read by a sampler running there?"""
    return bool(getattr(t, "samples_on_host", False))


@dataclass
class HostPlan:
    """What to sample on one host during a point."""

    host: str
    transport: StreamTransport
    ifnames: list[str | None] = field(default_factory=list)     # its test interfaces (net counters); [] none
    cpu_machine: str | None = None          # the name its CPU samples carry; None: CPU not sampled here
    procs: Callable[[], list[tuple[int, str, str, str]]] | None = None   # tool processes (pid, host, role, proc)
    nic_irqs: Mapping[str, str] = field(default_factory=dict)           # IRQ -> label, counted per CPU

    def items(self) -> list[str]:
        out = []
        if self.ifnames:
            out += [f"net:{i}" for i in dict.fromkeys(self.ifnames) if i] or ["net"]
            out.append("snmp")
        if self.cpu_machine is not None:
            out += ["cpu", "softirqs"] + (["interrupts"] if self.nic_irqs else [])
        return out


class HostSampler:
    """``hostsampler.sh`` on one host for one point (see the module docstring)."""

    def __init__(self, plan: HostPlan, *, trial_id: str, interval: float):
        self.plan, self.trial_id, self.interval = plan, trial_id, interval
        self.host = plan.host
        self._p: Stream | None = None
        self._chunks: list[bytes] = []
        self._err = b""
        self._lock = threading.Lock()
        self._first = threading.Event()
        self._os: str | None = None
        self._done = threading.Event()
        self._reader: threading.Thread | None = None
        self._feeder: threading.Thread | None = None
        self.pids: dict[int, tuple[str, str, str]] = {}       # remote PID -> (host, role, proc)
        self.started_at: float | None = None
        self.start_error: str | None = None

    # -- running it ---------------------------------------------------------
    def start(self) -> HostSampler:
        self.started_at = time.time()
        try:
            argv = sampler_argv(self.interval, MAX_SECONDS, self.plan.items())
            self._p = self.plan.transport.stream(argv)
        except (NicbenchError, OSError, ValueError) as e:
            self.start_error = e.one_line().removeprefix("nicbench: ") if isinstance(e, NicbenchError) else str(e)
            self._first.set()
            self._done.set()
            return self
        self._reader = threading.Thread(target=self._read, name=f"hostsampler-{self.host}", daemon=True)
        self._reader.start()
        if self._p.stderr is not None:
            threading.Thread(target=self._read_err, name=f"hostsampler-err-{self.host}", daemon=True).start()
        if self.plan.procs is not None:
            self._feeder = threading.Thread(target=self._feed, name=f"hostsampler-pids-{self.host}", daemon=True)
            self._feeder.start()
        return self

    def _read(self) -> None:
        """Everything the sampler prints, kept as it comes; the first
        complete tick (and the hello's OS) noted as they pass."""
        assert self._p is not None and self._p.stdout is not None
        out = self._p.stdout
        try:
            for line in iter(out.readline, b""):
                with self._lock:
                    self._chunks.append(line)
                if self._os is None and line.startswith(b"@@nbs hello "):
                    self._os = next((w[3:].decode() for w in line.split() if w.startswith(b"os=")), "?")
                elif line.startswith((b"@@nbs tock ", b"@@nbs error ")):
                    self._first.set()
        except (OSError, ValueError):
            pass
        finally:
            self._first.set()
            self._done.set()

    def _read_err(self) -> None:
        """What the host's shell said on stderr (a missing awk, a refused
        login): kept, the first 4 KB, for the message if the stream is cut."""
        assert self._p is not None and self._p.stderr is not None
        with contextlib.suppress(OSError, ValueError):
            for line in iter(self._p.stderr.readline, b""):
                if len(self._err) < 4096:
                    self._err += line

    def _send(self, line: str) -> None:
        p = self._p
        if p is None or p.stdin is None or self._done.is_set():
            return
        try:
            p.stdin.write(line.encode() + b"\n")
            p.stdin.flush()
        except (OSError, ValueError):
            pass              # the sampler is gone: its stream says so

    def _feed(self) -> None:
        """The tool processes, followed on the host once they exist (a
        Linux host: FreeBSD has no /proc/PID to read them from)."""
        assert self.plan.procs is not None
        while not self._done.wait(self.interval):
            if self._os is None:
                continue
            if self._os != "Linux":
                return
            try:
                found = self.plan.procs()
            except Exception:  # noqa: BLE001 - a lookup over SSH failed: try again next tick
                continue
            for pid, host, role, proc in found:
                if pid not in self.pids:
                    self.pids[pid] = (host, role, proc)
                    self._send(f"pid {pid}")

    def wait_first(self, by: float) -> bool:
        """Until its first read has arrived (or it failed), at most until ``by`` (monotonic)."""
        return self._first.wait(max(0.0, by - time.monotonic()))

    def read_now(self) -> None:
        """One more read at once (the tools are ending); not waited for: its
        stamp is the host's whenever it arrives."""
        self._send("read")

    def close(self) -> None:
        """End of file on its stdin: it reads no more and says goodbye."""
        p = self._p
        if p is not None and p.stdin is not None:
            with contextlib.suppress(OSError, ValueError):
                p.stdin.close()

    def stop(self, by: float) -> None:
        """:meth:`close`, then wait for it to end; killed here if it has not by
        ``by`` (monotonic)."""
        p = self._p
        if p is None:
            return
        self.close()
        if not self._done.wait(max(0.0, by - time.monotonic())) or p.poll() is None:
            try:
                p.wait(timeout=max(0.1, by - time.monotonic()))
            except Exception:  # noqa: BLE001 - TimeoutExpired: it is killed below
                p.kill()
                with contextlib.suppress(Exception):
                    p.wait(timeout=5)
        self._done.wait(5)
        if self._feeder is not None:
            self._feeder.join(timeout=5)

    def text(self) -> str:
        with self._lock:
            return b"".join(self._chunks).decode(errors="replace")

    # -- what it read -------------------------------------------------------
    def result(self) -> HostResult:
        """Samples on this machine's clock, and what went wrong (pure over the stream)."""
        if self.start_error is not None:
            return HostResult(self.host, [], {}, f"the host sampler could not be started: {self.start_error}",
                              self.started_at, {})
        t = self.plan.transport
        rc = self._p.poll() if self._p is not None else None
        return host_result(self.plan, self.text(), trial_id=self.trial_id, offset=t.clock_offset,
                           offset_uncertainty=t.clock_uncertainty, pids=self.pids, exit_code=rc,
                           started_at=self.started_at, stderr=self._err.decode(errors="replace"))


@dataclass(frozen=True)
class HostResult:
    host: str
    samples: list[Sample]
    tool_cpus: dict[str, dict]
    missing: str | None            # why (some of) its counters are missing; None: complete
    missing_from: float | None     # from when (this machine's clock, s)
    meta: dict[str, Any]


def host_result(plan: HostPlan, text: str, *, trial_id: str, offset: float, offset_uncertainty: float,
                pids: Mapping[int, tuple[str, str, str]], exit_code: int | None = None,
                started_at: float | None = None, stderr: str = "") -> HostResult:
    """The sampler's stream as Samples on this machine's clock (pure).
    ``offset`` (host clock - this clock, s) and its uncertainty are what
    preflight measured; ``pids`` maps the remote PIDs followed to (host,
    role, proc)."""
    host = plan.host
    try:
        stream = parse_stream(text, host)
        cmap = clock_map(stream, offset, offset_uncertainty)
    except ToolError as e:
        why = e.message + (f" (exit {exit_code})" if exit_code not in (None, 0) else "")
        if stderr.strip():
            why += f": {tail(stderr)}"
        return HostResult(host, [], {}, why, started_at, {})
    reads = parse_reads(stream)
    meta: dict[str, Any] = {"os": stream.os, "clock": stream.clock, "resolution_s": stream.resolution,
                            "interval_s": stream.interval, "reads": len(reads), "end": stream.end,
                            "clock_shift_s": cmap.shift, "clock_uncertainty_s": cmap.uncertainty,
                            "offset_s": offset, "offset_uncertainty_s": offset_uncertainty}
    if stream.problems:
        meta["problems"] = list(stream.problems)
    samples = _net(plan, reads, cmap, trial_id) + _cpu(plan, stream, reads, cmap, trial_id)
    procs, cpus = _procs(reads, cmap, pids)
    if plan.cpu_machine is not None:
        samples += cpu_samples([], [], procs, machine=plan.cpu_machine, trial_id=trial_id)
    missing = missing_from = None
    if stream.end != "stdin":
        # it did not stop because the point ended: it died, its ticker did,
        # its stream was cut, or it reached its own time limit
        missing_from = reads[-1].t1 + cmap.shift if reads else started_at
        missing = ("its stream was cut (the sampler or the connection died"
                   + (f"; exit {exit_code}" if exit_code not in (None, 0) else "")
                   + (f": {tail(stderr)}" if stderr.strip() else "") + ")" if stream.end is None
                   else f"the host sampler stopped by itself ({stream.end})")
    elif not reads:
        missing, missing_from = "the host sampler made no read", started_at
    return HostResult(host, samples, cpus, missing, missing_from, meta)


def _net(plan: HostPlan, reads: list[HostRead], cmap: ClockMap, trial_id: str) -> list[Sample]:
    if not plan.ifnames:
        return []
    rows: list[tuple[str, str | None, float, dict[str, int] | None, dict[str, int]]] = []
    for r in reads:
        if r.net_dev is None:
            continue
        proto = watched(r.proto) if r.proto else {}
        for ifname in plan.ifnames:
            c = r.net_dev.get(ifname) if ifname else None
            rows.append((plan.host, ifname, r.t + cmap.shift, c.values if c else None, proto))
    return net_samples(rows, trial_id)


def _cpu(plan: HostPlan, stream: HostStream, reads: list[HostRead], cmap: ClockMap, trial_id: str) -> list[Sample]:
    if plan.cpu_machine is None:
        return []
    stat = [(r.t + cmap.shift, r.cpu) for r in reads if r.cpu is not None and r.cpu_hz]
    hz = next((r.cpu_hz for r in reads if r.cpu_hz), None)
    irqs: list[tuple[float, dict[tuple[str, str], int]]] = []
    for r in reads:
        counts: dict[tuple[str, str], int] = {}
        for kind, per_cpu in (r.softirqs or {}).items():
            counts.update({(f"softirq:{kind}", cpu): n for cpu, n in per_cpu.items()})
        for irq, label in plan.nic_irqs.items():
            if r.interrupts and irq in r.interrupts:
                counts.update({(f"irq:{label}", cpu): n for cpu, n in r.interrupts[irq][0].items()})
        if counts:
            irqs.append((r.t + cmap.shift, counts))
    if hz is None:
        return cpu_samples([], irqs, {}, machine=plan.cpu_machine, trial_id=trial_id)
    return cpu_samples(stat, irqs, {}, machine=plan.cpu_machine, trial_id=trial_id, hz=hz)


def _procs(reads: list[HostRead], cmap: ClockMap, pids: Mapping[int, tuple[str, str, str]]
           ) -> tuple[dict[tuple[str, str, str], list[tuple[float, float, float]]], dict[str, dict]]:
    """Each followed tool's (t, utime, stime) reads, and where it could and did run."""
    out: dict[tuple[str, str, str], list[tuple[float, float, float]]] = {}
    where: dict[tuple[str, str, str], dict] = {}
    for r in reads:
        for pid, key in pids.items():
            p = r.procs.get(pid)
            if p is None or p.comm in LAUNCHERS:
                continue     # not read, gone, or not yet exec'd into the tool
            out.setdefault(key, []).append((r.t + cmap.shift, p.utime, p.stime))
            w = where.setdefault(key, {"allowed": r.allowed.get(pid), "seen": []})
            if w["allowed"] is None:
                w["allowed"] = r.allowed.get(pid)
            if p.processor is not None and p.processor not in w["seen"]:
                w["seen"].append(p.processor)
    return out, {" ".join(k): {"allowed": v["allowed"], "seen": sorted(v["seen"])} for k, v in where.items()}


class HostSamplers:
    """Every host sampler of one point, started and stopped together."""

    def __init__(self, plans: Sequence[HostPlan], *, trial_id: str, interval: float):
        self.samplers = [HostSampler(p, trial_id=trial_id, interval=interval) for p in plans]
        self._stopping = threading.Event()

    def start(self, wait_first: bool) -> None:
        for s in self.samplers:
            s.start()
        if wait_first:
            by = time.monotonic() + FIRST_READ_S
            for s in self.samplers:
                s.wait_first(by)

    def read_now(self) -> None:
        for s in self.samplers:
            s.read_now()

    def read_at(self, instants: Sequence[float]) -> None:
        """One read on every host at each of ``instants`` (this machine's
        clock, s), from a thread of its own.  A study whose window edges are
        known when it releases its tools reads there: a tick that straddles
        an edge is spread evenly over its span, so when the rate changes in
        it (the tools starting, a burst) the counts inside the window come out
        wrong by up to a tick's share -- measured 1-1.6 % at 0.25 s ticks on
        a 1.5 s window.  Ended with :meth:`stop`."""
        def run() -> None:
            for t in sorted(instants):
                if self._stopping.wait(max(0.0, t - time.time())):
                    return
                self.read_now()

        threading.Thread(target=run, name="hostsampler-edges", daemon=True).start()

    def stop(self, meta: dict) -> list[Sample]:
        by = time.monotonic() + 5.0
        self._stopping.set()
        for s in self.samplers:          # every host told at once, then each waited for
            s.close()
        for s in self.samplers:
            s.stop(by)
        out: list[Sample] = []
        for s in self.samplers:
            r = s.result()
            out += r.samples
            meta.setdefault("host_sampling", {})[r.host] = r.meta
            if r.tool_cpus:
                meta.setdefault("tool_cpus", {}).update(r.tool_cpus)
            if r.missing is not None:
                when = (f" from {r.missing_from - s.started_at:.2f} s into the sampling"
                        if r.missing_from is not None and s.started_at is not None else "")
                meta.setdefault("counters_missing", {})[r.host] = f"{r.missing}{when}"
                what = " and ".join(w for w, on in (("counters", s.plan.ifnames), ("CPU", s.plan.cpu_machine))
                                    if on)
                meta.setdefault("warnings", []).append(f"{r.host}: its {what} are missing{when} on: {r.missing}")
        return out
