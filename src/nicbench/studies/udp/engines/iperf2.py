"""iperf 2 as an engine of the UDP study (the iperf family: :mod:`.pairs`).

iperf 2 prints CSV with wall-clock stamps (UTC); the receiver of a forward
flow is its server, so the servers' CSV is read too, and a server that exited
before the point ended (it serves until its lifetime) loses its pair.  Every
stream a process ran must be in its receiver's reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ....core.errors import ToolError, tail
from ....hosts.transport import Process, host_clock_offset, read_output, tool_stderr
from ....records import Sample, TrialSpec
from ....run import iperf
from ....run.iperf import DIRECTION, ProcSlot, Slots
from ....tools import iperf2
from ....tools.base import FlowInterval
from ..measure import UdpContext, tally, udp_samples
from .pairs import IperfPairs, Tallies


class Iperf2(IperfPairs):
    name, tools, raw_tool, label, ready_proto = "iperf2", ("iperf",), "iperf2", "iperf 2", "udp"

    def server_argv(self, ctx: UdpContext, slot: ProcSlot, size: int) -> list[str]:
        s = ctx.study
        return iperf2.udp_server_argv(port=slot.port, interval=s.interval, size=size, window=s.window,
                                      lifetime=iperf2.lifetime(s.duration, s.omit, s.timeout_margin))

    def client_argv(self, ctx: UdpContext, slot: ProcSlot, size: int, mode: str,
                    per_stream: float | None) -> list[str]:
        s = ctx.study
        return iperf2.udp_client_argv(target=ctx.addresses[slot.client], port=slot.port, duration=s.duration,
                                      omit=s.omit, interval=s.interval, size=size, streams=slot.streams,
                                      mode=mode, rate_bps=per_stream, window=s.window)

    def before_stop(self, servers: Slots, lost: dict[str, str]) -> None:
        lost.update(dead_servers(servers, lost))

    def parse_client(self, ctx: UdpContext, spec: TrialSpec, slot: ProcSlot, proc: Process,
                     stamps: dict[str, float | None], ends: dict[str, float | None], meta: dict[str, Any],
                     lag: float, tallies: Tallies) -> list[Sample]:
        s = ctx.study
        key = f"{slot.client}:{slot.port}"
        text = read_output(proc.stdout_path)
        iperf.check_iperf2(text, proc, key, ctx.server)
        rep2 = iperf2.parse(text, role="client", omit=s.omit, server_port=slot.port, interval=s.interval,
                            stamp_lag=lag + host_clock_offset(proc), stamps_utc=True)
        all_streams_reported(rep2.intervals, slot, ctx.server, tool_stderr(proc.stderr_path))
        tally(tallies, key, rep2.intervals)
        meta["udp_totals"][key] = {k: list(v) for k, v in rep2.udp.items()}
        iperf.place_iperf2(rep2, key, ends, meta)
        return udp_samples(spec.trial_id, slot.client, slot.port, None, rep2.intervals)

    def parse_server(self, ctx: UdpContext, spec: TrialSpec, slot: ProcSlot, proc: Process,
                     meta: dict[str, Any], lag: float, tallies: Tallies) -> list[Sample]:
        """An iperf 2 server's samples and counts: the receiver of the fwd flow."""
        s = ctx.study
        key = f"{slot.client}:{slot.port}"
        rep2 = iperf2.parse(read_output(proc.stdout_path), role="server", omit=s.omit, server_port=slot.port,
                            interval=s.interval, stamp_lag=lag + host_clock_offset(proc), stamps_utc=True)
        all_streams_reported(rep2.intervals, slot, slot.client, tool_stderr(proc.stderr_path))
        tally(tallies, key, rep2.intervals)
        for k, v in rep2.udp.items():
            meta["udp_totals"].setdefault(key, {}).setdefault(k, list(v))
        return udp_samples(spec.trial_id, slot.client, slot.port, None, rep2.intervals)


def dead_servers(servers: Slots, lost: dict[str, str]) -> dict[str, str]:
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


def all_streams_reported(intervals: Sequence[FlowInterval], slot: ProcSlot, host: str, stderr: str) -> None:
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
