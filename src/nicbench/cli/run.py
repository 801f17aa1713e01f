"""``nicbench run PLAN``: the whole job, from a plan to its report."""

from __future__ import annotations

from pathlib import Path

import click

from ..core.errors import PointsFailed, PreflightError, StoreError
from ..registry import VIEWS, study
from ..report.catalogue import summarise
from ..run.session import execute
from ..store.archive import Archive
from .options import check_tags, emit, json_option, plan_store, quoted, read_plan, report_dir, store_option, wait_option
from .progress import TerminalProgress
from .recover import clean, inspect
from .tables import echo_table, flagged_points, points_table


@click.command()
@click.argument("plan", type=click.Path(path_type=Path))
@store_option
@click.option("--keep-lab", is_flag=True, help="Leave the lab this run builds in place afterwards.")
@click.option("--no-report", is_flag=True, help="Store results but do not render the report.")
@click.option("--host-wide", is_flag=True, help="With a plan's tuning: also apply host-wide settings "
              "(governor, services, IRQs, init-namespace sysctls) to this machine; restored afterwards.")
@click.option("--tag", "tags", multiple=True, callback=check_tags,
              help="Tag the run (repeatable); 'nicbench runs --tag' finds it.")
@click.option("--recover", "do_recover", is_flag=True,
              help="First clean up what a killed nicbench left (as 'nicbench recover --yes').")
@wait_option
@json_option
@click.pass_context
def run(ctx: click.Context, plan: Path, store: str | None, keep_lab: bool, no_report: bool,
        host_wide: bool, tags: tuple[str, ...], do_recover: bool, wait: float | None) -> None:
    """Run PLAN (a .toml file) and write its report.

    Where it runs is the plan's: real hosts over SSH when its [hosts] give
    ssh (and test_ip), or an inventory names them -- nicbench checks every
    host first (login, sudo, tools, clocks) -- else the embedded lab on this
    machine (needs root), built for the run and removed afterwards, unless
    one with the plan's [lab] name already exists (made by 'nicbench lab
    up'), which is reused and left alone.  The run is in the archive from its
    start and every finished point is stored at once; Ctrl-C stops cleanly
    and keeps them.

    The run leases every host it uses (and the lab) for its whole life: a
    run wanting a host another run holds, from any controller, stops at once
    naming that run, or with --wait queues until it is free.
    """
    p, text = read_plan(plan)
    s = study(p.study.kind)
    explicit_dir = p.output.dir if "output" in p.model_fields_set else None
    loc = plan_store(store, explicit_dir)
    archive = Archive.open(loc)
    try:
        _leftovers(ctx, archive, p.tuning is not None, do_recover)
        prog = TerminalProgress(s.view) if not ctx.obj.get("json") else None
        outcome = execute(p, text, runner=s.runner, store=archive, progress=prog, keep_lab=keep_lab, exiting=True,
                          host_wide=host_wide, tags=tags, wait=wait)
        # the per-point figures go where the run went (the local spool if PostgreSQL went away)
        target = archive if outcome.archive in (None, archive.loc) else Archive.open(outcome.archive)
        try:
            view = summarise(target, outcome.run_id, VIEWS)
        finally:
            if target is not archive:
                target.close()
    finally:
        archive.close()
    report = None if no_report else s.view.render(view, report_dir(view.run_dir))
    # the analysis has the last word: a point whose tools succeeded can still be
    # rejected (a window too short to trust, a process without receiver data)
    # (summarise stored that decision: the archive says what this summary says)
    rejected = [t for t in view.trials if t.status != "ok" and t.error and t.problems]
    partial = sum(t.status == "partial" for t in view.trials)
    failed = sum(t.status not in ("ok", "partial") for t in view.trials)
    ok = len(view.trials) - failed - partial
    rows = s.view.rows(view)
    flagged = flagged_points(rows, s.view.headline)
    data = {"run_id": outcome.run_id, "run_dir": str(outcome.run_dir),
            "status": view.meta.get("status", outcome.status),
            "points_ok": ok, "points_failed": failed, "points_partial": partial,
            "rejected_by_analysis": len(rejected), "flagged": flagged,
            "hosts_unreachable": dict(outcome.unreachable),
            "report": str(report) if report else None, "warnings": list(outcome.warnings),
            "store": outcome.archive.display if outcome.archive else loc.display}
    if not ctx.obj.get("json"):
        echo_table(points_table(rows, s.view.headline, title=f"{p.name}: results"))
    lines = [f"run {outcome.run_id}: {ok} points ok, {failed} failed"
             + (f", {partial} partial (survivors only)" if partial else "")
             + (f" ({len(rejected)} rejected by the analysis)" if rejected else "")
             + (f"; {len(flagged)} flagged" if flagged else "")]
    lines += [f"host {h}: unreachable from point {p} on" for h, p in outcome.unreachable.items()]
    lines += [f"rejected: {t.point}: {t.error}" for t in rejected]
    lines += [f"flagged: {f}" for f in flagged]
    lines += [f"warning: {w}" for w in outcome.warnings]
    if report:
        lines.append(f"report: {report}")
    emit(ctx, data, "\n".join(lines))
    if failed or partial:
        raise PointsFailed(f"{failed + partial} point(s) failed or partial; the others are stored and reported",
                           where=str(outcome.run_dir), hint="see 'Failed points' in the report")


def _leftovers(ctx: click.Context, archive: Archive, tunes: bool, do_recover: bool) -> None:
    """What a killed nicbench left: cleaned with --recover; else said, and in
    the way of this run only where it would be (tuning in force when this
    run applies tuning)."""
    left = inspect(archive)
    if not left:
        return
    if do_recover:
        errors = clean(archive, left)
        if errors:
            raise StoreError("; ".join(errors), where="recover", hint="nicbench recover --yes, then run again")
        return
    for line in left.lines(done=False):
        click.echo(f"nicbench: left by a killed nicbench: {line}", err=True)
    if left.tuning and tunes:
        killed = ", ".join(r.run_id for r in left.runs) or "an earlier nicbench"
        raise PreflightError(f"tuning left in force by {killed} ({', '.join(left.tuning)}): this run would stack "
                             "on it and undo it at its end", where="tuning",
                             hint=f"{quoted('nicbench', 'recover', '--yes')} restores it (or run with --recover)")
