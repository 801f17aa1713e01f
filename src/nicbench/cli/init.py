"""``nicbench init``: write a starting plan from one of the shipped examples."""

from __future__ import annotations

from pathlib import Path

import click

from ..core.errors import InputError
from ..plan.examples import DEFAULT, example, names
from .options import emit, json_option


@click.command("init")
@click.argument("path", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--example", "name", default=DEFAULT, show_default=True,
              help="Which example to start from (a name or a unique prefix; --list shows them).")
@click.option("--list", "list_", is_flag=True, help="List the examples and exit.")
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
@json_option
@click.pass_context
def init(ctx: click.Context, path: Path | None, name: str, list_: bool, force: bool) -> None:
    """Write a starting plan to PATH (default: NAME.toml here) from an example.

    The default is a short TCP study in the embedded lab; the seed examples
    replay five published NIC studies, scaled for the lab; realhosts-tcp is
    the same kind of plan for real machines over SSH.
    """
    if list_:
        exs = [example(n) for n in names()]
        emit(ctx, [{"name": e.name, "study": e.study, "where": e.where, "description": e.description} for e in exs],
             "\n".join(f"{e.name:<26} {e.study:<8} {e.where:<16} {e.description}" for e in exs))
        return
    ex = example(name)
    out = path or Path(f"{ex.name}.toml")
    if out.exists() and not force:
        raise InputError("file exists", where=str(out.resolve()), hint="give another PATH, or --force to overwrite it")
    out.write_text(ex.text)
    full = out.resolve()
    emit(ctx, {"path": str(full), "example": ex.name, "study": ex.study},
         f"wrote {full} (from the {ex.name} example: {ex.study} study, {ex.where})\n"
         f"next: edit it, then 'nicbench check {out}' and 'nicbench run {out}'")
