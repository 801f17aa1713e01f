"""One TCP trial: servers up, clients started together, outputs collected, parsed.

The layout of engine processes (the study server runs the engine clients,
each client host its engine servers) and what the TCP and UDP studies share
about driving iperf are in :mod:`nicbench.run.iperf`.

Measurement rules:
- the receiver's bytes are the truth; the sender's are kept as well;
- every interval gets an absolute start: iperf2 reports wall-clock stamps;
  iperf3 intervals are anchored at the process's exit stamp minus its last
  interval's end (see :func:`nicbench.run.iperf.iperf3_anchor`), the exec
  stamp as a fallback;
- all client processes are released by one barrier; both the launch skew (exec
  stamps) and the start skew (estimated test starts) are recorded.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from ...hosts.base import Hosts
from ...hosts.transport import Process, Transport, host_clock_offset, read_output
from ...plan.model import Plan
from ...plan.studies.tcp import TcpStudy
from ...records import RawOutput, Sample, TrialRecord, TrialSpec
from ...run import iperf
from ...run import nbperf as nbperf_engine
from ...run.iperf import MODE, ProcSlot, Slots, layout
from ...run.kit import PointEnv, PointGuard, PointSamplers, RawFiles, release_together, stall_causes, stalled
from ...run.point import pair_fate, parsed_or_lost, silent_pairs
from ...run.preflight import busy_ports, problems_found, reach_problems
from ...run.study import Preflight, TrialOutcome
from ...tools import iperf2, iperf3
from ...tools.base import ToolInfo


@dataclass(frozen=True)
class TcpContext:
    """What the TCP study's preflight decided, for every point."""

    study: TcpStudy
    server: str
    clients: list[str]
    transports: dict[str, Transport]
    addresses: dict[str, str]             # host -> test address
    tool: ToolInfo
    skip_rx_copy: bool = False


def stream_cap(s: TcpStudy) -> int:
    """Streams per engine process: the plan's, else the engine's own limit."""
    return iperf.stream_cap(s.engine, s.streams_per_process)


class TcpRunner:
    """The TCP study as the session drives it (see ``run.study.StudyRunner``)."""

    kind = "tcp"

    def __init__(self, plan: Plan, hosts: Hosts):
        assert isinstance(plan.study, TcpStudy)
        self.study: TcpStudy = plan.study
        self.server, self.clients = plan.server, list(plan.clients)
        self.transports = hosts.transports()
        self.addresses = {h.name: h.ip for h in hosts.spec.hosts}
        self.ctx: TcpContext | None = None
        # engine = "nbperf" is driven by run/nbperf.py: preflight and trial go there
        self.nbperf = (nbperf_engine.NbperfTcp(self.study, self.server, self.clients, self.transports, self.addresses)
                       if self.study.engine == "nbperf" else None)

    def preflight(self) -> Preflight:
        if self.nbperf is not None:
            return self.nbperf.preflight()
        self.ctx, warnings = preflight(self.study, self.server, self.clients, self.transports, self.addresses)
        c, s = self.ctx, self.study
        return Preflight(tools=("iperf3" if s.engine == "iperf3" else "iperf", "ethtool"),
                         warnings=tuple(warnings),
                         meta={"engine": s.engine, "engine_version": c.tool.version_str,
                               "engine_features": sorted(c.tool.features), "skip_rx_copy_used": c.skip_rx_copy,
                               "trim": s.trim})

    def start(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return []

    def trial(self, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
        if self.nbperf is not None:
            return self.nbperf.trial(env, spec, raw_dir)
        assert self.ctx is not None, "preflight first"
        return TrialOutcome(*run_trial(self.ctx, env, spec, raw_dir))

    def stop(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return []


def preflight(s: TcpStudy, server: str, clients: list[str], transports: dict[str, Transport],
              addresses: dict[str, str]) -> tuple[TcpContext, list[str]]:
    """Check every host at once; raise PreflightError listing all problems."""
    problems: list[str] = []
    warnings: list[str] = []
    tool = iperf.detect_everywhere(s.engine, [server, *clients], transports, problems,
                                   iperf.version_floors(s.engine, s.directions)).get(server)
    problems += reach_problems(transports[server], {c: addresses[c] for c in clients})
    for c in clients:
        ports_wanted = {slot.port for n in s.connections
                        for slot in layout(n, clients, s.connections_per, stream_cap(s), s.port_base)
                        if slot.client == c}
        taken = sorted(ports_wanted & busy_ports(transports[c]))
        if taken:
            problems.append(f"{c}: port(s) {', '.join(map(str, taken))} already in use")
    problems += iperf.nofile_problems(s.engine, [slot for n in s.connections for slot in layout(
        n, clients, s.connections_per, stream_cap(s), s.port_base)], server, transports, "bidir" in s.directions)
    skip = False
    if tool is not None and s.engine == "iperf3":
        if s.zerocopy and not tool.has("zerocopy"):
            problems.append(f"{server}: iperf3 {tool.version_str} has no -Z/--zerocopy")
        if not tool.has("server_output"):
            problems.append(f"{server}: iperf3 {tool.version_str} has no --get-server-output, "
                            "so receiver-side bytes of tx points cannot be collected (install iperf3 >= 3.1)")
        if s.skip_rx_copy is True and not tool.has("skip_rx_copy"):
            problems.append(f"{server}: iperf3 {tool.version_str} has no --skip-rx-copy "
                            "(set skip_rx_copy = \"auto\" or false, or install iperf3 >= 3.16)")
        skip = bool(s.skip_rx_copy) and tool.has("skip_rx_copy")
        if s.skip_rx_copy == "auto" and not skip:
            warnings.append(f"iperf3 {tool.version_str} has no --skip-rx-copy: receivers copy every "
                            "byte to user space (the seed's runs did not)")
        if tool.version < (3, 16):
            warnings.append(f"iperf3 {tool.version_str} is single-threaded: all streams of one process "
                            "share one core; more client hosts or processes spread the load")
    if problems:
        raise problems_found(problems, "tcp")
    assert tool is not None
    return TcpContext(s, server, clients, dict(transports), addresses, tool, skip), warnings


def run_trial(ctx: TcpContext, env: PointEnv, spec: TrialSpec,
              raw_dir: Path) -> tuple[TrialRecord, list[Sample], list[RawOutput]]:
    """Run one point; never raises for a point-level failure (it is recorded)."""
    s = ctx.study
    p = spec.params
    engine = s.engine
    slots = layout(int(p["connections"]), ctx.clients, s.connections_per, stream_cap(s), s.port_base)
    mode = MODE[str(p["direction"])]
    io = int(p["io_size"])
    srv_t = ctx.transports[ctx.server]
    started = time.time()
    servers: list[tuple[ProcSlot, Process]] = []
    clis: list[tuple[ProcSlot, Process]] = []
    raws = RawFiles(spec.trial_id, env, raw_dir, "iperf3" if engine == "iperf3" else "iperf2")
    meta: dict = {"layout": [vars(x) for x in slots], "engine": engine, "server": ctx.server,
                  "engine_version": ctx.tool.version_str, "argv": {}}
    samples: list[Sample] = []
    guard = PointGuard(meta, lambda: [p for _, p in clis + servers], grace=0.5)

    limit = s.omit + s.duration + s.timeout_margin
    lost: dict[str, str] = {}          # "client:port" -> why that pair delivered nothing usable
    with guard:
        # 1. engine servers on the client hosts
        for slot in slots:
            t = ctx.transports[slot.client]
            argv = (iperf3.server_argv(slot.port, s.interval) if engine == "iperf3" else
                    iperf2.server_argv(port=slot.port, interval=s.interval, io_size=io,
                                       lifetime=iperf2.lifetime(s.duration, s.omit, s.timeout_margin),
                                       window=s.window))
            argv = env.pinned(slot.client, argv)
            out, err = raws.pair(slot.client, "engine-server", f"{slot.client}-server-{slot.port}")
            servers.append((slot, t.spawn(argv, stdout=out, stderr=err)))
            meta["argv"][f"{slot.client}:server:{slot.port}"] = argv
        deadline = time.monotonic() + 5.0
        for slot, proc in servers:
            iperf.wait_ready(ctx.transports[slot.client], proc, slot.port, deadline)
        # 2. engine clients on the server host, behind the start gate
        for slot in slots:
            target = ctx.addresses[slot.client]
            if engine == "iperf3":
                argv = iperf3.client_argv(ctx.tool, target=target, port=slot.port, duration=s.duration,
                                          omit=s.omit, interval=s.interval, io_size=io,
                                          streams=slot.streams, mode=mode, zerocopy=s.zerocopy,
                                          no_delay=s.no_delay, skip_rx_copy=ctx.skip_rx_copy,
                                          window=s.window, congestion=s.congestion)
            else:
                argv = iperf2.client_argv(target=target, port=slot.port, duration=s.duration,
                                          omit=s.omit, interval=s.interval, io_size=io,
                                          streams=slot.streams, mode=mode, no_delay=s.no_delay,
                                          window=s.window, congestion=s.congestion)
            argv = env.pinned(ctx.server, argv)
            out, err = raws.pair(ctx.server, "engine-client", f"{slot.client}-client-{slot.port}")
            clis.append((slot, srv_t.spawn(argv, stdout=out, stderr=err, gated=True)))
            meta["argv"][f"{ctx.server}:client:{slot.client}:{slot.port}"] = argv
        # 3. the barrier: once every shim waits at its gate, release them back to back
        meta["released"] = release_together([p for _, p in clis], "engine clients", ctx.server)
        # the window starts after the warm-up: the samplers start now, with the tools
        samplers = guard.samplers = PointSamplers(
            spec.trial_id, iperf.net_targets(ctx.server, ctx.transports, env, servers, clis), env.cpu_transport,
            iperf.engine_procs(ctx.server, env, servers, clis), machine=env.cpu_machine, nic_irqs=env.nic_irqs,
            net_interval=min(s.interval, 0.5), cpu_interval=min(s.interval, 0.25)).start()
        # 4. wait for the clients; one still running at the time limit is lost
        #    (stopped with the point), the others are kept
        end_by = time.monotonic() + limit
        hung = [(slot, proc) for slot, proc in clis if proc.wait(end_by - time.monotonic()) is None]
        for slot, proc in hung:
            hosts = {h: ctx.transports[h] for h in (ctx.server, slot.client)}
            held = iperf.held_by_others(ctx.addresses.get(ctx.server), ctx.transports,
                                        [x for x in servers if x[0] == slot])
            pair = [proc, *(p for sl, p in servers if sl == slot)]
            why = stalled(f"engine client to {slot.client}:{slot.port}", limit, ctx.server,
                          held + stall_causes(hosts, env.ifnames, pair),
                          "the path may be stalled; raise study.timeout_margin if the host is slow")
            if len(hung) == len(clis):
                raise why
            lost[f"{slot.client}:{slot.port}"] = why.one_line().removeprefix("nicbench: ")
        samplers.last_read()        # as the clients finish (through the namespace)
        # 5. servers: iperf3 -1 exits by itself; an iperf2 server is stopped once
        #    every flow it serves has printed its summary (or after 2 s)
        iperf.stop_servers(engine, servers, mode, s.interval, meta)
    status, error, counter_samples = guard.status, guard.error, guard.counters

    # 6. parse what the tools wrote (also after a failure: what parsed is kept)
    stamps, ends = iperf.gate_stamps(clis, meta)
    totals: dict[str, dict[str, int]] = {}
    if status != "interrupted":
        samples = _parse_all(ctx, spec, engine, clis, servers, stamps, ends, totals, meta, lost)
        samples = silent_pairs(samples, [f"{sl.client}:{sl.port}" for sl, _ in clis], str(p["direction"]), lost)
        status, error = pair_fate(status, error, lost, len(clis), meta)
    meta["totals"] = totals
    meta["start_skew_s"] = iperf.start_skew(meta)
    samples += counter_samples
    ended = time.time()
    meta["overhead_s"] = (ended - started) - (s.omit + s.duration)
    return TrialRecord(spec, status, started, ended, error, meta), samples, raws.outputs  # type: ignore[arg-type]


def _parse_all(ctx: TcpContext, spec: TrialSpec, engine: str, clis: Slots, servers: Slots,
               stamps: dict[str, float | None], ends: dict[str, float | None], totals: dict[str, dict[str, int]],
               meta: dict[str, Any], lost: dict[str, str]) -> list[Sample]:
    """Every pair's samples; a pair whose output cannot be used goes into
    ``lost`` with why (the others are still read)."""
    samples: list[Sample] = []
    meta["test_starts"], meta["anchors"] = {}, {}
    lag = ctx.study.interval if engine == "iperf2" and iperf2.stamps_late(ctx.tool) else 0.0
    if lag:
        meta["iperf2_stamp_lag_s"] = lag
    for slot, proc in clis:
        key = f"{slot.client}:{slot.port}"
        if key in lost:
            continue
        samples += parsed_or_lost(key, lost, "iperf", partial(
            _parse_client, ctx, spec, engine, slot, proc, stamps, ends, totals, meta, lag)) or []
    if engine == "iperf2":   # receiver side of the fwd flow lives in the server's CSV
        for slot, proc in servers:
            key = f"{slot.client}:{slot.port}"
            if key in lost:
                continue
            rep2 = parsed_or_lost(key, lost, "iperf2", partial(
                iperf2.parse, read_output(proc.stdout_path), role="server", omit=ctx.study.omit,
                server_port=slot.port, interval=ctx.study.interval, stamp_lag=lag + host_clock_offset(proc),
                stamps_utc=True), label=f"the iperf2 server on {key}")
            if rep2 is None:
                continue
            samples += iperf.flow_samples(spec.trial_id, slot.client, slot.port, None, rep2.intervals)
            for k, v in rep2.totals.items():
                totals.setdefault(key, {}).setdefault(k, v)
    # a lost pair's samples stay out: its bytes would be a partial interval of an unknown span
    return [x for x in samples if f"{x.tag('host')}:{x.tag('proc')}" not in lost]


def _parse_client(ctx: TcpContext, spec: TrialSpec, engine: str, slot: ProcSlot, proc: Process,
                  stamps: dict[str, float | None], ends: dict[str, float | None],
                  totals: dict[str, dict[str, int]], meta: dict[str, Any], lag: float) -> list[Sample]:
    """One engine client's samples (and, for iperf3, its server's, nested in its report)."""
    s = ctx.study
    text = read_output(proc.stdout_path)
    key = f"{slot.client}:{slot.port}"
    if engine == "iperf3":
        rep = iperf.iperf3_report(proc, key, ctx.server)
        anchor, peer_anchor = iperf.place_iperf3(rep, key, stamps, ends, meta, ctx.server)
        totals[key] = rep.totals
        return iperf.flow_samples(spec.trial_id, slot.client, slot.port, anchor, rep.intervals, peer_anchor)
    iperf.check_iperf2(text, proc, key, ctx.server)
    rep2 = iperf2.parse(text, role="client", omit=s.omit, server_port=slot.port, interval=s.interval,
                        stamp_lag=lag + host_clock_offset(proc), stamps_utc=True)
    totals[key] = dict(rep2.totals)
    iperf.place_iperf2(rep2, key, ends, meta)
    return iperf.flow_samples(spec.trial_id, slot.client, slot.port, None, rep2.intervals)
