"""What the studies driving iperf3 and iperf 2 (TCP, UDP) do the same way.

Layout (both seeds): the study's *server* host runs the engine's client
processes, one per (client host, port); each client host runs one engine
server per port.  ``tx`` = data from the study server to the clients (the
engine's fwd flow), ``rx`` = the reverse (``-R``), ``bidir`` both.

Here: which engine a host has (preflight), how streams spread over engine
processes, when an engine server is ready, how an iperf2 server is stopped,
where an iperf3 process's intervals sit on the wall clock, the skews of a
point's start, and which processes the samplers follow.  The argv and the
parsers stay in :mod:`nicbench.tools.iperf3` and :mod:`nicbench.tools.iperf2`.
"""

from __future__ import annotations

import math
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from ..core.errors import NicbenchError, PreflightError, ToolError, tail
from ..hosts.transport import END_MARK, Process, Transport, gate_time, read_output, tool_stderr
from ..records import Sample, Tags, Unit, make_tags
from ..sampling.sampler import NetTarget, tool_pid, tool_procs
from ..tools import iperf2, iperf3
from ..tools.base import FlowInterval, MinVersion, ToolInfo
from .kit import PointEnv, PointSamplers, even_shares, release_together
from .point import Point
from .preflight import NOFILE_HINT, nofile_limit
from .procnet import bound_udp, connected_udp, established_peers, listening, socket_inodes

MODE = {"tx": "fwd", "rx": "rev", "bidir": "bidir"}
DIRECTION = {"fwd": "tx", "rev": "rx"}
Engine = Literal["iperf3", "iperf2"]


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


# An engine process's descriptors, counted in /proc/PID/fd on this machine:
# iperf3 3.12 holds a socket and its (deleted) buffer file per stream, both per
# direction with --bidir, and 8 others (stdio, the control connection, the
# listening socket, /dev/urandom); iperf 2.1.8 a socket per stream and 6 others.
# ENGINE_FDS is the others, with room to spare.
ENGINE_FDS = 16
FDS_PER_STREAM = {"iperf3": 2, "iperf2": 1}


def nofile_problems(engine: str, slots: Sequence[ProcSlot], server: str, transports: dict[str, Transport],
                    bidir: bool) -> list[str]:
    """Open-files limits too low for the engine processes of ``slots`` (every
    point's, or the largest's), caught at preflight rather than as 'Too many
    open files' mid-point, blamed on whichever pair hit it first.  The limit is
    per process and iperf does not raise it: each engine process (a client on
    the study server, a server per port on each client host) holds
    ``FDS_PER_STREAM`` descriptors per stream (twice that with iperf3's
    --bidir) under the soft limit a process started on its host gets
    (``ulimit -n``).  A line per host, naming it, its limit and what needs more."""
    per_stream = FDS_PER_STREAM.get(engine, 1) * (2 if bidir and engine == "iperf3" else 1)
    most: dict[str, int] = {}
    for slot in slots:
        for host in (server, slot.client):
            most[host] = max(most.get(host, 0), slot.streams)
    out = []
    for host, streams in most.items():
        need = streams * per_stream + ENGINE_FDS
        have = nofile_limit(transports[host], "-n")
        if have is not None and have < need:
            role = "client" if host == server else "server"
            out.append(f"{host}: open-files limit is {have} (ulimit -n), an {engine} {role} process needs {need} for "
                       f"{streams} streams ({NOFILE_HINT}, or fewer streams per process)")
    return out


def stream_cap(engine: str, streams_per_process: int | None) -> int:
    """Streams per engine process: the plan's, else the engine's own limit."""
    return streams_per_process or (iperf3.MAX_STREAMS if engine == "iperf3" else iperf2.MAX_STREAMS)


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


def version_floors(engine: str, directions: Sequence[str]) -> list[MinVersion]:
    """The oldest engine releases nicbench trusts for these directions."""
    floor = [iperf3.MIN_VERSION] if engine == "iperf3" else [iperf2.MIN_VERSION]
    if engine == "iperf3" and "bidir" in directions:
        floor.append(iperf3.MIN_BIDIR)
    return floor


def detect_everywhere(engine: str, hosts: Sequence[str], transports: dict[str, Transport],
                      problems: list[str], floors: Sequence[MinVersion] = ()) -> dict[str, ToolInfo]:
    """The engine on every host; a problem line per host that lacks it, or whose
    engine is older than the first of ``floors`` it misses."""
    found = {}
    for host in hosts:
        try:
            info = found[host] = detect_tool(transports[host], engine)
            problems += [p for m in floors if (p := m.problem(info.version, host))][:1]
        except PreflightError as e:
            problems.append(f"{host}: {e.message}")
    return found


def wait_ready(t: Transport, proc: Process, port: int, deadline: float, proto: Literal["tcp", "udp"] = "tcp",
               wrapped: bool = False) -> None:
    """Until the engine server ``proc`` owns a socket on ``port``: listening
    (TCP), or bound (UDP: an iperf 2 UDP server has no listening socket).
    ``wrapped``: ``proc`` is a launcher (coreutils ``timeout``, taskset) and
    the socket is the tool's below it.  ToolError with the server's own words
    if it exits first."""
    tables = ("tcp", "tcp6") if proto == "tcp" else ("udp", "udp6")
    ready = listening if proto == "tcp" else bound_udp
    while True:
        rc = proc.poll()
        if rc is not None:
            out = read_output(proc.stdout_path) + "\n" + read_output(proc.stderr_path)
            msg = server_error(out) or tail(out) or f"exited {rc}"
            hint = ("another process holds the port: pick another study.port_base, or stop it"
                    if "in use" in msg.lower() else None)
            raise ToolError(f"engine server on port {port} failed to start: {msg}", where=t.host, hint=hint)
        pid = tool_pid(t, proc.pid) if wrapped else proc.pid
        inodes: set[int] = set()
        for table in tables if pid is not None else ():
            try:
                inodes |= ready(t.read_text(f"/proc/{pid}/net/{table}")).get(port, set())
            except OSError:
                pass
        if pid is not None and inodes and inodes & socket_inodes(t.fd_links(pid)):
            return
        if time.monotonic() > deadline:
            raise ToolError(f"engine server on port {port} is not listening after 5 s", where=t.host)
        time.sleep(0.005)


def udp_streams_set_up(t: Transport, proc: Process, port: int) -> int:
    """How many UDP streams an iperf3 server has set up on ``port``: it connects
    a socket to each stream's sender once that stream's set-up datagram came
    (read from /proc/PID/net/udp{,6} and the process's own sockets)."""
    inodes: set[int] = set()
    for table in ("udp", "udp6"):
        try:
            inodes |= connected_udp(t.read_text(f"/proc/{proc.pid}/net/{table}")).get(port, set())
        except OSError:
            pass
    return len(inodes & socket_inodes(t.fd_links(proc.pid))) if inodes else 0


def server_error(text: str) -> str | None:
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


def tool_error(msg: str, host: str) -> ToolError:
    hint = next((h for k, h in _HINTS.items() if k in msg.lower()), None)
    return ToolError(msg, where=host, hint=hint)


Slots = Sequence[tuple[ProcSlot, Process]]


def held_by_others(own: str | None, transports: dict[str, Transport], servers: Slots) -> list[str]:
    """Engine servers another peer holds: a one-off iperf3 server serves the
    first connection it accepts, so an idle peer there (not the study server,
    whose test address is ``own``) keeps the point's own client waiting."""
    out = []
    for slot, proc in servers:
        t = transports[slot.client]
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


def check_iperf3(rep: iperf3.Iperf3Report, proc: Process, key: str, host: str) -> None:
    """ToolError unless an iperf3 client's report can be used: no error in it,
    not repaired, its process exited well."""
    if rep.error:
        raise tool_error(f"iperf3 to {key}: {rep.error}", host)
    if rep.damage:
        raise ToolError(f"iperf3 to {key}: its report is damaged ({'; '.join(rep.damage)}): its figures "
                        "cannot be trusted", where=host, hint="the raw report is kept with the run")
    rc = proc.poll()
    if rc not in (0, None):
        raise ToolError(f"iperf3 to {key} exited {rc} after printing a report without an error: "
                        f"{tail(tool_stderr(proc.stderr_path)) or 'no error text'}", where=host)
    # iperf3 can print its report and then fail (the results exchange, a server
    # gone) with exit 0: its error line on stderr is not silence
    said = [ln for ln in tool_stderr(proc.stderr_path).splitlines() if ln.startswith("iperf3: error")]
    if said:
        raise ToolError(f"iperf3 to {key} said after its report, exiting 0: {said[-1]}", where=host)


def check_iperf2(text: str, proc: Process, key: str, host: str) -> None:
    """ToolError unless an iperf 2 client printed something and exited well."""
    if not text.strip():
        raise tool_error(f"iperf to {key} printed nothing: "
                         f"{tail(tool_stderr(proc.stderr_path)) or 'no error text'}", host)
    rc = proc.poll()
    if rc not in (0, None):
        raise tool_error(f"iperf to {key} exited {rc}: {tail(tool_stderr(proc.stderr_path)) or 'no error text'}",
                         host)


def drive_pairs(pt: Point, server: str, transports: dict[str, Transport], slots: Sequence[ProcSlot],
                servers: list[tuple[ProcSlot, Process]], clis: list[tuple[ProcSlot, Process]], *,
                server_argv: Callable[[ProcSlot], list[str]], client_argv: Callable[[ProcSlot], list[str]],
                proto: Literal["tcp", "udp"], interval: float, limit: float,
                why_hung: Callable[[ProcSlot, Process], ToolError],
                after_release: Callable[[], None] | None = None) -> None:
    """The sequence of an engine run as iperf runs (inside ``pt``'s guard):
    1. one engine server per slot on its client host, awaited until it listens;
    2. one engine client per slot on the study ``server``, behind the start gate;
    3. the barrier: once every shim waits at its gate, all released back to
       back; the samplers start with them (the window starts after the warm-up);
       ``after_release`` then (a check that needs the tools running);
    4. the clients awaited for ``limit`` s: one still running is lost, all of
       them fail the point (``why_hung`` says why).
    ``servers`` and ``clis`` are filled as the processes start, so what ran is
    known to the caller also when a step raised."""
    for slot in slots:
        servers.append((slot, pt.spawn(transports[slot.client], slot.client, "engine-server",
                                       f"{slot.client}-server-{slot.port}", server_argv(slot),
                                       key=f"{slot.client}:server:{slot.port}")))
    deadline = time.monotonic() + 5.0
    for slot, proc in servers:
        wait_ready(transports[slot.client], proc, slot.port, deadline, proto)
    for slot in slots:
        clis.append((slot, pt.spawn(transports[server], server, "engine-client", f"{slot.client}-client-{slot.port}",
                                    client_argv(slot), key=f"{server}:client:{slot.client}:{slot.port}",
                                    gated=True)))
    pt.meta["released"] = release_together([p for _, p in clis], "engine clients", server)
    samplers = pt.sample(PointSamplers(
        pt.spec.trial_id, net_targets(server, transports, pt.env, servers, clis), pt.env.cpu_transport,
        engine_procs(server, pt.env, servers, clis), machine=pt.env.cpu_machine, nic_irqs=pt.env.nic_irqs,
        net_interval=min(interval, 0.5), cpu_interval=min(interval, 0.25)))
    if after_release is not None:
        after_release()
    pt.await_clients(clis, limit, lambda sl: f"{sl.client}:{sl.port}", why_hung)
    samplers.last_read()        # as the clients finish (through the namespace)


def stamp_lag(tool: ToolInfo, interval: float) -> float:
    """How late an engine's version stamps its intervals: one interval for the
    iperf 2 that stamps an interval's end (:func:`iperf2.stamps_late`), else none."""
    return interval if iperf2.stamps_late(tool) else 0.0


def stop_servers(engine: str, servers: Slots, mode: str, interval: float, meta: dict) -> None:
    """After the clients: an iperf3 server (-1) exits by itself (stopped after
    3 s if not); iperf2 servers as :func:`stop_iperf2_servers`."""
    if engine == "iperf3":
        for _, proc in servers:
            if proc.wait(3.0) is None:
                proc.stop(0.5)
    else:
        stop_iperf2_servers(servers, 2 if mode == "bidir" else 1, interval, meta)


def stop_iperf2_servers(servers: Slots, flows_per_stream: int, interval: float, meta: dict) -> None:
    """An iperf2 server is stopped once every flow it serves has printed its
    summary (or after 2 s); a server cut short is a warning in ``meta``."""
    stop_by = time.monotonic() + 2.0
    for slot, proc in servers:
        want = slot.streams * flows_per_stream
        while (iperf2.finished_flows(read_output(proc.stdout_path), interval) < want
               and time.monotonic() < stop_by and proc.poll() is None):
            time.sleep(0.01)
        got = iperf2.finished_flows(read_output(proc.stdout_path), interval)
        if got < want:
            meta.setdefault("warnings", []).append(
                f"iperf2 server {slot.client}:{slot.port} printed {got} of {want} flow summaries "
                "before it was stopped: its last interval may be missing")
        proc.stop(grace=0.0, sig=signal.SIGKILL)


def gate_stamps(clis: Slots, meta: dict) -> tuple[dict[str, float | None], dict[str, float | None]]:
    """Each engine client's launch and exit stamps (``client:port`` keys) into
    ``meta``, with the launch skew between them."""
    stamps: dict[str, float | None] = {}
    ends: dict[str, float | None] = {}
    for slot, proc in clis:     # on this machine's clock (a host's stamp less its measured offset)
        stamps[f"{slot.client}:{slot.port}"] = gate_time(proc)
        ends[f"{slot.client}:{slot.port}"] = gate_time(proc, END_MARK)
    good = [v for v in stamps.values() if v is not None]
    meta["launch_stamps"] = stamps
    meta["exit_stamps"] = ends
    meta["launch_skew_s"] = (max(good) - min(good)) if len(good) > 1 else 0.0 if good else None
    return stamps, ends


def start_skew(meta: dict) -> float | None:
    """The skew that matters: between the moments the tests really started."""
    starts = [v for v in (meta.get("test_starts") or {}).values() if v is not None]
    return (max(starts) - min(starts)) if len(starts) > 1 else (0.0 if starts else meta.get("launch_skew_s"))


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


def place_iperf3(rep: iperf3.Iperf3Report, key: str, stamps: dict[str, float | None],
                 ends: dict[str, float | None], meta: dict, host: str) -> tuple[float, float]:
    """(anchor, peer anchor) of one iperf3 client's report on the wall clock,
    recorded in ``meta``.

    Both ends stop together (the client sends TEST_END), but the server's
    interval clock can start late: seen 0.5 s late for a busy --bidir server.
    So its intervals are placed by their end as well.
    """
    anchor, how = iperf3_anchor(stamps.get(key), ends.get(key), rep.last_end)
    if anchor is None:
        raise ToolError("the start gate recorded no time", where=host)
    meta.setdefault("test_starts", {})[key] = anchor
    meta.setdefault("anchors", {})[key] = how
    peer_anchor = anchor
    if how == "exit" and rep.peer_last_end > 0:
        peer_anchor = anchor + rep.last_end - rep.peer_last_end
        meta.setdefault("peer_clock_offsets", {})[key] = peer_anchor - anchor
    return anchor, peer_anchor


def place_iperf2(rep: iperf2.Iperf2Report, key: str, ends: dict[str, float | None], meta: dict) -> None:
    """Record where an iperf2 client's test started (its CSV stamps are wall
    clock) and warn when its stamps run past the process's exit."""
    firsts = [i.abs_start for i in rep.intervals if i.abs_start is not None]
    meta.setdefault("test_starts", {})[key] = min(firsts) if firsts else None
    meta.setdefault("anchors", {})[key] = "wall clock"
    last = max((i.abs_start + i.end - i.start for i in rep.intervals if i.abs_start is not None), default=None)
    end = ends.get(key)
    if last is not None and end is not None and last > end + 0.05:
        meta.setdefault("warnings", []).append(
            f"iperf2 to {key}: its CSV stamps run {last - end:.3f}s past the process's exit: "
            "intervals are placed late (a stamp quirk of this iperf version)")


def interval_span(iv: FlowInterval, anchor: float | None,
                  peer_anchor: float | None = None) -> tuple[float, float] | None:
    """An interval on the wall clock: ``anchor`` places a process's own
    intervals, ``peer_anchor`` those its peer measured on its own clock;
    iperf2's own wall-clock stamps need neither.  None: it cannot be placed."""
    a = peer_anchor if (iv.by_peer and peer_anchor is not None) else anchor
    if iv.abs_start is not None:
        t0 = iv.abs_start
    elif a is not None:
        t0 = a + iv.start
    else:
        return None
    return t0, t0 + (iv.end - iv.start)


def placed(intervals: Sequence[FlowInterval], host: str, port: int, anchor: float | None,
           peer_anchor: float | None = None) -> Iterator[tuple[FlowInterval, float, float, Tags]]:
    """Each interval that can be placed, with its wall-clock span and the tags
    every study's samples of it carry (see :func:`interval_span`)."""
    for iv in intervals:
        span = interval_span(iv, anchor, peer_anchor)
        if span is not None:
            yield iv, span[0], span[1], make_tags(host=host, proc=port, direction=DIRECTION[iv.flow], side=iv.side,
                                                  omitted=1 if iv.omitted else 0, streams=iv.streams)


def net_targets(server: str, transports: dict[str, Transport], env: PointEnv, servers: Slots,
                clis: Slots) -> list[NetTarget]:
    """The study server (seen through its engine clients) and every client host
    (through the engine servers living in its namespace)."""
    out = [NetTarget(server, transports[server], lambda: [p.pid for _, p in clis], env.if_of(server))]

    def pids_on(c: str) -> Callable[[], list[int]]:
        return lambda: [p.pid for sl, p in servers if sl.client == c]
    for client in dict.fromkeys(sl.client for sl, _ in servers):
        out.append(NetTarget(client, transports[client], pids_on(client), env.if_of(client)))
    return out


def engine_procs(server: str, env: PointEnv, servers: Slots,
                 clis: Slots) -> Callable[[], list[tuple[int, str, str, str]]]:
    """The tool processes whose own CPU is followed: engine servers by PID, engine
    clients below their gate shim."""
    if env.cpu_transport is None:
        return lambda: []
    return tool_procs(env.cpu_transport,
                      lambda: [(p.pid, sl.client, "engine-server", str(sl.port)) for sl, p in servers],
                      [(p.pid, server, "engine-client", f"{sl.client}:{sl.port}") for sl, p in clis])


def iperf3_report(proc: Process, key: str, host: str) -> iperf3.Iperf3Report:
    """An iperf3 client's report (``-J``), or ToolError naming the pair
    ``key`` (client:port) when it says an error, is damaged, exited non-zero
    after an error-free report (see :func:`check_iperf3`), or holds no interval."""
    try:
        rep = iperf3.parse(read_output(proc.stdout_path))
    except ToolError as e:     # the pair goes into the message: "no JSON" alone says not which
        raise ToolError(f"iperf3 to {key}: {e.message}", where=host, hint=e.hint) from None
    check_iperf3(rep, proc, key, host)
    if not rep.has_server_output and not rep.intervals:
        raise ToolError(f"iperf3 to {key} reported no intervals", where=host)
    return rep


def flow_samples(trial_id: str, host: str, port: int, anchor: float | None, intervals: Sequence[FlowInterval],
                 peer_anchor: float | None = None) -> list[Sample]:
    """``tcp.bytes`` (and ``tcp.retransmits``) Samples of one engine process's
    intervals on the wall clock (see :func:`placed`); ``host`` is the client
    host of the pair, ``port`` its engine server's port."""
    out = []
    for iv, t0, t1, tags in placed(intervals, host, port, anchor, peer_anchor):
        out.append(Sample(trial_id, "tcp.bytes", float(iv.bytes), "bytes", t0, t1, tags))
        if iv.retransmits is not None:
            out.append(Sample(trial_id, "tcp.retransmits", float(iv.retransmits), "count", t0, t1, tags))
        # the sender's TCP state at the interval's end, where the engine reports it
        state: tuple[tuple[str, float | None, Unit], ...] = (
            ("tcp.rtt", iv.rtt_s, "s"), ("tcp.snd_cwnd", iv.snd_cwnd, "bytes"), ("tcp.snd_wnd", iv.snd_wnd, "bytes"))
        for metric, v, unit in state:
            if v is not None:
                out.append(Sample(trial_id, metric, float(v), unit, t0, t1, tags))
    return out
