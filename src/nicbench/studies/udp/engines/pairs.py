"""The iperf family in the UDP study: what iperf3 and iperf 2 run the same way.

Engine servers on the client hosts, engine clients released together from
the study server (:func:`nicbench.run.iperf.drive_pairs` inside a
:class:`nicbench.run.point.Point`), the receivers' counts parsed.  An engine
of the family says its argv, its feature checks, how its servers end and how
its outputs are read.

Measurement rules (see also the runner's):
- intervals are placed on the wall clock as in the TCP study
  (:mod:`nicbench.run.iperf`), so the analysis can cut one shared window;
- a pair lost mid-point (its client hung at the time limit, its engine
  server killed or gone, its output unusable) makes the point partial: the
  other pairs' data is kept and the lost pair named
  (:func:`nicbench.run.point.pair_fate`);
- a receiver that counted nothing fails the point with that reason, never
  "0 % loss of 0 datagrams" (:func:`..measure.check_received`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Literal

from ....core.errors import PreflightError, ToolError
from ....hosts.transport import Process, Transport
from ....plan.model import Plan
from ....plan.studies.udp import UdpStudy
from ....records import Sample, TrialSpec
from ....run import iperf
from ....run.iperf import MODE, ProcSlot, Slots, layout
from ....run.kit import PointEnv
from ....run.point import Point, kept, pair_fate, read_pairs
from ....run.preflight import reach_problems
from ....run.procnet import bound_udp
from ....tools.base import ToolInfo
from ..measure import Measured, Tally, UdpContext, check_received, clients_of, fragment_warnings, prelude

Tallies = dict[tuple[str, str], Tally]


class IperfPairs(ABC):
    """An engine of the iperf family (see the module's docstring)."""

    name: ClassVar[str]          # the plan's engine
    tools: ClassVar[tuple[str, ...]]
    raw_tool: ClassVar[str]      # the tool named on its raw outputs
    label: ClassVar[str]         # the engine in messages
    ready_proto: ClassVar[Literal["tcp", "udp"]]   # what a server listening on its port means

    # -- what each engine says ---------------------------------------------
    def features(self, s: UdpStudy, server: str, tool: ToolInfo, problems: list[str], warnings: list[str]) -> None:
        """The engine's own checks of its version's features."""
        return None

    def busy(self, t: Transport) -> set[int]:
        """The ports on a client host its servers cannot take."""
        return busy_udp(t)

    @abstractmethod
    def server_argv(self, ctx: UdpContext, slot: ProcSlot, size: int) -> list[str]: ...

    @abstractmethod
    def client_argv(self, ctx: UdpContext, slot: ProcSlot, size: int, mode: str,
                    per_stream: float | None) -> list[str]: ...

    def after_release(self, ctx: UdpContext, servers: Slots) -> None:
        """A check once the clients run (none by default)."""
        return None

    def before_stop(self, servers: Slots, lost: dict[str, str]) -> None:
        """After the clients, before the servers are stopped (none by default)."""
        return None

    def never_started(self, ctx: UdpContext, slot: ProcSlot, proc: Process, limit: float) -> ToolError | None:
        """Why a client stopped at its time limit never ran its test, where its output tells."""
        return None

    @abstractmethod
    def parse_client(self, ctx: UdpContext, spec: TrialSpec, slot: ProcSlot, proc: Process,
                     stamps: dict[str, float | None], ends: dict[str, float | None], meta: dict[str, Any],
                     lag: float, tallies: Tallies) -> list[Sample]:
        """One engine client's samples, its counts into ``tallies``."""

    def parse_server(self, ctx: UdpContext, spec: TrialSpec, slot: ProcSlot, proc: Process,
                     meta: dict[str, Any], lag: float, tallies: Tallies) -> list[Sample]:
        """An engine server's samples where its output holds the receiver's (none by default)."""
        return []

    # -- the same for every engine of the family ---------------------------
    def preflight(self, plan: Plan, transports: dict[str, Transport], addresses: dict[str, str],
                  mtu: int) -> tuple[UdpContext, list[str]]:
        """Every host at once: the engine installed, the clients reachable, the
        engine ports free, open-files limits for the most streams."""
        s = plan.study
        assert isinstance(s, UdpStudy)
        server, clients = plan.server, list(plan.clients)
        problems: list[str] = []
        warnings: list[str] = []
        tool = iperf.detect_everywhere(s.engine, [server, *clients], transports, problems,
                                       iperf.version_floors(s.engine, s.directions)).get(server)
        problems += reach_problems(transports[server], {c: addresses[c] for c in clients})
        cap = iperf.stream_cap(s.engine, None)
        for c in clients:
            wanted = {slot.port for n in s.streams for slot in layout(n, [c], "client", cap, s.port_base)}
            taken = sorted(wanted & self.busy(transports[c]))
            if taken:
                problems.append(f"{c}: port(s) {', '.join(map(str, taken))} already in use")
        problems += iperf.nofile_problems(s.engine, [slot for n in s.streams for slot in layout(
            n, clients, "client", cap, s.port_base)], server, transports, "bidir" in s.directions)
        if tool is not None:
            self.features(s, server, tool, problems, warnings)
        warnings += fragment_warnings(s, mtu)
        if problems:
            raise PreflightError("; ".join(problems), hint="fix every item listed, then run again")
        assert tool is not None
        return UdpContext(s, server, clients, dict(transports), addresses, tool, mtu, plan.link.speed,
                          plan.link.client_speed), warnings

    def measure(self, ctx: UdpContext, env: PointEnv, spec: TrialSpec, raw_dir: Path,
                rate: float | None) -> Measured:
        """One measurement at ``rate`` bit/s per client (None: unpaced)."""
        s, p = ctx.study, spec.params
        streams, size = int(p["streams"]), int(p["datagram_size"])
        slots = layout(streams, clients_of(ctx, spec), "client", iperf.stream_cap(s.engine, None), s.port_base)
        per_stream = None if rate is None else rate / streams
        mode = MODE[str(p["direction"])]
        pt = Point(spec, env, raw_dir, self.raw_tool, nominal_s=s.omit + s.duration)  # prelude: overhead
        meta = pt.meta
        meta.update(prelude(ctx, spec, rate, slots))
        servers: list[tuple[ProcSlot, Process]] = []
        clis: list[tuple[ProcSlot, Process]] = []
        limit = s.omit + s.duration + s.timeout_margin
        with pt:
            iperf.drive_pairs(pt, ctx.server, ctx.transports, slots, servers, clis,
                              server_argv=lambda sl: self.server_argv(ctx, sl, size),
                              client_argv=lambda sl: self.client_argv(ctx, sl, size, mode, per_stream),
                              proto=self.ready_proto, interval=s.interval, limit=limit,
                              why_hung=lambda sl, _: self._hung(ctx, sl, clis, limit),
                              after_release=lambda: self.after_release(ctx, servers))
            self.before_stop(servers, pt.lost)      # a receiving server gone before the end
            iperf.stop_servers(self.name, servers, mode, s.interval, meta)
        status, error = pt.status, pt.error
        stamps, ends = iperf.gate_stamps(clis, meta)    # what the tools wrote (kept after a failure too)
        tallies: Tallies = {}
        samples: list[Sample] = []
        nothing = None
        if status != "interrupted":
            samples = self._parse_all(ctx, spec, clis, servers, stamps, ends, meta, tallies, pt.lost)
            if status == "ok":
                kept = [sl for sl in slots if f"{sl.client}:{sl.port}" not in pt.lost]
                nothing = check_received(ctx, str(p["direction"]), kept, tallies, pt.counters, size)
                if nothing is not None:
                    status, error = "failed", nothing
            status, error = pair_fate(status, error, pt.lost, len(clis), meta)
        meta["start_skew_s"] = iperf.start_skew(meta)
        out = pt.outcome(status, error, samples)
        return Measured(out.record, out.samples, out.raws, tallies, nothing)

    def _hung(self, ctx: UdpContext, slot: ProcSlot, clis: Slots, limit: float) -> ToolError:
        """Why an engine client still runs at its time limit.  Every client
        still running is stopped first (SIGTERM: iperf3 writes its report)."""
        for _, proc in clis:
            if proc.poll() is None:
                proc.stop(1.0)
        key = f"{slot.client}:{slot.port}"
        why = self.never_started(ctx, slot, clis[[sl for sl, _ in clis].index(slot)][1], limit)
        return why or ToolError(
            f"engine client to {key} still running after {limit:g}s (duration + omit + timeout_margin)",
            where=ctx.server, hint="the path may be stalled; raise study.timeout_margin if the host is slow")

    def _parse_all(self, ctx: UdpContext, spec: TrialSpec, clis: Slots, servers: Slots,
                   stamps: dict[str, float | None], ends: dict[str, float | None], meta: dict[str, Any],
                   tallies: Tallies, lost: dict[str, str]) -> list[Sample]:
        """Every pair's samples and counts; a pair whose output cannot be used goes
        into ``lost`` with why (the others are still read), and its samples and
        counts stay out: they would be part of an interval of an unknown span."""
        meta["test_starts"], meta["anchors"], meta["udp_totals"], meta["socket_buffers"] = {}, {}, {}, {}
        lag = iperf.stamp_lag(ctx.tool, ctx.study.interval)
        if lag:
            meta["iperf2_stamp_lag_s"] = lag
        samples = read_pairs(clis, lost, self.label, lambda sl, p: self.parse_client(
            ctx, spec, sl, p, stamps, ends, meta, lag, tallies))
        samples += read_pairs(servers, lost, self.label, lambda sl, p: self.parse_server(
            ctx, spec, sl, p, meta, lag, tallies))
        for k in [k for k in tallies if k[0] in lost]:
            del tallies[k]
        return kept(samples, lost)


def busy_udp(t: Transport) -> set[int]:
    """UDP ports an unconnected socket is bound to (a Linux client host: a
    FreeBSD one is refused before, run.preflight.os_problems)."""
    busy: set[int] = set()
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            busy |= set(bound_udp(t.read_text(table)))
        except OSError:
            pass
    return busy
