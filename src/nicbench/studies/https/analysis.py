"""HTTPS points (seed 001): application vs wire bandwidth and the CPU they cost.

Application Gbps = all clients' wrk bytes x 8 over the span from the first
wrk's start to the last one's end (headers included, and partial bodies cut
at the end: wrk counts what it read).  Wire Gbps = the server interface's transmitted bytes + 24 B per frame
over the span from the first wrk's start to the last one's end, on a shaped
lab link (an unshaped veth counts super-packets).  CPU over the same span.
The ceiling is TLS over TCP at the link's MTU (16 KiB records) for https,
plain TCP for the http baseline.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from ...analysis.aggregate import WireRate, frames_carried, longest_lull, wire_rate
from ...analysis.counters import Counters, counter_warnings, counters, drops
from ...analysis.cpu import CpuUsage, cpu_notes, cpu_usage
from ...analysis.trials import LinkInfo, TrialHead, by_point, float_meta, fraction_of, head, int_param, median_of
from ...analysis.verdict import Evidence, Verdict, decide, point_verdict, tool_cores, with_nic
from ...core import linerate
from ...records import Sample, TrialRecord

# socket errors allowed per request before a point fails: the plan's study.error_budget, recorded with
# each trial; this default reads runs recorded before there was one
DEFAULT_ERROR_BUDGET = 0.01
# a point fails when the server's interface went quiet for this long, and this share of the
# clients' span: a frozen server, not a slow one (the counters are read every 0.5 s)
STALL_S, STALL_SHARE = 1.0, 0.1


@dataclass(frozen=True)
class HttpsTrial(TrialHead):
    app_gbps: float | None
    window: tuple[float, float] | None
    requests: int = 0
    socket_errors: int = 0
    bad_status: int = 0
    wire: WireRate | None = None
    cpu: CpuUsage | None = None
    counters: Counters | None = None
    ktls: str = ""
    warnings: tuple[str, ...] = ()
    wrk: Mapping[str, object] = field(default_factory=dict)
    frames: float | None = None              # the server's interface, both ways, over the window
    verdict: Verdict | None = None           # what held it below line rate (analysis/verdict.py)
    seconds: float | None = None             # wrk's duration: the clients' span, first start to last end

    @property
    def requests_per_s(self) -> float | None:
        """Requests completed per second, every client's: wrk's own Requests/sec
        summed when each client's record states it (an import: wrk divides by
        its unrounded runtime), else requests over wrk's duration."""
        stated = [r.get("requests_per_s") for r in self.wrk.values() if isinstance(r, Mapping)]
        if stated and all(isinstance(v, (int, float)) for v in stated):
            return float(sum(stated))     # type: ignore[arg-type]
        return self.requests / self.seconds if self.seconds else None

    def latency_s(self, percent: str) -> float | None:
        """Request latency at ``percent`` ("50", "99"), seconds: the slowest client's,
        as wrk measured it (percentiles of different clients cannot be merged)."""
        vals = []
        for res in self.wrk.values():
            pct = res.get("percentiles_us") if isinstance(res, Mapping) else None
            v = pct.get(percent) if isinstance(pct, Mapping) else None
            if isinstance(v, (int, float)):
                vals.append(float(v) / 1e6)
        return max(vals) if vals else None

    @property
    def wire_gbps(self) -> float | None:
        return self.wire.wire_bps / 1e9 if self.wire else None

    def cores(self, role: str) -> float | None:
        if self.cpu is None:
            return None
        vals = [v for k, v in self.cpu.tools.items() if k.startswith(role + " ")]
        return sum(vals) if vals else None


def https_trial(rec: TrialRecord, samples: Sequence[Sample], link: LinkInfo | None,
                clients: int | None = None) -> HttpsTrial:
    t = _https_trial(rec, samples, link)
    if t.status != "ok":
        return t
    return replace(t, verdict=decide(with_nic(evidence(t, link, clients), samples, rec.meta)))


# wrk's error kinds that are socket errors ("status" counts non-2xx answers: not the socket's)
SOCKET_ERRORS = ("connect", "read", "write", "timeout")


def evidence(t: HttpsTrial, link: LinkInfo | None, clients: int | None) -> Evidence:
    """What an HTTPS trial measured, for the verdict (analysis/verdict.py):
    what wrk read against the scheme's ceiling, the server's wire, nginx's
    workers (one thread each) and wrk's threads, wrk's socket errors by
    kind, the kernel's retransmits and the interfaces' drops."""
    ceil = ceiling(link, str(t.params.get("scheme")), t.params.get("tls"), clients)  # type: ignore[arg-type]
    kinds: dict[str, float] = {}
    for res in t.wrk.values():
        errs = res.get("errors") if isinstance(res, Mapping) else None
        for k in SOCKET_ERRORS:
            v = errs.get(k) if isinstance(errs, Mapping) else None
            if isinstance(v, (int, float)) and v:
                kinds[k] = kinds.get(k, 0.0) + float(v)
    c = t.counters
    threads = float(int_param(t.params, "threads", 1))
    return Evidence({"tx": (t.app_gbps or 0.0) * 1e9}, ceil * 1e9 if ceil else None,
                    {"tx": t.wire.wire_bps} if t.wire else {}, link.speed_for(clients) if link else None,
                    t.cpu, t.tool_cpus, c.total("tcp.retrans_segs") if c else None,
                    c.total("tcp.out_segs") if c else None, drops(c), t.frames,
                    what="goodput read by wrk", tool_cores=tool_cores(t.tool_cpus, {"wrk": threads}),
                    errors=(float(t.socket_errors), float(t.requests),
                            ", ".join(f"{k} {v:.0f}" for k, v in kinds.items())))


def _https_trial(rec: TrialRecord, samples: Sequence[Sample], link: LinkInfo | None) -> HttpsTrial:
    by = [s for s in samples if s.metric == "http.bytes"]
    meta = rec.meta
    common = dict(**head(rec), ktls=str(meta.get("ktls") or ""),
                  warnings=tuple(meta.get("warnings") or ()), wrk=dict(meta.get("wrk") or {}))
    if rec.status != "ok" or not by:
        # a point failed for what wrk answered (non-2xx) keeps what wrk counted, so its
        # requests/s, duration and error counts stay visible; only its bytes are no payload
        seen = [s for s in samples if s.metric.startswith("http.")]
        span = (max(s.t_end for s in seen) - min(s.t_start for s in seen)) if seen else None
        counted = {m: int(sum(s.value for s in seen if s.metric == m))
                   for m in ("http.requests", "http.socket_errors", "http.bad_status")}
        return HttpsTrial(status="failed" if rec.status == "ok" else rec.status,
                          error=rec.error or "no wrk result", app_gbps=None, window=None,
                          requests=counted["http.requests"], socket_errors=counted["http.socket_errors"],
                          seconds=span or None, **{**common, "bad_status": counted["http.bad_status"]})
    # all clients' bytes over the span from the first start to the last end:
    # summing per-client rates would count twice the time one client had the
    # link alone while another was already done (seen: 100.8 % of the ceiling)
    window = (min(s.t_start for s in by), max(s.t_end for s in by))
    app = sum(s.value for s in by) * 8 / (window[1] - window[0]) / 1e9 if window[1] > window[0] else None

    def total(metric: str) -> int:
        return int(sum(s.value for s in samples if s.metric == metric))
    wire = None
    if link is not None and link.counters_count_frames:
        wire = wire_rate(samples, direction="tx", window=window, uncounted_per_frame=linerate.per_frame_uncounted(),
                         host=str(meta.get("server")))
    requests, socket_errors = total("http.requests"), total("http.socket_errors")
    common["bad_status"] = total("http.bad_status")
    budget = float_meta(meta, "error_budget", DEFAULT_ERROR_BUDGET)
    span = window[1] - window[0] if window[1] > window[0] else None
    if socket_errors > budget * max(requests, 1):
        # a firewall resetting connections mid-run: wrk still counts what it got
        return HttpsTrial(status="failed", app_gbps=None, window=None, requests=requests, socket_errors=socket_errors,
                          seconds=span,
                          error=f"wrk counted {socket_errors} socket errors against {requests} requests "
                                f"({socket_errors / max(requests, 1):.1%}): more than the point's error budget "
                                f"({budget:.1%}; study.error_budget)", **common)
    lull = longest_lull(samples, direction="tx", window=window, host=str(meta.get("server")))
    if lull is not None and lull[1] - lull[0] >= max(STALL_S, STALL_SHARE * (window[1] - window[0])):
        # wrk ends at its duration whatever the server did: a server frozen for part of
        # the point gave a lower rate that wrk alone reports as fine
        return HttpsTrial(status="failed", app_gbps=None, window=None, requests=requests, socket_errors=socket_errors,
                          seconds=span, error=f"the server sent next to nothing (under 1 % of the point's mean) for "
                                f"{lull[1] - lull[0]:.1f} s of the {window[1] - window[0]:.1f} s the clients ran "
                                f"(from +{lull[0] - window[0]:.1f} s): it stalled, so the point's rate is not "
                                "one it sustains; its error log is in the run's raw/https/", **common)
    u = cpu_usage(samples, window)
    c = counters(samples, window)
    warns = (
        tuple(common.pop("warnings")) + tuple(cpu_notes(samples, window, u)) + tuple(counter_warnings(c) if c else ())
    )
    return HttpsTrial(
        status="ok",
        error=None,
        app_gbps=app,
        window=window,
        requests=requests,
        socket_errors=socket_errors,
        seconds=span,
        wire=wire,
        cpu=u,
        counters=c,
        warnings=warns,
        frames=frames_carried(samples, window, str(meta.get("server"))),
        **common,
    )


@dataclass(frozen=True)
class HttpsPoint:
    point: str
    scheme: str
    connections: int
    threads: int
    n_ok: int
    n_failed: int
    app_gbps: float | None
    app_min: float | None
    app_max: float | None
    wire_gbps: float | None
    ceiling_gbps: float | None
    cpu_pct: float | None  # of the whole machine (all lab hosts share it)
    cores_busy: float | None
    nginx_cores: float | None
    wrk_cores: float | None
    requests: int
    socket_errors: int
    bad_status: int
    ktls: tuple[str, ...]
    errors: tuple[str, ...]
    warnings: tuple[str, ...]
    latency_p50_s: float | None = None       # the slowest client's, median over repeats
    latency_p99_s: float | None = None
    verdict: Verdict | None = None           # the limit of the point, over its ok repeats
    # wrk's headline: requests completed per second and its duration, median over the ok
    # repeats (over every repeat when none is ok: a failed point's figures stay visible)
    requests_per_s: float | None = None
    seconds: float | None = None

    @property
    def of_ceiling(self) -> float | None:
        return fraction_of(self.app_gbps, self.ceiling_gbps)

    @property
    def gbps_per_core(self) -> float | None:
        return self.app_gbps / self.cores_busy if self.app_gbps and self.cores_busy else None


def ceiling(link: LinkInfo | None, scheme: str, tls_version: str | None, clients: int | None) -> float | None:
    """Goodput ceiling in Gbps for the point's scheme at the link's speed and MTU."""
    if link is None:
        return None
    speed = link.speed_for(clients)
    if not speed:
        return None
    ts = True if link.timestamps is None else link.timestamps
    if scheme == "https":
        version = max((tls_version or "1.3").split(","))  # the highest offered is negotiated
        return linerate.tls(speed, link.mtu, version=version, ip=link.ip, timestamps=ts).goodput_bps / 1e9
    return linerate.tcp(speed, link.mtu, ip=link.ip, timestamps=ts).goodput_bps / 1e9


def https_points(trials: Iterable[HttpsTrial], link: LinkInfo | None, clients: int | None) -> list[HttpsPoint]:
    med = median_of
    out = []
    for point, ts in by_point(trials).items():
        ok = [t for t in ts if t.status == "ok" and t.app_gbps is not None]
        apps = [t.app_gbps for t in ok if t.app_gbps is not None]
        scheme = str(ts[0].params.get("scheme"))
        out.append(
            HttpsPoint(
                point,
                scheme,
                int_param(ts[0].params, "connections", 0),
                int_param(ts[0].params, "threads", 1),
                len(ok),
                len(ts) - len(ok),
                med(apps),
                min(apps) if apps else None,
                max(apps) if apps else None,
                med(t.wire_gbps for t in ok),
                ceiling(link, scheme, ts[0].params.get("tls"), clients),  # type: ignore[arg-type]
                med(t.cpu.percent_of_machine if t.cpu else None for t in ok),
                med(t.cpu.cores_busy if t.cpu else None for t in ok),
                med(t.cores("nginx") for t in ok),
                med(t.cores("wrk") for t in ok),
                # counts of what happened, over every repeat: a repeat failed for its
                # socket errors keeps them in the point's errors column
                sum(t.requests for t in ts),
                sum(t.socket_errors for t in ts),
                sum(t.bad_status for t in ts),
                tuple(sorted({t.ktls for t in ts if t.ktls})),
                tuple(sorted({t.error for t in ts if t.error})),
                tuple(sorted({w for t in ts for w in t.warnings})),
                med(t.latency_s("50") for t in ok),
                med(t.latency_s("99") for t in ok),
                point_verdict([t.verdict for t in ok if t.verdict is not None]),
                requests_per_s=med(t.requests_per_s for t in (ok or ts)),
                seconds=med(t.seconds for t in (ok or ts)),
            )
        )
    return sorted(out, key=lambda p: (p.scheme != "https", p.connections, p.threads))
