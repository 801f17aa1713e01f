"""A whole run: lab, preflight, every trial in order, storage, teardown.

Side effects only; what to run comes from the plan, what it means is worked
out later by ``analysis``.  Guarantees:
- preflight lists every problem at once, before the run directory exists;
- each finished trial is committed on its own (a crash keeps it);
- on success, error, Ctrl-C or SIGTERM every process nicbench started is
  killed by process group and a lab this run built is torn down.
"""

from __future__ import annotations

import os
import platform
import signal
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Protocol

from .. import __version__
from ..core.errors import Interrupted, LabError, NicbenchError, PreflightError
from ..hosts.transport import LocalTransport
from ..lab import manager
from ..lab.topology import DirectLink, LabSpec, make_spec
from ..plan.matrix import trials as plan_trials
from ..plan.model import PacketStudy, Plan
from ..hosts.facts import collect_quietly
from ..hosts.transport import Transport, each_host
from ..records import HostFacts, RawOutput, RunInfo, Sample, TrialRecord, TrialSpec
from ..store.runs import RunWriter, new_run_id
from ..tuning.engine import Target, TuningLock, in_force, lab_target
from ..tuning.engine import apply as tune_apply
from ..tuning.engine import audit as tune_audit
from ..tuning.engine import restore as tune_restore
from ..tuning.profile import load as load_profile
from .common import busy_ports, reach_problems
from .study import study_run
from .tcp import TcpContext, detect_tool, layout


class ProgressSink(Protocol):
    def begin(self, run_id: str, total: int) -> None: ...
    def trial_start(self, spec: TrialSpec) -> None: ...
    def trial_end(self, rec: TrialRecord, samples: list[Sample]) -> None: ...
    def end(self) -> None: ...


class NoProgress:
    def begin(self, run_id: str, total: int) -> None: ...
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


def lab_spec(plan: Plan) -> LabSpec:
    direct: tuple[DirectLink, ...] = ()
    if isinstance(plan.study, PacketStudy):     # the generator's ports, cabled to the receiver
        direct = tuple(DirectLink(i, plan.server, plan.clients[0], max(plan.study.threads))
                       for i in range(max(plan.study.ports)))
    return make_spec(plan.lab.name, [(n, h.role) for n, h in plan.hosts.items()],
                     plan.link.mtu, plan.lab.subnet, plan.link.speed, plan.link.client_speed, direct)


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


def acquire_lab(spec: LabSpec) -> tuple[manager.Lab, bool]:
    """An existing matching lab (reused, not ours to remove) or a new one."""
    existing = manager.load(spec.name)
    if existing is None:
        return manager.up(spec), True
    st = manager.status(spec.name)
    if existing.spec != spec or not st["healthy"]:
        raise LabError(f"lab {spec.name!r} exists but does not match this plan (hosts/MTU/health)",
                       where=f"lab {spec.name}",
                       hint=f"nicbench lab down {spec.name}, or give the plan another [lab] name")
    return existing, False


def preflight(plan: Plan, lab: manager.Lab) -> tuple[TcpContext, list[str]]:
    """Check every host at once; raise PreflightError listing all problems."""
    problems: list[str] = []
    warnings: list[str] = []
    transports = lab.transports()
    addresses = {h.name: h.ip for h in lab.spec.hosts}
    s = plan.study
    tool = None
    for host in [plan.server, *plan.clients]:
        try:
            info = detect_tool(transports[host], s.engine)
            if host == plan.server:
                tool = info
        except PreflightError as e:
            problems.append(f"{host}: {e.message}")
    problems += reach_problems(transports[plan.server], {c: addresses[c] for c in plan.clients})
    for c in plan.clients:
        ports_wanted = {slot.port for n in s.connections
                        for slot in layout(n, plan.clients, s.connections_per,
                                           s.streams_per_process or (128 if s.engine == "iperf3" else 4096),
                                           s.port_base) if slot.client == c}
        taken = sorted(ports_wanted & busy_ports(transports[c]))
        if taken:
            problems.append(f"{c}: port(s) {', '.join(map(str, taken))} already in use")
    skip = False
    if tool is not None and s.engine == "iperf3":
        if s.zerocopy and not tool.has("zerocopy"):
            problems.append(f"{plan.server}: iperf3 {tool.version_str} has no -Z/--zerocopy")
        if not tool.has("server_output"):
            problems.append(f"{plan.server}: iperf3 {tool.version_str} has no --get-server-output, "
                            "so receiver-side bytes of tx points cannot be collected (install iperf3 >= 3.1)")
        if s.skip_rx_copy is True and not tool.has("skip_rx_copy"):
            problems.append(f"{plan.server}: iperf3 {tool.version_str} has no --skip-rx-copy "
                            "(set skip_rx_copy = \"auto\" or false, or install iperf3 >= 3.16)")
        skip = bool(s.skip_rx_copy) and tool.has("skip_rx_copy")
        if s.skip_rx_copy == "auto" and not skip:
            warnings.append(f"iperf3 {tool.version_str} has no --skip-rx-copy: receivers copy every "
                            "byte to user space (the seed's runs did not)")
        if tool.version < (3, 16):
            warnings.append(f"iperf3 {tool.version_str} is single-threaded: all streams of one process "
                            "share one core; more client hosts or processes spread the load")
    if problems:
        raise PreflightError("; ".join(problems), where="preflight",
                             hint="fix every item listed, then run again")
    assert tool is not None
    # Every lab host runs on this one machine: CPU is sampled once, for all
    return TcpContext(s, plan.server, dict(transports), addresses, tool, skip, warnings=warnings,
                      cpu_transport=LocalTransport("machine"),
                      cpu_machine="machine"), warnings


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


def tuning_targets(plan: Plan, lab: manager.Lab, facts: list[tuple[HostFacts, str]]):
    """The plan's tuning profile (without one, the stock profile, which only
    audits: every run records the tuning state it ran in) and the lab hosts."""
    profile = load_profile(plan.tuning or "stock", dict(plan.profiles))
    by_host = {h.host: h for h, _ in facts}
    if getattr(lab, "kind", "") == "ssh":         # real hosts: their own host-wide settings, their own restore file
        return profile, [Target(h, plan.hosts[h].role, lab.transport(h), f"ssh-{h}", lab.spec.host(h).ifname,
                                by_host.get(h), lab=False) for h in plan.hosts]
    return profile, [lab_target(lab, h, by_host.get(h)) for h in plan.hosts]


def timestamps(facts: list[tuple[HostFacts, str]], hosts: list[str]) -> dict[str, int | None]:
    """tcp_timestamps of the hosts as the points run (the ceiling depends on it),
    from the facts in force: one read per host, already made."""
    by = {h.host: h.value("sysctl.net.ipv4.tcp_timestamps") for h, _ in facts}
    return {h: by[h] if isinstance(by.get(h), int) else None for h in hosts}


def tune_for_run(plan: Plan, profile, targets: list[Target], ctx: TcpContext, facts, fact_hosts,
                 tools: list[str], host_wide: bool):
    """Apply (or only audit) the run's profile; the record of it, and the facts
    the points run with (collected again when something was changed)."""
    apply_it = not profile.audit_only
    result = (tune_apply if apply_it else tune_audit)(profile, targets, host_wide=host_wide)
    ctx.pin = result.pin
    if apply_it:
        facts = gather_facts(fact_hosts, tools)
    return {"profile": plan.tuning or "stock", "host_wide": host_wide, "applied": apply_it,
            "from_plan": bool(plan.tuning), "rows": [r.to_dict() for r in result.rows],
            "pinning": result.pin_cpus}, facts


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


def execute(plan: Plan, plan_text: str, *, store: Path, progress: ProgressSink | None = None,
            keep_lab: bool = False, host_wide: bool = False) -> RunOutcome:
    progress = progress or NoProgress()
    remote = None
    if plan.remote:
        from ..hosts.remote import RemoteHosts
        remote = RemoteHosts(plan)          # no root needed here: the hosts are reached as the plan says
    else:
        manager.require_root()
    spec = remote.spec if remote else lab_spec(plan)
    trial_list = plan_trials(plan)
    writer: RunWriter | None = None
    ok = failed = 0
    status = "failed"
    tuned: list[Target] = []
    tune_lock = TuningLock()
    started = None
    with sigterm_as_interrupt():
        lab, owned = None, False
        hosts = None
        try:
            if remote is not None:
                hosts = remote
                problems = remote.connect(plan.lab.max_clock_offset)
                if problems:
                    raise PreflightError("; ".join(problems), where="ssh preflight",
                                         hint="fix every item listed, then run again")
                ssh_checks = remote.checks
            else:
                lab, owned = acquire_lab(spec)
                hosts, ssh_checks = lab, {}
                if plan.lab.transport == "ssh":
                    from ..lab.sshd import ssh_lab
                    hosts, ssh_checks = ssh_lab(lab, max_offset=plan.lab.max_clock_offset)
            study = study_run(plan, hosts)
            ctx, warnings, tools = study.ctx, study.warnings, study.tools
            transports = hosts.transports()
            ctx.ifnames = {h.name: h.ifname for h in spec.hosts}
            if remote is not None:
                # real hosts: CPU is the study server's own (the host under test, as the seeds report it)
                ctx.cpu_transport, ctx.cpu_machine = transports[plan.server], plan.server
            # the hosts (lab: their namespaces' interfaces and sysctls) and, in the
            # lab, the machine they share (host-wide sysctls, services, CPU)
            fact_hosts = ([(transports[h], plan.hosts[h].role,
                            [spec.host(h).ifname] + [d.ifname for d in spec.direct if h in (d.a, d.b)])
                           for h in plan.hosts]
                          + ([(LocalTransport("machine"), "machine", [])] if remote is None else []))
            facts = gather_facts(fact_hosts, tools)
            profile, targets = tuning_targets(plan, hosts, facts)
            if not profile.audit_only:
                left = in_force(targets, host_wide)
                if left:
                    raise PreflightError(f"tuning from an earlier 'nicbench tune apply' is in force ({', '.join(left)}): "
                                         "this run would stack on it and undo it at its end", where="tuning",
                                         hint="nicbench tune restore, then run again")
                tune_lock.acquire(f"run of {plan.name}")
                tuned = targets         # before the first change: a Ctrl-C mid-apply still restores
            tuning, facts = tune_for_run(plan, profile, targets, ctx, facts, fact_hosts, tools, host_wide)
            warnings += [f"tuning: {r['host']} {r['setting']} did not take: {r['note']}"
                         for r in tuning["rows"] if r["status"] == "failed"]
            ctx.nic_irqs = nic_irqs(facts, plan.server, ctx.if_of(plan.server))
            ctx.tcp_timestamps = timestamps(facts, [plan.server, *plan.clients])
            run_id = new_run_id(plan.name)
            info = RunInfo(run_id, plan.name, study.kind, time.time(), plan_text, "plan", __version__, {
                "lab": spec.to_dict(), "server": plan.server, "clients": plan.clients, **study.meta(),
                "kernel": platform.release(), "warnings": warnings,
                "link": {"mtu": spec.mtu, "speed_bps": spec.speed_bps, "client_speed_bps": spec.client_speed_bps,
                         "ip": 4, "shaped": spec.shaped,
                         # with GSO on, a veth counts 64 KB super-packets, not frames
                         "counters_count_frames": spec.shaped,
                         "tcp_timestamps": ctx.tcp_timestamps},
                "cpu": cpu_facts() if remote is None else {
                    "scope": "host", "host": plan.server, "cpus": None, "mhz": None, "nic_irqs": ctx.nic_irqs,
                    "shared_by": "nothing: the study server's own CPUs, read over SSH"}, "tuning": tuning,
                "lab_reused": not owned, "pid": os.getpid(), "host_transport": plan.lab.transport,
                "ssh": {h: {"clock_offset_s": c.clock_offset_s, "clock_uncertainty_s": c.clock_uncertainty_s,
                            "root": c.root} for h, c in ssh_checks.items()}})
            writer = RunWriter.create(store, info)
            ctx.rel = writer.rel
            store_facts(writer, facts)
            started = study
            writer.write_raws(study.start(writer.raw_dir(study.kind)))
            progress.begin(run_id, len(trial_list))
            for t in trial_list:
                progress.trial_start(t)
                rec, samples, raws = study.trial(t, writer.raw_dir(t.trial_id))
                writer.write_trial(rec, samples, raws)
                ok += rec.status == "ok"
                failed += rec.status == "failed"
                progress.trial_end(rec, samples)
                if rec.status == "interrupted":
                    raise KeyboardInterrupt
            status = "done" if not failed else "done-with-failures"
        except KeyboardInterrupt:
            status = "interrupted"
            raise Interrupted(f"run stopped by the user after {ok + failed} of {len(trial_list)} points; "
                              "finished points are stored", where=str(writer.run_dir) if writer else None,
                              hint="nicbench report latest renders what was finished") from None
        finally:
            # A second Ctrl-C or SIGTERM must not cut the clean-up short: block
            # them until the results are closed and the lab is gone.
            blocked = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
            signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
            try:
                _quietly(progress.end)
                untune_error: list[str] = []
                if started is not None and writer is not None:
                    _quietly(lambda: writer.write_raws(started.stop(writer.raw_dir(started.kind))))
                # restore first, while every host's transport still works (over SSH:
                # before the connections close and the lab's sshds go)
                if tuned:
                    try:
                        untune(tuned, host_wide)
                    except Exception as e:  # noqa: BLE001 - recorded with the run, and the hosts still go
                        untune_error.append(str(e))
                        print(e.one_line() if isinstance(e, NicbenchError) else f"nicbench: {e}", file=sys.stderr)
                if hosts is not lab and hosts is not None and remote is None:
                    from ..hosts.ssh import close_all
                    _quietly(lambda: close_all(hosts.transports()))   # sessions end: remote watchdogs fire
                if remote is not None:
                    _quietly(remote.close)
                if lab is not None:
                    _quietly(lab.tracker.kill_all)
                tune_lock.release()
                if writer is not None:
                    _quietly(lambda: writer.finish(status, ok=ok, failed=failed,
                                                   **({"untune_error": untune_error[0]} if untune_error else {})))
                if lab is not None and owned and not keep_lab:
                    manager.down(spec.name)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, blocked)
    return RunOutcome(run_id, writer.run_dir, status, ok, failed, tuple(warnings))
