"""One TCP trial: servers up, clients started together, outputs collected, parsed.

Layout (both seeds): the study's *server* host runs the engine's client
processes, one per (client host, port); each client host runs one engine
server per port.  ``tx`` = data from the study server to the clients (engine
fwd flow), ``rx`` = the reverse (``-R``), ``bidir`` both.

Measurement rules:
- the receiver's bytes are the truth; the sender's are kept as well;
- every interval gets an absolute start: iperf2 reports wall-clock stamps;
  iperf3 intervals are anchored at the process's exit stamp minus its last
  interval's end (see :func:`iperf3_anchor`), the exec stamp as a fallback;
- all client processes are released by one barrier; both the launch skew (exec
  stamps) and the start skew (estimated test starts) are recorded.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.errors import NicbenchError, PreflightError, ToolError, tail
from ...hosts.base import Hosts
from ...hosts.transport import END_MARK, Process, Transport, parse_gate_stamp, read_output, tool_stderr
from ...plan.model import Plan
from ...plan.studies.tcp import TcpStudy
from ...records import RawOutput, Sample, TrialRecord, TrialSpec, make_tags
from ...run.kit import PointEnv, PointGuard, PointSamplers, even_shares, release_together, stall_causes, stalled
from ...run.preflight import busy_ports, problems_found, reach_problems
from ...run.procnet import established_peers, listening, socket_inodes
from ...run.study import Preflight, TrialOutcome
from ...sampling.sampler import NetTarget, tool_procs
from ...tools import iperf2, iperf3
from ...tools.base import FlowInterval, ToolInfo

MODE = {"tx": "fwd", "rx": "rev", "bidir": "bidir"}
DIRECTION = {"fwd": "tx", "rev": "rx"}


@dataclass(frozen=True)
class ProcSlot:
    """One engine client/server pair: which client host, which port, how many streams."""

    client: str
    port: int
    streams: int


def layout(connections: int, clients: Sequence[str], per: str, cap: int,
           port_base: int) -> list[ProcSlot]:
    """Spread ``connections`` over clients and split each above the per-process cap.

    ``per = "total"``: the count is the sum over all clients (as the seeds'
    figures label it), spread as evenly as possible; ``"client"``: each client
    gets that many.
    """
    n = len(clients)
    share = [connections] * n if per == "client" else even_shares(connections, n)
    slots = []
    for client, c in zip(clients, share, strict=True):
        if c == 0:
            continue
        procs = math.ceil(c / cap)
        for k, streams in enumerate(even_shares(c, procs)):
            slots.append(ProcSlot(client, port_base + k, streams))
    return slots


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
    return s.streams_per_process or (iperf3.MAX_STREAMS if s.engine == "iperf3" else iperf2.MAX_STREAMS)


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

    def preflight(self) -> Preflight:
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
        assert self.ctx is not None, "preflight first"
        return TrialOutcome(*run_trial(self.ctx, env, spec, raw_dir))

    def stop(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return []


def preflight(s: TcpStudy, server: str, clients: list[str], transports: dict[str, Transport],
              addresses: dict[str, str]) -> tuple[TcpContext, list[str]]:
    """Check every host at once; raise PreflightError listing all problems."""
    problems: list[str] = []
    warnings: list[str] = []
    tool = None
    floor = [iperf3.MIN_VERSION] if s.engine == "iperf3" else [iperf2.MIN_VERSION]
    if s.engine == "iperf3" and "bidir" in s.directions:
        floor.append(iperf3.MIN_BIDIR)
    for host in [server, *clients]:
        try:
            info = detect_tool(transports[host], s.engine)
            if host == server:
                tool = info
            problems += [p for m in floor if (p := m.problem(info.version, host))][:1]
        except PreflightError as e:
            problems.append(f"{host}: {e.message}")
    problems += reach_problems(transports[server], {c: addresses[c] for c in clients})
    for c in clients:
        ports_wanted = {slot.port for n in s.connections
                        for slot in layout(n, clients, s.connections_per, stream_cap(s), s.port_base)
                        if slot.client == c}
        taken = sorted(ports_wanted & busy_ports(transports[c]))
        if taken:
            problems.append(f"{c}: port(s) {', '.join(map(str, taken))} already in use")
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


def _wait_listening(t: Transport, proc: Process, port: int, deadline: float) -> None:
    while True:
        rc = proc.poll()
        if rc is not None:
            out = read_output(proc.stdout_path) + "\n" + read_output(proc.stderr_path)
            msg = _server_error(out) or tail(out) or f"exited {rc}"
            hint = ("another process holds the port: pick another study.port_base, or stop it"
                    if "in use" in msg.lower() else None)
            raise ToolError(f"engine server on port {port} failed to start: {msg}", where=t.host, hint=hint)
        inodes: set[int] = set()
        for table in ("tcp", "tcp6"):
            try:
                inodes |= listening(t.read_text(f"/proc/{proc.pid}/net/{table}")).get(port, set())
            except OSError:
                pass
        if inodes and inodes & socket_inodes(t.fd_links(proc.pid)):
            return
        if time.monotonic() > deadline:
            raise ToolError(f"engine server on port {port} is not listening after 5 s", where=t.host)
        time.sleep(0.005)


def _server_error(text: str) -> str | None:
    try:
        return iperf3.extract_json(text).get("error")
    except NicbenchError:
        return None


_HINTS = {
    "busy": "another test is using this server port: is a stray iperf3 client running?",
    "refused": "the engine server is not listening: it may have crashed (iperf 2.1.8 with -l mismatch) "
               "or a firewall blocks the port",
    "timed out": "the path is down or very lossy: check MTU and addresses with 'nicbench lab status'",
}


def _tool_error(msg: str, host: str) -> ToolError:
    hint = next((h for k, h in _HINTS.items() if k in msg.lower()), None)
    return ToolError(msg, where=host, hint=hint)


def _samples(trial_id: str, host: str, port: int, anchor: float | None,
             intervals: Sequence[FlowInterval], peer_anchor: float | None = None) -> list[Sample]:
    """Samples on the wall clock: ``anchor`` places this process's own intervals,
    ``peer_anchor`` those its peer measured on its own clock."""
    out = []
    for iv in intervals:
        a = peer_anchor if (iv.by_peer and peer_anchor is not None) else anchor
        if iv.abs_start is not None:
            t0 = iv.abs_start
        elif a is not None:
            t0 = a + iv.start
        else:
            continue
        t1 = t0 + (iv.end - iv.start)
        tags = make_tags(host=host, proc=port, direction=DIRECTION[iv.flow], side=iv.side,
                         omitted=1 if iv.omitted else 0, streams=iv.streams)
        out.append(Sample(trial_id, "tcp.bytes", float(iv.bytes), "bytes", t0, t1, tags))
        if iv.retransmits is not None:
            out.append(Sample(trial_id, "tcp.retransmits", float(iv.retransmits), "count", t0, t1, tags))
    return out


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
    raws: list[RawOutput] = []
    meta: dict = {"layout": [vars(x) for x in slots], "engine": engine, "server": ctx.server,
                  "engine_version": ctx.tool.version_str, "argv": {}}
    samples: list[Sample] = []
    guard = PointGuard(meta, lambda: [p for _, p in clis + servers], grace=0.5)

    def raw(host: str, role: str, name: str) -> tuple[Path, Path]:
        out, err = raw_dir / f"{name}.out", raw_dir / f"{name}.err"
        tool = "iperf3" if engine == "iperf3" else "iperf2"
        raws.append(RawOutput(spec.trial_id, host, role, tool, "stdout", env.rel(out)))
        raws.append(RawOutput(spec.trial_id, host, role, tool, "stderr", env.rel(err)))
        return out, err

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
            out, err = raw(slot.client, "engine-server", f"{slot.client}-server-{slot.port}")
            servers.append((slot, t.spawn(argv, stdout=out, stderr=err)))
            meta["argv"][f"{slot.client}:server:{slot.port}"] = argv
        deadline = time.monotonic() + 5.0
        for slot, proc in servers:
            _wait_listening(ctx.transports[slot.client], proc, slot.port, deadline)
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
            out, err = raw(ctx.server, "engine-client", f"{slot.client}-client-{slot.port}")
            clis.append((slot, srv_t.spawn(argv, stdout=out, stderr=err, gated=True)))
            meta["argv"][f"{ctx.server}:client:{slot.client}:{slot.port}"] = argv
        # 3. the barrier: once every shim waits at its gate, release them back to back
        meta["released"] = release_together([p for _, p in clis], "engine clients", ctx.server)
        # the window starts after the warm-up: the samplers start now, with the tools
        samplers = guard.samplers = PointSamplers(
            spec.trial_id, _net_targets(ctx, env, servers, clis), env.cpu_transport,
            _tool_procs(ctx, env, servers, clis), machine=env.cpu_machine, nic_irqs=env.nic_irqs,
            net_interval=min(s.interval, 0.5), cpu_interval=min(s.interval, 0.25)).start()
        # 4. wait for the clients; one still running at the time limit is lost
        #    (stopped with the point), the others are kept
        end_by = time.monotonic() + limit
        hung = [(slot, proc) for slot, proc in clis if proc.wait(end_by - time.monotonic()) is None]
        for slot, _ in hung:
            hosts = {h: ctx.transports[h] for h in (ctx.server, slot.client)}
            why = stalled(f"engine client to {slot.client}:{slot.port}", limit, ctx.server,
                          _held(ctx, [x for x in servers if x[0] == slot]) + stall_causes(hosts, env.ifnames),
                          "the path may be stalled; raise study.timeout_margin if the host is slow")
            if len(hung) == len(clis):
                raise why
            lost[f"{slot.client}:{slot.port}"] = why.one_line().removeprefix("nicbench: ")
        samplers.last_read()        # as the clients finish (through the namespace)
        # 5. servers: iperf3 -1 exits by itself; an iperf2 server is stopped once
        #    every flow it serves has printed its summary (or after 2 s)
        flows_per_stream = 2 if mode == "bidir" else 1
        stop_by = time.monotonic() + 2.0
        for slot, proc in servers:
            if engine == "iperf3":
                if proc.wait(3.0) is None:
                    proc.stop(0.5)
                continue
            want = slot.streams * flows_per_stream
            while (iperf2.finished_flows(read_output(proc.stdout_path), s.interval) < want
                   and time.monotonic() < stop_by and proc.poll() is None):
                time.sleep(0.01)
            got = iperf2.finished_flows(read_output(proc.stdout_path), s.interval)
            if got < want:
                meta.setdefault("warnings", []).append(
                    f"iperf2 server {slot.client}:{slot.port} printed {got} of {want} flow summaries "
                    "before it was stopped: its last interval may be missing")
            proc.stop(grace=0.0, sig=signal.SIGKILL)
    status, error, counter_samples = guard.status, guard.error, guard.counters

    # 6. parse what the tools wrote (also after a failure: what parsed is kept)
    stamps: dict[str, float | None] = {}
    ends: dict[str, float | None] = {}
    for slot, proc in clis:
        err_text = read_output(proc.stderr_path)
        stamps[f"{slot.client}:{slot.port}"] = parse_gate_stamp(err_text)
        ends[f"{slot.client}:{slot.port}"] = parse_gate_stamp(err_text, END_MARK)
    good = [v for v in stamps.values() if v is not None]
    meta["launch_stamps"] = stamps
    meta["exit_stamps"] = ends
    meta["launch_skew_s"] = (max(good) - min(good)) if len(good) > 1 else 0.0 if good else None
    totals: dict[str, dict[str, int]] = {}
    if status != "interrupted":
        samples = _parse_all(ctx, spec, engine, clis, servers, stamps, ends, totals, meta, lost)
        status, error = _fate(status, error, lost, len(clis), meta)
    meta["totals"] = totals
    starts = [v for v in (meta.get("test_starts") or {}).values() if v is not None]
    # the skew that matters: between the moments the tests really started
    meta["start_skew_s"] = (max(starts) - min(starts)) if len(starts) > 1 else \
        (0.0 if starts else meta["launch_skew_s"])
    samples += counter_samples
    ended = time.time()
    meta["overhead_s"] = (ended - started) - (s.omit + s.duration)
    return TrialRecord(spec, status, started, ended, error, meta), samples, raws  # type: ignore[arg-type]


Slots = Sequence[tuple[ProcSlot, Process]]


def _net_targets(ctx: TcpContext, env: PointEnv, servers: Slots, clis: Slots) -> list[NetTarget]:
    """The study server (seen through its engine clients) and every client host
    (through the engine servers living in its namespace)."""
    out = [NetTarget(ctx.server, ctx.transports[ctx.server], lambda: [p.pid for _, p in clis], env.if_of(ctx.server))]
    def pids_on(c: str) -> Callable[[], list[int]]:
        return lambda: [p.pid for sl, p in servers if sl.client == c]
    for client in dict.fromkeys(sl.client for sl, _ in servers):
        out.append(NetTarget(client, ctx.transports[client], pids_on(client), env.if_of(client)))
    return out


def _tool_procs(ctx: TcpContext, env: PointEnv, servers: Slots,
                clis: Slots) -> Callable[[], list[tuple[int, str, str, str]]]:
    """The tool processes whose own CPU is followed: engine servers by PID, engine
    clients below their gate shim."""
    if env.cpu_transport is None:
        return lambda: []
    return tool_procs(env.cpu_transport,
                      lambda: [(p.pid, sl.client, "engine-server", str(sl.port)) for sl, p in servers],
                      [(p.pid, ctx.server, "engine-client", f"{sl.client}:{sl.port}") for sl, p in clis])


def _held(ctx: TcpContext, servers: Slots) -> list[str]:
    """Engine servers another peer holds: a one-off iperf3 server serves the
    first connection it accepts, so an idle peer there (not the study server)
    keeps the point's own client waiting."""
    out = []
    own = ctx.addresses.get(ctx.server)
    for slot, proc in servers:
        t = ctx.transports[slot.client]
        for table in ("tcp", "tcp6"):
            try:
                peers = established_peers(t.read_text(f"/proc/{proc.pid}/net/{table}"), slot.port)
            except (OSError, NicbenchError):
                continue
            for addr, port in peers:
                if own is not None and addr != own:
                    out.append(f"the engine server on {slot.client}:{slot.port} is busy with another peer, "
                               f"{addr}:{port} (an iperf3 server serves one test at a time): stop that client")
    return list(dict.fromkeys(out))


# A test's end anchor is trusted unless it implies an implausible set-up time
MAX_SETUP_S = 2.0


def iperf3_anchor(launch: float | None, exit_: float | None, last_end: float) -> tuple[float | None, str]:
    """Wall-clock time of an iperf3 process's test start (its interval clock's 0).

    From the exit stamp: the test ends at ``last_end`` on its clock, then
    results are exchanged (milliseconds over an idle link) and it exits.  The
    exec stamp is only a lower bound: connection set-up comes before t = 0
    and took hundreds of ms for a client starved on a saturated link.
    """
    if exit_ is not None and last_end > 0:
        anchor = exit_ - last_end
        if launch is None or -0.05 <= anchor - launch <= MAX_SETUP_S:
            return anchor, "exit"
    return launch, "launch"


def _fate(status: str, error: str | None, lost: dict[str, str], pairs: int,
          meta: dict[str, Any]) -> tuple[str, str | None]:
    """A point whose every pair delivered is ok; one that lost some pairs
    (a client killed, its link down, its engine server gone) is partial --
    the survivors' data kept, the lost pairs and hosts named -- never ok; one
    that lost them all failed."""
    if not lost or status != "ok":
        return status, error
    meta["lost"] = dict(lost)
    if len(lost) >= pairs:
        return "failed", "; ".join(lost.values())
    return "partial", "partial: " + "; ".join(f"{k} lost: {why}" for k, why in lost.items())


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
        try:
            samples += _parse_client(ctx, spec, engine, slot, proc, stamps, ends, totals, meta, lag)
        except NicbenchError as e:
            lost[key] = e.message + (f" (hint: {e.hint})" if e.hint else "")
        except (ValueError, KeyError, TypeError) as e:   # a parser bug must lose the pair, not the run
            lost[key] = f"iperf to {key}: tool output not understood: {type(e).__name__}: {e}"
    if engine == "iperf2":   # receiver side of the fwd flow lives in the server's CSV
        for slot, proc in servers:
            key = f"{slot.client}:{slot.port}"
            if key in lost:
                continue
            try:
                rep2 = iperf2.parse(read_output(proc.stdout_path), role="server", omit=ctx.study.omit,
                                    server_port=slot.port, interval=ctx.study.interval, stamp_lag=lag)
            except (NicbenchError, ValueError, KeyError, TypeError) as e:
                lost[key] = f"the iperf2 server on {key}: {e}"
                continue
            samples += _samples(spec.trial_id, slot.client, slot.port, None, rep2.intervals)
            for k, v in rep2.totals.items():
                totals.setdefault(key, {}).setdefault(k, v)
    # a lost pair's samples stay out: its bytes would be a partial interval of an unknown span
    return [x for x in samples if f"{x.tag('host')}:{x.tag('proc')}" not in lost]


def _parse_client(ctx: TcpContext, spec: TrialSpec, engine: str, slot: ProcSlot, proc: Process,
                  stamps: dict[str, float | None], ends: dict[str, float | None],
                  totals: dict[str, dict[str, int]], meta: dict[str, Any], lag: float) -> list[Sample]:
    """One engine client's samples (and, for iperf3, its server's, nested in its report)."""
    s = ctx.study
    samples: list[Sample] = []
    text = read_output(proc.stdout_path)
    key = f"{slot.client}:{slot.port}"
    rc = proc.poll()
    if engine == "iperf3":
        try:
            rep = iperf3.parse(text)
        except ToolError as e:     # the pair goes into the message: "no JSON" alone says not which
            raise ToolError(f"iperf3 to {key}: {e.message}", where=ctx.server, hint=e.hint) from None
        if rep.error:
            raise _tool_error(f"iperf3 to {key}: {rep.error}", ctx.server)
        if rep.damage:
            raise ToolError(f"iperf3 to {key}: its report is damaged ({'; '.join(rep.damage)}): its figures "
                            "cannot be trusted", where=ctx.server, hint="the raw report is kept with the run")
        if rc not in (0, None):
            raise ToolError(f"iperf3 to {key} exited {rc} after printing a report without an error: "
                            f"{tail(tool_stderr(proc.stderr_path)) or 'no error text'}", where=ctx.server)
        if not rep.has_server_output and not rep.intervals:
            raise ToolError(f"iperf3 to {key} reported no intervals", where=ctx.server)
        anchor, how = iperf3_anchor(stamps.get(key), ends.get(key), rep.last_end)
        if anchor is None:
            raise ToolError("the start gate recorded no time", where=ctx.server)
        meta["test_starts"][key], meta["anchors"][key] = anchor, how
        # Both ends stop together (the client sends TEST_END), but the server's
        # interval clock can start late: seen 0.5 s late for a busy --bidir
        # server.  So its intervals are placed by their end as well.
        peer_anchor = anchor
        if how == "exit" and rep.peer_last_end > 0:
            peer_anchor = anchor + rep.last_end - rep.peer_last_end
            meta.setdefault("peer_clock_offsets", {})[key] = peer_anchor - anchor
        samples += _samples(spec.trial_id, slot.client, slot.port, anchor, rep.intervals, peer_anchor)
        totals[key] = rep.totals
    else:
        if not text.strip():
            raise _tool_error(f"iperf to {key} printed nothing: "
                              f"{tail(tool_stderr(proc.stderr_path)) or 'no error text'}", ctx.server)
        if rc not in (0, None):
            raise _tool_error(f"iperf to {key} exited {rc}: "
                              f"{tail(tool_stderr(proc.stderr_path)) or 'no error text'}", ctx.server)
        rep2 = iperf2.parse(text, role="client", omit=s.omit, server_port=slot.port, interval=s.interval,
                            stamp_lag=lag)
        samples += _samples(spec.trial_id, slot.client, slot.port, None, rep2.intervals)
        totals[key] = dict(rep2.totals)
        firsts = [i.abs_start for i in rep2.intervals if i.abs_start is not None]
        meta["test_starts"][key], meta["anchors"][key] = (min(firsts) if firsts else None), "wall clock"
        # the CSV's wall clock must end before the process did
        last = max((i.abs_start + i.end - i.start for i in rep2.intervals if i.abs_start is not None),
                   default=None)
        exit_at = ends.get(key)
        if last is not None and exit_at is not None and last > exit_at + 0.05:
            meta.setdefault("warnings", []).append(
                f"iperf2 to {key}: its CSV stamps run {last - exit_at:.3f}s past the process's exit: "
                "intervals are placed late (a stamp quirk of this iperf version)")
    return samples


def detect_tool(t: Transport, engine: str) -> ToolInfo:
    """Version and features of the engine on one host (preflight)."""
    if engine == "iperf3":
        try:
            v = t.run(["iperf3", "--version"], timeout=10)
        except PreflightError:  # not found, locally or inside a namespace
            raise PreflightError("iperf3 is not installed", where=t.host,
                                 hint="apt-get install iperf3 (the set-up command in README.md does it)") from None
        h = t.run(["iperf3", "--help"], timeout=10)
        if v.returncode != 0:
            raise PreflightError(f"iperf3 --version failed: {tail(v.stderr)}", where=t.host)
        return iperf3.info_from(v.stdout, h.stdout + h.stderr)
    try:
        v = t.run(["iperf", "--version"], timeout=10)
    except PreflightError:
        raise PreflightError("iperf (iperf 2) is not installed", where=t.host,
                             hint="apt-get install iperf (the set-up command in README.md does it)") from None
    info = iperf2.info_from(v.stdout + v.stderr)
    if info.version[:1] != (2,):
        raise PreflightError(f"'iperf' is not iperf 2: {info.version_text!r}", where=t.host)
    return info
