"""``nicbench ab PLAN --b PROFILE [--a PROFILE|stock] [--rounds N]``: does
B beat A?  Both configurations run interleaved on the same hosts, point by
point, ABBA (run/ab.py), into two runs and one A/B of the archive; then both
runs are read back and judged per point (analysis/ab.py): medians, the
difference with its interval, B better / worse / no difference, and each
side's verdict.  Exit 0 when B won, 9 when it did not."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from ..analysis.ab import BETTER, METHOD, WORSE
from ..core.errors import InputError, NotBetter
from ..plan.load import load_plan
from ..records import Sample, TrialRecord, TrialSpec
from ..registry import VIEWS, study
from ..report.ab import document, judge, write_ab_page
from ..report.catalogue import summarise
from ..report.numbers import num
from ..report.view import RunView, StudyView
from ..run.ab import Side, execute_ab
from ..store.ab import ab_result, finish_ab
from ..store.archive import Archive
from ..tuning.profile import load
from .options import check_tags, emit, json_option, plan_store, report_dir, store_option, wait_option
from .run import _leftovers


class _Lines:
    """One line per finished repeat on stderr, with its side."""

    def __init__(self, view: StudyView, meta: Mapping[str, Any]):
        self.view, self.meta = view, meta
        self.console = Console(stderr=True)
        self.done, self.total = 0, 0

    def _say(self, text: str) -> None:
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)
        self.console.file.flush()

    def begin(self, ab_id: str, total: int, runs: dict[str, str]) -> None:
        self.total = total
        self._say(f"A/B {ab_id}: {total} repeats; A -> run {runs['A']}, B -> run {runs['B']}")

    def slot_start(self, side: str, spec: TrialSpec) -> None: ...

    def slot_end(self, side: str, rec: TrialRecord, samples: list[Sample]) -> None:
        self.done += 1
        what = (self.view.progress_line(rec, samples, self.meta) if rec.status == "ok"
                else f"{rec.spec.point} {rec.status.upper()}: {rec.error}")
        self._say(f"[{self.done}/{self.total}] {side} {what} (round {rec.spec.repeat + 1})")

    def end(self) -> None: ...


def _side(label: str, name: str, plan_profiles: Mapping[str, Any]) -> Side:
    """A profile by name (the plan's, a shipped one) or file; one line if it is wrong."""
    try:
        return Side(label, name, load(name, dict(plan_profiles)))
    except InputError as e:
        raise InputError(e.message, where=f"--{label.lower()} {e.where or name}", hint=e.hint) from None


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:+.1f} %"


def _table(doc: Mapping[str, Any], a_name: str, b_name: str) -> Table:
    t = Table(title=f"{doc['metric']}: B ({b_name}) against A ({a_name})", header_style="bold")
    for c in ("point", "A median", "B median", "B - A", "95 % interval", "n A/B", "outcome", "limit A -> B"):
        t.add_column(c)
    for p in doc["points"]:
        style = "green" if p["outcome"] == BETTER else "bold red" if p["outcome"] == WORSE else ""
        t.add_row(p["point"], num(p["median_a"]), num(p["median_b"]), _pct(p["diff"]),
                  f"[{_pct(p['low'])}, {_pct(p['high'])}]" if p["low"] is not None else "-",
                  f"{len(p['a'])}/{len(p['b'])}", f"[{style}]{p['outcome']}[/]" if style else p["outcome"],
                  f"{p['limit_a'] or '-'} -> {p['limit_b'] or '-'}" + (" (moved)" if p["limit_moved"] else ""))
    return t


@click.command("ab")
@click.argument("plan", type=click.Path(path_type=Path))
@click.option("--b", "b_profile", required=True, metavar="PROFILE",
              help="B's tuning profile: a name (the plan's [profiles.NAME], a shipped one) or a file (.toml, e.g. "
                   "from 'nicbench tune recommend -o').")
@click.option("--a", "a_profile", default=None, metavar="PROFILE|stock",
              help="A's profile (default: the plan's tuning, else stock: the hosts as they are).")
@click.option("--rounds", type=click.IntRange(1, 100), default=4, show_default=True,
              help="Repeats of each side per point, in ABBA order (replaces the plan's repeats).")
@store_option
@click.option("--keep-lab", is_flag=True, help="Leave the lab the A/B builds in place afterwards.")
@click.option("--no-report", is_flag=True, help="Store and judge, but write no pages.")
@click.option("--host-wide", is_flag=True, help="Also apply host-wide settings to this machine (lab); restored "
              "after each repeat.")
@click.option("--tag", "tags", multiple=True, callback=check_tags, help="Tag both runs (repeatable).")
@wait_option
@json_option
@click.pass_context
def ab_cmd(ctx: click.Context, plan: Path, b_profile: str, a_profile: str | None, rounds: int, store: str | None,
           keep_lab: bool, no_report: bool, host_wide: bool, tags: tuple[str, ...], wait: float | None) -> None:
    """Does profile B beat A on PLAN's points?  Both run interleaved on the
    same hosts, point by point, in ABBA order alternating over rounds, each
    repeat under its own profile (applied before it, restored after it, read
    back after every point, restored on every exit path).  Per point: both
    medians, B's difference with a 95 % Welch interval, B better / worse / no
    difference, and each side's limit.  Exit 0 when B won (better somewhere,
    worse nowhere), 9 when it did not."""
    p, text = load_plan(plan)
    s = study(p.study.kind)
    sides = (_side("A", a_profile or p.tuning or "stock", p.profiles), _side("B", b_profile, p.profiles))
    explicit_dir = p.output.dir if "output" in p.model_fields_set else None
    archive = Archive.open(plan_store(store, explicit_dir))
    try:
        _leftovers(ctx, archive, any(not x.profile.audit_only for x in sides), False)
        prog = _Lines(s.view, {"trim": getattr(p.study, "trim", 0.0)}) if not ctx.obj.get("json") else None
        out = execute_ab(p, text, sides, runner=s.runner, rounds=rounds, store=archive, progress=prog,
                         keep_lab=keep_lab, host_wide=host_wide, tags=tags, exiting=True,
                         wait=wait)
        views: dict[str, RunView] = {side: summarise(archive, r.run_id, VIEWS) for side, r in out.runs.items()}
        row = ab_result(archive, out.ab_id)
        result = judge(views["A"], views["B"], s.view)
        doc = document(row, result, views["A"], views["B"])
        finish_ab(archive, out.ab_id, out.status, result.b_won, doc)
        row = ab_result(archive, out.ab_id)
    finally:
        archive.close()
    page = None
    if not no_report:
        reports = {side: str(s.view.render(v, report_dir(v.run_dir))) for side, v in views.items()}
        page = write_ab_page(views["A"].run_dir.parent / out.ab_id, row, doc, views["A"], views["B"], s.view,
                             reports)
    data = {**doc, "status": out.status, "page": str(page) if page else None, "warnings": list(out.warnings)}
    if not ctx.obj.get("json"):
        Console(width=150).print(_table(doc, sides[0].name, sides[1].name))
    lines = [f"A/B {out.ab_id}: {result.summary}", f"method: {METHOD}"]
    lines += [f"warning: {w}" for w in out.warnings]
    if page:
        lines.append(f"page: {page}")
    emit(ctx, data, "\n".join(lines))
    if not result.b_won:
        worse = [x.point for x in result.points if x.outcome == WORSE]
        raise NotBetter(f"B ({sides[1].name}) did not beat A ({sides[0].name})" + (
            f": worse at {', '.join(worse)}" if worse else ": no point better at this confidence"),
            where=out.ab_id, hint="both runs and the judgement are stored; more --rounds narrow the interval")
