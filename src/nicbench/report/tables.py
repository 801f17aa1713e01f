"""A study's point table as columns: the report's headline and detail tables
and the results table at the end of a run are the same columns of the same
rows (``StudyView.rows``, full precision), formatted by :mod:`.numbers`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .numbers import DASH, count, num

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Col:
    """One column: its heading, where its value comes from (a row key or a
    function of the row), how it is written (``num``: three significant
    figures, ``count``: whole, ``text``), a tooltip, and when to flag it."""

    label: str
    key: str | Callable[[Row], Any]
    fmt: str = "num"
    title: str | None = None
    alert: Callable[[Row], bool] | None = None
    bold: bool = False
    wrap: bool = False          # long prose (warnings) may wrap; numbers and per-host lists never do

    @property
    def left(self) -> bool:
        return self.fmt == "text"

    def value(self, row: Row) -> Any:
        return self.key(row) if callable(self.key) else row.get(self.key)

    def text(self, row: Row) -> str:
        v = self.value(row)
        if self.fmt == "count":
            return count(v)
        if self.fmt == "num":
            return num(v)
        return DASH if v is None else str(v)


@dataclass(frozen=True)
class Cell:
    text: str
    left: bool = False
    alert: bool = False
    bold: bool = False
    wrap: bool = False


@dataclass(frozen=True)
class Table:
    head: list[Col]
    rows: list[list[Cell]]


def table(rows: Sequence[Row], cols: Sequence[Col]) -> Table:
    return Table(list(cols), [[Cell(c.text(r), c.left, bool(c.alert and c.alert(r)), c.bold, c.wrap) for c in cols]
                              for r in rows])


def spread(lo_key: str, hi_key: str) -> Callable[[Row], str | None]:
    """'min–max' over repeats, or None for a single repeat (nothing to show)."""
    def get(r: Row) -> str | None:
        lo, hi = r.get(lo_key), r.get(hi_key)
        if lo is None or hi is None or lo == hi:
            return None
        return f"{num(lo)}–{num(hi)}"
    return get


def ok_failed(r: Row) -> str:
    """``ok/failed``, and ``(+N partial)`` when repeats lost some hosts but kept the survivors' data."""
    partial = r.get("repeats_partial") or 0
    return f"{r.get('repeats_ok', 0)}/{r.get('repeats_failed', 0)}" + (f" (+{partial} partial)" if partial else "")


def limit_text(r: Row) -> str | None:
    """A point's verdict (``row["verdict"]``, analysis/verdict.py) in a cell:
    ``cpu``, ``mixed: cpu / loss``, ``engine (split)`` when its repeats
    disagreed; None (a dash) for a point without one."""
    v = r.get("verdict")
    if not isinstance(v, Mapping):
        return None
    limit = str(v.get("limit"))
    if limit == "mixed":
        return f"mixed: {v.get('leading') or '?'} / {v.get('second') or '?'}"
    return limit + (" (split)" if v.get("confidence") == "split" else "")


def per_host(key: str) -> Callable[[Row], str | None]:
    """``c1 0.62 · c2 0.61`` from a {host: value} column, on one line."""
    def get(r: Row) -> str | None:
        vals = r.get(key) or {}
        return " · ".join(f"{h} {num(v)}" for h, v in vals.items()) or None
    return get
