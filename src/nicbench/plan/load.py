"""TOML text -> validated :class:`Plan`, with errors that name file and key path."""

from __future__ import annotations

import tomllib
from pathlib import Path

from ..core.errors import InputError
from ..core.validation import validate
from .inventory import InventoryError, parse, plan_hosts
from .model import Plan


def parse_plan(text: str, source: str = "<plan>") -> Plan:
    """Validate plan text; raise :class:`InputError` naming ``source`` and the key."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"not valid TOML: {e}", where=source, hint=toml_hint(str(e))) from None
    if isinstance(data, dict) and data.get("inventory"):
        data = _with_inventory(data, source)
    return validate(Plan, data, source)


# tomllib's messages (Python 3.11) -> what usually causes them
_TOML_HINTS = (
    ("Cannot overwrite a value", "a key is given twice, or a key and a table share a name: keep one"),
    ("Cannot declare", "this table appears twice: merge its keys under one [table] header"),
    ("Cannot mutate immutable namespace", "a table was already given inline ({...}): write its keys there"),
    ("Invalid value", "strings need quotes, e.g. io_sizes = [\"4K\", \"64K\"]"),
    ("Expected newline or end of document", "one key = value per line; strings need quotes, e.g. io = \"4K\""),
    ("Invalid statement", "write key = value, or a [table] header"),
    ("Unclosed array", "close the list with ]; strings in it need quotes, e.g. [\"4K\", \"64K\"]"),
)


def toml_hint(message: str) -> str:
    """A hint for a TOML syntax error, from tomllib's message."""
    for start, hint in _TOML_HINTS:
        if message.startswith(start):
            return hint
    return "see https://toml.io: key = value, strings in quotes, [table] headers"


def _with_inventory(data: dict, source: str) -> dict:
    """[hosts] filled from the plan's Ansible inventory (a path relative to the plan)."""
    base = Path(source).parent if source and not source.startswith("<") else Path.cwd()
    path = base / str(data["inventory"])
    try:
        text = path.read_text()
    except OSError as e:
        raise InputError(f"cannot read the inventory: {e.strerror or e}", where=f"{source}: inventory",
                         hint="give a path relative to the plan file") from None
    wanted = data.get("hosts") if isinstance(data.get("hosts"), dict) else None
    try:
        hosts = plan_hosts(parse(text, path.name), wanted)
    except (InventoryError, ValueError, TypeError, AttributeError, RecursionError) as e:
        # a malformed inventory (a YAML list where a mapping belongs, a cycle of children ...)
        raise InputError(f"not an inventory nicbench can read: {e}", where=str(path),
                         hint="see README, 'Hosts over SSH'") from None
    return {**data, "hosts": hosts}


def load_plan(path: str | Path) -> tuple[Plan, str]:
    """Read and validate a plan file; returns the plan and its exact text."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise InputError("plan file not found", where=str(p),
                         hint="give a path to a .toml plan; 'nicbench init' writes one") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read plan: {e}", where=str(p)) from None
    return parse_plan(text, str(p)), text
