"""A FreeBSD host's NUMA domains and their CPUs, as FreeBSD documents them.

- ``vm.ndomains`` (numa(4)): how many VM domains the kernel found (1 on a
  kernel without ``options NUMA`` or a single-socket machine);
- ``cpuset -g -d N`` (cpuset(1): "-d domain ... can only be used to query
  the cpus visible in each numbered domain"): one line ``domain N mask:
  0, 1, 2`` (bin/cpuset/cpuset.c, ``printaffinity``: which, id, level,
  ``mask:``, then the CPUs joined by ", ");
- ``dev.DRIVER.UNIT.%domain`` (bus_get_domain(9)): the domain of a device,
  present only when its bus reports one -- read from the ``sysctl
  dev.DRIVER.UNIT`` the facts already collect.

Pure parsers; no FreeBSD host has run them (see tests/fixtures/SOURCES.md).
"""

from __future__ import annotations

import re

from ..core.errors import ToolError

# printaffinity(): "%s %jd%s mask: " + the set; the domain-policy line of a
# pid/tid/jail query ("... domain policy: first-touch mask: 0") says which memory
# domains a process may use, not which CPUs: read, and kept apart
_MASK = re.compile(r"^(tid|pid|cpuset|irq|jail|domain) (-?\d+)( root| cpuset)? mask: ?([\d, ]*)$")
_POLICY = re.compile(r"^(tid|pid|cpuset|irq|jail|domain) (-?\d+)( root| cpuset)? domain policy: [\w-]+ mask: ?[\d, ]*$")


def parse_cpuset_masks(text: str, *, where: str = "cpuset -g") -> dict[str, list[int]]:
    """``{"domain 0": [0, 1, ...], "pid -1": [...]}`` from ``cpuset -g``
    output: each CPU-mask line by its target.  A line that is neither a CPU
    mask nor a domain policy is an error naming it (never skipped)."""
    out: dict[str, list[int]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or _POLICY.match(line):
            continue
        m = _MASK.match(line)
        if m is None:
            raise ToolError(f"cannot read {line!r}", where=where,
                            hint="expected 'domain N mask: 0, 1, ...' as cpuset(1) prints it")
        cpus = [int(x) for x in m.group(4).replace(",", " ").split()]
        out[f"{m.group(1)} {m.group(2)}{m.group(3) or ''}"] = cpus
    return out


def cpu_list(cpus: list[int]) -> str:
    """``[0, 1, 2, 3, 8]`` -> ``"0-3,8"``: the list form cpuset -l and taskset -c take."""
    parts: list[str] = []
    s = sorted(set(cpus))
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        parts.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(parts)


def domain_cpus(text: str, ndomains: int | None, *, where: str = "cpuset -g -d") -> dict[str, str]:
    """``{"node0": "0-11", "node1": "12-23"}`` (the Linux facts' shape) from
    the ``cpuset -g -d N`` lines of domains 0..ndomains-1; a domain missing
    from the output is an error naming it."""
    masks = parse_cpuset_masks(text, where=where)
    got = {int(k.split()[1]): v for k, v in masks.items() if k.startswith("domain ")}
    n = ndomains if ndomains is not None else len(got)
    missing = [d for d in range(n) if d not in got or not got[d]]
    if missing:
        raise ToolError(f"no CPUs listed for domain {missing[0]} of {n}", where=where,
                        hint="cpuset -g -d N prints each domain's CPUs")
    return {f"node{d}": cpu_list(got[d]) for d in range(n)}
