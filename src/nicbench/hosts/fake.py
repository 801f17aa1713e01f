"""A scripted Transport for unit tests: no root, no network, same protocol.

A ``responder`` maps each argv to a :class:`Script`: what the "process" writes
to stdout/stderr, its exit code, and whether it hangs.  Gated processes write
their start stamp and output only when released, as the real gate does.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from ..core.errors import PreflightError
from .spec import HostsSpec
from .sshcheck import HostCheck
from .transport import END_MARK, GATE_MARK, READY_MARK, CommandResult, Transport


@dataclass
class Script:
    stdout: str = ""
    stderr: str = ""
    returncode: int = 0
    hang: bool = False                  # never exits until stopped
    listen: int | tuple[int, ...] | None = None   # port(s) shown as LISTEN in /proc/PID/net/tcp6
    udp_bound: int | None = None        # a port shown bound in /proc/PID/net/udp6 (an iperf 2 UDP server)
    udp_streams: int = 0                # connected sockets on ``listen`` in /proc/PID/net/udp6 (iperf3's UDP streams)
    runtime: float = 0.0                # seconds from release to the exit stamp (gated)
    render: Callable[[float], str] | None = None   # stdout made from the release time (tools that print times)
    launcher: bool = False              # a wrapper (coreutils timeout) whose one child, the tool, holds the sockets
    stopped: bool = False               # SIGSTOPped: its /proc/PID/stat says state T while it runs


def _exec_of(argv: Sequence[str]) -> list[str]:
    """What a process becomes: ``env VAR=value ... tool args`` execs the tool
    (the same PID, its own command line), as a real host's process would."""
    a = list(argv)
    if a and a[0] == "env":
        a = a[1:]
        while a and "=" in a[0] and not a[0].startswith("-"):
            a = a[1:]
    return a


_pids = itertools.count(40000)
CHILD = 500000                          # a launcher's tool has the launcher's PID + this


class FakeProcess:
    scheduled = False
    rtt = 0.0

    def __init__(self, host: str, argv: Sequence[str], script: Script, stdout: Path, stderr: Path,
                 gated: bool):
        self.host, self.argv, self.script = host, tuple(argv), script
        self.pid = next(_pids)
        self.stdout_path, self.stderr_path = stdout, stderr
        self.gated = gated
        self.released_at: float | None = None
        self.signals: list[int] = []
        self._rc: int | None = None
        stdout.parent.mkdir(parents=True, exist_ok=True)
        stdout.write_text("")
        stderr.write_text(READY_MARK + "\n" if gated else "")
        self.spawned_at = time.time()
        if not gated:
            self._finish_output()

    def _finish_output(self) -> None:
        render = self.script.render
        self.stdout_path.write_text(render(self.released_at or time.time()) if render else self.script.stdout)
        with open(self.stderr_path, "a") as f:
            f.write(self.script.stderr)
            if self.gated and not self.script.hang:
                f.write(f"{END_MARK}{time.time() + self.script.runtime:.6f}\n")
        if not self.script.hang:
            self._rc = self.script.returncode

    def release(self, at: float | None = None) -> None:
        if self.gated and self.released_at is None:
            self.released_at = time.time()
            with open(self.stderr_path, "a") as f:
                f.write(f"{GATE_MARK}{self.released_at:.6f}\n")
            self._finish_output()

    def is_ready(self) -> bool:
        return True

    def poll(self) -> int | None:
        return self._rc

    def wait(self, timeout: float) -> int | None:
        if self._rc is None and timeout > 0:
            time.sleep(min(timeout, 0.01))
        return self._rc

    def stop(self, grace: float = 1.0, sig: int = signal.SIGTERM) -> int | None:
        self.signals.append(sig)
        if self._rc is None:
            self._rc = -sig
        return self._rc


@dataclass
class FakeTransport:
    host: str
    responder: Callable[[list[str]], Script] = lambda argv: Script()
    kind: str = "fake"
    commands: list[list[str]] = field(default_factory=list)
    spawned: list[FakeProcess] = field(default_factory=list)
    files: dict[str, str] = field(default_factory=dict)
    counters: Callable[[], str] | None = None    # what /proc/.../net/dev shows, read after read
    net_dev_fallback_reads: int = 0
    gone: bool = False                           # the host became unreachable
    os: str = "Linux"                            # uname -s, as preflight would find it
    # a host whose counters are read by a sampler running there (as over SSH):
    # ``host_sampler`` plays that sampler (see FakeSamplerHost)
    samples_on_host: bool = False
    host_sampler: Callable[[list[str]], FakeStream] | None = None
    clock_offset: float = 0.0                    # host clock - this clock, s (as preflight would apply it)
    clock_uncertainty: float = 0.0
    # what ethtool -S of the test interface prints, read after read ((driver, text); None: no ethtool)
    nic_stats: Callable[[], tuple[str, str]] | None = None

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return list(argv)

    def run(self, argv: Sequence[str], *, timeout: float = 30.0, input: str | None = None) -> CommandResult:
        self.commands.append(list(argv))
        if self.counters is not None and len(argv) > 2 and "@@nicbench-net" in argv[2]:
            # the network sampler's read through the namespace, once the tools have exited
            self.net_dev_fallback_reads += 1
            out = f"@@nicbench-net dev\n{self.counters()}@@nicbench-net snmp\n@@nicbench-net netstat\n"
            return CommandResult(self.host, tuple(argv), 0, out, "", 0.0)
        if len(argv) > 2 and "@@nicbench-driver" in argv[2]:
            # the NIC counters' read: ethtool -i and -S in one command
            if self.nic_stats is None:
                out = "@@nicbench-driver\n@@nicbench-stats\nsh: 1: ethtool: not found\n@@nicbench-rc 127\n"
            else:
                driver, text = self.nic_stats()
                out = f"@@nicbench-driver\n{driver}\n@@nicbench-stats\n{text}@@nicbench-rc 0\n"
            return CommandResult(self.host, tuple(argv), 0, out, "", 0.0)
        s = self.responder(list(argv))
        if s.returncode == 127:
            raise PreflightError(f"command not found: {argv[0]}", where=self.host)
        return CommandResult(self.host, tuple(argv), s.returncode, s.stdout, s.stderr, 0.0)

    def spawn(self, argv: Sequence[str], *, stdout: Path, stderr: Path, gated: bool = False) -> FakeProcess:
        self.commands.append(list(argv))
        tool = _exec_of(argv)
        p = FakeProcess(self.host, tool, self.responder(tool), stdout, stderr, gated)
        self.spawned.append(p)
        return p

    def _tool_of(self, pid: int) -> FakeProcess | None:
        """The process whose tool has ``pid``: itself, or the child below a launcher."""
        for p in self.spawned:
            if (p.pid == pid and not p.script.launcher) or (p.script.launcher and pid == p.pid + CHILD):
                return p
        return None

    def stream(self, argv: Sequence[str]) -> FakeStream:
        self.commands.append(list(argv))
        if self.host_sampler is None:
            raise PreflightError("this fake host runs no streamed command", where=self.host)
        return self.host_sampler(list(argv))

    def fd_links(self, pid: int) -> list[str]:
        out = []
        for p in self.spawned:
            if self._tool_of(pid) is p and (p.script.listen or p.script.udp_bound):
                out.append(f"socket:[{p.pid}]")      # the inode its tables show
                out += [f"socket:[{p.pid * 1000 + k}]" for k in range(p.script.udp_streams)]
        return out

    def alive(self) -> bool:
        return not self.gone

    def put_file(self, local: Path, text: str) -> str:
        """Like a host of its own: the run keeps ``local``, the "host" a copy of its own."""
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(text)
        path = f"/fake/{self.host}/{local.name}"
        self.files[path] = text
        return path

    def drop_files(self, paths: Sequence[str]) -> None:
        for p in paths:
            self.files.pop(p, None)

    def read_text(self, path: str) -> str:
        if self.counters is not None and path.endswith("/net/dev"):
            if path == "/proc/net/dev":
                self.net_dev_fallback_reads += 1
            elif not any(path == f"/proc/{p.pid}/net/dev" and p.poll() is None for p in self.spawned):
                raise FileNotFoundError(path)       # that process has exited
            return self.counters()
        for p in self.spawned:
            if p.script.launcher and path == f"/proc/{p.pid}/task/{p.pid}/children":
                return f"{p.pid + CHILD}\n" if p.poll() is None else ""
            if p.script.launcher and path == f"/proc/{p.pid + CHILD}/comm":
                return "tool\n"
            tool = p.pid + CHILD if p.script.launcher else p.pid
            if p.script.stopped and path == f"/proc/{tool}/stat" and p.poll() is None:
                # as Linux writes it: pid (comm) state, then the other 49 fields
                rest = ["1", str(tool), str(tool), "0", "-1", "4194560", "100", "0", "0", "0", "5", "3", "0", "0",
                        "20", "0", "1", "0", "12345", "10000000", "500"] + ["0"] * 29
                return f"{tool} ({Path(p.argv[0]).name[:15]}) T {' '.join(rest)}\n"
            if path in (f"/proc/{tool}/net/udp", f"/proc/{tool}/net/udp6"):
                return _udp_table(p) if path.endswith("6") else _UDP_HEADER
            if path in (f"/proc/{tool}/net/tcp", f"/proc/{tool}/net/tcp6"):
                header = "  sl  local_address rem_address   st\n"
                ports = (p.script.listen,) if isinstance(p.script.listen, int) else p.script.listen or ()
                if p.poll() is not None:
                    return header
                return header + "".join(f"   {i}: 00000000000000000000000000000000:{port:04X} "
                                        f"00000000000000000000000000000000:0000 0A 0:0 0:0 0 0 0 {p.pid}\n"
                                        for i, port in enumerate(ports))
        if path in self.files:
            return self.files[path]
        raise FileNotFoundError(path)


_UDP_HEADER = "  sl  local_address remote_address st tx_queue rx_queue tr tm->when retrnsmt uid timeout inode\n"


def _udp_table(p: FakeProcess) -> str:
    """A process's UDP sockets as /proc/PID/net/udp6 shows them: its bound port
    (state 07), its connected streams on its listen port (state 01)."""
    rows = []
    zero = "0" * 32
    if p.poll() is None and p.script.udp_bound:
        rows.append(f"{zero}:{p.script.udp_bound:04X} {zero}:0000 07 0:0 0:0 0 0 0 {p.pid}")
    port = p.script.listen if isinstance(p.script.listen, int) else None
    if p.poll() is None and port:
        rows += [f"{zero}:{port:04X} {zero}:{40000 + k:04X} 01 0:0 0:0 0 0 0 {p.pid * 1000 + k}"
                 for k in range(p.script.udp_streams)]
    return _UDP_HEADER + "".join(f"   {i}: {r}\n" for i, r in enumerate(rows))


class FakeHosts:
    """The Hosts protocol over fake transports: a run end to end without root."""

    kind = "fake"
    shared_machine = False

    def __init__(self, spec: HostsSpec, transports: dict[str, FakeTransport]):
        self.spec = spec
        self._t = transports
        self.closed = False

    @property
    def checks(self) -> Mapping[str, HostCheck]:
        return {}

    def transport(self, host: str) -> Transport:
        return self._t[host]

    def transports(self) -> dict[str, Transport]:
        return dict(self._t)

    def restore_id(self, host: str) -> str:
        return f"fake-{host}"

    def close(self) -> None:
        self.closed = True


class FakeStream:
    """The local end of a streamed remote command (``subprocess.Popen``-like):
    ``stdin`` writes reach :meth:`lines`, ``write`` text reaches ``stdout``."""

    def __init__(self) -> None:
        r, w = os.pipe()
        self.stdout: IO[bytes] | None = open(r, "rb")
        self._out = open(w, "wb")
        ir, iw = os.pipe()
        self.stdin: IO[bytes] | None = open(iw, "wb")
        self._in = open(ir, "rb")
        self.stderr: IO[bytes] | None = io.BytesIO()
        self.returncode: int | None = None
        self.pid = next(_pids)
        self._exited = threading.Event()

    def lines(self) -> list[str]:
        """The next line(s) written to stdin (blocks); [] at end of file."""
        line = self._in.readline()
        return [line.decode().strip()] if line else []

    def write(self, text: str) -> bool:
        try:
            self._out.write(text.encode())
            self._out.flush()
            return True
        except (OSError, ValueError):
            return False

    def exit(self, rc: int) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._out.close()
        with contextlib.suppress(OSError, ValueError):
            self._in.close()
        self.returncode = rc
        self._exited.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._exited.wait(timeout):
            raise TimeoutError("still running")
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        self.exit(-signal.SIGKILL)


class FakeSamplerHost:
    """A host as ``hostsampler.sh`` would see it, for tests of the controller's side.

    Its sampler clock is this machine's monotonic clock (CLOCK_MONOTONIC,
    printed in ns like the real ``mono_ns`` clock) and its wall clock runs
    ``offset`` s ahead of this machine's.  ``counters(t)`` gives the text of
    /proc/net/dev at host wall time ``t``, ``stat(t)`` that of /proc/stat.
    Each record is made (and stamped) at its tick, then delivered after
    ``delay()`` s, in order, like a TCP stream over a slow or jittery
    path.  ``die_after``: s after which it stops printing mid-stream and
    exits 255, without its goodbye (a sampler or a link that died)."""

    def __init__(self, counters: Callable[[float], str], *, stat: Callable[[float], str] | None = None,
                 offset: float = 0.0, delay: Callable[[], float] = lambda: 0.0, die_after: float | None = None):
        self.counters, self.stat, self.offset, self.delay, self.die_after = counters, stat, offset, delay, die_after
        self.started: list[FakeStream] = []
        self.late: list[float] = []          # how late each record was delivered after it was made, s
        self._wall_minus_mono = time.time() - time.monotonic()

    def __call__(self, argv: list[str]) -> FakeStream:
        i = argv.index("nicbench-sampler")
        interval, items = float(argv[i + 1]), argv[i + 3:]
        st = FakeStream()
        self.started.append(st)
        threading.Thread(target=self._run, args=(st, interval, items), daemon=True).start()
        return st

    def _tick(self, seq: int, items: list[str]) -> str:
        mono = time.monotonic()
        # the counters' time from the same instant as the stamp: two clock calls
        # can be a preemption apart on a loaded machine, which a real tick's
        # stamps (taken around its reads) bound but this one-instant fake would not
        wall = mono + self._wall_minus_mono + self.offset
        out = [f"@@nbs tick {seq} {int(mono * 1e9)}"]
        if any(x == "net" or x.startswith("net:") for x in items):
            text = self.counters(wall)
            out += [f"@@nbs src net/dev {text.count(chr(10))}", text.rstrip("\n")]
        if "cpu" in items and self.stat is not None:
            text = self.stat(wall)
            out += [f"@@nbs src stat {text.count(chr(10))}", text.rstrip("\n")]
        out.append(f"@@nbs tock {seq} {int(mono * 1e9)}")
        return "\n".join(out) + "\n"

    def _offset_line(self) -> str:
        before = time.monotonic()
        wall = time.time() + self.offset
        return f"@@nbs offset {int(before * 1e9)} {wall:.9f} {int(time.monotonic() * 1e9) + 1}\n"

    def _run(self, st: FakeStream, interval: float, items: list[str]) -> None:
        queue: list[tuple[float, str]] = []
        made_at: dict[str, float] = {}
        cond = threading.Condition()
        eof = threading.Event()
        t_start = time.monotonic()

        def post(text: str, delayed: bool = True) -> None:
            with cond:
                made = time.monotonic()
                at = made + (self.delay() if delayed else 0.0)
                queue.append((max(at, queue[-1][0]) if queue else at, text))
                made_at[text] = made
                cond.notify()

        def deliver() -> None:
            while True:
                with cond:
                    while not queue:
                        cond.wait()
                    at, text = queue[0]
                if text == "":
                    return
                time.sleep(max(0.0, at - time.monotonic()))
                with cond:
                    queue.pop(0)
                if not st.write(text):
                    return
                self.late.append(time.monotonic() - made_at.pop(text, time.monotonic()))

        def commands() -> None:
            while True:
                got = st.lines()
                if not got:
                    eof.set()
                    return
                if got[0] == "read":
                    reads.append(1)

        reads: list[int] = []
        sender = threading.Thread(target=deliver, daemon=True)
        sender.start()
        threading.Thread(target=commands, daemon=True).start()
        post(f"@@nbs hello 1 os=Linux clock=mono_ns res=1e-9 interval={interval:g} seconds=60 pid={st.pid}\n"
             + self._offset_line() * 3)
        seq, nxt = 0, time.monotonic()
        while True:
            if self.die_after is not None and time.monotonic() - t_start >= self.die_after:
                post("")
                sender.join(5)
                st.exit(255)
                return
            if eof.is_set():
                post(self._offset_line() + f"@@nbs bye stdin {int(time.monotonic() * 1e9)}\n", delayed=False)
                post("")
                sender.join(5)
                st.exit(0)
                return
            if reads or time.monotonic() >= nxt:
                if reads:
                    reads.pop()
                else:
                    nxt += interval
                seq += 1
                post(self._tick(seq, items))
            time.sleep(0.002)
