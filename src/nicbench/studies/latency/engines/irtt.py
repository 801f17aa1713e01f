"""irtt, the latency study's second engine for UDP.

Isochronous requests, its client *sleeps* between them (Go timers), so its
round trips include waking the client.  Its JSON (``-o`` on the probe host,
fetched and kept with the run) stamps every send with its host's wall clock,
placed on this machine's by the host's clock offset.  Its ``client_rtt`` is
the whole round trip, the server's turnaround included, as sockperf times
it.  A test that ends early, or whose timer missed sends on a busy host, is
said.
"""

from __future__ import annotations

from collections.abc import Sequence

from ....core.histogram import LatencyHistogram
from ....hosts.transport import host_clock_offset
from ....plan.studies.latency import IRTT_WAIT
from ....tools import irtt
from ....tools.base import ToolInfo
from ....tools.rtt import RttSamples
from .base import ProbeOutput, ProbeRead, ProbeSpec, bins, exact, stated

EARLY_END = 0.05      # irtt's sends and timer misses short of its requests by more: its test ended early


class Irtt:
    name = "irtt"
    tool = "irtt"
    log_ext: str | None = "json"

    def version_argv(self) -> list[str]:
        return irtt.version_argv()

    def info_from(self, out: str | None, host: str) -> ToolInfo:
        return irtt.info_from(out, host)

    def warnings(self, rate: int | None, probes: Sequence[str]) -> list[str]:
        return []

    def server_argv(self, p: ProbeSpec, bind: str, port: int, lifetime: float) -> list[str]:
        return irtt.server_argv(port=port, lifetime=lifetime)

    def client_argv(self, p: ProbeSpec, target: str, port: int, log: str | None) -> list[str]:
        assert log is not None and p.rate is not None        # the plan gives irtt a rate
        return irtt.client_argv(target=target, port=port, size=p.size, interval=1.0 / p.rate,
                                duration=float(p.duration), out_path=log, wait=IRTT_WAIT)

    def read(self, o: ProbeOutput) -> ProbeRead:
        irtt.check_stderr(o.err, o.where)
        ir = irtt.parse(o.fetch(f"{o.host}-irtt.json"), o.where)
        irtt.check_complete(ir, EARLY_END, o.where)
        if irtt.timer_misses(ir):
            o.warn(f"{o.host}: irtt's timer missed {irtt.timer_misses(ir)} of {ir.expected} sends (a busy host): "
                   f"{ir.sent} requests in {ir.duration:g} s instead of {ir.expected}")
        off = host_clock_offset(o.proc)         # irtt stamps with its host's clock
        sent = ir.samples.sent
        rs = RttSamples(ir.client_rtt, tuple(t - off for t in sent) if off and sent else sent, "epoch")
        assert rs.sent is not None
        rec = exact(rs.rtt, rs.sent, stated(ir.summary), sent=ir.sent, lost=len(ir.lost), clock="wall clock")
        rec["irtt_rtt_p50_no_turnaround"] = LatencyHistogram.of(ir.samples.rtt).percentile(50)
        rec["expected"] = ir.expected
        if ir.server_time is not None:
            rec["server_turnaround_max"] = max(ir.server_time)
        return ProbeRead(rec, bins(o.trial_id, o.tags, rs.sent, rs.rtt))
