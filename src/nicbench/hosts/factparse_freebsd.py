"""FreeBSD host facts from the raw text of its own tools (pure).

- ``sysctl NAME...`` (``name: value`` lines; a value may run over several
  lines, e.g. ``net.inet.tcp.functions_available``): :func:`parse_sysctl`;
- ``ifconfig -a`` / ``ifconfig -v IF``: :func:`parse_ifconfig`;
- ``pciconf -lv`` / ``-lvbc`` (and the old ``card= chip=`` form of
  ``pciconf -l``): :func:`parse_pciconf`, with the PCIe link from ``-c``;
- ``sysctl dev.DRIVER`` (``%desc``, ``%driver``, ``%location``,
  ``%pnpinfo``, ``%parent``, firmware): :func:`parse_dev_sysctl`;
- ``/boot/loader.conf`` (audited, never written): :func:`parse_loader_conf`,
  :func:`audit_loader`;
- ``sysctl kern.ipc.tls`` before and after a point: :func:`ktls_evidence`.

Every value is what the tool printed; nothing is guessed.  Errors are
:class:`ToolError` naming the tool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..core.errors import ToolError

# -- sysctl -------------------------------------------------------------------

_SYSCTL_LINE = re.compile(r"^([A-Za-z_][\w.%-]*): ?(.*)$")


def parse_sysctl(text: str) -> dict[str, str]:
    """``{name: value}`` from ``sysctl`` output.  A line that does not start
    a ``name:`` continues the previous value (multi-line values keep their
    newlines)."""
    out: dict[str, str] = {}
    last: str | None = None
    for line in text.splitlines():
        m = _SYSCTL_LINE.match(line)
        if m and "." in m.group(1):
            last = m.group(1)
            out[last] = m.group(2).rstrip()
        elif last is not None:
            out[last] = (out[last] + "\n" + line).rstrip("\n") if line.strip() else out[last]
    return out


# -- ifconfig -----------------------------------------------------------------

@dataclass
class FreebsdIf:
    """One interface as ``ifconfig`` printed it."""

    name: str
    flags: list[str] = field(default_factory=list)
    mtu: int | None = None
    options: list[str] = field(default_factory=list)          # enabled offloads/features
    capabilities: list[str] = field(default_factory=list)     # what the driver can do (-m / -v)
    ether: str | None = None
    inet: list[str] = field(default_factory=list)
    inet6: list[str] = field(default_factory=list)
    media: str | None = None
    status: str | None = None


_IF_HEAD = re.compile(r"^([A-Za-z][\w.]*): flags=[0-9a-f]+<([^>]*)>.*?\bmtu (\d+)")
_BITS = re.compile(r"^(options|capabilities)=[0-9a-f]+<([^>]*)>")


def parse_ifconfig(text: str) -> dict[str, FreebsdIf]:
    out: dict[str, FreebsdIf] = {}
    cur: FreebsdIf | None = None
    for raw in text.splitlines():
        m = _IF_HEAD.match(raw)
        if m:
            cur = FreebsdIf(m.group(1), [f for f in m.group(2).split(",") if f], int(m.group(3)))
            out[cur.name] = cur
            continue
        line = raw.strip()
        if cur is None or not line:
            continue
        b = _BITS.match(line)
        if b:
            setattr(cur, b.group(1), [x for x in b.group(2).split(",") if x])
        elif line.startswith("ether "):
            cur.ether = line.split()[1]
        elif line.startswith("inet "):
            cur.inet.append(line.split()[1])
        elif line.startswith("inet6 "):
            cur.inet6.append(line.split()[1].split("%")[0])
        elif line.startswith("media:"):
            cur.media = line[len("media:"):].strip()
        elif line.startswith("status:"):
            cur.status = line[len("status:"):].strip()
        # (-v also prints the SFP module: plugged/vendor/PN/SN lines; not read until a recorded output with a
        # traceable source tests it -- tests/fixtures/SOURCES.md)
    if not out:
        raise ToolError("ifconfig printed no interface", where="ifconfig")
    return out


# -- pciconf ------------------------------------------------------------------

@dataclass
class PciDevice:
    name: str                    # driver + unit ("t6nex0"), or "noneN" without a driver
    selector: str                # pci0:2:0:4
    class_code: str              # 0x020000
    vendor_id: str | None = None
    device_id: str | None = None
    vendor: str | None = None
    device: str | None = None
    class_name: str | None = None
    subclass: str | None = None
    link_width: tuple[int, int] | None = None     # (current, max) lanes
    link_speed: tuple[float, float] | None = None  # (current, max) GT/s

    @property
    def driver(self) -> str | None:
        d = self.name.rstrip("0123456789")
        return None if d == "none" else d


_PCI_HEAD = re.compile(r"^(\S+?)@(pci[\d:]+):\s+class=(0x[0-9a-f]+)(.*)$")
_PCI_KV = re.compile(r"^\s+(vendor|device|class|subclass)\s+= '?(.*?)'?$")
_PCI_LINK = re.compile(r"link x(\d+)\(x(\d+)\)(?: speed ([\d.]+)\(([\d.]+)\))?")


def parse_pciconf(text: str) -> list[PciDevice]:
    devs: list[PciDevice] = []
    for line in text.splitlines():
        m = _PCI_HEAD.match(line)
        if m:
            rest = dict(re.findall(r"(\w+)=(0x[0-9a-f]+)", m.group(4)))
            vid, did = rest.get("vendor"), rest.get("device")
            if "chip" in rest:               # old "card=0xSSSSVVVV chip=0xDDDDVVVV" form
                chip = rest["chip"][2:].zfill(8)
                did, vid = "0x" + chip[:4], "0x" + chip[4:]
            devs.append(PciDevice(m.group(1), m.group(2), m.group(3), vid, did))
            continue
        if not devs:
            continue
        d = devs[-1]
        kv = _PCI_KV.match(line)
        if kv:
            k, v = kv.groups()
            if k == "class":
                d.class_name = v
            else:
                setattr(d, k, v)
            continue
        ln = _PCI_LINK.search(line)
        if ln:
            d.link_width = (int(ln.group(1)), int(ln.group(2)))
            if ln.group(3):
                d.link_speed = (float(ln.group(3)), float(ln.group(4)))
    if not devs:
        raise ToolError("pciconf printed no device", where="pciconf")
    return devs


# -- sysctl dev.DRIVER ---------------------------------------------------------

# where each driver reports its firmware (sysctl names under dev.DRIVER.UNIT)
FIRMWARE_KEYS = ("firmware_version", "fw_version", "fw_ver")


def parse_dev_sysctl(text: str) -> dict[str, dict[str, str]]:
    """``{"t5nex.0": {"firmware": "1.25.6.0", "desc": ..., "driver": ..., ...}}``
    from ``sysctl dev.DRIVER`` output: the ``%``-attributes (desc, driver,
    location, pnpinfo, parent), the firmware version under whichever of
    FIRMWARE_KEYS the driver uses, and every other direct leaf as is."""
    out: dict[str, dict[str, str]] = {}
    for name, value in parse_sysctl(text).items():
        parts = name.split(".")
        if len(parts) < 4 or parts[0] != "dev" or not parts[2].isdigit():
            continue
        dev = out.setdefault(f"{parts[1]}.{parts[2]}", {})
        leaf = ".".join(parts[3:])
        if leaf.startswith("%"):
            dev[leaf[1:]] = value
        elif leaf in FIRMWARE_KEYS:
            dev["firmware"] = value
        else:
            dev[leaf] = value
    return out


# -- loader.conf ----------------------------------------------------------------

_LOADER = re.compile(r'^\s*([A-Za-z_][\w.%-]*)\s*=\s*(?:"([^"]*)"|(\S*))\s*(?:#.*)?$')


def parse_loader_conf(text: str, where: str = "loader.conf") -> dict[str, str]:
    """``{tunable: value}`` of a loader.conf (``name="value"`` or
    ``name=value``, ``#`` comments); a line it cannot read is an error
    naming it, never skipped silently."""
    out: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = _LOADER.match(line)
        if not m:
            raise ToolError(f"line {n} is not name=value: {line[:80]!r}", where=where)
        out[m.group(1)] = m.group(2) if m.group(2) is not None else m.group(3)
    return out


def audit_loader(conf: dict[str, str], wanted: dict[str, str], *, host: str) -> list[str]:
    """What differs between a host's loader.conf and the tunables a plan
    wants, one line each naming the host.  Loader tunables take effect only
    at boot: nicbench reports them and never writes loader.conf."""
    out = []
    for k, want in wanted.items():
        have = conf.get(k)
        if have is None:
            out.append(f"{host}: loader tunable {k} is not set in loader.conf (the plan wants {want}); "
                       "add it and reboot -- nicbench does not write loader.conf")
        elif have != want:
            out.append(f"{host}: loader tunable {k} = {have} in loader.conf, the plan wants {want} "
                       "(takes effect at the next boot)")
    return out


# -- kTLS -----------------------------------------------------------------------

# per-mode active-session gauges, sys/kern/uipc_ktls.c (kern.ipc.tls.{sw,ifnet,toe}.{cbc,gcm,chacha20})
KTLS_MODES = ("sw", "ifnet", "toe")
KTLS_CIPHERS = ("cbc", "gcm", "chacha20")


@dataclass(frozen=True)
class KtlsEvidence:
    """Which kTLS path served a point: ``ifnet`` (NIC offload), ``sw``
    (kernel software crypto), ``toe``, several, ``none`` (no kTLS session
    was set up), or ``unknown`` (the sysctls are absent: no kTLS in this
    kernel, or not readable)."""

    mode: str
    detail: str


def ktls_evidence(before: dict[str, str], during: dict[str, str]) -> KtlsEvidence:
    """From ``sysctl kern.ipc.tls`` read before a point and while it runs:
    ``kern.ipc.tls.stats.offload_total`` counts sessions set up, and the
    ``kern.ipc.tls.{sw,ifnet,toe}.*`` gauges count the sessions active in
    each mode (names from sys/kern/uipc_ktls.c)."""
    key = "kern.ipc.tls.stats.offload_total"
    if key not in before or key not in during:
        return KtlsEvidence("unknown", f"{key} is not reported: no kTLS in this kernel, or it was not read")
    try:
        setups = int(during[key]) - int(before[key])
        active = {m: sum(int(during.get(f"kern.ipc.tls.{m}.{c}", "0")) for c in KTLS_CIPHERS) for m in KTLS_MODES}
    except ValueError as e:
        raise ToolError(f"kern.ipc.tls holds a value that is not a count: {e}", where="sysctl kern.ipc.tls") from None
    used = [m for m in KTLS_MODES if active[m] > 0]
    detail = f"{setups} session(s) set up; active: " + ", ".join(f"{m} {active[m]}" for m in KTLS_MODES)
    if not used:
        return KtlsEvidence("none" if setups == 0 else "unknown",
                            detail + ("" if setups == 0 else " (sessions set up but none active when read)"))
    return KtlsEvidence(used[0] if len(used) == 1 else "+".join(used), detail)
