"""``nicbench runs``: the archive's runs, filtered, with their full ids.

Kept apart from ``report``: listing needs only the store, not the studies'
views (whose figures' imports take a second or two).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import click

from ..core.errors import StoreError
from ..store.archive import Archive, LeaseRow, RunRow
from ..store.location import parse_store
from ..store.names import shown
from ..store.runs import DB as LEGACY_DB
from .options import emit, filter_options, json_option, open_archive, pop_filter, quoted, store_option


def _created(c: float) -> str:
    return dt.datetime.fromtimestamp(c).strftime("%Y-%m-%d %H:%M")


def run_dict(r: RunRow) -> dict[str, Any]:
    return {"run_id": r.run_id, "name": r.name, "study": r.study, "created": r.created, "status": r.status,
            "source": r.source, "trials_total": r.trials_total, "trials_done": r.trials_done,
            "trials_ok": r.trials_ok, "trials_failed": r.trials_failed, "trials_partial": r.trials_partial,
            "hosts": list(r.hosts),
            "labels": {k: list(v) for k, v in r.labels.items()}, "run_dir": r.run_dir,
            "headline": {"metric": r.headline_metric, "value": r.headline_value, "point": r.headline_point}}


def headline(r: RunRow) -> str:
    if r.headline_value is None or not r.headline_metric:
        return ""
    return f"{r.headline_metric} {r.headline_value:.4g} ({r.headline_point})"


@click.command()
@store_option
@filter_options
@click.option("--limit", type=click.IntRange(min=1), default=200, show_default=True, help="At most this many runs.")
@click.option("--active", is_flag=True, help="Only the runs going on now (from any controller writing here), "
              "each with the hosts it holds leases on, and leases a killed run left recorded.")
@json_option
@click.pass_context
def runs(ctx: click.Context, store: str | None, limit: int, active: bool, **kw: Any) -> None:
    """List the runs in the archive, newest first, with their full ids."""
    f = pop_filter(kw)
    if active:
        if f != type(f)():
            raise click.UsageError("--active lists every run going on now: it takes no filter")
        _active(ctx, store)
        return
    loc = parse_store(store)
    a = _archive_or_say(ctx, store, f"no runs in {loc.display}" + _legacy_hint())
    if a is None:
        return
    with a:
        rows = a.runs(f, limit=limit)
        total = a.count(f)
    if ctx.obj.get("json"):
        emit(ctx, [run_dict(r) for r in rows])
        return
    if not rows:
        click.echo(f"no runs in {loc.display}" + ("" if f == type(f)() else " match") + _legacy_hint())
        return
    table = [("RUN ID", "NAME", "STUDY", "CREATED", "STATUS", "OK", "PARTIAL", "FAILED", "HOSTS", "HEADLINE")]
    for r in rows:
        # an import's study says so: its figures were not measured by nicbench
        study = shown(r.study, 12) + (" (imported)" if r.source == "import" else "")
        table.append((r.run_id, shown(r.name, 40), study, _created(r.created), shown(r.status, 24),
                      str(r.trials_ok), str(r.trials_partial), str(r.trials_failed), shown(",".join(r.hosts), 40),
                      shown(headline(r), 60)))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if total > len(rows):
        click.echo(f"... {total - len(rows)} more (--limit, or filters: --study, --plan, --since ...)")


def _legacy_hint() -> str:
    here = Path("nicbench-runs")
    if here.is_dir() and any((d / LEGACY_DB).exists() for d in here.iterdir()):
        return ("\n" + f"{here} holds run directories of an older nicbench: "
                + quoted("nicbench", "archive", "add", str(here)) + " brings them in")
    return ""


def _lease_status(r: RunRow) -> str:
    if r.status == "running":
        return "running"
    if r.stored_status == "running":
        return "killed (nicbench recover releases its leases)"
    return f"{r.status} (its leases not released: nicbench recover)"


def _archive_or_say(ctx: click.Context, store: str | None, empty: str) -> Archive | None:
    """The archive, or None when there is none yet (``empty`` said: no runs is not an error)."""
    try:
        return open_archive(store)
    except StoreError as e:
        if e.message != "no archive here yet":
            raise
        emit(ctx, [], empty)
        return None


def _active(ctx: click.Context, store: str | None) -> None:
    """``runs --active``: every run marked running and every lease not released."""
    loc = parse_store(store)
    a = _archive_or_say(ctx, store, f"no runs going on in {loc.display}")
    if a is None:
        return
    with a:
        got = a.active()
    if ctx.obj.get("json"):
        emit(ctx, [{"run_id": r.run_id, "plan": r.name, "study": r.study, "status": _lease_status(r),
                    "controller": r.machine, "pid": r.pid, "created": r.created,
                    "leases": [_lease_dict(x) for x in leases]} for r, leases in got])
        return
    if not got:
        click.echo(f"no runs going on in {loc.display}")
        return
    table = [("RUN ID", "PLAN", "STATUS", "CONTROLLER", "PID", "SINCE", "HOSTS LEASED")]
    for r, leases in got:
        since = min((x.since for x in leases), default=r.created)
        table.append((r.run_id, shown(r.name, 40), _lease_status(r), r.machine, str(r.pid or "?"), _created(since),
                      ",".join(x.host for x in leases) or "-"))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for row in table:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())


def _lease_dict(x: LeaseRow) -> dict[str, Any]:
    return {"host": x.host, "target": x.target, "controller": x.controller, "pid": x.pid, "since": x.since}

