"""Host facts from the raw text of the facts script (pure).

Every fact is a value or ``unknown`` with the reason, never a guess: a veth
has no PCI device, a VM has no cpufreq driver, a network namespace does not
see host-wide sysctls, an old kernel lacks a knob.  Keys are dotted and flat
so two hosts compare key by key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable

from ..records import Fact, FactValue, HostFacts
from ..tools.ethtool import adaptive, blocks, colon_lines, features

_SECTION = "@@nicbench-section "
_RC = "@@nicbench-rc "

# Facts that name a host or a device rather than describe how it is set up:
# they differ between any two hosts and are left out of comparisons.


def sections(raw: str) -> dict[str, tuple[str, int | None]]:
    """``{name: (text, exit code)}``; a section cut short has exit code None."""
    out: dict[str, tuple[str, int | None]] = {}
    name: str | None = None
    buf: list[str] = []
    for line in raw.splitlines():
        if line.startswith(_SECTION):
            if name is not None:
                out[name] = ("\n".join(buf).strip("\n"), None)
            name, buf = line[len(_SECTION):].strip(), []
        elif line.startswith(_RC) and name is not None:
            try:
                rc: int | None = int(line[len(_RC):].strip())
            except ValueError:
                rc = None
            out[name] = ("\n".join(buf).strip("\n"), rc)
            name, buf = None, []
        elif name is not None:
            buf.append(line)
    if name is not None:
        out[name] = ("\n".join(buf).strip("\n"), None)
    return out


class _Facts:
    """Accumulates facts; one place decides value vs unknown."""

    def __init__(self) -> None:
        self.items: dict[str, Fact] = {}

    def add(self, key: str, value: FactValue, source: str, unknown: str | None = None) -> None:
        if value is None or value == "":
            self.items[key] = Fact(key, None, unknown or "not reported", source)
        else:
            self.items[key] = Fact(key, value, None, source)

    def unknown(self, key: str, reason: str, source: str) -> None:
        self.items[key] = Fact(key, None, reason, source)


def _num(s: str) -> int | float | str:
    s = s.strip()
    try:
        return int(s)
    except ValueError:
        try:
            return float(s)
        except ValueError:
            return s


def _failure(text: str, rc: int | None, what: str) -> str:
    """Why a section gave no answer, in words."""
    low = text.lower()
    if rc is None:
        return f"{what}: the collection was cut short"
    if rc == 127 or "not found" in low:
        return f"{what}: command not installed on this host"
    if "operation not supported" in low or "not supported" in low:
        return f"{what}: not supported by this driver"
    if "no such device" in low or "!no-such-interface" in low:
        return f"{what}: no such interface on this host"
    if "permission" in low or "not permitted" in low:
        return f"{what}: permission denied (run as root)"
    last = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return f"{what}: exit {rc}" + (f" ({last[-1][:120]})" if last else "")


def _kv_lines(text: str) -> dict[str, str]:
    """``path<TAB>value`` lines keyed by the path's last component."""
    out = {}
    for line in text.splitlines():
        path, sep, val = line.partition("\t")
        if sep:
            out[path.rsplit("/", 1)[-1]] = val
    return out


# ---- one parser per section ----------------------------------------------

def _uname(f: _Facts, text: str, rc: int | None) -> None:
    parts = text.split()
    if rc != 0 or len(parts) < 3:
        for k in ("kernel", "arch"):
            f.unknown(k, _failure(text, rc, "uname"), "uname -srvm")
        return
    f.add("kernel", parts[1], "uname -r")
    f.add("arch", parts[-1], "uname -m")


def _os_release(f: _Facts, text: str, rc: int | None) -> None:
    vals = {k: v.strip().strip('"') for k, _, v in (ln.partition("=") for ln in text.splitlines()) if v}
    name = vals.get("PRETTY_NAME") or " ".join(x for x in (vals.get("NAME"), vals.get("VERSION")) if x)
    f.add("distro", name or None, "/etc/os-release", _failure(text, rc, "/etc/os-release"))


def _lscpu(f: _Facts, text: str, rc: int | None) -> dict[str, str]:
    fields: dict[str, str] = {}
    if rc == 0:
        try:
            def walk(items: Iterable[dict]) -> None:
                for it in items:
                    fields[str(it.get("field", "")).rstrip(":")] = str(it.get("data", ""))
                    walk(it.get("children") or [])
            walk(json.loads(text).get("lscpu", []))
        except (json.JSONDecodeError, AttributeError):
            fields = colon_lines(text)          # an lscpu without -J prints "Field: value"
    return fields


def _cpu(f: _Facts, secs: dict[str, tuple[str, int | None]]) -> None:
    lt, lrc = secs.get("lscpu", ("", None))
    ls = _lscpu(f, lt, lrc)
    ci = colon_lines(secs.get("cpuinfo", ("", None))[0])
    src = "lscpu" if ls else "/proc/cpuinfo"
    model = ls.get("Model name") or ci.get("model name") or ci.get("Hardware")
    f.add("cpu.model", model, src, "neither lscpu nor /proc/cpuinfo names the CPU model")
    n = ls.get("CPU(s)") or secs.get("nproc", ("", None))[0].strip()
    f.add("cpu.count", _num(n) if n else None, src if ls.get("CPU(s)") else "/proc/cpuinfo")
    for key, name in (("cpu.threads_per_core", "Thread(s) per core"), ("cpu.cores_per_socket", "Core(s) per socket"),
                      ("cpu.sockets", "Socket(s)")):
        f.add(key, _num(ls[name]) if ls.get(name) else None, "lscpu", "lscpu not available")
    if ls.get("CPU max MHz"):
        f.add("cpu.max_mhz", _num(ls["CPU max MHz"]), "lscpu")
    else:
        f.unknown("cpu.max_mhz", "lscpu reports none: no cpufreq driver, usual in a VM", "lscpu")
    f.add("cpu.mhz", _num(ci["cpu MHz"]) if ci.get("cpu MHz") else None, "/proc/cpuinfo",
          "no 'cpu MHz' line in /proc/cpuinfo")
    if ls.get("Hypervisor vendor"):
        f.add("cpu.hypervisor", ls["Hypervisor vendor"], "lscpu")
    else:
        f.add("cpu.hypervisor", "none reported" if ls else None, "lscpu", "lscpu not available")


def _meminfo(f: _Facts, text: str, rc: int | None) -> None:
    m = colon_lines(text)
    total = m.get("MemTotal", "").split()
    f.add("mem.total_bytes", int(total[0]) * 1024 if total and total[0].isdigit() else None, "/proc/meminfo",
          _failure(text, rc, "/proc/meminfo"))
    hp = m.get("HugePages_Total")
    if hp is not None:
        f.add("mem.hugepages", _num(hp), "/proc/meminfo")


def _numa(f: _Facts, text: str, rc: int | None) -> None:
    nodes = dict(ln.split("\t", 1) for ln in text.splitlines() if "\t" in ln)
    if not nodes:
        f.unknown("numa.nodes", "no /sys/devices/system/node (kernel without NUMA support)", "sysfs")
        return
    f.add("numa.nodes", len(nodes), "/sys/devices/system/node")
    f.add("numa.cpus", nodes, "/sys/devices/system/node/node*/cpulist")


def _governor(f: _Facts, text: str, rc: int | None) -> None:
    per = dict(ln.split("\t", 1) for ln in text.splitlines() if "\t" in ln)
    src = "/sys/devices/system/cpu/cpu*/cpufreq/scaling_governor"
    if not per:
        f.unknown("cpu.governor", "no cpufreq scaling driver: usual in a VM, or the firmware sets the frequency", src)
        return
    vals = sorted(set(per.values()))
    f.add("cpu.governor", vals[0] if len(vals) == 1 else
          {cpu.rsplit("/", 1)[-1]: g for cpu, g in sorted(per.items())}, src)


def _tuned(f: _Facts, text: str, rc: int | None) -> None:
    if "!not-installed" in text:
        f.unknown("tuned.profile", "tuned is not installed", "tuned-adm")
        return
    m = re.search(r"Current active profile:\s*(\S.*)", text)
    if m:
        f.add("tuned.profile", m.group(1).strip(), "tuned-adm active")
    elif text.startswith("file: "):
        f.add("tuned.profile", text[6:].strip() + " (tuned-adm not installed)", "/etc/tuned/active_profile")
    elif "no current active profile" in text.lower():
        f.add("tuned.profile", "none", "tuned-adm active")
    else:
        f.unknown("tuned.profile", _failure(text, rc, "tuned-adm active"), "tuned-adm active")


def _daemons(f: _Facts, text: str, rc: int | None) -> None:
    running = set(text.split())
    for d in ("irqbalance", "firewalld", "tuned"):
        f.add(f"service.{d}", "running" if d in running else "not running", "/proc/*/comm")


def _pktgen(f: _Facts, text: str, rc: int | None) -> None:
    """The packet generators a host has besides trafgen and nbgen: kernel
    pktgen (/proc/net/pktgen, or a module to load) and netmap (/dev/netmap +
    its pkt-gen).  Recorded, not used: the packet study's engines are nbgen
    and trafgen (see docs/packets.md)."""
    seen = dict(line.split(" ", 1) for line in text.splitlines() if " " in line)
    if not seen:
        f.unknown("packet.pktgen", _failure(text, rc, "pktgen check"), "/proc/net/pktgen")
        f.unknown("packet.netmap", _failure(text, rc, "netmap check"), "/dev/netmap")
        return
    f.add("packet.pktgen", {"loaded": "loaded (/proc/net/pktgen)", "module": "available as a module (modinfo pktgen)",
                            "absent": "absent (no /proc/net/pktgen, no module)"}.get(seen.get("pktgen", ""), "?"),
          "/proc/net/pktgen, modinfo pktgen")
    nm = "loaded (/dev/netmap)" if seen.get("netmap") == "loaded" else "absent (no /dev/netmap)"
    f.add("packet.netmap", nm + (", pkt-gen installed" if seen.get("pkt-gen") == "installed" else ", no pkt-gen"),
          "/dev/netmap, command -v pkt-gen")


def _sysctls(f: _Facts, text: str, rc: int | None) -> None:
    for line in text.splitlines():
        path, sep, val = line.partition("\t")
        if not sep or not path.startswith("/proc/sys/"):
            continue
        key = "sysctl." + path[len("/proc/sys/"):].replace("/", ".")
        if val == "!missing":
            f.unknown(key, "not in /proc/sys here: absent from this kernel, or a host-wide setting "
                      "a network namespace does not see", path)
        elif val == "!unreadable":
            f.unknown(key, "unreadable (permission)", path)
        else:
            f.add(key, _num(" ".join(val.split())), path)


def _nic(f: _Facts, i: str, text: str, rc: int | None) -> None:
    p = f"if.{i}."
    if "!no-such-interface" in text:
        f.unknown(p + "present", "no such interface on this host", f"/sys/class/net/{i}")
        return
    f.add(p + "present", True, f"/sys/class/net/{i}")
    kv = _kv_lines(text)
    src = f"/sys/class/net/{i}"
    f.add(p + "mtu", _num(kv["mtu"]) if kv.get("mtu", "!").lstrip("-").isdigit() else None, src)
    speed = kv.get("speed", "!missing")
    if speed.lstrip("-").isdigit() and int(speed) > 0:
        f.add(p + "speed_mbps", int(speed), src + "/speed")
    else:
        f.unknown(p + "speed_mbps", "the driver reports no link speed" +
                  (" (-1)" if speed == "-1" else ": link down, or a virtual device"), src + "/speed")
    for k in ("duplex", "operstate"):
        if kv.get(k, "!").startswith("!") or kv[k] == "unknown":
            f.unknown(p + k, "the driver reports none", src)
        else:
            f.add(p + k, kv[k], src)
    if kv.get("tx_queue_len", "!").isdigit():
        f.add(p + "tx_queue_len", int(kv["tx_queue_len"]), src)
    qs = kv.get("queues", "").split()
    f.add(p + "queues", {"rx": sum(q.startswith("rx-") for q in qs), "tx": sum(q.startswith("tx-") for q in qs)}
          if qs else None, src + "/queues", "no queues directory")
    dev = kv.get("device", "!virtual")
    if dev.startswith("!"):
        reason = "virtual device: no bus device behind it"
        f.add(p + "device", "virtual", src + "/device")
        for k in ("numa_node", "local_cpus", "pcie.link_speed", "pcie.link_width"):
            f.unknown(p + k, reason, src + "/device")
        return
    f.add(p + "device", dev, src + "/device")
    if "busdev" not in kv:
        for k in ("numa_node", "local_cpus", "pcie.link_speed", "pcie.link_width"):
            f.unknown(p + k, "no bus device with a NUMA node above " + dev, src + "/device")
        return
    bus = kv["busdev"]
    f.add(p + "bus", bus.rsplit("/", 1)[-1], bus)
    node = kv.get("numa_node", "!missing")
    if node.lstrip("-").isdigit() and int(node) >= 0:
        f.add(p + "numa_node", int(node), bus + "/numa_node")
    else:
        f.unknown(p + "numa_node", "the device reports -1: one NUMA node, or the platform does not expose it",
                  bus + "/numa_node")
    f.add(
        p + "local_cpus",
        kv.get("local_cpulist") if not kv.get("local_cpulist", "!").startswith("!") else None,
        bus + "/local_cpulist",
        "not reported",
    )
    for what in ("speed", "width"):
        cur, mx = kv.get(f"current_link_{what}", "!missing"), kv.get(f"max_link_{what}", "!missing")
        if cur.startswith("!") or mx.startswith("!"):
            f.unknown(f"{p}pcie.link_{what}", f"not a PCIe device, or the virtual bus reports no link {what}", bus)
        else:
            f.add(f"{p}pcie.link_{what}", {"current": cur, "max": mx}, bus)


def _irqs(f: _Facts, i: str, text: str, rc: int | None) -> None:
    p = f"if.{i}."
    present = f.items.get(p + "present")
    if present is not None and present.value is None:
        return  # no such interface: said once, under "present"
    rows = [ln.split("\t") for ln in text.splitlines() if ln.count("\t") >= 2]
    if not rows:
        reason = "no IRQs for this interface: a virtual device, or a driver that does not name them"
        f.unknown(p + "irqs", reason, "/proc/interrupts")
        f.unknown(p + "irq_affinity", reason, "/proc/irq/*/smp_affinity_list")
        return
    names = [r[2].split()[-1] if r[2].split() else "?" for r in rows]
    f.add(p + "irqs", [f"{r[0]}:{n}" for r, n in zip(rows, names, strict=False)], "/proc/interrupts")
    f.add(p + "irq_affinity", {n: r[1] for r, n in zip(rows, names, strict=False)}, "/proc/irq/*/smp_affinity_list")


def _ethtool_i(f: _Facts, i: str, text: str, rc: int | None) -> None:
    p = f"if.{i}."
    if rc != 0:
        for k in ("driver", "driver_version", "firmware"):
            f.unknown(p + k, _failure(text, rc, "ethtool -i"), "ethtool -i")
        return
    kv = colon_lines(text)
    f.add(p + "driver", kv.get("driver"), "ethtool -i")
    f.add(p + "driver_version", kv.get("version"), "ethtool -i", "the driver reports no version")
    f.add(p + "firmware", kv.get("firmware-version"), "ethtool -i", "the driver reports no firmware version")
    f.add(p + "bus_info", kv.get("bus-info"), "ethtool -i", "no bus address: a virtual device")


def _ethtool_k(f: _Facts, i: str, text: str, rc: int | None) -> None:
    p = f"if.{i}.offload."
    if rc != 0:
        f.unknown(p[:-1], _failure(text, rc, "ethtool -k"), "ethtool -k")
        return
    for k, v in features(text).items():
        f.add(p + k, v, "ethtool -k")


def _ring_or_channels(
    f: _Facts, i: str, text: str, rc: int | None, kind: str, flag: str, names: tuple[str, ...]
) -> None:
    p = f"if.{i}.{kind}."
    if rc != 0:
        f.unknown(p[:-1], _failure(text, rc, f"ethtool {flag}"), f"ethtool {flag}")
        return
    mx, cur = blocks(text)
    for name in names:
        key = name.lower().replace(" ", "_")
        c, m = cur.get(name), mx.get(name)
        if c is None or c == "n/a":
            continue
        f.add(p + key, {"current": _num(c), "max": _num(m) if m and m != "n/a" else None}, f"ethtool {flag}")


def _ethtool_c(f: _Facts, i: str, text: str, rc: int | None) -> None:
    p = f"if.{i}.coalesce."
    if rc != 0:
        f.unknown(p[:-1], _failure(text, rc, "ethtool -c"), "ethtool -c")
        return
    if adaptive(text):
        f.add(p + "adaptive", adaptive(text), "ethtool -c")
    kv = colon_lines(text)
    for k in ("rx-usecs", "rx-frames", "tx-usecs", "tx-frames"):
        if kv.get(k) and kv[k] != "n/a":
            f.add(p + k, _num(kv[k]), "ethtool -c")


_VERSION = re.compile(r"\b(\d+\.\d+(?:\.\d+)?(?:[.-][0-9A-Za-z]+)?)")


def _tool(f: _Facts, name: str, text: str, rc: int | None) -> None:
    key = f"tool.{name}"
    low = text.lower()
    if rc == 127 or "not found" in low:
        f.unknown(key, "not installed on this host", "PATH")
        return
    if name == "numactl":
        f.add(key, "installed", "numactl --show")
        return
    first = next((ln.strip() for ln in text.splitlines() if _VERSION.search(ln)), None)
    if first is None:
        f.unknown(key, _failure(text, rc, f"{name} version"), f"{name} --version")
        return
    v = _VERSION.search(first)
    f.add(key, v.group(1) if v else first, f"{name} --version")


_PER_IF: dict[str, Callable[[_Facts, str, str, int | None], None]] = {
    "nic": _nic,
    "irqs": _irqs,
    "ethtool-i": _ethtool_i,
    "ethtool-k": _ethtool_k,
    "ethtool-c": _ethtool_c,
    "ethtool-g": lambda f, i, t, rc: _ring_or_channels(f, i, t, rc, "ring", "-g", ("RX", "TX", "RX Jumbo", "RX Mini")),
    "ethtool-l": lambda f, i, t, rc: _ring_or_channels(
        f, i, t, rc, "channels", "-l", ("RX", "TX", "Other", "Combined")
    ),
}

_GLOBAL: dict[str, Callable[[_Facts, str, int | None], None]] = {
    "uname": _uname,
    "os-release": _os_release,
    "meminfo": _meminfo,
    "numa": _numa,
    "governor": _governor,
    "tuned": _tuned,
    "daemons": _daemons,
    "sysctl": _sysctls,
    "pktgen": _pktgen,
}


def parse_facts(raw: str, *, host: str, role: str, collected: float) -> HostFacts:
    secs = sections(raw)
    f = _Facts()
    if "hostname" in secs and secs["hostname"][1] == 0:
        f.add("hostname", secs["hostname"][0].strip(), "/proc/sys/kernel/hostname")
    for name, fn in _GLOBAL.items():
        if name == "meminfo":
            _cpu(f, secs)
        text, rc = secs.get(name, ("", None))
        fn(f, text, rc)
    for name, (text, rc) in secs.items():
        kind, _, arg = name.partition(" ")
        if kind in _PER_IF and arg:
            _PER_IF[kind](f, arg, text, rc)
        elif kind == "tool" and arg:
            _tool(f, arg, text, rc)
    return HostFacts(host, role, collected, tuple(f.items.values()))
