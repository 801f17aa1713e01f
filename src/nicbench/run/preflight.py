"""Checks every study's preflight makes the same way: a tool's version, the
ports something already listens on, whether the peers answer a ping."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ..core.errors import NicbenchError, PreflightError, tail
from ..hosts.transport import Transport, host_os
from ..plan.model import Plan
from ..tools.base import parse_version
from .procnet import listening_ports
from .sockstat import busy_tcp


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
    """TCP ports something listens on in the host's namespace (on FreeBSD, which
    has no /proc/net: every TCP port ``sockstat -l`` shows held)."""
    if host_os(t) == "FreeBSD":
        return busy_tcp(t)
    busy: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            busy |= listening_ports(t.read_text(table))
        except OSError:
            pass
    return busy


def nofile_limit(t: Transport, flag: str = "-n") -> int | None:
    """The open-files limit a process started on the host gets (``-n`` soft,
    ``-Hn`` hard); None when it is unlimited or cannot be read."""
    try:
        out = t.run(["sh", "-c", f"ulimit {flag}"], timeout=10).stdout.strip()
    except NicbenchError:
        return None
    return int(out) if out.isdigit() else None


NOFILE_HINT = ("raise the open-files limit where the tools start (ulimit -n, systemd LimitNOFILE, "
               "/etc/security/limits.conf)")


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


# What a study needs of a host that only Linux has: (study kind) -> function
# of (plan, host) giving the Linux-only things that host would run
def _packets_needs(plan: Plan, host: str) -> list[str]:
    out = []
    engines = list(plan.study.engines)  # type: ignore[attr-defined]
    linux = {"nbgen": "nbgen (an XDP / AF_XDP generator)", "trafgen": "trafgen (netsniff-ng, AF_PACKET)"}
    if host == plan.server:
        out += [linux[e] for e in engines if e in linux]          # pkt-gen (netmap) runs on FreeBSD
    if host in plan.clients[:1] and any(e in linux for e in engines):
        out.append("the XDP receiver (nbgen rx)")       # pkt-gen's points count with pkt-gen rx
    return out


def _storage_needs(plan: Plan, host: str) -> list[str]:
    s = plan.study
    out = []
    if host == plan.server and s.target == "iscsi":  # type: ignore[attr-defined]
        out.append("the iSCSI target tgtd (Linux SCSI target framework)")
    if host in plan.clients and s.target == "devices" and s.engine in ("libaio", "io_uring"):  # type: ignore[attr-defined]
        out.append(f"fio's {s.engine} engine")  # type: ignore[attr-defined]
    return out


def _iperf_needs(plan: Plan, host: str) -> list[str]:
    """The iperf engines' servers run on the client hosts, and nicbench reads
    their readiness (and iperf3's UDP set-up) from Linux's /proc; the engine
    clients on the study server need none of it (the seeds' FreeBSD hosts
    were servers).  nbperf itself is Linux code (epoll, eventfd, TCP_INFO)."""
    engine = str(getattr(plan.study, "engine", ""))
    if engine == "nbperf" and (host == plan.server or host in plan.clients):
        return ["nbperf (epoll, eventfd, Linux's TCP_INFO)"]
    if engine in ("iperf3", "iperf2") and host in plan.clients:
        return [f"{engine} engine servers (nicbench watches their sockets through Linux's /proc)"]
    return []


LINUX_ONLY: dict[str, Callable[[Plan, str], list[str]]] = {
    "packets": _packets_needs, "storage": _storage_needs, "tcp": _iperf_needs, "udp": _iperf_needs}


def os_problems(plan: Plan, oses: Mapping[str, str | None]) -> list[str]:
    """A FreeBSD host asked to run what only Linux has (XDP, AF_PACKET, tgtd,
    libaio/io_uring): one problem per host, naming it and what (pure).
    ``oses``: host -> ``uname -s`` as preflight found it."""
    out = []
    needs = LINUX_ONLY.get(plan.study.kind)
    for host, os_name in oses.items():
        if os_name == "FreeBSD" and needs is not None:
            what = needs(plan, host)
            if what:
                out.append(f"{host}: a FreeBSD host, but the {plan.study.kind} study would run {', '.join(what)} "
                           "there, which need Linux")
    return out


def problems_found(problems: list[str], study: str) -> PreflightError:
    """Every problem a study's preflight found, as one error.  ``where`` names the
    study (the error's kind already says "preflight"; each problem names its host)."""
    return PreflightError("; ".join(problems), where=f"{study} study",
                          hint="fix every item listed, then run again")
