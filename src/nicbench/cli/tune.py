"""``nicbench tune``: audit, apply and restore tuning profiles."""

from __future__ import annotations

import importlib
import json
import time
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..core.errors import InputError, LabError, NicbenchError, ToolError
from ..hosts.facts import collect
from ..hosts.transport import LocalTransport
from ..lab import manager
from ..tuning.apply import apply, restore, restore_targets
from ..tuning.audit import audit
from ..tuning.lock import TuningLock
from ..tuning.profile import load, shipped
from ..tuning.restorefile import DAMAGED, forget, pending, restore_dir, transport_from
from ..tuning.types import Target
from .options import emit, json_option, read_plan, refuse_unused

_STYLE = {"ok": "green", "applied": "green", "restored": "green", "differs": "yellow", "warn": "yellow",
          "host-wide": "cyan", "unsupported": "dim", "unknown": "dim", "note": "cyan", "failed": "bold red"}


def _profile(name: str, plan: Path | None):

    user = read_plan(plan)[0].profiles if plan else None
    return load(name, user)


def targets_for(hosts: tuple[str, ...], lab_name: str | None, ifname: str | None):
    """Tune targets with fresh facts: lab hosts (default: every host of the lab) or ``local``."""

    out = []
    if hosts == ("local",):
        t = LocalTransport("local")
        facts = collect(t, "local", [ifname] if ifname else [], ())[0]
        # "machine": the same restore file as a lab's host-wide settings, so priors never stack
        return [Target("local", "local", t, "machine", ifname, facts, lab=False)]
    labs = manager.all_labs()
    name = lab_name or (labs[0] if len(labs) == 1 else None)
    if name is None:
        raise InputError("which lab? " + (f"labs up: {', '.join(labs)}" if labs else "no lab is up"),
                         where="--lab", hint="give --lab NAME, 'nicbench lab up' one, or tune 'local'")
    lab = manager.load(name)
    if lab is None:
        raise LabError(f"no lab {name!r}", where="--lab", hint="nicbench lab status lists the labs")
    names = list(hosts) or [h.name for h in lab.spec.hosts]
    for h in names:
        try:
            spec = lab.spec.host(h)
        except KeyError:
            raise InputError(f"lab {name} has no host {h!r}", where="HOSTS",
                             hint=f"hosts: {', '.join(x.name for x in lab.spec.hosts)}") from None
        i = ifname or "eth0"
        out.append(Target(h, spec.role, lab.transport(h), lab.restore_id(h), i,
                          collect(lab.transport(h), spec.role, [i], ())[0], lab=True))
    return out


def show(rows, title: str) -> None:

    table = Table(title=title, header_style="bold")
    for c in ("host", "setting", "current", "wanted", "status", "note"):
        table.add_column(c, overflow="fold")
    for r in rows:
        st = _STYLE.get(r.status, "")
        table.add_row(r.host, escape(r.setting), escape(str(r.current if r.current is not None else "—")),
                      escape(str(r.wanted if r.wanted is not None else "")),
                      f"[{st}]{r.status}[/]" if st else r.status, escape(r.note))
    Console(width=160).print(table)


def _common(f):
    f = click.option("--lab", "lab_name", default=None, help="The lab whose hosts to tune (default: the only one up).")(
        f
    )
    f = click.option("--if", "ifname", default=None, help="The test interface (default: eth0 in the lab).")(f)
    f = click.option(
        "--plan", type=click.Path(path_type=Path), default=None, help="A plan whose [profiles.*] define user profiles."
    )(f)
    f = click.option(
        "--host-wide",
        is_flag=True,
        help="In the lab, also apply host-wide settings (governor, services, IRQs) to the machine.",
    )(f)
    f = click.option("--json", "json_", is_flag=True, help="Machine-readable output on stdout.")(f)
    return click.argument("hosts", nargs=-1)(f)


class _TuneGroup(click.Group):
    """``recommend`` reads runs back (the results side, every study's view:
    slow to import), so it is imported only when asked for."""

    LAZY = {"recommend": ("nicbench.cli.recommend", "recommend_cmd")}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.LAZY])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY:
            module, attr = self.LAZY[cmd_name]
            cmd = getattr(importlib.import_module(module), attr)
            assert isinstance(cmd, click.Command)
            return cmd
        return super().get_command(ctx, cmd_name)


@click.group("tune", cls=_TuneGroup)
def tune() -> None:
    """Tuning as data: audit a host against a profile, apply it, restore it,
    and recommend one from a run's verdicts."""


@tune.command("profiles")
@json_option
@click.pass_context
def profiles(ctx: click.Context) -> None:
    """List the profiles shipped with nicbench."""
    profs = {n: load(n) for n in shipped()}
    emit(ctx, [{"name": n, "description": p.description, "audit_only": p.audit_only,
                "settings": [s.model_dump(mode="json") for s in p.settings]} for n, p in profs.items()],
         "\n".join(f"{n:<12} {len(p.settings):>2} settings{'  (audit only)' if p.audit_only else ''}  {p.description}"
                   for n, p in profs.items()))


@tune.command("audit")
@click.option("--profile", "profile_name", default="stock", show_default=True,
              help="Profile to audit against: a name, or a profile file (.toml).")
@_common
@click.pass_context
def audit_cmd(ctx, profile_name, hosts, lab_name, ifname, plan, host_wide, json_) -> None:
    """Show setting | current | wanted | status per host, plus checks that explain results.

    Only reads: nothing on any host is changed.
    """
    _refuse_lab_for_local(ctx, hosts)
    prof = _profile(profile_name, plan)
    result = audit(prof, targets_for(hosts, lab_name, ifname), host_wide=host_wide)
    if json_ or (ctx.obj or {}).get("json"):
        click.echo(
            json.dumps(
                {"profile": profile_name, "rows": [r.to_dict() for r in result.rows], "pinning": result.pin_cpus},
                indent=1,
            )
        )
        return
    show(result.rows, f"tuning audit: profile {profile_name}")


@tune.command("apply")
@click.option("--profile", "profile_name", required=True,
              help="Profile to apply: a name, or a profile file (.toml, e.g. from 'tune recommend -o').")
@click.option("--step-delay", type=float, default=0.0, hidden=True, help="Pause after each change (tests).")
@_common
@click.pass_context
def apply_cmd(ctx, profile_name, step_delay, hosts, lab_name, ifname, plan, host_wide, json_) -> None:
    """Apply a profile: prior values are saved on each host before its first
    change; each change is read back.  'nicbench tune restore' undoes it."""
    _refuse_lab_for_local(ctx, hosts)
    prof = _profile(profile_name, plan)
    lock = TuningLock().acquire("tune apply")
    try:
        ts = targets_for(hosts, lab_name, ifname)
        result = apply(
            prof,
            ts,
            host_wide=host_wide,
            step=(lambda: time.sleep(step_delay)) if step_delay else None,
        )
    finally:
        lock.release()
    missing = [r for r in result.rows if r.not_in_force and not r.optional]
    if missing:
        # all or nothing, as a run's tuning: what was applied goes back at once
        restore_targets(ts, host_wide)
    if json_ or (ctx.obj or {}).get("json"):
        click.echo(json.dumps({"profile": profile_name, "rows": [r.to_dict() for r in result.rows],
                               "restored": bool(missing)}, indent=1))
    else:
        show(result.rows, f"tuning {'NOT ' if missing else ''}applied: profile {profile_name}")
    if missing:
        raise ToolError(
            f"{len(missing)} setting(s) not in force, so the profile was not applied (what was changed is "
            "restored): " + "; ".join(f"{r.host} {r.setting}: {r.status}{f' ({r.note})' if r.note else ''}"
                                      for r in missing),
            hint="mark a setting optional = true in the profile if it may be missing on a host",
        )


@tune.command("restore")
@click.option("--json", "json_", is_flag=True, help="Machine-readable output on stdout.")
@click.pass_context
def restore_cmd(ctx, json_) -> None:
    """Put back every setting nicbench changed on this machine and its lab
    hosts, from the restore files (also after a crash or power loss)."""

    rows, notes, errors = [], [], []
    lock = TuningLock().acquire("tune restore")
    try:
        todo = pending()
    except Exception:
        lock.release()
        raise
    for rid, doc in todo:
        if doc is DAMAGED:
            errors.append(f"{rid}: the restore file in {restore_dir()} is damaged; it is kept")
            continue
        try:
            t = transport_from(doc, rid)
            if t is None:
                forget(rid)
                notes.append(f"{rid}: its namespace is gone, and its settings with it")
                continue
            rows += restore(t, rid)
        except NicbenchError as e:  # one host's failure must not stop the others
            errors.append(e.one_line().removeprefix("nicbench: "))
    lock.release()
    if json_ or (ctx.obj or {}).get("json"):
        click.echo(json.dumps({"rows": [r.to_dict() for r in rows], "notes": notes, "errors": errors}, indent=1))
    else:
        for n in notes:
            click.echo(n)
        if rows:
            show(rows, "tuning restored")
        elif not notes and not errors:
            click.echo("nothing to restore")
    if errors:
        raise ToolError(
            "; ".join(errors),
            where="tune restore",
            hint="fix what is named and run 'nicbench tune restore' again; the files are kept",
        )


def _refuse_lab_for_local(ctx: click.Context, hosts: tuple[str, ...]) -> None:
    refuse_unused(ctx, "lab_name", hosts != ("local",), "names the lab whose hosts to tune; 'local' is this machine "
                  "itself", "leave --lab out, or name the lab's hosts instead of 'local'")
