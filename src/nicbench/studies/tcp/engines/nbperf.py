"""nbperf as an engine of the TCP study: preflight, one point, its samples.

The processes are driven by the kit (:func:`nicbench.run.nbperf.drive`: one
server per client host, one client per client host on the study server, all
given one absolute start); this file says what is the TCP study's: the pairs
of a point (``connections_per`` as the iperf engines), the client's argv
(send and receive modes from ``zerocopy``/``skip_rx_copy``), and each pair's
``tcp.bytes``/``tcp.retransmits`` samples (receivers' bytes as the kernel
counted them where every interval has them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ....core.errors import PreflightError
from ....hosts.transport import Transport
from ....plan.studies.tcp import TcpStudy
from ....records import Sample, TrialSpec, make_tags
from ....run.kit import PointEnv, even_shares
from ....run.nbperf import (
    DIRECTION,
    FLOWS,
    NbperfHosts,
    Pair,
    drive,
    find_engines,
    flow_ends,
    parse_pairs,
    per_interval,
    port_and_fd_problems,
    receiver_counts,
)
from ....run.point import Point, pair_fate, silent_pairs
from ....run.preflight import reach_problems
from ....run.study import Preflight, TrialOutcome
from ....tools import nbperf
from ....tools.base import ToolInfo
from .base import TcpHosts


def pairs(s: TcpStudy, clients: Sequence[str], connections: int) -> list[Pair]:
    """One pair per client host that gets connections (``connections_per`` as the iperf engines)."""
    share = [connections] * len(clients) if s.connections_per == "client" else even_shares(connections, len(clients))
    return [Pair(c, s.port_base, n) for c, n in zip(clients, share, strict=True) if n > 0]


@dataclass(frozen=True)
class NbperfContext:
    """What the TCP study's preflight decided, for every point."""

    study: TcpStudy
    server: str
    clients: list[str]
    transports: dict[str, Transport]
    addresses: dict[str, str]
    exes: dict[str, str]                 # host -> nbperf there
    tool: ToolInfo

    @property
    def hosts(self) -> NbperfHosts:
        return NbperfHosts(self.server, self.clients, self.transports, self.addresses, self.exes, self.tool)

    @property
    def send(self) -> nbperf.SendMode:
        """The study's ``zerocopy`` is iperf3's -Z, which is sendfile: the same here."""
        return "sendfile" if self.study.zerocopy else "send"

    @property
    def recv(self) -> nbperf.RecvMode:
        """``skip_rx_copy`` (true or "auto"): MSG_TRUNC, iperf3 >= 3.16's --skip-rx-copy."""
        return "trunc" if self.study.skip_rx_copy else "copy"


def preflight(s: TcpStudy, server: str, clients: list[str], transports: dict[str, Transport],
              addresses: dict[str, str]) -> tuple[NbperfContext, Preflight]:
    """nbperf on every host (its version), the paths, the port, open-files
    limits for the largest point; every problem at once in a PreflightError."""
    problems: list[str] = []
    exes, tool = find_engines([server, *clients], transports, problems)
    problems += reach_problems(transports[server], {c: addresses[c] for c in clients})
    largest = pairs(s, clients, max(s.connections))
    problems += port_and_fd_problems(server, transports, s.port_base,
                                     {c: max((p.conns for p in largest if p.client == c), default=0) for c in clients},
                                     max(p.conns for p in largest))
    if problems:
        raise PreflightError("; ".join(problems), hint="fix every item listed, then run again")
    assert tool is not None
    ctx = NbperfContext(s, server, list(clients), dict(transports), dict(addresses), exes, tool)
    pre = Preflight(tools=("ethtool",), meta={
        "engine": "nbperf", "engine_version": tool.version_str, "engine_features": [],
        "skip_rx_copy_used": ctx.recv == "trunc", "nbperf_send": ctx.send, "nbperf_recv": ctx.recv, "trim": s.trim})
    return ctx, pre


def pair_samples(trial_id: str, host: str, port: int, client: nbperf.ClientRun, server: nbperf.ServerRun,
                 omit: float, counted: dict[str, bool] | None = None) -> list[Sample]:
    """``tcp.bytes`` (and the senders' ``tcp.retransmits``) of one pair, one
    sample per interval, direction and side, tagged as the iperf engines'
    are (host = the client host, proc = the port).  Intervals that start
    within the warm-up (``omit`` s after the start) are tagged omitted.
    The server's stamps are moved onto the client's clock by the offset the
    client measured (zero in the lab: one clock)."""
    nbperf.check_session(server, client.session, where=host)
    out: list[Sample] = []
    for flow in FLOWS[client.direction]:
        for side, (rows, sh) in flow_ends(client, server, flow).items():
            if side == "sender":
                count: Callable[[nbperf.Sample], int] = lambda r: r.tx_bytes  # noqa: E731
            else:
                count, by_kernel = receiver_counts(rows)
                if counted is not None:
                    counted[flow] = by_kernel
            for t0, t1, b, retr, n in per_interval(rows, count, client.start, client.interval, sh):
                nominal = client.start + round((t0 - client.start) / client.interval) * client.interval
                tags = make_tags(host=host, proc=port, direction=flow, side=side,
                                 omitted=1 if nominal < client.start + omit - 1e-6 else 0, streams=n)
                out.append(Sample(trial_id, "tcp.bytes", float(b), "bytes", t0, t1, tags))
                if side == "sender" and retr is not None:
                    out.append(Sample(trial_id, "tcp.retransmits", float(retr), "count", t0, t1, tags))
    return out


def run_trial(ctx: NbperfContext, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
    """Run one TCP point; never raises for a point-level failure (it is recorded)."""
    s = ctx.study
    p = spec.params
    io = int(p["io_size"])
    ps = pairs(s, ctx.clients, int(p["connections"]))
    seconds = s.omit + s.duration
    grace = max(2.0, s.timeout_margin / 2)        # the drain of shaped links' socket buffers (README)
    meta: dict[str, Any] = {"layout": [{"client": x.client, "port": x.port, "streams": x.conns} for x in ps],
                            "engine": "nbperf", "server": ctx.server, "engine_version": ctx.tool.version_str,
                            "argv": {}, "send": ctx.send, "recv": ctx.recv}
    pt = Point(spec, env, raw_dir, "nbperf", meta, nominal_s=s.omit + s.duration)

    def argv_of(pair: Pair, on_server: float) -> list[str]:
        return nbperf.client_argv(
            ctx.exes[ctx.server], server=ctx.addresses[pair.client], port=pair.port, start=on_server,
            duration=seconds, conns=pair.conns, direction=DIRECTION[str(p["direction"])],
            io_size=io, interval=s.interval, grace=grace, sndbuf=s.window, rcvbuf=s.window,
            congestion=s.congestion, nodelay=s.no_delay, send=ctx.send, recv=ctx.recv, test=spec.trial_id)

    d = drive(pt, ctx.hosts, ps, argv_of, seconds=seconds, grace=grace, interval=s.interval,
              timeout_margin=s.timeout_margin)
    status, error = pt.status, pt.error
    samples: list[Sample] = []
    if status != "interrupted":
        def tcp_of(pair: Pair, cr: nbperf.ClientRun, sr: nbperf.ServerRun) -> list[Sample]:
            counted: dict[str, bool] = {}
            got = pair_samples(spec.trial_id, pair.client, pair.port, cr, sr, s.omit, counted)
            meta.setdefault("receiver_counted_by", {})[pair.key] = {
                d: "kernel (tcpi_bytes_received)" if k else "engine reads" for d, k in counted.items()}
            meta["totals"][pair.key] = {"tx_bytes": cr.summary.tx_bytes, "rx_bytes": cr.summary.rx_bytes,
                                        "peer_tx_bytes": cr.summary.peer_tx_bytes,
                                        "peer_rx_bytes": cr.summary.peer_rx_bytes}
            return got
        meta["totals"] = {}
        samples = silent_pairs(parse_pairs(ctx.hosts, d, meta, tcp_of), [pair.key for pair, _ in d.clis],
                               str(spec.params.get("direction")), pt.lost)
        status, error = pair_fate(status, error, pt.lost, len(d.clis), meta)
    return pt.outcome(status, error, samples)


class Nbperf:
    """The TCP study's nbperf engine (see the module's docstring)."""

    def __init__(self, h: TcpHosts):
        self.h = h
        self.ctx: NbperfContext | None = None

    def preflight(self) -> Preflight:
        h = self.h
        self.ctx, pre = preflight(h.study, h.server, h.clients, h.transports, h.addresses)
        return pre

    def trial(self, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
        assert self.ctx is not None, "preflight first"
        return run_trial(self.ctx, env, spec, raw_dir)
