"""How commands reach a host: the Transport protocol and its local/netns forms.

Every side effect on a host goes through :class:`Transport`, so the runner can be
tested with :class:`nicbench.hosts.fake.FakeTransport` and the SSH transport
(a later issue) slots in unchanged.

Processes are spawned in their own session (process group = PID), with stdout
and stderr written straight to files in the run directory, so raw output
survives a crash of nicbench itself.  A *gated* spawn starts a tiny bash shim
that blocks on stdin; :meth:`Process.release` writes one byte, the shim
records ``$EPOCHREALTIME`` (a bash builtin: no fork, microsecond resolution)
on stderr and execs the tool.  Releasing every client's gate back to back is
the start barrier; the recorded stamps measure the start skew.  The gate is
only released once every shim has printed its ready mark, so a shim that is
slow to start (12 of them on 2 vCPUs) cannot start late.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from ..core.errors import PreflightError, ToolError, tail

GATE_MARK = "nicbench-start "
END_MARK = "nicbench-end "
READY_MARK = "nicbench-ready"
BEGIN_MARK = "@@nicbench-begin\n"     # over SSH, a spawned process's own stdout starts after it
# The shim stays the tool's parent (same process group, killed with it) so it
# can also stamp the tool's exit: for iperf3 the end of a test is a far better
# time anchor than its start, whose connection set-up can take hundreds of ms
# on a saturated link.
#
# The release line may carry a start time (microseconds since the epoch, on
# this host's clock): the shim then waits for it with ``read -t`` on its
# gate (a builtin with a sub-ms timer: no fork, no spinning), so hosts
# reached over a network start together however long each release took to
# arrive (measured on 16 SSH hosts: 17 ms of spread when released on
# arrival).  An empty line starts at once.
_GATE = ('printf "%s\\n" "' + READY_MARK + '" >&2; IFS= read -r t || exit 125; '
         'if [ -n "$t" ]; then d=$(( t - ${EPOCHREALTIME/[.,]/} )); '
         'if (( d > 0 )); then IFS= read -r -t "$(( d / 1000000 )).$(printf %06d $(( d % 1000000 )))" _; fi; fi; '
         'printf "%s %s\\n" "' + GATE_MARK.strip() + '" "$EPOCHREALTIME" >&2; "$@"; rc=$?; '
         'printf "%s %s\\n" "' + END_MARK.strip() + '" "$EPOCHREALTIME" >&2; exit $rc')


def gate_argv(argv: Sequence[str]) -> list[str]:
    """Wrap ``argv`` so it waits for a release byte on stdin before exec."""
    return ["bash", "-c", _GATE, "nicbench-gate", *argv]


def parse_gate_stamp(stderr_text: str, mark: str = GATE_MARK) -> float | None:
    """The time a gated process recorded at ``mark`` (start: GATE_MARK, exit:
    END_MARK), or None if it never got there."""
    for line in stderr_text.splitlines():
        if line.startswith(mark):
            try:
                return float(line[len(mark):].strip().replace(",", "."))
            except ValueError:
                return None
    return None


def host_os(t: object) -> str:
    """The OS preflight found on a host (``uname -s``: an SSH host's); this
    machine and its namespaces are Linux."""
    return str(getattr(t, "os", None) or "Linux")


def host_clock_offset(p: object) -> float:
    """How far the clock of the host a process runs on is ahead of this
    machine's, s, as preflight measured and applies it (0 on this machine;
    an SSH host's offset within its own uncertainty is not applied either)."""
    return float(getattr(p, "clock_offset", 0.0))


def gate_time(p: Process, mark: str = GATE_MARK) -> float | None:
    """The time a gated process recorded at ``mark`` (start: GATE_MARK,
    exit: END_MARK) on this machine's clock: the host's stamp less the
    host's clock offset, so tool intervals and the host samplers' counters
    (``sampling.remote``) share one time line.  None if it never got there."""
    t = parse_gate_stamp(read_output(p.stderr_path), mark)
    return None if t is None else t - host_clock_offset(p)


def read_output(p: Path) -> str:
    """A tool's output file, or "" if it was never written.  Over SSH, what the
    host's login shell printed before the tool began is dropped (see
    hosts.ssh: the wrapper marks where the tool's output starts)."""
    try:
        text = p.read_text(errors="replace")
    except OSError:
        return ""
    i = text.find(BEGIN_MARK, 0, 1 << 16)
    return text[i + len(BEGIN_MARK):] if i >= 0 else text


_OWN_MARKS = (READY_MARK, GATE_MARK.strip(), END_MARK.strip(), "nicbench-pid ")


def tool_stderr(p: Path) -> str:
    """A tool's stderr without the start gate's and the SSH wrapper's own
    lines: what the tool itself said, for error messages."""
    return "\n".join(ln for ln in read_output(p).splitlines() if not ln.startswith(_OWN_MARKS))


@dataclass(frozen=True)
class CommandResult:
    host: str
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def check(self, what: str | None = None, hint: str | None = None) -> CommandResult:
        if self.returncode != 0:
            raise ToolError(
                f"{what or shlex.join(self.argv)} exited {self.returncode}: {tail(self.stderr) or tail(self.stdout)}",
                where=self.host, hint=hint)
        return self


class Process(Protocol):
    """A tool started on a host, leader of its own process group there."""

    @property
    def host(self) -> str: ...
    @property
    def pid(self) -> int: ...
    @property
    def argv(self) -> tuple[str, ...]: ...
    @property
    def stdout_path(self) -> Path: ...
    @property
    def stderr_path(self) -> Path: ...
    @property
    def scheduled(self) -> bool:
        """Released with a start time: the release itself crosses a network (SSH)."""
        ...
    @property
    def rtt(self) -> float:
        """A command's round trip to the process's host, s (0 on this machine)."""
        ...

    def release(self, at: float | None = None) -> None: ...
    def is_ready(self) -> bool: ...
    def poll(self) -> int | None: ...
    def wait(self, timeout: float) -> int | None: ...
    def stop(self, grace: float = 1.0, sig: int = signal.SIGTERM) -> int | None: ...


class Transport(Protocol):
    """A host nicbench can run commands on."""

    host: str
    kind: str

    def run(self, argv: Sequence[str], *, timeout: float = 30.0,
            input: str | None = None) -> CommandResult: ...

    def spawn(self, argv: Sequence[str], *, stdout: Path, stderr: Path,
              gated: bool = False) -> Process: ...

    def read_text(self, path: str) -> str: ...

    def fd_links(self, pid: int) -> list[str]: ...

    def wrap(self, argv: Sequence[str]) -> list[str]: ...

    def alive(self) -> bool:
        """Can the host still be reached (its namespace exists, its SSH connection is up)?"""
        ...

    def put_file(self, local: Path, text: str) -> str:
        """``text`` where this host's tools can read it; its path there.  Always
        kept at ``local`` (raw output of the run); a host that does not share
        this file system gets a private temporary copy (see :meth:`drop_files`)."""
        ...

    def drop_files(self, paths: Sequence[str]) -> None:
        """Remove what :meth:`put_file` copied to the host (a lost connection
        leaves a small private temporary file behind)."""
        ...


class PopenWaiter:
    """poll/wait over a local Popen (the tool itself, or the ssh client
    carrying a remote one), closing the handle's files once it has exited."""

    _popen: subprocess.Popen

    def _close(self) -> None:
        raise NotImplementedError

    def poll(self) -> int | None:
        rc = self._popen.poll()
        if rc is not None:
            self._close()
        return rc

    def wait(self, timeout: float) -> int | None:
        try:
            rc = self._popen.wait(timeout=max(timeout, 0.0))
        except subprocess.TimeoutExpired:
            return None
        self._close()
        return rc


class LocalProcess(PopenWaiter):
    """A process on this machine, leader of its own process group."""

    scheduled = False       # released in microseconds: no start time needed
    rtt = 0.0

    def __init__(self, host: str, argv: Sequence[str], popen: subprocess.Popen,
                 stdout_path: Path, stderr_path: Path, gated: bool, files: list[IO]):
        self.host = host
        self.argv = tuple(argv)
        self.pid = popen.pid
        self.stdout_path = stdout_path
        self.stderr_path = stderr_path
        self._popen = popen
        self._gated = gated
        self._files = files

    def is_ready(self) -> bool:
        """A gated process is ready once its shim waits at the gate."""
        if not self._gated:
            return True
        try:
            with open(self.stderr_path, "rb") as f:
                return READY_MARK.encode() in f.read(256)
        except OSError:
            return False

    def release(self, at: float | None = None) -> None:
        """Start now; a local process is released in microseconds, so ``at`` is not needed."""
        if self._gated and self._popen.stdin is not None:
            try:
                self._popen.stdin.write(b"\n")
                self._popen.stdin.close()
            except (BrokenPipeError, OSError):
                pass  # it died before the barrier: poll() will say so

    def stop(self, grace: float = 1.0, sig: int = signal.SIGTERM) -> int | None:
        """Signal the whole process group, then SIGKILL it after ``grace`` seconds."""
        if self._popen.poll() is None:
            _killpg(self.pid, sig)
            if self.wait(grace) is None:
                _killpg(self.pid, signal.SIGKILL)
                self.wait(5.0)
        else:
            _killpg(self.pid, signal.SIGKILL)  # stragglers left in the group
        self._close()
        return self._popen.returncode

    def _close(self) -> None:
        for f in self._files:
            if not f.closed:
                f.close()
        if self._popen.stdin is not None and not self._popen.stdin.closed:
            try:
                self._popen.stdin.close()
            except OSError:
                pass


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class LocalTransport:
    """Commands run directly on this machine."""

    kind = "local"

    def __init__(self, host: str = "local", tracker: ProcessSink | None = None):
        self.host = host
        self.tracker = tracker

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return list(argv)

    def run(self, argv: Sequence[str], *, timeout: float = 30.0,
            input: str | None = None) -> CommandResult:
        full = self.wrap(argv)
        t0 = time.monotonic()
        try:
            p = subprocess.run(full, input=input, capture_output=True, text=True,
                               timeout=timeout, start_new_session=True)
        except FileNotFoundError:
            raise PreflightError(f"command not found: {argv[0]}", where=self.host,
                                 hint="run the set-up command in README.md to install the tools") from None
        except subprocess.TimeoutExpired as e:
            raise ToolError(f"{shlex.join(argv)} did not finish within {timeout:g}s: {tail(e.stderr)}",
                            where=self.host) from None
        return CommandResult(self.host, tuple(argv), p.returncode, p.stdout, p.stderr,
                             time.monotonic() - t0)

    def spawn(self, argv: Sequence[str], *, stdout: Path, stderr: Path,
              gated: bool = False) -> LocalProcess:
        real = gate_argv(argv) if gated else list(argv)
        full = self.wrap(real)
        stdout.parent.mkdir(parents=True, exist_ok=True)
        out = open(stdout, "wb")
        err = open(stderr, "wb")
        try:
            popen = subprocess.Popen(full, stdout=out, stderr=err,
                                     stdin=subprocess.PIPE if gated else subprocess.DEVNULL,
                                     start_new_session=True)
        except FileNotFoundError:
            out.close()
            err.close()
            raise PreflightError(f"command not found: {full[0]}", where=self.host) from None
        proc = LocalProcess(self.host, argv, popen, stdout, stderr, gated, [out, err])
        if self.tracker is not None:
            self.tracker.add(self.host, proc.pid)
        return proc

    def read_text(self, path: str) -> str:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def alive(self) -> bool:
        return True

    def put_file(self, local: Path, text: str) -> str:
        """This machine's file system is the host's: the run's own copy is read in place."""
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(text)
        return str(local)

    def drop_files(self, paths: Sequence[str]) -> None:
        """Nothing was copied: the files are the run's raw outputs."""

    def fd_links(self, pid: int) -> list[str]:
        """Targets of /proc/PID/fd/* (e.g. ``socket:[123]``); empty if PID is gone."""
        out: list[str] = []
        try:
            names = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            return out
        for n in names:
            try:
                out.append(os.readlink(f"/proc/{pid}/fd/{n}"))
            except OSError:
                continue
        return out


class NetnsTransport(LocalTransport):
    """Commands run inside a network namespace of the embedded lab.

    ``ip netns exec`` execs the command in place, so the PID we hold is the
    tool's own PID.  Files (/proc, /sys/class/net are per-namespace only through
    a process inside it) are read with ``cat`` inside the namespace.
    """

    kind = "netns"

    def __init__(self, host: str, netns: str, tracker: ProcessSink | None = None):
        super().__init__(host, tracker)
        self.netns = netns

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return ["ip", "netns", "exec", self.netns, *argv]

    def run(self, argv: Sequence[str], *, timeout: float = 30.0,
            input: str | None = None) -> CommandResult:
        r = super().run(argv, timeout=timeout, input=input)
        # `ip netns exec` reports a missing program as exit 1 + this message
        if r.returncode != 0 and f'exec of "{argv[0]}" failed: No such file' in r.stderr:
            raise PreflightError(f"command not found: {argv[0]}", where=self.host,
                                 hint="run the set-up command in README.md to install the tools")
        return r

    def alive(self) -> bool:
        return os.path.exists(f"/run/netns/{self.netns}")

    def read_text(self, path: str) -> str:
        if path.startswith("/proc/") and path.split("/")[2].isdigit():
            return super().read_text(path)  # /proc/PID/... already shows PID's namespace
        r = self.run(["cat", path], timeout=10)
        if r.returncode != 0:
            raise FileNotFoundError(path)
        return r.stdout


def existing_namespaces() -> list[str]:
    """The network namespaces of this machine (``ip netns list``)."""
    try:
        r = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, timeout=15)
    except FileNotFoundError:
        raise PreflightError("the 'ip' command (iproute2) is missing",
                             hint="apt-get install iproute2, or run the set-up command in README.md") from None
    return [ln.split()[0] for ln in r.stdout.splitlines() if ln.strip()]


def each_host(fn, items: dict) -> dict:
    """``fn(value)`` for every item, in threads (hosts answer in parallel, and
    a run's start-up waits for the slowest, not the sum); {key: result, or the
    exception it raised}."""
    out: dict = {}
    # one thread per host (up to 256): a host that is down holds its own
    # thread for its timeout, never a slot the others wait for
    with ThreadPoolExecutor(max_workers=min(256, max(1, len(items)))) as ex:
        futs = {k: ex.submit(fn, v) for k, v in items.items()}
        for k, f in futs.items():
            try:
                out[k] = f.result()
            except Exception as e:  # noqa: BLE001 - returned to the caller, who lists it
                out[k] = e
    return out


class ProcessSink(Protocol):
    def add(self, host: str, pid: int) -> None: ...
