"""The runner kit: what every study's runner does the same way around a point.

The environment the session hands every study (:class:`PointEnv`), the start
barrier, the samplers around a point, and a point's fate (:class:`PointGuard`).
One copy, so a fix reaches all studies.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from ..core.errors import NicbenchError, ToolError, stopped_by, tail
from ..hosts.transport import Process, Transport, read_output
from ..records import RawOutput, Sample, TrialStatus
from ..sampling.nicstats import NicStatSampler
from ..sampling.remote import HostPlan, HostSamplers, samples_on_host
from ..sampling.sampler import CpuSampler, NetSampler, NetTarget, tool_pid


@dataclass(frozen=True)
class PointEnv:
    """What the session decided before the first point, handed to the study
    as it is (the study never writes back into it)."""

    rel: Callable[[Path], str] = str                             # raw output path -> path in the run directory
    pin: Mapping[str, Sequence[str]] = field(default_factory=dict)   # host -> argv prefix (taskset/numactl)
    nic_irqs: Mapping[str, str] = field(default_factory=dict)    # IRQ -> label, counted per CPU (none on veth)
    ifnames: Mapping[str, str] = field(default_factory=dict)     # host -> its test interface, sampled per point
    cpu_transport: Transport | None = None    # reads /proc/stat of the CPUs the report speaks of
    cpu_machine: str = "machine"              # whose CPUs those are: the lab's machine, or the study server

    def if_of(self, host: str) -> str | None:
        """The test interface of ``host`` (None: not sampled)."""
        return self.ifnames.get(host)

    def pinned(self, host: str, argv: Sequence[str]) -> list[str]:
        """``argv`` under the tuning profile's pinning for ``host`` (taskset/numactl), if any."""
        return [*self.pin.get(host, ()), *argv]


class RawFiles:
    """Where a point's tools write: ``NAME.out`` and ``NAME.err`` under the
    point's raw directory, each recorded as a RawOutput (kept before any
    parsing)."""

    def __init__(self, trial_id: str, env: PointEnv, raw_dir: Path, tool: str):
        self.trial_id, self.env, self.raw_dir, self.tool = trial_id, env, raw_dir, tool
        self.outputs: list[RawOutput] = []

    def pair(self, host: str, role: str, name: str) -> tuple[Path, Path]:
        out, err = self.raw_dir / f"{name}.out", self.raw_dir / f"{name}.err"
        self.outputs.append(RawOutput(self.trial_id, host, role, self.tool, "stdout", self.env.rel(out)))
        self.outputs.append(RawOutput(self.trial_id, host, role, self.tool, "stderr", self.env.rel(err)))
        return out, err


def even_shares(total: int, n: int) -> list[int]:
    """``total`` split over ``n`` as evenly as possible, the first ones one more."""
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def release_together(procs: Sequence[Process], what: str, where: str, timeout: float = 5.0) -> float:
    """The start barrier: once every gated process waits at its gate, release
    them back to back (over SSH: with one start time for all); returns the
    release time.  A process that dies first,
    or a gate not reached in ``timeout``, is a ToolError naming it."""
    return release_staggered([(0.0, procs)], what, where, timeout)[0]


def release_staggered(stages: Sequence[tuple[float, Sequence[Process]]], what: str, where: str,
                      timeout: float = 5.0) -> list[float]:
    """One barrier, several start times: once every gated process of every
    stage waits at its gate, stage ``(offset, procs)`` is released ``offset``
    seconds after the first (a load that must be running before the probes
    that measure it start).  Returns each stage's release time (wall clock).
    Errors as :func:`release_together`."""
    procs = [p for _, ps in stages for p in ps]
    ready_by = time.monotonic() + timeout
    while not all(p.is_ready() for p in procs):
        dead = [p for p in procs if p.poll() is not None]
        if dead:
            raise ToolError(f"{what} died before the start barrier: "
                            f"{tail(read_output(dead[0].stderr_path)) or 'no error text'}", where=dead[0].host)
        if time.monotonic() > ready_by:
            raise ToolError(f"{what} not ready at the start barrier after {timeout:g} s", where=where)
        time.sleep(0.002)
    if any(p.scheduled for p in procs):
        # over a network each release takes its own time to arrive: name a start
        # time far enough ahead for all of them (a few ms per process here, and
        # three of the slowest host's measured round trips)
        rtt = max((p.rtt for p in procs), default=0.0)
        at = time.time() + 0.05 + 0.004 * len(procs) + 3 * rtt
        for offset, ps in stages:
            for p in ps:
                p.release(at + offset)
        return [at + offset for offset, _ in stages]
    t0 = time.time()
    out = []
    for offset, ps in sorted(stages, key=lambda st: st[0]):
        wait = t0 + offset - time.time()
        if wait > 0:
            time.sleep(wait)
        out.append(time.time())
        for p in ps:
            p.release()
    order = sorted(range(len(stages)), key=lambda i: stages[i][0])
    return [out[order.index(i)] for i in range(len(stages))]


class PointSamplers:
    """The network and CPU samplers of one point, and the NIC's own counters
    (``ethtool -S`` of every target's interface, read as the samplers start
    and at the last read: ``sampling.nicstats``).

    Hosts reached over SSH are sampled by a sampler running on each of them
    (``sampling.remote``: host-stamped reads, no round trip in the rates);
    the lab's namespaces and this machine are read from here.

    ``start(first_read=True)`` reads once before returning, for studies whose
    window starts at the tools' release (HTTPS, storage); the TCP study's
    window starts after the warm-up, so it starts them just after release.
    """

    def __init__(self, trial_id: str, targets: list[NetTarget], cpu_transport: Transport | None,
                 procs: Callable[[], list[tuple[int, str, str, str]]], *, machine: str,
                 nic_irqs: Mapping[str, str], net_interval: float = 0.5, cpu_interval: float = 0.25):
        local = [tg for tg in targets if not samples_on_host(tg.transport)]
        plans: dict[str, HostPlan] = {}
        for tg in targets:
            if samples_on_host(tg.transport):
                plans.setdefault(tg.host, HostPlan(tg.host, tg.transport)).ifnames.append(tg.ifname)  # type: ignore[arg-type]
        if cpu_transport is not None and samples_on_host(cpu_transport):
            plan = plans.setdefault(cpu_transport.host, HostPlan(cpu_transport.host, cpu_transport))  # type: ignore[arg-type]
            plan.cpu_machine, plan.procs, plan.nic_irqs = machine, procs, nic_irqs
            cpu_transport = None
        self.net = NetSampler(local, trial_id=trial_id, interval=net_interval) if local else None
        self.cpu = (CpuSampler(cpu_transport, procs, machine=machine, trial_id=trial_id, interval=cpu_interval,
                               nic_irqs=nic_irqs) if cpu_transport is not None else None)
        self.nic = NicStatSampler(targets, trial_id=trial_id) if any(tg.ifname for tg in targets) else None
        self.hosts = (HostSamplers(list(plans.values()), trial_id=trial_id,
                                   interval=min(net_interval, cpu_interval) if any(
                                       p.cpu_machine for p in plans.values()) else net_interval)
                      if plans else None)

    def _each(self):
        return [s for s in (self.net, self.cpu) if s is not None]

    def start(self, first_read: bool = False) -> PointSamplers:
        if self.nic is not None:
            self.nic.start()
        if self.hosts is not None:
            self.hosts.start(wait_first=first_read)
        for s in self._each():
            if first_read:
                s.read()
            s.start()
        return self

    def read_at(self, instants: Sequence[float]) -> None:
        """Hosts sampled on the host also read at these instants (this
        machine's clock, s): the edges of the window a study will measure
        (see ``HostSamplers.read_at``).  Reads made from here (the lab's)
        are not moved: they tick from their first read, just before the release."""
        if self.hosts is not None:
            self.hosts.read_at(instants)

    def last_read(self) -> None:
        """As the tools finish (a read through the namespace if they are gone).
        Like every periodic read, it never fails the point: a read that cannot
        be made leaves the series short, and the analysis says a series does
        not cover the window rather than counting what it did not see."""
        if self.hosts is not None:
            self.hosts.read_now()
        for s in self._each():
            try:
                s.read()
            except Exception:  # noqa: BLE001 - the same rule as the sampler's own loop
                pass
        if self.nic is not None:
            self.nic.end()

    def stop(self, meta: dict) -> list[Sample]:
        """Every sample, and into ``meta`` the samplers' own CPU, where each
        tool ran, and what each host sampler said (``host_sampling``; a host
        whose counters are missing in ``counters_missing`` and a warning)."""
        out: list[Sample] = []
        for s in self._each():
            out += s.stop()
        if self.cpu is not None:
            meta["sampler_cpu_s"] = self.cpu.cpu_seconds
            meta["tool_cpus"] = self.cpu.tool_cpus()
        if self.hosts is not None:
            out += self.hosts.stop(meta)
        if self.nic is not None:
            out += self.nic.stop(meta)
        return out


class PointGuard:
    """One point's fate, the same in every study.

    ``with guard:`` around a point's side effects turns Ctrl-C into
    "interrupted" and a NicbenchError into "failed" with its one line; on the
    way out, whatever happened, every process of the point still running is
    stopped by process group (``sig``, then SIGKILL after ``grace``) and the
    samplers are stopped, their samples in ``counters``.  Anything else
    propagates (a bug), after the same clean-up.
    """

    def __init__(self, meta: dict, procs: Callable[[], Sequence[Process]], *, grace: float = 0.5,
                 sig: int = signal.SIGTERM):
        self.meta, self.procs, self.grace, self.sig = meta, procs, grace, sig
        self.status: TrialStatus = "ok"
        self.error: str | None = None
        self.samplers: PointSamplers | None = None
        self.counters: list[Sample] = []

    def __enter__(self) -> PointGuard:
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None,
                 tb: TracebackType | None) -> bool:
        try:
            if et is not None and issubclass(et, KeyboardInterrupt):
                self.status, self.error = "interrupted", stopped_by(ev)
            elif isinstance(ev, NicbenchError):
                self.status, self.error = "failed", ev.one_line().removeprefix("nicbench: ")
        finally:
            for p in self.procs():                # first: nothing may outlive the point
                if p.poll() is None:
                    p.stop(self.grace, sig=self.sig)
            self.counters = self.samplers.stop(self.meta) if self.samplers is not None else []
        return et is None or issubclass(et, (KeyboardInterrupt, NicbenchError))


def stall_causes(transports: Mapping[str, Transport], ifnames: Mapping[str, str],
                 procs: Sequence[Process] = ()) -> list[str]:
    """What is known to be wrong when a point's tools do not finish: one of
    ``procs`` (the point's engine processes that did not finish) stopped
    (SIGSTOP, a debugger), a host no longer reachable (its SSH connection
    lost, its namespace gone), a test interface down.  Empty when nothing is
    known: then the path is only slow or stalled."""
    out: list[str] = [why for p in procs if (why := _stopped(p, transports)) is not None]
    for host, t in transports.items():
        try:
            if not t.alive():
                out.append(f"{host} is unreachable (its SSH connection is lost or its namespace is gone)")
                continue
            ifname = ifnames.get(host)
            if ifname:
                state = t.read_text(f"/sys/class/net/{ifname}/operstate").strip()
                if state in ("down", "lowerlayerdown", "notpresent"):
                    out.append(f"{host}: {ifname} is {state}")
        except (OSError, NicbenchError):
            continue
    return out


def _stopped(p: Process, transports: Mapping[str, Transport]) -> str | None:
    """``p`` said as stopped when its host's /proc says so (state T: stopped
    by a signal, t: by a debugger), or the tool below it when ``p`` is a gate
    shim (the shim waits for its child, the tool, which is what a user stops);
    None when neither is stopped, ``p`` has ended, or its host has no /proc
    (FreeBSD) or cannot be read."""
    t = transports.get(p.host)
    if t is None or p.poll() is not None:
        return None
    for pid in dict.fromkeys(x for x in (int(p.pid), tool_pid(t, int(p.pid))) if x is not None):
        try:
            stat = t.read_text(f"/proc/{pid}/stat")
        except (OSError, NicbenchError):
            continue
        comm, _, rest = stat.partition("(")[2].rpartition(")")
        state = rest.split()[:1]
        if state in (["T"], ["t"]):
            by = "a debugger (tracing stop)" if state == ["t"] else "a signal (SIGSTOP, SIGTSTP): SIGCONT resumes it"
            return (f"{p.host}: {comm or 'the process'} (pid {pid}) is stopped, not the path: "
                    f"/proc/{pid}/stat says state {state[0]}, stopped by {by}")
    return None


def stalled(what: str, limit: float, where: str, causes: list[str], hint: str) -> ToolError:
    """The watchdog's error: the cause when one is known, else the generic hint."""
    if causes:
        return ToolError(f"{what} still running after {limit:g}s: {'; '.join(causes)}", where=where)
    return ToolError(f"{what} still running after {limit:g}s", where=where, hint=hint)

