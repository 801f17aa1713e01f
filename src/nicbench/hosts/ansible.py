"""Ansible inventories read by Ansible itself: ``ansible-inventory -i INV
--list`` run on this machine (bounded in time, its refusal one line), its
JSON read by :func:`nicbench.plan.inventory.from_ansible_json`.

The plan stays a pure reading of files: :func:`nicbench.plan.load.load_plan`
takes an inventory reader, and the CLI hands it :func:`load_inventory`, which
asks ansible-inventory when it is installed (every inventory plugin, dynamic
inventory scripts, vault, ...) and falls back to nicbench's own parser
(:func:`nicbench.plan.inventory.load`) when it is not.  Like
``hosts/sshconfig.py`` (what ssh will do with a host), it runs a local
program about the hosts before any is contacted.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from ..plan.inventory import VARS_EXT, Inventory, InventoryError, check_yaml_size, from_ansible_json, load

_FAILED = re.compile(r"^\[WARNING\]:\s+\*\s+Failed to parse (\S+) with (\S+) plugin:\s*(.*)$", re.S)
_STARTS = ("[WARNING]", "ERROR!", "[DEPRECATION", "[ERROR]")


def _messages(stderr: str) -> list[str]:
    """Ansible's stderr as whole messages: it wraps them at 79 columns,
    breaking after a space (dropped) or a hyphen (kept: ``/work/host-`` +
    ``sampler/...``)."""
    out: list[str] = []
    for raw in stderr.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith(_STARTS) or not out:
            out.append(line)
        else:
            out[-1] += ("" if out[-1].endswith("-") else " ") + line
    return out


def ansible_error(stderr: str, path: str) -> str:
    """ansible-inventory's refusal as one line: the reason the plugin that
    fits the file gave (ini for .ini, yaml for .yml), else its ERROR line."""
    reasons: dict[str, str] = {}
    last_error = ""
    for msg in _messages(stderr):
        m = _FAILED.match(msg)
        if m:
            reasons[m.group(2)] = m.group(3)
        elif msg.startswith("ERROR!"):
            last_error = msg[len("ERROR!"):].strip()
    ext = os.path.splitext(path)[1]
    want = "yaml" if ext in (".yml", ".yaml") else "script" if os.access(path, os.X_OK) else "ini"
    why = reasons.get(want) or next(iter(reasons.values()), "") or last_error or "it failed with no message"
    return " ".join(why.split())


def run_ansible_inventory(path: str | Path, timeout: float = 60.0) -> str:
    """``ansible-inventory -i PATH --list`` (JSON text), bounded in time; an
    inventory it cannot parse is an InventoryError with its reason in one line."""
    exe = shutil.which("ansible-inventory")
    if exe is None:
        raise FileNotFoundError("ansible-inventory")
    with tempfile.TemporaryDirectory(prefix="nb-ansible-") as tmp:
        env = dict(os.environ, ANSIBLE_INVENTORY_UNPARSED_FAILED="True", ANSIBLE_NOCOLOR="1",
                   ANSIBLE_FORCE_COLOR="0", ANSIBLE_LOCAL_TEMP=tmp, ANSIBLE_RETRY_FILES_ENABLED="0",
                   COLUMNS="100000")
        try:
            r = subprocess.run([exe, "-i", str(path), "--list"], capture_output=True, text=True, env=env,
                               timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise InventoryError(f"ansible-inventory did not finish within {timeout:g}s") from None
    if r.returncode != 0:
        raise InventoryError(f"ansible-inventory refuses it: {ansible_error(r.stderr, str(path))}")
    return r.stdout


def ansible_yaml_files(path: Path) -> list[Path]:
    """The YAML files ansible-inventory would read for a file inventory (the
    file itself and everything under group_vars/ and host_vars/ beside it),
    to check for alias bombs before Ansible expands them."""
    out = [path] if path.suffix in (".yml", ".yaml") else []
    for kind in ("group_vars", "host_vars"):
        base = path.parent / kind
        if base.is_dir():
            for root, _, files in os.walk(base):
                out += [Path(root) / f for f in sorted(files)
                        if not f.startswith(".") and os.path.splitext(f)[1] in VARS_EXT]
    return out


def load_inventory(path: str | Path, *, use_ansible: bool | None = None, timeout: float = 60.0) -> Inventory:
    """The inventory at ``path`` as Ansible reads it: through ansible-inventory
    when it is installed (``use_ansible=None``) or asked for (True), else
    nicbench's own parser.  ``Inventory.source`` says which."""
    p = Path(path)
    if not p.exists():
        raise InventoryError(f"{p} does not exist")
    if use_ansible is None:
        use_ansible = shutil.which("ansible-inventory") is not None
    if not use_ansible:
        return load(p)
    if p.is_file():
        for f in ansible_yaml_files(p):
            check_yaml_size(f.read_text(), str(f))
    return from_ansible_json(run_ansible_inventory(p, timeout))
