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
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .. import __version__
from ..core.errors import Interrupted, LabError, NicbenchError, PreflightError
from ..hosts.base import Hosts
from ..hosts.facts import collect_quietly
from ..hosts.transport import LocalTransport, Transport, each_host
from ..plan.matrix import trials as plan_trials
from ..plan.model import Plan
from ..records import HostFacts, RawOutput, RunInfo, Sample, TrialRecord, TrialSpec
from ..store.archive import Archive
from ..store.location import StoreLocation
from ..store.names import new_run_id
from ..store.writer import RunWriter
from ..tuning.apply import apply as tune_apply
from ..tuning.apply import restore as tune_restore
from ..tuning.audit import audit as tune_audit
from ..tuning.lock import TuningLock
from ..tuning.profile import Profile
from ..tuning.profile import load as load_profile
from ..tuning.restorefile import in_force
from ..tuning.types import Target
from .hosts import OpenedHosts, open_hosts
from .kit import PointEnv
from .study import Preflight, RunnerFactory, StudyRunner


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


def _quietly(step) -> None:
    """Run one clean-up step; its failure must not stop the next one."""
    try:
        step()
    except Exception as e:  # noqa: BLE001 - reported, and the next step still runs
        print(f"nicbench: clean-up step failed: {e}", file=sys.stderr)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (and SIGHUP) take the same clean-up path as Ctrl-C."""
    def handler(signum, frame):  # noqa: ARG001
        raise KeyboardInterrupt
    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


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
        path = d / f"{h.host}.txt"
        path.write_text(raw)
        raws.append(RawOutput("facts", h.host, h.role, "facts", "stdout", writer.rel(path)))
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
                 host_wide: bool) -> tuple[dict[str, object], list[tuple[HostFacts, str]], dict[str, list[str]]]:
    """Apply (or only audit) the run's profile; the record of it, the facts
    the points run with (collected again when something was changed), and
    the tools' pinning per host."""
    apply_it = not profile.audit_only
    result = (tune_apply if apply_it else tune_audit)(profile, targets, host_wide=host_wide)
    if apply_it:
        facts = gather_facts(fact_hosts, tools)
    return {"profile": plan.tuning or "stock", "host_wide": host_wide, "applied": apply_it,
            "from_plan": bool(plan.tuning), "rows": [r.to_dict() for r in result.rows],
            "pinning": result.pin_cpus}, facts, result.pin


def untune(targets: list[Target], host_wide: bool) -> None:
    """Restore every target (and the machine, if host-wide settings were applied)."""
    groups = [(t.transport, t.restore_id) for t in targets]
    if host_wide:
        groups.append((LocalTransport("machine"), "machine"))
    errors = []
    for tr, rid in groups:
        try:
            tune_restore(tr, rid)
        except NicbenchError as e:
            errors.append(e.one_line())
    if errors:
        raise LabError("tuning not fully restored: " + "; ".join(errors), where="tuning",
                       hint="run 'nicbench tune restore' (the restore files are kept)")


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
    lock: TuningLock = field(default_factory=TuningLock)
    warnings: list[str] = field(default_factory=list)
    started: bool = False
    ok: int = 0
    failed: int = 0
    status: str = "failed"


def execute(plan: Plan, plan_text: str, *, runner: RunnerFactory,
            store: Archive | StoreLocation | Path | str | None = None, progress: ProgressSink | None = None,
            keep_lab: bool = False, host_wide: bool = False, tags: tuple[str, ...] = (),
            hosts_for: Callable[[Plan], OpenedHosts] = open_hosts) -> RunOutcome:
    """Run ``plan`` with the study runner ``runner`` makes (the CLI gets it
    from the study registry: the session knows no study) on the hosts
    ``hosts_for`` opens (the lab or real hosts; fakes in unit tests), into
    the archive ``store`` (an open one, or a path/URL; None: the default)."""
    progress = progress or NoProgress()
    trial_list = plan_trials(plan)
    r = _Run(plan, host_wide)
    # the archive first: a store that cannot be reached is known before any host is touched
    archive = store if isinstance(store, Archive) else Archive.open(store)
    with sigterm_as_interrupt():
        try:
            r.opened = hosts_for(plan)
            r.study = runner(plan, r.opened.hosts)
            pre = r.study.preflight()
            r.warnings = list(pre.warnings)
            facts, tuning, pin = _facts_and_tuning(r, pre)
            info = _run_info(r, pre, plan_text, facts, tuning)
            r.writer = RunWriter.create(archive, info, total=len(trial_list), tags=tags)
            r.env = _point_env(r, r.writer, facts, pin)
            store_facts(r.writer, facts)
            r.started = True
            r.writer.write_raws(r.study.start(r.env, r.writer.raw_dir(r.study.kind)))
            progress.begin(info.run_id, len(trial_list), info.meta)
            for t in trial_list:
                progress.trial_start(t)
                out = r.study.trial(r.env, t, r.writer.raw_dir(t.trial_id))
                r.writer.write_trial(out.record, out.samples, out.raws)
                r.ok += out.record.status == "ok"
                r.failed += out.record.status == "failed"
                progress.trial_end(out.record, out.samples)
                if out.record.status == "interrupted":
                    raise KeyboardInterrupt
            r.status = "done" if not r.failed else "done-with-failures"
        except KeyboardInterrupt:
            r.status = "interrupted"
            raise Interrupted(f"run stopped by the user after {r.ok + r.failed} of {len(trial_list)} points; "
                              "finished points are stored", where=str(r.writer.run_dir) if r.writer else None,
                              hint="nicbench report latest renders what was finished") from None
        finally:
            _clean_up(r, progress, keep_lab)
            if archive is not store:
                archive.close()
    assert r.writer is not None
    return RunOutcome(r.writer.run_dir.name, r.writer.run_dir, r.status, r.ok, r.failed,
                      tuple(r.warnings + r.writer.notes), r.writer.archive.loc)


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
    tuning, facts, pin = tune_for_run(plan, profile, targets, facts, fact_hosts, list(pre.tools), r.host_wide)
    rows = tuning["rows"]
    assert isinstance(rows, list)
    r.warnings += [f"tuning: {x['host']} {x['setting']} did not take: {x['note']}"
                   for x in rows if x["status"] == "failed"]
    return facts, tuning, pin


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
        "ssh": {h: {"clock_offset_s": c.clock_offset_s, "clock_uncertainty_s": c.clock_uncertainty_s,
                    "root": c.root} for h, c in hosts.checks.items()}})


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


def _clean_up(r: _Run, progress: ProgressSink, keep_lab: bool) -> None:
    """Whatever happened: the study stopped, tuning restored (while every
    host's transport still works: over SSH, before the connections close and
    the lab's sshds go), sessions closed, the run finished, a lab this run
    built removed.  A second Ctrl-C or SIGTERM must not cut it short: they
    are blocked until it is done."""
    blocked = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        _quietly(progress.end)
        untune_error: list[str] = []
        w, st = r.writer, r.study
        if r.started and st is not None and w is not None:
            _quietly(lambda: w.write_raws(st.stop(r.env, w.raw_dir(st.kind))))
        if r.tuned:
            try:
                untune(r.tuned, r.host_wide)
            except Exception as e:  # noqa: BLE001 - recorded with the run, and the hosts still go
                untune_error.append(str(e))
                print(e.one_line() if isinstance(e, NicbenchError) else f"nicbench: {e}", file=sys.stderr)
        o = r.opened
        if o is not None:
            _quietly(o.hosts.close)      # sessions end (remote watchdogs fire), tracked processes die
        r.lock.release()
        if w is not None:
            _quietly(lambda: w.finish(r.status, ok=r.ok, failed=r.failed,
                                      **({"untune_error": untune_error[0]} if untune_error else {})))
        if o is not None:
            _quietly(lambda: o.remove_lab(keep_lab))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
