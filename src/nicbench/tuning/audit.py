"""Audit a tuning profile on a set of hosts, and the checks that explain results.

Guarantees:
- ``audit`` only reads (a test proves it changes nothing);
- everything wrong with a profile for a host (a pinning CPU the host lacks,
  an IRQ policy on a host without the interface) is raised before the first
  change on any host;
- ``apply`` writes every prior value to a restore file on the host *before*
  its first change (synced to disk), changes each setting and reads it back;
  a restore file already there (an earlier apply never restored) keeps its
  original priors, so apply-apply-restore still ends where it began;
- ``restore`` writes each prior value back, reads it back, and deletes the
  file only when all came back: restore after restore is harmless, and a
  crash or power loss between changes is recovered by ``nicbench tune
  restore`` from the file alone.

Scope in the embedded lab: namespace-local settings (namespaced sysctls,
ethtool on the host's veth) apply to each lab host; host-wide ones (governor,
services, tuned, IRQ affinity, sysctls a namespace only sees read-only) are
shown as "host-wide" and left alone unless ``host_wide`` is given, in which
case they are applied once, to the machine.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from ..core.errors import InputError
from ..hosts.transport import LocalTransport, Transport, host_os
from ..records import HostFacts
from . import freebsd, knobs, pinning
from .profile import Ethtool, Governor, IrqAffinity, Pinning, Profile, Rps, Service, Sysctl, Tuned, setting_id
from .types import Row, Target, TuningPlan


def _cpus_of_node(facts: HostFacts, ifname: str) -> tuple[str | None, str]:
    """The CPUs of the NIC's NUMA node, and how they were found."""
    node = facts.value(f"if.{ifname}.numa_node")
    got = facts.value("numa.cpus")
    nodes: dict[str, str] = {str(k): str(v) for k, v in got.items()} if isinstance(got, dict) else {}
    if isinstance(node, int) and f"node{node}" in nodes:
        return nodes[f"node{node}"], f"NUMA node {node} of {ifname}"
    local = facts.value(f"if.{ifname}.local_cpus")
    if isinstance(local, str):
        return local, f"{ifname}'s local CPUs (its NUMA node is not reported)"
    if "node0" in nodes:
        return nodes["node0"], f"node 0: {ifname} reports no NUMA node"
    n = facts.value("cpu.count")
    return (f"0-{int(n) - 1}" if isinstance(n, int) else None), f"all CPUs: {ifname} reports no NUMA node"


_QUEUE = re.compile(r"(rx|tx|TxRx|input|output|comp|queue|fp-|[-.]\d+$)", re.I)


def _queue_irqs(facts: HostFacts, ifname: str) -> list[tuple[str, str]]:
    irqs = facts.value(f"if.{ifname}.irqs")
    if not isinstance(irqs, list):
        return []
    pairs = [tuple(str(x).split(":", 1)) for x in irqs]
    return [(n, name) for n, name in pairs if _QUEUE.search(name)]


_STATES = ('for p in "$@"; do if [ ! -e "$p" ]; then printf "%s\\tmissing\\t\\n" "$p"; '
           'elif [ -w "$p" ]; then printf "%s\\trw\\t%s\\n" "$p" "$(cat "$p")"; '
           'else printf "%s\\tro\\t%s\\n" "$p" "$(cat "$p")"; fi; done')


def sysctl_states(t: Transport, keys: Sequence[str]) -> dict[str, tuple[str, str | None]]:
    """key -> (missing | rw | ro, value) for every sysctl key, in one command
    (an audit of a profile's sysctls costs one round trip per host, not two per key)."""
    paths = {str(knobs.path_of(k)): k for k in keys}
    if not paths:
        return {}
    r = t.run(["sh", "-c", _STATES, "x", *paths], timeout=15)
    out: dict[str, tuple[str, str | None]] = {}
    for line in r.stdout.splitlines():
        path, state, value = (line.split("\t", 2) + ["", ""])[:3]
        if path in paths:
            out[paths[path]] = (state, " ".join(value.split()) if state != "missing" else None)
    return out


def _sysctl_scope(t: Target, machine: Transport, key: str, here: dict, there: dict
                  ) -> tuple[Transport | None, str, str, str | None]:
    """(where to write, scope, why, current value) for a sysctl on this target,
    from the states read once for the target (``here``) and the machine (``there``)."""
    state, value = here.get(key, ("missing", None))
    if state == "rw":
        return t.transport, "host", "", value
    if not t.lab:
        return None, "host", ("not in this kernel" if state == "missing" else "read-only on this host"), None
    m_state, m_value = there.get(key, ("missing", None))
    if m_state == "missing":
        return None, "host", "not in this kernel", None
    return machine, "machine", "host-wide: a network namespace cannot set it", m_value


_READ = object()


def _row(t: Target, setting: str, key: str, where: Transport | None, wanted: str | None, scope: str,
         why: str = "", host_wide: bool = False, current: object = _READ) -> Row:
    """One audit row; ``current`` when the value was already read (batched), else read now."""
    host = "machine" if (scope == "machine" and t.lab) else t.host
    if where is None:
        return Row(host, setting, key, None, wanted, "unsupported", why or "not on this host", scope)
    cur = knobs.read(where, key) if current is _READ else (None if current is None else str(current))
    if cur is None:
        return Row(host, setting, key, None, wanted, "unsupported", why or "not on this host", scope)
    if wanted is None:
        return Row(host, setting, key, cur, None, "ok", why, scope)
    if knobs.same(key, cur, wanted):
        return Row(host, setting, key, cur, wanted, "ok", why, scope)
    if scope == "machine" and t.lab and not host_wide:
        return Row(host, setting, key, cur, wanted, "host-wide",
                   "host-wide: not applied in the lab (--host-wide applies it to the machine)", scope)
    return Row(host, setting, key, cur, wanted, "differs", why, scope)


def check_profile(profile: Profile, targets: Sequence[Target]) -> None:
    """Everything that makes a profile wrong for these hosts, before any change."""
    problems = []
    for t in targets:
        f = t.facts
        for s in profile.settings:
            if isinstance(s, (IrqAffinity, Ethtool, Rps)) or (isinstance(s, Pinning) and s.policy == "nic-node"):
                if not t.ifname:
                    problems.append(f"{t.host}: {setting_id(s)} needs the host's test interface, and it has none")
                elif f is not None and f.get(f"if.{t.ifname}.present") is not None \
                        and f.value(f"if.{t.ifname}.present") is None:
                    problems.append(f"{t.host}: {setting_id(s)}: no interface {t.ifname} on this host")
            if isinstance(s, Pinning) and s.cpus and f is not None and isinstance(f.value("cpu.count"), int):
                have = int(f.value("cpu.count"))  # type: ignore[arg-type]
                over = sorted(c for c in knobs.cpu_set(s.cpus) or set() if c >= have)
                if over:
                    problems.append(f"{t.host}: pinning cpus = {s.cpus!r} names CPU {over[0]}, "
                                    f"but the host has {have} (0-{have - 1})")
    if problems:
        raise InputError("; ".join(problems), where="tuning profile",
                         hint="fix the profile or the plan's hosts; nothing was changed")


def audit(profile: Profile, targets: Sequence[Target], *, machine: Transport | None = None,
          host_wide: bool = False) -> TuningPlan:
    """Read every setting on every target and the checks; change nothing."""
    check_profile(profile, targets)
    machine = machine or LocalTransport("machine")
    out = TuningPlan()
    there: dict[str, tuple[str, str | None]] = {}       # the machine's, read once
    for t in targets:
        if host_os(t.transport) == "FreeBSD":
            out.rows += freebsd.audit_rows(profile, t, out)   # sysctl, loader.conf (read only), cpuset pinning
            continue
        # in the lab, host-wide settings are the machine's: read them once, with the first host
        first = t is targets[0]
        hw = machine if t.lab else t.transport
        keys = [f"sysctl:{s.key}" for s in profile.settings if isinstance(s, Sysctl)]
        here = sysctl_states(t.transport, keys)
        if t.lab and first:
            there = sysctl_states(machine, keys)
        for s in profile.settings:
            rows: list[Row] = []
            if isinstance(s, Sysctl):
                key = f"sysctl:{s.key}"
                where, scope, why, cur = _sysctl_scope(t, machine, key, here, there)
                if scope == "machine" and t.lab and not first:
                    continue
                rows.append(_row(t, setting_id(s), key, where, str(s.value), scope, why, host_wide, cur))
            elif isinstance(s, Governor):
                if t.lab and not first:
                    continue
                cpus = _governor_cpus(hw)
                if not cpus:
                    rows.append(Row("machine" if t.lab else t.host, "governor", "governor", None, s.value,
                                    "unsupported", "no cpufreq scaling driver (usual in a VM)",
                                    "machine" if t.lab else "host"))
                rows += [_row(t, f"governor {c}", f"governor:{c}", hw, s.value, "machine" if t.lab else "host",
                              host_wide=host_wide) for c in cpus]
            elif isinstance(s, Service):
                if t.lab and not first:
                    continue
                rows.append(_row(t, setting_id(s), f"service:{s.name}", hw, s.state,
                                 "machine" if t.lab else "host", host_wide=host_wide))
            elif isinstance(s, Tuned):
                if t.lab and not first:
                    continue
                rows.append(_row(t, "tuned", "tuned", hw, s.profile, "machine" if t.lab else "host",
                                 "tuned is not installed", host_wide))
            elif isinstance(s, IrqAffinity):
                rows += _irq_rows(t, hw, host_wide)
            elif isinstance(s, Ethtool):
                rows += _ethtool_rows(t, s)
            elif isinstance(s, Rps):
                rows += _rps_rows(t, s)
            elif isinstance(s, Pinning):
                rows.append(_pin_row(t, s, out))
            out.rows += [replace(r, optional=s.optional) for r in rows]
        out.rows += _checks(t, out.pin_cpus.get(t.host))
    return out


def _governor_cpus(t: Transport) -> list[str]:
    r = t.run(["sh", "-c", "for g in /sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do "
               '[ -e "$g" ] && basename "${g%/cpufreq/*}"; done; true'], timeout=15)
    return [x for x in r.stdout.split() if x.startswith("cpu")]


def _irq_rows(t: Target, hw: Transport, host_wide: bool) -> list[Row]:
    f = t.facts
    scope = "machine" if t.lab else "host"
    if f is None or not t.ifname:
        return [Row(t.host, "irq_affinity", "irq_affinity", None, None, "unknown", "no facts about the NIC", scope)]
    irqs = _queue_irqs(f, t.ifname)
    if not irqs:
        why = f.get(f"if.{t.ifname}.irqs")
        return [Row(t.host, f"irq_affinity {t.ifname}", "irq_affinity", None, "nic-node", "unsupported",
                    f"{t.ifname} has no queue IRQs" + (f" ({why.unknown})" if why and why.unknown else ""), scope)]
    cpus, how = _cpus_of_node(f, t.ifname)
    cores = sorted(knobs.cpu_set(cpus or "") or [])
    if not cores:
        return [Row(t.host, f"irq_affinity {t.ifname}", "irq_affinity", None, "nic-node", "unknown",
                    "the NIC's CPUs are unknown", scope)]
    return [_row(t, f"irq {n} ({name})", f"irq:{n}", hw, str(cores[i % len(cores)]), scope,
                 f"one queue per core of {how}", host_wide) for i, (n, name) in enumerate(irqs)]


def _ethtool_rows(t: Target, s: Ethtool) -> list[Row]:
    rows = []
    for param, want in s.params.items():
        key = f"ethtool:{t.ifname}:{s.feature}:{param}"
        wanted = str(want)
        if want == "max":
            wanted = knobs.maximum(t.transport, key) or "max"
        r = _row(t, f"ethtool {t.ifname} {s.feature} {param}", key, t.transport, wanted, "host",
                 f"{s.feature} not supported by this driver")
        if r.status == "differs" and knobs.fixed(t.transport, key):
            r = replace(r, status="unsupported", note="fixed by the driver")
        rows.append(r)
    return rows


_RX_QUEUES = ('cd "/sys/class/net/$1/queues" 2>/dev/null || exit 0; '
              'for q in rx-*; do [ -e "$q/rps_cpus" ] && echo "$q"; done; true')


def _rps_rows(t: Target, s: Rps) -> list[Row]:
    """One row per receive queue of the test interface (its rps_cpus mask,
    and its rps_flow_cnt when the setting gives one).  Namespace-local: a lab
    host's veth queues are its own, set from inside its namespace."""
    assert t.ifname is not None                     # check_profile saw to it
    queues = t.transport.run(["sh", "-c", _RX_QUEUES, "nicbench-tune", t.ifname], timeout=15).stdout.split()
    if not queues:
        return [Row(t.host, f"rps {t.ifname}", "rps", None, s.cpus, "unsupported",
                    f"{t.ifname} has no receive queue with rps_cpus (a kernel without CONFIG_RPS?)")]
    if s.cpus == "all":
        try:
            online = knobs.cpu_set(t.transport.read_text("/sys/devices/system/cpu/online").strip())
        except OSError:
            online = None
    else:
        online = knobs.cpu_set(s.cpus)
    if not online:
        return [Row(t.host, f"rps {t.ifname}", "rps", None, s.cpus, "unknown", "the host's online CPUs are unknown")]
    mask = knobs.cpu_mask(online)
    rows = [_row(t, f"rps {t.ifname} {q}", f"rps:{t.ifname}:{q}", t.transport, mask, "host",
                 f"no rps_cpus on {q}") for q in queues]
    if s.flow_cnt is not None:
        rows += [_row(t, f"rfs {t.ifname} {q}", f"rfs:{t.ifname}:{q}", t.transport, str(s.flow_cnt), "host",
                      f"no rps_flow_cnt on {q}") for q in queues]
    return rows


def _linux_cpus(t: Target) -> tuple[str | None, str]:
    return _cpus_of_node(t.facts, t.ifname) if t.facts is not None and t.ifname else (None, "no facts about the NIC")


def _linux_launcher(t: Target, s: Pinning, cpus: str) -> tuple[list[str] | None, str]:
    if s.command == "cpuset":
        return None, 'command = "cpuset" is FreeBSD\'s: a Linux host pins with taskset or numactl'
    if not pinning.has(t, s.command):
        return None, (f"{s.command} is not installed "
                      f"(apt-get install {'numactl' if s.command == 'numactl' else 'util-linux'})")
    return (["taskset", "-c", cpus] if s.command == "taskset"
            else ["numactl", f"--physcpubind={cpus}", "--localalloc"]), ""


def _pin_row(t: Target, s: Pinning, out: TuningPlan) -> Row:
    return pinning.pin_row(t, s, out, _linux_cpus, _linux_launcher)


def _checks(t: Target, tool_cpus: str | None) -> list[Row]:
    """No change, but they explain results: NUMA, IRQ placement, PCIe link, governor."""
    f, i = t.facts, t.ifname
    if f is None or not i:
        return []
    rows = []
    node = f.get(f"if.{i}.numa_node")
    if node is not None and node.value is None:
        rows.append(Row(t.host, f"check: {i} NUMA node", "", None, None, "unknown", node.unknown or "", "check"))
    elif node is not None:
        cpus, _ = _cpus_of_node(f, i)
        if tool_cpus and cpus:
            inside = (knobs.cpu_set(tool_cpus) or set()) <= (knobs.cpu_set(cpus) or set())
            rows.append(
                Row(
                    t.host,
                    f"check: tools on {i}'s NUMA node",
                    "",
                    tool_cpus,
                    cpus,
                    "ok" if inside else "warn",
                    "" if inside else "the tools run on CPUs of another node: traffic crosses the interconnect",
                    "check",
                )
            )
        elif int(f.value("numa.nodes") or 1) > 1:  # type: ignore[arg-type]
            rows.append(
                Row(
                    t.host,
                    f"check: tools on {i}'s NUMA node",
                    "",
                    "any CPU",
                    cpus,
                    "warn",
                    "the tools are not pinned on a multi-node host: add a pinning setting",
                    "check",
                )
            )
    aff = f.value(f"if.{i}.irq_affinity")
    if isinstance(aff, dict) and tool_cpus:
        tools = knobs.cpu_set(tool_cpus) or set()
        shared = sorted(n for n, c in aff.items() if (knobs.cpu_set(str(c)) or set()) & tools)
        rows.append(
            Row(
                t.host,
                f"check: {i} IRQs on the tools' cores",
                "",
                ", ".join(shared) or "none",
                None,
                "note" if shared else "ok",
                "softirq work competes with the tools on those cores" if shared else "",
                "check",
            )
        )
    for what in ("speed", "width"):
        link = f.value(f"if.{i}.pcie.link_{what}")
        if isinstance(link, dict):
            below = str(link.get("current")) != str(link.get("max"))
            rows.append(
                Row(
                    t.host,
                    f"check: {i} PCIe link {what}",
                    "",
                    str(link.get("current")),
                    str(link.get("max")),
                    "warn" if below else "ok",
                    "below the device's maximum: the slot or a riser limits it" if below else "",
                    "check",
                )
            )
    gov = f.get("cpu.governor")
    if gov is not None:
        if gov.value is None:
            rows.append(
                Row(t.host, "check: CPU governor", "", None, "performance", "unknown", gov.unknown or "", "check")
            )
        elif gov.value != "performance":
            rows.append(
                Row(
                    t.host,
                    "check: CPU governor",
                    "",
                    str(gov.display()),
                    "performance",
                    "warn",
                    "frequency scaling adds latency and variance",
                    "check",
                )
            )
    return rows


def drift(rows: Sequence[Row], targets: Sequence[Target], *, machine: Transport | None = None) -> list[Row]:
    """The settings an apply put in force that no longer read as it left them
    (someone else changed them during the run): each with its value now.
    One command per host for the sysctls (as the audit reads them), one read
    per other setting."""
    machine = machine or LocalTransport("machine")
    by_host = {t.host: t.transport for t in targets}
    applied = [r for r in rows if r.status == "applied" and r.wanted is not None]
    out: list[Row] = []
    for host in dict.fromkeys(r.host for r in applied):
        t = by_host.get(host, machine)
        mine = [r for r in applied if r.host == host]
        states = sysctl_states(t, [r.key for r in mine if r.key.startswith("sysctl:")])
        for r in mine:
            now = states.get(r.key, ("missing", None))[1] if r.key.startswith("sysctl:") else knobs.read(t, r.key)
            if not knobs.same(r.key, now, r.wanted):
                out.append(replace(r, current=now, status="drifted",
                                   note=f"reads {now!r}, the profile set {r.wanted!r}: changed during the run"))
    return out
