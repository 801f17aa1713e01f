"""FreeBSD counters (pure parsers), into the structures the Linux parsers give.

- ``sysctl -n kern.cp_times``: 5 counters per CPU (user nice sys intr idle,
  sys/resource.h CPUSTATES), in statclock ticks: ``kern.clockrate``'s
  ``stathz`` per second, not USER_HZ.  FreeBSD has no iowait, softirq or
  steal states: those keys are absent (not zero) from its CpuTimes.
- ``netstat -ibdn`` / ``netstat -I IF -bdn``: one ``<Link#N>`` row per
  interface carries its counters (Ipkts Ierrs Idrop Ibytes Opkts Oerrs
  Obytes Coll [Drop]); address rows repeat per-address counts or ``-``.

The host sampler also keeps the raw text of ``netstat -s -p tcp`` and
``vmstat -i`` on FreeBSD; no parser reads them yet, because no recorded
output of either from a FreeBSD host was found to test one on.

Every parser raises only :class:`ToolError` (a layout it cannot split safely).
"""

from __future__ import annotations

import re

from ..core.errors import ToolError
from .netdev import IfCounters
from .procstat import CpuTimes

# kern.cp_times columns, in order (sys/resource.h: CP_USER CP_NICE CP_SYS CP_INTR CP_IDLE)
CP_STATES = ("user", "nice", "system", "irq", "idle")


def _strip_name(text: str, name: str) -> str:
    """``sysctl NAME`` prints ``NAME: value``; ``sysctl -n NAME`` only the value."""
    t = text.strip()
    return t[len(name) + 1:].strip() if t.startswith(name + ":") else t


def parse_cp_times(text: str) -> dict[str, CpuTimes]:
    """Per-CPU ticks ("0", "1", ...) and their sum as "all".

    The kernel prints ``kern.smp.maxid + 1`` blocks, so a CPU that is not
    running (hyper-threading disabled, ``kern.smp.disabled``) shows as a
    block of zeros -- a machine with 16 of 32 CPUs up prints 16 such blocks
    (prometheus/node_exporter#2025).  A CPU that runs has counted idle or
    busy ticks since boot: all-zero blocks are left out, not reported as
    CPUs that did nothing."""
    body = _strip_name(text, "kern.cp_times")
    try:
        vals = [int(x) for x in body.split()]
    except ValueError:
        raise ToolError(f"kern.cp_times is not a list of counters: {body[:80]!r}", where="kern.cp_times") from None
    if not vals or len(vals) % len(CP_STATES):
        raise ToolError(f"kern.cp_times has {len(vals)} counters, not a multiple of {len(CP_STATES)}",
                        where="kern.cp_times")
    out: dict[str, CpuTimes] = {}
    total = dict.fromkeys(CP_STATES, 0)
    for i in range(0, len(vals), len(CP_STATES)):
        ticks = dict(zip(CP_STATES, vals[i:i + len(CP_STATES)], strict=True))
        if not any(ticks.values()):
            continue
        out[str(i // len(CP_STATES))] = CpuTimes(str(i // len(CP_STATES)), ticks)
        for k, v in ticks.items():
            total[k] += v
    out["all"] = CpuTimes("all", total)
    return out


_RATE = re.compile(r"(\w+)\s*=\s*(\d+)")


def parse_clockrate(text: str) -> dict[str, int]:
    """``kern.clockrate: { hz = 1000, tick = 1000, profhz = 8128, stathz = 127 }``
    -> ``{"hz": 1000, "tick": 1000, "profhz": 8128, "stathz": 127}``."""
    return {k: int(v) for k, v in _RATE.findall(_strip_name(text, "kern.clockrate"))}


# netstat -i column -> /proc/net/dev-style key (sampling.netdev)
_NETSTAT_I = {"Ipkts": "rx_packets", "Ierrs": "rx_errs", "Idrop": "rx_drop", "Ibytes": "rx_bytes",
              "Opkts": "tx_packets", "Oerrs": "tx_errs", "Obytes": "tx_bytes", "Coll": "tx_colls",
              "Drop": "tx_drop"}


def parse_netstat_i(text: str) -> dict[str, IfCounters]:
    """Each interface's link-layer counters from ``netstat -ibdn`` (or
    ``-I IF -bdn``).  The counters are the last columns of a row (the
    Address column is empty for an interface without a link address), so
    rows are split from the right by the header's count.  An interface
    that is down is printed as ``name*``: the star is dropped."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    head = next((ln.split() for ln in lines if ln.split()[:1] == ["Name"]), None)
    if head is None or "Ipkts" not in head:
        raise ToolError("netstat -i output has no header with Ipkts", where="netstat -i",
                        hint="was it run with -i (or -I IF)?")
    cols = head[head.index("Ipkts"):]
    unknown = [c for c in cols if c not in _NETSTAT_I]
    if unknown:
        raise ToolError(f"netstat -i has columns nicbench does not know: {' '.join(unknown)}", where="netstat -i")
    out: dict[str, IfCounters] = {}
    for ln in lines:
        f = ln.split()
        if len(f) < 3 + len(cols) or not f[2].startswith("<Link#"):
            continue
        name = f[0].rstrip("*")
        vals: dict[str, int] = {}
        for c, v in zip(cols, f[-len(cols):], strict=True):
            if v.isdigit():
                vals[_NETSTAT_I[c]] = int(v)
            elif v != "-":
                raise ToolError(f"netstat -i: {name} {c} is {v!r}, not a count", where="netstat -i")
        out[name] = IfCounters(name, vals)
    return out
