"""TOML text -> validated :class:`Plan`, with errors that name file and key path.

Pure but for reading files: an inventory the plan names is read by the
``read_inventory`` it is given (nicbench's own parser unless the caller
hands another: the CLI hands ``hosts.ansible.load_inventory``, which runs
ansible-inventory when it is installed).
"""

from __future__ import annotations

import io
import os
import stat
import tomllib
from collections.abc import Callable
from pathlib import Path

from ..core.errors import InputError
from ..core.validation import validate
from .inventory import Inventory, InventoryError, ignored_credentials, plan_hosts
from .inventory import load as own_inventory
from .model import Plan

MAX_PLAN_BYTES = 1 << 20      # a plan is a page of settings; a megabyte is not one

# an Ansible inventory file (or directory, or script) -> its hosts and variables
InventoryReader = Callable[[Path], Inventory]


def parse_plan(text: str, source: str = "<plan>", *, read_inventory: InventoryReader = own_inventory) -> Plan:
    """Validate plan text; raise :class:`InputError` naming ``source`` and the key.
    An ``inventory`` it names is read by ``read_inventory``; what that
    inventory said that nicbench ignores is in ``plan.warnings``."""
    if len(text) > MAX_PLAN_BYTES:
        raise InputError(f"the plan is {len(text)} bytes: more than any plan needs ({MAX_PLAN_BYTES})", where=source,
                         hint="is this the right file?")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise InputError(f"not valid TOML: {e}", where=source, hint=toml_hint(str(e))) from None
    except RecursionError:
        # a nesting bomb ([[[[...]]]] or {a={a=...}}): tomllib recurses per level
        raise InputError("nested too deeply to be a plan", where=source,
                         hint="a plan's tables and lists nest a few levels at most") from None
    warnings: list[str] = []
    if isinstance(data, dict) and data.get("inventory"):
        data, warnings = _with_inventory(data, source, read_inventory)
    plan = validate(Plan, data, source)
    plan.warnings.extend(warnings)
    return plan


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


def _with_inventory(data: dict, source: str, read_inventory: InventoryReader) -> tuple[dict, list[str]]:
    """[hosts] filled from the plan's Ansible inventory (a path relative to the
    plan), read by ``read_inventory``; and a warning per host variable
    nicbench ignores (passwords: keys and ``sudo -n`` only)."""
    base = Path(source).parent if source and not source.startswith("<") else Path.cwd()
    path = base / str(data["inventory"])
    if not path.exists():
        raise InputError("cannot read the inventory: no such file", where=f"{source}: inventory ({path})",
                         hint="give a path relative to the plan file")
    wanted = data.get("hosts") if isinstance(data.get("hosts"), dict) else None
    try:
        inv = read_inventory(path)
        hosts = plan_hosts(inv, wanted)
    except (InventoryError, ValueError, TypeError, AttributeError, RecursionError) as e:
        # a malformed inventory (a YAML list where a mapping belongs, a cycle of children ...)
        raise InputError(f"not an inventory nicbench can read: {e}", where=str(path),
                         hint="see docs/hosts.md, 'Real hosts'") from None
    return {**data, "hosts": hosts}, ignored_credentials(inv, list(hosts))


def load_plan(path: str | Path, *, read_inventory: InventoryReader = own_inventory) -> tuple[Plan, str]:
    """Read and validate a plan file; returns the plan and its exact text.
    An ``inventory`` it names is read by ``read_inventory``."""
    p = Path(path)
    try:
        text = read_plan_text(p)
    except FileNotFoundError:
        raise InputError("plan file not found", where=str(p),
                         hint="give a path to a .toml plan; 'nicbench init' writes one") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read plan: {e}", where=str(p)) from None
    return parse_plan(text, str(p), read_inventory=read_inventory), text


def read_plan_text(p: Path) -> str:
    """The text of the regular file ``p``, refused before it is read when it is
    not one (a FIFO would block the read forever, /dev/zero never ends) or is
    larger than any plan.  Opened non-blocking and checked on the open file, so
    the file checked is the file read; the read stops one byte past the limit
    in case it grew since."""
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"not a plan file: it is {_file_kind(st.st_mode)}", where=str(p),
                             hint="give the path of a .toml file")
        if st.st_size > MAX_PLAN_BYTES:
            raise InputError(f"the plan is {st.st_size} bytes: more than any plan needs ({MAX_PLAN_BYTES})",
                             where=str(p), hint="is this the right file?")
        chunks, size = [], 0
        while size <= MAX_PLAN_BYTES and (chunk := os.read(fd, MAX_PLAN_BYTES + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > MAX_PLAN_BYTES:
        raise InputError(f"the plan grew past {MAX_PLAN_BYTES} bytes while it was read", where=str(p),
                         hint="is this the right file?")
    # universal newlines, as Path.read_text gave before
    return io.TextIOWrapper(io.BytesIO(b"".join(chunks)), encoding="utf-8").read()


def _file_kind(mode: int) -> str:
    """What a non-regular file is, in words."""
    for test, word in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a regular file"
