"""iperf 2 as an engine of the TCP study (the iperf family: :mod:`.pairs`).

iperf 2 prints CSV with wall-clock stamps (UTC), so its intervals need no
anchor; versions that stamp an interval's end rather than its start are
moved back by one interval.  The receiver side of a forward flow is in the
server's CSV, so the servers are read too; a server is stopped once every
flow it serves has printed its summary.
"""

from __future__ import annotations

from typing import Any

from ....hosts.transport import Process, host_clock_offset, read_output
from ....records import Sample, TrialSpec
from ....run import iperf
from ....run.iperf import ProcSlot
from ....tools import iperf2
from .pairs import IperfPairs, TcpContext, Totals


class Iperf2(IperfPairs):
    name, binary, raw_tool = "iperf2", "iperf", "iperf2"

    def server_argv(self, ctx: TcpContext, slot: ProcSlot, io: int) -> list[str]:
        s = ctx.study
        return iperf2.server_argv(port=slot.port, interval=s.interval, io_size=io,
                                  lifetime=iperf2.lifetime(s.duration, s.omit, s.timeout_margin), window=s.window)

    def client_argv(self, ctx: TcpContext, slot: ProcSlot, io: int, mode: str) -> list[str]:
        s = ctx.study
        return iperf2.client_argv(target=ctx.addresses[slot.client], port=slot.port, duration=s.duration,
                                  omit=s.omit, interval=s.interval, io_size=io, streams=slot.streams, mode=mode,
                                  no_delay=s.no_delay, window=s.window, congestion=s.congestion)

    def parse_client(self, ctx: TcpContext, spec: TrialSpec, slot: ProcSlot, proc: Process,
                     stamps: dict[str, float | None], ends: dict[str, float | None], totals: Totals,
                     meta: dict[str, Any]) -> list[Sample]:
        s, lag = ctx.study, iperf.stamp_lag(ctx.tool, ctx.study.interval)
        text = read_output(proc.stdout_path)
        key = f"{slot.client}:{slot.port}"
        iperf.check_iperf2(text, proc, key, ctx.server)
        rep2 = iperf2.parse(text, role="client", omit=s.omit, server_port=slot.port, interval=s.interval,
                            stamp_lag=lag + host_clock_offset(proc), stamps_utc=True)
        totals[key] = dict(rep2.totals)
        iperf.place_iperf2(rep2, key, ends, meta)
        return iperf.flow_samples(spec.trial_id, slot.client, slot.port, None, rep2.intervals)

    def parse_server(self, ctx: TcpContext, spec: TrialSpec, slot: ProcSlot, proc: Process, totals: Totals,
                     meta: dict[str, Any]) -> list[Sample]:
        """The receiver side of the fwd flow lives in the server's CSV."""
        key = f"{slot.client}:{slot.port}"
        rep2 = iperf2.parse(read_output(proc.stdout_path), role="server", omit=ctx.study.omit,
                            server_port=slot.port, interval=ctx.study.interval,
                            stamp_lag=iperf.stamp_lag(ctx.tool, ctx.study.interval) + host_clock_offset(proc),
                            stamps_utc=True)
        for k, v in rep2.totals.items():
            totals.setdefault(key, {}).setdefault(k, v)
        return iperf.flow_samples(spec.trial_id, slot.client, slot.port, None, rep2.intervals)
