"""One UDP point: engine servers up on the clients, engine clients released
together from the study server, the receivers' counts parsed -- or, with
``search = "max_rate"``, a search for the highest rate per client whose loss
stays within the threshold (each step such a measurement).

Measurement rules:
- the receiver's counts are the truth: datagrams expected by sequence
  number, lost, out of order, jitter, bytes that arrived; the sender's are
  kept beside them;
- intervals are placed on the wall clock as in the TCP study
  (:mod:`nicbench.run.iperf`), so the analysis can cut one shared window;
- a pair lost mid-point (its client hung at the time limit, its engine
  server killed or gone, its output unusable) makes the point partial: the
  other pairs' data is kept and the lost pair named, as in the TCP study
  (:func:`nicbench.run.iperf.pair_fate`); a maximum-rate search cannot judge
  a step on some clients' loss, so a step that lost a pair ends the search
  and fails the point (its steps kept in meta);
- a receiver that counted nothing fails the point with that reason, never
  "0 % loss of 0 datagrams" (the kernel's counters of the point say whether
  nothing reached the host, or nothing got through its reassembly or its
  firewall); an iperf3 stream whose set-up datagram never reached its server
  fails within :data:`UDP_SETUP_S`;
- fragmented datagrams: incomplete ones, left by fragments lost in an
  earlier point, hold the receiver's reassembly memory for up to
  ``net.ipv4.ipfrag_time`` and make it drop new fragments; a point of
  fragmented datagrams first waits until no host holds any (:func:`drain_fragments`);
- the search judges each step on the tool's own counts over the measured part
  (omitted warm-up left out), as RFC 2544 judges a trial; the report's window
  figures of the chosen step come from the analysis.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from ...core import linerate
from ...core.errors import NicbenchError, PreflightError, ToolError, tail
from ...hosts.base import Hosts
from ...hosts.transport import Process, Transport, host_clock_offset, read_output, tool_stderr
from ...plan.model import Plan
from ...plan.studies.udp import UdpStudy
from ...records import RawOutput, Sample, TrialRecord, TrialSpec
from ...run import iperf, ratesearch
from ...run import nbperf as nbperf_engine
from ...run.iperf import DIRECTION, MODE, ProcSlot, Slots, layout
from ...run.kit import PointEnv, PointGuard, PointSamplers, RawFiles, release_together
from ...run.point import pair_fate, parsed_or_lost
from ...run.preflight import busy_ports, reach_problems
from ...run.procnet import bound_udp
from ...run.study import Preflight, TrialOutcome
from ...sampling.netstat import fragment_memory
from ...tools import iperf2, iperf3, nbperf
from ...tools.base import FlowInterval, ToolInfo

UDP_SETUP_S = 3.0     # iperf3: each stream's set-up datagram reaches its server in milliseconds
FRAG_TIME_S = 30.0    # Linux's default net.ipv4.ipfrag_time, when a host does not say
EXPECTED = {"tx": ("tx",), "rx": ("rx",), "bidir": ("tx", "rx")}
ENGINE_TOOLS = {"iperf3": ("iperf3",), "iperf2": ("iperf",), "nbperf": ()}   # nbperf: found by run.nbperf


@dataclass(frozen=True)
class UdpContext:
    """What the UDP study's preflight decided, for every point."""

    study: UdpStudy
    server: str
    clients: list[str]
    transports: dict[str, Transport]
    addresses: dict[str, str]             # host -> test address
    tool: ToolInfo
    mtu: int
    speed_bps: float | None = None        # the server's link, for the search's upper bound
    client_speed_bps: float | None = None
    exes: dict[str, str] = field(default_factory=dict)    # engine nbperf: host -> nbperf there

    @property
    def nbperf(self) -> nbperf_engine.NbperfHosts:
        return nbperf_engine.NbperfHosts(self.server, self.clients, self.transports, self.addresses, self.exes,
                                         self.tool)


@dataclass
class Tally:
    """One engine process pair's counts in one direction over its measured
    part (warm-up left out): datagrams and bytes, and the seconds they span."""

    sent: int = 0
    sent_bytes: int = 0
    sent_s: float = 0.0
    expected: int = 0
    lost: int = 0
    got_bytes: int = 0
    got_s: float = 0.0
    receiver_seen: bool = False
    lost_unknown: bool = False     # an interval's lost count could not be true (iperf3 3.12): the loss is unknown

    def add(self, iv: FlowInterval) -> None:
        if iv.omitted:
            return
        if iv.side == "sender":
            self.sent += iv.packets or 0
            self.sent_bytes += iv.bytes
            self.sent_s += iv.end - iv.start
        else:
            self.receiver_seen = True
            self.expected += iv.packets or 0
            self.lost += iv.lost or 0
            self.lost_unknown = self.lost_unknown or (iv.lost is None and bool(iv.packets))
            self.got_bytes += iv.bytes
            self.got_s += iv.end - iv.start


@dataclass
class Measured:
    """A measurement as it ran, and what the search judges it by."""

    record: TrialRecord
    samples: list[Sample]
    raws: list[RawOutput]
    tallies: dict[tuple[str, str], Tally] = field(default_factory=dict)   # (client:port, direction) -> counts
    nothing: str | None = None       # a receiver counted nothing while its sender sent: why (the point failed)

    def figures(self) -> tuple[float, float, float | None]:
        """(sent, received bit/s of payload, loss) of the point: rates summed
        over processes, the loss the worst direction's."""
        sent = sum(t.sent_bytes * 8 / t.sent_s for t in self.tallies.values() if t.sent_s > 0)
        got = sum(t.got_bytes * 8 / t.got_s for t in self.tallies.values() if t.got_s > 0)
        losses = []
        for d in {d for _, d in self.tallies}:
            ts = [t for (_, dd), t in self.tallies.items() if dd == d]
            if any(t.lost_unknown for t in ts):
                return sent, got, None          # never a loss made of the counts that were known
            expected = sum(t.expected for t in ts)
            if expected:
                losses.append(sum(t.lost for t in ts) / expected)
        return sent, got, max(losses) if losses else None


class UdpRunner:
    """The UDP study as the session drives it (see ``run.study.StudyRunner``)."""

    kind = "udp"

    def __init__(self, plan: Plan, hosts: Hosts):
        assert isinstance(plan.study, UdpStudy)
        self.plan = plan
        self.transports = hosts.transports()
        self.addresses = {h.name: h.ip for h in hosts.spec.hosts}
        self.mtu = hosts.spec.mtu
        self.ctx: UdpContext | None = None

    def preflight(self) -> Preflight:
        self.ctx, warnings = preflight(self.plan, self.transports, self.addresses, self.mtu)
        c, s = self.ctx, self.ctx.study
        frags = {str(n): len(linerate.udp_fragments(n, c.mtu)) for n in s.datagram_sizes}
        return Preflight(
            tools=(*ENGINE_TOOLS[s.engine], "ethtool"), warnings=tuple(warnings),
            meta={"engine": s.engine, "engine_version": c.tool.version_str,
                  "engine_features": sorted(c.tool.features), "trim": s.trim, "search": "max" in s.rates,
                  "loss_threshold": s.loss_threshold, "search_steps": s.search_steps,
                  "search_resolution": s.search_resolution, "window": s.window,
                  "fragments": {k: v for k, v in frags.items() if v > 1}})

    def start(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return []

    def trial(self, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
        assert self.ctx is not None, "preflight first"
        return TrialOutcome(*run_trial(self.ctx, env, spec, raw_dir))

    def stop(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return []


def preflight(plan: Plan, transports: dict[str, Transport], addresses: dict[str, str],
              mtu: int) -> tuple[UdpContext, list[str]]:
    """Every host at once: the engine installed, the clients reachable, the
    engine ports free (TCP for iperf3's control connection, UDP for the data)."""
    s = plan.study
    assert isinstance(s, UdpStudy)
    server, clients = plan.server, list(plan.clients)
    problems: list[str] = []
    warnings: list[str] = []
    if s.engine == "nbperf":
        return _preflight_nbperf(plan, s, transports, addresses, mtu)
    tool = iperf.detect_everywhere(s.engine, [server, *clients], transports, problems,
                                   iperf.version_floors(s.engine, s.directions)).get(server)
    problems += reach_problems(transports[server], {c: addresses[c] for c in clients})
    cap = iperf.stream_cap(s.engine, None)
    for c in clients:
        wanted = {slot.port for n in s.streams for slot in layout(n, [c], "client", cap, s.port_base)}
        taken = sorted(wanted & (_busy_udp(transports[c]) | (busy_ports(transports[c])
                                                              if s.engine == "iperf3" else set())))
        if taken:
            problems.append(f"{c}: port(s) {', '.join(map(str, taken))} already in use")
    problems += iperf.nofile_problems(s.engine, [slot for n in s.streams for slot in layout(
        n, clients, "client", cap, s.port_base)], server, transports, "bidir" in s.directions)
    if tool is not None and s.engine == "iperf3":
        if not tool.has("server_output"):
            problems.append(f"{server}: iperf3 {tool.version_str} has no --get-server-output, so the receiver's "
                            "counts of tx points cannot be collected (install iperf3 >= 3.1)")
        if "bidir" in s.directions and not tool.has("bidir"):
            problems.append(f"{server}: iperf3 {tool.version_str} has no --bidir (install iperf3 >= 3.7, or use "
                            "engine = \"iperf2\")")
        if tool.version < (3, 16):
            warnings.append(f"iperf3 {tool.version_str} is single-threaded: all streams of one process share one "
                            "core, so small datagrams hit its packet rate first")
    warnings += _fragment_warnings(s, mtu)
    if problems:
        raise PreflightError("; ".join(problems), hint="fix every item listed, then run again")
    assert tool is not None
    return UdpContext(s, server, clients, dict(transports), addresses, tool, mtu, plan.link.speed,
                      plan.link.client_speed), warnings


def _preflight_nbperf(plan: Plan, s: UdpStudy, transports: dict[str, Transport], addresses: dict[str, str],
                      mtu: int) -> tuple[UdpContext, list[str]]:
    """nbperf on every host, the clients reachable, its TCP port free on the
    client hosts (its UDP sockets take ephemeral ports), open-files limits
    for the most streams (two descriptors a stream: its UDP socket and TCP
    connection)."""
    server, clients = plan.server, list(plan.clients)
    problems: list[str] = []
    exes, tool = nbperf_engine.find_engines([server, *clients], transports, problems)
    problems += reach_problems(transports[server], {c: addresses[c] for c in clients})
    most = max(s.streams)
    problems += nbperf_engine.port_and_fd_problems(server, transports, s.port_base, dict.fromkeys(clients, most),
                                                   most, fds_per_conn=2)
    if problems:
        raise PreflightError("; ".join(problems), hint="fix every item listed, then run again")
    assert tool is not None
    return (UdpContext(s, server, clients, dict(transports), addresses, tool, mtu, plan.link.speed,
                       plan.link.client_speed, exes), _fragment_warnings(s, mtu))


def _fragment_warnings(s: UdpStudy, mtu: int) -> list[str]:
    warnings: list[str] = []
    frag = [f"{n} B: {len(linerate.udp_fragments(n, mtu))} fragments" for n in s.datagram_sizes
            if len(linerate.udp_fragments(n, mtu)) > 1]
    if frag:
        warnings.append(f"datagrams above {mtu - 28} B do not fit one packet at MTU {mtu} and travel as IP "
                        f"fragments ({', '.join(frag)}): losing one fragment loses the datagram, and incomplete ones "
                        "hold the receiver's reassembly memory (net.ipv4.ipfrag_high_thresh) for "
                        "net.ipv4.ipfrag_time; such points first wait until no host holds any")
    return warnings


def _busy_udp(t: Transport) -> set[int]:
    """UDP ports an unconnected socket is bound to (a Linux client host: a
    FreeBSD one is refused before, run.preflight.os_problems)."""
    busy: set[int] = set()
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            busy |= set(bound_udp(t.read_text(table)))
        except OSError:
            pass
    return busy


def run_trial(ctx: UdpContext, env: PointEnv, spec: TrialSpec,
              raw_dir: Path) -> tuple[TrialRecord, list[Sample], list[RawOutput]]:
    """One point at its offered rate, or the maximum-rate search; never raises
    for a point-level failure (it is recorded)."""
    if spec.params.get("search"):
        return search(ctx, env, spec, raw_dir)
    rate = spec.params.get("rate_bps")
    m = measure(ctx, env, spec, raw_dir, float(rate) if rate else None)
    return m.record, m.samples, m.raws


def upper_per_client(ctx: UdpContext, size: int, clients: int) -> float | None:
    """The most payload a client's flow can get through the links, bit/s: the
    server's link shared by the point's clients, or a client's own link if
    slower (None: the links are not shaped, nothing bounds the search)."""
    caps = []
    if ctx.speed_bps:
        caps.append(linerate.udp(ctx.speed_bps, ctx.mtu, payload=size).goodput_bps / clients)
    if ctx.client_speed_bps:
        caps.append(linerate.udp(ctx.client_speed_bps, ctx.mtu, payload=size).goodput_bps)
    return min(caps) if caps else None


def search(ctx: UdpContext, env: PointEnv, spec: TrialSpec,
           raw_dir: Path) -> tuple[TrialRecord, list[Sample], list[RawOutput]]:
    """The highest rate per client whose loss stays at or below the threshold
    (:mod:`nicbench.run.ratesearch`).  The point keeps the samples of the best
    passing step; every step's rate, rates and loss are in its meta."""
    s = ctx.study
    n = len(_clients_of(ctx, spec))
    upper = upper_per_client(ctx, int(spec.params["datagram_size"]), n)
    units = n * len(EXPECTED[str(spec.params["direction"])])    # the rate is each client's, each way
    started = time.time()
    steps: list[ratesearch.Step] = []
    runs: list[Measured] = []
    raws: list[RawOutput] = []
    rate: float | None = None
    nothing: str | None = None
    found: dict[str, Any] = {"loss_threshold": s.loss_threshold, "upper_per_client_bps": upper, "steps": []}
    while True:
        k = len(steps)
        m = measure(ctx, env, spec, raw_dir / f"step{k}", rate)
        raws += m.raws
        if m.record.status != "ok" and m.nothing is None:   # a failed or interrupted step ends the point
            err = f"search step {k} ({_rate_text(rate)}): {m.record.error}"
            status = m.record.status
            if status == "partial":     # the survivors' loss is not the point's: no rate can be judged on it
                status, err = "failed", err + " -- a step is judged on every client's loss, so the search stopped"
            return (TrialRecord(spec, status, started, time.time(), err, {**m.record.meta, "search": found}),
                    [] if m.record.status == "partial" else m.samples, raws)
        sent, got, loss = m.figures()
        if m.nothing is not None:
            # nothing arrived although the sender sent: all of it lost (if no
            # step ever gets anything through, the point fails with this reason)
            nothing = nothing or f"step {k} ({_rate_text(rate)}): {m.nothing}"
            got, loss = 0.0, 1.0
        steps.append(ratesearch.judge(rate, sent, got, loss, s.loss_threshold))
        found["steps"].append({"step": k, "rate_per_client_bps": rate, "sent_bps": sent, "received_bps": got,
                               "loss": loss, "passed": steps[-1].passed})
        runs.append(m)
        rate = ratesearch.next_rate(steps, units=units, max_steps=s.search_steps, upper=upper,
                                    resolution=s.search_resolution)
        if rate is None:
            break
    best = ratesearch.best(steps)
    if nothing is not None and not any(x.received > 0 for x in steps):
        return TrialRecord(spec, "failed", started, time.time(), f"no step's receiver counted anything; {nothing}",
                           {"search": found}), [], raws
    if best is None:
        lowest = min((x.rate for x in steps if x.rate), default=None)
        why = (f"no rate tried had loss <= {s.loss_threshold:.3%} (lowest tried {_rate_text(lowest)} per client)"
               if lowest else "the unpaced step lost too much and no slower step ran")
        return TrialRecord(spec, "failed", started, time.time(), why, {"search": found}), [], raws
    found["rate_per_client_bps"] = steps[best].rate          # None: unpaced, the sender's own maximum
    found["best_step"] = best
    rec = runs[best].record
    return TrialRecord(spec, "ok", started, time.time(), None, {**rec.meta, "search": found}), runs[best].samples, raws


def _rate_text(rate: float | None) -> str:
    return "unpaced" if rate is None else f"{linerate.format_speed(rate)}bit/s"


def _clients_of(ctx: UdpContext, spec: TrialSpec) -> list[str]:
    n = spec.params.get("clients")
    return ctx.clients[:int(n)] if n else list(ctx.clients)


def _prelude(ctx: UdpContext, spec: TrialSpec, raw_dir: Path, rate: float | None,
             slots: Sequence[ProcSlot]) -> dict[str, Any]:
    """What every engine's measurement starts with: a point of fragmented
    datagrams waits until no host holds incomplete ones; its meta."""
    s, p = ctx.study, spec.params
    streams, size = int(p["streams"]), int(p["datagram_size"])
    raw_dir.mkdir(parents=True, exist_ok=True)
    hosts = [ctx.server, *dict.fromkeys(sl.client for sl in slots)]
    drained = drain_fragments(ctx.transports, hosts) if len(linerate.udp_fragments(size, ctx.mtu)) > 1 else None
    meta: dict[str, Any] = {"layout": [vars(x) for x in slots], "engine": s.engine, "server": ctx.server,
                            "engine_version": ctx.tool.version_str, "argv": {}, "rate_per_client_bps": rate,
                            "rate_per_stream_bps": None if rate is None else rate / streams, "datagram_size": size,
                            "window": s.window}
    if drained:
        meta["fragment_wait_s"] = drained[0]
        if drained[1]:
            meta["warnings"] = [f"{', '.join(drained[1])} still held incomplete fragmented datagrams after "
                                f"{drained[0]:.0f} s: new fragments may be dropped (net.ipv4.ipfrag_high_thresh)"]
    return meta


def measure(ctx: UdpContext, env: PointEnv, spec: TrialSpec, raw_dir: Path, rate: float | None) -> Measured:
    """One measurement at ``rate`` bit/s per client (None: unpaced)."""
    if ctx.study.engine == "nbperf":
        return measure_nbperf(ctx, env, spec, raw_dir, rate)
    s = ctx.study
    p = spec.params
    engine = s.engine
    streams = int(p["streams"])
    slots = layout(streams, _clients_of(ctx, spec), "client", iperf.stream_cap(engine, None), s.port_base)
    per_stream = None if rate is None else rate / streams
    mode = MODE[str(p["direction"])]
    size = int(p["datagram_size"])
    srv_t = ctx.transports[ctx.server]
    started = time.time()
    meta = _prelude(ctx, spec, raw_dir, rate, slots)
    servers: list[tuple[ProcSlot, Process]] = []
    clis: list[tuple[ProcSlot, Process]] = []
    raws = RawFiles(spec.trial_id, env, raw_dir, "iperf3" if engine == "iperf3" else "iperf2")
    samples: list[Sample] = []
    guard = PointGuard(meta, lambda: [pr for _, pr in clis + servers], grace=0.5)
    limit = s.omit + s.duration + s.timeout_margin
    lost: dict[str, str] = {}          # "client:port" -> why that pair delivered nothing usable
    with guard:
        for slot in slots:                      # 1. engine servers on the client hosts
            argv = (iperf3.server_argv(slot.port, s.interval) if engine == "iperf3" else
                    iperf2.udp_server_argv(port=slot.port, interval=s.interval, size=size, window=s.window,
                                           lifetime=iperf2.lifetime(s.duration, s.omit, s.timeout_margin)))
            argv = env.pinned(slot.client, argv)
            out, err = raws.pair(slot.client, "engine-server", f"{slot.client}-server-{slot.port}")
            servers.append((slot, ctx.transports[slot.client].spawn(argv, stdout=out, stderr=err)))
            meta["argv"][f"{slot.client}:server:{slot.port}"] = argv
        deadline = time.monotonic() + 5.0
        for slot, proc in servers:
            iperf.wait_ready(ctx.transports[slot.client], proc, slot.port, deadline,
                             "tcp" if engine == "iperf3" else "udp")
        for slot in slots:                      # 2. engine clients on the server host, behind the gate
            kw: dict[str, Any] = dict(target=ctx.addresses[slot.client], port=slot.port, duration=s.duration,
                                      omit=s.omit, interval=s.interval, size=size, streams=slot.streams, mode=mode,
                                      rate_bps=per_stream, window=s.window)
            argv = iperf3.udp_client_argv(ctx.tool, **kw) if engine == "iperf3" else iperf2.udp_client_argv(**kw)
            argv = env.pinned(ctx.server, argv)
            out, err = raws.pair(ctx.server, "engine-client", f"{slot.client}-client-{slot.port}")
            clis.append((slot, srv_t.spawn(argv, stdout=out, stderr=err, gated=True)))
            meta["argv"][f"{ctx.server}:client:{slot.client}:{slot.port}"] = argv
        meta["released"] = release_together([pr for _, pr in clis], "engine clients", ctx.server)   # 3.
        samplers = guard.samplers = PointSamplers(
            spec.trial_id, iperf.net_targets(ctx.server, ctx.transports, env, servers, clis), env.cpu_transport,
            iperf.engine_procs(ctx.server, env, servers, clis), machine=env.cpu_machine, nic_irqs=env.nic_irqs,
            net_interval=min(s.interval, 0.5), cpu_interval=min(s.interval, 0.25)).start()
        if engine == "iperf3":
            _await_udp_setup(ctx, servers)
        end_by = time.monotonic() + limit       # 4. the clients; one still running at its time limit is lost
        hung = [slot for slot, proc in clis if proc.wait(end_by - time.monotonic()) is None]
        if hung and len(hung) == len(clis):
            raise _hung(ctx, hung[0], clis, limit)
        for slot in hung:
            lost[f"{slot.client}:{slot.port}"] = _hung(ctx, slot, clis, limit).one_line().removeprefix("nicbench: ")
        samplers.last_read()
        if engine == "iperf2":   # a receiving server gone before the end: its counts stop short
            lost.update(_dead_servers(servers, lost))
        iperf.stop_servers(engine, servers, mode, s.interval, meta)     # 5. the servers
    status, error, counter_samples = guard.status, guard.error, guard.counters

    stamps, ends = iperf.gate_stamps(clis, meta)   # 6. what the tools wrote (kept after a failure too)
    tallies: dict[tuple[str, str], Tally] = {}
    nothing = None
    if status != "interrupted":
        samples = _parse_all(ctx, spec, clis, servers, stamps, ends, meta, tallies, lost)
        if status == "ok":
            kept = [sl for sl in slots if f"{sl.client}:{sl.port}" not in lost]
            nothing = _check_received(ctx, str(p["direction"]), kept, tallies, counter_samples, size)
            if nothing is not None:
                status, error = "failed", nothing
        status, error = pair_fate(status, error, lost, len(clis), meta)
    meta["start_skew_s"] = iperf.start_skew(meta)
    samples += counter_samples
    ended = time.time()
    meta["overhead_s"] = (ended - started) - (s.omit + s.duration)
    rec = TrialRecord(spec, status, started, ended, error, meta)  # type: ignore[arg-type]
    return Measured(rec, samples, raws.outputs, tallies, nothing)


def measure_nbperf(ctx: UdpContext, env: PointEnv, spec: TrialSpec, raw_dir: Path, rate: float | None) -> Measured:
    """One measurement with nbperf: one client process per client host on the
    study server drives the point's streams, each a flow paced at the
    client's rate / streams (None: unpaced), all started at one absolute
    time (:func:`nicbench.run.nbperf.drive`).  The receivers' intervals are
    the truth; a pair that failed, hung or was killed is lost and the point
    partial, as with the iperf engines."""
    s, p = ctx.study, spec.params
    streams, size = int(p["streams"]), int(p["datagram_size"])
    slots = [ProcSlot(c, s.port_base, streams) for c in _clients_of(ctx, spec)]
    started = time.time()
    meta = _prelude(ctx, spec, raw_dir, rate, slots)
    seconds = s.omit + s.duration
    grace = max(2.0, s.timeout_margin / 2)
    ps = [nbperf_engine.Pair(sl.client, sl.port, sl.streams) for sl in slots]

    def argv_of(pair: nbperf_engine.Pair, on_server: float) -> list[str]:
        return nbperf.client_argv(
            ctx.exes[ctx.server], server=ctx.addresses[pair.client], port=pair.port, start=on_server,
            duration=seconds, conns=pair.conns, direction=nbperf_engine.DIRECTION[str(p["direction"])],  # type: ignore[arg-type]
            proto="udp", io_size=size, interval=s.interval, grace=grace, sndbuf=s.window, rcvbuf=s.window,
            rate_bps=meta["rate_per_stream_bps"], test=spec.trial_id)

    d = nbperf_engine.drive(ctx.nbperf, env, spec, raw_dir, ps, meta, argv_of, seconds=seconds, grace=grace,
                            interval=s.interval, timeout_margin=s.timeout_margin)
    status, error = d.status, d.error
    tallies: dict[tuple[str, str], Tally] = {}
    samples: list[Sample] = []
    nothing = None
    if status != "interrupted":
        meta["udp_totals"] = {}

        def udp_of(pair: nbperf_engine.Pair, cr: nbperf.ClientRun, sr: nbperf.ServerRun) -> list[Sample]:
            if cr.proto != "udp":
                raise ToolError(f"nbperf to {pair.key} ran a {cr.proto} test, not udp", where=ctx.server)
            ivs = nbperf_engine.udp_intervals(cr, sr, s.omit, where=pair.client)
            _tally(tallies, pair.key, ivs)
            meta["udp_totals"][pair.key] = nbperf_engine.udp_totals(cr, sr)
            return _samples(spec.trial_id, pair.client, pair.port, None, ivs)

        samples = nbperf_engine.parse_pairs(ctx.nbperf, d, meta, udp_of)
        if status == "ok":                  # the lost pairs are named below; the others must have received
            kept = [sl for sl in slots if f"{sl.client}:{sl.port}" not in d.lost]
            nothing = _check_received(ctx, str(p["direction"]), kept, tallies, d.counters, size)
            if nothing is not None:
                status, error = "failed", nothing
        # a lost pair's counts stay out, the others' are kept: a partial point, as with the iperf engines
        status, error = pair_fate(status, error, d.lost, len(slots), meta)
    samples += d.counters
    ended = time.time()
    meta["overhead_s"] = (ended - started) - (s.omit + s.duration)
    rec = TrialRecord(spec, status, started, ended, error, meta)  # type: ignore[arg-type]
    return Measured(rec, samples, d.raws, tallies, nothing)


def drain_fragments(transports: dict[str, Transport], hosts: Sequence[str]) -> tuple[float, list[str]]:
    """Wait until no host holds incomplete fragmented datagrams (their memory in
    /proc/net/sockstat), at most the longest ``net.ipv4.ipfrag_time`` of them
    plus a second; (seconds waited, hosts still holding some)."""
    t0 = time.monotonic()
    limit = max(_frag_time(transports[h]) for h in hosts) + 1.0
    while True:
        held = [h for h in hosts if (_read_frag(transports[h]) or 0) > 0]
        if not held or time.monotonic() - t0 > limit:
            return time.monotonic() - t0, held
        time.sleep(0.5)


def _read_frag(t: Transport) -> int | None:
    try:
        return fragment_memory(t.read_text("/proc/net/sockstat"))
    except OSError:
        return None


def _frag_time(t: Transport) -> float:
    try:
        return float(t.read_text("/proc/sys/net/ipv4/ipfrag_time").strip())
    except (OSError, ValueError):
        return FRAG_TIME_S


def _await_udp_setup(ctx: UdpContext, servers: Slots) -> None:
    """Every iperf3 stream's set-up datagram reached its server: else UDP from
    the study server to that client is dropped, and iperf3 would wait forever."""
    by = time.monotonic() + UDP_SETUP_S
    waiting = list(servers)
    while waiting:
        t_of = ctx.transports
        waiting = [(sl, pr) for sl, pr in waiting if pr.poll() is None
                   and iperf.udp_streams_set_up(t_of[sl.client], pr, sl.port) < sl.streams]
        if not waiting:
            return
        if time.monotonic() > by:
            sl, pr = waiting[0]
            got = iperf.udp_streams_set_up(t_of[sl.client], pr, sl.port)
            raise ToolError(f"the iperf3 server on {sl.client}:{sl.port} got the UDP set-up datagram of {got} of "
                            f"{sl.streams} stream(s) in {UDP_SETUP_S:g} s: UDP from {ctx.server} to {sl.client} "
                            f"({ctx.addresses[sl.client]}) does not arrive", where=sl.client,
                            hint=f"is a firewall on {sl.client} (or on the way) dropping UDP to port {sl.port}, "
                                 "or is the test address wrong?")
        time.sleep(0.02)


def _hung(ctx: UdpContext, slot: ProcSlot, clis: Slots, limit: float) -> ToolError:
    """Why an engine client still runs at its time limit.  iperf3, stopped,
    prints what it had: no test at all means its UDP set-up never completed."""
    for _, proc in clis:
        if proc.poll() is None:
            proc.stop(1.0)          # SIGTERM: iperf3 writes its report
    key = f"{slot.client}:{slot.port}"
    if ctx.study.engine == "iperf3":
        try:
            rep = iperf3.parse(read_output(clis[[sl for sl, _ in clis].index(slot)][1].stdout_path))
        except NicbenchError:
            rep = None
        if rep is not None and rep.protocol is None and not rep.intervals:
            return ToolError(f"iperf3 to {key} never started its UDP test in {limit:g}s: the set-up datagram's "
                             f"answer from {slot.client} did not come back", where=ctx.server,
                             hint=f"is UDP from {slot.client} to {ctx.server} dropped (a firewall on {ctx.server}?)")
    return ToolError(f"engine client to {key} still running after {limit:g}s (duration + omit + timeout_margin)",
                     where=ctx.server, hint="the path may be stalled; raise study.timeout_margin if the host is slow")


def _samples(trial_id: str, host: str, port: int, anchor: float | None, intervals: Sequence[FlowInterval],
             peer_anchor: float | None = None) -> list[Sample]:
    """Each interval's bytes and datagram counts on the wall clock."""
    out = []
    for iv, t0, t1, tags in iperf.placed(intervals, host, port, anchor, peer_anchor):
        out.append(Sample(trial_id, "udp.bytes", float(iv.bytes), "bytes", t0, t1, tags))
        for metric, v, unit in (("udp.packets", iv.packets, "packets"), ("udp.lost", iv.lost, "packets"),
                                ("udp.out_of_order", iv.out_of_order, "count"), ("udp.jitter", iv.jitter_s, "s")):
            if v is not None:
                out.append(Sample(trial_id, metric, float(v), unit, t0, t1, tags))  # type: ignore[arg-type]
    return out


def _tally(tallies: dict[tuple[str, str], Tally], key: str, intervals: Sequence[FlowInterval]) -> None:
    for iv in intervals:
        tallies.setdefault((key, DIRECTION[iv.flow]), Tally()).add(iv)


def _parse_all(ctx: UdpContext, spec: TrialSpec, clis: Slots, servers: Slots, stamps: dict[str, float | None],
               ends: dict[str, float | None], meta: dict, tallies: dict[tuple[str, str], Tally],
               lost: dict[str, str]) -> list[Sample]:
    """Every pair's samples and counts; a pair whose output cannot be used goes
    into ``lost`` with why (the others are still read), and its samples and
    counts stay out: they would be part of an interval of an unknown span."""
    s = ctx.study
    samples: list[Sample] = []
    meta["test_starts"], meta["anchors"], meta["udp_totals"], meta["socket_buffers"] = {}, {}, {}, {}
    lag = s.interval if s.engine == "iperf2" and iperf2.stamps_late(ctx.tool) else 0.0
    if lag:
        meta["iperf2_stamp_lag_s"] = lag
    engine = "iperf3" if s.engine == "iperf3" else "iperf 2"
    for slot, proc in clis:
        key = f"{slot.client}:{slot.port}"
        if key not in lost:
            samples += parsed_or_lost(key, lost, engine, partial(
                _parse_client, ctx, spec, slot, proc, stamps, ends, meta, lag, tallies)) or []
    if s.engine == "iperf2":        # the receiver of the fwd flow writes the server's CSV
        for slot, proc in servers:
            key = f"{slot.client}:{slot.port}"
            if key not in lost:
                samples += parsed_or_lost(key, lost, engine, partial(
                    _parse_server, ctx, spec, slot, proc, meta, lag, tallies)) or []
    for k in [k for k in tallies if k[0] in lost]:
        del tallies[k]
    return [x for x in samples if f"{x.tag('host')}:{x.tag('proc')}" not in lost]


def _parse_client(ctx: UdpContext, spec: TrialSpec, slot: ProcSlot, proc: Process, stamps: dict[str, float | None],
                  ends: dict[str, float | None], meta: dict, lag: float,
                  tallies: dict[tuple[str, str], Tally]) -> list[Sample]:
    """One engine client's samples, its counts into ``tallies`` (for iperf3,
    its server's too, nested in its report)."""
    s = ctx.study
    key = f"{slot.client}:{slot.port}"
    text = read_output(proc.stdout_path)
    if s.engine == "iperf3":
        try:
            rep = iperf3.parse(text)
        except ToolError as e:      # no report at all: iperf3 said why on stderr (a parameter error)
            raise iperf.tool_error(f"iperf3 to {key}: {tail(tool_stderr(proc.stderr_path)) or e.message}",
                                   ctx.server) from None
        iperf.check_iperf3(rep, proc, key, ctx.server)
        if not rep.has_server_output:
            raise ToolError(f"iperf3 to {key} brought back no server report (--get-server-output): the "
                            "receiver's counts of a tx point are in it", where=ctx.server)
        anchor, peer_anchor = iperf.place_iperf3(rep, key, stamps, ends, meta, ctx.server)
        _tally(tallies, key, rep.intervals)
        meta["udp_totals"][key] = {k: vars(t) for k, t in rep.udp.items()}
        meta["socket_buffers"][key] = rep.socket_buffers
        for q in rep.quirks:
            meta.setdefault("warnings", []).append(f"iperf3 to {key}: {q}")
        return _samples(spec.trial_id, slot.client, slot.port, anchor, rep.intervals, peer_anchor)
    iperf.check_iperf2(text, proc, key, ctx.server)
    rep2 = iperf2.parse(text, role="client", omit=s.omit, server_port=slot.port, interval=s.interval,
                        stamp_lag=lag + host_clock_offset(proc), stamps_utc=True)
    _all_streams_reported(rep2.intervals, slot, ctx.server, tool_stderr(proc.stderr_path))
    _tally(tallies, key, rep2.intervals)
    meta["udp_totals"][key] = {k: list(v) for k, v in rep2.udp.items()}
    iperf.place_iperf2(rep2, key, ends, meta)
    return _samples(spec.trial_id, slot.client, slot.port, None, rep2.intervals)


def _parse_server(ctx: UdpContext, spec: TrialSpec, slot: ProcSlot, proc: Process, meta: dict, lag: float,
                  tallies: dict[tuple[str, str], Tally]) -> list[Sample]:
    """An iperf 2 server's samples and counts: the receiver of the fwd flow."""
    s = ctx.study
    key = f"{slot.client}:{slot.port}"
    rep2 = iperf2.parse(read_output(proc.stdout_path), role="server", omit=s.omit, server_port=slot.port,
                        interval=s.interval, stamp_lag=lag + host_clock_offset(proc), stamps_utc=True)
    _all_streams_reported(rep2.intervals, slot, slot.client, tool_stderr(proc.stderr_path))
    _tally(tallies, key, rep2.intervals)
    for k, v in rep2.udp.items():
        meta["udp_totals"].setdefault(key, {}).setdefault(k, list(v))
    return _samples(spec.trial_id, slot.client, slot.port, None, rep2.intervals)


def _dead_servers(servers: Slots, lost: dict[str, str]) -> dict[str, str]:
    """iperf 2 servers that exited before nicbench stopped them (they serve
    until their lifetime, longer than the point): killed or crashed, so their
    receiver counts stop short of the point's end."""
    out = {}
    for slot, proc in servers:
        key = f"{slot.client}:{slot.port}"
        rc = proc.poll()
        if rc is not None and key not in lost:
            out[key] = (f"the iperf 2 server on {key} exited (status {rc}) before the point ended: its receiver "
                        f"counts stop short (hint: {tail(tool_stderr(proc.stderr_path)) or 'nothing on stderr'}; "
                        "was it killed?)")
    return out


def _all_streams_reported(intervals: Sequence[FlowInterval], slot: ProcSlot, host: str, stderr: str) -> None:
    """ToolError when a receiver's interval reports cover fewer streams than
    the process ran: the figure would miss the others' datagrams (lab e2e:
    0.35 Gbit/s of 0.4 recorded ok).  Seen with iperf 2.1.8 (--full-duplex,
    -P 2): one receiving stream's thread ended at its start with "recvmsg
    failed: Connection refused" (an ICMP port unreachable: one of its first
    datagrams reached the engine server's port before iperf 2's UDP server
    had a socket for that stream) while its peer kept sending; it printed a
    0.0-0.0 summary and no interval (fixture udp_client_fd_p2_refused)."""
    refused = next((ln.strip() for ln in stderr.splitlines() if "recvmsg failed" in ln), None)
    for iv in intervals:
        if iv.side == "receiver" and not iv.omitted and iv.streams < slot.streams:
            d, short = DIRECTION[iv.flow], slot.streams - iv.streams
            if refused:
                raise ToolError(
                    f"iperf 2 on {host} stopped receiving {short} of the {slot.streams} {d} streams of "
                    f"{slot.client}:{slot.port} at their start (\"{refused}\": an ICMP port unreachable, a first "
                    f"datagram reached {slot.client}:{slot.port} before iperf 2's UDP server had a socket for its "
                    "stream); their datagrams arrived uncounted, so the point's figure would miss them", where=host,
                    hint="iperf 2.1.8's UDP server races when several streams start at once: use streams = [1] "
                         "with engine = \"iperf2\", or engine = \"iperf3\"")
            raise ToolError(f"iperf 2 on {host} reported {d} intervals of {iv.streams} of the "
                            f"{slot.streams} streams received from {slot.client}:{slot.port} "
                            f"({iv.start:g}-{iv.end:g} s): the point's figure would miss the others", where=host,
                            hint="iperf 2 said nothing of why on stderr; run the point again")


def _check_received(ctx: UdpContext, direction: str, slots: Sequence[ProcSlot], tallies: dict[tuple[str, str], Tally],
                    counters: Sequence[Sample], size: int) -> str | None:
    """Why a receiver counted nothing while its sender sent (None: every one got
    something).  The point's own kernel counters on the receiving host tell
    whether nothing arrived at its interface, or arrived and never reached UDP."""
    for slot in slots:
        key = f"{slot.client}:{slot.port}"
        for d in EXPECTED[direction]:
            t = tallies.get((key, d), Tally())
            if t.expected > 0 or t.got_bytes > 0:
                continue
            src, dst = (ctx.server, slot.client) if d == "tx" else (slot.client, ctx.server)
            what = "reported nothing" if not t.receiver_seen else "counted no datagram"
            sent = f"{t.sent} sent" if t.sent else "the sender's count unknown"
            head = f"{d} {key}: the receiver on {dst} {what} ({sent}): "
            return head + _why_nothing(ctx, src, dst, slot.port, counters, t.sent * len(
                linerate.udp_fragments(size, ctx.mtu)))
    return None


def _host_sum(counters: Sequence[Sample], host: str, metric: str, direction: str | None = None) -> float | None:
    vals = [x.value for x in counters if x.metric == metric and x.tag("host") == host
            and (direction is None or x.tag("direction") == direction)]
    return sum(vals) if vals else None


def _why_nothing(ctx: UdpContext, src: str, dst: str, port: int, counters: Sequence[Sample],
                 frames_sent: int) -> str:
    addr = f"{dst} ({ctx.addresses.get(dst, '?')}, port {port})"
    frames = _host_sum(counters, dst, "if.packets", "rx")
    reasm = _host_sum(counters, dst, "net.ip.reasm_fails")
    delivered = _host_sum(counters, dst, "net.udp.in_datagrams")
    hint = "0 % loss of 0 datagrams would not be a result"
    if frames is None or (frames_sent and frames < 0.01 * frames_sent):
        came = "" if frames is None else f", {frames:.0f} frames came in"
        return (f"UDP from {src} to {addr} does not arrive{came} (hint: a firewall on {dst} or on the way dropping "
                f"UDP, or a wrong test address; {hint})")
    if reasm:
        return (f"{frames:.0f} frames reached {dst} but no datagram was reassembled ({reasm:.0f} reassembly "
                "failures): fragments were lost on the way, and one lost fragment loses its datagram (hint: "
                "incomplete datagrams hold the reassembly memory, net.ipv4.ipfrag_high_thresh, until "
                f"net.ipv4.ipfrag_time: offer less, or use datagrams that fit the MTU; {hint})")
    return (f"{frames:.0f} frames reached {dst}'s interface but UDP delivered {delivered or 0:.0f} datagrams "
            f"(hint: a firewall on {dst} dropping UDP to port {port}?; {hint})")
