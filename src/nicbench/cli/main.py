"""The ``nicbench`` command: the only place where execution and results meet.

Errors: every :class:`NicbenchError` becomes one line on stderr (and a JSON
object on stdout with ``--json``) and its class's exit code; a traceback only
with ``--debug``.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import sys
import traceback
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..core.errors import InputError, NicbenchError, PointsFailed, StoreError
from ..core.units import UnitError, parse_size


def _emit(ctx: click.Context, data: Any, text: str | None = None) -> None:
    if ctx.obj.get("json"):
        click.echo(json.dumps(data, indent=1, default=str))
    elif text is not None:
        click.echo(text)


def json_option(f):
    """``--json`` on every command (it may also be given before the command)."""
    def cb(ctx: click.Context, _param, value: bool):
        if value:
            ctx.ensure_object(dict)["json"] = True
        return value
    return click.option("--json", "json_", is_flag=True, expose_value=False, callback=cb,
                        help="Machine-readable output on stdout.")(f)


def store_option(f):
    return click.option("--store", type=click.Path(path_type=Path), default=None,
                        help="Result store directory (default: $NICBENCH_STORE or ./nicbench-runs).")(f)


def _store(store: Path | None) -> Path:
    from ..store.runs import default_store
    return store or default_store()


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--debug", is_flag=True, help="Show tracebacks on errors.")
@json_option
@click.version_option(__version__, prog_name="nicbench")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """nicbench: measure how close hosts and NICs get to line rate.

    Runs declarative TOML plans on an embedded lab (network namespaces as hosts,
    a bridge as the switch) where the real tools run for real, stores every raw
    output and sample, and renders the seeds' figures and tables.

    Exit codes: 0 ok, 2 bad input, 3 preflight, 4 lab, 5 tool, 6 store,
    7 run finished with failed points, 130 interrupted.
    """
    ctx.ensure_object(dict)
    ctx.obj["debug"] = debug


# ---------------------------------------------------------------- run / report
@cli.command()
@click.argument("plan", type=click.Path(path_type=Path))
@store_option
@click.option("--keep-lab", is_flag=True, help="Leave the lab this run builds in place afterwards.")
@click.option("--no-report", is_flag=True, help="Store results but do not render the report.")
@click.option("--host-wide", is_flag=True, help="With a plan's tuning: also apply host-wide settings "
              "(governor, services, IRQs, init-namespace sysctls) to this machine; restored afterwards.")
@json_option
@click.pass_context
def run(ctx: click.Context, plan: Path, store: Path | None, keep_lab: bool, no_report: bool,
        host_wide: bool) -> None:
    """Run PLAN (a .toml file) on the embedded lab and write its report.

    The lab is built for the run and removed afterwards, unless one with the
    plan's [lab] name already exists (made by 'nicbench lab up'), which is
    reused and left alone.  Every finished point is stored at once; Ctrl-C stops
    cleanly and keeps them.
    """
    from ..plan.load import load_plan
    from ..report.build import load_run
    from ..report.render import render
    from ..run.session import execute
    from .progress import TerminalProgress

    p, text = load_plan(plan)
    # --store, then $NICBENCH_STORE, then the plan's [output] dir
    env_store = os.environ.get("NICBENCH_STORE")
    store_dir = store or (Path(env_store) if env_store else Path(p.output.dir))
    prog = TerminalProgress(p.study.trim) if not ctx.obj.get("json") else None
    outcome = execute(p, text, store=store_dir, progress=prog, keep_lab=keep_lab, host_wide=host_wide)
    view = load_run(outcome.run_dir)
    report = None if no_report else render(view)
    # the analysis has the last word: a point whose tools succeeded can still be
    # rejected (a window too short to trust, a process without receiver data)
    trials = list(view.https_trials) or list(view.storage_trials) or list(view.packet_trials) or view.trials
    rejected = [t for t in trials if t.status != "ok" and t.error and getattr(t, "problems", ())]
    failed = sum(t.status != "ok" for t in trials)
    ok = len(trials) - failed
    data = {"run_id": outcome.run_id, "run_dir": str(outcome.run_dir), "status": outcome.status,
            "points_ok": ok, "points_failed": failed, "rejected_by_analysis": len(rejected),
            "report": str(report) if report else None, "warnings": list(outcome.warnings)}
    lines = [f"run {outcome.run_id}: {ok} points ok, {failed} failed"
             + (f" ({len(rejected)} rejected by the analysis)" if rejected else "")]
    lines += [f"rejected: {t.point}: {t.error}" for t in rejected]
    lines += [f"warning: {w}" for w in outcome.warnings]
    if report:
        lines.append(f"report: {report}")
    _emit(ctx, data, "\n".join(lines))
    if failed:
        raise PointsFailed(f"{failed} point(s) failed; the others are stored and reported",
                           where=str(outcome.run_dir), hint="see 'Failed points' in the report")


@cli.command()
@click.argument("run_ref", metavar="RUN", default="latest")
@store_option
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Directory for the report (default: RUN/report).")
@json_option
@click.pass_context
def report(ctx: click.Context, run_ref: str, store: Path | None, out: Path | None) -> None:
    """Re-render the report of RUN (id, id prefix, path or 'latest') from the store alone."""
    from ..report.build import load_run, table_rows
    from ..report.render import render
    from ..store.runs import resolve

    view = load_run(resolve(_store(store), run_ref))
    index = render(view, out)
    _emit(ctx, {"run_id": view.info.run_id, "report": str(index), "points": table_rows(view)},
          f"report: {index}")


@cli.command()
@store_option
@json_option
@click.pass_context
def runs(ctx: click.Context, store: Path | None) -> None:
    """List the runs in the store, newest first."""
    import datetime as dt

    from rich.console import Console
    from rich.table import Table

    from ..store.runs import list_runs

    rows = list_runs(_store(store))
    if ctx.obj.get("json"):
        _emit(ctx, rows)
        return
    if not rows:
        click.echo(f"no runs in {_store(store)}")
        return
    t = Table("run id", "name", "study", "created", "status", "ok", "failed")
    for r in rows:
        created = dt.datetime.fromtimestamp(float(r["created"])).strftime("%Y-%m-%d %H:%M") \
            if r.get("created") else "?"
        t.add_row(str(r["run_id"]), str(r.get("name", "")), str(r.get("study", "")), created,
                  str(r.get("status", "")), str(r.get("trials_ok", "")), str(r.get("trials_failed", "")))
    Console().print(t)


@cli.command("check")
@click.argument("plan", type=click.Path(path_type=Path))
@json_option
@click.pass_context
def check(ctx: click.Context, plan: Path) -> None:
    """Validate PLAN and show the trials it would run, without running anything."""
    from ..plan.load import load_plan
    from ..plan.matrix import trials

    p, _ = load_plan(plan)
    ts = trials(p)
    s = p.study
    secs = len(ts) * (getattr(s, "omit", 0) + s.duration)
    _emit(ctx, {"plan": p.name, "trials": len(ts), "measured_seconds": secs,
                "points": sorted({t.point for t in ts})},
          f"{p.name}: valid; {len(ts)} trials, at least {secs:g} s of traffic")


# ---------------------------------------------------------------- linerate
@cli.command()
@click.option("--speed", required=True, help="Link speed, decimal bit/s: 10G, 2.5G, 400G, 10000M.")
@click.option("--mtu", type=int, default=None, help="Ethernet MTU (default 1500; fcoe: 2158, for 2180-byte frames).")
@click.option("--proto", type=click.Choice(["tcp", "udp", "tls1.2", "tls1.3", "frames", "nbd", "iscsi",
                                             "nvme-tcp", "fcoe"]), default="tcp", show_default=True)
@click.option("--ip", type=click.Choice(["4", "6"]), default="4", show_default=True)
@click.option("--no-timestamps", is_flag=True, help="TCP without the timestamp option (12 B more payload).")
@click.option("--vlan", is_flag=True, help="Frames carry an 802.1Q tag (4 B).")
@click.option("--frame-size", default="64", show_default=True, help="frames: bytes from header to FCS.")
@click.option("--record", default="16K", show_default=True, help="tls: record size.")
@click.option("--io-size", default=None, help="nbd/iscsi/nvme-tcp/fcoe: I/O size, e.g. 4K.")
@click.option("--op", type=click.Choice(["read", "write", "readwrite"]), default="read", show_default=True)
@json_option
@click.pass_context
def linerate(ctx: click.Context, speed: str, mtu: int | None, proto: str, ip: str, no_timestamps: bool,
             vlan: bool, frame_size: str, record: str, io_size: str | None, op: str) -> None:
    """The line-rate ceiling: most goodput and frame rate a link allows.

    The formula, with a worked example, is in nicbench.analysis.linerate.
    """
    from ..analysis import linerate as lr

    def size(v: str, what: str) -> int:
        try:
            return parse_size(v)
        except UnitError as e:
            raise InputError(str(e), where=what) from None
    if mtu is None:
        mtu = lr.FCOE_MIN_MTU if proto == "fcoe" else 1500
    if vlan and proto == "frames":
        raise InputError("--vlan does not apply to --proto frames", where="--vlan",
                         hint="a frame size counts header to FCS, any VLAN tag included")
    try:
        bps = lr.parse_speed(speed)
        kw: dict[str, Any] = {"ip": int(ip), "vlan": vlan}
        if proto in ("tcp", "tls1.2", "tls1.3", "nbd", "iscsi", "nvme-tcp"):
            kw["timestamps"] = not no_timestamps
        if proto == "frames":
            kw = {"frame_size": size(frame_size, "--frame-size")}
        if proto.startswith("tls"):
            kw["record"] = size(record, "--record")
        if proto in ("nbd", "iscsi", "nvme-tcp", "fcoe"):
            if io_size is None:
                raise InputError(f"--proto {proto} needs --io-size", where="--io-size", hint="e.g. --io-size 4K")
            kw["io_size"] = size(io_size, "--io-size")
            kw["op"] = op
            if proto == "fcoe":
                kw = {"io_size": kw["io_size"], "op": op}
        c = lr.ceiling(proto, bps, mtu, **kw)
    except lr.ModelError as e:
        raise InputError(str(e), where="linerate",
                         hint="speeds: 10G, 2.5G, 10000M; MTU 576..9216 (IPv6 >= 1280); frames >= 64") from None
    lines = [f"{proto} over {lr.format_speed(bps)}bit/s" + (f", MTU {mtu}" if proto != "frames" else ""),
             f"  goodput ceiling  {c.goodput_bps / 1e9:.3f} Gbps ({c.efficiency * 100:.2f} % of the link, "
             f"{c.mb_per_s:.0f} MB/s with MB = 10^6)",
             f"  frame rate       {c.frames_per_s / 1e6:.3f} Mpps",
             f"  per frame        {c.payload_per_frame:.1f} payload bytes in {c.wire_per_frame:.1f} wire bytes"]
    if c.iops:
        lines.append(f"  I/O rate         {c.iops:,.0f} IOPS of {c.io_size} B")
    lines += [f"  ({n})" for n in c.notes]
    _emit(ctx, c.to_dict(), "\n".join(lines))


# ---------------------------------------------------------------- import
@cli.command("import")
@click.argument("tool", type=click.Choice(["iperf3", "iperf2"]))
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@store_option
@click.option("--name", default="imported", show_default=True, help="Run name.")
@click.option("--role", type=click.Choice(["client", "server"]), default=None,
              help="iperf2: which end wrote the CSV (required for iperf2).")
@click.option("--io-size", default=None, help="Label points with this IO size (iperf2 CSV lacks it).")
@click.option("--connections", type=int, default=None, help="Label points with this connection count.")
@click.option("--together", is_flag=True, help="The files are parallel clients of one point.")
@click.option("--port", type=int, default=None, help="iperf2: the server port, when the CSV cannot tell.")
@json_option
@click.pass_context
def import_(ctx: click.Context, tool: str, files: tuple[Path, ...], store: Path | None, name: str,
            role: str | None, io_size: str | None, connections: int | None, together: bool,
            port: int | None) -> None:
    """Ingest iperf3 -J JSON or iperf2 -y C CSV files run by hand into a new run."""
    from .imports import import_files

    io = None
    if io_size is not None:
        try:
            io = parse_size(io_size)
        except UnitError as e:
            raise InputError(str(e), where="--io-size") from None
    run_id, run_dir, n = import_files(tool, list(files), store=_store(store), name=name, role=role,
                                      io_size=io, connections=connections, together=together, port=port)
    _emit(ctx, {"run_id": run_id, "run_dir": str(run_dir), "trials": n},
          f"imported {n} trial(s) as run {run_id}\nnicbench report {run_id} renders it")


# ---------------------------------------------------------------- lab
@cli.group()
def lab() -> None:
    """Build, inspect and remove the embedded lab (needs root)."""


@lab.command("up")
@click.argument("plan", required=False, type=click.Path(path_type=Path))
@click.option("--name", default=None, help="Lab name (default: the plan's [lab] name, or 'lab').")
@click.option("--clients", type=int, default=3, show_default=True, help="Client hosts, without a plan.")
@click.option("--mtu", type=int, default=None, help="Link MTU (default: the plan's, or 1500).")
@json_option
@click.pass_context
def lab_up(ctx: click.Context, plan: Path | None, name: str | None, clients: int, mtu: int | None) -> None:
    """Build a lab: from PLAN's hosts and link, or a server and --clients clients."""
    from ..lab import manager
    from ..lab.topology import make_spec
    from ..plan.load import load_plan
    from ..run.session import lab_spec

    if name is not None and not re.fullmatch(r"[a-z0-9]{1,8}", name):
        raise InputError(f"{name!r} is not a lab name", where="--name",
                         hint="1-8 lower-case letters or digits (namespaces are nb-<name>-<host>)")
    if mtu is not None and not 576 <= mtu <= 9216:
        raise InputError(f"--mtu {mtu} is out of range", where="--mtu", hint="use 576..9216")
    if plan is not None:
        p, _ = load_plan(plan)
        spec = lab_spec(p)
        if name or mtu:
            spec = make_spec(name or spec.name, [(h.name, h.role) for h in spec.hosts], mtu or spec.mtu,
                             p.lab.subnet)
    else:
        if not 1 <= clients <= 12:
            raise InputError(f"--clients {clients} is out of range", where="--clients", hint="use 1..12")
        spec = make_spec(name or "lab", [("srv", "server")] + [(f"c{i + 1}", "client") for i in range(clients)],
                         mtu or 1500)
    lab_ = manager.up(spec)
    _emit(ctx, spec.to_dict(), f"lab {spec.name} is up: " + ", ".join(
        f"{h.name}={h.ip} ({h.netns})" for h in lab_.spec.hosts))


@lab.command("down")
@click.argument("name", required=False)
@click.option("--all", "all_", is_flag=True, help="Remove every nicbench lab, including crash leftovers.")
@json_option
@click.pass_context
def lab_down(ctx: click.Context, name: str | None, all_: bool) -> None:
    """Remove lab NAME (default 'lab'): kill its processes, delete its namespaces."""
    from ..lab import manager

    names = manager.all_labs() if all_ else [name or "lab"]
    removed = {n: manager.down(n) for n in names}
    _emit(ctx, removed, "\n".join(f"lab {n}: removed {len(v)} namespace(s)" for n, v in removed.items())
          or "no labs")


@lab.command("status")
@click.argument("name", required=False)
@json_option
@click.pass_context
def lab_status(ctx: click.Context, name: str | None) -> None:
    """Show what exists of lab NAME, or of every lab."""
    from ..lab import manager

    names = [name] if name else manager.all_labs()
    st = [manager.status(n) for n in names]
    if ctx.obj.get("json"):
        _emit(ctx, st)
        return
    if not st:
        click.echo("no labs")
    for s in st:
        click.echo(f"lab {s['name']}: {'healthy' if s['healthy'] else 'NOT healthy'}, "
                   f"{len(s['namespaces'])} namespace(s), {len(s['processes'])} tracked process(es) alive")
        for h in s["hosts"]:
            click.echo(f"  {h['name']:<8} {h['role']:<7} {h['ip']:<15} {h['netns']:<18} "
                       f"{'up' if h['link_up'] else 'DOWN'} mtu {h['mtu']}")


from .compare import register as _register_compare  # noqa: E402 - commands kept in their own modules
from .facts import register as _register_facts  # noqa: E402
from .tune import register as _register_tune  # noqa: E402

_register_facts(cli)
_register_tune(cli)
_register_compare(cli)


# ---------------------------------------------------------------- entry point
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
        click.echo(f"nicbench: error: {where + ': ' if where else ''}{e.strerror or e} "
                   "(hint: check the path and its permissions; --debug shows more)", err=True)
        code = 1
    except Exception as e:  # noqa: BLE001 - a bug must still not print a bare traceback
        if debug:
            traceback.print_exc()
        click.echo(f"nicbench: internal error: {type(e).__name__}: {e} "
                   "(hint: rerun with --debug and report it)", err=True)
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
