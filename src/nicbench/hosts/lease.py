"""Host leases: one run per host at a time, held on the host itself.

A run takes an exclusive lease on every host it uses before its preflight
and keeps it until its clean-up.  The lease is a ``flock`` (``lockf`` on
FreeBSD) on a file on the host, held by a small process nicbench keeps there
through the host's own transport: ``flock -n FILE sh -c '... cat'``, whose
``cat`` reads a pipe from this process (over SSH: the session's stdin).  When
the run ends the pipe is closed and the lock goes; when the controller dies
however it dies (``kill -9``, a power cut) or the connection drops, the pipe
reaches end of file, ``cat`` exits and the kernel drops the lock.  So any
controller, whatever archive it writes to, sees the lease, and none is left
behind by a dead one.

The file says who holds it (run id once the run has one, plan, controller
machine, pid, since), one JSON line written by the holder under the lock: a
second run is refused naming the holder, or waits (``--wait``) until every
host it needs is free.  Waiting takes all of a run's hosts at once or none
(a partial set is released before the next try), so two runs that want the
same hosts in another order never hold one each and wait for ever.

Where the file is: ``/run/lock/nicbench/host.lease`` (``/var/run/nicbench``
where there is no ``/run/lock``: FreeBSD).  The embedded lab's namespaces
share this machine's file system, so a namespace host's file is its own:
``<state>/host-leases/<namespace>/host.lease``; the lab's SSH mode mounts that
same directory as ``/run/lock/nicbench`` in each host's sshd (``lab.sshd``),
so a namespace is one host whether it is reached through ``ip netns exec``
or over SSH.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from ..core.errors import NicbenchError, PreflightError, ToolError, tail
from .tracker import state_root
from .transport import Transport, each_host

HELD = "nicbench-lease-held"
BUSY = "nicbench-lease-busy"
BUSY_RC = 75                # EX_TEMPFAIL: what flock -E and lockf -t 0 exit with when the lock is taken
NO_LOCK_RC = 69             # neither flock nor lockf on the host
LEASE_NAME = "host.lease"

# $1: the lease file ("" : the host's own place for it), $2: the holder's JSON line.
# The holder writes its line under the lock, says where, and holds the lock
# while its stdin (this controller's pipe) stays open.
_HOLD = r"""
f=$1
if [ -z "$f" ]; then
  if [ -d /run/lock ]; then f=/run/lock/nicbench/host.lease; else f=/var/run/nicbench/host.lease; fi
fi
mkdir -p "${f%/*}" 2>/dev/null
hold='printf "%s\n" "$2" > "$1" || exit 71; printf "nicbench-lease-held %s\n" "$1"; exec cat > /dev/null'
if command -v flock > /dev/null 2>&1; then
  flock -n -E 75 "$f" sh -c "$hold" nicbench-hold "$f" "$2"
elif command -v lockf > /dev/null 2>&1; then
  lockf -k -s -t 0 "$f" sh -c "$hold" nicbench-hold "$f" "$2"
else
  echo "neither flock nor lockf on this host" >&2; exit 69
fi
rc=$?
if [ "$rc" = 75 ]; then printf 'nicbench-lease-busy %s\n' "$(head -n 1 "$f" 2>/dev/null)"; fi
exit $rc
"""

_WRITE = 'printf "%s\\n" "$2" > "$1"'


def lease_file(t: Transport) -> str:
    """The lease file of the host ``t`` reaches ("": the host's own place, chosen there)."""
    netns = getattr(t, "netns", None)
    if t.kind == "netns" and isinstance(netns, str):
        return str(lease_dir(netns) / LEASE_NAME)
    return ""


def lease_dir(netns: str) -> Path:
    """A lab namespace's own lease directory on this machine (see the module docstring)."""
    return state_root() / "host-leases" / netns


def controller() -> str:
    """This machine, as a lease names its controller."""
    return os.uname().nodename


def describe(doc: Mapping[str, Any]) -> str:
    """``run RUN (plan P, controller C pid N, since HH:MM:SS)`` as far as the holder wrote it."""
    run = doc.get("run_id") or "still starting (no run id yet)"
    since = doc.get("since")
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since)) if isinstance(since, (int, float)) else "?"
    return (f"run {run} (plan {doc.get('plan', '?')}, controller {doc.get('controller', '?')} "
            f"pid {doc.get('pid', '?')}, since {when})")


def parse_holder(text: str) -> dict[str, Any]:
    """The holder's line as the busy answer carries it ({} if it wrote none yet or it is not ours)."""
    try:
        doc = json.loads(text.strip() or "null")
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


class Busy(Exception):
    """The host's lease is held by another run: ``holder`` is what it wrote."""

    def __init__(self, host: str, holder: dict[str, Any]):
        super().__init__(host)
        self.host = host
        self.holder = holder


class HostLease:
    """The lease of one host, held by a process on it until :meth:`release`."""

    def __init__(self, t: Transport, popen: subprocess.Popen, path: str, doc: dict[str, Any], err: IO[bytes]):
        self.t = t
        self.host = t.host
        self.path = path
        self.doc = doc
        self._popen: subprocess.Popen | None = popen
        self._err = err

    @classmethod
    def take(cls, t: Transport, doc: Mapping[str, Any], timeout: float = 30.0) -> HostLease:
        """Lock the host for this run; :class:`Busy` if another run holds it;
        ToolError/PreflightError when the host cannot take a lease at all."""
        line = json.dumps(dict(doc), separators=(",", ":"))
        err = tempfile.TemporaryFile()
        try:
            popen = subprocess.Popen(t.wrap(["sh", "-c", _HOLD, "nicbench-lease", lease_file(t), line]),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                     start_new_session=True)
        except FileNotFoundError as e:
            err.close()
            raise PreflightError(f"cannot start the lease holder: {e}", where=t.host) from None
        try:
            words = _answer(popen, time.monotonic() + timeout)
        except BaseException:
            _end(popen)
            err.close()
            raise
        if words is not None and words[0] == HELD:
            return cls(t, popen, words[1].strip(), dict(doc), err)
        _end(popen)
        err.seek(0)
        said = tail(err.read().decode(errors="replace"))
        err.close()
        if words is not None and words[0] == BUSY:
            raise Busy(t.host, parse_holder(words[1]))
        if popen.returncode == NO_LOCK_RC:
            raise PreflightError("cannot lease the host: it has neither flock (util-linux) nor lockf",
                                 where=t.host, hint="install util-linux on the host")
        if words is None and popen.returncode is None:
            raise ToolError(f"the host lease was not answered within {timeout:g}s", where=t.host,
                            hint="is the host still reachable?")
        raise PreflightError(f"cannot lease the host (exit {popen.returncode}): {said or 'no message'}",
                             where=t.host, hint="nicbench keeps its lease in /run/lock/nicbench on the host: "
                                                "the login user (or sudo) must be able to write there")

    def note(self, **items: Any) -> None:
        """More of who holds it (the run id, once the run has one): rewritten under the lock."""
        self.doc.update(items)
        if self._popen is None or not self.path:
            return
        try:
            self.t.run(["sh", "-c", _WRITE, "nicbench-lease", self.path,
                        json.dumps(self.doc, separators=(",", ":"))], timeout=15)
        except NicbenchError:
            pass        # the lease still holds; only what a refused run is told is older

    @property
    def held(self) -> bool:
        return self._popen is not None and self._popen.poll() is None

    def release(self) -> None:
        """Close the holder's stdin: it exits and the lock goes (the file stays:
        removing it would race a run taking it)."""
        popen, self._popen = self._popen, None
        if popen is not None:
            _end(popen)
        if not self._err.closed:
            self._err.close()


def _answer(popen: subprocess.Popen, deadline: float) -> tuple[str, str] | None:
    """The holder's first line of ours: (HELD, path) or (BUSY, holder's line);
    None once it exits without one (or the deadline passes: it is then still running).
    What a login shell's start-up files print before it is skipped."""
    assert popen.stdout is not None
    fd = popen.stdout.fileno()
    buf = b""
    while True:
        while b"\n" in buf:
            ln, _, buf = buf.partition(b"\n")
            word, _, rest = ln.decode(errors="replace").partition(" ")
            if word in (HELD, BUSY):
                return word, rest
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        r, _, _ = select.select([fd], [], [], left)
        if not r:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            popen.wait(10)
            return None
        buf += chunk


def _end(popen: subprocess.Popen) -> None:
    """End a holder: end of file on its stdin (the host side exits), then the local client."""
    for f in (popen.stdin, popen.stdout):
        if f is not None and not f.closed:
            try:
                f.close()
            except OSError:
                pass
    try:
        popen.wait(10)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.wait(5)


@dataclass
class HostLeases:
    """Every host lease of one run."""

    leases: dict[str, HostLease]

    @property
    def hosts(self) -> list[str]:
        return list(self.leases)

    @property
    def since(self) -> float:
        return min((float(lease.doc.get("since") or 0) for lease in self.leases.values()), default=time.time())

    def targets(self) -> dict[str, str]:
        """host -> where its lease is (``ssh destination:file``, or the namespace's file)."""
        out = {}
        for h, lease in self.leases.items():
            dest = getattr(getattr(lease.t, "target", None), "dest", None)
            out[h] = f"{dest}:{lease.path}" if dest else lease.path
        return out

    def note_run(self, run_id: str) -> None:
        each_host(lambda lease: lease.note(run_id=run_id), self.leases)

    def release(self) -> None:
        each_host(lambda lease: lease.release(), self.leases)
        self.leases = {}


def holder_doc(plan: str) -> dict[str, Any]:
    """What a new lease says of this run before it has an id."""
    return {"run_id": None, "plan": plan, "controller": controller(), "pid": os.getpid(), "since": time.time()}


def _say(text: str) -> None:
    print(f"nicbench: {text}", file=sys.stderr)


def take_all(transports: Mapping[str, Transport], plan: str, *, wait: float | None = None,
             say: Callable[[str], None] = _say, poll: float = 2.0, asked: float | None = None) -> HostLeases:
    """Lease every host, all or none.  A host another run holds refuses at
    once, naming it; with ``wait`` (seconds) the run queues until every host
    is free, trying again every ``poll`` seconds, up to ``wait``.  ``asked``:
    the wait the user asked for, as the messages say it (``wait`` is what is
    left of it once the hosts are reached)."""
    doc = holder_doc(plan)
    shown = asked if asked is not None else wait
    deadline = None if wait is None else time.monotonic() + wait
    told: set[str] = set()
    while True:
        got = each_host(lambda t: HostLease.take(t, doc), dict(transports))
        held = {h: v for h, v in got.items() if isinstance(v, HostLease)}
        busy = {h: v for h, v in got.items() if isinstance(v, Busy)}
        other = [v for v in got.values() if isinstance(v, BaseException) and not isinstance(v, Busy)]
        if not busy and not other:
            return HostLeases(held)
        HostLeases(held).release()          # all or none: a partial set would block others while waiting
        if other:
            raise other[0]
        holders = "; ".join(f"host {h} is leased by {describe(b.holder)}" for h, b in sorted(busy.items()))
        if deadline is None:
            raise PreflightError(f"{holders}; nothing was started", where="host leases",
                                 hint="wait for that run to end, or run with --wait [SECONDS] to queue behind it "
                                      "('nicbench runs --active' lists the runs holding hosts)")
        left = deadline - time.monotonic()
        if left <= 0:
            raise PreflightError(f"still busy after waiting {shown:g}s: {holders}; nothing was started",
                                 where="host leases", hint="a longer --wait, or see 'nicbench runs --active'")
        news = sorted(set(busy) - told)
        if news:
            say(f"waiting up to {shown:g}s for " + "; ".join(
                f"host {h} (leased by {describe(busy[h].holder)})" for h in news))
            told |= set(news)
        time.sleep(min(poll, left))
