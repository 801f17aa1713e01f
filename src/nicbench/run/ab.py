"""Two configurations of one plan, interleaved on the same hosts (``nicbench ab``).

Both sides run in one session on one set of hosts (a lab is built once),
each into a run of its own: per point, ``rounds`` repeats of each side in
ABBA order, the order alternating over rounds (A B, B A, A B, ...), so a
machine that drifts (other work starting, a cache warming) weighs on both
sides alike.  Every repeat runs under its side's profile, applied before it
and restored after it with a run's guarantees, from the session's own steps
(``run/session.py``): restore files written before the first change, all or
nothing (:func:`~nicbench.run.session.apply_in_force`), the settings read
back after every point (drift fails or flags the point as the plan says),
the tuning lock held throughout, and everything restored on every exit path
-- error, Ctrl-C, SIGTERM, more signals during clean-up.

Before the first point each side's profile is applied once, its hosts'
facts collected under it (each run keeps its own), and restored: a setting
a host refuses stops the A/B before any point ran, with nothing left
changed.  A side whose profile only audits (``stock``) applies nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Protocol

from ..core.errors import Interrupted, NicbenchError, PreflightError, Stopped, stopped_by
from ..hosts.lease import controller
from ..hosts.transport import LocalTransport, Transport
from ..plan.model import Plan
from ..records import HostFacts, Sample, TrialRecord, TrialSpec
from ..store.ab import finish_ab, insert_ab
from ..store.archive import Archive
from ..store.location import StoreLocation
from ..store.names import check_tag, new_run_id
from ..store.writer import RunWriter
from ..tuning.apply import restore_targets
from ..tuning.audit import audit as tune_audit
from ..tuning.lock import TuningLock
from ..tuning.profile import Profile
from ..tuning.restorefile import in_force
from ..tuning.types import Target, TuningPlan
from .hosts import OpenedHosts, open_hosts
from .session import (
    RunOutcome,
    StopSignals,
    _after_point,
    _handlers,
    _one_trial,
    _point_env,
    _quietly,
    _Run,
    _run_info,
    apply_in_force,
    gather_facts,
    store_facts,
    tuning_record,
    tuning_targets,
)
from .study import RunnerFactory

SIDES = ("A", "B")


@dataclass(frozen=True)
class Side:
    """One configuration: its label (A or B), the profile as the user named
    it (a name, or a file), and the profile."""

    label: str
    name: str
    profile: Profile


class ABProgress(Protocol):
    def begin(self, ab_id: str, total: int, runs: dict[str, str]) -> None: ...
    def slot_start(self, side: str, spec: TrialSpec) -> None: ...
    def slot_end(self, side: str, rec: TrialRecord, samples: list[Sample]) -> None: ...
    def end(self) -> None: ...


class NoABProgress:
    def begin(self, ab_id: str, total: int, runs: dict[str, str]) -> None: ...
    def slot_start(self, side: str, spec: TrialSpec) -> None: ...
    def slot_end(self, side: str, rec: TrialRecord, samples: list[Sample]) -> None: ...
    def end(self) -> None: ...


@dataclass(frozen=True)
class ABOutcome:
    ab_id: str
    status: str                               # done | interrupted | failed
    runs: dict[str, RunOutcome]               # side -> its run
    warnings: tuple[str, ...] = ()


def schedule(points: Sequence[tuple[str, dict]], study: str, rounds: int) -> list[tuple[str, TrialSpec]]:
    """(side, trial) in run order: per point, ``rounds`` rounds of A and B,
    A first in even rounds and B first in odd ones (ABBA ...).  Each side's
    trials are numbered in its own run; a trial's repeat is its round."""
    out: list[tuple[str, TrialSpec]] = []
    index = dict.fromkeys(SIDES, 0)
    for key, params in points:
        for r in range(rounds):
            for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
                i = index[side]
                out.append((side, TrialSpec(f"t{i + 1:04d}", i, study, key, r, params)))
                index[side] += 1
    return out


@dataclass
class _AB:
    """What the A/B holds between its steps."""

    plan: Plan
    sides: dict[str, Side]
    host_wide: bool
    opened: OpenedHosts | None = None
    runs: dict[str, _Run] = field(default_factory=dict)        # side -> the session's state of its run
    targets: list[Target] = field(default_factory=list)
    tuned: bool = False                 # a profile may be in force: restore on the way out
    in_slot: str | None = None          # the side whose point's study processes are up
    lock: TuningLock = field(default_factory=TuningLock)
    signals: StopSignals = field(default_factory=StopSignals)
    warnings: list[str] = field(default_factory=list)
    status: str = "failed"


def execute_ab(plan: Plan, plan_text: str, sides: tuple[Side, Side], *, runner: RunnerFactory, rounds: int,
               store: Archive | StoreLocation | Path | str | None = None, progress: ABProgress | None = None,
               keep_lab: bool = False, host_wide: bool = False, tags: tuple[str, ...] = (),
               hosts_for: Callable[..., OpenedHosts] = open_hosts, exiting: bool = False,
               wait: float | None = None) -> ABOutcome:
    """Run ``plan``'s points under both sides, interleaved, into two runs and
    one A/B row of the archive (its judgement is the results side's: the CLI
    reads both runs back and stores it)."""
    for tag in tags:
        check_tag(tag, "tags")
    if rounds < 1:
        raise ValueError("rounds must be at least 1")
    progress = progress or NoABProgress()
    slots = schedule(plan.study.points(), plan.study.kind, rounds)
    ab = _AB(plan, {s.label: s for s in sides}, host_wide)
    archive = store if isinstance(store, Archive) else Archive.open(store)
    ab_id = new_run_id(f"{plan.name}-ab")
    with _handlers(ab.signals.handle, lambda: exiting and bool(ab.signals.got)):
        try:
            _open(ab, runner, hosts_for if wait is None else partial(hosts_for, wait=wait), archive, plan_text,
                  sum(1 for s, _ in slots if s == "A"), tags)
            runs = {s: r.writer.run_dir.name for s, r in ab.runs.items() if r.writer is not None}
            insert_ab(archive, ab_id, plan.name, plan.study.kind, runs["A"], runs["B"], ab.sides["A"].name,
                      ab.sides["B"].name, rounds)
            for r in ab.runs.values():
                assert r.writer is not None
                r.writer.set_meta(ab={"id": ab_id, "runs": runs, "rounds": rounds})
            progress.begin(ab_id, len(slots), runs)
            for side, spec in slots:
                _slot(ab, side, spec, progress)
            for r in ab.runs.values():
                r.status = ("done-with-failures" if r.failed else "done-with-partial-points" if r.partial
                            else "done")
            ab.status = "done"
        except KeyboardInterrupt as e:
            ab.status = "interrupted"
            for r in ab.runs.values():
                r.status = "interrupted"
            what = stopped_by(Stopped(ab.signals.got[0]) if ab.signals.got else e)
            done = sum(r.ok + r.failed + r.partial for r in ab.runs.values())
            raise Interrupted(f"A/B {what} after {done} of {len(slots)} repeats; finished repeats are stored in "
                              f"runs {', '.join(r.writer.run_dir.name for r in ab.runs.values() if r.writer)}",
                              where=ab_id, hint="tuning is restored; nicbench ab runs it again") from None
        finally:
            _clean_up(ab, progress, keep_lab)
            if ab.runs and all(r.writer is not None for r in ab.runs.values()) and len(ab.runs) == 2:
                _quietly("closing the A/B in the store", lambda: finish_ab(archive, ab_id, ab.status, None),
                         "the A/B's status")
            if archive is not store:
                archive.close()
    return ABOutcome(ab_id, ab.status, {s: _outcome(r) for s, r in ab.runs.items()}, tuple(ab.warnings))


def _outcome(r: _Run) -> RunOutcome:
    assert r.writer is not None
    return RunOutcome(r.writer.run_dir.name, r.writer.run_dir, r.status, r.ok, r.failed,
                      tuple(r.warnings + r.writer.notes), r.partial, dict(r.unreachable), r.writer.archive.loc)


def _open(ab: _AB, runner: RunnerFactory, hosts_for: Callable[[Plan], OpenedHosts], archive: Archive,
          plan_text: str, per_side: int, tags: tuple[str, ...]) -> None:
    """Hosts, preflight, and each side once -- applied (all or nothing), its
    facts collected, restored -- then its run in the archive."""
    plan = ab.plan
    ab.opened = hosts_for(plan)
    hosts = ab.opened.hosts
    study = runner(plan, hosts)
    pre = study.preflight()
    ab.warnings = [*plan.warnings, *ab.opened.notes, *pre.warnings]
    if plan.study.repeats > 1:
        ab.warnings.append(f"the plan's repeats ({plan.study.repeats}) are replaced by the A/B's rounds")
    transports = hosts.transports()
    fact_hosts: list[tuple[Transport, str, list[str]]] = (
        [(transports[h], plan.hosts[h].role, hosts.spec.ifnames(h)) for h in plan.hosts]
        + ([(LocalTransport("machine"), "machine", [])] if hosts.shared_machine else []))
    facts = gather_facts(fact_hosts, list(pre.tools))
    _, ab.targets = tuning_targets(plan, hosts, facts)
    applying = [s for s in ab.sides.values() if not s.profile.audit_only]
    for side in applying:
        # what a host lacks is known from an audit, which changes nothing: said before any change
        missing = [x for x in tune_audit(side.profile, ab.targets, host_wide=ab.host_wide).rows
                   if x.not_in_force and not x.optional]
        if missing:
            raise PreflightError(
                f"side {side.label}'s profile cannot be applied, so nothing was changed and no point ran: " + "; ".join(
                    f"{x.host} {x.setting}: {x.status}{f' ({x.note})' if x.note else ''}" for x in missing),
                where=f"profile {side.name}", hint="drop the setting, or mark it optional = true if the A/B may go "
                                                   "on without it")
    if applying:
        left = in_force(ab.targets, ab.host_wide)
        if left:
            raise PreflightError(f"tuning from a killed run or an earlier 'nicbench tune apply' is in force "
                                 f"({', '.join(left)}): the A/B would stack on it and undo it at its end",
                                 where="tuning", hint="nicbench recover says which; nicbench tune restore puts it "
                                                      "back, then run again")
        ab.lock.acquire(f"A/B of {plan.name}")
    for label in SIDES:
        side = ab.sides[label]
        r = _Run(plan, ab.host_wide, opened=ab.opened, study=study)
        r.warnings = list(ab.warnings)
        result, side_facts = _under(ab, side, lambda: gather_facts(fact_hosts, list(pre.tools)), facts)
        r.warnings += [f"tuning ({label}): {x.host} {x.setting} (optional) is not in force: {x.status}"
                       + (f" ({x.note})" if x.note else "") for x in result.rows if x.not_in_force and x.optional]
        info = _run_info(r, pre, plan_text, side_facts, tuning_record(
            plan, result, ab.host_wide, not side.profile.audit_only, profile=side.name))
        info = replace(info, meta={**info.meta, "ab_side": label,
                                   "ab_profiles": {s.label: s.name for s in ab.sides.values()}})
        r.writer = RunWriter.create(archive, info, total=per_side, tags=tags)
        r.env = _point_env(r, r.writer, side_facts, result.pin)
        store_facts(r.writer, side_facts)
        r.started = True
        ab.runs[label] = r
    ab.opened.note_run(ab.runs["A"].writer.run_dir.name if ab.runs["A"].writer else "")
    held = ab.opened.host_leases
    if held is not None:
        for run in ab.runs.values():     # each side's run holds them, for 'nicbench runs --active'
            if run.writer is not None:
                run.writer.record_leases(controller(), held.since, held.targets())


def _under(ab: _AB, side: Side, collect: Callable[[], list[tuple[HostFacts, str]]],
           stock: list[tuple[HostFacts, str]]) -> tuple[TuningPlan, list[tuple[HostFacts, str]]]:
    """The side's profile applied once (all or nothing), the hosts' facts
    under it, and restored; an audit-only profile is audited."""
    if side.profile.audit_only:
        return tune_audit(side.profile, ab.targets, host_wide=ab.host_wide), stock
    ab.tuned = True
    result = apply_in_force(side.profile, ab.targets, ab.host_wide, f"{side.label} ({side.name})")
    facts = collect()
    restore_targets(ab.targets, ab.host_wide)
    ab.tuned = False
    return result, facts


def _slot(ab: _AB, side: str, spec: TrialSpec, progress: ABProgress) -> None:
    """One repeat of one side: its profile applied, the point, the settings
    read back, the study's processes stopped, the profile restored."""
    r = ab.runs[side]
    assert r.study is not None and r.writer is not None
    profile = ab.sides[side].profile
    if not profile.audit_only:
        ab.tuned = True
        r.applied = list(apply_in_force(profile, ab.targets, ab.host_wide, f"{side} ({ab.sides[side].name})").rows)
        r.tuned = ab.targets
    ab.in_slot = side
    r.writer.write_raws(r.study.start(r.env, r.writer.raw_dir(r.study.kind)))
    progress.slot_start(side, spec)
    out = _after_point(r, _one_trial(r.study, r.env, spec, r.writer))
    r.writer.write_trial(out.record, out.samples, out.raws)
    r.ok += out.record.status == "ok"
    r.failed += out.record.status == "failed"
    r.partial += out.record.status == "partial"
    for host, t in ab.opened.hosts.transports().items() if ab.opened else ():
        if host not in r.unreachable and not t.alive():
            r.unreachable[host] = spec.point
    progress.slot_end(side, out.record, out.samples)
    ab.in_slot = None
    r.writer.write_raws(r.study.stop(r.env, r.writer.raw_dir(r.study.kind)))
    if not profile.audit_only:
        # restore_targets leaves (and says) a setting someone else changed since
        left = restore_targets(ab.targets, ab.host_wide)
        r.warnings += [f"tuning restore after {spec.point} ({side}): {x}" for x in left]
        r.applied, r.tuned = [], []
        ab.tuned = False
    if out.record.status == "interrupted":
        raise KeyboardInterrupt


def _clean_up(ab: _AB, progress: ABProgress, keep_lab: bool) -> None:
    """As a run's clean-up (session._clean_up), for two runs on one set of
    hosts: the study's processes stopped, tuning restored while the hosts'
    transports still work, sessions closed, the lock released, both runs
    finished, a lab the A/B built removed."""
    ab.signals.shielded = True
    o = ab.opened
    lab = o.lab.spec.name if o is not None and o.lab is not None else None
    lab_down = f"nicbench lab down {lab}" if lab else "kill the A/B's processes on its hosts"
    _quietly("closing the progress display", progress.end, "nothing")
    r = ab.runs.get(ab.in_slot or "")
    if r is not None and r.study is not None and r.writer is not None:
        writer, st, env = r.writer, r.study, r.env
        _quietly(f"stopping the {st.kind} study's own processes",
                 lambda: writer.write_raws(st.stop(env, writer.raw_dir(st.kind))),
                 f"its server processes and temporary files: {lab_down}")
    untune_error: list[str] = []
    if ab.tuned:
        try:
            restore_targets(ab.targets, ab.host_wide)
        except Exception as e:  # noqa: BLE001 - recorded with the runs, and the hosts still go
            untune_error.append(str(e))
            print(e.one_line() if isinstance(e, NicbenchError) else f"nicbench: {e}", file=sys.stderr)
    if o is not None:
        _quietly("releasing the host leases", o.release_hosts, "nothing: a lease ends with its holder's session")
        _quietly("ending the hosts' sessions and processes", o.hosts.close, lab_down)
    ab.lock.release()
    for side, run in ab.runs.items():
        if run.writer is not None:
            _quietly(f"closing run {side} in the store", _finisher(run, untune_error),
                     "the run's status: its finished points are stored")
    if o is not None:
        _quietly("removing the lab the A/B built", lambda: o.remove_lab(keep_lab), lab_down)


def _finisher(run: _Run, untune_error: list[str]) -> Callable[[], None]:
    def finish() -> None:
        assert run.writer is not None
        run.writer.finish(run.status, ok=run.ok, failed=run.failed, partial=run.partial,
                          hosts={h: f"host-unreachable (after point {p})" for h, p in run.unreachable.items()},
                          **({"untune_error": untune_error[0]} if untune_error else {}))
    return finish
