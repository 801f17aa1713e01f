"""The packet study's preflight: every problem of every host at once.

The engines each check what is theirs (built, runnable, their version,
netmap; the generator's kernel and CPUs for what the plan asks of them;
the receiver ports' XDP); this module checks what every engine needs in the
same way: the privileges each engine names, each port's interface present
on both hosts with room for the biggest frame, the generator's CPUs.
"""

from __future__ import annotations

import json

from ...core.errors import NicbenchError, PreflightError
from ...hosts.factparse_freebsd import parse_ifconfig
from ...hosts.transport import Transport, host_os
from ...plan.model import Plan
from ...plan.studies.packets import PacketStudy
from ...run.preflight import problems_found
from ...tuning.knobs import cpu_set
from .context import PacketContext
from .engines import ENGINES, receivers
from .engines.engine import Engine, Found, lacking


def missing_caps(mask: int | None, engine: str) -> list[str]:
    """What ``engine`` needs that ``mask`` lacks (CAP_SYS_ADMIN stands in for
    CAP_BPF/CAP_PERFMON on kernels before 5.8)."""
    return lacking(mask, ENGINES[engine].caps)


def preflight(plan: Plan, transports: dict[str, Transport],
              addresses: dict[str, str]) -> tuple[PacketContext, list[str]]:
    """Every problem at once: engines built and runnable, privileges,
    interfaces present with room for the frames, no XDP program already
    on a receiver port, a kernel with live frames."""
    s = plan.study
    assert isinstance(s, PacketStudy)
    gen, rx = plan.server, plan.clients[0]
    problems: list[str] = []
    warnings: list[str] = []
    found = Found()
    devs = {h: list(v) for h, v in (s.interfaces or {}).items()}
    hosts: dict[str, list[Engine]] = {gen: [ENGINES[e] for e in s.engines],
                                      rx: [ENGINES[e] for e in receivers(s.engines)]}
    for eng in dict.fromkeys(e for on in hosts.values() for e in on):
        problems += eng.locate(found)
    for host, engines in hosts.items():
        t = transports[host]
        for eng in dict.fromkeys(engines):
            try:
                problems += eng.check(host, t, found)
            except PreflightError as e:
                problems.append(f"{host}: {e.message}")
        mask = _caps(t) if host_os(t) == "Linux" else None     # CapEff is Linux's; FreeBSD: root or not
        for eng in dict.fromkeys(engines):
            lack = lacking(mask, eng.caps)
            if lack:
                problems.append(f"{host}: {eng.name} needs {', '.join(lack)}, which this user lacks (run as root)")
    macs: dict[tuple[str, int], str] = {}
    biggest = max(s.frame_sizes)
    for i in range(max(s.ports)):
        for host in (gen, rx):
            dev = PacketContext.dev_of(devs, host, i)
            info = _link(transports[host], dev) if host_os(transports[host]) == "Linux" else \
                _link_freebsd(transports[host], dev)
            if info is None:
                problems.append(f"{host}: interface {dev} does not exist (port {i + 1} of {max(s.ports)})")
                continue
            macs[(host, i)] = str(info.get("address", ""))
            mtu = int(info.get("mtu") or 0)
            if biggest > mtu + 18:
                problems.append(f"{host}: {dev} has MTU {mtu}: a {biggest}-byte frame needs MTU {biggest - 18}")
            if host == rx:
                for r in dict.fromkeys(e.receiver for e in hosts[rx]):
                    p, w = r.check_port(rx, dev, info, max(s.threads))
                    problems += p
                    warnings += w
    kernel = transports[gen].run(["uname", "-r"], timeout=10).stdout.strip()
    online = _online(transports[gen])
    cpus = len(online)
    for eng in hosts[gen]:
        problems += eng.check_generator(s, gen, kernel, cpus)
    if max(s.threads) * max(s.ports) > cpus:
        warnings.append(f"{gen}: {max(s.threads) * max(s.ports)} generator threads on {cpus} CPUs: "
                        "threads share cores, so Mpps per thread drops")
    if problems:
        raise problems_found(problems, "packets")
    return PacketContext(s, gen, rx, dict(transports), found.versions, found.exe, macs, online, kernel, devs,
                         found.exes), warnings


def _caps(t: Transport) -> int | None:
    """The effective capability mask of a process started through ``t``."""
    try:
        r = t.run(["cat", "/proc/self/status"], timeout=10)
    except NicbenchError:
        return None
    for line in r.stdout.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return None


def _link(t: Transport, dev: str) -> dict | None:
    r = t.run(["ip", "-j", "-d", "link", "show", "dev", dev], timeout=10)
    if r.returncode != 0:
        return None
    try:
        return json.loads(r.stdout)[0]
    except (ValueError, IndexError):
        return None


def _link_freebsd(t: Transport, dev: str) -> dict | None:
    """A FreeBSD interface as ``ip -j link`` would show what the study needs
    of it: its MAC and MTU (from ``ifconfig IF``)."""
    r = t.run(["ifconfig", dev], timeout=10)
    if r.returncode != 0:
        return None
    try:
        got = parse_ifconfig(r.stdout).get(dev)
    except NicbenchError:
        return None
    return None if got is None else {"address": got.ether or "", "mtu": got.mtu or 0}


def _online(t: Transport) -> list[int]:
    if host_os(t) == "FreeBSD":      # no /sys: hw.ncpu CPUs, numbered from 0
        r = t.run(["sysctl", "-n", "hw.ncpu"], timeout=10)
        n = r.stdout.strip()
        return list(range(int(n))) if r.returncode == 0 and n.isdigit() and int(n) > 0 else [0]
    try:
        cpus = cpu_set(t.read_text("/sys/devices/system/cpu/online").strip())
    except OSError:
        cpus = None
    return sorted(cpus) if cpus else [0]
