"""The packet-rate study (seed 003): a generator, a receiver, back-to-back ports.

Per point and port, the point's engine (:mod:`.engines`: nbgen, trafgen,
pkt-gen) is driven through one sequence: its receiver on every receiver
port started first and counting (nbgen's XDP counter, or pkt-gen rx); then
its generator behind the start barrier, sending for ``duration`` seconds and
stopping by itself; after a short drain the receivers are stopped and print
their last counts.  Sent and received frames are the engine's own counts;
the interface counters of both ends are sampled beside them for every
engine.  The sequence's kit (raw files, the guard, samplers, the record) is
:class:`nicbench.run.point.Point`; what is the engine's own is in its file.

With ``search = "ndr"`` a point is the no-drop-rate search: steps of the
same measurement at chosen rates (:mod:`nicbench.run.ratesearch`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...core.errors import NicbenchError, ToolError
from ...hosts.base import Hosts
from ...hosts.transport import Process
from ...plan.model import Plan
from ...records import RawOutput, Sample, TrialRecord, TrialSpec, make_tags
from ...run import ratesearch
from ...run.kit import PointEnv, PointSamplers, release_together
from ...run.point import Point
from ...run.study import Preflight, TrialOutcome
from ...sampling.sampler import NetTarget, child_pids, tool_procs
from ...tools import frames as fr
from ...tools import nbgen
from .analysis import packet_trial  # the search needs each step's loss: the one upward import (see ARCHITECTURE.md)
from .context import PacketContext, port_ips
from .engines import ENGINES
from .engines.engine import Engine, Ports, TxPort
from .engines.nbgen import xdp_attached
from .engines.pktgen import NETMAP as _NETMAP
from .engines.pktgen import netmap_problems
from .preflight import missing_caps, preflight

# the study's entry points, and what tests and scripts reach through this module as they did before
# the engines had files of their own (nbgen: the tool module, whose binary() a test replaces)
__all__ = ["PacketRunner", "generator_argv", "run_trial",
           "_NETMAP", "missing_caps", "nbgen", "netmap_problems", "preflight", "xdp_attached"]

DRAIN_S = 0.3            # after the generators end, before the receivers' last count


class PacketRunner:
    """The packet study as the session drives it (see ``run.study.StudyRunner``)."""

    kind = "packets"

    def __init__(self, plan: Plan, hosts: Hosts):
        self.plan = plan
        self.transports = hosts.transports()
        self.addresses = {h.name: h.ip for h in hosts.spec.hosts}
        self.ctx: PacketContext | None = None

    def preflight(self) -> Preflight:
        self.ctx, warnings = preflight(self.plan, self.transports, self.addresses)
        s, c, v = self.ctx.study, self.ctx, self.ctx.versions
        return Preflight(
            tools=tuple(t for e in s.engines if (t := ENGINES[e].tool)) + ("ethtool",), warnings=tuple(warnings),
            meta={"engine": " + ".join(s.engines), "engine_version": ", ".join(f"{k} {x}" for k, x in v.items()),
                  "versions": v, "engines": s.engines, "line_rate_bps": s.line_rate, "rate": s.rate,
                  "xdp_mode": s.xdp_mode, "generator": c.server, "receiver": c.receiver,
                  "generator_kernel": c.kernel, "trim": s.trim, "udp_port": s.udp_port,
                  "search": s.search, "loss_threshold": s.loss_threshold,
                  "shaping": "none: XDP transmit and trafgen's qdisc bypass go around tc; line_rate is nominal"})

    def start(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return []

    def trial(self, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
        assert self.ctx is not None, "preflight first"
        return TrialOutcome(*run_trial(self.ctx, env, spec, raw_dir))

    def stop(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return []


def generator_argv(engine: str, exe: str, dev: str, frames: list[bytes], *, duration: float, pin: list[int],
                   rate: float | None, frame_size: int, conf: str) -> tuple[list[str], str | None, list[int]]:
    """One port's generator of an engine sending nicbench's frames: argv,
    its config text (trafgen's; None for nbgen) and the CPUs its threads run
    on.  ``rate`` is per port."""
    return ENGINES[engine].generator(TxPort(dev, frames, duration, pin, rate, frame_size, conf, exe))


def _frames(ctx: PacketContext, port: int, ip: int, size: int, threads: int) -> list[bytes]:
    src, dst = port_ips(port, ip)
    return fr.thread_frames(threads, src_mac=ctx.macs[(ctx.server, port)], dst_mac=ctx.macs[(ctx.receiver, port)],
                            src_ip=src, dst_ip=dst, size=size, dport=ctx.study.udp_port)


def run_trial(ctx: PacketContext, env: PointEnv, spec: TrialSpec,
              raw_dir: Path) -> tuple[TrialRecord, list[Sample], list[RawOutput]]:
    """One point: a measurement at the study's rate (or as fast as the engine
    goes), or with ``search = "ndr"`` the no-drop-rate search."""
    if ctx.study.search == "ndr":
        return _ndr(ctx, env, spec, raw_dir)
    return _measure(ctx, env, spec, raw_dir, ctx.study.rate)


def _ndr(ctx: PacketContext, env: PointEnv, spec: TrialSpec,
         raw_dir: Path) -> tuple[TrialRecord, list[Sample], list[RawOutput]]:
    """The highest rate whose loss stays at or below ``loss_threshold``
    (RFC 2544's throughput; the search itself is :mod:`nicbench.run.ratesearch`).  The point
    keeps the samples of the best passing step; every step's rate and loss
    are in its meta.  A step's loss is worked out by the analysis' own pure
    function (a search needs its result to choose the next rate)."""
    s = ctx.study
    ports = int(spec.params["ports"])
    started = time.time()
    steps: list[ratesearch.Step] = []
    runs: list[tuple[TrialRecord, list[Sample]]] = []
    raws_all: list[RawOutput] = []
    rate: float | None = None
    while True:
        n = len(steps)
        rec, samples, raws = _measure(ctx, env, spec, raw_dir / f"step{n}", rate)
        raws_all += raws
        if rec.status != "ok":
            return rec, samples, raws_all     # a failed or interrupted step ends the point
        t = packet_trial(rec, samples, s.trim)
        if t.status != "ok" or not t.tx_pps or t.rx_pps is None:
            return TrialRecord(spec, "failed", started, time.time(), f"ndr step {n}: {t.error or 'nothing sent'}",
                               rec.meta), [], raws_all
        steps.append(ratesearch.judge(rate, t.tx_pps, t.rx_pps, t.loss, s.loss_threshold))
        runs.append((rec, samples))
        rate = ratesearch.next_rate(steps, units=ports, max_steps=s.search_steps)
        if rate is None:
            break
    search: dict[str, Any] = {"loss_threshold": s.loss_threshold,
                              "steps": [_step_dict(i, x) for i, x in enumerate(steps)]}
    k = ratesearch.best(steps)
    if k is None:
        tried = [x.rate for x in steps if x.rate]
        lowest = f"lowest tried {min(tried):.0f} frames/s per port" if tried else "only the unpaced step ran"
        why = f"no rate tried had loss <= {s.loss_threshold:.3%} ({lowest})"
        return TrialRecord(spec, "failed", started, time.time(), why, {"ndr": search}), [], raws_all
    rec, samples = runs[k]
    search["rate_per_port"] = steps[k].rate  # None: unpaced, the generator's own maximum
    return TrialRecord(spec, "ok", started, time.time(), None, {**rec.meta, "ndr": search}), samples, raws_all


def _step_dict(i: int, s: ratesearch.Step) -> dict[str, object]:
    """A step as the run stores it (rates per port in frames/s, all ports' pps)."""
    return {"step": i, "rate_per_port": s.rate, "tx_pps": s.sent, "rx_pps": s.received, "loss": s.loss,
            "passed": s.passed}


def _measure(
    ctx: PacketContext, env: PointEnv, spec: TrialSpec, raw_dir: Path, rate: float | None
) -> tuple[TrialRecord, list[Sample], list[RawOutput]]:
    """One measurement of a point at ``rate`` frames/s per port (None: as
    fast as the engine goes)."""
    s = ctx.study
    p = spec.params
    engine, ip, ports, threads, size = (
        ENGINES[str(p["engine"])],
        int(p["ip"]),
        int(p["ports"]),
        int(p["threads"]),
        int(p["frame_size"]),
    )
    gen_t = ctx.transports[ctx.server]
    meta: dict[str, Any] = {
        "engine": engine.name,
        "generator": ctx.server,
        "receiver": ctx.receiver,
        "argv": {},
        "ports": [],
        "rate_per_port": rate,
    }
    pt = Point(spec, env, raw_dir, engine.name, meta, nominal_s=s.duration, grace=1.0)
    rxs: Ports = []
    txs: Ports = []
    remote_confs: list[str] = []
    samples: list[Sample] = []
    cpus = ctx.cpus
    with pt:
        rxs += engine.receiver.start(pt, ctx, ports, threads)
        for i in range(ports):
            dev = ctx.dev(ctx.server, i)
            frames = _frames(ctx, i, ip, size, threads)
            src, dst = port_ips(i, ip)
            # every generator thread of the point on a CPU of its own while CPUs last
            pin = [cpus[(i * threads + k) % len(cpus)] for k in range(threads)]
            argv, conf_text, pin = engine.generator(TxPort(
                dev, frames, s.duration, pin, rate, size, exe=ctx.exes.get(ctx.server, ""), ip=ip, src_ip=src,
                dst_ip=dst, src_mac=ctx.macs[(ctx.server, i)], dst_mac=ctx.macs[(ctx.receiver, i)],
                dport=s.udp_port, ncpus=len(cpus)))
            if conf_text is not None:
                # the config is made first, then written where the generator reads it
                where = gen_t.put_file(raw_dir / f"{engine.name}-{dev}.cfg", conf_text)
                remote_confs.append(where)
                argv = [where if a == "{conf}" else a for a in argv]
            meta.setdefault("pinning", {})[dev] = pin
            txs.append((i, pt.spawn(gen_t, ctx.server, "generator", f"tx-{dev}", argv, key=f"tx {dev}", gated=True,
                                    pin=False)))
            meta["ports"].append({"port": dev, "threads": threads}
                                 | ({"frame_hex": frames[0].hex()} if engine.own_frames else {}))
        samplers = pt.sample(PointSamplers(
            spec.trial_id,
            _net_targets(ctx, rxs, txs, ports),
            env.cpu_transport,
            _tool_procs(ctx, env, rxs, txs, engine),
            machine=env.cpu_machine,
            nic_irqs=env.nic_irqs,
            net_interval=0.25,
        ), first_read=True)
        meta["released"] = release_together([pr for _, pr in txs], engine.name, ctx.server)
        # the hosts' own counters (sampled on the host) read at the window's edges
        samplers.read_at([meta["released"] + s.trim, meta["released"] + s.duration - s.trim])
        runs_for = s.duration + s.timeout_margin + engine.link_wait_s

        def hung(i: int, pr: Process) -> ToolError:
            return ToolError(f"{engine.name} on {ctx.dev(ctx.server, i)} still running after {runs_for:g}s",
                             where=ctx.server, hint="raise study.timeout_margin if the host is only slow")

        # a port still sending fails the point: its counts end before its frames do
        pt.await_clients(txs, runs_for, lambda i: ctx.dev(ctx.server, i), hung, lose=False)
        time.sleep(DRAIN_S)
        samplers.last_read()
        for _, pr in rxs:
            pr.stop(2.0, engine.receiver.stop_signal)
    status, error = pt.status, pt.error
    gen_t.drop_files(remote_confs)
    if status == "ok":
        try:
            samples += _results(ctx, spec, engine, txs, rxs, meta)
        except NicbenchError as e:
            status, error = "failed", e.one_line().removeprefix("nicbench: ")
    out = pt.outcome(status, error, samples)
    return out.record, out.samples, out.raws


def _results(ctx: PacketContext, spec: TrialSpec, engine: Engine, txs: Ports, rxs: Ports,
             meta: dict[str, Any]) -> list[Sample]:
    """Both ends' own counts as samples, their totals into ``meta``."""
    out: list[Sample] = []
    meta["tx"], meta["rx"] = {}, {}
    for i, pr in txs:
        dev = ctx.dev(ctx.server, i)
        tags = make_tags(host=ctx.server, port=dev, side="sender", engine=engine.name)
        out += engine.sent(spec.trial_id, ctx.server, dev, pr, tags, meta)
    for i, pr in rxs:
        dev = ctx.dev(ctx.receiver, i)
        tags = make_tags(host=ctx.receiver, port=dev, side="receiver", engine=engine.name)
        out += engine.receiver.received(spec.trial_id, ctx.receiver, dev, pr, tags, meta)
    return out


def _net_targets(ctx: PacketContext, rxs: Ports, txs: Ports, ports: int) -> list[NetTarget]:
    gen_pids = lambda: [pr.pid for _, pr in txs]  # noqa: E731 - the shims live in the generator's namespace
    rx_pids = lambda: [pr.pid for _, pr in rxs]  # noqa: E731
    out = []
    for i in range(ports):
        out.append(NetTarget(ctx.server, ctx.transports[ctx.server], gen_pids, ctx.dev(ctx.server, i)))
        out.append(NetTarget(ctx.receiver, ctx.transports[ctx.receiver], rx_pids, ctx.dev(ctx.receiver, i)))
    return out


def _tool_procs(
    ctx: PacketContext, env: PointEnv, rxs: Ports, txs: Ports, engine: Engine
) -> Callable[[], list[tuple[int, str, str, str]]]:
    """The receivers by PID, each generator below its gate shim and, for an
    engine that forks (trafgen), the per-CPU senders it forks (its parent
    only waits)."""
    if env.cpu_transport is None:
        return lambda: []
    t = env.cpu_transport
    fixed = [(pr.pid, ctx.receiver, engine.receiver.label, ctx.dev(ctx.receiver, i)) for i, pr in rxs]
    base = tool_procs(t, lambda: fixed, [(pr.pid, ctx.server, engine.name, ctx.dev(ctx.server, i)) for i, pr in txs])

    def procs() -> list[tuple[int, str, str, str]]:
        out = base()
        if engine.forks:
            out += [
                (kid, host, role, f"{proc} sender {n}")
                for pid, host, role, proc in list(out)
                if role == engine.name
                for n, kid in enumerate(child_pids(t, pid))
            ]
        return out

    return procs
