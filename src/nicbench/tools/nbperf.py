"""nbperf, nicbench's own TCP/UDP traffic engine (native/nbperf): argv builders and a pure parser.

One ``nbperf server`` per host serves every client and test on one port; one
``nbperf client`` per host drives all its connections.  Clients start at an
absolute CLOCK_REALTIME time and both ends stamp every interval with it, so
the intervals of different hosts line up to the clocks' agreement.

Output is JSON lines on stdout (``"event"`` says which): the client prints
``ready``, then per interval one ``interval`` line per connection and one
``thread`` line per thread, a ``conn_end`` per connection and a final ``end``;
the server prints ``listening``, ``session_start``/``session_end`` per client
process, the same ``interval``/``thread``/``conn_end`` lines, ``reject`` for
peers that are not nbperf clients, and ``end``.  Errors: one line on stderr,
``nbperf: error: ...``; exit 1 (run time), 2 (usage), 3 (stopped by a signal
mid-test).

Units: times are CLOCK_REALTIME seconds since the epoch (microsecond
resolution), durations seconds, bytes bytes, TCP ``rtt_us`` microseconds,
``snd_cwnd`` segments, ``delivery_rate`` bytes/s, CPU times seconds.
Receiver-side bytes are the truth: :func:`receiver_samples` picks them.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..core.errors import ToolError
from ..native.build import built

NAME = "nbperf"
EXIT = {1: "run time", 2: "usage", 3: "stopped"}
MAX_IO = 4 << 20                 # TCP read/write size limit of the engine, bytes
MAX_UDP_IO = 65507
MIN_UDP_IO = 32                  # its header: magic, sequence, send time, session
MAX_AHEAD_S = 60.0               # --start at most this far ahead

Side = Literal["client", "server"]
Direction = Literal["tx", "rx", "bidir"]     # tx: client -> server
Proto = Literal["tcp", "udp"]
SendMode = Literal["send", "sendmsg", "zerocopy", "sendfile"]
RecvMode = Literal["copy", "trunc"]


def binary() -> str | None:
    """Where nbperf is: $NICBENCH_NBPERF, this user's build of this version's
    sources (``nicbench setup``, native/build.py), a source checkout's own
    build (scripts/install.sh: ``make -C native/nbperf``), or on PATH."""
    env = os.environ.get("NICBENCH_NBPERF")
    if env:
        return env if os.access(env, os.X_OK) else None
    mine = built("nbperf")
    if mine:
        return mine
    checkout = Path(__file__).resolve().parents[1] / "native" / "nbperf" / "build" / "nbperf"
    if os.access(checkout, os.X_OK):
        return str(checkout)
    return shutil.which("nbperf")


# ------------------------------------------------------------------ argv


def server_argv(exe: str, *, port: int, until: float | None = None, lifetime: float | None = None,
                clients: int | None = None, threads: int | None = None, cpus: Sequence[int] | None = None,
                bind: str | None = None, rt_start: bool = True) -> list[str]:
    """A server that stops by itself at ``until`` (CLOCK_REALTIME s) or after
    ``lifetime`` s, and after ``clients`` client processes ended their tests.
    ``rt_start=False``: no SCHED_FIFO around starts (see native/nbperf/README.md)."""
    if (until is None) == (lifetime is None):
        raise ValueError("nbperf server takes exactly one of until and lifetime")
    argv = [exe, "server", "--port", str(port)]
    argv += ["--until", f"{until:.6f}"] if until is not None else ["--lifetime", f"{lifetime:g}"]
    if clients:
        argv += ["--clients", str(clients)]
    if threads:
        argv += ["--threads", str(threads)]
    if cpus:
        argv += ["--cpus", ",".join(map(str, cpus))]
    if bind:
        argv += ["--bind", bind]
    if not rt_start:
        argv.append("--no-rt-start")
    return argv


def client_argv(exe: str, *, server: str, port: int, start: float, duration: float, conns: int = 1,
                direction: Direction = "tx", proto: Proto = "tcp", io_size: int | None = None,
                interval: float = 1.0, grace: float | None = None, threads: int | None = None,
                cpus: Sequence[int] | None = None, sndbuf: int | None = None, rcvbuf: int | None = None,
                congestion: str | None = None, nodelay: bool = False, mss: int | None = None,
                busy_poll_us: int | None = None, send: SendMode = "send", recv: RecvMode = "copy",
                rate_bps: float | None = None, test: str | None = None, bind: str | None = None,
                rt_start: bool = True) -> list[str]:
    """One client process.  ``start``: CLOCK_REALTIME s (at most 60 s ahead
    when the process starts); ``io_size`` bytes per send/recv call (UDP: the
    datagram payload); ``rate_bps``: UDP payload bits/s per flow and direction."""
    argv = [exe, "client", "--server", server, "--port", str(port), "--start", f"{start:.6f}",
            "--duration", f"{duration:g}", "--conns", str(conns), "--dir", direction, "--proto", proto,
            "--interval", f"{interval:g}", "--send", send, "--recv", recv]
    optional: list[tuple[str, object]] = [
        ("--io", io_size), ("--grace", grace), ("--threads", threads), ("--sndbuf", sndbuf),
        ("--rcvbuf", rcvbuf), ("--congestion", congestion), ("--mss", mss), ("--busy-poll", busy_poll_us),
        ("--test", test), ("--bind", bind)]
    for flag, value in optional:
        if value is not None:
            argv += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    if cpus:
        argv += ["--cpus", ",".join(map(str, cpus))]
    if nodelay:
        argv.append("--nodelay")
    if rate_bps:
        argv += ["--rate", f"{rate_bps:.0f}"]
    if not rt_start:
        argv.append("--no-rt-start")
    return argv


# ------------------------------------------------------------------ records


@dataclass(frozen=True)
class TcpInfo:
    """TCP_INFO of one end's socket: ``rtt_us``/``rttvar_us`` microseconds,
    ``snd_cwnd`` segments of ``snd_mss`` bytes, ``delivery_rate`` bytes/s,
    ``total_retrans`` cumulative segments, ``retrans`` within the interval
    (None on a connection's final reading); ``kernel_rx_bytes`` payload bytes
    the kernel received in order within the interval (``tcpi_bytes_received``:
    when they arrived, not when the engine read them; None before nbperf
    1.1.0)."""

    total_retrans: int
    retrans: int | None
    rtt_us: int
    rttvar_us: int
    snd_cwnd: int
    snd_mss: int
    delivery_rate: int
    kernel_rx_bytes: int | None = None


@dataclass(frozen=True)
class UdpInterval:
    """Datagrams within one interval; ``lost`` is the receiver's running
    estimate from sequence gaps (exact loss is in :class:`UdpTotals`)."""

    tx_packets: int
    rx_packets: int
    lost: int
    out_of_order: int
    jitter_us: float              # RFC 3550 interarrival jitter, microseconds, as of the interval's end


@dataclass(frozen=True)
class Sample:
    """One connection on one end over [t0, t1] (CLOCK_REALTIME s): payload
    bytes it sent and received in that span."""

    side: Side
    test: str
    session: str
    conn: int
    thread: int
    t0: float
    t1: float
    tx_bytes: int
    rx_bytes: int
    tcp: TcpInfo | None = None
    udp: UdpInterval | None = None


@dataclass(frozen=True)
class ThreadCpu:
    """A worker thread's cumulative CPU (RUSAGE_THREAD) at ``t``, seconds."""

    side: Side
    thread: int
    cpu: int
    t: float
    utime: float
    stime: float
    conns: int


@dataclass(frozen=True)
class ZeroCopy:
    """MSG_ZEROCOPY sends, their completions, and how many the kernel copied anyway."""

    sends: int
    completed: int
    copied: int


@dataclass(frozen=True)
class UdpTotals:
    """A flow's datagrams on one end; ``lost`` = the sender's count (from its
    totals) - received, None where this end did not receive."""

    tx_packets: int
    rx_packets: int
    peer_tx_packets: int | None
    lost: int | None
    out_of_order: int
    jitter_us: float
    bad: int                       # datagrams without nbperf's header


@dataclass(frozen=True)
class ConnEnd:
    """A connection's totals on one end.  ``status``: ok, error or aborted
    (reset because another connection failed or the process was stopped)."""

    side: Side
    test: str
    session: str
    conn: int
    thread: int
    peer: str
    status: str
    error: str
    start: float
    first_tx: float | None        # the first send call (the achieved start of a sender)
    first_rx: float | None
    end: float | None
    tx_bytes: int
    rx_bytes: int
    tcp: TcpInfo | None = None
    zerocopy: ZeroCopy | None = None
    udp: UdpTotals | None = None


@dataclass(frozen=True)
class ClientSummary:
    """The client's ``end`` line.  ``peer_*_bytes``: the server's totals for
    this client's connections (None when the test failed)."""

    t: float
    status: str                   # ok | error | stopped
    error: str
    tx_bytes: int
    rx_bytes: int
    peer_tx_bytes: int | None
    peer_rx_bytes: int | None
    first_tx_min: float | None
    first_tx_max: float | None
    first_rx_min: float | None
    first_rx_max: float | None
    start_late_max: float | None  # last first send - start, s
    start_skew: float | None      # last - first first send among this client's connections, s
    rt_start: str                 # on | off | refused: SCHED_FIFO around the start (see native/nbperf/README.md)
    threads: tuple[ThreadCpu, ...]
    process_utime: float
    process_stime: float


@dataclass(frozen=True)
class ClientRun:
    """Everything one client process printed."""

    version: str
    test: str
    session: str
    ready_at: float
    start: float
    duration: float
    interval: float
    grace: float
    proto: Proto
    direction: Direction
    io_size: int
    conns: int
    threads: int
    cpus: tuple[int, ...]
    server: str
    port: int
    send: str
    recv: str
    rate_bps: int
    fd_limit: int
    clock_offset: float           # server clock - client clock, s, from the handshake with the least RTT
    clock_rtt: float
    samples: tuple[Sample, ...]
    cpu: tuple[ThreadCpu, ...]
    ends: tuple[ConnEnd, ...]
    summary: ClientSummary

    @property
    def ok(self) -> bool:
        return self.summary.status == "ok"


@dataclass(frozen=True)
class ServerSession:
    """One client process's test as the server saw it (``session_start`` +
    ``session_end``); ``status`` is None if the server's output ends before it."""

    test: str
    session: str
    peer: str
    start: float
    duration: float
    proto: Proto
    direction: Direction
    io_size: int
    conns: int
    status: str | None
    error: str
    connected: int
    tx_bytes: int
    rx_bytes: int
    client_tx_bytes: int | None
    client_rx_bytes: int | None


@dataclass(frozen=True)
class Reject:
    t: float
    peer: str
    reason: str


@dataclass(frozen=True)
class ServerRun:
    """Everything one server process printed; ``summary`` is the ``end`` line
    (None if the process was killed before it)."""

    version: str
    listening_at: float
    address: str
    port: int
    threads: int
    cpus: tuple[int, ...]
    until: float
    fd_limit: int
    sessions: tuple[ServerSession, ...]
    samples: tuple[Sample, ...]
    cpu: tuple[ThreadCpu, ...]
    ends: tuple[ConnEnd, ...]
    rejects: tuple[Reject, ...]
    status: str | None
    error: str
    process_utime: float | None
    process_stime: float | None

    def session(self, session: str) -> ServerSession:
        for s in self.sessions:
            if s.session == session:
                return s
        raise ToolError(f"nbperf server output has no session {session}",
                        hint="the client connected to another server, or the server's output is cut")


@dataclass(frozen=True)
class StartSkew:
    """The achieved start of several clients: ``skew`` = last - first first
    send over all their connections, ``late_max`` = last first send - start (s)."""

    start: float
    first: float
    last: float

    @property
    def skew(self) -> float:
        return self.last - self.first

    @property
    def late_max(self) -> float:
        return self.last - self.start


# ------------------------------------------------------------------ parsing


def error_of(stderr: str) -> str | None:
    """The engine's one-line error, without its prefix."""
    for line in reversed(stderr.splitlines()):
        if line.startswith("nbperf: error: "):
            return line[len("nbperf: error: "):].strip()
    return None


def _events(stdout: str, where: str) -> list[dict[str, Any]]:
    out = []
    lines = stdout.splitlines()
    for i, line in enumerate(lines):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            d = json.loads(line)
        except ValueError:
            if i == len(lines) - 1:
                continue           # the last line, cut by a kill
            raise ToolError(f"nbperf output line {i + 1} is not JSON: {line[:80]!r}", where=where) from None
        if not isinstance(d, dict) or "event" not in d:
            raise ToolError(f"nbperf output line {i + 1} has no event: {line[:80]!r}", where=where)
        out.append(d)
    return out


def _tcp(d: dict[str, Any] | None) -> TcpInfo | None:
    if not d:
        return None
    return TcpInfo(int(d["total_retrans"]), int(d["retrans"]) if "retrans" in d else None, int(d["rtt_us"]),
                   int(d["rttvar_us"]), int(d["snd_cwnd"]), int(d["snd_mss"]), int(d["delivery_rate"]),
                   _opt_int(d.get("kernel_rx_bytes")))


def _opt_int(v: Any) -> int | None:
    return None if v is None else int(v)


def _opt_float(v: Any) -> float | None:
    return None if v is None else float(v)


def _sample(d: dict[str, Any]) -> Sample:
    u = d.get("udp")
    udp = UdpInterval(int(u["tx_packets"]), int(u["rx_packets"]), int(u["lost"]), int(u["out_of_order"]),
                      float(u["jitter_us"])) if u else None
    return Sample(d["side"], d["test"], d["session"], int(d["conn"]), int(d["thread"]), float(d["t0"]),
                  float(d["t1"]), int(d["tx_bytes"]), int(d["rx_bytes"]), _tcp(d.get("tcp")), udp)


def _thread(d: dict[str, Any], side: Side) -> ThreadCpu:
    return ThreadCpu(side, int(d["thread"]), int(d["cpu"]), float(d.get("t", 0.0)), float(d["utime"]),
                     float(d["stime"]), int(d.get("conns", 0)))


def _conn_end(d: dict[str, Any]) -> ConnEnd:
    z, u = d.get("zerocopy"), d.get("udp")
    zc = ZeroCopy(int(z["sends"]), int(z["completed"]), int(z["copied"])) if z else None
    udp = UdpTotals(int(u["tx_packets"]), int(u["rx_packets"]), _opt_int(u["peer_tx_packets"]), _opt_int(u["lost"]),
                    int(u["out_of_order"]), float(u["jitter_us"]), int(u["bad"])) if u else None
    return ConnEnd(d["side"], d["test"], d["session"], int(d["conn"]), int(d["thread"]), d["peer"], d["status"],
                   d["error"], float(d["start"]), _opt_float(d["first_tx"]), _opt_float(d["first_rx"]),
                   _opt_float(d["end"]), int(d["tx_bytes"]), int(d["rx_bytes"]), _tcp(d.get("tcp")), zc, udp)


def _fail(what: str, stderr: str, where: str, fallback: str) -> ToolError:
    msg = error_of(stderr)
    return ToolError(f"nbperf {what}: {msg}" if msg else f"nbperf {what} {fallback}", where=where,
                     hint=None if msg else "see the process's stderr; was it killed?")


def parse_client(stdout: str, stderr: str = "", where: str = "") -> ClientRun:
    """A client's output.  Raises ToolError unless the client ended ``ok``
    (its error line is the message): a failed test's bytes are not results."""
    try:
        ev = _events(stdout, where)
        ready = next((d for d in ev if d["event"] == "ready"), None)
        end = next((d for d in ev if d["event"] == "end"), None)
        if ready is None or end is None or end["status"] != "ok" or error_of(stderr):
            raise _fail("client", stderr, where,
                        "printed no result" if ready is None or end is None else f"ended {end['status']}")
        threads = tuple(_thread(t, "client") for t in end["threads"])
        summary = ClientSummary(
            float(end["t"]), end["status"], end["error"], int(end["tx_bytes"]), int(end["rx_bytes"]),
            _opt_int(end["peer_tx_bytes"]), _opt_int(end["peer_rx_bytes"]), _opt_float(end["first_tx_min"]),
            _opt_float(end["first_tx_max"]), _opt_float(end["first_rx_min"]), _opt_float(end["first_rx_max"]),
            _opt_float(end["start_late_max"]), _opt_float(end["start_skew"]), str(end["rt_start"]), threads,
            float(end["process"]["utime"]), float(end["process"]["stime"]))
        run = ClientRun(
            ready["version"], ready["test"], ready["session"], float(ready["t"]), float(ready["start"]),
            float(ready["duration"]), float(ready["interval"]), float(ready["grace"]), ready["proto"],
            ready["dir"], int(ready["io"]), int(ready["conns"]), int(ready["threads"]),
            tuple(int(c) for c in ready["cpus"]), ready["server"], int(ready["port"]), ready["send"],
            ready["recv"], int(ready["rate"]), int(ready["fd_limit"]), float(ready["clock_offset"]),
            float(ready["clock_rtt"]),
            tuple(_sample(d) for d in ev if d["event"] == "interval"),
            tuple(_thread(d, "client") for d in ev if d["event"] == "thread"),
            tuple(_conn_end(d) for d in ev if d["event"] == "conn_end"), summary)
    except (KeyError, TypeError, ValueError) as e:
        raise ToolError(f"nbperf client output lacks or garbles a field: {e!r}", where=where,
                        hint="is this nbperf 1.x output?") from None
    if len(run.ends) != run.conns or any(c.status != "ok" for c in run.ends):
        raise ToolError(f"nbperf client ended ok but reported {len(run.ends)} of {run.conns} connections ok",
                        where=where)
    return run


def parse_server(stdout: str, stderr: str = "", where: str = "") -> ServerRun:
    """A server's output as it is, cut or failed (its ``status`` and the
    sessions' say so): sessions are judged one by one, see
    :func:`check_session`.  Raises ToolError only when it never listened."""
    try:
        ev = _events(stdout, where)
        lis = next((d for d in ev if d["event"] == "listening"), None)
        if lis is None:
            raise _fail("server", stderr, where, "never listened")
        end = next((d for d in ev if d["event"] == "end"), None)
        starts = [d for d in ev if d["event"] == "session_start"]
        finals = {d["session"]: d for d in ev if d["event"] == "session_end"}
        sessions = []
        for s in starts:
            f = finals.get(s["session"], {})
            sessions.append(ServerSession(
                s["test"], s["session"], s["peer"], float(s["start"]), float(s["duration"]), s["proto"], s["dir"],
                int(s["io"]), int(s["conns"]), f.get("status"), f.get("error", ""), int(f.get("connected", 0)),
                int(f.get("tx_bytes", 0)), int(f.get("rx_bytes", 0)), _opt_int(f.get("client_tx_bytes")),
                _opt_int(f.get("client_rx_bytes"))))
        return ServerRun(
            lis["version"], float(lis["t"]), lis["address"], int(lis["port"]), int(lis["threads"]),
            tuple(int(c) for c in lis["cpus"]), float(lis["until"]), int(lis["fd_limit"]), tuple(sessions),
            tuple(_sample(d) for d in ev if d["event"] == "interval"),
            tuple(_thread(d, "server") for d in ev if d["event"] == "thread"),
            tuple(_conn_end(d) for d in ev if d["event"] == "conn_end"),
            tuple(Reject(float(d["t"]), d["peer"], d["reason"]) for d in ev if d["event"] == "reject"),
            end["status"] if end else None, (end or {}).get("error", "") or (error_of(stderr) or ""),
            _opt_float(end["process"]["utime"]) if end else None, _opt_float(end["process"]["stime"]) if end else None)
    except (KeyError, TypeError, ValueError) as e:
        raise ToolError(f"nbperf server output lacks or garbles a field: {e!r}", where=where,
                        hint="is this nbperf 1.x output?") from None


def check_session(server: ServerRun, session: str, where: str = "") -> ServerSession:
    """The server's view of one client's test, which must have ended ok."""
    s = server.session(session)
    if s.status != "ok":
        why = s.error or server.error or "the server's output ends before the session did"
        raise ToolError(f"nbperf server: test {s.test} from {s.peer}: {why}", where=where)
    return s


def receiver_samples(client: ClientRun, server: ServerRun) -> tuple[Sample, ...]:
    """The truth for one client's test: the receiving end's samples of each
    direction -- the server's for tx, the client's for rx, both for bidir --
    each with its payload bytes in ``rx_bytes``."""
    check_session(server, client.session)
    out: list[Sample] = []
    if client.direction in ("tx", "bidir"):
        out += [s for s in server.samples if s.session == client.session]
    if client.direction in ("rx", "bidir"):
        out += list(client.samples)
    return tuple(sorted(out, key=lambda s: (s.t0, s.side, s.conn)))


def start_skew(clients: Sequence[ClientRun], server: ServerRun | None = None) -> StartSkew:
    """The achieved start over several clients of one point (same ``start``):
    the first sends of every connection -- the clients' for tx/bidir, the
    server's (needs ``server``) for rx."""
    if not clients:
        raise ToolError("no clients to compare starts of")
    starts = {c.start for c in clients}
    if len(starts) != 1:
        raise ToolError(f"the clients were given different start times: {sorted(starts)}")
    firsts: list[float] = []
    for c in clients:
        if c.direction == "rx":
            if server is None:
                raise ToolError("rx clients send nothing: the server's output is needed for their start")
            firsts += [e.first_tx for e in server.ends if e.session == c.session and e.first_tx is not None]
        else:
            firsts += [e.first_tx for e in c.ends if e.first_tx is not None]
    if not firsts:
        raise ToolError("no connection sent anything: there is no achieved start")
    return StartSkew(starts.pop(), min(firsts), max(firsts))
