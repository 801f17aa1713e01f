"""Driving nbperf, whichever study runs it (TCP, UDP): its processes at one
start, the pairs' outputs parsed.  Each study's nbperf engine (its preflight,
its argv, what its samples are) lives in the study:
``studies/tcp/engines/nbperf.py``, ``studies/udp/engines/nbperf.py``.

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
from dataclasses import dataclass, field, replace
from typing import Any

from ..core.errors import PreflightError, ToolError, tail
from ..hosts.transport import Process, Transport, host_clock_offset, read_output
from ..records import Sample
from ..sampling.sampler import NetTarget, tool_procs
from ..tools import nbperf
from ..tools.base import FlowInterval, MinVersion, ToolInfo, parse_version
from .kit import PointEnv, PointSamplers, stall_causes, stalled
from .point import Point, parsed_or_lost
from .preflight import busy_ports, nofile_limit

INSTALL = ("run 'nicbench setup' (it builds nbperf for this user); on a host that does not share this machine's "
           "files: make -C native/nbperf there (nicbench's sources, src/nicbench/native/nbperf) and put build/nbperf "
           "on its PATH")
MIN_VERSION = MinVersion("nbperf", (1, 0, 0), "the JSON lines nicbench parses")
DIRECTION: dict[str, nbperf.Direction] = {"tx": "tx", "rx": "rx", "bidir": "bidir"}   # study direction -> --dir
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


@dataclass(frozen=True)
class NbperfHosts:
    """Where nbperf runs, whichever study drives it: the study server (its
    clients), the client hosts (its servers), and nbperf's path on each."""

    server: str
    clients: list[str]
    transports: dict[str, Transport]
    addresses: dict[str, str]            # host -> test address
    exes: dict[str, str]                 # host -> nbperf there
    tool: ToolInfo


def _exe_on(t: Transport, local: str | None) -> str:
    """nbperf's path on a host: this build where the host sees it (the lab, and
    hosts sharing the path), else the one on the host's PATH."""
    r = t.run(["sh", "-c", 'if [ -n "$1" ] && [ -x "$1" ]; then echo "$1"; else command -v nbperf || echo nbperf; fi',
               "nb", local or ""], timeout=10)
    lines = r.stdout.strip().splitlines()
    return lines[-1] if lines else "nbperf"


def find_engines(hosts: Sequence[str], transports: dict[str, Transport],
                 problems: list[str]) -> tuple[dict[str, str], ToolInfo | None]:
    """nbperf's path and version on every host (the first host's version is
    the run's); each host's problem appended to ``problems``."""
    exes: dict[str, str] = {}
    tool: ToolInfo | None = None
    local = nbperf.binary()
    for i, host in enumerate(hosts):
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
        if i == 0:
            tool = info
    return exes, tool


def port_and_fd_problems(server: str, transports: dict[str, Transport], port: int, conns_on: dict[str, int],
                         most_per_client: int, fds_per_conn: int = 1) -> list[str]:
    """The servers' TCP port free on every client host, and open-files limits
    for the largest point: ``conns_on`` the most connections a client host's
    server gets, ``most_per_client`` the most one client process drives;
    ``fds_per_conn`` 2 for UDP (a flow is a UDP socket and its TCP connection)."""
    problems: list[str] = []
    for c, n in conns_on.items():
        if port in busy_ports(transports[c]):
            problems.append(f"{c}: port {port} already in use (study.port_base)")
        need = n * fds_per_conn + SERVER_FDS
        have = nofile_limit(transports[c], "-Hn")   # nbperf raises its soft limit to it
        if have is not None and have < need:
            problems.append(f"{c}: open-files limit is {have}, the nbperf server needs {need} for "
                            f"{n} connections (raise ulimit -Hn)")
    need = most_per_client * fds_per_conn + CLIENT_FDS
    have = nofile_limit(transports[server], "-Hn")
    if have is not None and have < need:
        problems.append(f"{server}: open-files limit is {have}, an nbperf client needs {need} for "
                        f"{most_per_client} connections (raise ulimit -Hn)")
    return problems


# ------------------------------------------------------------------ samples (pure)


SLIVER = 0.01


@dataclass
class Slot:
    """One interval of the grid ``start + k x interval``, summed over the
    connections whose intervals cover it: ``counts`` the spread counts (see
    :func:`grid`), ``retrans`` whole counts, ``weights`` each covering row
    with the seconds it shares with the slot (for values that are not counts,
    such as jitter)."""

    k: int
    t0: float
    t1: float
    counts: list[int]
    retrans: int | None = None
    conns: set[int] = field(default_factory=set)
    weights: list[tuple[nbperf.Sample, float]] = field(default_factory=list)


def grid(rows: Sequence[nbperf.Sample], counts: Callable[[nbperf.Sample], Sequence[int]], start: float,
         interval: float, shift: float) -> list[Slot]:
    """Connections' intervals summed onto the grid ``start + k x interval``,
    one :class:`Slot` per grid interval, contiguous.

    A connection's boundaries are read when its thread gets to them: within
    µs-ms of the grid on a quiet host, but a CPU-starved thread reads them
    late, up to a whole interval (it then reports one interval spanning two
    grid slots).  Summing "the k-th interval of every connection" then
    overlaps or leaves gaps (seen: a seed 000 replay's bidir points rejected
    for a 0.185 s gap).  So each connection's ``counts`` (bytes, datagrams...)
    are spread over the grid slots its interval covers, pro rata (as the
    analysis does at a window's edges), rounded so that every one is counted
    once; a slot spans the grid except at the outer ends, where it starts and
    stops with the data.  A sliver of up to 1 % of an interval across a grid
    line (the clocks' offset, a boundary read a few ms late) stays in its
    neighbour's slot.  Retransmits go whole to the slot holding the middle
    of their interval.  ``shift`` moves the end's clock onto the study server's."""
    slots: dict[int, Slot] = {}
    for r in rows:
        a, b, vs = r.t0 + shift, r.t1 + shift, [int(v) for v in counts(r)]
        k0 = math.floor((a - start) / interval + SLIVER)
        k1 = max(k0 + 1, math.ceil((b - start) / interval - SLIVER))
        done = [0] * len(vs)
        for k in range(k0, k1):
            lo, hi = max(a, start + k * interval), min(b, start + (k + 1) * interval)
            cum = 1.0 if k == k1 - 1 or b <= a else (hi - a) / (b - a)
            parts = [v - d if k == k1 - 1 else round(v * cum) - d for v, d in zip(vs, done, strict=True)]
            done = [d + x for d, x in zip(done, parts, strict=True)]
            sl = slots.setdefault(k, Slot(k, lo, hi, [0] * len(vs)))
            sl.t0, sl.t1 = min(sl.t0, lo), max(sl.t1, hi)
            sl.counts = [c + x for c, x in zip(sl.counts, parts, strict=True)]
            sl.conns.add(r.conn)
            sl.weights.append((r, max(hi - lo, 0.0)))
        if r.tcp is not None and r.tcp.retrans is not None:
            mid = math.floor(((a + b) / 2 - start) / interval)
            sl = slots[min(max(mid, k0), k1 - 1)]
            sl.retrans = (sl.retrans or 0) + r.tcp.retrans
    out = [slots[k] for k in sorted(slots)]
    if out:
        out[0].t0 = min(r.t0 + shift for r in rows)
        out[-1].t1 = max(r.t1 + shift for r in rows)
    return out


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


def per_interval(rows: Sequence[nbperf.Sample], count: Callable[[nbperf.Sample], int], start: float,
                  interval: float, shift: float) -> list[tuple[float, float, int, int | None, int]]:
    """:func:`grid` of one count: (t0, t1, bytes, retransmits, connections) per slot."""
    return [(sl.t0, sl.t1, sl.counts[0], sl.retrans, len(sl.conns))
            for sl in grid(rows, lambda r: (count(r),), start, interval, shift)]


def flow_ends(client: nbperf.ClientRun, server: nbperf.ServerRun,
              flow: str) -> dict[str, tuple[Sequence[nbperf.Sample], float]]:
    """One flow's two ends: side -> (that end's rows, the shift onto the client's
    clock).  tx: the client sends, the server receives; rx the other way round."""
    mine = [s for s in server.samples if s.session == client.session]
    shift = -client.clock_offset
    if flow == "tx":
        return {"sender": (client.samples, 0.0), "receiver": (mine, shift)}
    return {"sender": (mine, shift), "receiver": (client.samples, 0.0)}


FLOWS = {"tx": ("tx",), "rx": ("rx",), "bidir": ("tx", "rx")}


def udp_intervals(client: nbperf.ClientRun, server: nbperf.ServerRun, omit: float,
                  where: str = "") -> list[FlowInterval]:
    """A UDP pair's intervals as the iperf engines' parsers give theirs: one
    per grid interval, flow and side, summed over the pair's flows, on the
    client's clock (``abs_start``).  The receiver's ``packets`` are the
    datagrams it expected by sequence number (received + lost), ``lost`` its
    sequence gaps in the interval (a late datagram filling an earlier gap
    counts back, so an interval's figure may be negative), ``out_of_order``
    datagrams that came after a later one; ``jitter_s`` the flows' mean RFC
    3550 jitter at the interval's end.  The sender's ``packets`` are those it
    sent.  Intervals starting within the warm-up (``omit`` s) are omitted.

    What arrives after the end (start + duration) is left out, as the iperf
    engines leave it out: nbperf stamps it as one more interval, as long as the
    receiver waits for stragglers (lab: a receiver that got 40,000 datagrams/s
    until the end drained its socket buffers and waited 0.2-0.5 s), and that
    slow last interval would stretch the shared window past the end and read
    as a lower rate (rx at 1 Gbit/s per client into 500M: 2.6 % below the
    interface counters).  :func:`udp_totals` keeps every datagram."""
    nbperf.check_session(server, client.session, where=where)
    out: list[FlowInterval] = []
    end = client.start + client.duration
    for flow in FLOWS[client.direction]:
        for side, (rows, sh) in flow_ends(client, server, flow).items():
            if any(r.udp is None for r in rows):
                raise ToolError(f"nbperf {'server' if sh else 'client'} intervals without udp counts: "
                                "not a UDP test's output", where=where)

            def counts(r: nbperf.Sample, side: str = side) -> tuple[int, ...]:
                u = r.udp
                assert u is not None
                if side == "sender":
                    return r.tx_bytes, u.tx_packets, 0, 0
                return r.rx_bytes, u.rx_packets + u.lost, u.lost, u.out_of_order

            for sl in grid(rows, counts, client.start, client.interval, sh):
                nominal = client.start + sl.k * client.interval
                if nominal >= end - 1e-6:
                    continue
                nbytes, packets, lost, ooo = sl.counts
                iv = FlowInterval(0.0, sl.t1 - sl.t0, "fwd" if flow == "tx" else "rev", side,  # type: ignore[arg-type]
                                  nbytes, len(sl.conns), omitted=nominal < client.start + omit - 1e-6,
                                  abs_start=sl.t0, packets=packets)
                if side == "receiver":
                    # jitter is a level, not a count: the flows' mean, each row weighted by its time in the slot
                    wsum = sum(w for _, w in sl.weights)
                    jit = (sum(r.udp.jitter_us * w for r, w in sl.weights if r.udp is not None) / wsum if wsum
                           else sum(r.udp.jitter_us for r, _ in sl.weights if r.udp is not None) / len(sl.weights))
                    iv = replace(iv, lost=lost, out_of_order=ooo, jitter_s=jit / 1e6)
                out.append(iv)
    return out


def udp_totals(client: nbperf.ClientRun, server: nbperf.ServerRun) -> dict[str, dict[str, int | float | None]]:
    """Each flow's exact totals over the whole test (warm-up and the drain
    after the end included, unlike iperf3's end report), keyed as iperf3's
    (``fwd.sender``, ``fwd.receiver``...): the sender's datagrams, and the
    receiver's from its ``conn_end`` -- ``packets`` the datagrams the sender
    sent (as its totals told the receiver), ``lost`` those less what arrived,
    ``received``/``received_bytes`` what arrived, ``bad`` datagrams without
    nbperf's header, ``jitter_s`` the flows' worst final jitter."""
    out: dict[str, dict[str, int | float | None]] = {}
    for flow in FLOWS[client.direction]:
        key = "fwd" if flow == "tx" else "rev"
        rcv = [e for e in (server.ends if flow == "tx" else client.ends) if e.session == client.session]
        snd = [e for e in (client.ends if flow == "tx" else server.ends) if e.session == client.session]
        us = [e.udp for e in rcv if e.udp is not None]
        lost = [u.lost for u in us]
        out[f"{key}.sender"] = {"packets": sum(e.udp.tx_packets for e in snd if e.udp is not None),
                                "streams": len(snd)}
        out[f"{key}.receiver"] = {
            "packets": sum(u.peer_tx_packets or 0 for u in us), "received": sum(u.rx_packets for u in us),
            "received_bytes": sum(e.rx_bytes for e in rcv),
            "lost": None if any(x is None for x in lost) else sum(x or 0 for x in lost),
            "out_of_order": sum(u.out_of_order for u in us), "bad": sum(u.bad for u in us),
            "jitter_s": max((u.jitter_us for u in us), default=0.0) / 1e6, "streams": len(rcv)}
    return out


def first_sends(client: nbperf.ClientRun, server: nbperf.ServerRun) -> list[float]:
    """Every connection's first send (its achieved start) on the study server's
    clock: the client's for tx/bidir, the server's for rx."""
    if client.direction == "rx":
        return [e.first_tx - client.clock_offset for e in server.ends
                if e.session == client.session and e.first_tx is not None]
    return [e.first_tx for e in client.ends if e.first_tx is not None]


# ------------------------------------------------------------------ one point



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


Slots = Sequence[tuple[Pair, Process]]
ClientArgv = Callable[[Pair, float], list[str]]     # a pair, the start on the study server's clock -> argv


@dataclass
class Driven:
    """One point's nbperf processes as they ran (the pairs lost on the way
    are the point's: ``Point.lost``)."""

    servers: list[tuple[Pair, Process]]
    clis: list[tuple[Pair, Process]]
    lost: dict[str, str]


def drive(pt: Point, h: NbperfHosts, ps: Sequence[Pair], client_argv: ClientArgv, *, seconds: float, grace: float,
          interval: float, timeout_margin: float) -> Driven:
    """Run the pairs of one point in ``pt``'s guard: a server per client host,
    the clients all given one absolute start, each ended by itself
    (``seconds`` of traffic, then at most ``grace`` for the drain); samplers
    around it.  A client still running ``timeout_margin`` after its own
    deadline loses its pair (all of them: the point fails)."""
    d = Driven([], [], pt.lost)
    servers, clis = d.servers, d.clis
    with pt:
        # 1. one server per client host; it leaves by itself once its one client
        #    process is done, and at its hard deadline whatever happens
        t_spawn = time.monotonic()
        until = time.time() + 5.0 + MAX_LEAD_S + seconds + grace + 5.0
        for pair in ps:
            argv = nbperf.server_argv(h.exes[pair.client], port=pair.port, until=until, clients=1,
                                      bind=h.addresses[pair.client])
            servers.append((pair, pt.spawn(h.transports[pair.client], pair.client, "engine-server",
                                           f"{pair.client}-server-{pair.port}", argv,
                                           key=f"{pair.client}:server:{pair.port}")))
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
        on_server = start + host_clock_offset(h.transports[h.server])
        for pair in ps:
            clis.append((pair, pt.spawn(h.transports[h.server], h.server, "engine-client",
                                        f"{pair.client}-client-{pair.port}", client_argv(pair, on_server),
                                        key=f"{h.server}:client:{pair.client}:{pair.port}")))
        pt.meta["start_at"], pt.meta["start_lead_s"] = start, lead
        samplers = pt.sample(PointSamplers(
            pt.spec.trial_id, _net_targets(h, pt.env, servers, clis), pt.env.cpu_transport,
            _tool_procs(pt.env, servers, clis), machine=pt.env.cpu_machine, nic_irqs=pt.env.nic_irqs,
            net_interval=min(interval, 0.5), cpu_interval=min(interval, 0.25)))
        # 3. each client ends by itself at start + duration (+ the drain); one
        #    still running well after its own hard deadline is lost
        limit = (start - time.time()) + seconds + grace + timeout_margin

        def why_hung(pair: Pair, proc: Process) -> ToolError:
            hosts = {x: h.transports[x] for x in (h.server, pair.client)}
            ends = [proc, *(p for pr, p in servers if pr.client == pair.client)]
            return stalled(f"nbperf client to {pair.key}", limit, h.server, stall_causes(hosts, pt.env.ifnames, ends),
                           "the path may be stalled; raise study.timeout_margin if the host is slow")
        pt.await_clients(clis, limit, lambda pair: pair.key, why_hung)
        samplers.last_read()
        # 4. servers: each exits once its client's session ended (--clients 1)
        stop_by = time.monotonic() + 3.0
        for _, proc in servers:
            if proc.wait(stop_by - time.monotonic()) is None:
                proc.stop(0.5)
    return d


def parse_pairs(h: NbperfHosts, d: Driven, meta: dict[str, Any],
                samples_of: Callable[[Pair, nbperf.ClientRun, nbperf.ServerRun], list[Sample]]) -> list[Sample]:
    """Every surviving pair's samples (``samples_of`` a pair's two outputs,
    stamped on the study server's clock); a pair whose output says it failed
    goes into ``d.lost`` with the engine's own one line.  Records each pair's
    clock offset, its real-time start, and the start the engine achieved."""
    samples: list[Sample] = []
    firsts: dict[str, list[float]] = {}
    meta["clock_offsets"], meta["rt_start"] = {}, {}
    # every stamp is the study server's (the server's are moved there by the
    # engine's own offset): onto this machine's clock, as the samplers' are
    off = host_clock_offset(h.transports[h.server])
    srv_of = {pair.key: proc for pair, proc in d.servers}
    for pair, proc in d.clis:
        if pair.key in d.lost:
            continue
        def parsed(pair: Pair = pair, proc: Process = proc) -> tuple[nbperf.ClientRun, nbperf.ServerRun, list[Sample]]:
            sproc = srv_of[pair.key]
            cr = nbperf.parse_client(read_output(proc.stdout_path), read_output(proc.stderr_path), where=h.server)
            sr = nbperf.parse_server(read_output(sproc.stdout_path), read_output(sproc.stderr_path),
                                     where=pair.client)
            return cr, sr, samples_of(pair, cr, sr)
        got_all = parsed_or_lost(pair.key, d.lost, "nbperf", parsed, label=f"nbperf to {pair.key}")
        if got_all is None:
            continue
        cr, sr, got = got_all
        samples += [replace(x, t_start=x.t_start - off, t_end=x.t_end - off) for x in got] if off else got
        firsts[pair.key] = [t - off for t in first_sends(cr, sr)]
        meta["clock_offsets"][pair.key] = cr.clock_offset
        meta["rt_start"][pair.key] = cr.summary.rt_start
    every = [t for v in firsts.values() for t in v]
    meta["test_starts"] = {k: min(v) for k, v in firsts.items() if v}
    # the start the engine achieved: first sends of every connection of every pair
    meta["start_skew_s"] = (max(every) - min(every)) if every else None
    meta["start_late_max_s"] = (max(every) - meta["start_at"]) if every and "start_at" in meta else None
    return samples


def _net_targets(h: NbperfHosts, env: PointEnv, servers: Slots, clis: Slots) -> list[NetTarget]:
    out = [NetTarget(h.server, h.transports[h.server], lambda: [x.pid for _, x in clis], env.if_of(h.server))]

    def pids_on(c: str) -> Callable[[], list[int]]:
        return lambda: [x.pid for pair, x in servers if pair.client == c]
    for client in dict.fromkeys(pair.client for pair, _ in servers):
        out.append(NetTarget(client, h.transports[client], pids_on(client), env.if_of(client)))
    return out


def _tool_procs(env: PointEnv, servers: Slots, clis: Slots) -> Callable[[], list[tuple[int, str, str, str]]]:
    if env.cpu_transport is None:
        return lambda: []
    return tool_procs(env.cpu_transport,
                      lambda: ([(x.pid, pair.client, "engine-server", str(pair.port)) for pair, x in servers]
                               + [(x.pid, x.host, "engine-client", pair.key) for pair, x in clis]), [])
