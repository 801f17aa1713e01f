"""iperf 2's ``--bounceback``, the latency study's second engine for TCP.

Its client sleeps between requests (clock_nanosleep).  No per-request
samples: its 100 us-bin histogram (each percentile an upper bound, never
under-stated) and its exact mean, min and max, plus its per-interval
reports as the time series.  Its intervals count from the test's start,
placed at the gate stamp plus its connect time.
"""

from __future__ import annotations

from collections.abc import Sequence

from ....core.errors import ToolError
from ....core.histogram import LatencyHistogram
from ....records import Sample
from ....tools import bounceback
from ....tools.base import ToolInfo
from .base import ProbeOutput, ProbeRead, ProbeSpec, stated

INTERVAL = 1.0        # s between its reports (it gives up on a round trip of half this)


class Iperf2:
    name = "iperf2"
    tool = "iperf"
    log_ext: str | None = None

    def version_argv(self) -> list[str]:
        return bounceback.version_argv()

    def info_from(self, out: str | None, host: str) -> ToolInfo:
        return bounceback.info_from(out, host)

    def warnings(self, rate: int | None, probes: Sequence[str]) -> list[str]:
        return []

    def server_argv(self, p: ProbeSpec, bind: str, port: int, lifetime: float) -> list[str]:
        return bounceback.server_argv(port=port, lifetime=lifetime, max_size=p.size)

    def client_argv(self, p: ProbeSpec, target: str, port: int, log: str | None) -> list[str]:
        return bounceback.client_argv(target=target, port=port, size=p.size, duration=float(p.duration), rate=p.rate,
                                      interval=INTERVAL, server_buffer=max(p.size, bounceback.SERVER_READ_BUFFER))

    def read(self, o: ProbeOutput) -> ProbeRead:
        run = bounceback.parse(o.out + "\n" + o.err, o.where)
        if run.total is None or run.histogram is None or run.summary is None:
            raise ToolError("iperf --bounceback: the test did not finish (no final histogram)", where=o.where,
                            hint="a round trip slower than half its report interval ends the test")
        hg = run.histogram
        h = LatencyHistogram()
        for k, n in sorted(hg.bins.items()):
            # every round trip of bin k is below its upper edge: recorded there (less 1 ns, the
            # edge itself belongs to the next bin), percentiles are upper bounds, never under-stated
            h.record(min(hg.edges(k)[1] - 1e-9, run.total.max), n)
        if hg.above:
            h.record(run.total.max, hg.above)
        if hg.below:
            h.record(run.total.min, hg.below)
        start = o.launched + (run.connect_time or 0.0)
        rec = {"histogram": h.to_json(), "percentiles_bound": "upper", "resolution_s": hg.width,
               "count": run.total.count, "sent": run.total.count, "lost": 0, "mean": run.total.mean,
               "min": run.total.min, "max": run.total.max, "window": [start + run.total.start, start + run.total.end],
               "clock": "iperf's test clock placed at the gate stamp + its connect time",
               "stated": stated(run.summary) | {"bins": {str(k): n for k, n in hg.bins.items()},
                                                "bin_width_s": hg.width,
                                                "bounds": {str(k): v for k, v in hg.bounds.items()}}}
        samples = []
        for iv in run.intervals:
            a, b = start + iv.start, start + iv.end
            samples.append(Sample(o.trial_id, "latency.requests", float(iv.count), "count", a, b, o.tags))
            if iv.count:
                samples.append(Sample(o.trial_id, "latency.rtt_mean", iv.mean, "s", a, b, o.tags))
                samples.append(Sample(o.trial_id, "latency.rtt_max", iv.max, "s", a, b, o.tags))
        return ProbeRead(rec, samples)
