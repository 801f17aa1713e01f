"""Preflight of hosts reached over SSH: connect to all at once, check each
in one round trip (its OS, root or sudo, bash for the start gate, leftovers
of an earlier run, the test NIC's MTU and address), measure its clock
offset, and say the SSH settings ssh itself resolved for it (``ssh -G``).

Every host is checked in its own thread under its own deadline, so a host
that is down or hangs costs the whole preflight its own timeout once, never
once per host."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.errors import NicbenchError, ToolError, tail
from .ssh import SUDO_HINT, SshTransport, sudo_refusal
from .sshconfig import SshSettings, resolve
from .transport import each_host

# the operating systems nicbench drives (``uname -s``)
SUPPORTED_OS = ("Linux", "FreeBSD")


@dataclass(frozen=True)
class HostCheck:
    """What preflight learned of one SSH host."""

    host: str
    problems: tuple[str, ...] = ()
    root: bool | None = None
    clock_offset_s: float | None = None     # remote - local, from one round trip
    clock_uncertainty_s: float | None = None
    leftovers: tuple[int, ...] = ()
    os: str | None = None                   # uname -s
    ssh: SshSettings | None = field(default=None, compare=False)    # what ssh -G resolved
    seconds: float | None = None            # how long this host's preflight took

    def meta(self) -> dict[str, Any]:
        """What a run keeps of this host's preflight (``RunInfo.meta["ssh"][host]``)."""
        out: dict[str, Any] = {"clock_offset_s": self.clock_offset_s, "clock_uncertainty_s": self.clock_uncertainty_s,
                               "root": self.root, "os": self.os, "preflight_s": self.seconds}
        if self.clock_offset_s is not None:
            # what every stamp of the host is mapped with (tools' and host sampler's)
            out["clock_offset_applied_s"] = applied_offset(self.clock_offset_s, self.clock_uncertainty_s or 0.0)
        if self.ssh is not None:
            out["settings"] = self.ssh.to_meta()
        return out


def applied_offset(offset: float, uncertainty: float) -> float:
    """The offset applied to a host's stamps: an offset within its own
    uncertainty is not known to be one, so none is applied."""
    return offset if abs(offset) > uncertainty else 0.0


# one round trip per host: who we are, sudo, the clock, leftovers of ours,
# the interfaces asked about (name, MTU, addresses)
_CHECK = r'''
printf 'os %s\n' "$(uname -s)"
printf 'uid %s\n' "$(id -u)"
# sudo's own words when it refuses (its first line: "a password is required")
if e=$(sudo -n true 2>&1 </dev/null); then echo 'sudo yes'
else printf 'sudo no %.200s\n' "$(printf '%s\n' "$e" | head -n 1)"; fi
# what nicbench's own shell code needs on the host: bash >= 5 for the start
# gate's $EPOCHREALTIME, and the wrapper's setsid, mkfifo, mktemp, base64
if [ -n "$(bash -c 'printf %s "$EPOCHREALTIME"' 2>/dev/null)" ]; then echo 'bash ok'; else echo 'bash old'; fi
for c in setsid mkfifo mktemp base64; do command -v "$c" >/dev/null 2>&1 || printf 'missing %s\n' "$c"; done
n=nicbench   # (split, so this script's own command line does not match)
if [ -d /proc/1 ]; then
  # one grep over every command line, not a tr per process: a fork each cost
  # 1 ms, seconds on a busy host, and 64 lab hosts sharing one /proc made it
  # quadratic (the brackets keep grep's own command line from matching)
  grep -a -l -E 'nicbench-[w]rap|nicbench-[g]ate' /proc/[0-9]*/cmdline 2>/dev/null | while IFS= read -r f; do
    c=$(tr '\0\n' '  ' < "$f" 2>/dev/null) || continue
    p=${f#/proc/}
    printf 'left %s %.80s\n' "${p%/cmdline}" "$c"
  done
else   # FreeBSD: no procfs
  ps -axww -o pid= -o command= 2>/dev/null | while read -r p c; do
    case "$c" in *"$n"-wrap*|*"$n"-gate*) printf 'left %s %.80s\n' "$p" "$c";; esac
  done
fi
for i in "$@"; do
  if [ -e "/sys/class/net/$i" ]; then
    printf 'if %s %s' "$i" "$(cat /sys/class/net/$i/mtu)"
    ip -o -4 addr show dev "$i" 2>/dev/null | while read -r _ _ _ a _; do printf ' %s' "${a%/*}"; done
    ip -o -6 addr show dev "$i" 2>/dev/null | while read -r _ _ _ a _; do printf ' %s' "${a%/*}"; done
    echo
  elif [ ! -d /sys/class/net ] && ifconfig "$i" >/dev/null 2>&1; then
    # FreeBSD: "IF: flags=... metric 0 mtu 1500", then "inet A netmask ..." / "inet6 A%IF prefixlen ..."
    ifconfig "$i" | awk -v i="$i" 'NR == 1 { for (k = 1; k < NF; k++) if ($k == "mtu") m = $(k + 1) }
      $1 == "inet" || $1 == "inet6" { sub(/%.*/, "", $2); a = a " " $2 }
      END { printf "if %s %s%s\n", i, m, a }'
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
    sudo_said = ""
    os_name: str | None = None
    offset, unc = clock if clock else (None, None)
    left: list[int] = []
    missing: list[str] = []
    seen_if: dict[str, tuple[int, list[str]]] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "os":
            os_name = rest.strip() or None
        elif kind == "uid":
            root = rest.strip() == "0"
        elif kind == "sudo":
            answer, _, sudo_said = rest.strip().partition(" ")
            sudo = answer == "yes"
        elif kind == "left":
            left.append(int(rest.split()[0]))
        elif kind == "if":
            name, mtu_text, *addrs = rest.split()
            seen_if[name] = (int(mtu_text), addrs)
        elif kind == "noif":
            problems.append(f"{host}: interface {rest.strip()} does not exist")
        elif kind == "bash" and rest.strip() == "old":
            problems.append(f"{host}: nicbench's start gate needs bash >= 5 ($EPOCHREALTIME): install a newer bash")
        elif kind == "missing":
            missing.append(rest.strip())
    for tool in missing:
        where = ("FreeBSD's base system has none: put a setsid(1) on the PATH (e.g. util-linux's), as "
                 "nicbench's process wrapper starts every tool in its own session with it"
                 if os_name == "FreeBSD" and tool == "setsid" else "coreutils/util-linux: nicbench's process "
                 "wrapper needs it")
        problems.append(f"{host}: {tool} is missing ({where})")
    if root is None:
        problems.append(f"{host}: the host check printed nothing usable")
    elif os_name is None:
        problems.append(f"{host}: the host check did not say its OS (uname -s)")
    elif os_name not in SUPPORTED_OS:
        problems.append(f"{host}: its OS is {os_name!r} (uname -s): nicbench drives Linux and FreeBSD hosts only")
    elif root is False and not sudo_set:
        problems.append(f"{host}: not root, and the plan does not say sudo = true: the tools need root"
                        + ("" if sudo else " (and 'sudo -n' asks for a password)"))
    elif root is False and not sudo:
        # sudo = true but no rule lets it run without a password: every command
        # would fail, each in its own words ("could not read its clock", ...)
        asks = sudo_refusal(sudo_said)
        problems.append(f"{host}: sudo = true, but sudo asks for a password ({asks}): {SUDO_HINT}" if asks else
                        f"{host}: sudo = true, but 'sudo -n true' fails ({sudo_said.strip() or 'no message'}): "
                        "is sudo installed, and may the login user use it?")
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
    return HostCheck(host, tuple(problems), bool(root or (sudo and sudo_set)), offset, unc, tuple(left), os_name)


def preflight(transports: dict[str, SshTransport], want: dict[str, dict[str, tuple[str | None, int | None]]],
              *, max_offset: float = 0.05, timeout: float | None = None) -> tuple[dict[str, HostCheck], list[str]]:
    """Connect to every host at once and check each in one round trip; every
    problem of every host in one list (a host that is down is one of them).
    Each host has ``timeout`` s (default: its connect timeout + 15 s) for
    all of it; the hosts run side by side, so a dead one costs that once."""
    def one(t: SshTransport) -> HostCheck:
        t0 = time.monotonic()
        by = t0 + (timeout if timeout is not None else t.target.connect_timeout + 15)

        def left() -> float:
            rest = by - time.monotonic()
            if rest <= 0:
                raise ToolError(f"preflight did not finish within {by - t0:g}s", where=t.host,
                                hint="is the host overloaded, or its login shell slow?")
            return rest

        settings = resolve(t.target, t.host, timeout=min(5.0, left()))
        t.connect()
        t.os = None
        ifs = list(want.get(t.host, {}))
        r = t.run(["sh", "-c", _CHECK, "nicbench-check", *ifs], timeout=left(), sudo=False)
        if r.returncode != 0 and not r.stdout.strip():
            why = tail(r.stderr) or f"exit {r.returncode}"
            return HostCheck(t.host, (f"{t.host}: the host check failed: {why}"
                                      + (" (sudo -n needs a password?)" if t.target.sudo else ""),),
                             ssh=settings, seconds=time.monotonic() - t0)
        # the clock on the open command shell (no login in the round trip), best of 5;
        # as the login user: reading it needs no root, and sudo would only add its start-up
        # to the round trip (or fail, on a host whose sudo asks for a password)
        samples = []
        for _ in range(5):
            a = time.time()
            c = t.run(["date", "+%s.%N"], timeout=min(10.0, left()), sudo=False)
            b = time.time()
            try:
                samples.append((a, float(c.stdout), b))
            except ValueError:
                pass      # FreeBSD before 14.1 prints no %N: "+%s.N" is not a number
        if not samples:
            for _ in range(3):
                a = time.time()
                c = t.run(["date", "+%s"], timeout=min(10.0, left()), sudo=False)
                b = time.time()
                try:
                    samples.append((a, float(c.stdout) + 0.5, b))   # whole seconds: the middle of the second
                except ValueError:
                    pass
        if samples:
            t.rtt = min(b - a for a, _, b in samples)
        chk = parse_check(t.host, r.stdout, clock_offset(samples), want=want.get(t.host, {}), max_offset=max_offset,
                          sudo_set=t.target.sudo)
        t.os = chk.os
        return replace(chk, ssh=settings, seconds=time.monotonic() - t0)
    results = each_host(one, transports)
    checks: dict[str, HostCheck] = {}
    problems: list[str] = []
    for host, res in results.items():
        if isinstance(res, HostCheck):
            checks[host] = res
            problems += res.problems
            off, unc = res.clock_offset_s or 0.0, res.clock_uncertainty_s or 0.0
            applied = applied_offset(off, unc)
            transports[host].clock_offset = applied
            transports[host].clock_uncertainty = unc + abs(off - applied)
        elif isinstance(res, NicbenchError):
            problems.append(f"{host}: {res.message}")
        else:
            problems.append(f"{host}: {res}")
    return checks, problems

