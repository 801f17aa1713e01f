"""A scripted Transport for unit tests: no root, no network, same protocol.

A ``responder`` maps each argv to a :class:`Script`: what the "process" writes
to stdout/stderr, its exit code, and whether it hangs.  Gated processes write
their start stamp and output only when released, as the real gate does.
"""

from __future__ import annotations

import itertools
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
    runtime: float = 0.0                # seconds from release to the exit stamp (gated)
    render: Callable[[float], str] | None = None   # stdout made from the release time (tools that print times)


_pids = itertools.count(40000)


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

    def wrap(self, argv: Sequence[str]) -> list[str]:
        return list(argv)

    def run(self, argv: Sequence[str], *, timeout: float = 30.0, input: str | None = None) -> CommandResult:
        self.commands.append(list(argv))
        if self.counters is not None and len(argv) > 2 and "@@nicbench-net" in argv[2]:
            # the network sampler's read through the namespace, once the tools have exited
            self.net_dev_fallback_reads += 1
            out = f"@@nicbench-net dev\n{self.counters()}@@nicbench-net snmp\n@@nicbench-net netstat\n"
            return CommandResult(self.host, tuple(argv), 0, out, "", 0.0)
        s = self.responder(list(argv))
        if s.returncode == 127:
            raise PreflightError(f"command not found: {argv[0]}", where=self.host)
        return CommandResult(self.host, tuple(argv), s.returncode, s.stdout, s.stderr, 0.0)

    def spawn(self, argv: Sequence[str], *, stdout: Path, stderr: Path, gated: bool = False) -> FakeProcess:
        self.commands.append(list(argv))
        p = FakeProcess(self.host, argv, self.responder(list(argv)), stdout, stderr, gated)
        self.spawned.append(p)
        return p

    def fd_links(self, pid: int) -> list[str]:
        return [f"socket:[{pid}]"] if any(p.pid == pid and p.script.listen for p in self.spawned) else []

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
            if path in (f"/proc/{p.pid}/net/tcp", f"/proc/{p.pid}/net/tcp6"):
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
