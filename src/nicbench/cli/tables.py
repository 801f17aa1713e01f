"""Tables on the terminal (rich), whole whatever the width: a pipe or a file
gets the table laid out in full, a narrow terminal long lines rather than
cut ids or numbers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..report.tables import Col, table


def points_table(rows: Sequence[Mapping[str, Any]], cols: Sequence[Col], title: str | None = None) -> Table:
    """A study's point table (its view's columns over its rows), formatted as the report formats it."""
    t = Table(title=title, box=box.SIMPLE_HEAD, show_edge=False, header_style="bold", title_justify="left")
    for c in cols:
        t.add_column(c.label, justify="left" if c.left else "right")
    flagged = False
    for cells in table(rows, cols).rows:
        # a flag is a mark, not only a colour: a pipe, a file or CI's log has no red
        t.add_row(*[f"[red]{escape(c.text)} ![/red]" if c.alert else escape(c.text) for c in cells])
        flagged = flagged or any(c.alert for c in cells)
    if flagged:
        t.caption = "!: flagged (named below the table)"
        t.caption_justify = "left"
    return t


def flagged_points(rows: Sequence[Mapping[str, Any]], cols: Sequence[Col]) -> list[str]:
    """One line per flagged cell of the table: the point, the column, its
    value and why the column flags it (its title)."""
    out = []
    for r, cells in zip(rows, table(rows, cols).rows, strict=True):
        for c, cell in zip(cols, cells, strict=True):
            if cell.alert:
                why = f" ({c.title})" if c.title else ""
                out.append(f"{r.get('point', '?')}: {c.label} {cell.text}{why}")
    return out


def echo_table(t: Table, stderr: bool = False) -> None:
    con = Console(stderr=stderr)
    need = con.measure(t, options=con.options.update_width(10_000)).maximum
    if need > con.width or not con.is_terminal:
        con = Console(stderr=stderr, width=need, force_terminal=con.is_terminal)
    con.print(t)
