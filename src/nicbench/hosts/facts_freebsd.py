"""Facts of a FreeBSD host: one POSIX sh script, one round trip, parsed by
:mod:`nicbench.hosts.factparse_freebsd` (tested on recorded FreeBSD outputs;
no FreeBSD host has run it yet).

The script prints the same sections as the Linux one (``@@nicbench-section
NAME`` ... ``@@nicbench-rc N``), from FreeBSD's own tools: ``uname``,
``freebsd-version``, ``sysctl hw kern.ipc net.inet.tcp kern.clockrate``,
``pciconf -lv``, ``ifconfig -v IF`` and ``sysctl dev.DRIVER.UNIT`` per test
interface (driver, firmware), ``/boot/loader.conf`` and
``/boot/loader.conf.local`` (read, never written), and the tools' versions.
Keys are the Linux facts' where the thing is the same (``kernel``,
``cpu.model``, ``if.IF.mtu``), FreeBSD's own names otherwise
(``sysctl.kern.ipc.maxsockbuf``, ``loader.hw.cxgbe.nrxq``).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

from ..core.errors import ToolError
from ..records import HostFacts
from .factparse import _Facts, _failure, _num, _tool, sections
from .factparse_freebsd import parse_dev_sysctl, parse_ifconfig, parse_loader_conf, parse_pciconf, parse_sysctl
from .numa_freebsd import domain_cpus

# the sysctls kept as facts (the whole dump stays in the run's raw facts):
# socket buffers, TCP stacks and congestion control, kTLS, mbufs, the clock
SYSCTLS = (
    "kern.ipc.maxsockbuf", "kern.ipc.somaxconn", "kern.ipc.nmbclusters", "kern.ipc.nmbjumbop",
    "kern.ipc.tls.enable", "kern.ipc.tls.cbc_enable", "kern.ipc.tls.ifnet.permitted", "kern.ipc.tls.sw_buffer_cache",
    "net.inet.tcp.sendspace", "net.inet.tcp.recvspace", "net.inet.tcp.sendbuf_max", "net.inet.tcp.recvbuf_max",
    "net.inet.tcp.sendbuf_auto", "net.inet.tcp.recvbuf_auto", "net.inet.tcp.sendbuf_inc", "net.inet.tcp.recvbuf_inc",
    "net.inet.tcp.cc.algorithm", "net.inet.tcp.cc.available", "net.inet.tcp.functions_default",
    "net.inet.tcp.functions_available", "net.inet.tcp.rfc1323", "net.inet.tcp.sack.enable", "net.inet.tcp.tso",
    "net.inet.tcp.mssdflt", "net.inet.tcp.minmss", "net.inet.tcp.path_mtu_discovery", "net.inet.tcp.delayed_ack",
    "hw.model", "hw.ncpu", "hw.physmem", "hw.machine", "kern.clockrate",
)

_IFNAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.]{0,14}$")
# an interface's driver and unit: ix1 -> ("ix", "1"); cxl0 (cxgbe port) -> ("cxl", "0")
_UNIT = re.compile(r"^([A-Za-z_.]*[A-Za-z_])(\d+)$")

_PRELUDE = r"""
export LC_ALL=C PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"
sec() { n=$1; shift; printf '@@nicbench-section %s\n' "$n"; "$@" 2>&1; rc=$?; printf '\n@@nicbench-rc %s\n' "$rc"; }
devsysctl() { d=$(printf '%s' "$1" | sed 's/[0-9]*$//'); u=${1#"$d"}; sysctl "dev.$d.$u"; }
numa() { n=$(sysctl -n vm.ndomains) || return; echo "vm.ndomains: $n"; d=0
  while [ "$d" -lt "$n" ]; do cpuset -g -d "$d" || return; d=$((d + 1)); done; }
"""


def script(ifnames: Sequence[str], tools: Sequence[tuple[str, Sequence[str]]]) -> str:
    """The collection script for a FreeBSD host (pure; POSIX sh); ``tools``:
    (name, argv printing its version)."""
    for i in ifnames:
        if not _IFNAME.match(i):
            raise ValueError(f"not an interface name: {i!r}")
    lines = [
        _PRELUDE,
        "sec uname uname -srvm",
        "sec hostname hostname",
        "sec freebsd-version freebsd-version -ku",
        "sec sysctl sysctl hw kern.ipc net.inet.tcp kern.clockrate",
        "sec pciconf pciconf -lv",
        "sec numa numa",
        "sec loader.conf cat /boot/loader.conf",
        "sec loader.conf.local cat /boot/loader.conf.local",
    ]
    for i in ifnames:
        lines += [f"sec 'ifconfig {i}' ifconfig -v {i}", f"sec 'dev {i}' devsysctl {i}"]
    for tool, argv in tools:
        lines.append(f"sec 'tool {tool}' " + shlex.join(argv))
    return "\n".join(lines) + "\n"


def parse_facts(raw: str, *, host: str, role: str, collected: float) -> HostFacts:
    """Facts from the FreeBSD script's sections (pure)."""
    secs = sections(raw)
    f = _Facts()
    f.add("os", "FreeBSD", "uname -s")
    text, rc = secs.get("hostname", ("", None))
    if rc == 0 and text.strip():
        f.add("hostname", text.strip(), "hostname")
    text, rc = secs.get("uname", ("", None))
    parts = text.split()
    if rc == 0 and len(parts) >= 3:
        f.add("kernel", parts[1], "uname -r")
        f.add("arch", parts[-1], "uname -m")
    else:
        for k in ("kernel", "arch"):
            f.unknown(k, _failure(text, rc, "uname"), "uname -srvm")
    text, rc = secs.get("freebsd-version", ("", None))
    vers = text.split()
    f.add("distro", f"FreeBSD {vers[-1]}" if rc == 0 and vers else None, "freebsd-version -ku",
          _failure(text, rc, "freebsd-version"))
    text, rc = secs.get("sysctl", ("", None))
    sysctl = parse_sysctl(text)
    f.add("cpu.model", sysctl.get("hw.model"), "sysctl hw.model", _failure(text, rc, "sysctl hw"))
    f.add("cpu.count", _num(sysctl["hw.ncpu"]) if "hw.ncpu" in sysctl else None, "sysctl hw.ncpu",
          _failure(text, rc, "sysctl hw"))
    f.add("mem.total_bytes", _num(sysctl["hw.physmem"]) if "hw.physmem" in sysctl else None, "sysctl hw.physmem",
          _failure(text, rc, "sysctl hw"))
    for key in SYSCTLS:
        if key in sysctl:
            f.add(f"sysctl.{key}", _num(" ".join(sysctl[key].split())), f"sysctl {key}")
        elif rc == 0:
            f.unknown(f"sysctl.{key}", "not in this kernel", f"sysctl {key}")
    for name in ("loader.conf", "loader.conf.local"):
        text, rc = secs.get(name, ("", None))
        if rc != 0:
            continue                       # an absent loader.conf.local is the usual case
        try:
            for k, v in parse_loader_conf(text, where=f"/boot/{name}").items():
                f.add(f"loader.{k}", _num(v) if v else None, f"/boot/{name}", "set to an empty value")
        except ToolError as e:
            f.unknown(f"loader.{name}", e.one_line().removeprefix("nicbench: "), f"/boot/{name}")
    _numa(f, *secs.get("numa", ("", None)))
    pci = {}
    text, rc = secs.get("pciconf", ("", None))
    if rc == 0:
        try:
            pci = {d.name: d for d in parse_pciconf(text)}
        except ToolError:
            pci = {}
    for name, (text, rc) in secs.items():
        kind, _, arg = name.partition(" ")
        if kind == "ifconfig" and arg:
            _interface(f, arg, text, rc, pci)
        elif kind == "dev" and arg:
            _driver(f, arg, text, rc)
        elif kind == "tool" and arg:
            _tool(f, arg, text, rc)
    return HostFacts(host, role, collected, tuple(f.items.values()))


def _interface(f: _Facts, i: str, text: str, rc: int | None, pci: dict) -> None:
    p = f"if.{i}."
    src = f"ifconfig -v {i}"
    try:
        ifs = parse_ifconfig(text) if rc == 0 else {}
    except ToolError:
        ifs = {}
    got = ifs.get(i)
    if got is None:
        f.unknown(p + "present", _failure(text, rc, "ifconfig") if rc != 0 else "ifconfig did not show it", src)
        return
    f.add(p + "present", True, src)
    f.add(p + "mtu", got.mtu, src)
    f.add(p + "operstate", "up" if "UP" in got.flags else "down", src)
    f.add(p + "media", got.media, src, "ifconfig shows no media line")
    f.add(p + "status", got.status, src, "ifconfig shows no status line")
    for opt in got.capabilities or got.options:
        f.add(p + f"offload.{opt}", "on" if opt in got.options else "off", src)
    m = _UNIT.match(i)
    dev = pci.get(i)
    if dev is not None:
        f.add(p + "bus_info", dev.selector, "pciconf -lv")
        f.add(p + "device", " ".join(x for x in (dev.vendor, dev.device) if x) or None, "pciconf -lv")
        if dev.link_width:
            f.add(f"{p}pcie.link_width", {"current": dev.link_width[0], "max": dev.link_width[1]}, "pciconf -lvc")
    elif m:
        f.unknown(p + "device", f"pciconf lists no {i}: a virtual or cloned interface, or a port of a "
                                "multi-port controller (cxgbe: its t*nex)", "pciconf -lv")
    if m:
        f.add(p + "driver", m.group(1), "interface name")


def _driver(f: _Facts, i: str, text: str, rc: int | None) -> None:
    p = f"if.{i}."
    m = _UNIT.match(i)
    if rc != 0 or m is None:
        f.unknown(p + "firmware", _failure(text, rc, "sysctl dev") if rc != 0 else "no unit in its name",
                  f"sysctl dev.{i}")
        return
    attrs = parse_dev_sysctl(text).get(f"{m.group(1)}.{m.group(2)}", {})
    f.add(p + "firmware", attrs.get("firmware"), f"sysctl dev.{m.group(1)}.{m.group(2)}",
          "the driver reports no firmware version")
    if attrs.get("desc"):
        f.add(p + "driver_desc", attrs["desc"], f"sysctl dev.{m.group(1)}.{m.group(2)}.%desc")
    # bus_get_domain(9): present only when the device's bus reports a domain
    dom = attrs.get("domain", "")
    f.add(p + "numa_node", int(dom) if dom.isdigit() else None, f"sysctl dev.{m.group(1)}.{m.group(2)}.%domain",
          "no %domain: the bus reports no NUMA domain for it (a single-domain kernel or machine)")


def _numa(f: _Facts, text: str, rc: int | None) -> None:
    """``vm.ndomains`` (numa(4)) and each domain's CPUs (``cpuset -g -d N``)."""
    first, _, rest = text.partition("\n")
    n = first.removeprefix("vm.ndomains: ").strip()
    if rc != 0 or not first.startswith("vm.ndomains: ") or not n.isdigit():
        f.unknown("numa.nodes", _failure(text, rc, "sysctl vm.ndomains / cpuset -g -d"), "sysctl vm.ndomains")
        return
    f.add("numa.nodes", int(n), "sysctl vm.ndomains")
    try:
        f.add("numa.cpus", domain_cpus(rest, int(n)), "cpuset -g -d N")
    except ToolError as e:
        f.unknown("numa.cpus", e.one_line().removeprefix("nicbench: "), "cpuset -g -d N")
