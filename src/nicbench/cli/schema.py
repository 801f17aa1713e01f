"""``nicbench schema``: the plan's JSON Schema, for editors and validators."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..plan.schema import plan_schema


@click.command("schema")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write it to this file instead of stdout.")
def schema(out: Path | None) -> None:
    """Print the plan's JSON Schema (draft 2020-12).

    \b
    For taplo / VS Code's Even Better TOML, save it and name it on a plan's
    first line:
      nicbench schema --out nicbench-plan.schema.json
      #:schema ./nicbench-plan.schema.json
    """
    text = json.dumps(plan_schema(), indent=1) + "\n"
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text)
        click.echo(f"wrote {out.resolve()}", err=True)
