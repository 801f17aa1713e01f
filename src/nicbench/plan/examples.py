"""The example plans shipped inside the package (``nicbench/examples/``), by
name: what ``nicbench init`` writes and what error messages point to."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable

from ..core.errors import InputError
from ..core.validation import closest

DEFAULT = "quickstart"


def _dir() -> Traversable:
    return resources.files("nicbench") / "examples"


def names() -> list[str]:
    return sorted(p.name.removesuffix(".toml") for p in _dir().iterdir() if p.name.endswith(".toml"))


@dataclass(frozen=True)
class Example:
    name: str
    text: str

    @property
    def data(self) -> dict:
        return tomllib.loads(self.text)

    @property
    def study(self) -> str:
        return str((self.data.get("study") or {}).get("kind", "tcp"))

    @property
    def description(self) -> str:
        return str(self.data.get("description", ""))

    @property
    def where(self) -> str:
        hosts = self.data.get("hosts") or {}
        return "real hosts (ssh)" if any(isinstance(h, dict) and h.get("ssh") for h in hosts.values()) else "lab"


def example(name: str) -> Example:
    """An example by its name or a unique prefix of it (``seed003``)."""
    all_ = names()
    hits = [n for n in all_ if n == name] or [n for n in all_ if n.startswith(name)]
    if len(hits) != 1:
        guess = closest(name, all_)
        why = "matches several" if hits else "is not an example"
        raise InputError(f"{name!r} {why}" + (f" (did you mean {guess!r}?)" if guess and not hits else ""),
                         where="--example", hint=f"examples: {', '.join(all_)} ('nicbench init --list' says more)")
    return Example(hits[0], (_dir() / f"{hits[0]}.toml").read_text())
