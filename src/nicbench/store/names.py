"""Run names and ids that are safe as one path component, one table cell and
one shell word.

A run id becomes a directory name and is printed into commands a user may
paste (``nicbench report ID``); names come from plans and ``import --name``.
So names are restricted to letters, digits and ``. _ -`` (what a plan's name
already allows), ids are built only from such names, and anything read back
from an archive written by an older nicbench is shown with its control
characters made visible.
"""

from __future__ import annotations

import re
import secrets
import time

from ..core.errors import InputError

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def check_name(name: str, where: str = "--name") -> str:
    """``name`` if it is a safe run name, else an :class:`InputError` naming the rule."""
    if not NAME.match(name):
        shown = name.encode("unicode_escape").decode("ascii")[:80]
        raise InputError(f"run name {shown!r} is not allowed", where=where,
                         hint="use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return name


def check_tag(tag: str, where: str = "--tag") -> str:
    """``tag`` if it is a safe run tag, else an :class:`InputError`.  One rule
    for every way a tag comes in (``run --tag``, ``archive add --tag``,
    ``archive tag``): a tag is printed in tables and reports and pasted into
    ``runs --tag`` commands, so it is a name: no newline, ``;``, ``$(...)`` or
    markup."""
    if not NAME.match(tag):
        shown = tag.encode("unicode_escape").decode("ascii")[:80]
        raise InputError(f"tag '{shown}' is not allowed", where=where,
                         hint="use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
    return tag


def slug(text: str, limit: int = 40) -> str:
    """``text`` reduced to the safe set (other runs of characters become one ``-``)."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip(".-_")
    s = re.sub(r"\.{2,}", ".", s)[:limit].strip(".-_")
    return s or "run"


def new_run_id(name: str, now: float | None = None) -> str:
    """``YYYYMMDD-HHMMSS-<name>-<8 hex>``: sorts by time, and 32 random bits
    make two runs of one plan started in the same second on two machines
    writing one PostgreSQL archive distinct (the archive refuses a repeat)."""
    t = time.strftime("%Y%m%d-%H%M%S", time.localtime(now if now is not None else time.time()))
    return f"{t}-{slug(name)}-{secrets.token_hex(4)}"


def is_run_id(text: str) -> bool:
    return bool(RUN_ID.match(text)) and ".." not in text


def shown(text: object, limit: int = 200) -> str:
    """A stored string for one line of a terminal: control characters escaped
    (a newline in an old run's name cannot forge a row), length bounded."""
    s = str(text)
    s = re.sub(r"[\x00-\x1f\x7f-\x9f]", lambda m: m.group(0).encode("unicode_escape").decode("ascii"), s)
    return s if len(s) <= limit else s[: limit - 1] + "…"
