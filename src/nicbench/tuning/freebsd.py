"""The tuning audit of a FreeBSD host: its sysctls as ``sysctl`` reports them,
and its loader tunables as ``/boot/loader.conf`` sets them.

A loader tunable (``sysctl -T``: settable only from the loader, e.g. the
seeds' ``hw.cxgbe.*``) takes effect at boot: it is audited and reported --
what the kernel runs with, what loader.conf says, what the profile wants --
and never written.  Applying a profile to a FreeBSD host is refused (before
any change on any host) unless every setting of the profile is process-scoped
(pinning): only the audit is implemented there.  Settings that exist only on
Linux (governor, services, tuned, IRQ affinity, ethtool) are reported as
unsupported on the host.

Pinning changes nothing on the host -- it is the prefix the tools are
launched under -- so it works on FreeBSD in an audit as on Linux: the tools
and nginx run under ``cpuset -l LIST`` (cpuset(1), in the base system), whatever
the profile's ``command`` (taskset and numactl are Linux's; the row says so).
``policy = "nic-node"`` takes the CPUs of the NIC's NUMA domain from the
facts (``dev.DRIVER.UNIT.%domain``, ``cpuset -g -d N``); on a host with one
domain (``vm.ndomains = 1``) every CPU is the NIC's, so all are used; on a
host with several domains whose NIC reports none, the CPUs are unknown and
the row says why (a guess would put the tools on the wrong socket).

Tested with fakes answering recorded FreeBSD outputs only; no FreeBSD host
has run it yet.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..core.errors import PreflightError, ToolError
from ..hosts.factparse_freebsd import audit_loader, parse_loader_conf
from ..hosts.transport import host_os
from . import knobs, pinning
from .profile import Pinning, Profile, Sysctl, setting_id
from .types import Row, Target, TuningPlan

# one command: each key's value, whether it is writable at run time (-W) and
# whether the loader sets it (-T); then the loader's configuration files
_READ = r'''
for k in "$@"; do
  if v=$(sysctl -n "$k" 2>/dev/null); then
    w=ro
    [ -n "$(sysctl -WN "$k" 2>/dev/null)" ] && w=rw
    [ -n "$(sysctl -TN "$k" 2>/dev/null)" ] && w="$w,loader"
    printf '%s\t%s\t%s\n' "$k" "$w" "$(printf '%s' "$v" | tr '\n\t' '  ')"
  else
    printf '%s\tmissing\t\n' "$k"
  fi
done
for f in /boot/loader.conf /boot/loader.conf.local; do
  [ -r "$f" ] || continue
  printf '@@nicbench-loader %s\n' "$f"
  cat "$f"
done
'''


def freebsd_targets(targets: Sequence[Target]) -> list[Target]:
    return [t for t in targets if host_os(t.transport) == "FreeBSD"]


def refuse_apply(targets: Sequence[Target], profile: Profile) -> None:
    """Applying a profile to a FreeBSD host is not implemented: refused before
    any change, unless the profile holds only pinning (a launch prefix: it
    changes nothing on the host, so there is nothing to apply or restore)."""
    bsd = [t.host for t in freebsd_targets(targets)]
    if bsd and not all(isinstance(s, Pinning) for s in profile.settings):
        raise PreflightError(f"applying a tuning profile to FreeBSD host(s) {', '.join(bsd)} is not supported: "
                             "nicbench only audits FreeBSD (sysctls and loader.conf)", where="tuning profile",
                             hint="use an audit_only profile for runs with FreeBSD hosts; nothing was changed")


def parse_read(text: str) -> tuple[dict[str, tuple[str, str | None]], dict[str, str], list[str]]:
    """(key -> (state, value), loader.conf tunables, problems) from :data:`_READ`'s
    output (pure).  state: ``rw``, ``ro``, ``rw,loader``, ``ro,loader`` or ``missing``."""
    states: dict[str, tuple[str, str | None]] = {}
    loader: dict[str, str] = {}
    problems: list[str] = []
    parts = text.split("@@nicbench-loader ")
    for line in parts[0].splitlines():
        key, state, value = (line.split("\t", 2) + ["", ""])[:3]
        if key and state:
            states[key] = (state, " ".join(value.split()) if state != "missing" else None)
    for chunk in parts[1:]:
        where, _, body = chunk.partition("\n")
        try:
            loader.update(parse_loader_conf(body, where=where.strip()))
        except ToolError as e:
            problems.append(e.message)
    return states, loader, problems


def audit_rows(profile: Profile, t: Target, out: TuningPlan) -> list[Row]:
    """The audit rows of a FreeBSD host (one command on it, one more for
    pinning); a pinning in force goes into ``out.pin``."""
    keys = [s.key for s in profile.settings if isinstance(s, Sysctl)]
    r = t.transport.run(["sh", "-c", _READ, "nicbench-audit", *keys], timeout=15)
    states, loader, problems = parse_read(r.stdout)
    rows: list[Row] = [Row(t.host, "loader.conf", "loader.conf", None, None, "unknown", p, "host") for p in problems]
    for s in profile.settings:
        if isinstance(s, Pinning):
            rows.append(replace(pin_row(t, s, out), optional=s.optional))
            continue
        if not isinstance(s, Sysctl):
            rows.append(Row(t.host, setting_id(s), setting_id(s), None, None, "unsupported",
                            "a Linux setting: not on a FreeBSD host", "host", s.optional))
            continue
        key, wanted = f"sysctl:{s.key}", str(s.value)
        state, cur = states.get(s.key, ("missing", None))
        if state == "missing":
            rows.append(Row(t.host, setting_id(s), key, None, wanted, "unsupported", "not in this kernel", "host",
                            s.optional))
            continue
        same = knobs.same(key, cur, wanted)
        if "loader" in state and "rw" not in state:
            in_conf = loader.get(s.key)
            if same:
                note = "loader tunable, set at boot: " + (f"loader.conf sets {in_conf}" if in_conf is not None
                                                          else "the kernel's default")
            elif knobs.same(key, in_conf, wanted):
                note = f"loader tunable: loader.conf already sets {wanted}, the running kernel has {cur}: reboot"
            else:
                note = audit_loader(loader, {s.key: wanted}, host=t.host)[0].removeprefix(f"{t.host}: ")
                if "does not write" not in note:
                    note += "; nicbench does not write loader.conf"
            rows.append(Row(t.host, setting_id(s), key, cur, wanted, "ok" if same else "differs", note, "loader",
                            s.optional))
        elif "rw" in state:
            rows.append(Row(t.host, setting_id(s), key, cur, wanted, "ok" if same else "differs", "", "host",
                            s.optional))
        else:
            rows.append(Row(t.host, setting_id(s), key, cur, wanted, "ok" if same else "unsupported",
                            "" if same else "read-only on this host", "host", s.optional))
    return rows



def nic_domain_cpus(t: Target) -> tuple[str | None, str]:
    """The CPUs of the NIC's NUMA domain (a cpuset -l list) and how they were
    found, or None and why not, from the host's facts."""
    f, i = t.facts, t.ifname
    if f is None or not i:
        return None, "no facts about the NIC"
    got = f.value("numa.cpus")
    nodes = {str(k): str(v) for k, v in got.items()} if isinstance(got, dict) else {}
    n = f.value("numa.nodes")
    dom = f.value(f"if.{i}.numa_node")
    if not nodes:
        why = f.get("numa.cpus") or f.get("numa.nodes")
        return None, "the host's NUMA domains are unknown" + (f" ({why.unknown})" if why and why.unknown else "")
    if isinstance(dom, int) and f"node{dom}" in nodes:
        return nodes[f"node{dom}"], f"NUMA domain {dom} of {i} (%domain; cpuset -g -d {dom})"
    if n == 1 and "node0" in nodes:
        return nodes["node0"], "the host's one NUMA domain (vm.ndomains = 1): every CPU is the NIC's"
    if isinstance(dom, int):
        return None, f"{i} is in NUMA domain {dom}, which cpuset -g -d does not list"
    return None, f"{i} reports no NUMA domain (no %domain) on a host with {n} domains: pin with policy = \"cpus\""


def _cpuset(t: Target, s: Pinning, cpus: str) -> tuple[list[str] | None, str]:
    if not pinning.has(t, "cpuset"):
        return None, "cpuset is not on this host's PATH (it is in FreeBSD's base system, /usr/bin/cpuset)"
    return ["cpuset", "-l", cpus], ("" if s.command == "cpuset"
                                    else f"the profile's command = \"{s.command}\" is Linux's: FreeBSD uses cpuset(1)")


def pin_row(t: Target, s: Pinning, out: TuningPlan) -> Row:
    """The pinning row of a FreeBSD host: ``cpuset -l LIST`` as the tools'
    launch prefix when the CPUs are known and cpuset runs there."""
    return pinning.pin_row(t, s, out, nic_domain_cpus, _cpuset)
