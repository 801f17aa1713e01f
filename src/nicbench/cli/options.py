"""What every command shares: ``--json``, ``--store`` and how output is emitted."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ..store.runs import default_store

F = TypeVar("F", bound=Callable[..., Any])


def emit(ctx: click.Context, data: Any, text: str | None = None) -> None:
    """``data`` as JSON on stdout with ``--json``, else ``text`` (if any)."""
    if (ctx.obj or {}).get("json"):
        click.echo(json.dumps(data, indent=1, default=str))
    elif text is not None:
        click.echo(text)


def json_option(f: F) -> F:
    """``--json`` on every command (it may also be given before the command)."""
    def cb(ctx: click.Context, _param: click.Parameter, value: bool) -> bool:
        if value:
            ctx.ensure_object(dict)["json"] = True
        return value
    return click.option("--json", "json_", is_flag=True, expose_value=False, callback=cb,
                        help="Machine-readable output on stdout.")(f)


def store_option(f: F) -> F:
    return click.option("--store", type=click.Path(path_type=Path), default=None,
                        help="Result store directory (default: $NICBENCH_STORE or ./nicbench-runs).")(f)


def store_dir(store: Path | None) -> Path:
    return store or default_store()


def plan_store(store: Path | None, plan_dir: str) -> Path:
    """--store, then $NICBENCH_STORE, then the plan's [output] dir."""
    env_store = os.environ.get("NICBENCH_STORE")
    return store or (Path(env_store) if env_store else Path(plan_dir))
