"""nbperf as an engine of the UDP study.

One client process per client host on the study server drives the point's
streams, each a flow paced at the client's rate / streams (None: unpaced),
all started at one absolute time (:func:`nicbench.run.nbperf.drive`).  The
receivers' intervals are the truth; a pair that failed, hung or was killed is
lost and the point partial, as with the iperf engines.
"""

from __future__ import annotations

from pathlib import Path

from ....core.errors import PreflightError, ToolError
from ....hosts.transport import Transport
from ....plan.model import Plan
from ....plan.studies.udp import UdpStudy
from ....records import Sample, TrialSpec
from ....run import nbperf as nbkit
from ....run.iperf import ProcSlot
from ....run.kit import PointEnv
from ....run.point import Point, pair_fate
from ....run.preflight import reach_problems
from ....tools import nbperf
from ..measure import (
    Measured,
    Tally,
    UdpContext,
    check_received,
    clients_of,
    fragment_warnings,
    prelude,
    tally,
    udp_samples,
)


class Nbperf:
    tools: tuple[str, ...] = ()          # found by run.nbperf, not on PATH

    def preflight(self, plan: Plan, transports: dict[str, Transport], addresses: dict[str, str],
                  mtu: int) -> tuple[UdpContext, list[str]]:
        """nbperf on every host, the clients reachable, its TCP port free on the
        client hosts (its UDP sockets take ephemeral ports), open-files limits
        for the most streams (two descriptors a stream: its UDP socket and TCP
        connection)."""
        s = plan.study
        assert isinstance(s, UdpStudy)
        server, clients = plan.server, list(plan.clients)
        problems: list[str] = []
        exes, tool = nbkit.find_engines([server, *clients], transports, problems)
        problems += reach_problems(transports[server], {c: addresses[c] for c in clients})
        most = max(s.streams)
        problems += nbkit.port_and_fd_problems(server, transports, s.port_base, dict.fromkeys(clients, most),
                                             most, fds_per_conn=2)
        if problems:
            raise PreflightError("; ".join(problems), hint="fix every item listed, then run again")
        assert tool is not None
        return (UdpContext(s, server, clients, dict(transports), addresses, tool, mtu, plan.link.speed,
                           plan.link.client_speed, exes), fragment_warnings(s, mtu))

    def measure(self, ctx: UdpContext, env: PointEnv, spec: TrialSpec, raw_dir: Path,
                rate: float | None) -> Measured:
        s, p = ctx.study, spec.params
        streams, size = int(p["streams"]), int(p["datagram_size"])
        slots = [ProcSlot(c, s.port_base, streams) for c in clients_of(ctx, spec)]
        pt = Point(spec, env, raw_dir, "nbperf", nominal_s=s.omit + s.duration)  # prelude: overhead
        meta = pt.meta
        meta.update(prelude(ctx, spec, rate, slots))
        seconds = s.omit + s.duration
        grace = max(2.0, s.timeout_margin / 2)
        ps = [nbkit.Pair(sl.client, sl.port, sl.streams) for sl in slots]

        def argv_of(pair: nbkit.Pair, on_server: float) -> list[str]:
            return nbperf.client_argv(
                ctx.exes[ctx.server], server=ctx.addresses[pair.client], port=pair.port, start=on_server,
                duration=seconds, conns=pair.conns, direction=nbkit.DIRECTION[str(p["direction"])],
                proto="udp", io_size=size, interval=s.interval, grace=grace, sndbuf=s.window, rcvbuf=s.window,
                rate_bps=meta["rate_per_stream_bps"], test=spec.trial_id)

        d = nbkit.drive(pt, ctx.nbperf, ps, argv_of, seconds=seconds, grace=grace, interval=s.interval,
                      timeout_margin=s.timeout_margin)
        status, error = pt.status, pt.error
        tallies: dict[tuple[str, str], Tally] = {}
        samples: list[Sample] = []
        nothing = None
        if status != "interrupted":
            meta["udp_totals"] = {}

            def udp_of(pair: nbkit.Pair, cr: nbperf.ClientRun, sr: nbperf.ServerRun) -> list[Sample]:
                if cr.proto != "udp":
                    raise ToolError(f"nbperf to {pair.key} ran a {cr.proto} test, not udp", where=ctx.server)
                ivs = nbkit.udp_intervals(cr, sr, s.omit, where=pair.client)
                tally(tallies, pair.key, ivs)
                meta["udp_totals"][pair.key] = nbkit.udp_totals(cr, sr)
                return udp_samples(spec.trial_id, pair.client, pair.port, None, ivs)

            samples = nbkit.parse_pairs(ctx.nbperf, d, meta, udp_of)
            if status == "ok":                  # the lost pairs are named below; the others must have received
                kept = [sl for sl in slots if f"{sl.client}:{sl.port}" not in pt.lost]
                nothing = check_received(ctx, str(p["direction"]), kept, tallies, pt.counters, size)
                if nothing is not None:
                    status, error = "failed", nothing
            # a lost pair's counts stay out, the others' are kept: a partial point, as with the iperf engines
            status, error = pair_fate(status, error, pt.lost, len(slots), meta)
        out = pt.outcome(status, error, samples)
        return Measured(out.record, out.samples, out.raws, tallies, nothing)
