"""A fake FreeBSD host for tests: ``sh -c SCRIPT`` runs the real nicbench
script under dash with shims first on PATH (each printing a recorded FreeBSD
output) and /boot/ under a test directory."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from nicbench.hosts.fake import FakeTransport
from nicbench.hosts.transport import CommandResult


def shims(d: Path, scripts: dict[str, str]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for name, body in scripts.items():
        (d / name).write_text("#!/bin/sh\n" + body)
        (d / name).chmod(0o755)
    return d


class BsdHost(FakeTransport):
    """A fake FreeBSD host: ``sh -c SCRIPT`` runs the script under dash with
    the shims first on PATH and /boot/ under ``root``; streamed commands
    (the host sampler) likewise."""

    def __init__(self, host: str, shim_dir: Path, root: Path):
        super().__init__(host, os="FreeBSD", samples_on_host=True)
        self.shim_dir, self.root = shim_dir, root

    def _local(self, argv: Sequence[str]) -> list[str]:
        if list(argv[:2]) != ["sh", "-c"]:
            return list(argv)                   # a plain command: found on the shims' PATH first
        script = (argv[2].replace('PATH="/usr/local/sbin:', f'PATH="{self.shim_dir}:/usr/local/sbin:')
                  .replace("PATH=/usr/local/sbin:", f"PATH={self.shim_dir}:/usr/local/sbin:")
                  .replace("/boot/", f"{self.root}/boot/"))
        return ["dash", "-c", script, *argv[3:]]

    def _env(self) -> dict[str, str]:
        return dict(os.environ, PATH=f"{self.shim_dir}:{os.environ['PATH']}")

    def run(self, argv, *, timeout=30.0, input=None):  # type: ignore[override]
        self.commands.append(list(argv))
        r = subprocess.run(self._local(argv), capture_output=True, text=True, timeout=timeout, input=input,
                           env=self._env())
        return CommandResult(self.host, tuple(argv), r.returncode, r.stdout, r.stderr, 0.0)

    def stream(self, argv):  # type: ignore[override]
        self.commands.append(list(argv))
        return subprocess.Popen(self._local(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self._env(), start_new_session=True)


# ``sockstat -46 -l -q -s -w`` lines as FreeBSD's own source prints them (no
# recorded output of these options with a traceable source was found; see
# tests/fixtures/SOURCES.md).  A row: (user, command, pid, fd, proto, local
# address, foreign address, TCP state or None); user None: a socket no process
# holds.
SockRow = tuple[str | None, str, int, int, str, str, str, str | None]


def sockstat14(rows: list[SockRow]) -> str:
    """FreeBSD 13/14 text: usr.bin/sockstat/sockstat.c @ 01a46c7dc002bb4d2a35bdcebf0ed194846bfe01
    (``display``: ``do ' ' while (pos < 9)``, ``%.10s``, ``< 20``, ``%5lu``, ``< 26``,
    ``%-3d``, or ``"%-8s %-10s %-5s %-3s"`` of ``?`` for a socket without a
    process; ``displaysock``: ``while (pos < 30)``, proto + 4/6 + ``" "``, the
    local address from column 37, each address column ``opt_w ? 46 : 22``
    wide, ``-s``: 13 for the (SCTP-only) path state, then the TCP state)."""
    out = []
    for user, cmd, pid, fd, proto, laddr, faddr, state in rows:
        if user is None:
            s = f"{'?':<8} {'?':<10} {'?':<5} {'?':<3}"
        else:
            s = _pad(user, 9) + cmd[:10]
            s = _pad(s, 20) + f"{pid:5d}"
            s = _pad(s, 26) + f"{fd:<3d}"
        s = s.ljust(30) + proto + " "
        offset = 37
        s = s.ljust(offset) + laddr
        offset += 46
        s = _pad(s, offset) + faddr
        offset += 46 + 13
        if state is not None:
            s = _pad(s, offset) + state
        out.append(s + "\n")
    return "".join(out)


def _pad(s: str, col: int) -> str:
    """C's ``do pos += xprintf(" "); while (pos < col);``: at least one space."""
    s += " "
    return s.ljust(col)


def sockstat15(rows: list[SockRow]) -> str:
    """FreeBSD 15 text (libxo): usr.bin/sockstat/main.c @ 09d1a109598ea7c0b77cd18736f5cb93b0f2bf61
    (``display``: columns as wide as their widest cell, at least the header's;
    ``%-*s`` user, ``%-*.10s`` command, ``%*lu`` PID, ``%*d`` FD, each after one
    space; ``??`` for a socket without a process; ``display_sock``: ``%-*s``
    proto, ``%-*.*s`` addresses (``-w``: as wide as the widest), ``-s``: ``??``
    path state, then the TCP state or ``??``)."""
    users = [r[0] or "??" for r in rows]
    w_user = max([4, *map(len, users)])
    w_pid = max([3, *(len(str(r[2])) for r in rows if r[0] is not None)])
    w_fd = max([2, *(len(str(r[3])) for r in rows if r[0] is not None)])
    w_proto = max([5, *(len(r[4]) for r in rows)])
    w_l = max([13, *(len(r[5]) for r in rows)])
    w_f = max([15, *(len(r[6]) for r in rows)])
    w_conn = max([10, *(len(r[7]) for r in rows if r[7])])
    out = []
    for user, cmd, pid, fd, proto, laddr, faddr, state in rows:
        if user is None:
            s = f"{'??':<{w_user}} {'??':<10} {'??':>{w_pid}} {'??':>{w_fd}}"
        else:
            s = f"{user:<{w_user}} {cmd[:10]:<10} {pid:>{w_pid}} {fd:>{w_fd}}"
        s += f" {proto:<{w_proto}} {laddr:<{w_l}} {faddr:<{w_f}} {'??':<10} {state or '??':<{w_conn}}"
        out.append(s + "\n")
    return "".join(out)
