"""A FreeBSD host's sockets from its base-system ``sockstat``: FreeBSD has no
/proc/net (``procnet`` reads Linux's), so readiness and busy ports ask
sockstat there.  One command per question; its output is parsed by
``sampling.sockstat_freebsd``."""

from __future__ import annotations

from ..core.errors import ToolError, tail
from ..hosts.transport import Transport, host_os
from ..sampling.sockstat_freebsd import SockstatRow, bound_ports, listening_ports, parse_sockstat, sockstat_argv
from .procnet import listening


def sockets(t: Transport, proto: str) -> list[SockstatRow]:
    """Listening (TCP) or bound, unconnected (UDP) sockets on FreeBSD host ``t``;
    ToolError naming the host when sockstat fails or prints what cannot be read."""
    argv = sockstat_argv(proto)
    r = t.run(argv, timeout=10)
    if r.returncode != 0:
        raise ToolError(f"{' '.join(argv)} failed: {tail(r.stderr + r.stdout) or f'exit {r.returncode}'}",
                        where=t.host, hint="sockstat is in FreeBSD's base system (12.0 or later for -q -s -w)")
    return parse_sockstat(r.stdout, where=t.host)


def busy_tcp(t: Transport) -> set[int]:
    """TCP ports some socket holds on FreeBSD host ``t`` (listening or bound)."""
    return bound_ports(sockets(t, "tcp"))



def pid_listening(t: Transport, pid: int) -> set[int]:
    """TCP ports process ``pid`` has a socket in LISTEN on (FreeBSD host ``t``).
    nginx's master opens its listening sockets and its workers inherit them,
    so the master's PID is the one to ask about."""
    return listening_ports(sockets(t, "tcp"), pid)


def tcp_listening_of(t: Transport, pid: int) -> set[int]:
    """TCP ports process ``pid`` listens on, on any host: its /proc/PID/net/tcp
    on Linux (the table of its network namespace), sockstat on FreeBSD."""
    if host_os(t) == "FreeBSD":
        return pid_listening(t, pid)
    try:
        return set(listening(t.read_text(f"/proc/{pid}/net/tcp")))
    except OSError:
        return set()
