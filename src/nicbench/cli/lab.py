"""``nicbench lab up|down|status``: the embedded lab by itself."""

from __future__ import annotations

import re
from pathlib import Path

import click

from ..core.errors import InputError, LabError
from ..lab import lease, manager
from ..lab.topology import make_spec
from ..run.hosts import lab_spec
from .options import emit, json_option, read_plan, refuse_unused


@click.group()
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
    if name is not None and not re.fullmatch(r"[a-z0-9]{1,8}", name):
        raise InputError(f"{name!r} is not a lab name", where="--name",
                         hint="1-8 lower-case letters or digits (namespaces are nb-<name>-<host>)")
    refuse_unused(ctx, "clients", plan is None, "sets the clients of a lab built without a plan; with PLAN its "
                  "[hosts] are the lab's hosts", "add [hosts.<name>] tables to the plan, or leave PLAN out")
    if mtu is not None and not 576 <= mtu <= 9216:
        raise InputError(f"--mtu {mtu} is out of range", where="--mtu", hint="use 576..9216")
    if plan is not None:
        p, _ = read_plan(plan)
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
    emit(ctx, spec.to_dict(), f"lab {spec.name} is up: " + ", ".join(
        f"{h.name}={h.ip} ({h.netns})" for h in lab_.spec.hosts))


@lab.command("down")
@click.argument("name", required=False)
@click.option("--all", "all_", is_flag=True, help="Remove every lab this user's nicbench built and no run is using.")
@click.option("--force", is_flag=True, help="Also remove labs of other users, of running runs, and leftovers "
              "whose owner is not recorded.")
@json_option
@click.pass_context
def lab_down(ctx: click.Context, name: str | None, all_: bool, force: bool) -> None:
    """Remove lab NAME (default 'lab'): kill its processes, delete its namespaces.

    A lab another user built, or a run still uses, is only removed with --force.
    """
    if all_ and name:
        raise InputError("give a lab NAME or --all, not both", where="--all", hint="nicbench lab status lists labs")
    skipped: dict[str, str] = {}
    if all_:
        names = []
        for n in manager.all_labs():
            why = None if force else manager.ownership(n).why_not()
            if why is None:
                names.append(n)
            else:
                skipped[n] = why
    else:
        n = name or "lab"
        own = manager.ownership(n)
        # a lab named outright whose owner is not recorded (a leftover) is removed; a lab
        # recorded as someone else's, or in use by a run, needs --force
        why = None if force or own.owner is None else own.why_not()
        if why is not None:
            raise LabError(f"lab {n} is not yours to remove: {why}", where=f"lab {n}",
                           hint=f"nicbench lab down {n} --force removes it anyway")
        names = [n]
    removed = {n: manager.down(n) for n in names}
    lines = [f"lab {n}: removed {len(v)} namespace(s)" for n, v in removed.items()]
    lines += [f"lab {n}: left alone ({why}); --force removes it" for n, why in skipped.items()]
    emit(ctx, {"removed": removed, "skipped": skipped}, "\n".join(lines) or "no labs")


def _in_use(name: str) -> str | None:
    """Which run holds the lab now (its lease), or None."""
    held = lease.holder(name)
    return None if held is None else f"in use by {lease.describe(held)}"


@lab.command("status")
@click.argument("name", required=False)
@json_option
@click.pass_context
def lab_status(ctx: click.Context, name: str | None) -> None:
    """Show what exists of lab NAME, or of every lab; exit 4 if one is not healthy."""
    names = [name] if name else manager.all_labs()
    st = [manager.status(n) for n in names]
    if ctx.obj.get("json"):
        emit(ctx, st)
    elif not st:
        click.echo("no labs")
    for s in [] if ctx.obj.get("json") else st:
        click.echo(f"lab {s['name']}: {'healthy' if s['healthy'] else 'NOT healthy'}, "
                   f"{len(s['namespaces'])} namespace(s), {len(s['processes'])} tracked process(es) alive, "
                   f"built by {manager.ownership(s['name']).who()}"
                   + (f", {why}" if (why := _in_use(s['name'])) else ""))
        for h in s["hosts"]:
            click.echo(f"  {h['name']:<8} {h['role']:<7} {h['ip']:<15} {h['netns']:<18} "
                       f"{'up' if h['link_up'] else 'DOWN'} mtu {h['mtu']} (switch port {h.get('switch_port_mtu')})")
        for p in s.get("problems", []):
            click.echo(f"  problem: {p}")
    sick = [s for s in st if not s["healthy"]]
    if sick:
        first = sick[0]
        raise LabError(f"{len(sick)} lab(s) not healthy: " + ", ".join(s["name"] for s in sick)
                       + (f" (first problem: {first['problems'][0]})" if first.get("problems") else ""),
                       where="lab status", hint=f"nicbench lab down {first['name']} (a run then builds it afresh)")
