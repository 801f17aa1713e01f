from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from nicbench.studies.packets.analysis import OVERCOUNT

ROOT = Path(__file__).resolve().parents[2]


def plan_text(name: str, lab: str, *, engine: str = "iperf3", clients: int = 2,
              directions=("tx",), io_sizes=("128K",), connections=(2,), duration: float = 2,
              omit: float = 1, extra: str = "", mtu: int = 1500, trim: float = 0.25,
              speed: str | None = None) -> str:
    hosts = '[hosts.srv]\nrole = "server"\n' + "".join(
        f'[hosts.c{i + 1}]\nrole = "client"\n' for i in range(clients))
    def q(xs):
        return "[" + ", ".join(f'"{x}"' if isinstance(x, str) else str(x) for x in xs) + "]"
    return f"""name = "{name}"
[lab]
name = "{lab}"
[link]
mtu = {mtu}
{f'speed = "{speed}"' if speed else ""}
{hosts}
[study]
engine = "{engine}"
directions = {q(directions)}
io_sizes = {q(io_sizes)}
connections = {q(connections)}
duration = {duration}
omit = {omit}
interval = 0.5
trim = {trim}
{extra}
"""


def study_plan(name: str, lab: str, kind: str, study: str, *, clients: int = 2, link: str = "",
               lab_extra: str = "") -> str:
    """A lab plan of any study: the server, ``clients`` clients, MTU 1500, the
    ``[link]`` lines in ``link``, more ``[lab]`` lines (a subnet, ``transport =
    "ssh"``) in ``lab_extra``, the study's own lines in ``study``."""
    hosts = '[hosts.srv]\nrole = "server"\n' + "".join(f'[hosts.c{i + 1}]\nrole = "client"\n' for i in range(clients))
    return (f'name = "{name}"\n[lab]\nname = "{lab}"\n{lab_extra}\n[link]\nmtu = 1500\n{link}\n{hosts}'
            f'[study]\nkind = "{kind}"\n{study}\n')


def pids_with(pattern: str) -> list[int]:
    """PIDs whose command line contains ``pattern`` (read from /proc: no name-based kill anywhere)."""
    out = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if pattern in (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    out.append(int(p.name))
            except OSError:
                pass
    return out


def namespaces(lab: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.startswith(f"nb-{lab}-")]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def finish(p: subprocess.Popen, timeout: float) -> tuple[int, str, str]:
    """A process of a test that must stop by itself: its exit code, stdout,
    stderr; killed and failed (with its stderr's tail) if it does not."""
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        raise AssertionError(f"{p.args!r} did not stop by itself within {timeout} s:\n{err[-3000:]}") from None
    return p.returncode, out, err


def nicbench(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "nicbench.cli.main", *map(str, args)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def cli(*args, timeout: float = 600) -> tuple[int, str, str]:
    """``nicbench ARGS`` to its end: (exit code, stdout, stderr)."""
    p = nicbench(*args)
    out, err = p.communicate(timeout=timeout)
    return p.returncode, out, err


def procs_in(netns: str, match: Callable[[list[bytes]], bool]) -> list[int]:
    """PIDs of the processes inside ``netns`` whose argv (``/proc/PID/cmdline``
    split at NULs) ``match`` accepts; processes gone meanwhile are skipped."""
    out = []
    for p in subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True).stdout.split():
        try:
            argv = Path(f"/proc/{p}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and match(argv):
            out.append(int(p))
    return out


def kill_server_in(netns: str, tool: str, server_word: str, after: float, seen: list[int],
                   count: int = 1) -> None:
    """Kill (by PID) the ``tool`` server (its argv holds ``server_word``: ``-s``,
    ``server``) found in ``netns``, ``after`` s after it appears.  Only a server
    counts: preflight runs ``tool --version`` in the same namespace, gone by the
    time a kill would land -- such a "kill" hits nothing and the point rightly
    comes out ok.  ``seen`` gets only PIDs that were alive when signalled.
    ``count``: wait until that many are there (processes started one after the
    other: a scan between two starts saw only the first, with other work on
    the machine, and the second survived its kill)."""
    import signal
    import time
    deadline = time.time() + 30
    while time.time() < deadline:
        mine = procs_in(netns, lambda argv: Path(argv[0].decode(errors="replace")).name == tool
                        and server_word.encode() in argv)
        if len(mine) >= count:
            time.sleep(after)
            for p in mine:
                try:
                    os.kill(p, signal.SIGKILL)
                    seen.append(p)
                except ProcessLookupError:
                    pass
            return
        time.sleep(0.05)


def goodput_agrees_with_the_wire(p, retransmitted: float = 0.10, backlog: float = 0.05) -> None:
    """A TCP point's goodput (the tools' receiver bytes) against what the
    server's interface counters carried over the same window, both from one
    run: goodput / ceiling is wire / link less what retransmits took (the wire
    carries them, the goodput does not; a point with thousands of retransmits
    read 0.94 of the wire), and more by at most what the receivers' socket
    buffers held at the window's start: an engine counts bytes as it reads
    them, and a reader behind reads its backlog later (iperf3 -R, 4
    connections, other work on the machine: 1.2 % over the wire; megabytes per
    connection can wait there, a few % of a 4.5 s window at 1 Gbit/s).  Two
    counts of the same traffic, not a speed: a machine busy with other work
    lowers both."""
    wire = p.wire_gbps / p.link_gbps
    print(f"nicbench-e2e {p.point}: goodput {p.of_ceiling:.4f} of its ceiling, wire {wire:.4f} of the link")
    assert wire - retransmitted <= p.of_ceiling <= wire + backlog, (p.point, p.of_ceiling, wire)


def overcount_flagged(t) -> None:
    """A packet point's receiver counting more frames than were sent: over
    nicbench's threshold exactly when the point says so.  Both ends' counters
    are read at their own moments and interpolated over the window, so how far
    apart they drift is this machine's timing (0.2 % idle, 0.6-0.9 % for
    trafgen with other work on the machine): the test holds nicbench's
    judgement to its own rule, not the machine to a tolerance."""
    over = t.rx_pps > t.tx_pps * (1 + OVERCOUNT)
    said = any("more frames than were sent" in w for w in t.warnings)
    print(f"nicbench-e2e {t.point} rx/tx {t.rx_pps / t.tx_pps:.6f}")
    assert over == said, (t.point, t.rx_pps, t.tx_pps, t.warnings)


def lab_up(spec):
    """``manager.up`` for a test, recorded as built by a test.  A lab of the
    same name that an earlier test left when its pytest was killed (owner a
    test, its process gone) is removed first: one killed session must not fail
    every later one on this machine (CI did, 2026-11-28: 'lab e2ess4 already
    exists').  A lab a live process built, or a user's ``lab up``, is left
    alone, and up() refuses it as before."""
    from nicbench.hosts.tracker import proc_starttime
    from nicbench.lab import manager
    owner = manager.ownership(spec.name).owner or {}
    pid = owner.get("pid")
    if owner.get("purpose") == "test" and isinstance(pid, int) \
            and proc_starttime(pid) != owner.get("pid_start"):
        manager.down(spec.name)
    return manager.up(spec, purpose="test")
