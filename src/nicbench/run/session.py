"""A whole run: lab, preflight, every trial in order, storage, teardown.

Side effects only; what to run comes from the plan, what it means is worked
out later by ``analysis``.  Guarantees:
- preflight lists every problem at once, before the run directory exists;
- the run is in the archive from its start (a crash leaves a visible run,
  shown as aborted once its process is gone); each finished trial is
  committed on its own (a crash keeps it);
- on success, error, Ctrl-C or SIGTERM every process nicbench started is
  killed by process group and a lab this run built is torn down.
"""

from __future__ import annotations

import os
import platform
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import Any, Protocol

from .. import __version__
from ..core.errors import Interrupted, NicbenchError, PreflightError, Stopped, stopped_by
from ..hosts.base import Hosts
from ..hosts.facts import collect_quietly
from ..hosts.lease import controller
from ..hosts.transport import LocalTransport, Transport, each_host
from ..plan.matrix import trials as plan_trials
from ..plan.model import Plan
from ..records import HostFacts, RawOutput, RunInfo, Sample, TrialRecord, TrialSpec
from ..store.archive import Archive
from ..store.location import StoreLocation
from ..store.names import check_tag, new_run_id
from ..store.writer import RunWriter
from ..tuning.apply import apply as tune_apply
from ..tuning.apply import restore_targets
from ..tuning.audit import audit as tune_audit
from ..tuning.audit import drift as tuning_drift
from ..tuning.lock import TuningLock
from ..tuning.profile import Profile
from ..tuning.profile import load as load_profile
from ..tuning.restorefile import in_force
from ..tuning.types import Row, Target, TuningPlan
from .hosts import OpenedHosts, open_hosts
from .kit import PointEnv
from .study import Preflight, RunnerFactory, StudyRunner, TrialOutcome


class ProgressSink(Protocol):
    def begin(self, run_id: str, total: int, meta: Mapping[str, Any]) -> None: ...
    def trial_start(self, spec: TrialSpec) -> None: ...
    def trial_end(self, rec: TrialRecord, samples: list[Sample]) -> None: ...
    def end(self) -> None: ...


class NoProgress:
    def begin(self, run_id: str, total: int, meta: Mapping[str, Any]) -> None: ...
    def trial_start(self, spec: TrialSpec) -> None: ...
    def trial_end(self, rec: TrialRecord, samples: list[Sample]) -> None: ...
    def end(self) -> None: ...


@dataclass(frozen=True)
class RunOutcome:
    run_id: str
    run_dir: Path
    status: str
    ok: int
    failed: int
    warnings: tuple[str, ...]
    partial: int = 0
    unreachable: Mapping[str, str] = field(default_factory=dict)   # host -> the point it was lost at
    archive: StoreLocation | None = None      # where the run was written (the local spool if PostgreSQL went away)


def cpu_facts() -> dict:
    """What the CPU figures of this run are about: one machine shared by all lab
    hosts, its CPU count, and its nominal MHz (for estimated cycles per byte:
    this VM has no hardware counters, so cycles are estimated, never measured)."""
    mhz = None
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("cpu MHz"):
                mhz = float(line.split(":")[1])
                break
    except (OSError, ValueError):
        pass
    return {"scope": "machine", "shared_by": "all lab hosts", "cpus": os.cpu_count(), "mhz": mhz,
            "mhz_source": "/proc/cpuinfo 'cpu MHz' (nominal, no hardware counters)" if mhz else None,
            "nic_irqs": {},
            "nic_irq_note": "NIC interrupts: none to count, the lab's interfaces are veths (no IRQs); their "
                            "receive and transmit work shows as NET_RX/NET_TX softirqs, counted per CPU from "
                            "/proc/softirqs."}


def _quietly(what: str, step: Callable[[], object], undo: str) -> bool:
    """Run one clean-up step; its failure must not stop the next one, and is
    said with what is left undone and how to undo it."""
    try:
        step()
        return True
    except Exception as e:  # noqa: BLE001 - reported, and the next step still runs
        msg = e.one_line().removeprefix("nicbench: ") if isinstance(e, NicbenchError) else f"{type(e).__name__}: {e}"
        print(f"nicbench: clean-up: {what} failed: {msg} (left undone: {undo})", file=sys.stderr)
        return False


_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def _handlers(handler: Callable[[int, FrameType | None], None],
              interrupted: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """``handler`` for SIGINT, SIGTERM and SIGHUP while the block runs.  Only
    the main thread may set handlers (a run started from another thread keeps
    Python's own: Ctrl-C reaches the main thread as usual).  A run that was
    ``interrupted`` has finished its clean-up when the block ends: when the
    process is about to exit (the CLI: ``execute(exiting=True)``), later
    signals are ignored from then on, so one more Ctrl-C cannot replace the
    run's one-line outcome (where its finished points are) by a bare
    "interrupted" or a traceback while the process exits."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, handler) for s in _STOP_SIGNALS}
    try:
        yield
    finally:
        stopped = interrupted()
        for s, h in old.items():
            signal.signal(s, signal.SIG_IGN if stopped else h)


class StopSignals:
    """A run's SIGINT, SIGTERM and SIGHUP.  The first one interrupts the run
    (KeyboardInterrupt: the same clean-up path as Ctrl-C); every later one,
    and any while clean-up runs, is noted and said, never raised, so Ctrl-C
    again or a service manager's SIGTERM cannot leave tuning half-restored or
    a lab up.  (Blocking the signals in the main thread is not enough: the
    kernel then hands a process-wide signal to another thread, and Python
    runs the handler in the main thread all the same.)"""

    def __init__(self) -> None:
        self.got: list[int] = []
        self.shielded = False

    def handle(self, signum: int, frame: FrameType | None) -> None:
        self.got.append(signum)
        if not self.shielded:
            self.shielded = True
            raise Stopped(signum)
        if len(self.got) <= 2:
            print(f"nicbench: {signal.Signals(signum).name} during clean-up: finishing it first "
                  "(tuning, processes, lab)", file=sys.stderr)


def gather_facts(hosts: list[tuple[Transport, str, list[str]]],
                 tools: list[str]) -> list[tuple[HostFacts, str]]:
    """Facts of every (transport, role, interfaces), each with its raw text.

    A host whose facts cannot be read gets one fact saying why: facts explain
    results, they never stop a run."""
    got = each_host(lambda h: collect_quietly(h[0], h[1], h[2], tools), dict(enumerate(hosts)))
    for v in got.values():
        if isinstance(v, BaseException):
            raise v                # a bug, not a host: collect_quietly turns host trouble into a fact
    return [got[i] for i in range(len(hosts))]


def nic_irqs(collected: list[tuple[HostFacts, str]], host: str, ifname: str | None) -> dict[str, str]:
    """IRQ -> label of the study server's test interface, from its facts (a
    lab veth has none: the dict is empty and only softirqs are counted)."""
    for h, _ in collected:
        if h.host == host and ifname:
            irqs = h.value(f"if.{ifname}.irqs")
            if isinstance(irqs, list):
                return {str(x).split(":", 1)[0]: f"{ifname}:{str(x).split(':', 1)[-1]}" for x in irqs}
    return {}


def store_facts(writer: RunWriter, collected: list[tuple[HostFacts, str]]) -> None:
    raws = []
    d = writer.run_dir / "raw" / "facts"
    d.mkdir(parents=True, exist_ok=True)
    for h, raw in collected:
        rel = writer.write_file(d / f"{h.host}.txt", raw)
        raws.append(RawOutput("facts", h.host, h.role, "facts", "stdout", rel))
    writer.write_facts([h for h, _ in collected], raws)


def tuning_targets(plan: Plan, hosts: Hosts, facts: list[tuple[HostFacts, str]]) -> tuple[Profile, list[Target]]:
    """The plan's tuning profile (without one, the stock profile, which only
    audits: every run records the tuning state it ran in) and its hosts as
    targets (in the lab, host-wide settings are the machine's)."""
    profile = load_profile(plan.tuning or "stock", dict(plan.profiles))
    by_host = {h.host: h for h, _ in facts}
    return profile, [Target(h, plan.hosts[h].role, hosts.transport(h), hosts.restore_id(h), hosts.spec.host(h).ifname,
                            by_host.get(h), lab=hosts.shared_machine) for h in plan.hosts]


def timestamps(facts: list[tuple[HostFacts, str]], hosts: list[str]) -> dict[str, int | None]:
    """tcp_timestamps of the hosts as the points run (the ceiling depends on it),
    from the facts in force: one read per host, already made."""
    out: dict[str, int | None] = {}
    for h, _ in facts:
        v = h.value("sysctl.net.ipv4.tcp_timestamps")
        out[h.host] = v if isinstance(v, int) and not isinstance(v, bool) else None
    return {h: out.get(h) for h in hosts}


def tune_for_run(plan: Plan, profile: Profile, targets: list[Target], facts: list[tuple[HostFacts, str]],
                 fact_hosts: list[tuple[Transport, str, list[str]]], tools: list[str],
                 host_wide: bool) -> tuple[TuningPlan, list[tuple[HostFacts, str]]]:
    """Apply (or only audit) the run's profile: all or nothing.  A setting
    that is not in force on a host afterwards (refused, missing, unknown)
    stops the run before its first point unless the profile marks it
    optional; the clean-up then restores what was applied.  Returns the
    audit with each row's outcome, and the facts the points run with
    (collected again when something was changed)."""
    if profile.audit_only:
        return tune_audit(profile, targets, host_wide=host_wide), facts
    return apply_in_force(profile, targets, host_wide, str(plan.tuning)), gather_facts(fact_hosts, tools)


def apply_in_force(profile: Profile, targets: list[Target], host_wide: bool, name: str) -> TuningPlan:
    """Apply ``profile``, all or nothing: a setting that is not in force on a
    host afterwards (refused, missing, unknown) raises, unless the profile
    marks it optional; the caller's clean-up restores what was applied."""
    result = tune_apply(profile, targets, host_wide=host_wide)
    missing = [r for r in result.rows if r.not_in_force and not r.optional]
    if missing:
        raise PreflightError(
            "tuning profile not in force, so no point runs: " + "; ".join(
                f"{r.host} {r.setting}: {r.status}{f' ({r.note})' if r.note else ''}" for r in missing),
            where=f"tuning profile {name}",
            hint="what was applied is restored now; mark a setting optional = true if the run may go on "
                 "without it")
    return result


def tuning_record(plan: Plan, result: TuningPlan, host_wide: bool, applied: bool,
                  profile: str | None = None) -> dict[str, object]:
    """What the run's info keeps of its tuning (``profile``: its name, when not the plan's)."""
    return {"profile": profile or plan.tuning or "stock", "host_wide": host_wide, "applied": applied,
            "from_plan": profile is None and bool(plan.tuning), "rows": [r.to_dict() for r in result.rows],
            "pinning": result.pin_cpus, "on_drift": plan.on_tuning_drift}


@dataclass
class _Run:
    """What one run holds between its steps (see :func:`execute`)."""

    plan: Plan
    host_wide: bool
    opened: OpenedHosts | None = None
    study: StudyRunner | None = None
    writer: RunWriter | None = None
    env: PointEnv = field(default_factory=PointEnv)
    tuned: list[Target] = field(default_factory=list)
    applied: list[Row] = field(default_factory=list)         # the profile's rows as the apply left them
    lock: TuningLock = field(default_factory=TuningLock)
    warnings: list[str] = field(default_factory=list)
    started: bool = False
    ok: int = 0
    failed: int = 0
    partial: int = 0
    unreachable: dict[str, str] = field(default_factory=dict)   # host -> the first point it was lost at
    status: str = "failed"
    signals: StopSignals = field(default_factory=StopSignals)


def execute(plan: Plan, plan_text: str, *, runner: RunnerFactory,
            store: Archive | StoreLocation | Path | str | None = None, progress: ProgressSink | None = None,
            keep_lab: bool = False, host_wide: bool = False, tags: tuple[str, ...] = (),
            hosts_for: Callable[..., OpenedHosts] = open_hosts, exiting: bool = False,
            wait: float | None = None) -> RunOutcome:
    """Run ``plan`` with the study runner ``runner`` makes (the CLI gets it
    from the study registry: the session knows no study) on the hosts
    ``hosts_for`` opens (the lab or real hosts; fakes in unit tests), into
    the archive ``store`` (an open one, or a path/URL; None: the default).
    ``wait``: seconds to queue for a lab or host another run holds (None:
    refused at once)."""
    for tag in tags:                   # the CLI checked them already; api callers too, before anything
        check_tag(tag, "tags")
    progress = progress or NoProgress()
    trial_list = plan_trials(plan)
    r = _Run(plan, host_wide)
    # the archive first: a store that cannot be reached is known before any host is touched
    archive = store if isinstance(store, Archive) else Archive.open(store)
    with _handlers(r.signals.handle, lambda: exiting and bool(r.signals.got)):
        try:
            r.opened = hosts_for(plan) if wait is None else hosts_for(plan, wait=wait)
            r.study = runner(plan, r.opened.hosts)
            pre = r.study.preflight()
            r.warnings = [*plan.warnings, *r.opened.notes, *pre.warnings]
            facts, tuning, pin = _facts_and_tuning(r, pre)
            info = _run_info(r, pre, plan_text, facts, tuning)
            r.writer = RunWriter.create(archive, info, total=len(trial_list), tags=tags)
            r.opened.note_run(info.run_id)
            if r.opened.host_leases is not None:
                r.writer.record_leases(controller(), r.opened.host_leases.since, r.opened.host_leases.targets())
            r.env = _point_env(r, r.writer, facts, pin)
            store_facts(r.writer, facts)
            r.started = True
            r.writer.write_raws(r.study.start(r.env, r.writer.raw_dir(r.study.kind)))
            progress.begin(info.run_id, len(trial_list), info.meta)
            for t in trial_list:
                progress.trial_start(t)
                out = _after_point(r, _one_trial(r.study, r.env, t, r.writer))
                r.writer.write_trial(out.record, out.samples, out.raws)
                r.ok += out.record.status == "ok"
                r.failed += out.record.status == "failed"
                r.partial += out.record.status == "partial"
                _note_unreachable(r, t.point)
                progress.trial_end(out.record, out.samples)
                if out.record.status == "interrupted":
                    raise KeyboardInterrupt
            r.status = "done-with-failures" if r.failed else "done-with-partial-points" if r.partial else "done"
        except KeyboardInterrupt as e:
            r.status = "interrupted"
            # the point in flight re-raises a bare one: the signal noted says what it was
            what = stopped_by(Stopped(r.signals.got[0]) if r.signals.got else e)
            if r.writer is None:        # before the run was recorded: nothing to render
                raise Interrupted(f"run {what} before its first point, while it prepared the hosts; nothing "
                                  "was recorded", hint="what it had changed (tuning, processes, lab) is undone; "
                                  "run it again") from None
            raise Interrupted(f"run {what} after {r.ok + r.failed} of {len(trial_list)} points; "
                              "finished points are stored", where=str(r.writer.run_dir),
                              hint="nicbench report latest renders what was finished") from None
        finally:
            _clean_up(r, progress, keep_lab)
            if archive is not store:
                archive.close()
    assert r.writer is not None
    return RunOutcome(r.writer.run_dir.name, r.writer.run_dir, r.status, r.ok, r.failed,
                      tuple(r.warnings + r.writer.notes), r.partial, dict(r.unreachable), r.writer.archive.loc)


def _facts_and_tuning(r: _Run, pre: Preflight) -> tuple[list[tuple[HostFacts, str]], dict[str, object],
                                                         dict[str, list[str]]]:
    """Every host's facts, and the tuning the points run in: the plan's profile
    applied (restore files first), or the stock profile audited."""
    assert r.opened is not None
    plan, hosts = r.plan, r.opened.hosts
    transports = hosts.transports()
    # the hosts (lab: their namespaces' interfaces and sysctls) and, in the
    # lab, the machine they share (host-wide sysctls, services, CPU)
    fact_hosts: list[tuple[Transport, str, list[str]]] = (
        [(transports[h], plan.hosts[h].role, hosts.spec.ifnames(h)) for h in plan.hosts]
        + ([(LocalTransport("machine"), "machine", [])] if hosts.shared_machine else []))
    facts = gather_facts(fact_hosts, list(pre.tools))
    profile, targets = tuning_targets(plan, hosts, facts)
    if not profile.audit_only:
        left = in_force(targets, r.host_wide)
        if left:
            raise PreflightError(f"tuning from a killed run or an earlier 'nicbench tune apply' is in force "
                                 f"({', '.join(left)}): this run would stack on it and undo it at its end",
                                 where="tuning", hint="nicbench recover says which; nicbench tune restore puts it "
                                                      "back, then run again")
        r.lock.acquire(f"run of {plan.name}")
        r.tuned = targets         # before the first change: a Ctrl-C mid-apply still restores
    result, facts = tune_for_run(plan, profile, targets, facts, fact_hosts, list(pre.tools), r.host_wide)
    if not profile.audit_only:
        r.applied = list(result.rows)
    r.warnings += [f"tuning: {x.host} {x.setting} (optional) is not in force: {x.status}"
                   + (f" ({x.note})" if x.note else "") for x in result.rows if x.not_in_force and x.optional]
    return facts, tuning_record(plan, result, r.host_wide, not profile.audit_only), result.pin


def _run_info(r: _Run, pre: Preflight, plan_text: str, facts: list[tuple[HostFacts, str]],
              tuning: dict[str, object]) -> RunInfo:
    """What the store keeps of the run as a whole: the hosts, the link, the
    study's own record of itself, whose CPUs the figures are, the tuning."""
    assert r.opened is not None and r.study is not None
    plan, hosts = r.plan, r.opened.hosts
    spec = hosts.spec
    server_if = spec.host(plan.server).ifname
    return RunInfo(new_run_id(plan.name), plan.name, r.study.kind, time.time(), plan_text, "plan", __version__, {
        "lab": spec.to_dict(), "server": plan.server, "clients": plan.clients, **pre.meta,
        "kernel": platform.release(), "warnings": r.warnings,
        "link": {"mtu": spec.mtu, "speed_bps": spec.speed_bps, "client_speed_bps": spec.client_speed_bps,
                 "ip": 4, "shaped": spec.shaped,
                 # with GSO on, a veth counts 64 KB super-packets, not frames
                 "counters_count_frames": spec.shaped,
                 "tcp_timestamps": timestamps(facts, [plan.server, *plan.clients])},
        "cpu": cpu_facts() if hosts.shared_machine else {
            "scope": "host", "host": plan.server, "cpus": None, "mhz": None,
            "nic_irqs": nic_irqs(facts, plan.server, server_if),
            "shared_by": "nothing: the study server's own CPUs, read over SSH"}, "tuning": tuning,
        "lab_reused": r.opened.lab is not None and not r.opened.owned, "pid": os.getpid(),
        "host_transport": plan.lab.transport,
        "ssh": {h: c.meta() for h, c in hosts.checks.items()}})


def _point_env(r: _Run, writer: RunWriter, facts: list[tuple[HostFacts, str]],
               pin: dict[str, list[str]]) -> PointEnv:
    """What the study is handed for every point.  Every lab host runs on this
    one machine, so CPU is sampled once, for all; on real hosts it is the
    study server's own (the host under test, as the seeds report it)."""
    assert r.opened is not None
    hosts, server = r.opened.hosts, r.plan.server
    ifnames = {h.name: h.ifname for h in hosts.spec.hosts}
    return PointEnv(rel=writer.rel, pin=pin, nic_irqs=nic_irqs(facts, server, ifnames.get(server)), ifnames=ifnames,
                    cpu_transport=LocalTransport("machine") if hosts.shared_machine else hosts.transport(server),
                    cpu_machine="machine" if hosts.shared_machine else server)


def _one_trial(study: StudyRunner, env: PointEnv, spec: TrialSpec, writer: RunWriter) -> TrialOutcome:
    """One point.  A bug met while running or reading it (a parser meeting
    output it was not written for) fails that point, with its raw outputs
    kept and the error named; it never takes the rest of the run with it."""
    raw_dir = writer.raw_dir(spec.trial_id)
    started = time.time()
    try:
        return study.trial(env, spec, raw_dir)
    except (KeyboardInterrupt, NicbenchError):
        raise
    except Exception as e:  # noqa: BLE001 - recorded with the point, and the run goes on
        raws = [RawOutput(spec.trial_id, "", "", "", "stdout", writer.rel(p))
                for p in sorted(raw_dir.rglob("*")) if p.is_file()]
        rec = TrialRecord(spec, "failed", started, time.time(),
                          f"internal error while running or reading the point: {type(e).__name__}: {e} "
                          "(its raw outputs are kept with the run; please report this)",
                          {"internal_error": traceback.format_exc()[-4000:]})
        return TrialOutcome(rec, [], raws)


def _note_unreachable(r: _Run, point: str) -> None:
    """Hosts lost during the run (SSH connection gone, namespace gone), each with
    the point it was found after: the run's outcome says so per host."""
    assert r.opened is not None
    for host, t in r.opened.hosts.transports().items():
        if host not in r.unreachable and not t.alive():
            r.unreachable[host] = point


def _after_point(r: _Run, out: TrialOutcome) -> TrialOutcome:
    """The profile's settings read back after the point (one command per
    host): one changed by someone else during the run fails the point, or
    flags it, as the plan says."""
    if not r.applied or out.record.status == "interrupted":
        return out
    try:
        moved = tuning_drift(r.applied, r.tuned)
    except NicbenchError as e:
        moved = []
        r.warnings.append(f"tuning could not be read back after {out.record.spec.point}: {e.message}")
    if not moved:
        return out
    what = "; ".join(f"{x.host} {x.setting}: {x.note}" for x in moved)
    rec = out.record
    if r.plan.on_tuning_drift == "fail" and rec.status == "ok":
        rec = replace(rec, status="failed", error=f"tuning drifted during the point: {what}",
                      meta={**rec.meta, "tuning_drift": [x.to_dict() for x in moved]})
    else:
        warnings = [*(rec.meta.get("warnings") or []), f"tuning drifted during the point: {what}"]
        rec = replace(rec, meta={**rec.meta, "warnings": warnings, "tuning_drift": [x.to_dict() for x in moved]})
        # kept, so said where the run's outcome is read (the summary's warnings), not only in its meta
        r.warnings.append(f"tuning drifted during {rec.spec.point} (repeat {rec.spec.repeat + 1}), "
                          f"the point is kept as the plan says (on_tuning_drift = \"flag\"): {what}")
    return replace(out, record=rec)


def _clean_up(r: _Run, progress: ProgressSink, keep_lab: bool) -> None:
    """Whatever happened: the study stopped, tuning restored (while every
    host's transport still works: over SSH, before the connections close and
    the lab's sshds go), sessions closed, the run finished, a lab this run
    built removed.  Signals arriving meanwhile cannot cut it short
    (:class:`StopSignals`); a step that fails says what it left and how to undo it."""
    r.signals.shielded = True
    lab = r.opened.lab.spec.name if r.opened is not None and r.opened.lab is not None else None
    lab_down = f"nicbench lab down {lab}" if lab else "kill the run's processes on its hosts"
    _quietly("closing the progress display", progress.end, "nothing")
    untune_error: list[str] = []
    w, st = r.writer, r.study
    if r.started and st is not None and w is not None:
        _quietly(f"stopping the {st.kind} study's own processes",
                 lambda: w.write_raws(st.stop(r.env, w.raw_dir(st.kind))),
                 f"its server processes and temporary files: {lab_down}")
    untune_left: list[str] = []
    if r.tuned:
        try:
            untune_left = restore_targets(r.tuned, r.host_wide)
            for note in untune_left:
                print(f"nicbench: tuning restore: {note}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 - recorded with the run, and the hosts still go
            untune_error.append(str(e))
            print(e.one_line() if isinstance(e, NicbenchError) else f"nicbench: {e}", file=sys.stderr)
    o = r.opened
    if o is not None:
        # the study is stopped and tuning restored: the hosts are free for another
        # run (before the sessions close: over SSH a lease's holder rides them)
        _quietly("releasing the host leases", o.release_hosts, "nothing: a lease ends with its holder's session")
        # sessions end (remote watchdogs fire), tracked processes die
        _quietly("ending the hosts' sessions and processes", o.hosts.close, lab_down)
    r.lock.release()
    if w is not None:
        _quietly("closing the run in the store",
                 lambda: w.finish(r.status, ok=r.ok, failed=r.failed, partial=r.partial,
                                  hosts={h: f"host-unreachable (after point {p})" for h, p in r.unreachable.items()},
                                  **({"untune_error": untune_error[0]} if untune_error else {}),
                                  **({"untune_left": untune_left} if untune_left else {})),
                 "the run's status: its finished points are stored")
    if o is not None:
        _quietly("removing the lab this run built", lambda: o.remove_lab(keep_lab), lab_down)
