"""``nicbench tune recommend RUN [-o profile.toml]``: a tuning profile from
a run's verdicts (analysis/recommend.py), each setting with the evidence
line that motivates it and the points it should move; what the hosts cannot
take, and what is a plan change rather than tuning, listed beside it."""

from __future__ import annotations

import datetime as dt
import os
import tomllib
from collections import Counter
from pathlib import Path

import click

from ..analysis.recommend import IN_PROFILE, Recommendation, profile_doc, profile_toml, recommend
from ..core.errors import InputError
from ..core.validation import validate
from ..registry import VIEWS
from ..report.advice import run_input
from ..tuning.profile import Profile
from .options import emit, json_option, quoted, store_option
from .report import load_ref


def _description(rec: Recommendation) -> str:
    held = Counter(a.limit for a in rec.advice if a.status == IN_PROFILE)
    what = ", ".join(f"{k} at {len({p for a in rec.advice if a.limit == k for p in a.points})} point(s)"
                     for k in sorted(held)) or "nothing to change"
    return f"recommended by nicbench from run {rec.run_id}: {what}"


def _lines(rec: Recommendation, study: str, out: Path | None, text: str) -> list[str]:
    lines = [f"run {rec.run_id} ({study}): what its verdicts point to",
             "  " + ", ".join(f"{p}: {lim}" for p, lim in rec.limits.items())]
    inside = [a for a in rec.advice if a.status == IN_PROFILE]
    rest = [a for a in rec.advice if a.status != IN_PROFILE]
    if inside:
        lines.append("in the profile:")
        for a in inside:
            value = a.setting.get("value", a.setting.get("params")) if a.setting else None
            lines += [f"  {a.what} = {value!r}", f"      because: {a.limit} at {', '.join(a.points)}: {a.because}",
                      f"      sized: {a.note}"]
    if rest:
        lines.append("listed, not in the profile:")
        for a in rest:
            lines += [f"  {a.what} ({a.status}): {a.note}",
                      f"      because: {a.limit} at {', '.join(a.points)}: {a.because}"]
    if not rec.advice:
        lines.append("nothing to recommend: " + ("; ".join(rec.quiet) or "no point was held by anything tunable"))
    if out is not None:
        lines.append(f"profile: {out}")
        if inside:
            lines.append(f"prove it first: {quoted('nicbench', 'ab', 'PLAN', '--b', str(out))}")
    else:
        lines += ["", text.rstrip()]
    return lines


@click.command("recommend")
@click.argument("run_ref", metavar="RUN", default="latest")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="Write the profile here (TOML, as 'tune apply --profile FILE' and 'nicbench ab --b' take it).")
@store_option
@json_option
@click.pass_context
def recommend_cmd(ctx: click.Context, run_ref: str, output: Path | None, store: str | None) -> None:
    """A tuning profile from what held RUN's points (id, id prefix, run
    directory or 'latest'): a window -> socket buffers sized from the
    measured bandwidth-delay product, receiver drops -> backlog and rings,
    a core saturated in softirq -> queues/RPS, an engine -> the plan.
    Nothing for points at the wire.  Verdicts are recomputed from the
    archive, so older runs get them too."""
    view = load_ref(run_ref, store)
    rin = run_input(view, VIEWS[view.info.study].rows(view))
    if not any(p.limit for p in rin.points):
        why = ("no point has an ok repeat to judge" if any(hasattr(p, "verdict") for p in view.points)
               else f"the {view.info.study} study gives no verdicts yet")
        raise InputError(f"run {view.info.run_id} has no verdicts to recommend from: {why}", where="RUN",
                         hint=f"{quoted('nicbench', 'explain', view.info.run_id)} shows each point's limit; "
                              "recommend from a run whose points measured ok")
    rec = recommend(rin)
    description = _description(rec)
    when = dt.datetime.fromtimestamp(view.info.created).strftime("%Y-%m-%d %H:%M")
    text = profile_toml(rec, description, header=(
        f"Tuning recommended by nicbench from run {rec.run_id} ({view.info.study}, {when}).",
        "Each setting follows from the verdicts named above it; prove it with",
        "'nicbench ab PLAN --b THIS_FILE' before 'nicbench tune apply --profile THIS_FILE'.", ""))
    # what is written is exactly what tune apply and a plan's profiles take (a bug here, else)
    written = validate(Profile, tomllib.loads(text), "the recommended profile")
    assert written == validate(Profile, profile_doc(rec, description), "the recommended profile")
    if output is not None:
        tmp = output.with_name(f".{output.name}.tmp")
        tmp.write_text(text)
        os.replace(tmp, output)
    emit(ctx, {**rec.as_dict(), "study": view.info.study, "profile": profile_doc(rec, description),
               "output": str(output) if output else None}, "\n".join(_lines(rec, view.info.study, output, text)))
