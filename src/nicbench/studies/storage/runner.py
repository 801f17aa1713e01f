"""The storage study (seed 004): nbdkit LUNs on the target, fio on every initiator.

One nbdkit per LUN, in the foreground on the target host, listening on the
test address (port_base + LUN); started once for the study, checked to
listen, stopped after the last point.  Each point runs one fio per initiator
(one job per LUN it drives) behind the start barrier; fio's JSON gives bytes,
IOs and latency per job over ``runtime`` after ``ramp_time``.  A point is
bounded by ramp + duration + timeout_margin: fio stuck on a dead target is
killed by process group and the point fails, the sweep goes on.  With
``target = "iscsi"`` the target is one tgtd (``tgt.py``) and each initiator
is one iscsi-perf per LUN.  The point's sequence (raw files, pinned spawns, guard, samplers, the initiators
awaited with that limit, the record and its overhead) is
:class:`nicbench.run.point.Point`'s; this module says only what is the
targets' and the initiators'.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...core.errors import NicbenchError, PreflightError, ToolError, tail
from ...hosts.base import Hosts
from ...hosts.transport import (
    Process,
    Transport,
    gate_time,
    host_clock_offset,
    parse_gate_stamp,
    read_output,
    tool_stderr,
)
from ...plan.model import Plan
from ...plan.studies.storage import StorageStudy
from ...records import RawOutput, Sample, TrialSpec, make_tags
from ...run.kit import PointEnv, PointSamplers, release_together, stall_causes, stalled
from ...run.point import Point
from ...run.preflight import busy_ports, problems_found, tool_version
from ...run.sockstat import tcp_listening_of
from ...run.study import Preflight, TrialOutcome
from ...sampling.sampler import NetTarget, tool_procs
from ...tools import fio, iscsi_perf
from ...tools.base import parse_version
from . import tgt
from .context import StorageContext


def assignment(luns: int, clients: list[str], devices: dict[str, list[str]] | None = None) -> dict[str, list[int]]:
    """LUN numbers per initiator, as even as possible (seed: 48 over 4 = 12 each);
    with existing devices, each initiator's own, numbered in order."""
    out: dict[str, list[int]] = {c: [] for c in clients}
    if devices:
        n = 0
        for c in clients:
            out[c] = list(range(n, n + len(devices.get(c, []))))
            n += len(out[c])
        return {c: v for c, v in out.items() if v}
    for lun in range(luns):
        out[clients[lun % len(clients)]].append(lun)
    return out


INSTALL = "apt-get install nbdkit fio tgt libiscsi-bin (the set-up command in README.md does it)"


class StorageRunner:
    """The storage study as the session drives it (see ``run.study.StudyRunner``)."""

    kind = "storage"

    def __init__(self, plan: Plan, hosts: Hosts):
        self.plan = plan
        self.transports = hosts.transports()
        self.addresses = {h.name: h.ip for h in hosts.spec.hosts}
        self.ctx: StorageContext | None = None

    def preflight(self) -> Preflight:
        self.ctx, warnings = preflight(self.plan, self.transports, self.addresses)
        s, v = self.ctx.study, self.ctx.versions
        tools = {"nbd": ("nbdkit", "fio"), "iscsi": ("tgtd",), "devices": ("fio",)}[s.target] + ("ethtool",)
        engine = {"nbd": ("nbdkit + fio", f"nbdkit {v.get('nbdkit')}, fio {v.get('fio')}"),
                  "iscsi": ("tgt + iscsi-perf", f"tgtd {v.get('tgtd')}, iscsi-perf {v.get('iscsi-perf')}"),
                  "devices": (f"fio ({s.engine})", f"fio {v.get('fio')}")}[s.target]
        return Preflight(tools=tools, warnings=tuple(warnings), meta={
            "engine": engine[0], "engine_version": engine[1], "versions": v, "target": s.target,
            "lun_kind": s.lun_kind, "luns": s.luns, "lun_size": s.lun_size, "iodepth": s.iodepth,
            "pattern": s.pattern, "assignment": assignment(s.luns, self.ctx.clients, s.devices),
            "transport": s.transport or ("nbd" if s.target == "devices" else s.target), "trim": 0.0})

    def start(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        assert self.ctx is not None, "preflight first"
        return start(self.ctx, env, raw_dir)

    def trial(self, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
        assert self.ctx is not None, "preflight first"
        return run_trial(self.ctx, env, spec, raw_dir)

    def stop(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return stop(self.ctx, env, raw_dir) if self.ctx is not None else []


def preflight(plan: Plan, transports: dict[str, Transport],
              addresses: dict[str, str]) -> tuple[StorageContext, list[str]]:
    s = plan.study
    assert isinstance(s, StorageStudy)
    problems: list[str] = []
    versions: dict[str, str] = {}
    srv = transports[plan.server]
    server_tools = {"nbd": [("nbdkit", ["nbdkit", "--version"])], "devices": [],
                    "iscsi": [("tgtd", ["tgtd", "--version"]), ("tgtadm", ["tgtadm", "--version"])]}[s.target]
    for name, argv in server_tools:
        try:
            versions[name] = tool_version(srv, argv, name, INSTALL)
        except PreflightError as e:
            problems.append(f"{plan.server}: {e.message}")
    for c in plan.clients:
        try:
            if s.target == "iscsi":
                transports[c].run(["sh", "-c", "command -v iscsi-perf && command -v timeout"], timeout=10).check(
                    "iscsi-perf", hint="apt-get install libiscsi-bin")
                versions["iscsi-perf"] = "0.1"
                continue
            versions["fio"] = tool_version(transports[c], ["fio", "--version"], "fio", INSTALL)
            if s.target == "nbd":
                problems += [p for p in [fio.MIN_NBD.problem(parse_version(versions["fio"]), c)] if p]
            eng = transports[c].run(["fio", "--enghelp"], timeout=10)
            need = "nbd" if s.target == "nbd" else s.engine
            if need not in (eng.stdout + eng.stderr).split():
                problems.append(f"{c}: fio {versions['fio']} has no {need} engine")
            for dev in (s.devices or {}).get(c, []):
                if transports[c].run(["test", "-b", dev], timeout=10).returncode != 0:
                    problems.append(f"{c}: {dev} is not a block device on this host")
        except (PreflightError, ToolError) as e:
            problems.append(f"{c}: {e.message}")
    busy = busy_ports(srv)
    wanted = {"nbd": set(range(s.port_base, s.port_base + s.luns)), "iscsi": {s.iscsi_port}, "devices": set()}[s.target]
    taken = sorted(busy & wanted)
    if taken:
        problems.append(f"{plan.server}: port(s) {', '.join(map(str, taken))} already in use")
    if problems:
        raise problems_found(problems, "storage")
    return StorageContext(s, plan.server, list(plan.clients), dict(transports), addresses, versions), []


def target_argv(s: StorageStudy, address: str, lun: int) -> list[str]:
    plugin = ["memory", str(s.lun_size), "allocator=malloc"] if s.lun_kind == "memory" else ["null", str(s.lun_size)]
    return ["nbdkit", "--foreground", "--exit-with-parent", "-i", address, "-p", str(s.port_base + lun), *plugin]


def lun_url(ctx: StorageContext, lun: int) -> str:
    s = ctx.study
    if s.target == "devices":
        return [d for c in ctx.clients for d in (s.devices or {}).get(c, [])][lun]
    if s.target == "nbd":
        return f"nbd://{ctx.addresses[ctx.server]}:{s.port_base + lun}"
    return f"iscsi://{ctx.addresses[ctx.server]}:{s.iscsi_port}/{tgt.IQN}:lun{lun}/1"


def start(ctx: StorageContext, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
    """Every LUN up and listening, or a ToolError with the target's own words."""
    s = ctx.study
    t = ctx.transports[ctx.server]
    raw_dir.mkdir(parents=True, exist_ok=True)
    if s.target == "iscsi":
        tgt.start(ctx, env, raw_dir)
        return []
    if s.target == "devices":
        return []                                # the LUNs exist already, exported by someone else
    for lun in range(s.luns):
        out, err = raw_dir / f"lun{lun}.out", raw_dir / f"lun{lun}.err"
        ctx.raws += [RawOutput("target", ctx.server, "server", "nbdkit", "stdout", env.rel(out)),
                     RawOutput("target", ctx.server, "server", "nbdkit", "stderr", env.rel(err))]
        ctx.targets.append(t.spawn(env.pinned(ctx.server, target_argv(s, ctx.addresses[ctx.server], lun)),
                                   stdout=out, stderr=err))
    deadline = time.monotonic() + 10
    for lun, p in enumerate(ctx.targets):
        port = s.port_base + lun
        while True:
            rc = p.poll()
            if rc is not None:
                msg = tail(tool_stderr(p.stderr_path)) or f"exited {rc}"
                raise ToolError(f"the target for LUN {lun} (nbdkit, port {port}) did not start: {msg}",
                                where=ctx.server, hint="another process may hold the port: set study.port_base"
                                if "in use" in msg else None)
            if port in tcp_listening_of(t, p.pid):
                break
            if time.monotonic() > deadline:
                raise ToolError(f"the target for LUN {lun} is not listening on {port} after 10 s", where=ctx.server)
            time.sleep(0.01)
    return []


def stop(ctx: StorageContext, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
    s = ctx.study
    for p in ctx.targets:
        # tgtd ignores SIGTERM while it has targets: it is killed (its LUNs are null, nothing to flush)
        p.stop(grace=0.0 if s.target == "iscsi" else 2.0, sig=signal.SIGKILL if s.target == "iscsi" else signal.SIGTERM)
    if s.target == "iscsi":
        tgt.remove_sockets(ctx)
    ctx.targets = []
    raws, ctx.raws = ctx.raws, []
    return raws


def run_trial(ctx: StorageContext, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
    s = ctx.study
    op, bs = str(spec.params["op"]), int(spec.params["block_size"])
    tool = "iscsi-perf" if s.target == "iscsi" else "fio"
    # fio stuck in a dead connection ignores TERM: KILL at once
    pt = Point(spec, env, raw_dir, tool, {"engine": "fio", "server": ctx.server, "argv": {}, "layout": []},
               nominal_s=s.ramp + s.duration, sig=signal.SIGKILL)
    meta = pt.meta
    procs: list[tuple[str, Process]] = []
    samples: list[Sample] = []
    with pt:
        dead = [lun for lun, p in enumerate(ctx.targets) if p.poll() is not None]
        if dead:
            what = "tgtd exited" if s.target == "iscsi" else "their nbdkit exited"
            raise ToolError(f"LUN(s) {', '.join(map(str, dead))} are gone: {what}", where=ctx.server)
        for client, luns in assignment(s.luns, ctx.clients, s.devices).items():
            for name, argv in _initiator_argvs(ctx, client, luns, op, bs):
                procs.append((client, pt.spawn(ctx.transports[client], client, "client", name, argv, key=name,
                                               gated=True)))
            meta["layout"].append({"client": client, "luns": luns})
        samplers = pt.sample(PointSamplers(spec.trial_id, _net_targets(ctx, env, procs), env.cpu_transport,
                                           _tool_procs(ctx, env, procs), machine=env.cpu_machine,
                                           nic_irqs=env.nic_irqs), first_read=True)
        meta["released"] = release_together([p for _, p in procs], "initiators", "initiators")
        limit = s.ramp + s.duration + s.timeout_margin

        def hung_initiator(client: str, p: Process) -> ToolError:
            hosts = {h: ctx.transports[h] for h in (ctx.server, client)}
            return stalled(f"{tool} on {client}", limit, client, stall_causes(hosts, env.ifnames, [p]),
                           "the target stopped answering (ramp + duration + timeout_margin passed); check the "
                           "target, or raise study.timeout_margin if it is only slow")
        # one initiator short fails the point: the target's IOPS are everyone's
        pt.await_clients(procs, limit, str, hung_initiator, lose=False)
        samplers.last_read()
    status, error = pt.status, pt.error
    results: dict[str, dict] = {}
    if status == "ok":
        try:
            if s.target == "iscsi":
                samples += _iscsi_samples(ctx, spec, procs, bs, results)
            for client, p in (procs if s.target != "iscsi" else []):
                text = read_output(p.stdout_path) + "\n" + read_output(p.stderr_path)
                rep = fio.parse(text)
                bad = [j for j in rep.jobs if j.error]
                if rep.errors or bad or p.poll() not in (0, None):
                    why = rep.errors[0] if rep.errors else (f"job {bad[0].name} error {bad[0].error}" if bad
                                                             else f"exit {p.poll()}")
                    raise ToolError(f"fio on {client}: {why}", where=client)
                # each job on its own timeline from fio's status reports: jobs
                # connect one after another, so their measured spans are staggered
                placed = interval_samples(fio.progress(text), spec.trial_id, client)
                _check_clock(placed, parse_gate_stamp(read_output(p.stderr_path)), s.ramp + s.duration, client)
                # fio's report times are the host's clock: onto this machine's, the
                # clock the host samplers' counters are mapped to (0 in the lab)
                off = host_clock_offset(p)
                samples += [replace(x, t_start=x.t_start - off, t_end=x.t_end - off) for x in placed]
                results[client] = {"jobs": {f"{j.name}#{i}": {"read_iops": j.read.iops, "write_iops": j.write.iops,
                                                     "read_bw": j.read.bw_bytes, "write_bw": j.write.bw_bytes,
                                                     "read_p50_ns": j.read.percentiles_ns.get("50"),
                                                     "write_p50_ns": j.write.percentiles_ns.get("50"),
                                                     "read_p99_ns": j.read.percentiles_ns.get("99"),
                                                     "write_p99_ns": j.write.percentiles_ns.get("99")}
                                            for i, j in enumerate(rep.jobs)},
                                   "iops": rep.total("read").iops + rep.total("write").iops,
                                   "bytes": rep.total("read").bytes + rep.total("write").bytes}
                if not (rep.total("read").ios or rep.total("write").ios):
                    raise ToolError(f"fio on {client} completed no I/O", where=client)
        except NicbenchError as e:
            status, error = "failed", e.one_line().removeprefix("nicbench: ")
    meta["fio"] = results
    return pt.outcome(status, error, samples)


def interval_samples(progress: dict[tuple[str, str], list[fio.Reading]], trial: str, host: str) -> list[Sample]:
    """``storage.bytes``/``storage.ios`` per job, op and report interval, on the
    host's clock.  A job's counting began at the earliest anchor its readings
    give (a report's timestamp is taken after its counts, never before); each
    reading then ends an interval at anchor + runtime.  The last reading is the
    final document's, so every job's intervals add up to its total."""
    out = []
    for (job, op), rs in sorted(progress.items()):
        anchor = min(r.anchor_ms for r in rs) / 1000
        tags = make_tags(host=host, op=op, side="initiator", proc=job)
        t, b, n = anchor, 0, 0
        for r in rs:
            end = anchor + r.runtime_ms / 1000
            if end > t:
                out += [Sample(trial, "storage.bytes", float(r.bytes - b), "bytes", t, end, tags),
                        Sample(trial, "storage.ios", float(r.ios - n), "count", t, end, tags)]
                t, b, n = end, r.bytes, r.ios
    return out


def _check_clock(placed: Sequence[Sample], t0: float | None, span: float, client: str) -> None:
    """fio's report times and the start gate's stamp are the same host's clock:
    every job's counting lies between the gate's release and its ramp +
    duration after (a second's slack each side), or its bytes would be placed
    in the wrong window."""
    if t0 is None:
        raise ToolError(f"fio on {client}: its start gate recorded no time", where=client)
    if not placed:
        return
    a, b = min(x.t_start for x in placed), max(x.t_end for x in placed)
    if a < t0 - 1 or b > t0 + span + 1:
        raise ToolError(f"fio on {client}: its reports span {a - t0:+.3f}..{b - t0:+.3f} s from its start stamp, "
                        f"outside the {span:g} s it was given", where=client,
                        hint="fio's timestamp_ms and the shell's clock disagree on this host")


def _initiator_argvs(ctx: StorageContext, client: str, luns: list[int], op: str,
                     bs: int) -> list[tuple[str, list[str]]]:
    """(raw name, argv) of the initiator processes of one host: one fio with a
    job per LUN, or one iscsi-perf per LUN."""
    s = ctx.study
    if s.target in ("nbd", "devices"):
        return [
            (
                f"{client}-fio",
                fio.argv(
                    [(f"lun{n}", lun_url(ctx, n)) for n in luns],
                    op=op,  # type: ignore[arg-type]
                    pattern=s.pattern,
                    block_size=bs,
                    iodepth=s.iodepth,
                    numjobs=s.numjobs,
                    runtime=s.duration,
                    ramp=s.ramp,
                    engine="nbd" if s.target == "nbd" else s.engine,
                    status_ms=fio.status_ms(s.duration),
                ),
            )
        ]
    return [
        (
            f"{client}-lun{n}",
            iscsi_perf.argv(
                lun_url(ctx, n),
                block_size=bs,
                queue=s.iodepth,
                initiator=f"{tgt.IQN}:{client}",
                seconds=s.ramp + s.duration + 0.5,
                random=s.pattern == "random",
            ),
        )
        for n in luns
    ]


Procs = Sequence[tuple[str, Process]]


def _iscsi_samples(
    ctx: StorageContext, spec: TrialSpec, procs: Procs, bs: int, results: dict[str, Any]
) -> list[Sample]:
    """Per initiator: every LUN's IOs in whole seconds after the ramp (iscsi-perf's per-second lines)."""
    s = ctx.study
    per: dict[str, list[tuple[float, float, float]]] = {}
    for client, p in procs:
        text = read_output(p.stdout_path) + "\n" + read_output(p.stderr_path)
        seconds = iscsi_perf.parse(text)
        if p.poll() not in (0, 124):  # 124: timeout fired and iscsi-perf finished on SIGINT
            last = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("nicbench-")]
            raise ToolError(
                f"iscsi-perf on {client} exited {p.poll()}: {last[-1] if last else 'no output'}",
                where=client,
                hint="the LUN or its target failed during the point",
            )
        ios, n = iscsi_perf.measured(seconds, s.ramp)
        if n <= 0:
            raise ToolError(f"iscsi-perf on {client} ran no whole second after the ramp", where=client)
        t0 = gate_time(p)
        if t0 is None:
            raise ToolError(f"iscsi-perf on {client}: its start gate recorded no time", where=client)
        per.setdefault(client, []).append((t0, ios, n))
    out = []
    for client, runs in per.items():
        t0 = min(r[0] for r in runs)
        secs = min(r[2] for r in runs)
        ios = sum(r[1] * secs / r[2] for r in runs)  # every LUN over the same whole seconds
        a, b = t0 + s.ramp, t0 + s.ramp + secs
        tags = make_tags(host=client, op="read", side="initiator")
        out += [
            Sample(spec.trial_id, "storage.bytes", float(ios * bs), "bytes", a, b, tags),
            Sample(spec.trial_id, "storage.ios", float(ios), "count", a, b, tags),
        ]
        results[client] = {"iops": ios / secs, "bytes": ios * bs, "luns": len(runs), "seconds": secs}
    return out


def _net_targets(ctx: StorageContext, env: PointEnv, procs: Procs) -> list[NetTarget]:
    pids = [p.pid for p in ctx.targets]
    out = [NetTarget(ctx.server, ctx.transports[ctx.server], lambda: pids, env.if_of(ctx.server))]
    for client, p in procs:
        out.append(NetTarget(client, ctx.transports[client], _pid_of(p), env.if_of(client)))
    return out


def _tool_procs(ctx: StorageContext, env: PointEnv, procs: Procs) -> Callable[[], list[tuple[int, str, str, str]]]:
    """Targets by PID; each initiator process below its gate shim and any
    wrapper (timeout, taskset), one id per process."""
    if env.cpu_transport is None:
        return lambda: []
    tool = "iscsi-perf" if ctx.study.target == "iscsi" else "fio"
    return tool_procs(
        env.cpu_transport,
        lambda: [(p.pid, ctx.server, "target", f"lun{i}") for i, p in enumerate(ctx.targets)],
        [(p.pid, client, tool, f"{client}#{i}") for i, (client, p) in enumerate(procs)],
    )


def _pid_of(p: Process) -> Callable[[], list[int]]:
    return lambda: [p.pid]
