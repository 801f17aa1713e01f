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
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Sequence

from ..core.errors import NicbenchError, PreflightError, ToolError, tail
from .transport import READY_MARK, CommandResult, PopenWaiter, ProcessSink, each_host, gate_argv

PID_MARK = "nicbench-pid "
BEGIN_MARK = "@@nicbench-begin\n"     # a spawned process's stdout starts after it


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
        argv = [*self.prefix, "ssh", *(["-F", self.config] if self.config else []), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
                "-o", f"ConnectTimeout={max(1, int(self.connect_timeout))}", "-o", "ServerAliveInterval=2",
                "-o", "ServerAliveCountMax=3", "-o", f"ControlPath={control}"]
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
    (re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for .* has changed"),
     "its host key has CHANGED since it was recorded in known_hosts (a reinstalled host, or someone "
     "in the middle)", "if the change is expected: ssh-keygen -R HOST, then connect once by hand to accept "
                       "the new key"),
    (re.compile(r"No (ED25519|RSA|ECDSA|[A-Z0-9-]+) host key is known|Host key verification failed"),
     "its host key is not in known_hosts", "connect once by hand (ssh HOST) to check and accept its key"),
    (re.compile(r"Permission denied"), "authentication refused (key or agent)",
     "check the user and that your key is in the host's authorized_keys (ssh-copy-id)"),
    (re.compile(r"Connection refused"), "nothing listens on its SSH port", "is sshd running on the host?"),
    (re.compile(r"Connection timed out|timed out|No route to host|Network is unreachable"),
     "it does not answer (down or unreachable)", "is the host up and its address right?"),
    (re.compile(r"Could not resolve hostname"), "its name does not resolve", "check the address or the ssh alias"),
)


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
_SHELL = r'''
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
'''

# A spawned process: a mark on stdout first (what the login shell's start-up
# files print lands before it: ``run.common.read`` drops it), its own session
# (PID = process group), its PID on
# stderr, the gate byte passed through a fifo, and a watchdog on stdin (kept
# as fd 4: sh gives a background list /dev/null as its stdin, before any
# redirection of its own, so ``<&0`` would not do).
_WRAPPER = r'''
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
'''


class SshProcess(PopenWaiter):
    """A process on a remote host: ``pid`` is the remote PID (= its process
    group); the local ssh client carries its stdout and stderr into the run
    directory, and its stdin is the remote watchdog's lifeline."""

    def __init__(self, transport: "SshTransport", argv: Sequence[str], popen: subprocess.Popen,
                 stdout_path: Path, stderr_path: Path, gated: bool, files: list[IO]):
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
                    raise ToolError(f"{self.argv[0]} did not start over SSH: {tail(_read(self.stderr_path))}",
                                    where=self.host)
                time.sleep(0.005)
        return self._pid

    def is_ready(self) -> bool:
        if not self._gated:
            return True
        return READY_MARK in _read(self.stderr_path, 4096)

    scheduled = True        # released with a start time: the release itself crosses a network

    def release(self, at: float | None = None) -> None:
        """Start at ``at`` (this machine's clock; sent in the host's, with the
        offset preflight measured), or at once."""
        if self._gated and self._popen.stdin is not None:
            line = b"\n" if at is None else f"{int((at + self.t.clock_offset) * 1e6)}\n".encode()
            try:
                self._popen.stdin.write(line)
                self._popen.stdin.flush()          # the lifeline stays open
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
    m = re.match(r"(\d+)\n", text[i + len(PID_MARK):])
    return int(m.group(1)) if m else None


class SshTransport:
    """A host reached over SSH (see the module docstring)."""

    kind = "ssh"

    def __init__(self, host: str, target: SshTarget, tracker: ProcessSink | None = None):
        self.host, self.target, self.tracker = host, target, tracker
        self._dir = tempfile.mkdtemp(prefix="nb-ssh-")
        self.control = os.path.join(self._dir, "c")      # short: a socket path is at most 107 bytes
        self._master: subprocess.Popen | None = None
        self._shell: subprocess.Popen | None = None
        self.clock_offset = 0.0           # host clock - this clock, s (set by preflight)
        self.rtt = 0.0                    # a command's round trip, s (set by preflight)
        self._connected = False
        self._lock = threading.Lock()

    # -- connection -------------------------------------------------------
    def _ssh(self, *extra: str, master: bool = False) -> list[str]:
        """ssh through this host's master; never a master of the user's own
        making (a ``ControlMaster auto`` + ``ControlPersist`` in their config
        would leave one behind that nothing tracks)."""
        mode = ["-o", "ControlMaster=yes", "-o", "ControlPersist=no"] if master else ["-o", "ControlMaster=no"]
        return [*self.target.ssh_argv(self.control), *mode, *extra]

    def connect(self) -> "SshTransport":
        """Open the master connection; PreflightError with ssh's reason and a hint.

        Once a connection has been made, a lost one is not silently replaced:
        what ran over it is gone (its watchdogs fired), and the run must say so."""
        if self._master is not None and self._master.poll() is None:
            return self
        if self._connected:
            raise ToolError(f"the SSH connection to {self.target.dest} was lost", where=self.host,
                            hint="is the host still up? its processes were ended by their watchdogs")
        if os.path.exists(self.control):
            os.unlink(self.control)              # a killed master's socket: a new master would not bind
        err = open(os.path.join(self._dir, "master.err"), "wb")
        self._master = subprocess.Popen(self._ssh("-N", self.target.dest, master=True),
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                        start_new_session=True)
        err.close()
        if self.tracker is not None:
            self.tracker.add(self.host, self._master.pid)
        by = time.monotonic() + self.target.connect_timeout + 5
        while time.monotonic() < by:
            if self._master.poll() is not None:
                msg, hint = explain(_read(Path(self._dir, "master.err")))
                raise PreflightError(f"cannot connect over SSH to {self.target.dest}: {msg}", where=self.host,
                                     hint=hint)
            if os.path.exists(self.control):
                r = subprocess.run(self._ssh("-O", "check", self.target.dest), capture_output=True, text=True,
                                   timeout=10)
                if r.returncode == 0:
                    self._connected = True
                    return self
            time.sleep(0.02)
        self._stop_children()
        raise PreflightError(f"SSH to {self.target.dest} not up after {self.target.connect_timeout + 5:g}s",
                             where=self.host, hint="is the host up and its address right?")

    def alive(self) -> bool:
        return self._master is not None and self._master.poll() is None

    def close(self) -> None:
        """Close the command shell and the master (every session on it ends,
        and with them the remote watchdogs' lifelines)."""
        self._stop_children()
        self._connected = True          # closed for good: no reconnect
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
            self._shell = subprocess.Popen(self._ssh("-T", self.target.dest, "exec sh -c " + shlex.quote(_SHELL)),
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                           stderr=subprocess.DEVNULL, start_new_session=True)
        return self._shell

    def run(self, argv: Sequence[str], *, timeout: float = 30.0, input: str | None = None,
            sudo: bool | None = None) -> CommandResult:
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
            except TimeoutError:          # (an OSError: caught first)
                self._drop_shell()
                raise ToolError(f"{shlex.join(argv)} did not finish within {timeout:g}s", where=self.host) from None
            except (OSError, EOFError) as e:
                self._drop_shell()
                if not self.alive():
                    raise ToolError(f"SSH connection lost while running {argv[0]}", where=self.host,
                                    hint="is the host still up?") from None
                raise ToolError(f"{argv[0]}: the command shell failed: {e}", where=self.host) from None
        if rc == 127 and f"{argv[0]}: not found" in err:
            raise PreflightError(f"command not found: {argv[0]}", where=self.host,
                                 hint="install it on the host (see README for the tools each study uses)")
        return CommandResult(self.host, tuple(argv), rc, out, err, time.monotonic() - t0)

    def _answer(self, sh: subprocess.Popen, rid: str, deadline: float) -> tuple[str, str, int]:
        out = sh.stdout
        assert out is not None
        fd = out.fileno()
        buf = b""

        def read_more() -> None:
            nonlocal buf
            import select
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

    def wrap(self, argv: Sequence[str]) -> list[str]:
        """A one-off remote command as a local argv (through the master)."""
        return self._ssh("-T", self.target.dest, self._remote(argv))

    def signal_group(self, pgid: int, sig: int) -> None:
        try:
            # ``kill -N -PGID``: dash's kill takes no ``--`` (it says "Illegal number")
            self.run(["kill", f"-{int(sig)}", f"-{int(pgid)}"], timeout=10)
        except NicbenchError:
            pass          # the connection is gone: the watchdog does it

    # -- processes ----------------------------------------------------------
    def spawn(self, argv: Sequence[str], *, stdout: Path, stderr: Path, gated: bool = False) -> SshProcess:
        """Start ``argv`` on the host under the wrapper (own process group,
        watchdog on stdin).  A gated one waits for :meth:`SshProcess.release`."""
        with self._lock:
            self.connect()
        real = gate_argv(argv) if gated else list(argv)
        # with sudo the wrapper itself runs as root: the PID it reports is the
        # tool's, and its watchdog may kill it
        remote = (("exec sudo -n sh -c " if self.target.sudo else "exec sh -c ") + shlex.quote(_WRAPPER)
                  + " nicbench-wrap " + shlex.join(real))
        stdout.parent.mkdir(parents=True, exist_ok=True)
        out, err = open(stdout, "wb"), open(stderr, "wb")
        popen = subprocess.Popen(self._ssh("-T", self.target.dest, remote), stdin=subprocess.PIPE, stdout=out,
                                 stderr=err, start_new_session=True)
        if self.tracker is not None:
            self.tracker.add(self.host, popen.pid)
        return SshProcess(self, argv, popen, stdout, stderr, gated, [out, err])


# -- many hosts at once -----------------------------------------------------

@dataclass(frozen=True)
class HostCheck:
    """What preflight learned of one SSH host."""

    host: str
    problems: tuple[str, ...] = ()
    root: bool | None = None
    clock_offset_s: float | None = None     # remote - local, from one round trip
    clock_uncertainty_s: float | None = None
    leftovers: tuple[int, ...] = ()


# one round trip per host: who we are, sudo, the clock, leftovers of ours,
# the interfaces asked about (name, MTU, addresses)
_CHECK = r'''
printf 'uid %s\n' "$(id -u)"
if sudo -n true 2>/dev/null; then echo 'sudo yes'; else echo 'sudo no'; fi
# what nicbench's own shell code needs on the host: bash >= 5 for the start
# gate's $EPOCHREALTIME, and the wrapper's setsid, mkfifo, mktemp, base64
if [ -n "$(bash -c 'printf %s "$EPOCHREALTIME"' 2>/dev/null)" ]; then echo 'bash ok'; else echo 'bash old'; fi
for c in setsid mkfifo mktemp base64; do command -v "$c" >/dev/null 2>&1 || printf 'missing %s\n' "$c"; done
n=nicbench   # (split, so this script's own command line does not match)
for p in /proc/[0-9]*; do
  c=$(tr '\0\n' '  ' < "$p/cmdline" 2>/dev/null) || continue
  case "$c" in *"$n"-wrap*|*"$n"-gate*) printf 'left %s %.80s\n' "${p#/proc/}" "$c";; esac
done
for i in "$@"; do
  if [ -e "/sys/class/net/$i" ]; then
    printf 'if %s %s' "$i" "$(cat /sys/class/net/$i/mtu)"
    ip -o -4 addr show dev "$i" 2>/dev/null | while read -r _ _ _ a _; do printf ' %s' "${a%/*}"; done
    ip -o -6 addr show dev "$i" 2>/dev/null | while read -r _ _ _ a _; do printf ' %s' "${a%/*}"; done
    echo
  else printf 'noif %s\n' "$i"; fi
done
'''


def clock_offset(samples: list[tuple[float, float, float]]) -> tuple[float, float] | None:
    """(offset, uncertainty) of a remote clock from (local before, remote,
    local after) readings: the one with the shortest round trip, whose
    midpoint is closest to the remote reading's true time (as NTP does)."""
    ok = [(t1 - t0, remote - (t0 + t1) / 2) for t0, remote, t1 in samples if t1 >= t0]
    if not ok:
        return None
    rtt, off = min(ok)
    return off, rtt / 2


def parse_check(host: str, text: str, clock: tuple[float, float] | None, *,
                want: dict[str, tuple[str | None, int | None]], max_offset: float,
                sudo_set: bool = False) -> HostCheck:
    """The check script's answer (pure).  ``want``: interface -> (address,
    MTU) the plan expects; ``clock``: (offset, uncertainty) measured beside it."""
    problems: list[str] = []
    root = sudo = None
    offset, unc = clock if clock else (None, None)
    left: list[int] = []
    seen_if: dict[str, tuple[int, list[str]]] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "uid":
            root = rest.strip() == "0"
        elif kind == "sudo":
            sudo = rest.strip() == "yes"
        elif kind == "left":
            left.append(int(rest.split()[0]))
        elif kind == "if":
            name, mtu, *addrs = rest.split()
            seen_if[name] = (int(mtu), addrs)
        elif kind == "noif":
            problems.append(f"{host}: interface {rest.strip()} does not exist")
        elif kind == "bash" and rest.strip() == "old":
            problems.append(f"{host}: nicbench's start gate needs bash >= 5 ($EPOCHREALTIME): install a newer bash")
        elif kind == "missing":
            problems.append(f"{host}: {rest.strip()} is missing (coreutils/util-linux): nicbench's process wrapper "
                            "needs it")
    if root is None:
        problems.append(f"{host}: the host check printed nothing usable")
    elif root is False and not sudo_set:
        problems.append(f"{host}: not root, and the plan does not say sudo = true: the tools need root"
                        + ("" if sudo else " (and 'sudo -n' asks for a password)"))
    if offset is None:
        problems.append(f"{host}: could not read its clock")
    elif abs(offset) > max_offset + (unc or 0):
        problems.append(f"{host}: its clock is {offset * 1000:+.1f} ms off this one (+-{(unc or 0) * 1000:.1f} ms): "
                        f"more than {max_offset * 1000:g} ms, so start skews and windows would be wrong "
                        "(sync it with chrony/NTP)")
    if left:
        problems.append(f"{host}: nicbench processes left from an earlier run: PIDs {', '.join(map(str, left))} "
                        "(kill them, or let their watchdogs end them)")
    for ifname, (addr, mtu) in want.items():
        if ifname not in seen_if:
            continue
        got_mtu, addrs = seen_if[ifname]
        if mtu is not None and got_mtu != mtu:
            problems.append(f"{host}: {ifname} has MTU {got_mtu}, the plan wants {mtu}")
        if addr is not None and addr not in addrs:
            problems.append(f"{host}: {ifname} does not have the plan's address {addr} "
                            f"(it has {', '.join(addrs) or 'none'})")
    return HostCheck(host, tuple(problems), bool(root or (sudo and sudo_set)), offset, unc, tuple(left))


def preflight(transports: dict[str, "SshTransport"], want: dict[str, dict[str, tuple[str | None, int | None]]],
              *, max_offset: float = 0.05) -> tuple[dict[str, HostCheck], list[str]]:
    """Connect to every host at once and check each in one round trip; every
    problem of every host in one list (a host that is down is one of them)."""
    def one(t: "SshTransport") -> HostCheck:
        t.connect()
        ifs = list(want.get(t.host, {}))
        r = t.run(["sh", "-c", _CHECK, "nicbench-check", *ifs], timeout=t.target.connect_timeout + 10, sudo=False)
        if r.returncode != 0 and not r.stdout.strip():
            why = tail(r.stderr) or f"exit {r.returncode}"
            return HostCheck(t.host, (f"{t.host}: the host check failed: {why}"
                                      + (" (sudo -n needs a password?)" if t.target.sudo else ""),))
        # the clock on the open command shell (no login in the round trip), best of 5
        samples = []
        for _ in range(5):
            t0 = time.time()
            c = t.run(["date", "+%s.%N"], timeout=10)
            t1 = time.time()
            try:
                samples.append((t0, float(c.stdout), t1))
            except ValueError:
                pass
        if samples:
            t.rtt = min(b - a for a, _, b in samples)
        return parse_check(t.host, r.stdout, clock_offset(samples), want=want.get(t.host, {}), max_offset=max_offset,
                           sudo_set=t.target.sudo)
    results = each_host(one, transports)
    checks: dict[str, HostCheck] = {}
    problems: list[str] = []
    for host, res in results.items():
        if isinstance(res, HostCheck):
            checks[host] = res
            problems += res.problems
            # an offset within its own uncertainty is not known to be one: not applied
            off, unc = res.clock_offset_s or 0.0, res.clock_uncertainty_s or 0.0
            transports[host].clock_offset = off if abs(off) > unc else 0.0
        elif hasattr(res, "message"):
            problems.append(f"{host}: {res.message}")
        else:
            problems.append(f"{host}: {res}")
    return checks, problems


def close_all(transports: dict[str, "SshTransport"]) -> None:
    each_host(lambda t: t.close(), transports)
