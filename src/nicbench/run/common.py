"""What every study's runner does the same way: preflight checks, the start
barrier, the samplers around a point.  One copy, so a fix reaches all studies."""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from ..core.errors import NicbenchError, PreflightError, ToolError, tail
from ..hosts.transport import Process, Transport
from ..records import Sample
from ..sampling.sampler import CpuSampler, NetSampler, NetTarget
from ..tools.base import parse_version
from .procnet import listening_ports


@dataclass(kw_only=True)
class RunContext:
    """What every study's context carries for the session: set by it (from
    the store, the facts, the tuning) and read by the study's runner."""

    rel: Callable[[Path], str] = str          # raw output path -> path in the run directory
    warnings: list[str] = field(default_factory=list)
    ifname: str | None = "eth0"               # each host's test interface, sampled during each point
    cpu_transport: Transport | None = None    # reads /proc/stat of the machine the hosts run on
    cpu_machine: str = "machine"
    tcp_timestamps: dict[str, int | None] = field(default_factory=dict)   # host -> sysctl value, from facts
    nic_irqs: dict[str, str] = field(default_factory=dict)   # IRQ -> label, counted per CPU (none on veth)
    pin: dict[str, list[str]] = field(default_factory=dict)  # host -> argv prefix (taskset/numactl) from tuning
    ifnames: dict[str, str] = field(default_factory=dict)    # host -> its test interface, where hosts differ

    def if_of(self, host: str) -> str | None:
        """The test interface of ``host`` (real hosts name theirs; lab hosts all have ``ifname``)."""
        return self.ifnames.get(host, self.ifname) if self.ifname else None


def read(p: Path) -> str:
    """A tool's output file, or "" if it was never written.  Over SSH, what the
    host's login shell printed before the tool began is dropped (see
    hosts.ssh: the wrapper marks where the tool's output starts)."""
    from ..hosts.ssh import BEGIN_MARK
    try:
        text = p.read_text(errors="replace")
    except OSError:
        return ""
    i = text.find(BEGIN_MARK, 0, 1 << 16)
    return text[i + len(BEGIN_MARK):] if i >= 0 else text


def tool_version(t: Transport, argv: list[str], name: str, hint: str) -> str:
    """``1.22.1`` from a tool's version output (stdout or stderr); PreflightError
    naming the host when the tool is missing or says no version."""
    try:
        r = t.run(argv, timeout=10)
    except PreflightError:
        raise PreflightError(f"{name} is not installed", where=t.host, hint=hint) from None
    v = parse_version(r.stdout + r.stderr)
    if not v:
        raise PreflightError(f"{name}: cannot read a version from {tail(r.stdout + r.stderr)!r}", where=t.host)
    return ".".join(map(str, v))


def host_file(t: Transport, local: Path, text: str) -> str:
    """``text`` where host ``t``'s tools can read it; its path there.  Always
    kept at ``local`` (raw output of the run); a host that does not share this
    file system (SSH) gets a private temporary copy, removed by
    :func:`drop_host_files`."""
    local.parent.mkdir(parents=True, exist_ok=True)
    local.write_text(text)
    if t.kind != "ssh":
        return str(local)
    r = t.run(["sh", "-c", 'f=$(mktemp "${TMPDIR:-/tmp}/nicbench-file.XXXXXX") && cat > "$f" && echo "$f"'],
              input=text, timeout=30).check(f"writing {local.name} on the host")
    return r.stdout.strip()


def drop_host_files(t: Transport, paths: Sequence[str]) -> None:
    """Remove what :func:`host_file` wrote on a host (nothing to do for a local one)."""
    if t.kind == "ssh" and paths:
        try:
            t.run(["rm", "-f", *paths], timeout=10)
        except NicbenchError:
            pass                   # a lost connection: the host keeps a small private temp file


def busy_ports(t: Transport) -> set[int]:
    """TCP ports something listens on in the host's namespace."""
    busy: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            busy |= listening_ports(t.read_text(table))
        except OSError:
            pass
    return busy


def reach_problems(t: Transport, peers: dict[str, str]) -> list[str]:
    """One ping from ``t`` to every peer (name -> address); a line per peer that does not answer."""
    out = []
    for name, addr in peers.items():
        try:
            r = t.run(["ping", "-c", "1", "-W", "2", "-n", "-q", addr], timeout=10)
        except PreflightError as e:
            return [f"{t.host}: {e.message} (apt-get install iputils-ping)"]
        if r.returncode != 0:
            out.append(f"{t.host} cannot reach {name} ({addr}): {tail(r.stdout + r.stderr) or 'no reply'}")
    return out


def even_shares(total: int, n: int) -> list[int]:
    """``total`` split over ``n`` as evenly as possible, the first ones one more."""
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def release_together(procs: Sequence[Process], what: str, where: str, timeout: float = 5.0) -> float:
    """The start barrier: once every gated process waits at its gate, release
    them back to back (over SSH: with one start time for all); returns the
    release time.  A process that dies first,
    or a gate not reached in ``timeout``, is a ToolError naming it."""
    ready_by = time.monotonic() + timeout
    while not all(p.is_ready() for p in procs):
        dead = [p for p in procs if p.poll() is not None]
        if dead:
            raise ToolError(f"{what} died before the start barrier: "
                            f"{tail(read(dead[0].stderr_path)) or 'no error text'}", where=dead[0].host)
        if time.monotonic() > ready_by:
            raise ToolError(f"{what} not ready at the start barrier after {timeout:g} s", where=where)
        time.sleep(0.002)
    if any(getattr(p, "scheduled", False) for p in procs):
        # over a network each release takes its own time to arrive: name a start
        # time far enough ahead for all of them (a few ms per process here, and
        # three of the slowest host's measured round trips)
        rtt = max((getattr(getattr(p, "t", None), "rtt", 0.0) for p in procs), default=0.0)
        at = time.time() + 0.05 + 0.004 * len(procs) + 3 * rtt
        for p in procs:
            p.release(at)
        return at
    t = time.time()
    for p in procs:
        p.release()
    return t


class PointSamplers:
    """The network and CPU samplers of one point.

    ``start(first_read=True)`` reads once before returning, for studies whose
    window starts at the tools' release (HTTPS, storage); the TCP study's
    window starts after the warm-up, so it starts them just after release.
    """

    def __init__(self, trial_id: str, targets: list[NetTarget], cpu_transport: Transport | None,
                 procs: Callable[[], list[tuple[int, str, str, str]]], *, machine: str,
                 nic_irqs: dict[str, str], net_interval: float = 0.5, cpu_interval: float = 0.25):
        self.net = NetSampler(targets, trial_id=trial_id, interval=net_interval) if targets else None
        self.cpu = (CpuSampler(cpu_transport, procs, machine=machine, trial_id=trial_id, interval=cpu_interval,
                               nic_irqs=nic_irqs) if cpu_transport is not None else None)

    def _each(self):
        return [s for s in (self.net, self.cpu) if s is not None]

    def start(self, first_read: bool = False) -> "PointSamplers":
        for s in self._each():
            if first_read:
                s.read()
            s.start()
        return self

    def last_read(self) -> None:
        """As the tools finish (a read through the namespace if they are gone)."""
        for s in self._each():
            s.read()

    def stop(self, meta: dict) -> list[Sample]:
        """Every sample, and into ``meta`` the samplers' own CPU and where each tool ran."""
        out: list[Sample] = []
        for s in self._each():
            out += s.stop()
        if self.cpu is not None:
            meta["sampler_cpu_s"] = self.cpu.cpu_seconds
            meta["tool_cpus"] = self.cpu.tool_cpus()
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
        self.status, self.error = "ok", None
        self.samplers: PointSamplers | None = None
        self.counters: list[Sample] = []

    def __enter__(self) -> "PointGuard":
        return self

    def __exit__(self, et, ev, tb) -> bool:
        try:
            if et is not None and issubclass(et, KeyboardInterrupt):
                self.status, self.error = "interrupted", "interrupted by the user"
            elif et is not None and issubclass(et, NicbenchError):
                self.status, self.error = "failed", ev.one_line().removeprefix("nicbench: ")
        finally:
            for p in self.procs():                # first: nothing may outlive the point
                if p.poll() is None:
                    p.stop(self.grace, sig=self.sig)
            self.counters = self.samplers.stop(self.meta) if self.samplers is not None else []
        return et is None or issubclass(et, (KeyboardInterrupt, NicbenchError))
