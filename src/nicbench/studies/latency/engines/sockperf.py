"""sockperf, the latency study's primary engine (TCP and UDP).

Per-request samples from its full log (``--full-log`` on the probe host,
fetched and kept with the run), whole round trips (``--full-rtt``).  Its
clock counts from its process start, which is placed at the gate stamp (the
exec of its launcher: a few ms early at most).  At a fixed rate its client
spins between requests; back to back it blocks in ``recv``.  Its server has
no lifetime of its own: ``timeout`` bounds it, and the runner stops it.
"""

from __future__ import annotations

from collections.abc import Sequence

from ....core.errors import ToolError
from ....tools import sockperf
from ....tools.base import ToolInfo
from .base import ProbeOutput, ProbeRead, ProbeSpec, bins, exact, stated


class Sockperf:
    name = "sockperf"
    tool = "sockperf"
    log_ext: str | None = "csv"

    def version_argv(self) -> list[str]:
        return sockperf.version_argv()

    def info_from(self, out: str | None, host: str) -> ToolInfo:
        return sockperf.info_from(out, host)

    def warnings(self, rate: int | None, probes: Sequence[str]) -> list[str]:
        if rate is None:
            return []
        return [f"sockperf at a fixed rate spins a core per probe client between requests "
                f"({len(probes)} probe(s)): on hosts without a core to spare this competes with the load"]

    def server_argv(self, p: ProbeSpec, bind: str, port: int, lifetime: float) -> list[str]:
        return sockperf.server_argv(bind=bind, port=port, protocol=p.protocol, max_size=p.size, lifetime=lifetime)

    def client_argv(self, p: ProbeSpec, target: str, port: int, log: str | None) -> list[str]:
        assert log is not None
        return sockperf.client_argv(target=target, port=port, protocol=p.protocol, size=p.size,
                                    duration=p.duration, log_path=log, rate=p.rate)

    def read(self, o: ProbeOutput) -> ProbeRead:
        sockperf.check_text(o.out, o.where)
        run = sockperf.parse_full_log(o.fetch(f"{o.host}-sockperf-full.csv"), o.where)
        rs = run.samples
        if not len(rs):
            raise ToolError(f"sockperf: none of {run.summary.sent} requests was answered", where=o.where)
        assert rs.sent is not None
        sent_abs = [o.launched + x for x in rs.sent]      # its process clock, placed at the gate stamp
        rec = exact(rs.rtt, sent_abs, stated(run.summary), sent=run.summary.sent or len(rs),
                    lost=run.summary.lost or 0, clock="sockperf's process clock placed at the gate stamp")
        rec["warmup_s"] = run.warmup
        return ProbeRead(rec, bins(o.trial_id, o.tags, sent_abs, rs.rtt))
