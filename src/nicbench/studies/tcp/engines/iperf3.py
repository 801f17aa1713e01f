"""iperf3 as an engine of the TCP study (the iperf family: :mod:`.pairs`).

Each client's ``-J`` report nests its server's (``--get-server-output``):
the receiver's bytes of tx points come from there.  Its intervals are
anchored at the client's exit stamp (:func:`nicbench.run.iperf.place_iperf3`).
"""

from __future__ import annotations

from typing import Any

from ....hosts.transport import Process
from ....records import Sample, TrialSpec
from ....run import iperf
from ....run.iperf import ProcSlot
from ....tools import iperf3
from ....tools.base import ToolInfo
from .pairs import IperfPairs, TcpContext, Totals


class Iperf3(IperfPairs):
    name, binary, raw_tool = "iperf3", "iperf3", "iperf3"

    def features(self, tool: ToolInfo, problems: list[str], warnings: list[str]) -> bool:
        s, server = self.h.study, self.h.server
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
        return skip

    def server_argv(self, ctx: TcpContext, slot: ProcSlot, io: int) -> list[str]:
        return iperf3.server_argv(slot.port, ctx.study.interval)

    def client_argv(self, ctx: TcpContext, slot: ProcSlot, io: int, mode: str) -> list[str]:
        s = ctx.study
        return iperf3.client_argv(ctx.tool, target=ctx.addresses[slot.client], port=slot.port, duration=s.duration,
                                  omit=s.omit, interval=s.interval, io_size=io, streams=slot.streams,
                                  mode=mode, zerocopy=s.zerocopy, no_delay=s.no_delay,
                                  skip_rx_copy=ctx.skip_rx_copy, window=s.window, congestion=s.congestion)

    def parse_client(self, ctx: TcpContext, spec: TrialSpec, slot: ProcSlot, proc: Process,
                     stamps: dict[str, float | None], ends: dict[str, float | None], totals: Totals,
                     meta: dict[str, Any]) -> list[Sample]:
        key = f"{slot.client}:{slot.port}"
        rep = iperf.iperf3_report(proc, key, ctx.server)
        anchor, peer_anchor = iperf.place_iperf3(rep, key, stamps, ends, meta, ctx.server)
        totals[key] = rep.totals
        return iperf.flow_samples(spec.trial_id, slot.client, slot.port, anchor, rep.intervals, peer_anchor)
