"""The ``nicbench`` command: the only place where execution and results meet.

Each command lives in a module of its own (``cli/<command>.py``) and is
imported when it is asked for: the commands' dependencies differ a lot in
weight (matplotlib and scipy take 2.3 s to import here, the store none), and
``nicbench runs`` or ``--help`` should not pay for the report's figures.

Errors: every :class:`NicbenchError` becomes one line on stderr (and a JSON
object on stdout with ``--json``) and its class's exit code; a traceback only
with ``--debug``.
"""

from __future__ import annotations

import importlib
import json
import signal
import sqlite3
import sys
import traceback

import click

from .. import __version__
from ..core.errors import NicbenchError, StoreError, visible
from .options import json_option

# command -> (module, attribute): the one table of commands
COMMANDS = {
    "run": ("nicbench.cli.run", "run"),
    "report": ("nicbench.cli.report", "report"),
    "explain": ("nicbench.cli.explain", "explain"),
    "runs": ("nicbench.cli.runs", "runs"),
    "check": ("nicbench.cli.check", "check"),
    "schema": ("nicbench.cli.schema", "schema"),
    "init": ("nicbench.cli.init", "init"),
    "setup": ("nicbench.cli.setup", "setup"),
    "compare": ("nicbench.cli.compare", "compare_cmd"),
    "ab": ("nicbench.cli.ab", "ab_cmd"),
    "import": ("nicbench.cli.imports", "import_"),
    "facts": ("nicbench.cli.facts", "facts_cmd"),
    "tune": ("nicbench.cli.tune", "tune"),
    "lab": ("nicbench.cli.lab", "lab"),
    "linerate": ("nicbench.cli.linerate", "linerate"),
    "archive": ("nicbench.cli.archive", "archive"),
    "trend": ("nicbench.cli.trend", "trend"),
    "export": ("nicbench.cli.export", "export"),
    "recover": ("nicbench.cli.recover", "recover"),
    "serve": ("nicbench.cli.serve", "serve"),
}


class LazyGroup(click.Group):
    """Commands imported from :data:`COMMANDS` when they are used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attr = COMMANDS[cmd_name]
        cmd = getattr(importlib.import_module(module), attr)
        assert isinstance(cmd, click.Command)
        return cmd


EPILOG = """\b
Start:
  nicbench init --list                 the example plans
  nicbench init --example NAME         write one to edit (default: a short lab TCP plan)
  nicbench check PLAN                  validate it and list its points
  nicbench run PLAN                    run it, store everything, write the report
  nicbench setup                       build nbgen (packet studies), checking its compiler and libraries
  nicbench import FILE...              outputs run elsewhere (iperf3, iperf 2, fio, wrk, ...) as a run
  nicbench compare A B [--html DIR]    two runs point by point, and what differs between their hosts
  nicbench tune recommend RUN -o P     a tuning profile from what held RUN's points
  nicbench ab PLAN --b P               does profile P beat the hosts as they are? interleaved A/B
  nicbench runs / serve / trend        the archive: every run, the dashboard, a metric across runs

\b
Exit codes:
  0    ok
  1    internal error, or a file that cannot be read or written
  2    bad input: plan, option or usage
  3    preflight: hosts not ready (tool missing, port taken, no privileges)
  4    embedded lab
  5    a traffic tool failed or printed output nicbench cannot trust
  6    result store
  7    run finished, results stored, some points failed or partial (a host lost mid-point)
  8    regression: trend --check found the latest run outside the spread of the runs before it,
       or (--plan) a point's newest change point is a regression among its newest runs
  9    ab: B did not beat A (no difference at its confidence, or worse somewhere)
  130  interrupted (finished points are kept)

\b
Shell completion (click's), e.g. for bash in ~/.bashrc:
  eval "$(_NICBENCH_COMPLETE=bash_source nicbench)"
zsh: _NICBENCH_COMPLETE=zsh_source; fish: _NICBENCH_COMPLETE=fish_source.
"""


@click.group(cls=LazyGroup, epilog=EPILOG,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@json_option
@click.version_option(__version__, prog_name="nicbench")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """nicbench: measure how close hosts and NICs get to line rate.

    Runs a declarative TOML plan -- a TCP, UDP, latency, HTTPS, storage or packet-rate study
    -- on real hosts over SSH (the plan's hosts name ssh and test_ip, or an
    Ansible inventory) or on an embedded lab built on this machine (network
    namespaces as hosts, a bridge as the switch; needs root).  The real tools
    run for real; every raw output and sample is stored, and the report shows
    each point against the link's line-rate ceiling.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


def usage_error(e: click.ClickException) -> dict[str, object]:
    """A usage error as ``--json`` reports every error (NicbenchError.to_dict's keys)."""
    ctx = getattr(e, "ctx", None)
    param = getattr(e, "param", None)
    where = param.get_error_hint(ctx).strip("'\"") if param is not None and ctx is not None else None
    cmd = ctx.command_path if ctx is not None else "nicbench"
    return {"kind": "usage", "where": where, "message": e.format_message(), "hint": f"{cmd} --help",
            "exit_code": e.exit_code}


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    want_json = "--json" in args
    try:
        rv = cli.main(args=args, prog_name="nicbench", standalone_mode=False, obj={})
        code = rv if isinstance(rv, int) else 0
    except click.exceptions.Exit as e:
        code = e.exit_code
    except click.ClickException as e:
        e.show()
        code = e.exit_code
        if want_json:
            click.echo(json.dumps({"error": usage_error(e)}))
    except NicbenchError as e:
        if debug:
            traceback.print_exc()
        click.echo(e.one_line(), err=True)
        if want_json:
            click.echo(json.dumps({"error": e.to_dict()}))
        code = e.exit_code
    except (KeyboardInterrupt, click.exceptions.Abort):
        click.echo("nicbench: interrupted", err=True)
        code = 130
    except sqlite3.Error as e:
        if debug:
            traceback.print_exc()
        err = StoreError(f"result database error: {e}", hint="is this a nicbench run directory? --debug shows more")
        click.echo(err.one_line(), err=True)
        code = err.exit_code
    except OSError as e:
        if debug:
            traceback.print_exc()
        where = getattr(e, "filename", None)
        click.echo(visible(f"nicbench: error: {where + ': ' if where else ''}{e.strerror or e} "
                           "(hint: check the path and its permissions; --debug shows more)"), err=True)
        code = 1
    except Exception as e:  # noqa: BLE001 - a bug must still not print a bare traceback
        if debug:
            traceback.print_exc()
        click.echo(visible(f"nicbench: internal error: {type(e).__name__}: {e} "
                           "(hint: rerun with --debug and report it)"), err=True)
        code = 1
    if code == 130:
        # interrupted, and its clean-up is done: more Ctrl-C/SIGTERM while the
        # interpreter joins its threads at exit would only print a traceback
        # (seen: KeyboardInterrupt in threading._shutdown) over the one line
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.exit(code)


if __name__ == "__main__":
    main()
