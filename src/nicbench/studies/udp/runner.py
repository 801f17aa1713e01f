"""One UDP point: engine servers up on the clients, engine clients released
together from the study server, the receivers' counts parsed -- or, with
``search = "max_rate"``, a search for the highest rate per client whose loss
stays within the threshold (each step such a measurement).

Measurement rules:
- the receiver's counts are the truth: datagrams expected by sequence
  number, lost, out of order, jitter, bytes that arrived; the sender's are
  kept beside them;
- intervals are placed on the wall clock as in the TCP study
  (:mod:`nicbench.run.iperf`), so the analysis can cut one shared window;
- a pair lost mid-point (its client hung at the time limit, its engine
  server killed or gone, its output unusable) makes the point partial: the
  other pairs' data is kept and the lost pair named, as in the TCP study
  (:func:`nicbench.run.point.pair_fate`); a maximum-rate search cannot judge
  a step on some clients' loss, so a step that lost a pair ends the search
  and fails the point (its steps kept in meta);
- a receiver that counted nothing fails the point with that reason, never
  "0 % loss of 0 datagrams" (the kernel's counters of the point say whether
  nothing reached the host, or nothing got through its reassembly or its
  firewall); an iperf3 stream whose set-up datagram never reached its server
  fails within :data:`UDP_SETUP_S`;
- fragmented datagrams: incomplete ones, left by fragments lost in an
  earlier point, hold the receiver's reassembly memory for up to
  ``net.ipv4.ipfrag_time`` and make it drop new fragments; a point of
  fragmented datagrams first waits until no host holds any (:func:`drain_fragments`);
- the search judges each step on the tool's own counts over the measured part
  (omitted warm-up left out), as RFC 2544 judges a trial; the report's window
  figures of the chosen step come from the analysis.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ...core import linerate
from ...hosts.base import Hosts
from ...hosts.transport import Transport
from ...plan.model import Plan
from ...plan.studies.udp import UdpStudy
from ...records import RawOutput, Sample, TrialRecord, TrialSpec
from ...run import ratesearch
from ...run.kit import PointEnv
from ...run.study import Preflight, TrialOutcome
from .engines import ENGINES
from .measure import EXPECTED, Measured, UdpContext, clients_of


class UdpRunner:
    """The UDP study as the session drives it (see ``run.study.StudyRunner``)."""

    kind = "udp"

    def __init__(self, plan: Plan, hosts: Hosts):
        assert isinstance(plan.study, UdpStudy)
        self.plan = plan
        self.transports = hosts.transports()
        self.addresses = {h.name: h.ip for h in hosts.spec.hosts}
        self.mtu = hosts.spec.mtu
        self.ctx: UdpContext | None = None

    def preflight(self) -> Preflight:
        self.ctx, warnings = preflight(self.plan, self.transports, self.addresses, self.mtu)
        c, s = self.ctx, self.ctx.study
        frags = {str(n): len(linerate.udp_fragments(n, c.mtu)) for n in s.datagram_sizes}
        return Preflight(
            tools=(*ENGINES[s.engine].tools, "ethtool"), warnings=tuple(warnings),
            meta={"engine": s.engine, "engine_version": c.tool.version_str,
                  "engine_features": sorted(c.tool.features), "trim": s.trim, "search": "max" in s.rates,
                  "loss_threshold": s.loss_threshold, "search_steps": s.search_steps,
                  "search_resolution": s.search_resolution, "window": s.window,
                  "fragments": {k: v for k, v in frags.items() if v > 1}})

    def start(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return []

    def trial(self, env: PointEnv, spec: TrialSpec, raw_dir: Path) -> TrialOutcome:
        assert self.ctx is not None, "preflight first"
        return TrialOutcome(*run_trial(self.ctx, env, spec, raw_dir))

    def stop(self, env: PointEnv, raw_dir: Path) -> list[RawOutput]:
        return []


def preflight(plan: Plan, transports: dict[str, Transport], addresses: dict[str, str],
              mtu: int) -> tuple[UdpContext, list[str]]:
    """Every host at once, by the plan's engine (:mod:`.engines`)."""
    assert isinstance(plan.study, UdpStudy)
    return ENGINES[plan.study.engine].preflight(plan, transports, addresses, mtu)


def measure(ctx: UdpContext, env: PointEnv, spec: TrialSpec, raw_dir: Path, rate: float | None) -> Measured:
    """One measurement at ``rate`` bit/s per client (None: unpaced), by the plan's engine."""
    return ENGINES[ctx.study.engine].measure(ctx, env, spec, raw_dir, rate)


def run_trial(ctx: UdpContext, env: PointEnv, spec: TrialSpec,
              raw_dir: Path) -> tuple[TrialRecord, list[Sample], list[RawOutput]]:
    """One point at its offered rate, or the maximum-rate search; never raises
    for a point-level failure (it is recorded)."""
    if spec.params.get("search"):
        return search(ctx, env, spec, raw_dir)
    rate = spec.params.get("rate_bps")
    m = measure(ctx, env, spec, raw_dir, float(rate) if rate else None)
    return m.record, m.samples, m.raws


def upper_per_client(ctx: UdpContext, size: int, clients: int) -> float | None:
    """The most payload a client's flow can get through the links, bit/s: the
    server's link shared by the point's clients, or a client's own link if
    slower (None: the links are not shaped, nothing bounds the search)."""
    caps = []
    if ctx.speed_bps:
        caps.append(linerate.udp(ctx.speed_bps, ctx.mtu, payload=size).goodput_bps / clients)
    if ctx.client_speed_bps:
        caps.append(linerate.udp(ctx.client_speed_bps, ctx.mtu, payload=size).goodput_bps)
    return min(caps) if caps else None


def search(ctx: UdpContext, env: PointEnv, spec: TrialSpec,
           raw_dir: Path) -> tuple[TrialRecord, list[Sample], list[RawOutput]]:
    """The highest rate per client whose loss stays at or below the threshold
    (:mod:`nicbench.run.ratesearch`).  The point keeps the samples of the best
    passing step; every step's rate, rates and loss are in its meta."""
    s = ctx.study
    n = len(clients_of(ctx, spec))
    upper = upper_per_client(ctx, int(spec.params["datagram_size"]), n)
    units = n * len(EXPECTED[str(spec.params["direction"])])    # the rate is each client's, each way
    started = time.time()
    steps: list[ratesearch.Step] = []
    runs: list[Measured] = []
    raws: list[RawOutput] = []
    rate: float | None = None
    nothing: str | None = None
    found: dict[str, Any] = {"loss_threshold": s.loss_threshold, "upper_per_client_bps": upper, "steps": []}
    while True:
        k = len(steps)
        m = measure(ctx, env, spec, raw_dir / f"step{k}", rate)
        raws += m.raws
        if m.record.status != "ok" and m.nothing is None:   # a failed or interrupted step ends the point
            err = f"search step {k} ({_rate_text(rate)}): {m.record.error}"
            status = m.record.status
            if status == "partial":     # the survivors' loss is not the point's: no rate can be judged on it
                status, err = "failed", err + " -- a step is judged on every client's loss, so the search stopped"
            return (TrialRecord(spec, status, started, time.time(), err, {**m.record.meta, "search": found}),
                    [] if m.record.status == "partial" else m.samples, raws)
        sent, got, loss = m.figures()
        if m.nothing is not None:
            # nothing arrived although the sender sent: all of it lost (if no
            # step ever gets anything through, the point fails with this reason)
            nothing = nothing or f"step {k} ({_rate_text(rate)}): {m.nothing}"
            got, loss = 0.0, 1.0
        steps.append(ratesearch.judge(rate, sent, got, loss, s.loss_threshold))
        found["steps"].append({"step": k, "rate_per_client_bps": rate, "sent_bps": sent, "received_bps": got,
                               "loss": loss, "passed": steps[-1].passed})
        runs.append(m)
        rate = ratesearch.next_rate(steps, units=units, max_steps=s.search_steps, upper=upper,
                                    resolution=s.search_resolution)
        if rate is None:
            break
    best = ratesearch.best(steps)
    if nothing is not None and not any(x.received > 0 for x in steps):
        return TrialRecord(spec, "failed", started, time.time(), f"no step's receiver counted anything; {nothing}",
                           {"search": found}), [], raws
    if best is None:
        lowest = min((x.rate for x in steps if x.rate), default=None)
        why = (f"no rate tried had loss <= {s.loss_threshold:.3%} (lowest tried {_rate_text(lowest)} per client)"
               if lowest else "the unpaced step lost too much and no slower step ran")
        return TrialRecord(spec, "failed", started, time.time(), why, {"search": found}), [], raws
    found["rate_per_client_bps"] = steps[best].rate          # None: unpaced, the sender's own maximum
    found["best_step"] = best
    rec = runs[best].record
    return TrialRecord(spec, "ok", started, time.time(), None, {**rec.meta, "search": found}), runs[best].samples, raws


def _rate_text(rate: float | None) -> str:
    return "unpaced" if rate is None else f"{linerate.format_speed(rate)}bit/s"
