"""Host facts as a reader sees them: the tables of a report, the facts that
differ between hosts of one role, and between two runs."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..records import HostFacts

# facts that name a host rather than describe it: never a "difference"
IDENTITY = re.compile(r"^(hostname|if\.[^.]+\.(device|bus|bus_info|irqs))$")


def differences(hosts: Iterable[HostFacts]) -> dict[str, list[str]]:
    """Per role, the fact keys whose displayed values differ between its hosts
    (identity facts such as hostname and bus address left out).  Interface
    facts compare by name: eth0 on one host with eth0 on another."""
    by_role: dict[str, list[HostFacts]] = {}
    for h in hosts:
        by_role.setdefault(h.role, []).append(h)
    out: dict[str, list[str]] = {}
    for role, hs in by_role.items():
        if len(hs) < 2:
            continue
        keys = sorted({f.key for h in hs for f in h.facts if not IDENTITY.match(f.key)})
        diff = [k for k in keys if len({_shown(h, k) for h in hs}) > 1]
        if diff:
            out[role] = diff
    return out


def _shown(h: HostFacts, key: str) -> str:
    f = h.get(key)
    return "absent" if f is None else f.display()


# The facts a report shows first: what the seeds tune and what explains a result.
SUMMARY = ("kernel", "distro", "cpu.model", "cpu.count", "numa.nodes", "mem.total_bytes", "cpu.governor",
           "tuned.profile", "service.irqbalance", "service.firewalld",
           "sysctl.net.core.rmem_max", "sysctl.net.core.wmem_max", "sysctl.net.core.optmem_max",
           "sysctl.net.core.netdev_max_backlog", "sysctl.net.core.default_qdisc", "sysctl.net.ipv4.tcp_rmem",
           "sysctl.net.ipv4.tcp_wmem", "sysctl.net.ipv4.tcp_timestamps", "sysctl.net.ipv4.tcp_congestion_control")
SUMMARY_IF = ("driver", "driver_version", "firmware", "speed_mbps", "mtu", "numa_node", "queues", "ring.rx",
              "ring.tx", "channels.combined", "channels.rx", "channels.tx", "irq_affinity",
              "offload.tcp-segmentation-offload", "offload.generic-segmentation-offload",
              "offload.generic-receive-offload", "offload.large-receive-offload")


def facts_table(hosts: Sequence[HostFacts], summary: bool = False) -> list[dict[str, Any]]:
    """Rows of ``key``, per-host display value and ``differs`` (hosts of one
    role disagree).  ``summary``: only the facts a reader checks first, plus
    every fact that differs."""
    diff = {k for keys in differences(hosts).values() for k in keys}
    keys: list[str] = []
    seen: set[str] = set()
    for h in hosts:
        for f in h.facts:
            if f.key not in seen:
                seen.add(f.key)
                keys.append(f.key)
    if summary:
        keys = [k for k in keys if k in SUMMARY or k in diff or k.startswith("tool.")
                or (k.startswith("if.") and k.split(".", 2)[-1] in SUMMARY_IF)]
    return [{"key": k, "values": {h.host: _shown(h, k) if h.get(k) else "" for h in hosts},
             "differs": k in diff} for k in keys]


def facts_section(facts: Sequence[HostFacts]) -> dict[str, Any]:
    """The report's host-facts tables and one note per fact that differs
    between hosts of the same role."""
    hosts = list(facts)
    notes = []
    for role, keys in differences(hosts).items():
        members = [h for h in hosts if h.role == role]
        for k in keys:
            vals = ", ".join(f"{h.host}={_shown(h, k)}" for h in members)
            notes.append(f"{role} hosts differ in {k}: {vals}")
    return {"hosts": [{"host": h.host, "role": h.role} for h in hosts],
            "summary": facts_table(hosts, summary=True), "all": facts_table(hosts), "notes": notes}


def fact_changes(a: Sequence[HostFacts], b: Sequence[HostFacts]) -> list[tuple[str, str, str, str]]:
    """(host, fact, value in A, value in B) for hosts both runs recorded, identity facts left out."""
    out = []
    hb = {h.host: h for h in b}
    for h in a:
        other = hb.get(h.host)
        if other is None:
            continue
        keys = list(dict.fromkeys([f.key for f in h.facts] + [f.key for f in other.facts]))
        for k in keys:
            if IDENTITY.match(k):
                continue
            fa, fb = h.get(k), other.get(k)
            va, vb = (fa.display() if fa else "absent"), (fb.display() if fb else "absent")
            if va != vb:
                out.append((h.host, k, va, vb))
    return out


def grouped_changes(changes: Sequence[tuple[str, str, str, str]]) -> list[dict[str, Any]]:
    """Each differing fact once: ``fact``, its value in A and in B, and the hosts
    where it changed that way (a kernel upgrade on four lab hosts is one line, not four)."""
    groups: dict[tuple[str, str, str], list[str]] = {}
    for host, key, va, vb in changes:
        groups.setdefault((key, va, vb), []).append(host)
    return [{"fact": k, "a": va, "b": vb, "hosts": hosts} for (k, va, vb), hosts in groups.items()]
