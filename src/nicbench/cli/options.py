"""What every command shares: ``--json``, ``--store`` and how output is emitted."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from click.core import ParameterSource

from ..core.errors import InputError
from ..store.runs import default_store, resolve

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
    """--store, else $NICBENCH_STORE, else ./nicbench-runs -- made absolute, so every
    message and JSON field names the store (and the run directories and reports
    under it) wherever the command was started from."""
    return (store or default_store()).expanduser().absolute()


def plan_store(store: Path | None, plan_dir: str) -> Path:
    """--store, then $NICBENCH_STORE, then the plan's [output] dir; absolute (see :func:`store_dir`)."""
    env_store = os.environ.get("NICBENCH_STORE")
    return (store or (Path(env_store) if env_store else Path(plan_dir))).expanduser().absolute()


def run_dir(store: Path | None, ref: str) -> Path:
    """The run directory RUN names (an id, an id prefix, a path or 'latest'), absolute."""
    return resolve(store_dir(store), ref).absolute()


def given(ctx: click.Context, name: str) -> bool:
    """Whether the user gave option ``name`` (on the command line or in the environment)."""
    return ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)


def flag_of(ctx: click.Context, name: str) -> str:
    opt = next((p for p in ctx.command.params if p.name == name), None)
    return opt.opts[0] if opt is not None and opt.opts else name


def refuse_unused(ctx: click.Context, name: str, applies: bool, message: str, hint: str) -> None:
    """An option the user gave that what they asked for would silently ignore is
    an error: ``message`` says what it applies to, ``hint`` the option that does."""
    if not applies and given(ctx, name):
        flag = flag_of(ctx, name)
        raise InputError(message, where=flag, hint=hint)
