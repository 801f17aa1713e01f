"""What every command shares: reading a plan, ``--json``, ``--store``, the run
filters and how output is emitted."""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource

from ..core.errors import InputError
from ..store.archive import Archive, RunFilter, parse_when
from ..store.location import StoreLocation, parse_store
from ..store.names import check_tag

if TYPE_CHECKING:     # the plan's models (pydantic) load only for commands that read a plan
    from ..plan.model import Plan

F = TypeVar("F", bound=Callable[..., Any])

STORE_HELP = ("The archive: a directory, a .sqlite file, or a postgresql:// URL "
              "(default: $NICBENCH_STORE, else $XDG_DATA_HOME/nicbench).")


WAIT_DEFAULT = 1800.0      # --wait without a value: half an hour


def wait_option(f: F) -> F:
    """``--wait [SECONDS]``: queue behind the run holding the lab or a host, up
    to SECONDS (without a value: WAIT_DEFAULT), instead of being refused at once."""
    return click.option("--wait", "wait", type=click.FloatRange(min=0), is_flag=False, flag_value=WAIT_DEFAULT,
                        default=None, metavar="[SECONDS]",
                        help=f"If another run holds the lab or one of the hosts, wait up to SECONDS for it "
                             f"(no value: {WAIT_DEFAULT:g}) instead of stopping at once.  Give it after PLAN, "
                             "or with a value.")(f)


def read_plan(path: Path) -> tuple[Plan, str]:
    """A plan file as every command reads it, and its exact text: an inventory
    it names is read by ansible-inventory when that is installed, else by
    nicbench's own parser (``hosts.ansible.load_inventory``)."""
    from ..hosts.ansible import load_inventory
    from ..plan.load import load_plan
    return load_plan(path, read_inventory=load_inventory)


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


def check_tags(_ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    """A ``--tag``/``TAG`` callback: every tag checked by the one rule
    (``store.names.check_tag``) as the command line is parsed, before the
    command does anything."""
    where = param.opts[0] if isinstance(param, click.Option) else "TAG"
    return tuple(check_tag(t, where) for t in value)


def store_option(f: F) -> F:
    return click.option("--store", default=None, metavar="PATH|URL", help=STORE_HELP)(f)


def store_location(store: str | None) -> StoreLocation:
    return parse_store(store)


def open_archive(store: str | None, create: bool = False) -> Archive:
    """The archive ``--store`` names (created only when ``create``)."""
    return Archive.open(parse_store(store), create=create)


def plan_store(store: str | None, plan_output: str | None) -> StoreLocation:
    """Where a run of a plan goes: the archive every other command reads
    (--store, else $NICBENCH_STORE, else the user's), wherever the run was
    started from.  A plan's explicit [output] dir places only the run's
    directory (``DIR/<run id>/``, relative to the working directory) when
    neither --store nor $NICBENCH_STORE is given: the catalogue records where
    it is, so ``runs``, ``report`` and ``serve`` find the run from anywhere.
    (It used to name an archive of its own, which the other commands did not
    read unless told with --store.)"""
    loc = parse_store(store)
    if store or os.environ.get("NICBENCH_STORE") or not plan_output:
        return loc
    return replace(loc, runs_root=Path(plan_output).expanduser().absolute())


def quoted(*argv: str) -> str:
    """A command a user may paste: every word shell-quoted."""
    return " ".join(shlex.quote(a) for a in argv)


def filter_options(f: F) -> F:
    """The options runs are selected by (``nicbench runs``, ``trend``, ``export``)."""
    opts = [
        click.option("--study", default=None, help="Only runs of this study (tcp, https, storage, packets, ...)."),
        click.option("--plan", "plan_name", default=None, help="Only runs of this plan name ('*' globs)."),
        click.option("--host", default=None, help="Only runs with this host ('*' globs)."),
        click.option("--kernel", default=None, help="Only runs where a host had this kernel ('*' globs)."),
        click.option("--driver", default=None, help="Only runs where an interface had this driver."),
        click.option("--firmware", default=None, help="Only runs where an interface had this firmware."),
        click.option("--tag", default=None, help="Only runs with this tag."),
        click.option("--status", default=None, help="Only runs with this status (done, done-with-failures, "
                     "done-with-partial-points, aborted, running, ...); 'partial': every run with a partial point."),
        click.option("--since", default=None, help="Only runs created at/after (2026-01-31, or an age: 7d)."),
        click.option("--until", default=None, help="Only runs created before (2026-02-01, or an age: 1d)."),
    ]
    for o in reversed(opts):
        f = o(f)
    return f


def run_filter(study: str | None = None, plan_name: str | None = None, host: str | None = None,
               kernel: str | None = None, driver: str | None = None, firmware: str | None = None,
               tag: str | None = None, status: str | None = None, since: str | None = None,
               until: str | None = None, run_ids: tuple[str, ...] = ()) -> RunFilter:
    return RunFilter(study=study, name=plan_name, host=host, kernel=kernel, driver=driver, firmware=firmware,
                     tag=tag, status=status, since=parse_when(since, "--since"), until=parse_when(until, "--until"),
                     run_ids=run_ids)


FILTER_KEYS = ("study", "plan_name", "host", "kernel", "driver", "firmware", "tag", "status", "since", "until")


def pop_filter(kw: dict[str, Any]) -> RunFilter:
    """The filter options out of a command's keyword arguments."""
    return run_filter(**{k: kw.pop(k) for k in FILTER_KEYS})


def report_dir(run_dir: Path) -> Path:
    out = run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    return out


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
