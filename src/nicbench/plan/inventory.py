"""Ansible inventories as nicbench hosts.

A lab described for Ansible already says where each machine is and how to
log in.  nicbench takes, per host: ``ansible_host`` (address for SSH, else
the inventory name), ``ansible_user``, ``ansible_port``,
``ansible_ssh_private_key_file``, ``ansible_ssh_common_args`` (extra ssh
arguments, e.g. a ProxyCommand), ``ansible_become`` (sudo), and its own
``nicbench_interface`` (the test NIC), ``nicbench_test_ip`` (the address
the traffic uses) and ``nicbench_role``.  Roles also come from the groups
``nicbench_server`` and ``nicbench_clients``.

The source of truth is Ansible itself: ``nicbench.hosts.ansible`` runs
``ansible-inventory -i INV --list`` when it is installed (every inventory
plugin, dynamic inventory scripts, vault, ...) and its JSON is read here
(:func:`from_ansible_json`).  Without it, nicbench's own parser
(:func:`load`) reads INI and YAML inventories the way Ansible's ``ini`` and ``yaml``
plugins do -- host ranges (``dut[2:3]``, ``gen[01:10:2]``, ``db-[a:c]``),
``host:port``, children, ``group_vars/`` and ``host_vars/`` next to the
inventory -- with Ansible's precedence: the ``all`` group's vars, then each
group's by depth (parents first, then ``ansible_group_priority``, then
name), then ``group_vars/all``, then ``group_vars/<group>`` in the same
order, then the host's own, then ``host_vars/<host>``.  The shared fixtures
in tests/fixtures/inventory are read both ways and must agree.

Passwords in an inventory (``ansible_password``, ``ansible_become_password``
...) are never used: nicbench logs in with keys and ``sudo -n``; they are
reported as ignored.  YAML with more aliases than a real inventory needs (a
"billion laughs" bomb) is refused before anything expands it.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml


class InventoryError(ValueError):
    pass


# -- YAML, bounded ----------------------------------------------------------------

MAX_YAML_NODES = 100_000          # nodes of the document with every alias expanded
MAX_FILE_BYTES = 8 << 20


def check_yaml_size(text: str, where: str) -> None:
    """Refuse YAML whose document, aliases expanded, would have more than
    MAX_YAML_NODES nodes (or an alias that contains itself): a few kilobytes
    of nested aliases can stand for billions of nodes, which a consumer
    walking or copying the data (Ansible's variable merging included) would
    expand.  Only composes the node graph (aliases stay shared), so it takes
    time linear in the text, and any tag (Ansible's ``!vault``) is fine."""
    if len(text) > MAX_FILE_BYTES:
        raise InventoryError(f"{where}: {len(text)} bytes is too large for an inventory")
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as e:
        raise InventoryError(f"{where}: not valid YAML: {' '.join(str(e).split())}") from None
    sizes: dict[int, int] = {}

    def size(node: yaml.Node, active: frozenset[int]) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in active:
            raise InventoryError(f"{where}: a YAML alias refers to itself")
        n = 1
        kids: list[yaml.Node] = []
        if isinstance(node, yaml.SequenceNode):
            kids = list(node.value)
        elif isinstance(node, yaml.MappingNode):
            kids = [x for kv in node.value for x in kv]
        for child in kids:
            n += size(child, active | {key})
            if n > MAX_YAML_NODES:
                break
        sizes[key] = n
        return n

    total = sum(size(n, frozenset()) for n in nodes if n is not None)
    if total > MAX_YAML_NODES:
        raise InventoryError(f"{where}: its YAML aliases expand to more than {MAX_YAML_NODES} nodes "
                             "(an alias bomb?): refused")
    if len(nodes) > 1:
        raise InventoryError(f"{where}: more than one YAML document")


def safe_yaml(text: str, where: str) -> object:
    """``yaml.safe_load`` after :func:`check_yaml_size`."""
    check_yaml_size(text, where)
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InventoryError(f"{where}: not valid YAML: {' '.join(str(e).split())}") from None


# -- the model ---------------------------------------------------------------------

@dataclass
class Inventory:
    hosts: dict[str, dict[str, object]] = field(default_factory=dict)     # host -> its own vars (inventory)
    groups: dict[str, set[str]] = field(default_factory=dict)             # group -> hosts (direct)
    group_vars: dict[str, dict[str, object]] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)          # group -> child groups
    priority: dict[str, int] = field(default_factory=dict)                # ansible_group_priority (default 1)
    file_group_vars: dict[str, dict[str, object]] = field(default_factory=dict)   # group_vars/<group>
    file_host_vars: dict[str, dict[str, object]] = field(default_factory=dict)    # host_vars/<host>
    source: str = "nicbench"                                              # who read it

    def members(self, group: str, _seen: frozenset[str] = frozenset()) -> set[str]:
        if group == "all":
            return set(self.hosts)
        out = set(self.groups.get(group, set()))
        for c in self.children.get(group, []):
            if c not in _seen:
                out |= self.members(c, _seen | {group})
        return out

    def _parents(self, group: str) -> list[str]:
        return [g for g, cs in self.children.items() if group in cs]

    def depth(self, group: str, _seen: frozenset[str] = frozenset()) -> int:
        """Ansible's group depth: ``all`` 0, a top-level group 1, a child one more than its deepest parent."""
        if group == "all":
            return 0
        parents = [p for p in self._parents(group) if p not in _seen and p != "all"]
        return 1 + max((self.depth(p, _seen | {group}) for p in parents), default=0)

    def _known_groups(self) -> set[str]:
        return set(self.groups) | set(self.group_vars) | set(self.children) | set(self.priority)

    def host_groups(self, host: str) -> list[str]:
        """Every group of ``host`` but ``all``, sorted as Ansible merges them."""
        mine = [g for g in self._known_groups() if g != "all" and host in self.members(g)]
        if not mine and host in self.hosts:
            mine = ["ungrouped"]
        return sorted(mine, key=lambda g: (self.depth(g), self.priority.get(g, 1), g))

    def host_vars(self, host: str) -> dict[str, object]:
        """Every variable of ``host``, merged in Ansible's order (module docstring)."""
        groups = self.host_groups(host)
        layers = [self.group_vars.get("all", {}), *(self.group_vars.get(g, {}) for g in groups),
                  self.file_group_vars.get("all", {}), *(self.file_group_vars.get(g, {}) for g in groups),
                  self.hosts.get(host, {}), self.file_host_vars.get(host, {})]
        out: dict[str, object] = {}
        for layer in layers:
            out.update(layer)
        return out

    def in_group(self, host: str, group: str) -> bool:
        return host in self.members(group)

    def add_child(self, parent: str, child: str) -> None:
        """``child`` under ``parent``; a loop is an error, as in Ansible."""
        if child == parent or parent in self._descendants(child):
            raise InventoryError(f"adding group {child!r} as child to {parent!r} creates a recursive dependency loop")
        kids = self.children.setdefault(parent, [])
        if child not in kids:
            kids.append(child)

    def _descendants(self, group: str) -> set[str]:
        out: set[str] = set()
        todo = list(self.children.get(group, []))
        while todo:
            g = todo.pop()
            if g not in out:
                out.add(g)
                todo.extend(self.children.get(g, []))
        return out


def _set_var(d: dict[str, object], key: str, value: object) -> None:
    """As Ansible's set_variable: a mapping set over a mapping is merged one level."""
    old = d.get(key)
    d[key] = {**old, **value} if isinstance(old, dict) and isinstance(value, dict) else value


def _set_group_var(inv: Inventory, group: str, key: str, value: object, where: str) -> None:
    if key == "ansible_group_priority":          # Ansible keeps it as the group's sort key, not a var
        try:
            inv.priority[group] = int(value)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            raise InventoryError(f"{where}: ansible_group_priority of {group} is not a number: {value!r}") from None
        return
    _set_var(inv.group_vars.setdefault(group, {}), key, value)


# -- host patterns ----------------------------------------------------------------

_V6_PORT = re.compile(r"^\[([0-9A-Fa-f:.%]+)\](?::(\d+))?$")
_NAME_PORT = re.compile(r"^([^:\[\]]+|[^:]*\[[^\]]*\][^:]*):(\d+)$")


def expand_hosts(pattern: str, where: str = "") -> tuple[list[str], int | None]:
    """A host pattern as Ansible expands it: ``host``, ``host:port``,
    ``[v6addr]:port`` and ranges ``[begin:end]`` / ``[begin:end:step]``
    (numbers, zero-padded when begin is, or letters), several per name."""
    port = None
    m = _V6_PORT.match(pattern)
    if m:
        return [m.group(1)], int(m.group(2)) if m.group(2) else None
    if pattern.endswith(":"):
        raise InventoryError(f"{where}invalid host pattern {pattern!r}: ending in ':' is not allowed")
    m = _NAME_PORT.match(pattern)
    if m:
        pattern, port = m.group(1), int(m.group(2))
    return (_expand_range(pattern, where) if "[" in pattern else [pattern]), port


def _expand_range(name: str, where: str) -> list[str]:
    head, sep, rest = name.partition("[")
    rng, sep2, tail = rest.partition("]")
    if not sep2:
        raise InventoryError(f"{where}host range in {name!r} has no closing ']'")
    bounds = rng.split(":")
    if len(bounds) not in (2, 3):
        raise InventoryError(f"{where}host range [{rng}] must be begin:end or begin:end:step")
    beg, end = bounds[0] or "0", bounds[1]
    if not end:
        raise InventoryError(f"{where}host range [{rng}] must give its end")
    try:
        step = int(bounds[2]) if len(bounds) == 3 else 1
    except ValueError:
        raise InventoryError(f"{where}host range [{rng}]: the step is not a number") from None
    if step < 1:
        raise InventoryError(f"{where}host range [{rng}]: the step must be at least 1")
    fill: Callable[[object], str] = str
    if beg[0] == "0" and len(beg) > 1:
        if len(beg) != len(end):
            raise InventoryError(f"{where}host range [{rng}] must give begin and end with equal widths")
        width = len(beg)

        def fill(x: object) -> str:
            return str(x).zfill(width)
    seq: list[object]
    if beg in string.ascii_letters and end in string.ascii_letters:
        i, j = string.ascii_letters.index(beg), string.ascii_letters.index(end)
        if i > j:
            raise InventoryError(f"{where}host range [{rng}] must have begin <= end")
        seq = list(string.ascii_letters[i:j + 1:step])
    else:
        try:
            seq = list(range(int(beg), int(end) + 1, step))
        except ValueError:
            raise InventoryError(f"{where}host range [{rng}] is neither numbers nor letters") from None
    if len(seq) > 100_000:
        raise InventoryError(f"{where}host range [{rng}] names {len(seq)} hosts")
    out: list[str] = []
    for x in seq:
        n = f"{head}{fill(x)}{tail}"
        out.extend(_expand_range(n, where) if "[" in n else [n])
    return out


# -- INI ---------------------------------------------------------------------------

def _value(v: str) -> object:
    """An INI value as Ansible's ini plugin reads it: a Python literal when it
    is one (``2222``, ``0.5``, ``[1, 2]``, ``'quoted'``, ``True``), else the text
    (``true``, ``yes`` and ``-o ProxyJump=x`` stay strings)."""
    try:
        return ast.literal_eval(v)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return v


_SECTION = re.compile(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$")


def parse_ini(text: str, name: str = "inventory") -> Inventory:
    inv = Inventory()
    section, kind = "ungrouped", "hosts"
    declared = {"all", "ungrouped"}
    # a [g:vars] or a child named before g's own section: an error unless it comes later (as in Ansible)
    pending: dict[str, str] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        where = f"line {n}: "
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            m = _SECTION.match(line)
            if not m:
                raise InventoryError(f"{where}invalid section entry {line!r}")
            section, kind = m.group(1), m.group(2) or "hosts"
            if kind not in ("hosts", "vars", "children"):
                raise InventoryError(f"{where}section [{section}] has unknown type: {kind}")
            if kind == "vars":
                if section not in declared:
                    pending.setdefault(section, f"line {n}: section [{section}:vars] not valid for undefined "
                                                f"group: {section}")
            else:
                inv.groups.setdefault(section, set())
                declared.add(section)
                pending.pop(section, None)
            continue
        if kind == "vars":
            key, sep, val = line.partition("=")
            if not sep:
                raise InventoryError(f"{where}[{section}:vars] wants key=value, got {line!r}")
            _set_group_var(inv, section, key.strip(), _value(val.strip()), where.rstrip(": "))
            continue
        try:
            parts = shlex.split(line, comments=True)
        except ValueError as e:
            raise InventoryError(f"{where}{e}") from None
        if not parts:
            continue
        if kind == "children":
            if len(parts) != 1 or ":" in parts[0]:
                raise InventoryError(f"{where}{line!r} is not a valid group name")
            child = parts[0]
            if child not in declared:
                pending.setdefault(child, f"line {n}: section [{section}:children] includes undefined group: {child}")
            inv.groups.setdefault(child, set())
            inv.add_child(section, child)
            continue
        hosts, port = expand_hosts(parts[0], where)
        assigns: dict[str, object] = {}
        for a in parts[1:]:
            key, sep, val = a.partition("=")
            if not sep:
                raise InventoryError(f"{where}expected key=value host variable assignment, got: {a}")
            assigns[key] = _value(val)
        for h in hosts:
            hv = inv.hosts.setdefault(h, {})
            if port is not None:
                hv["ansible_port"] = port
            for k, v in assigns.items():
                _set_var(hv, k, v)
            inv.groups.setdefault(section, set()).add(h)
    if pending:
        raise InventoryError(next(iter(pending.values())))
    return inv


# -- YAML --------------------------------------------------------------------------

def parse_yaml(text: str, name: str = "inventory.yml") -> Inventory:
    data = safe_yaml(text, name) or {}
    if not isinstance(data, dict):
        raise InventoryError("a YAML inventory is a mapping of groups (all: ...)")
    if "plugin" in data:
        raise InventoryError(f"{name} configures the inventory plugin {data['plugin']!r}: only ansible-inventory "
                             "can run it (install ansible-core)")
    inv = Inventory()

    def group(gname: str, body: object) -> str:
        if body is not None and not isinstance(body, dict):
            raise InventoryError(f"group {gname}: want hosts/vars/children mappings")
        inv.groups.setdefault(gname, set())
        body = dict(body or {})
        for section in ("vars", "children", "hosts"):
            if isinstance(body.get(section), str):
                body[section] = {body[section]: None}
            if section in body and not isinstance(body[section], dict | None):
                raise InventoryError(f"group {gname}: {section} must be a mapping "
                                     f"({'name: variables' if section == 'hosts' else 'name: ...'}), "
                                     f"not a {type(body[section]).__name__}")
        for key, val in body.items():
            if not val:
                continue
            if key == "vars":
                for k, v in val.items():
                    _set_group_var(inv, gname, str(k), v, f"group {gname}")
            elif key == "children":
                for c, cb in val.items():
                    inv.add_child(gname, group(str(c), cb))
            elif key == "hosts":
                for pattern, hv in val.items():
                    if hv is not None and not isinstance(hv, dict):
                        raise InventoryError(f"host {pattern}: its variables must be a mapping")
                    hosts, port = expand_hosts(str(pattern), f"group {gname}: ")
                    for h in hosts:
                        own = inv.hosts.setdefault(h, {})
                        if port is not None:
                            own["ansible_port"] = port
                        for k, v in (hv or {}).items():
                            _set_var(own, str(k), v)
                        inv.groups[gname].add(h)
        return gname

    for gname, body in data.items():
        top = group(str(gname), body)
        if top != "all":
            inv.add_child("all", top)
    return inv


def parse(text: str, name: str) -> Inventory:
    """By extension: .yml/.yaml as YAML, anything else as INI."""
    return parse_yaml(text, name) if name.endswith((".yml", ".yaml")) else parse_ini(text, name)


# -- group_vars/ and host_vars/ ------------------------------------------------------

VARS_EXT = ("", ".yml", ".yaml", ".json")


def _vars_files(base: Path, name: str) -> list[Path]:
    """What Ansible's host_group_vars plugin reads for ``name`` under ``base``:
    ``name``, ``name.yml``, ``name.yaml``, ``name.json``, and every such file
    in a directory ``name/`` (recursively, sorted; hidden and ``~`` files skipped)."""
    out: list[Path] = []
    for ext in VARS_EXT:
        p = base / f"{name}{ext}"
        if p.is_file():
            out.append(p)
    d = base / name
    if d.is_dir():
        for root, dirs, files in os.walk(d):
            dirs[:] = sorted(x for x in dirs if not x.startswith("."))
            for f in sorted(files):
                if f.startswith(".") or f.endswith("~") or os.path.splitext(f)[1] not in VARS_EXT:
                    continue
                out.append(Path(root) / f)
    return out


def _read_vars(files: list[Path]) -> dict[str, object]:
    out: dict[str, object] = {}
    for f in files:
        data = safe_yaml(f.read_text(), str(f))
        if data is None:
            continue
        if not isinstance(data, dict):
            raise InventoryError(f"{f}: variables must be a mapping, not a {type(data).__name__}")
        out.update({str(k): v for k, v in data.items()})
    return out


def load(path: str | Path) -> Inventory:
    """nicbench's own reading of an inventory file and the ``group_vars/``
    and ``host_vars/`` directories beside it (the fallback without Ansible)."""
    p = Path(path)
    if p.is_dir():
        raise InventoryError(f"{p} is a directory: an inventory directory needs ansible-inventory "
                             "(install ansible-core), or give one file")
    if os.access(p, os.X_OK) and p.read_bytes()[:2] == b"#!":
        raise InventoryError(f"{p} is a dynamic inventory script: only ansible-inventory runs those "
                             "(install ansible-core)")
    inv = parse(p.read_text(), p.name)
    for kind, names, into in (("group_vars", {"all", "ungrouped", *inv._known_groups()}, inv.file_group_vars),
                              ("host_vars", set(inv.hosts), inv.file_host_vars)):
        base = p.parent / kind
        if base.is_dir():
            for name in sorted(names):
                files = _vars_files(base, name)
                if files:
                    into[name] = _read_vars(files)
    return inv


# -- what Ansible printed ------------------------------------------------------------

def from_ansible_json(text: str) -> Inventory:
    """``ansible-inventory --list`` JSON (pure): each host's variables are
    already merged by Ansible, so they become the host's own."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InventoryError(f"ansible-inventory printed no JSON: {e}") from None
    if not isinstance(data, dict):
        raise InventoryError("ansible-inventory printed JSON that is not a mapping of groups")
    inv = Inventory(source="ansible-inventory")
    hostvars = (data.get("_meta") or {}).get("hostvars") or {}
    for g, body in data.items():
        if g == "_meta" or not isinstance(body, dict):
            continue
        inv.groups.setdefault(g, set()).update(body.get("hosts") or [])
        for c in body.get("children") or []:
            inv.children.setdefault(g, []).append(c)
        if body.get("vars"):                    # only with --export
            inv.group_vars[g] = dict(body["vars"])
    for hosts in inv.groups.values():
        for h in hosts:
            inv.hosts.setdefault(h, dict(hostvars.get(h) or {}))
    return inv


# -- plan hosts ----------------------------------------------------------------------

HOST_KEYS = {"ansible_host": "ssh", "ansible_user": "user", "ansible_port": "port",
             "ansible_ssh_private_key_file": "identity", "ansible_become": "sudo",
             "nicbench_interface": "interface", "nicbench_test_ip": "test_ip"}

# what Ansible accepts as true/false (ansible.module_utils.parsing.convert_bool)
_TRUE = {"y", "yes", "on", "1", "true", "t"}
_FALSE = {"n", "no", "off", "0", "false", "f", ""}

# variables that carry a secret nicbench will not use
CREDENTIAL_KEYS = ("ansible_password", "ansible_ssh_pass", "ansible_ssh_password", "ansible_become_password",
                   "ansible_become_pass", "ansible_sudo_pass", "ansible_sudo_password", "ansible_su_pass",
                   "ansible_ssh_private_key_passphrase", "ansible_httpapi_pass", "ansible_winrm_password")


def _bool(v: object, host: str, key: str) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    raise InventoryError(f"host {host}: {key} = {v!r} is neither true nor false")


def _typed(host: str, k: str, v: object) -> object:
    if k == "ansible_become":
        return _bool(v, host, k)
    if k == "ansible_port":
        try:
            return int(v)  # type: ignore[call-overload]
        except (TypeError, ValueError):
            raise InventoryError(f"host {host}: ansible_port = {v!r} is not a port number") from None
    return v


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
                entry[key] = _typed(h, k, v[k])
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


def ignored_credentials(inv: Inventory, hosts: list[str]) -> list[str]:
    """One warning per host that carries a password variable: nicbench never
    uses it (keys and ``sudo -n`` only), and says so rather than ignore it silently."""
    out = []
    for h in hosts:
        keys = [k for k in CREDENTIAL_KEYS if k in inv.host_vars(h)]
        if keys:
            out.append(f"{h}: {', '.join(keys)} in the inventory {'is' if len(keys) == 1 else 'are'} ignored: "
                       "nicbench logs in with SSH keys (agent or ansible_ssh_private_key_file) and uses sudo -n")
    return out
