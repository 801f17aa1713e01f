"""Checks every study's preflight makes the same way: a tool's version, the
ports something already listens on, whether the peers answer a ping."""

from __future__ import annotations

from ..core.errors import PreflightError, tail
from ..hosts.transport import Transport
from ..tools.base import parse_version
from .procnet import listening_ports


def tool_version(t: Transport, argv: list[str], name: str, hint: str) -> str:
    """``1.22.1`` from a tool's version output (stdout or stderr); PreflightError
    naming the host when the tool is missing or says no version."""
    try:
        r = t.run(argv, timeout=10)
    except PreflightError:
        raise PreflightError(f"{name} is not installed", where=t.host, hint=hint) from None
    v = parse_version(r.stdout + r.stderr)
    if not v:
        raise PreflightError(f"{name}: cannot read a version from {tail(r.stdout + r.stderr)!r}", where=t.host)
    return ".".join(map(str, v))


def busy_ports(t: Transport) -> set[int]:
    """TCP ports something listens on in the host's namespace."""
    busy: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            busy |= listening_ports(t.read_text(table))
        except OSError:
            pass
    return busy


def reach_problems(t: Transport, peers: dict[str, str]) -> list[str]:
    """One ping from ``t`` to every peer (name -> address); a line per peer that does not answer."""
    out = []
    for name, addr in peers.items():
        try:
            r = t.run(["ping", "-c", "1", "-W", "2", "-n", "-q", addr], timeout=10)
        except PreflightError as e:
            return [f"{t.host}: {e.message} (apt-get install iputils-ping)"]
        if r.returncode != 0:
            out.append(f"{t.host} cannot reach {name} ({addr}): {tail(r.stdout + r.stderr) or 'no reply'}")
    return out


def problems_found(problems: list[str], study: str) -> PreflightError:
    """Every problem a study's preflight found, as one error.  ``where`` names the
    study (the error's kind already says "preflight"; each problem names its host)."""
    return PreflightError("; ".join(problems), where=f"{study} study",
                          hint="fix every item listed, then run again")
