"""FreeBSD's ``sockstat`` (base system, usr.bin/sockstat): which process holds
which Internet socket -- the FreeBSD counterpart of /proc/net/{tcp,udp} and
/proc/PID/fd, which FreeBSD does not have (pure parser).

What nicbench runs (:func:`sockstat_argv`): ``sockstat -46 -l -q -s -w -P
tcp`` (or ``udp``).  ``-l`` lists sockets without a foreign port: TCP sockets
listening (or bound and not yet listening: ``-s`` tells them apart) and UDP
sockets bound and not connected.  ``-q``, ``-s`` and ``-w`` are in sockstat(1)
since FreeBSD 12.0.  ``-w`` matters on FreeBSD 15, whose libxo output cuts an
address to the column width (21) without it; before 15 an address is never cut.

A row, as sockstat.c prints it (``display``/``displaysock``; 15: main.c):

    USER COMMAND PID FD PROTO LOCAL-ADDRESS FOREIGN-ADDRESS [PATH-STATE] [CONN-STATE]

- COMMAND is ``ki_comm`` cut to 10 characters; it may hold spaces, and the
  fixed-width columns of old releases (before the column code put at least
  one space between fields) glue a 10-character command to its PID;
- a socket no process holds shows ``?`` (``??`` on 15) for USER to FD;
- PROTO is ``tcp``/``udp``/``sctp``/``div`` (``toe`` for TCP offloaded to a
  TOE NIC) followed by ``4``, ``6`` or ``46`` (a dual-stack socket);
- an address is ``HOST:PORT`` without brackets (``printaddr``): ``*`` for the
  unspecified address, an IPv6 address as getnameinfo prints it
  (``::1:953``, ``fe80::1%lo0:123``), ``*`` for port 0 (``*:*``);
- with ``-s`` a TCP row ends in its state (``LISTEN``); FreeBSD 15 prints
  ``??`` in the columns that do not apply (a UDP row's states, the path state).

Errors are :class:`ToolError` naming the host and the line: a row that cannot
be split safely is never guessed at (a port read wrong would call a busy port
free, or a server ready before it listens).
"""

from __future__ import annotations

import ipaddress
import re
from typing import NamedTuple

from ..core.errors import ToolError

# netinet/tcp_fsm.h tcpstates[] and netinet/sctp_constants.h (sockstat's sctp_conn_state)
TCP_STATES = frozenset({"CLOSED", "LISTEN", "SYN_SENT", "SYN_RCVD", "ESTABLISHED", "CLOSE_WAIT", "FIN_WAIT_1",
                        "CLOSING", "LAST_ACK", "FIN_WAIT_2", "TIME_WAIT"})
SCTP_STATES = frozenset({"CLOSED", "BOUND", "LISTEN", "COOKIE_WAIT", "COOKIE_ECHOED", "ESTABLISHED",
                         "SHUTDOWN_SENT", "SHUTDOWN_RECEIVED", "SHUTDOWN_ACK_SENT", "SHUTDOWN_PENDING", "UNKNOWN"})

_ROW = re.compile(r"^(?P<user>\S+)\s+(?P<cmd>.+?)\s*(?P<pid>\d+|\?\??)\s+(?P<fd>\d+|\?\??)\s+"
                  r"(?P<proto>(?:tcp|toe|udp|sctp|div)(?:46|4|6)?)\s+(?P<rest>\S.*)$")
_COMMAND_WIDTH = 10          # sockstat prints ki_comm as %.10s (%-10.10s on old releases)


class SockstatRow(NamedTuple):
    """One socket of ``sockstat`` output.  ``pid``/``fd`` are None for a socket
    no process holds; ``local_addr`` is ``*`` (any) or the address as printed,
    without brackets; ``local_port`` is None for ``*`` (port 0); ``state`` is
    the TCP/SCTP state when ``-s`` printed one, else None."""

    user: str
    command: str
    pid: int | None
    fd: int | None
    proto: str
    local_addr: str
    local_port: int | None
    state: str | None

    @property
    def family(self) -> str:
        """``tcp`` (``toe`` included), ``udp``, ``sctp`` or ``div``."""
        base = self.proto.rstrip("46")
        return "tcp" if base == "toe" else base


def sockstat_argv(proto: str) -> list[str]:
    """The command nicbench runs for ``proto`` (``tcp`` or ``udp``): listening /
    bound sockets of both families, no header, with TCP states, addresses never cut."""
    if proto not in ("tcp", "udp"):
        raise ValueError(proto)
    return ["sockstat", "-46", "-l", "-q", "-s", "-w", "-P", proto]


def split_address(text: str, *, where: str) -> tuple[str, int | None]:
    """``*:443`` -> ``("*", 443)``; ``10.0.0.1:80``; ``::1:953`` / ``[::1]:953``
    -> ``("::1", 953)``; ``fe80::1%lo0:123``; ``*:*`` -> ``("*", None)``."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host:
        raise ToolError(f"sockstat: cannot read the address {text!r}", where=where)
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if host != "*":
        try:
            ipaddress.ip_address(host.split("%", 1)[0])
        except ValueError:
            raise ToolError(f"sockstat: {text!r} is not an address and port", where=where,
                            hint="columns run together (an old sockstat?) or the address was cut: "
                                 "nicbench runs sockstat -w") from None
    if port_text == "*":
        return host, None
    if not port_text.isdigit() or int(port_text) > 65535:
        raise ToolError(f"sockstat: cannot read the port of {text!r}", where=where)
    return host, int(port_text)


def _ident(text: str) -> int | None:
    return None if text.startswith("?") else int(text)


def _state(proto: str, extra: list[str], line: str, where: str) -> str | None:
    """The state column(s) after the foreign address: ``??`` is "does not apply"."""
    shown = [x for x in extra if x != "??"]
    states = SCTP_STATES if proto.startswith("sctp") else TCP_STATES
    if len(shown) > 1 or (shown and (shown[0] not in states or proto.startswith(("udp", "div")))):
        raise ToolError(f"sockstat: unexpected columns {' '.join(extra)!r} in {line.strip()!r}", where=where,
                        hint="nicbench reads sockstat -46 -l -q -s -w -P tcp|udp")
    return shown[0] if shown else None


def parse_sockstat(text: str, *, where: str) -> list[SockstatRow]:
    """Every socket row of ``sockstat`` output (a header line, if printed, and
    blank lines are skipped).  ``where`` names the host for errors."""
    rows: list[SockstatRow] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("USER") and "COMMAND" in line and "PROTO" in line:
            continue                                    # the header (no -q, or a release without it)
        m = _ROW.match(line.rstrip())
        if m is None:
            raise ToolError(f"sockstat: cannot read the line {line.strip()!r}", where=where,
                            hint="an address continued on a line of its own (SCTP)? nicbench reads "
                                 "sockstat -46 -l -q -s -w -P tcp|udp")
        cmd = m.group("cmd").strip()
        if m.start("pid") == m.end("cmd") and len(m.group("cmd")) != _COMMAND_WIDTH:
            # glued to its PID only where an old release filled a 10-character command column
            raise ToolError(f"sockstat: cannot tell the command from the PID in {line.strip()!r}", where=where)
        tokens = m.group("rest").split()
        if len(tokens) < 2:
            raise ToolError(f"sockstat: no foreign address in {line.strip()!r}", where=where)
        addr, port = split_address(tokens[0], where=where)
        split_address(tokens[1], where=where)           # the foreign address must read too
        proto = m.group("proto")
        rows.append(SockstatRow(m.group("user"), cmd, _ident(m.group("pid")), _ident(m.group("fd")), proto,
                                addr, port, _state(proto, tokens[2:], line, where)))
    return rows


def listening_ports(rows: list[SockstatRow], pid: int | None = None) -> set[int]:
    """TCP ports in state LISTEN (of process ``pid``, or of anyone).  A row
    without a state (sockstat run without ``-s``) does not count: a bound TCP
    socket is listed by ``-l`` before it listens."""
    return {r.local_port for r in rows if r.family == "tcp" and r.state == "LISTEN" and r.local_port is not None
            and (pid is None or r.pid == pid)}


def bound_ports(rows: list[SockstatRow]) -> set[int]:
    """Every local port a listed socket holds (``sockstat -l``: listening or
    bound TCP, bound and unconnected UDP), whoever holds it."""
    return {r.local_port for r in rows if r.local_port is not None}
