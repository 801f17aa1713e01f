"""Ansible inventories (INI or YAML) as nicbench hosts (pure: text in, hosts out).

A lab described for Ansible already says where each machine is and how to
log in.  nicbench takes, per host: ``ansible_host`` (address for SSH, else
the inventory name), ``ansible_user``, ``ansible_port``,
``ansible_ssh_private_key_file``, ``ansible_ssh_common_args`` (extra ssh
arguments, e.g. a ProxyCommand), ``ansible_become`` (sudo), and its own
``nicbench_interface`` (the test NIC), ``nicbench_test_ip`` (the address
the traffic uses) and ``nicbench_role``.  Roles also come from the groups
``nicbench_server`` and ``nicbench_clients``.  Variables: ``all`` first,
then groups from parent to child, then the host's own.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

import yaml


class InventoryError(ValueError):
    pass


@dataclass
class Inventory:
    hosts: dict[str, dict[str, object]] = field(default_factory=dict)     # host -> its own vars
    groups: dict[str, set[str]] = field(default_factory=dict)             # group -> hosts (direct)
    group_vars: dict[str, dict[str, object]] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)          # group -> child groups

    def members(self, group: str, _seen: frozenset[str] = frozenset()) -> set[str]:
        if group == "all":
            return set(self.hosts)
        out = set(self.groups.get(group, set()))
        for c in self.children.get(group, []):
            if c not in _seen:
                out |= self.members(c, _seen | {group})
        return out

    def _depth(self, group: str, _seen: frozenset[str] = frozenset()) -> int:
        parents = [g for g, cs in self.children.items() if group in cs and g not in _seen]
        return 1 + max((self._depth(p, _seen | {group}) for p in parents), default=0)

    def host_vars(self, host: str) -> dict[str, object]:
        """Every variable of ``host``: all, then its groups (parents first), then its own."""
        out: dict[str, object] = dict(self.group_vars.get("all", {}))
        mine = sorted((g for g in set(self.groups) | set(self.group_vars) | set(self.children)
                       if g != "all" and host in self.members(g)), key=lambda g: (self._depth(g), g))
        for g in mine:
            out.update(self.group_vars.get(g, {}))
        out.update(self.hosts.get(host, {}))
        return out

    def in_group(self, host: str, group: str) -> bool:
        return host in self.members(group)


def _value(v: str) -> object:
    low = v.lower()
    if low in ("true", "yes"):
        return True
    if low in ("false", "no"):
        return False
    try:
        return int(v)
    except ValueError:
        return v


def parse_ini(text: str) -> Inventory:
    inv = Inventory()
    section, kind = "ungrouped", "hosts"
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise InventoryError(f"line {n}: a section header needs a closing ']'")
            name = line[1:-1].strip()
            section, _, kind = name.partition(":")
            kind = kind or "hosts"
            if kind not in ("hosts", "vars", "children"):
                raise InventoryError(f"line {n}: unknown section kind :{kind}")
            inv.groups.setdefault(section, set()) if kind == "hosts" else None
            continue
        try:
            parts = shlex.split(line, comments=True)
        except ValueError as e:
            raise InventoryError(f"line {n}: {e}") from None
        if not parts:
            continue
        if kind == "vars":
            key, sep, val = line.partition("=")
            if not sep:
                raise InventoryError(f"line {n}: [{section}:vars] wants key=value")
            v = val.strip()
            if len(v) >= 2 and v[0] == v[-1] and v[0] in "'\"":
                v = v[1:-1]
            inv.group_vars.setdefault(section, {})[key.strip()] = _value(v)
        elif kind == "children":
            inv.children.setdefault(section, []).append(parts[0])
        else:
            host, *assigns = parts
            if "[" in host and ":" in host:
                raise InventoryError(f"line {n}: host ranges ({host}) are not expanded by nicbench: list the hosts")
            hv = inv.hosts.setdefault(host, {})
            for a in assigns:
                key, sep, val = a.partition("=")
                if not sep:
                    raise InventoryError(f"line {n}: host variable {a!r} is not key=value")
                hv[key] = _value(val)
            inv.groups.setdefault(section, set()).add(host)
    return inv


def parse_yaml(text: str) -> Inventory:
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as e:
        raise InventoryError(f"not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise InventoryError("a YAML inventory is a mapping of groups (all: ...)")
    inv = Inventory()

    def group(name: str, body: object) -> None:
        body = body or {}
        if not isinstance(body, dict):
            raise InventoryError(f"group {name}: want hosts/vars/children mappings")
        hosts = body.get("hosts") or {}
        if not isinstance(hosts, dict):
            raise InventoryError(f"group {name}: hosts must be a mapping (name: variables), not a list")
        for h, hv in hosts.items():
            if hv is not None and not isinstance(hv, dict):
                raise InventoryError(f"host {h}: its variables must be a mapping")
            inv.hosts.setdefault(str(h), {}).update(hv or {})
            inv.groups.setdefault(name, set()).add(str(h))
        if body.get("vars"):
            inv.group_vars.setdefault(name, {}).update(body["vars"])
        for c, cb in (body.get("children") or {}).items():
            inv.children.setdefault(name, []).append(str(c))
            group(str(c), cb)

    for name, body in data.items():
        group(str(name), body)
    return inv


def parse(text: str, name: str) -> Inventory:
    """By extension: .yml/.yaml as YAML, anything else as INI."""
    return parse_yaml(text) if name.endswith((".yml", ".yaml")) else parse_ini(text)


HOST_KEYS = {"ansible_host": "ssh", "ansible_user": "user", "ansible_port": "port",
             "ansible_ssh_private_key_file": "identity", "ansible_become": "sudo",
             "nicbench_interface": "interface", "nicbench_test_ip": "test_ip"}


def plan_hosts(inv: Inventory, wanted: dict[str, dict] | None) -> dict[str, dict]:
    """[hosts] entries for the plan: the inventory's variables under each
    plan host of the same name (the plan's own keys win), or -- with no
    [hosts] -- every inventory host that has a role."""
    names = list(wanted) if wanted else sorted(inv.hosts)
    out: dict[str, dict] = {}
    for h in names:
        own = dict((wanted or {}).get(h, {}))
        if h not in inv.hosts:
            if wanted:
                raise InventoryError(f"host {h!r} of [hosts] is not in the inventory")
            continue
        v = inv.host_vars(h)
        entry: dict = {}
        for k, key in HOST_KEYS.items():
            if k in v:
                entry[key] = v[k]
        entry.setdefault("ssh", h)
        if "ansible_ssh_common_args" in v:
            entry["ssh_args"] = shlex.split(str(v["ansible_ssh_common_args"]))
        role = v.get("nicbench_role") or ("server" if inv.in_group(h, "nicbench_server") else
                                          "client" if inv.in_group(h, "nicbench_clients") else None)
        if role:
            entry["role"] = role
        if not wanted and not role:
            continue
        entry.update(own)
        out[h] = entry
    if not out:
        raise InventoryError("no host has a role: put hosts in the groups nicbench_server / nicbench_clients, "
                             "or give them nicbench_role")
    return out
