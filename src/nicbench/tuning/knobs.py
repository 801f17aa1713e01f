"""Reading and writing one tunable, named by a key, through a Transport.

Keys are what restore files hold, so a restore needs no profile, only the
key and the prior value:

    sysctl:net.core.rmem_max          /proc/sys/net/core/rmem_max
    governor:cpu3                     /sys/devices/system/cpu/cpu3/cpufreq/scaling_governor
    irq:38                            /proc/irq/38/smp_affinity_list
    service:irqbalance                running | stopped (systemctl stop/start)
    tuned                             the active tuned profile (tuned-adm)
    ethtool:eth0:ring:rx              ethtool -g / -G (also channels, coalesce, offload)
    rps:eth0:rx-0                     /sys/class/net/eth0/queues/rx-0/rps_cpus (a hex CPU mask)
    rfs:eth0:rx-0                     /sys/class/net/eth0/queues/rx-0/rps_flow_cnt

Every write is read back; values compare after normalising whitespace, and
CPU lists compare as sets ("0-1" == "0,1"), CPU masks as numbers
("00000000,00000003" == "3").
"""

from __future__ import annotations

import re

from ..core.errors import ToolError, tail
from ..hosts.transport import Transport
from ..tools.ethtool import BLOCK_ROWS, OFFLOAD_NAMES, adaptive, blocks, colon_lines, features

_WRITE = 'printf "%s\\n" "$1" > "$2"'
_FLAGS = {"ring": ("-g", "-G"), "channels": ("-l", "-L"), "coalesce": ("-c", "-C"), "offload": ("-k", "-K")}


def path_of(key: str) -> str | None:
    """The file behind a file-backed key."""
    kind, _, rest = key.partition(":")
    if kind == "sysctl":
        return "/proc/sys/" + rest.replace(".", "/")
    if kind == "governor":
        return f"/sys/devices/system/cpu/{rest}/cpufreq/scaling_governor"
    if kind == "irq":
        return f"/proc/irq/{rest}/smp_affinity_list"
    if kind in ("rps", "rfs"):
        ifname, _, queue = rest.partition(":")
        return f"/sys/class/net/{ifname}/queues/{queue}/" + ("rps_cpus" if kind == "rps" else "rps_flow_cnt")
    return None


def cpu_set(text: str) -> set[int] | None:
    """``"0-3,8"`` -> {0, 1, 2, 3, 8}; None if it is not a CPU list."""
    out: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        a, _, b = part.partition("-")
        if not a.isdigit() or (b and not b.isdigit()):
            return None
        out |= set(range(int(a), int(b or a) + 1))
    return out


def cpu_mask(cpus: set[int]) -> str:
    """{0, 1} -> ``"3"``: the hex mask sysfs takes for a CPU set."""
    return format(sum(1 << c for c in cpus), "x")


def _mask(text: str) -> int | None:
    try:
        return int(text.replace(",", "").strip() or "0", 16)
    except ValueError:
        return None


def same(key: str, a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is b
    if key.startswith("irq:"):
        return cpu_set(a) == cpu_set(b)
    if key.startswith("rps:"):
        return _mask(a) is not None and _mask(a) == _mask(b)
    return " ".join(str(a).split()) == " ".join(str(b).split())


def _running(t: Transport, name: str) -> bool:
    r = t.run(["sh", "-c", 'for c in /proc/[0-9]*/comm; do read -r n < "$c" 2>/dev/null && '
               '[ "$n" = "$1" ] && exit 0; done; exit 1', "nicbench-tune", name[:15]], timeout=15)
    return r.returncode == 0


def _ethtool(t: Transport, args: list[str]) -> str:
    r = t.run(["ethtool", *args], timeout=15)
    if r.returncode != 0:
        raise ToolError(f"ethtool {' '.join(args)}: {tail(r.stderr) or tail(r.stdout) or f'exit {r.returncode}'}",
                        where=t.host)
    return r.stdout


def read(t: Transport, key: str) -> str | None:
    """The current value, or None when this host has no such tunable."""
    p = path_of(key)
    if p is not None:
        try:
            return " ".join(t.read_text(p).split())
        except OSError:
            return None
    kind, _, rest = key.partition(":")
    if kind == "service":
        return "running" if _running(t, rest) else "stopped"
    if kind == "tuned":
        r = t.run(["sh", "-c", "command -v tuned-adm >/dev/null || exit 127; tuned-adm active"], timeout=15)
        if r.returncode == 127:
            return None
        m = re.search(r"Current active profile:\s*(\S.*)", r.stdout)
        if m:
            return m.group(1).strip()          # a merged profile is "a b": keep all of it
        if "no current active profile" in (r.stdout + r.stderr).lower():
            return "none"
        return None                            # tuned-adm failed: not known, never guessed
    if kind == "ethtool":
        ifname, feature, param = rest.split(":")
        try:
            text = _ethtool(t, [_FLAGS[feature][0], ifname])
        except ToolError:
            return None
        if feature in ("ring", "channels"):
            v = blocks(text)[1].get(BLOCK_ROWS[param])
            return None if v in (None, "n/a") else v
        if feature == "offload":
            v = features(text).get(OFFLOAD_NAMES.get(param, param))
            return None if v is None else v.split()[0]
        if param.startswith("adaptive-"):
            return adaptive(text).get(param[len("adaptive-"):])
        v = colon_lines(text).get(param)
        return None if v in (None, "n/a") else v
    raise ValueError(f"unknown tunable key {key!r}")


def fixed(t: Transport, key: str) -> bool:
    """An offload the driver does not let change (``off [fixed]``)."""
    if not key.startswith("ethtool:") or ":offload:" not in key:
        return False
    ifname, _, param = key.split(":", 1)[1].split(":")
    try:
        v = features(_ethtool(t, ["-k", ifname])).get(OFFLOAD_NAMES.get(param, param), "")
    except ToolError:
        return False
    return "[fixed]" in v


def maximum(t: Transport, key: str) -> str | None:
    """The pre-set maximum of a ring or channel count."""
    ifname, feature, param = key.split(":", 1)[1].split(":")
    try:
        v = blocks(_ethtool(t, [_FLAGS[feature][0], ifname]))[0].get(BLOCK_ROWS[param])
    except ToolError:
        return None
    return None if v in (None, "n/a") else v


def write(t: Transport, key: str, value: str) -> None:
    """Set one tunable; raises ToolError with the host's own message."""
    p = path_of(key)
    kind, _, rest = key.partition(":")
    if p is not None:
        r = t.run(["sh", "-c", _WRITE, "nicbench-tune", value, p], timeout=15)
    elif kind == "service":
        r = t.run(["systemctl", "stop" if value == "stopped" else "start", rest], timeout=60)
    elif kind == "tuned":
        r = t.run(["tuned-adm", "off"] if value == "none" else ["tuned-adm", "profile", *value.split()], timeout=60)
    elif kind == "ethtool":
        ifname, feature, param = rest.split(":")
        r = t.run(["ethtool", _FLAGS[feature][1], ifname, param, value], timeout=15)
    else:
        raise ValueError(f"unknown tunable key {key!r}")
    if r.returncode != 0:
        raise ToolError(
            f"setting {key} to {value!r} failed: {tail(r.stderr) or tail(r.stdout) or f'exit {r.returncode}'}",
            where=t.host,
        )
