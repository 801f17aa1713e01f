"""Hosts over SSH: the Transport protocol on OpenSSH with a ControlMaster.

Why OpenSSH and not asyncssh: the user's own ``ssh`` already honours their
``~/.ssh/config`` (Host aliases, User, Port, IdentityFile, ProxyJump,
Match blocks), their agent and their known_hosts, with the error messages
they know; asyncssh reimplements only part of that configuration.  One
ControlMaster per host makes every later session a channel on one TCP
connection (no new handshake), and the master's exit is one signal that
the host is gone.

Two kinds of session ride on the master:

- a *command shell*: one remote ``sh`` kept open per host, fed framed
  requests on stdin.  The remote login shell (and its start-up files: 0.3 s
  here for root's ``.bashrc``) runs once per connection, not once per
  command, so a sampler can read /proc files at sub-second intervals;
- one session per *spawned process*: a POSIX sh wrapper starts the tool in
  its own session (``setsid``: process group = PID), reports that PID,
  passes the start-gate byte, and watches its stdin: when the controller
  closes it, dies, or the connection drops, the wrapper kills the tool's
  whole group.  SSH without a TTY never signals remote children, so this
  watchdog is what makes "the run was aborted" reach them.

Strict host-key checking is the default (``StrictHostKeyChecking yes``,
``BatchMode yes``): an unknown or changed key is a one-line error with the
fix, never a silent accept.
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import select
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..core.errors import NicbenchError, PreflightError, ToolError, tail
from .transport import READY_MARK, CommandResult, PopenWaiter, ProcessSink, each_host, gate_argv

PID_MARK = "nicbench-pid "


@dataclass(frozen=True)
class SshTarget:
    """How to reach one host: ``dest`` as ssh takes it (an alias from
    ~/.ssh/config, ``host``, or ``user@host``), plus what the plan or the
    inventory adds.  ``prefix`` runs ssh itself through another command (the
    lab's SSH mode runs it inside the switch's namespace)."""

    dest: str
    user: str | None = None
    port: int | None = None
    identity: str | None = None
    options: tuple[str, ...] = ()          # extra "-o Key=Value" settings
    prefix: tuple[str, ...] = ()
    config: str | None = None              # an ssh_config file instead of ~/.ssh/config (the lab: its own)
    args: tuple[str, ...] = ()             # more ssh arguments as given (an inventory's ansible_ssh_common_args)
    sudo: bool = False                     # run every remote command through sudo -n
    connect_timeout: float = 10.0

    def ssh_argv(self, control: str) -> list[str]:
        argv = [
            *self.prefix,
            "ssh",
            *(["-F", self.config] if self.config else []),
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            "-o",
            f"ConnectTimeout={max(1, int(self.connect_timeout))}",
            "-o",
            "ServerAliveInterval=2",
            "-o",
            "ServerAliveCountMax=3",
            "-o",
            f"ControlPath={control}",
        ]
        for o in self.options:
            argv += ["-o", o]
        if self.user:
            argv += ["-l", self.user]
        if self.port:
            argv += ["-p", str(self.port)]
        if self.identity:
            argv += ["-i", self.identity]
        return argv + list(self.args)


# what ssh says on stderr -> (message, hint)
_SSH_ERRORS = (
    (
        re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for .* has changed"),
        "its host key has CHANGED since it was recorded in known_hosts (a reinstalled host, or someone in the middle)",
        "if the change is expected: ssh-keygen -R HOST, then connect once by hand to accept the new key",
    ),
    (
        re.compile(r"No (ED25519|RSA|ECDSA|[A-Z0-9-]+) host key is known|Host key verification failed"),
        "its host key is not in known_hosts",
        "connect once by hand (ssh HOST) to check and accept its key",
    ),
    (
        re.compile(r"Permission denied"),
        "authentication refused (key or agent)",
        "check the user and that your key is in the host's authorized_keys (ssh-copy-id)",
    ),
    (re.compile(r"Connection refused"), "nothing listens on its SSH port", "is sshd running on the host?"),
    (
        re.compile(r"Connection timed out|timed out|No route to host|Network is unreachable"),
        "it does not answer (down or unreachable)",
        "is the host up and its address right?",
    ),
    (re.compile(r"Could not resolve hostname"), "its name does not resolve", "check the address or the ssh alias"),
)


# what ``sudo -n`` says when it would have to ask for a password (sudo 1.8/1.9;
# "no tty present" from older ones): the host's sudo rule does not cover the command
_SUDO_ASKS = re.compile(r"^sudo: (a password is required|a terminal is required|no tty present)[^\n]*", re.M)
SUDO_HINT = ("give the login user a NOPASSWD sudo rule for nicbench's commands "
             "(e.g. 'USER ALL=(ALL) NOPASSWD: ALL' in /etc/sudoers.d), or log in as root")


def sudo_refusal(stderr: str) -> str | None:
    """sudo's own line when ``sudo -n`` refused because it needs a password, else None."""
    m = _SUDO_ASKS.search(stderr)
    return m.group(0).strip() if m else None


def explain(stderr: str) -> tuple[str, str | None]:
    """ssh's own failure as (message, hint)."""
    for rx, msg, hint in _SSH_ERRORS:
        if rx.search(stderr):
            return f"{msg}: {tail(stderr)}", hint
    return tail(stderr) or "ssh failed with no message", None


# The remote command shell: reads requests from stdin, one per line:
#   ID BASE64(script) [BASE64(stdin)]
# runs the script with sh, and answers on stdout with byte-counted blocks,
# so any output (binary, no trailing newline, marker look-alikes) survives.
_SHELL = r"""
d=$(mktemp -d "${TMPDIR:-/tmp}/nicbench-sh.XXXXXX") || exit 1
trap 'rm -rf "$d"' EXIT
trap 'exit 1' HUP INT TERM
while IFS=' ' read -r id s i; do
  printf '%s' "$s" | base64 -d > "$d/s"
  if [ -n "$i" ]; then printf '%s' "$i" | base64 -d > "$d/i"; else : > "$d/i"; fi
  sh "$d/s" < "$d/i" > "$d/o" 2> "$d/e"; rc=$?
  printf '@@nb-out %s %s\n' "$id" "$(wc -c < "$d/o")"; cat "$d/o"
  printf '@@nb-err %s %s\n' "$id" "$(wc -c < "$d/e")"; cat "$d/e"
  printf '@@nb-end %s %s\n' "$id" "$rc"
done
"""

# A spawned process: a mark on stdout first (what the login shell's start-up
# files print lands before it: ``run.common.read`` drops it), its own session
# (PID = process group), its PID on
# stderr, the gate byte passed through a fifo, and a watchdog on stdin (kept
# as fd 4: sh gives a background list /dev/null as its stdin, before any
# redirection of its own, so ``<&0`` would not do).
_WRAPPER = r"""
printf '@@nicbench-begin\n'
d=$(mktemp -d "${TMPDIR:-/tmp}/nicbench-proc.XXXXXX") || exit 125
trap 'rm -rf "$d"' EXIT
trap 'exit 129' HUP
mkfifo "$d/in"
setsid "$@" < "$d/in" &
pid=$!
exec 3> "$d/in" 4<&0
printf 'nicbench-pid %s\n' "$pid" >&2
( if IFS= read -r l; then printf '%s\n' "$l" >&3; while IFS= read -r _; do :; done; fi
  kill -TERM -"$pid" 2>/dev/null; sleep 2; kill -KILL -"$pid" 2>/dev/null ) <&4 &
w=$!
exec 3>&- 4<&-
wait "$pid"; rc=$?
kill "$w" 2>/dev/null
exit $rc
"""


class SshProcess(PopenWaiter):
    """A process on a remote host: ``pid`` is the remote PID (= its process
    group); the local ssh client carries its stdout and stderr into the run
    directory, and its stdin is the remote watchdog's lifeline."""

    def __init__(
        self,
        transport: SshTransport,
        argv: Sequence[str],
        popen: subprocess.Popen,
        stdout_path: Path,
        stderr_path: Path,
        gated: bool,
        files: list[IO],
    ):
        self.t = transport
        self.host = transport.host
        self.argv = tuple(argv)
        self.stdout_path, self.stderr_path = stdout_path, stderr_path
        self._popen, self._gated, self._files = popen, gated, files
        self._pid: int | None = None

    @property
    def pid(self) -> int:
        """The remote PID, once the wrapper has said it (waits up to the connect timeout)."""
        by = time.monotonic() + self.t.target.connect_timeout + 5
        while self._pid is None:
            self._pid = _pid_in(self.stderr_path)
            if self._pid is None:
                if self._popen.poll() is not None or time.monotonic() > by:
                    why = sudo_refusal(_read(self.stderr_path, 4096)) if self.t.target.sudo else None
                    if why:
                        raise PreflightError(f"{self.argv[0]} did not start: sudo asks for a password ({why})",
                                             where=self.host, hint=SUDO_HINT)
                    raise ToolError(
                        f"{self.argv[0]} did not start over SSH: {tail(_read(self.stderr_path))}", where=self.host
                    )
                time.sleep(0.005)
        return self._pid

    def is_ready(self) -> bool:
        if not self._gated:
            return True
        return READY_MARK in _read(self.stderr_path, 4096)

    scheduled = True  # released with a start time: the release itself crosses a network

    @property
    def rtt(self) -> float:
        return self.t.rtt

    @property
    def clock_offset(self) -> float:
        """The host's clock - this machine's, s (its stamps are mapped with it)."""
        return self.t.clock_offset

    def release(self, at: float | None = None) -> None:
        """Start at ``at`` (this machine's clock; sent in the host's, with the
        offset preflight measured), or at once."""
        if self._gated and self._popen.stdin is not None:
            line = b"\n" if at is None else f"{int((at + self.t.clock_offset) * 1e6)}\n".encode()
            try:
                self._popen.stdin.write(line)
                self._popen.stdin.flush()  # the lifeline stays open
            except (BrokenPipeError, OSError):
                pass

    def stop(self, grace: float = 1.0, sig: int = signal.SIGTERM) -> int | None:
        """Signal the remote group; SIGKILL it after ``grace``; then cut the
        lifeline (the watchdog kills whatever is left) and the local client."""
        if self._popen.poll() is None:
            pid = self._pid or _pid_in(self.stderr_path)
            if pid:
                self.t.signal_group(pid, sig)
                if self.wait(grace) is None:
                    self.t.signal_group(pid, signal.SIGKILL)
                    self.wait(3.0)
        self._close()
        if self._popen.poll() is None:
            self._popen.kill()
            self._popen.wait(5)
        return self._popen.returncode

    def _close(self) -> None:
        if self._popen.stdin is not None and not self._popen.stdin.closed:
            try:
                self._popen.stdin.close()
            except OSError:
                pass
        for f in self._files:
            if not f.closed:
                f.close()


def _read(p: Path, limit: int = -1) -> str:
    try:
        with open(p, "rb") as f:
            return f.read(limit).decode(errors="replace")
    except OSError:
        return ""


def _pid_in(p: Path) -> int | None:
    text = _read(p, 4096)
    i = text.find(PID_MARK)
    if i < 0:
        return None
    m = re.match(r"(\d+)\n", text[i + len(PID_MARK) :])
    return int(m.group(1)) if m else None


class SshTransport:
    """A host reached over SSH (see the module docstring)."""

    kind = "ssh"
    samples_on_host = True  # its counters are read by a sampler running there (sampling.remote)

    def __init__(self, host: str, target: SshTarget, tracker: ProcessSink | None = None):
        self.host, self.target, self.tracker = host, target, tracker
        self._dir = tempfile.mkdtemp(prefix="nb-ssh-")
        self.control = os.path.join(self._dir, "c")  # short: a socket path is at most 107 bytes
        self._master: subprocess.Popen | None = None
        self._shell: subprocess.Popen | None = None
        self.clock_offset = 0.0  # host clock - this clock, s, applied to every host stamp (set by preflight)
        self.clock_uncertainty = 0.0  # of the measured offset, s (set by preflight)
        self.rtt = 0.0  # a command's round trip, s (set by preflight)
        self.os: str | None = None  # uname -s (set by preflight): which sources facts and counters come from
        self._connected = False
        self._lock = threading.Lock()

    # -- connection -------------------------------------------------------
    def _ssh(self, *extra: str, master: bool = False) -> list[str]:
        """ssh through this host's master; never a master of the user's own
        making (a ``ControlMaster auto`` + ``ControlPersist`` in their config
        would leave one behind that nothing tracks)."""
        mode = ["-o", "ControlMaster=yes", "-o", "ControlPersist=no"] if master else ["-o", "ControlMaster=no"]
        return [*self.target.ssh_argv(self.control), *mode, *extra]

    def connect(self) -> SshTransport:
        """Open the master connection; PreflightError with ssh's reason and a hint.

        Once a connection has been made, a lost one is not silently replaced:
        what ran over it is gone (its watchdogs fired), and the run must say so."""
        if self._master is not None and self._master.poll() is None:
            return self
        if self._connected:
            raise ToolError(
                f"the SSH connection to {self.target.dest} was lost",
                where=self.host,
                hint="is the host still up? its processes were ended by their watchdogs",
            )
        if os.path.exists(self.control):
            os.unlink(self.control)  # a killed master's socket: a new master would not bind
        err = open(os.path.join(self._dir, "master.err"), "wb")
        self._master = subprocess.Popen(
            self._ssh("-N", self.target.dest, master=True),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            start_new_session=True,
        )
        err.close()
        if self.tracker is not None:
            self.tracker.add(self.host, self._master.pid)
        by = time.monotonic() + self.target.connect_timeout + 5
        while time.monotonic() < by:
            if self._master.poll() is not None:
                msg, hint = explain(_read(Path(self._dir, "master.err")))
                raise PreflightError(
                    f"cannot connect over SSH to {self.target.dest}: {msg}", where=self.host, hint=hint
                )
            if os.path.exists(self.control):
                r = subprocess.run(
                    self._ssh("-O", "check", self.target.dest), capture_output=True, text=True, timeout=10
                )
                if r.returncode == 0:
                    self._connected = True
                    return self
            time.sleep(0.02)
        self._stop_children()
        raise PreflightError(
            f"SSH to {self.target.dest} not up after {self.target.connect_timeout + 5:g}s",
            where=self.host,
            hint="is the host up and its address right?",
        )

    def alive(self) -> bool:
        return self._master is not None and self._master.poll() is None

    def close(self) -> None:
        """Close the command shell and the master (every session on it ends,
        and with them the remote watchdogs' lifelines)."""
        self._stop_children()
        self._connected = True  # closed for good: no reconnect
        shutil.rmtree(self._dir, ignore_errors=True)

    def _stop_children(self) -> None:
        for p in (self._shell, self._master):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)
        self._shell = self._master = None

    # -- commands ---------------------------------------------------------
    def _remote(self, argv: Sequence[str], sudo: bool | None = None) -> str:
        cmd = shlex.join(argv)
        return f"sudo -n {cmd}" if (self.target.sudo if sudo is None else sudo) else cmd

    def _open_shell(self) -> subprocess.Popen:
        if self._shell is None or self._shell.poll() is not None:
            self.connect()
            self._shell = subprocess.Popen(
                self._ssh("-T", self.target.dest, "exec sh -c " + shlex.quote(_SHELL)),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        return self._shell

    def run(
        self, argv: Sequence[str], *, timeout: float = 30.0, input: str | None = None, sudo: bool | None = None
    ) -> CommandResult:
        """One command through the host's command shell (no login-shell start-up
        per command); ``sudo=False`` runs it as the login user even on a sudo host."""
        t0 = time.monotonic()
        rid = secrets.token_hex(6)
        req = f"{rid} {base64.b64encode(self._remote(argv, sudo).encode()).decode()}"
        if input is not None:
            req += " " + base64.b64encode(input.encode()).decode()
        with self._lock:
            sh = self._open_shell()
            try:
                assert sh.stdin is not None and sh.stdout is not None
                sh.stdin.write(req.encode() + b"\n")
                sh.stdin.flush()
                out, err, rc = self._answer(sh, rid, t0 + timeout)
            except TimeoutError:  # (an OSError: caught first)
                self._drop_shell()
                raise ToolError(f"{shlex.join(argv)} did not finish within {timeout:g}s", where=self.host) from None
            except (OSError, EOFError) as e:
                self._drop_shell()
                if not self.alive():
                    raise ToolError(
                        f"SSH connection lost while running {argv[0]}", where=self.host, hint="is the host still up?"
                    ) from None
                raise ToolError(f"{argv[0]}: the command shell failed: {e}", where=self.host) from None
        if rc != 0 and (self.target.sudo if sudo is None else sudo):
            why = sudo_refusal(err)
            if why:
                raise PreflightError(f"{argv[0]}: sudo asks for a password ({why})", where=self.host, hint=SUDO_HINT)
        if rc == 127 and f"{argv[0]}: not found" in err:
            raise PreflightError(
                f"command not found: {argv[0]}",
                where=self.host,
                hint="install it on the host (each study's page in docs/ names the tools it uses)",
            )
        return CommandResult(self.host, tuple(argv), rc, out, err, time.monotonic() - t0)

    def _answer(self, sh: subprocess.Popen, rid: str, deadline: float) -> tuple[str, str, int]:
        out = sh.stdout
        assert out is not None
        fd = out.fileno()
        buf = b""

        def read_more() -> None:
            nonlocal buf
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            r, _, _ = select.select([fd], [], [], left)
            if not r:
                raise TimeoutError
            chunk = os.read(fd, 65536)
            if not chunk:
                raise EOFError
            buf += chunk

        def line() -> bytes:
            nonlocal buf
            while b"\n" not in buf:
                read_more()
            ln, _, buf = buf.partition(b"\n")
            return ln

        def block(n: int) -> bytes:
            nonlocal buf
            while len(buf) < n:
                read_more()
            data, buf = buf[:n], buf[n:]
            return data

        parts: dict[str, bytes] = {}
        for kind in ("out", "err"):
            head = line().decode(errors="replace").split()
            skipped = 0
            # whatever a login shell's start-up files print comes before the first answer
            while kind == "out" and head[:2] != ["@@nb-out", rid] and skipped < 10000:
                head, skipped = line().decode(errors="replace").split(), skipped + 1
            if head[:2] != [f"@@nb-{kind}", rid]:
                raise EOFError(f"unexpected answer {head!r}")
            parts[kind] = block(int(head[2]))
        end = line().decode().split()
        if end[:2] != ["@@nb-end", rid]:
            raise EOFError(f"unexpected end {end!r}")
        return parts["out"].decode(errors="replace"), parts["err"].decode(errors="replace"), int(end[2])

    def _drop_shell(self) -> None:
        if self._shell is not None and self._shell.poll() is None:
            self._shell.kill()
            self._shell.wait(5)
        self._shell = None

    def read_text(self, path: str) -> str:
        r = self.run(["cat", path], timeout=10)
        if r.returncode != 0:
            raise FileNotFoundError(path)
        return r.stdout

    def fd_links(self, pid: int) -> list[str]:
        r = self.run(["sh", "-c", f'for f in /proc/{int(pid)}/fd/*; do readlink "$f"; done'], timeout=10)
        return [x for x in r.stdout.splitlines() if x]

    def put_file(self, local: Path, text: str) -> str:
        """The run keeps ``local``; the host gets a private temporary copy."""
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_text(text)
        r = self.run(
            ["sh", "-c", 'f=$(mktemp "${TMPDIR:-/tmp}/nicbench-file.XXXXXX") && cat > "$f" && echo "$f"'],
            input=text,
            timeout=30,
        ).check(f"writing {local.name} on the host")
        return r.stdout.strip()

    def drop_files(self, paths: Sequence[str]) -> None:
        if paths:
            try:
                self.run(["rm", "-f", *paths], timeout=10)
            except NicbenchError:
                pass  # a lost connection: the host keeps a small private temp file

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """A one-off remote command as a local argv (through the master)."""
        return self._ssh("-T", self.target.dest, self._remote(argv))

    def stream(self, argv: Sequence[str]) -> subprocess.Popen:
        """``argv`` on the host in a session of its own on the master, its
        stdin, stdout and stderr piped to and from here (the host sampler's
        records stream back as they are made).  Closing stdin gives the command end
        of file; the command must stop by itself then (no wrapper, no
        process group of its own: the host sampler does)."""
        with self._lock:
            self.connect()
        p = subprocess.Popen(self.wrap(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, start_new_session=True)
        if self.tracker is not None:
            self.tracker.add(self.host, p.pid)
        return p

    def signal_group(self, pgid: int, sig: int) -> None:
        try:
            # ``kill -N -PGID``: dash's kill takes no ``--`` (it says "Illegal number")
            self.run(["kill", f"-{int(sig)}", f"-{int(pgid)}"], timeout=10)
        except NicbenchError:
            pass  # the connection is gone: the watchdog does it

    # -- processes ----------------------------------------------------------
    def spawn(self, argv: Sequence[str], *, stdout: Path, stderr: Path, gated: bool = False) -> SshProcess:
        """Start ``argv`` on the host under the wrapper (own process group,
        watchdog on stdin).  A gated one waits for :meth:`SshProcess.release`."""
        with self._lock:
            self.connect()
        real = gate_argv(argv) if gated else list(argv)
        # with sudo the wrapper itself runs as root: the PID it reports is the
        # tool's, and its watchdog may kill it
        remote = (
            ("exec sudo -n sh -c " if self.target.sudo else "exec sh -c ")
            + shlex.quote(_WRAPPER)
            + " nicbench-wrap "
            + shlex.join(real)
        )
        stdout.parent.mkdir(parents=True, exist_ok=True)
        out, err = open(stdout, "wb"), open(stderr, "wb")
        popen = subprocess.Popen(
            self._ssh("-T", self.target.dest, remote),
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
        if self.tracker is not None:
            self.tracker.add(self.host, popen.pid)
        return SshProcess(self, argv, popen, stdout, stderr, gated, [out, err])


def close_all(transports: dict[str, SshTransport]) -> None:
    each_host(lambda t: t.close(), transports)


def connected(transports: dict[str, SshTransport]) -> bool:
    """Connect every host at once; whether all of them are (a failure is left
    to the preflight, which says it with every other host's problems)."""
    got = each_host(lambda t: t.connect(), transports)
    return not any(isinstance(v, BaseException) for v in got.values())
