"""nbperf as an engine of the TCP study: preflight, one point, its samples.

Layout (as the iperf engines, one process per host and side): every client
host runs one ``nbperf server`` on ``study.port_base``; the study's server
host runs one ``nbperf client`` per client host, driving all of that host's
connections.  Study ``tx`` (server host -> client hosts) is nbperf's ``tx``
(client -> server), ``rx`` its ``rx``, ``bidir`` both.

The start barrier is in the engine: every client is given one absolute
CLOCK_REALTIME start (on the study server's clock) and the achieved start is
the first send of every connection (``start_skew_s`` = last - first over all
pairs).  Both ends stamp every interval with absolute times, so no interval
is anchored at a process's exit.  Receiver-side bytes are the truth; the
engine itself checks that both ends' TCP totals agree byte for byte.

A pair (client host, port) whose engine failed, hung or was killed is lost:
the point is ``partial`` with the survivors' data, or ``failed`` when every
pair was lost -- the same rule as the iperf engines.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..core.errors import NicbenchError, PreflightError, ToolError, tail
from ..hosts.transport import Process, Transport, host_clock_offset, read_output
from ..plan.studies.tcp import TcpStudy
from ..records import RawOutput, Sample, TrialRecord, TrialSpec, make_tags
from ..sampling.sampler import NetTarget, tool_procs
from ..tools import nbperf
from ..tools.base import MinVersion, ToolInfo, parse_version
from .kit import PointEnv, PointGuard, PointSamplers, even_shares, stall_causes, stalled
from .preflight import busy_ports, reach_problems
from .study import Preflight, TrialOutcome

INSTALL = ("run scripts/install.sh (it builds native/nbperf); on a host that does not share this machine's "
           "files: make -C native/nbperf there and put build/nbperf on its PATH")
MIN_VERSION = MinVersion("nbperf", (1, 0, 0), "the JSON lines nicbench parses")
DIRECTION = {"tx": "tx", "rx": "rx", "bidir": "bidir"}   # study direction -> nbperf --dir (same words)
SERVER_FDS = 64         # nbperf's own descriptors besides one per connection (threads' epoll, stdio, listeners)
CLIENT_FDS = 64
LEAD_S = 1.0            # the start is this far after the servers listen: connections are made before it
LEAD_PER_CONN_S = 0.001
MAX_LEAD_S = 30.0       # nbperf refuses a start more than 60 s ahead


@dataclass(frozen=True)
class Pair:
    """One nbperf client (on the study server) and its server (on ``client``)."""

    client: str
    port: int
    conns: int

    @property
    def key(self) -> str:
        return f"{self.client}:{self.port}"


def pairs(s: TcpStudy, clients: Sequence[str], connections: int) -> list[Pair]:
    """One pair per client host that gets connections (``connections_per`` as the iperf engines)."""
    share = [connections] * len(clients) if s.connections_per == "client" else even_shares(connections, len(clients))
    return [Pair(c, s.port_base, n) for c, n in zip(clients, share, strict=True) if n > 0]


@dataclass(frozen=True)
class NbperfContext:
    """What the preflight decided, for every point."""

    study: TcpStudy
    server: str
    clients: list[str]
    transports: dict[str, Transport]
    addresses: dict[str, str]
    exes: dict[str, str]                 # host -> nbperf there
    tool: ToolInfo

    @property
    def send(self) -> nbperf.SendMode:
        """The study's ``zerocopy`` is iperf3's -Z, which is sendfile: the same here."""
        return "sendfile" if self.study.zerocopy else "send"

    @property
    def recv(self) -> nbperf.RecvMode:
        """``skip_rx_copy`` (true or "auto"): MSG_TRUNC, iperf3 >= 3.16's --skip-rx-copy."""
        return "trunc" if self.study.skip_rx_copy else "copy"


def _exe_on(t: Transport, local: str | None) -> str:
    """nbperf's path on a host: this build where the host sees it (the lab, and
    hosts sharing the path), else the one on the host's PATH."""
    r = t.run(["sh", "-c", 'if [ -n "$1" ] && [ -x "$1" ]; then echo "$1"; else command -v nbperf || echo nbperf; fi',
               "nb", local or ""], timeout=10)
    lines = r.stdout.strip().splitlines()
    return lines[-1] if lines else "nbperf"


def _nofile(t: Transport) -> int | None:
    """The hard open-files limit on the host (nbperf raises its soft limit to it)."""
    try:
        out = t.run(["sh", "-c", "ulimit -Hn"], timeout=10).stdout.strip()
    except NicbenchError:
        return None
    return int(out) if out.isdigit() else None


def preflight(s: TcpStudy, server: str, clients: list[str], transports: dict[str, Transport],
              addresses: dict[str, str]) -> tuple[NbperfContext, Preflight]:
    """nbperf on every host (its version), the paths, the port, open-files
    limits for the largest point; every problem at once in a PreflightError."""
    problems: list[str] = []
    exes: dict[str, str] = {}
    tool: ToolInfo | None = None
    local = nbperf.binary()
    for host in [server, *clients]:
        t = transports[host]
        try:
            exe = exes[host] = _exe_on(t, local)
            r = t.run([exe, "version"], timeout=10)
        except PreflightError:
            problems.append(f"{host}: nbperf is not installed ({INSTALL})")
            continue
        text = (r.stdout + r.stderr).strip()
        if r.returncode != 0 or not text.startswith("nbperf "):
            problems.append(f"{host}: nbperf is not installed or does not run: {tail(text) or 'no output'} ({INSTALL})")
            continue
        info = ToolInfo("nbperf", parse_version(text), text)
        if (p := MIN_VERSION.problem(info.version, host)) is not None:
            problems.append(p)
        if host == server:
            tool = info
    problems += reach_problems(transports[server], {c: addresses[c] for c in clients})
    most = max(s.connections)
    for c in clients:
        if s.port_base in busy_ports(transports[c]):
            problems.append(f"{c}: port {s.port_base} already in use (study.port_base)")
        need = max(p.conns for p in pairs(s, clients, most) if p.client == c) + SERVER_FDS
        have = _nofile(transports[c])
        if have is not None and have < need:
            problems.append(f"{c}: open-files limit is {have}, the nbperf server needs {need} for "
                            f"{need - SERVER_FDS} connections (raise ulimit -Hn)")
    need = max(p.conns for p in pairs(s, clients, most)) + CLIENT_FDS
    have = _nofile(transports[server])
    if have is not None and have < need:
        problems.append(f"{server}: open-files limit is {have}, an nbperf client needs {need} for "
                        f"{need - CLIENT_FDS} connections (raise ulimit -Hn)")
    if problems:
        raise PreflightError("; ".join(problems), hint="fix every item listed, then run again")
    assert tool is not None
    ctx = NbperfContext(s, server, list(clients), dict(transports), dict(addresses), exes, tool)
    pre = Preflight(tools=("ethtool",), meta={
        "engine": "nbperf", "engine_version": tool.version_str, "engine_features": [],
        "skip_rx_copy_used": ctx.recv == "trunc", "nbperf_send": ctx.send, "nbperf_recv": ctx.recv, "trim": s.trim})
    return ctx, pre


# ------------------------------------------------------------------ samples (pure)


SLIVER = 0.01


def receiver_counts(rows: Sequence[nbperf.Sample]) -> tuple[Callable[[nbperf.Sample], int], bool]:
    """How a receiving end's interval bytes are counted: the kernel's in-order
    received bytes (``kernel_rx_bytes``), which are placed when they arrived,
    when every interval of every connection has them and they add up to the
    bytes the engine read, connection by connection; else the engine's own
    reads (a starved reader's backlog then moves bytes across interval
    edges).  (count, True if the kernel's)."""
    per: dict[int, list[nbperf.Sample]] = {}
    for r in rows:
        per.setdefault(r.conn, []).append(r)
    kernel = bool(rows) and all(
        all(r.tcp is not None and r.tcp.kernel_rx_bytes is not None for r in rs)
        and sum(r.tcp.kernel_rx_bytes for r in rs if r.tcp and r.tcp.kernel_rx_bytes is not None)
        == sum(r.rx_bytes for r in rs) for rs in per.values())
    if kernel:
        return (lambda r: r.tcp.kernel_rx_bytes if r.tcp and r.tcp.kernel_rx_bytes is not None else 0), True
    return (lambda r: r.rx_bytes), False


def _per_interval(rows: Sequence[nbperf.Sample], count: Callable[[nbperf.Sample], int], start: float,
                  interval: float, shift: float) -> list[tuple[float, float, int, int | None, int]]:
    """Connections' intervals summed onto the grid ``start + k x interval``:
    (t0, t1, bytes, retransmits, connections) per grid slot, contiguous.

    A connection's boundaries are read when its thread gets to them: within
    µs-ms of the grid on a quiet host, but a CPU-starved thread reads them
    late, up to a whole interval (it then reports one interval spanning two
    grid slots).  Summing "the k-th interval of every connection" then
    overlaps or leaves gaps (seen: a seed 000 replay's bidir points rejected
    for a 0.185 s gap).  So each connection's bytes are spread over the grid
    slots its interval covers, pro rata (as the analysis does at a window's
    edges), rounded so that every byte is counted once; a slot spans the grid
    except at the outer ends, where it starts and stops with the data.  Retransmits are counts:
    each interval's go whole to the slot holding its middle.  ``shift`` moves
    the end's clock onto the study server's."""
    slots: dict[int, list] = {}        # k -> [lo, hi, bytes, retransmits or None, connections]
    for r in rows:
        a, b, v = r.t0 + shift, r.t1 + shift, int(count(r))
        # a sliver of up to 1 % of an interval across a grid line (the clocks'
        # offset, a boundary read a few ms late) stays in its neighbour's slot
        k0 = math.floor((a - start) / interval + SLIVER)
        k1 = max(k0 + 1, math.ceil((b - start) / interval - SLIVER))
        done = 0
        for k in range(k0, k1):
            lo, hi = max(a, start + k * interval), min(b, start + (k + 1) * interval)
            if k == k1 - 1:
                part = v - done
            else:
                cum = (hi - a) / (b - a) if b > a else 1.0
                part = round(v * cum) - done
            done += part
            sl = slots.setdefault(k, [lo, hi, 0, None, set()])
            sl[0], sl[1] = min(sl[0], lo), max(sl[1], hi)
            sl[2] += part
            sl[4].add(r.conn)
        if r.tcp is not None and r.tcp.retrans is not None:
            mid = math.floor(((a + b) / 2 - start) / interval)
            sl = slots[min(max(mid, k0), k1 - 1)]
            sl[3] = (sl[3] or 0) + r.tcp.retrans
    out = [[lo, hi, b, retr, len(conns)] for _, (lo, hi, b, retr, conns) in sorted(slots.items())]
    if out:     # the outer ends where the data starts and stops, slivers included
        out[0][0] = min(r.t0 + shift for r in rows)
        out[-1][1] = max(r.t1 + shift for r in rows)
    return [(lo, hi, b, retr, n) for lo, hi, b, retr, n in out]


def pair_samples(trial_id: str, host: str, port: int, client: nbperf.ClientRun, server: nbperf.ServerRun,
                 omit: float, counted: dict[str, bool] | None = None) -> list[Sample]:
    """``tcp.bytes`` (and the senders' ``tcp.retransmits``) of one pair, one
    sample per interval, direction and side, tagged as the iperf engines'
    are (host = the client host, proc = the port).  Intervals that start
    within the warm-up (``omit`` s after the start) are tagged omitted.
    The server's stamps are moved onto the client's clock by the offset the
    client measured (zero in the lab: one clock)."""
    nbperf.check_session(server, client.session, where=host)
    mine = [s for s in server.samples if s.session == client.session]
    shift = -client.clock_offset
    flows = {"tx": ("tx",), "rx": ("rx",), "bidir": ("tx", "rx")}[client.direction]
    out: list[Sample] = []
    for flow in flows:
        # tx: the client sends, the server receives; rx the other way round
        ends = {"sender": (client.samples, 0.0), "receiver": (mine, shift)} if flow == "tx" else \
               {"sender": (mine, shift), "receiver": (client.samples, 0.0)}
        for side, (rows, sh) in ends.items():
            if side == "sender":
                count: Callable[[nbperf.Sample], int] = lambda r: r.tx_bytes  # noqa: E731
            else:
                count, by_kernel = receiver_counts(rows)
                if counted is not None:
                    counted[flow] = by_kernel
            for t0, t1, b, retr, n in _per_interval(rows, count, client.start, client.interval, sh):
                nominal = client.start + round((t0 - client.start) / client.interval) * client.interval
                tags = make_tags(host=host, proc=port, direction=flow, side=side,
                                 omitted=1 if nominal < client.start + omit - 1e-6 else 0, streams=n)
                out.append(Sample(trial_id, "tcp.bytes", float(b), "bytes", t0, t1, tags))
                if side == "sender" and retr is not None:
                    out.append(Sample(trial_id, "tcp.retransmits", float(retr), "count", t0, t1, tags))
    return out


def first_sends(client: nbperf.ClientRun, server: nbperf.ServerRun) -> list[float]:
    """Every connection's first send (its achieved start) on the study server's
    clock: the client's for tx/bidir, the server's for rx."""
    if client.direction == "rx":
        return [e.first_tx - client.clock_offset for e in server.ends
                if e.session == client.session and e.first_tx is not None]
    return [e.first_tx for e in client.ends if e.first_tx is not None]


# ------------------------------------------------------------------ one point


def _fate(status: str, error: str | None, lost: dict[str, str], n: int,
          meta: dict[str, Any]) -> tuple[str, str | None]:
    """The iperf engines' rule (studies/tcp/runner.py ``_fate``): every pair
    delivered -> ok; some lost -> partial, the survivors kept, the lost named;
    all lost -> failed."""
    if not lost or status != "ok":
        return status, error
    meta["lost"] = dict(lost)
    if len(lost) >= n:
        return "failed", "; ".join(lost.values())
    return "partial", "partial: " + "; ".join(f"{k} lost: {why}" for k, why in lost.items())


def _wait_listening(pairs_: Sequence[tuple[Pair, Process]], by: float) -> None:
    """Until every server printed its ``listening`` line (it binds before)."""
    waiting = list(pairs_)
    while waiting:
        for pair, proc in list(waiting):
            if '"event":"listening"' in read_output(proc.stdout_path):
                waiting.remove((pair, proc))
            elif proc.poll() is not None:
                msg = nbperf.error_of(read_output(proc.stderr_path)) or tail(read_output(proc.stderr_path))
                hint = ("another process holds the port: pick another study.port_base, or stop it"
                        if "in use" in (msg or "").lower() else None)
                raise ToolError(f"nbperf server on port {pair.port} failed to start: {msg or 'no error text'}",
                                where=pair.client, hint=hint)
        if waiting and time.monotonic() > by:
            raise ToolError(f"nbperf server on port {waiting[0][0].port} is not listening after 5 s",
                            where=waiting[0][0].client)
        time.sleep(0.005)


def run_trial(ctx: NbperfContext, env: PointEnv, spec: TrialSpec,
              raw_dir: Path) -> tuple[TrialRecord, list[Sample], list[RawOutput]]:
    """Run one point; never raises for a point-level failure (it is recorded)."""
    s = ctx.study
    p = spec.params
    io = int(p["io_size"])
    ps = pairs(s, ctx.clients, int(p["connections"]))
    seconds = s.omit + s.duration
    grace = max(2.0, s.timeout_margin / 2)        # the drain of shaped links' socket buffers (README)
    started = time.time()
    servers: list[tuple[Pair, Process]] = []
    clis: list[tuple[Pair, Process]] = []
    raws: list[RawOutput] = []
    meta: dict[str, Any] = {"layout": [{"client": x.client, "port": x.port, "streams": x.conns} for x in ps],
                            "engine": "nbperf", "server": ctx.server, "engine_version": ctx.tool.version_str,
                            "argv": {}, "send": ctx.send, "recv": ctx.recv}
    guard = PointGuard(meta, lambda: [x for _, x in clis + servers], grace=0.5)

    def raw(host: str, role: str, name: str) -> tuple[Path, Path]:
        out, err = raw_dir / f"{name}.out", raw_dir / f"{name}.err"
        raws.append(RawOutput(spec.trial_id, host, role, "nbperf", "stdout", env.rel(out)))
        raws.append(RawOutput(spec.trial_id, host, role, "nbperf", "stderr", env.rel(err)))
        return out, err

    lost: dict[str, str] = {}
    start = 0.0
    with guard:
        # 1. one server per client host; it leaves by itself once its one client
        #    process is done, and at its hard deadline whatever happens
        t_spawn = time.monotonic()
        until = time.time() + 5.0 + MAX_LEAD_S + seconds + grace + 5.0
        for pair in ps:
            argv = env.pinned(pair.client, nbperf.server_argv(ctx.exes[pair.client], port=pair.port, until=until,
                                                              clients=1, bind=ctx.addresses[pair.client]))
            out, err = raw(pair.client, "engine-server", f"{pair.client}-server-{pair.port}")
            servers.append((pair, ctx.transports[pair.client].spawn(argv, stdout=out, stderr=err)))
            meta["argv"][f"{pair.client}:server:{pair.port}"] = argv
        _wait_listening(servers, time.monotonic() + 5.0)
        # 2. the clients, all given one start on the study server's clock.  The
        #    lead covers making the connections and starting the clients: twice
        #    what starting the servers took (ms here, most of a second per
        #    command over SSH), so no client is handed a start already past
        started_in = time.monotonic() - t_spawn
        lead = min(MAX_LEAD_S, LEAD_S + LEAD_PER_CONN_S * max(x.conns for x in ps) + 2 * started_in)
        start = time.time() + lead
        # the engine starts on the study server's own clock: a real host's
        # clock runs host_clock_offset ahead of this machine's (0 in the lab)
        on_server = start + host_clock_offset(ctx.transports[ctx.server])
        for pair in ps:
            argv = nbperf.client_argv(
                ctx.exes[ctx.server], server=ctx.addresses[pair.client], port=pair.port, start=on_server,
                duration=seconds, conns=pair.conns, direction=DIRECTION[str(p["direction"])],  # type: ignore[arg-type]
                io_size=io, interval=s.interval, grace=grace, sndbuf=s.window, rcvbuf=s.window,
                congestion=s.congestion, nodelay=s.no_delay, send=ctx.send, recv=ctx.recv, test=spec.trial_id)
            argv = env.pinned(ctx.server, argv)
            out, err = raw(ctx.server, "engine-client", f"{pair.client}-client-{pair.port}")
            clis.append((pair, ctx.transports[ctx.server].spawn(argv, stdout=out, stderr=err)))
            meta["argv"][f"{ctx.server}:client:{pair.client}:{pair.port}"] = argv
        meta["start_at"], meta["start_lead_s"] = start, lead
        samplers = guard.samplers = PointSamplers(
            spec.trial_id, _net_targets(ctx, env, servers, clis), env.cpu_transport, _tool_procs(env, servers, clis),
            machine=env.cpu_machine, nic_irqs=env.nic_irqs, net_interval=min(s.interval, 0.5),
            cpu_interval=min(s.interval, 0.25)).start()
        # 3. each client ends by itself at start + duration (+ the drain); one
        #    still running well after its own hard deadline is lost
        limit = (start - time.time()) + seconds + grace + s.timeout_margin
        end_by = time.monotonic() + limit
        hung = [(pair, proc) for pair, proc in clis if proc.wait(end_by - time.monotonic()) is None]
        for pair, _ in hung:
            hosts = {h: ctx.transports[h] for h in (ctx.server, pair.client)}
            why = stalled(f"nbperf client to {pair.key}", limit, ctx.server, stall_causes(hosts, env.ifnames),
                          "the path may be stalled; raise study.timeout_margin if the host is slow")
            if len(hung) == len(clis):
                raise why
            lost[pair.key] = why.one_line().removeprefix("nicbench: ")
        samplers.last_read()
        # 4. servers: each exits once its client's session ended (--clients 1)
        stop_by = time.monotonic() + 3.0
        for _, proc in servers:
            if proc.wait(stop_by - time.monotonic()) is None:
                proc.stop(0.5)
    status, error, counter_samples = guard.status, guard.error, guard.counters

    samples: list[Sample] = []
    if status != "interrupted":
        samples = _parse_all(ctx, spec, clis, servers, meta, lost)
        status, error = _fate(status, error, lost, len(clis), meta)
    samples += counter_samples
    ended = time.time()
    meta["overhead_s"] = (ended - started) - (s.omit + s.duration)
    return TrialRecord(spec, status, started, ended, error, meta), samples, raws  # type: ignore[arg-type]


Slots = Sequence[tuple[Pair, Process]]


def _parse_all(ctx: NbperfContext, spec: TrialSpec, clis: Slots, servers: Slots, meta: dict[str, Any],
               lost: dict[str, str]) -> list[Sample]:
    """Every surviving pair's samples; a pair whose output says it failed goes
    into ``lost`` with the engine's own one line."""
    samples: list[Sample] = []
    firsts: dict[str, list[float]] = {}
    meta["totals"], meta["clock_offsets"], meta["rt_start"] = {}, {}, {}
    # every stamp is the study server's (the server's are moved there by the
    # engine's own offset): onto this machine's clock, as the samplers' are
    off = host_clock_offset(ctx.transports[ctx.server])
    srv_of = {pair.key: proc for pair, proc in servers}
    for pair, proc in clis:
        if pair.key in lost:
            continue
        sproc = srv_of[pair.key]
        try:
            cr = nbperf.parse_client(read_output(proc.stdout_path), read_output(proc.stderr_path), where=ctx.server)
            sr = nbperf.parse_server(read_output(sproc.stdout_path), read_output(sproc.stderr_path),
                                     where=pair.client)
            counted: dict[str, bool] = {}
            got = pair_samples(spec.trial_id, pair.client, pair.port, cr, sr, ctx.study.omit, counted)
            meta.setdefault("receiver_counted_by", {})[pair.key] = {
                d: "kernel (tcpi_bytes_received)" if k else "engine reads" for d, k in counted.items()}
        except NicbenchError as e:
            lost[pair.key] = f"nbperf to {pair.key}: {e.message}" + (f" (hint: {e.hint})" if e.hint else "")
            continue
        except (ValueError, KeyError, TypeError) as e:    # a parser bug must lose the pair, not the run
            lost[pair.key] = f"nbperf to {pair.key}: output not understood: {type(e).__name__}: {e}"
            continue
        samples += [replace(x, t_start=x.t_start - off, t_end=x.t_end - off) for x in got] if off else got
        firsts[pair.key] = [t - off for t in first_sends(cr, sr)]
        meta["totals"][pair.key] = {"tx_bytes": cr.summary.tx_bytes, "rx_bytes": cr.summary.rx_bytes,
                                    "peer_tx_bytes": cr.summary.peer_tx_bytes,
                                    "peer_rx_bytes": cr.summary.peer_rx_bytes}
        meta["clock_offsets"][pair.key] = cr.clock_offset
        meta["rt_start"][pair.key] = cr.summary.rt_start
    every = [t for v in firsts.values() for t in v]
    meta["test_starts"] = {k: min(v) for k, v in firsts.items() if v}
    # the start the engine achieved: first sends of every connection of every pair
    meta["start_skew_s"] = (max(every) - min(every)) if every else None
    meta["start_late_max_s"] = (max(every) - meta["start_at"]) if every and "start_at" in meta else None
    return samples


def _net_targets(ctx: NbperfContext, env: PointEnv, servers: Slots, clis: Slots) -> list[NetTarget]:
    out = [NetTarget(ctx.server, ctx.transports[ctx.server], lambda: [x.pid for _, x in clis], env.if_of(ctx.server))]

    def pids_on(c: str) -> Callable[[], list[int]]:
        return lambda: [x.pid for pair, x in servers if pair.client == c]
    for client in dict.fromkeys(pair.client for pair, _ in servers):
        out.append(NetTarget(client, ctx.transports[client], pids_on(client), env.if_of(client)))
    return out


def _tool_procs(env: PointEnv, servers: Slots, clis: Slots) -> Callable[[], list[tuple[int, str, str, str]]]:
    if env.cpu_transport is None:
        return lambda: []
    return tool_procs(env.cpu_transport,
                      lambda: ([(x.pid, pair.client, "engine-server", str(pair.port)) for pair, x in servers]
                               + [(x.pid, x.host, "engine-client", pair.key) for pair, x in clis]), [])


class NbperfTcp:
    """The part of the TCP study's runner that drives nbperf (its ``preflight``
    and ``trial``); the TCP runner hands these over when ``engine = "nbperf"``."""

    def __init__(self, s: TcpStudy, server: str, clients: list[str], transports: dict[str, Transport],
                 addresses: dict[str, str]):
        self.study, self.server, self.clients = s, server, clients
        self.transports, self.addresses = transports, addresses
        self.ctx: NbperfContext | None = None

    def preflight(self) -> Preflight:
        self.ctx, pre = preflight(self.study, self.server, self.clients, self.transports, self.addresses)
        return pre

    def trial(self, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
        assert self.ctx is not None, "preflight first"
        return TrialOutcome(*run_trial(self.ctx, env, spec, raw_dir))

