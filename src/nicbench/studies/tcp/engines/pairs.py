"""The iperf family in the TCP study: what iperf3 and iperf 2 run the same way.

Layout: the study server runs one engine client per (client host, port), each
client host one engine server per port (:func:`nicbench.run.iperf.layout`);
the clients are released by one barrier and the point's sequence is the
kit's (:func:`nicbench.run.iperf.drive_pairs` inside a
:class:`nicbench.run.point.Point`).  An engine of the family says its argv,
its feature checks and how its outputs are read.

Measurement rules:
- the receiver's bytes are the truth; the sender's are kept as well;
- every interval gets an absolute start: iperf2 reports wall-clock stamps;
  iperf3 intervals are anchored at the process's exit stamp minus its last
  interval's end (see :func:`nicbench.run.iperf.iperf3_anchor`), the exec
  stamp as a fallback;
- both the launch skew (exec stamps) and the start skew (estimated test
  starts) are recorded.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

from ....core.errors import ToolError
from ....hosts.transport import Process, Transport
from ....plan.studies.tcp import TcpStudy
from ....records import Sample, TrialSpec
from ....run import iperf
from ....run.iperf import MODE, ProcSlot, Slots, layout
from ....run.kit import PointEnv, stall_causes, stalled
from ....run.point import Point, kept, pair_fate, read_pairs, silent_pairs
from ....run.preflight import busy_ports, problems_found, reach_problems
from ....run.study import Preflight, TrialOutcome
from ....tools.base import ToolInfo
from .base import TcpHosts


@dataclass(frozen=True)
class TcpContext:
    """What an iperf engine's preflight decided, for every point."""

    study: TcpStudy
    server: str
    clients: list[str]
    transports: dict[str, Transport]
    addresses: dict[str, str]             # host -> test address
    tool: ToolInfo
    skip_rx_copy: bool = False


def stream_cap(s: TcpStudy) -> int:
    """Streams per engine process: the plan's, else the engine's own limit."""
    return iperf.stream_cap(s.engine, s.streams_per_process)


Totals = dict[str, dict[str, int]]


class IperfPairs(ABC):
    """An engine of the iperf family (see the module's docstring)."""

    name: ClassVar[str]          # the plan's engine
    binary: ClassVar[str]        # the program whose version the host facts record
    raw_tool: ClassVar[str]      # the tool named on its raw outputs

    def __init__(self, h: TcpHosts):
        self.h = h
        self.ctx: TcpContext | None = None

    @classmethod
    def prepared(cls, ctx: TcpContext) -> IperfPairs:
        """The engine as its preflight would have left it (``ctx``)."""
        e = cls(TcpHosts(ctx.study, ctx.server, list(ctx.clients), dict(ctx.transports), dict(ctx.addresses)))
        e.ctx = ctx
        return e

    # -- what each engine says ---------------------------------------------
    def features(self, tool: ToolInfo, problems: list[str], warnings: list[str]) -> bool:
        """The engine's own checks of its version's features (appended to
        ``problems``/``warnings``); True when the receivers skip the copy to
        user space."""
        return False

    @abstractmethod
    def server_argv(self, ctx: TcpContext, slot: ProcSlot, io: int) -> list[str]: ...

    @abstractmethod
    def client_argv(self, ctx: TcpContext, slot: ProcSlot, io: int, mode: str) -> list[str]: ...

    @abstractmethod
    def parse_client(self, ctx: TcpContext, spec: TrialSpec, slot: ProcSlot, proc: Process,
                     stamps: dict[str, float | None], ends: dict[str, float | None], totals: Totals,
                     meta: dict[str, Any]) -> list[Sample]:
        """One engine client's samples, placed on the wall clock."""

    def parse_server(self, ctx: TcpContext, spec: TrialSpec, slot: ProcSlot, proc: Process, totals: Totals,
                     meta: dict[str, Any]) -> list[Sample]:
        """An engine server's samples where its output holds some the client's does not (none by default)."""
        return []

    # -- the same for every engine of the family ---------------------------
    def preflight(self) -> Preflight:
        h, s = self.h, self.h.study
        problems: list[str] = []
        warnings: list[str] = []
        tool = iperf.detect_everywhere(s.engine, [h.server, *h.clients], h.transports, problems,
                                       iperf.version_floors(s.engine, s.directions)).get(h.server)
        problems += reach_problems(h.transports[h.server], {c: h.addresses[c] for c in h.clients})
        slots_of = [slot for n in s.connections
                    for slot in layout(n, h.clients, s.connections_per, stream_cap(s), s.port_base)]
        for c in h.clients:
            taken = sorted({slot.port for slot in slots_of if slot.client == c} & busy_ports(h.transports[c]))
            if taken:
                problems.append(f"{c}: port(s) {', '.join(map(str, taken))} already in use")
        problems += iperf.nofile_problems(s.engine, slots_of, h.server, h.transports, "bidir" in s.directions)
        skip = self.features(tool, problems, warnings) if tool is not None else False
        if problems:
            raise problems_found(problems, "tcp")
        assert tool is not None
        self.ctx = TcpContext(s, h.server, h.clients, dict(h.transports), h.addresses, tool, skip)
        return Preflight(tools=(self.binary, "ethtool"), warnings=tuple(warnings),
                         meta={"engine": s.engine, "engine_version": tool.version_str,
                               "engine_features": sorted(tool.features), "skip_rx_copy_used": skip, "trim": s.trim})

    def trial(self, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
        """Run one point; never raises for a point-level failure (it is recorded)."""
        ctx = self.ctx
        assert ctx is not None, "preflight first"
        s, p = ctx.study, spec.params
        slots = layout(int(p["connections"]), ctx.clients, s.connections_per, stream_cap(s), s.port_base)
        mode, io = MODE[str(p["direction"])], int(p["io_size"])
        meta: dict[str, Any] = {"layout": [vars(x) for x in slots], "engine": self.name, "server": ctx.server,
                                "engine_version": ctx.tool.version_str, "argv": {}}
        pt = Point(spec, env, raw_dir, self.raw_tool, meta, nominal_s=s.omit + s.duration)
        servers: list[tuple[ProcSlot, Process]] = []
        clis: list[tuple[ProcSlot, Process]] = []
        limit = s.omit + s.duration + s.timeout_margin
        with pt:
            iperf.drive_pairs(pt, ctx.server, ctx.transports, slots, servers, clis,
                              server_argv=lambda sl: self.server_argv(ctx, sl, io),
                              client_argv=lambda sl: self.client_argv(ctx, sl, io, mode), proto="tcp",
                              interval=s.interval, limit=limit,
                              why_hung=partial(self._hung, ctx, env, servers, limit))
            # the servers end: iperf3 -1 by itself, iperf 2's once they printed every summary
            iperf.stop_servers(self.name, servers, mode, s.interval, meta)
        status, error = pt.status, pt.error
        # what the tools wrote is parsed also after a failure: what parsed is kept
        stamps, ends = iperf.gate_stamps(clis, meta)
        totals: Totals = {}
        samples: list[Sample] = []
        if status != "interrupted":
            samples = self._parse_all(ctx, spec, clis, servers, stamps, ends, totals, meta, pt.lost)
            samples = silent_pairs(samples, [f"{sl.client}:{sl.port}" for sl, _ in clis], str(p["direction"]),
                                   pt.lost)
            status, error = pair_fate(status, error, pt.lost, len(clis), meta)
        meta["totals"] = totals
        meta["start_skew_s"] = iperf.start_skew(meta)
        return pt.outcome(status, error, samples)

    @staticmethod
    def _hung(ctx: TcpContext, env: PointEnv, servers: Slots, limit: float, slot: ProcSlot,
              proc: Process) -> ToolError:
        """Why an engine client still runs at its time limit, where known."""
        hosts = {x: ctx.transports[x] for x in (ctx.server, slot.client)}
        held = iperf.held_by_others(ctx.addresses.get(ctx.server), ctx.transports,
                                    [x for x in servers if x[0] == slot])
        pair = [proc, *(p for sl, p in servers if sl == slot)]
        return stalled(f"engine client to {slot.client}:{slot.port}", limit, ctx.server,
                       held + stall_causes(hosts, env.ifnames, pair),
                       "the path may be stalled; raise study.timeout_margin if the host is slow")

    def _parse_all(self, ctx: TcpContext, spec: TrialSpec, clis: Slots, servers: Slots,
                   stamps: dict[str, float | None], ends: dict[str, float | None], totals: Totals,
                   meta: dict[str, Any], lost: dict[str, str]) -> list[Sample]:
        """Every pair's samples; a pair whose output cannot be used goes into
        ``lost`` with why (the others are still read), its samples left out."""
        meta["test_starts"], meta["anchors"] = {}, {}
        lag = iperf.stamp_lag(ctx.tool, ctx.study.interval)
        if lag:
            meta["iperf2_stamp_lag_s"] = lag
        samples = read_pairs(clis, lost, "iperf", lambda sl, p: self.parse_client(
            ctx, spec, sl, p, stamps, ends, totals, meta))
        samples += read_pairs(servers, lost, self.name, lambda sl, p: self.parse_server(ctx, spec, sl, p, totals, meta),
                              label=lambda key: f"the {self.name} server on {key}")
        return kept(samples, lost)
