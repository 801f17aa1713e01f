"""One latency trial: engine servers on the study server, a probe per client,
the load (when the point is ``loaded``) released behind the same barrier.

Layout: the study server (the host under test) runs one engine server per
probe client, each on its own port (``port_base`` + i), so one probe's
queue never delays another's; each probe client runs the engine's client
towards its port.  A loaded point also runs the load as the TCP study would
(``load.py``: iperf3 clients on the study server, an iperf3 server per port
on each load client), released ``lead`` seconds before the probes by one
barrier: every process waits at its gate first
(:func:`nicbench.run.kit.release_staggered`).

Engines are units: each is one file under ``engines/`` behind the
``ProbeEngine`` protocol (its version, its server and client argv, its
reading of what a probe left), one line in ``engines.ENGINES``.  This module
knows no engine by name.  The point's sequence (raw files, pinned spawns
with their argv, the guard, samplers, clients awaited with a limit, the
record and its overhead) is :class:`nicbench.run.point.Point`'s; this module
holds what is the latency study's: the layout, the two-stage release, the
probes' logs and records.

What is stored (the store is the waist; raw outputs are kept beside it but a
report never needs them):

- per probe, in the trial's meta (``meta["probes"][client]``), the full
  distribution as a bounded HDR histogram (:mod:`nicbench.core.histogram`,
  a few KiB of JSON however many requests), the engine's own summary to
  cross-check it, the window on the wall clock, requests sent, answered and
  lost.  The meta rather than a raw output because the report is rebuilt
  from the store alone (tests/fixtures/runs keep only ``results.sqlite``),
  and rather than Samples because a Sample is one quantity over one span with
  a unit from a closed set: a distribution is neither;
- per probe, Samples per 0.5 s bin of its window (``latency.requests``,
  ``latency.rtt_mean``, ``latency.rtt_max``), so the report can draw RTT
  over time against the load's Gbps (flent's RRUL plot);
- the load's ``tcp.bytes`` Samples, exactly as the TCP study stores them,
  and the CPU and counter samplers' Samples.

Round-trip times are each engine's own (each engine's module says how):
sockperf and irtt per request, the server's turnaround included; iperf 2
gives only its 100 us-bin histogram (percentiles are upper bounds) and exact
mean/min/max.  A probe's send times are placed on the wall clock from its
gate stamp (the exec of its launcher) or from the engine's own wall-clock
stamps.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

from ...core.errors import NicbenchError, PreflightError, ToolError, tail
from ...hosts.base import Hosts
from ...hosts.transport import Process, Transport, gate_time, read_output
from ...plan.model import Plan
from ...plan.studies.latency import LatencyStudy, TcpLoad, probe_timing
from ...records import RawOutput, Sample, TrialSpec, make_tags
from ...run import iperf
from ...run.iperf import ProcSlot
from ...run.kit import PointEnv, PointSamplers, release_staggered
from ...run.point import Point
from ...run.preflight import busy_ports, reach_problems
from ...run.study import Preflight, TrialOutcome
from ...sampling.sampler import NetTarget, tool_procs
from ...tools.base import ToolInfo
from . import load as tcp_load
from .engines import ENGINES, ProbeEngine
from .engines.base import ProbeOutput, ProbeSpec, engine_info


@dataclass
class LatencyContext:
    """What the latency study's preflight decided, and its scratch directories."""

    study: LatencyStudy
    server: str
    probes: list[str]                      # probe client hosts, in port order
    load_clients: list[str]
    transports: dict[str, Transport]
    addresses: dict[str, str]
    engines: dict[str, str]                # engine -> version found on the study server
    load_tool: ToolInfo | None
    scratch: dict[str, str] = field(default_factory=dict)   # probe host -> its private temporary directory

    def port_of(self, client: str) -> int:
        return self.study.port_base + self.probes.index(client)


class LatencyRunner:
    """The latency study as the session drives it (see ``run.study.StudyRunner``)."""

    kind = "latency"

    def __init__(self, plan: Plan, hosts: Hosts):
        assert isinstance(plan.study, LatencyStudy)
        self.study: LatencyStudy = plan.study
        self.server = plan.server
        self.clients = list(plan.clients)
        self.transports = hosts.transports()
        self.addresses = {h.name: h.ip for h in hosts.spec.hosts}
        self.ctx: LatencyContext | None = None

    def preflight(self) -> Preflight:
        self.ctx, warnings = preflight(self.study, self.server, self.clients, self.transports, self.addresses)
        s, c = self.study, self.ctx
        tools = [ENGINES[e].tool for e in s.engines] + (["iperf3"] if "loaded" in s.conditions_run() else [])
        load = s.load.model_dump() if s.load is not None else None
        return Preflight(tools=(*dict.fromkeys(tools), "ethtool"), warnings=tuple(warnings),
                         meta={"engine": ", ".join(s.engines),
                               "engine_version": ", ".join(f"{e} {v}" for e, v in c.engines.items()),
                               "engines": c.engines, "probe_clients": c.probes, "load": load,
                               "load_clients": c.load_clients if load else [],
                               "load_engine_version": c.load_tool.version_str if c.load_tool else None,
                               "rate": s.rate, "duration": s.duration, "sample_interval_s": s.sample_interval})

    def start(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        assert self.ctx is not None, "preflight first"
        for host in self.ctx.probes:
            r = self.ctx.transports[host].run(["mktemp", "-d", "/tmp/nicbench-latency.XXXXXX"], timeout=30)
            r.check("making a scratch directory for the probes' logs")
            self.ctx.scratch[host] = r.stdout.strip()
        return []

    def trial(self, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
        assert self.ctx is not None, "preflight first"
        return run_trial(self.ctx, env, spec, raw_dir)

    def stop(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        if self.ctx is None:
            return []
        scratch, self.ctx.scratch = self.ctx.scratch, {}
        for host, path in scratch.items():
            if path.startswith("/tmp/nicbench-latency."):
                r = self.ctx.transports[host].run(["rm", "-rf", "--one-file-system", path], timeout=60)
                if r.returncode != 0:
                    raise ToolError(f"could not remove {path}: {tail(r.stderr)}", where=host)
        return []


def preflight(s: LatencyStudy, server: str, clients: list[str], transports: dict[str, Transport],
              addresses: dict[str, str]) -> tuple[LatencyContext, list[str]]:
    """Check every host at once; raise PreflightError listing all problems."""
    problems: list[str] = []
    warnings: list[str] = []
    probes = list(s.probe_clients or clients)
    load: TcpLoad | None = s.load if "loaded" in s.conditions_run() else None
    load_clients = list(load.clients or clients) if load is not None else []
    found: dict[str, str] = {}
    for name in s.engines:
        for host in [server, *probes]:
            try:
                info = engine_info(ENGINES[name], transports[host])
                if host == server:
                    found[name] = info.version_str
            except PreflightError as e:
                problems.append(f"{host}: {e.message}" + (f" ({e.hint})" if e.hint else ""))
    load_tool = tcp_load.tool_problems(load, server, load_clients, transports, problems) if load is not None else None
    problems += reach_problems(transports[server], {c: addresses[c] for c in dict.fromkeys(probes + load_clients)})
    ports = {s.port_base + i for i in range(len(probes))}
    taken = sorted(ports & busy_ports(transports[server]))
    if taken:
        problems.append(f"{server}: port(s) {', '.join(map(str, taken))} already in use (study.port_base)")
    if load is not None:
        problems += tcp_load.port_problems(load, load_clients, transports)
    if problems:
        raise PreflightError("; ".join(problems), where="preflight", hint="fix every item listed, then run again")
    rate = None if s.rate == "max" else int(s.rate)
    for name in s.engines:
        warnings += ENGINES[name].warnings(rate, probes)
    return (LatencyContext(s, server, probes, load_clients, dict(transports), addresses, found, load_tool),
            warnings)


# ---- one trial ------------------------------------------------------------------------------


@dataclass
class _Probe:
    client: str
    port: int
    server: Process | None = None
    client_proc: Process | None = None
    log: str | None = None                 # the engine's output file on the probe host


Slots = Sequence[tuple[ProcSlot, Process]]


def run_trial(ctx: LatencyContext, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
    """Run one point; never raises for a point-level failure (it is recorded)."""
    s = ctx.study
    p = spec.params
    eng = ENGINES[str(p["engine"])]
    proto = str(p["protocol"])
    probe = ProbeSpec("tcp" if proto == "tcp" else "udp", int(p["message_size"]),
                      None if s.rate == "max" else int(s.rate), s.duration)
    load = s.load if p["condition"] == "loaded" else None
    offset, load_s = tcp_load.staging(load, eng.name, s.duration)
    run_s = probe_timing(eng.name, s.duration)[1]
    srv_t = ctx.transports[ctx.server]
    probes = [_Probe(c, ctx.port_of(c)) for c in ctx.probes]
    slots = tcp_load.slots(load, ctx.load_clients)
    load_srv: list[tuple[ProcSlot, Process]] = []
    load_cli: list[tuple[ProcSlot, Process]] = []
    pt = Point(spec, env, raw_dir, eng.name,
               {"engine": eng.name, "engine_version": ctx.engines.get(eng.name), "protocol": proto,
                "server": ctx.server, "waiting": p.get("waiting"), "argv": {},
                "ports": {pr.client: pr.port for pr in probes}},
               nominal_s=offset + run_s, grace=0.5, sig=signal.SIGINT)
    meta = pt.meta
    if load is not None:
        meta["load"] = {"layout": [vars(x) for x in slots], "seconds": load_s, "probes_after_s": offset,
                        "lead_s": load.lead, "direction": load.direction}
    limit = run_s + s.timeout_margin
    with pt:
        # 1. an engine server per probe on the study server, and the load's servers
        lifetime = offset + run_s + s.timeout_margin + 5
        for pr in probes:
            pr.server = pt.spawn(srv_t, ctx.server, "latency-server", f"{ctx.server}-{eng.name}-server-{pr.port}",
                                 eng.server_argv(probe, ctx.addresses[ctx.server], pr.port, lifetime),
                                 key=f"{ctx.server}:server:{pr.port}")
        if load is not None:
            load_srv = tcp_load.start_servers(pt, load, slots, ctx.transports)
        deadline = time.monotonic() + 5.0
        for pr in probes:
            assert pr.server is not None
            iperf.wait_ready(srv_t, pr.server, pr.port, deadline, probe.protocol, wrapped=True)
        for slot, proc in load_srv:
            iperf.wait_ready(ctx.transports[slot.client], proc, slot.port, deadline)
        # 2. every client behind its gate: the load's on the study server, a probe on each probe client
        if load is not None:
            assert ctx.load_tool is not None
            load_cli = tcp_load.start_clients(pt, load, slots, ctx.server, srv_t, ctx.load_tool, ctx.addresses,
                                              load_s)
        for pr in probes:
            if eng.log_ext is not None:
                pr.log = f"{ctx.scratch[pr.client]}/{spec.trial_id}-{pr.client}.{eng.log_ext}"
            pr.client_proc = pt.spawn(ctx.transports[pr.client], pr.client, "latency-client",
                                      f"{pr.client}-{eng.name}-client",
                                      eng.client_argv(probe, ctx.addresses[ctx.server], pr.port, pr.log),
                                      key=f"{pr.client}:client", gated=True)
        # 3. samplers first (their first read before anything starts), then the one barrier
        samplers = pt.sample(PointSamplers(
            spec.trial_id, _net_targets(ctx, env, probes, load_srv, load_cli), env.cpu_transport,
            _tool_procs(ctx, env, eng.name, probes, load_srv, load_cli), machine=env.cpu_machine,
            nic_irqs=env.nic_irqs, net_interval=s.sample_interval, cpu_interval=s.sample_interval),
            first_read=True)
        stages = [(0.0, [x for _, x in load_cli]), (offset, [pr.client_proc for pr in probes if pr.client_proc])]
        released = release_staggered([st for st in stages if st[1]], "latency and load clients", ctx.server)
        meta["released"] = released[-1]
        if load is not None:
            meta["load"]["released"] = released[0]
        # 4. the probes, then the load; one still running at its time limit fails the point
        #    (a probe or load process cut short leaves the point's figures unsaid)
        pt.await_clients([(pr.client, pr.client_proc) for pr in probes if pr.client_proc], limit, str,
                         lambda client, _: ToolError(
                             f"{eng.tool} client still running after {limit:g}s (duration + timeout_margin)",
                             where=client,
                             hint="the path may be stalled; raise study.timeout_margin if the host is slow"),
                         lose=False)
        pt.await_clients([(f"{sl.client}:{sl.port}", x) for sl, x in load_cli], load_s + s.timeout_margin, str,
                         lambda key, _: ToolError(f"load client to {key} still running after its {load_s} s + "
                                                  "timeout_margin", where=ctx.server), lose=False)
        samplers.last_read()
        # 5. servers: the engine's are stopped (sockperf has no lifetime), iperf3 -1 exits by itself
        for pr in probes:
            if pr.server is not None and pr.server.poll() is None:
                pr.server.stop(1.0, sig=signal.SIGINT)
        for _, proc in load_srv:
            if proc.wait(3.0) is None:
                proc.stop(0.5)
    status, error = pt.status, pt.error
    samples: list[Sample] = []

    # 6. parse (also after a failure: what parsed is kept)
    if status != "interrupted":
        try:
            samples += _read_probes(ctx, pt, eng, probes)
            if load is not None:
                samples += tcp_load.samples(spec.trial_id, ctx.server, load_cli, meta["load"])
        except NicbenchError as e:
            if status == "ok":
                status, error = "failed", e.one_line().removeprefix("nicbench: ")
        except (ValueError, KeyError, TypeError, IndexError) as e:   # a parser bug fails the point, not the run
            if status == "ok":
                status, error = "failed", f"tool output not understood: {type(e).__name__}: {e}"
    return pt.outcome(status, error, samples)



def _read_probes(ctx: LatencyContext, pt: Point, eng: ProbeEngine, probes: list[_Probe]) -> list[Sample]:
    """Each probe as its engine reads it: its record into ``meta["probes"]``, its binned Samples."""
    spec, meta = pt.spec, pt.meta
    samples: list[Sample] = []
    meta["probes"] = {}
    proto = str(spec.params["protocol"])
    for pr in probes:
        assert pr.client_proc is not None
        launched = gate_time(pr.client_proc)       # on this machine's clock (a real host's, less its offset)
        if launched is None:
            raise ToolError(f"the {eng.name} probe never passed its start gate", where=pr.client)
        got = eng.read(ProbeOutput(
            spec.trial_id, pr.client, f"{pr.client} ({eng.name} to {ctx.server}:{pr.port})", pr.client_proc,
            launched, make_tags(host=pr.client, engine=eng.name, protocol=proto),
            fetch=partial(_fetch, ctx, pt, eng, pr),
            warn=lambda w: meta.setdefault("warnings", []).append(w)))
        samples += got.samples
        got.record.update(engine=eng.name, port=pr.port, launched=launched)
        meta["probes"][pr.client] = got.record
    return samples


def _fetch(ctx: LatencyContext, pt: Point, eng: ProbeEngine, pr: _Probe, name: str) -> str:
    """The engine's output file from the probe host, kept with the run, removed there."""
    assert pr.log is not None
    t = ctx.transports[pr.client]
    try:
        text = t.read_text(pr.log)
    except OSError:
        raise ToolError(f"{eng.tool} wrote no {pr.log}", where=pr.client,
                        hint=tail(read_output(pr.client_proc.stdout_path)) if pr.client_proc else None) from None
    path = pt.raw_dir / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    pt.raws.outputs.append(RawOutput(pt.spec.trial_id, pr.client, "latency-log", eng.tool, "stdout",
                                     pt.env.rel(path)))
    t.drop_files([pr.log])
    return text


def _net_targets(ctx: LatencyContext, env: PointEnv, probes: list[_Probe], load_srv: Slots,
                 load_cli: Slots) -> list[NetTarget]:
    """Every host taking part, seen through a process of its own namespace."""
    def server_pids() -> list[int]:
        return [x.pid for pr in probes for x in (pr.server,) if x is not None] + [x.pid for _, x in load_cli]

    def pids_on(host: str) -> Callable[[], list[int]]:
        return lambda: ([pr.client_proc.pid for pr in probes if pr.client == host and pr.client_proc]
                        + [x.pid for sl, x in load_srv if sl.client == host])
    out = [NetTarget(ctx.server, ctx.transports[ctx.server], server_pids, env.if_of(ctx.server))]
    for host in dict.fromkeys([pr.client for pr in probes] + [sl.client for sl, _ in load_srv]):
        out.append(NetTarget(host, ctx.transports[host], pids_on(host), env.if_of(host)))
    return out


def _tool_procs(ctx: LatencyContext, env: PointEnv, engine: str, probes: list[_Probe], load_srv: Slots,
                load_cli: Slots) -> Callable[[], list[tuple[int, str, str, str]]]:
    """The tools whose own CPU is followed: engine servers and probe clients
    (below their launcher and gate), the load's iperf3 processes."""
    if env.cpu_transport is None:
        return lambda: []
    gated = [(pr.client_proc.pid, pr.client, "latency-client", engine) for pr in probes if pr.client_proc]
    gated += [(x.pid, ctx.server, "load-client", f"{sl.client}:{sl.port}") for sl, x in load_cli]
    wrapped = tool_procs(env.cpu_transport, lambda: [], [(pr.server.pid, ctx.server, "latency-server",
                                                          f"{engine}:{pr.port}") for pr in probes if pr.server])
    below = tool_procs(env.cpu_transport, lambda: [(x.pid, sl.client, "load-server", str(sl.port))
                                                   for sl, x in load_srv], gated)
    return lambda: wrapped() + below()
