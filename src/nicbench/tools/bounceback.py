"""iperf 2.1.8+ ``--bounceback``: argv builders and a pure parser of its
enhanced (``-e``) report.

A TCP request/response test: the client writes ``-l`` bytes, the server
writes them back, the client times each round trip (gettimeofday: 1 us
resolution).  iperf 2 gives no per-request samples; it prints, per reporting
interval and for the whole test, ``BB cnt=avg/min/max/stdev`` (ms), and at
the end its own histogram of every round trip ("BB8-PDF") with fixed 100 us
bins::

    [  1] 0.0000-2.0022 sec  1.99 MBytes  8.34 Mbits/sec    16310=0.052/0.020/5.183/0.234 ms  0  195K/281 us  19181 rps
    [  1] 0.0000-2.0022 sec BB8(f)-PDF: bin(w=100us):cnt(16310)=1:16067,2:84,...
          (5.00/95.00/99.7%=1/1/30,Outliers=0,obl/obu=0/0)

Bin ``k`` holds round trips in [(k-1)*w, k*w) (iperf prints index+1 of
floor(rtt/w)); the ``5.00/95.00/99.7%=a/b/c`` triple names, for each
fraction, the first bin where the running count *exceeds* it, so each is an
upper bound (k*w) of that percentile.  ``RPS`` is 1/mean RTT, not the
achieved request rate (count/duration here).

Why text: 2.1.8's CSV (``-y C``) carries no bounce-back statistics at all,
only bytes (fixtures/iperf2/2.1.8/bounceback/client_csv.csv).

Known traps (recorded in tests/fixtures/iperf2/2.1.8/bounceback):
- ``-l`` below 64 B (iperf's 60-byte bounce-back header + 4) makes the server
  drop the connection and the client hang past ``-t``, ignoring SIGTERM;
  above the server's read buffer (128 KiB by default) the server fails
  ("recvn failed: Bad address") the same way.  The builders refuse both and
  every client runs under ``timeout -k`` (SIGKILL);
- the histogram's bin width is fixed at 100 us (``--histograms=`` does not
  change it), so on a path whose RTT is tens of us it says only "< 100 us";
- the client sets socket timeouts of half the reporting interval (-i): one
  round trip slower than that ends the test with "tcp bounce-back read failed";
- ``--bounceback`` alone sends bursts of 10 every second; ``--bounceback=1
  --bounceback-period=P`` one request every P s; period 0 back to back;
- connection refused is reported on stderr with exit code 0.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..core.errors import InputError, ToolError
from .base import ToolInfo, damage_is_a_tool_error
from .rtt import StatedSummary, bounded, check_size, require_version

NAME = "iperf"
PACKAGE = "iperf"
MIN_VERSION = (2, 1, 8)
MIN_VERSION_REASON = ("2.1.8 fixed --bounceback's report (enhanced BB cnt=avg/min/max/stdev lines, "
                      "--bounceback-period, one request per period with --bounceback=1)")
MIN_SIZE = 64                   # iperf's bounce-back header (60 B) + 4
SERVER_READ_BUFFER = 131072     # iperf -s default -l (128 KiB); larger requests break the server
MAX_RATE = 100000.0             # requests/s: iperf's shortest --bounceback-period is 10 us
DEFAULT_PORT = 5001


def version_argv() -> list[str]:
    return ["iperf", "-v"]


def info_from(version_out: str | None, host: str) -> ToolInfo:
    """``iperf -v`` output (stdout+stderr; None: command not found) -> facts,
    or PreflightError naming ``host``."""
    return require_version(NAME, version_out, host, MIN_VERSION, MIN_VERSION_REASON, PACKAGE)


def check_message_size(size: int, max_size: int = SERVER_READ_BUFFER) -> None:
    check_size("iperf --bounceback", size, "tcp", MIN_SIZE, max_size, "iperf's 60-byte bounce-back header + 4",
               "the server's read buffer (-l)")


def server_argv(*, port: int = DEFAULT_PORT, lifetime: float, max_size: int = SERVER_READ_BUFFER) -> list[str]:
    """A server that answers bounce-back tests for ``lifetime`` s (iperf's
    ``-t``, and ``timeout`` in case it hangs).  Its read buffer (``-l``) is
    ``max_size``, at least the default 128 KiB."""
    buf = max(max_size, SERVER_READ_BUFFER)
    argv = ["iperf", "-s", "-p", str(port), "-e", "-l", str(buf), "-t", f"{lifetime:g}"]
    return bounded(argv, lifetime + 5)


def client_argv(*, target: str, port: int = DEFAULT_PORT, size: int, duration: float, rate: float | None = None,
                interval: float = 1.0, start_at: float | None = None, congest: str | None = None,
                congest_streams: int = 1, server_buffer: int = SERVER_READ_BUFFER) -> list[str]:
    """``duration`` s of bounce-backs of ``size`` bytes, one request every
    1/``rate`` s (None: back to back), reports every ``interval`` s.

    ``start_at``: UNIX time of the first request (``--txstart-time``).
    ``congest``: "up", "down" or "bidir" adds iperf's own concurrent TCP
    load (``--bounceback-congest``) with ``congest_streams`` streams.
    ``interval`` also bounds one round trip: iperf gives up on one slower
    than interval/2.  Hard-bounded by ``timeout -k`` (duration + 15 s).
    """
    check_message_size(size, server_buffer)
    if not duration > 0 or not interval > 0:
        raise InputError(f"iperf --bounceback: duration {duration} s and interval {interval} s must be > 0",
                         where="duration")
    if rate is not None and not 0 < rate <= MAX_RATE:
        raise InputError(f"iperf --bounceback: rate {rate} requests/s outside (0, {MAX_RATE:g}]", where="rate",
                         hint="iperf's shortest --bounceback-period is 10 us; omit the rate for back to back")
    period = 0.0 if rate is None else 1.0 / rate
    argv = ["iperf", "-c", target, "-p", str(port), "--bounceback=1", f"--bounceback-period={period:.9g}",
            "-l", str(size), "-t", f"{duration:g}", "-i", f"{interval:g}", "-e"]
    if start_at is not None:
        argv += ["--txstart-time", f"{start_at:.6f}"]
    if congest is not None:
        if congest not in ("up", "down", "bidir") or congest_streams < 1:
            raise InputError(f"iperf --bounceback-congest: {congest!r},{congest_streams} is not up|down|bidir,N>=1",
                             where="congest")
        argv.append(f"--bounceback-congest={congest},{congest_streams}")
    return bounded(argv, duration + 15)


@dataclass(frozen=True)
class BBInterval:
    """One ``BB cnt=avg/min/max/stdev`` line; times in seconds from the test start."""

    start: float
    end: float
    count: int
    mean: float
    min: float
    max: float
    stdev: float
    retries: int
    tcp_rtt: float | None      # the kernel's smoothed TCP RTT sample (s), "NA" -> None
    rps: int                   # iperf's "RPS": 1/mean, not the achieved rate


@dataclass(frozen=True)
class BBHistogram:
    """iperf's own round-trip histogram: ``bins[k] = n`` means n round trips
    in [(k-1)*width, k*width) seconds."""

    width_ns: int                         # bin width (100 us in 2.1.8)
    bins: dict[int, int]
    count: int
    below: int                            # iperf's out-of-bounds counts
    above: int
    bounds: dict[float, float]            # percent -> upper bound (s) iperf states
    outliers: int

    @property
    def width(self) -> float:
        return self.width_ns / 1e9

    def edges(self, k: int) -> tuple[float, float]:
        """Bin ``k``'s [low, high) in seconds."""
        return ((k - 1) * self.width_ns / 1e9, k * self.width_ns / 1e9)

    def upper_bound(self, percent: float) -> float:
        """The upper edge of the bin holding the round trip of rank
        ceil(percent/100 * count): that percentile is below it."""
        if not 0 < percent <= 100 or not self.count:
            raise InputError(f"iperf histogram: percentile {percent} of {self.count} round trips", where="percentile")
        rank = math.ceil(percent * self.count / 100)
        run = 0
        for k in sorted(self.bins):
            run += self.bins[k]
            if run >= rank:
                return self.edges(k)[1]
        return self.edges(max(self.bins))[1]


@dataclass(frozen=True)
class BouncebackRun:
    """One client's report.  ``total`` (and ``histogram``) are None when the
    test did not finish (no final line): ``intervals`` are still kept."""

    size: int                             # B per request, as iperf restates it
    hold: float                           # s the server was asked to hold each reply
    quickack: bool
    intervals: tuple[BBInterval, ...]
    total: BBInterval | None
    histogram: BBHistogram | None
    connected_at: str | None              # iperf's "on 2026-11-23 01:53:35 (UTC)": to the second
    connect_time: float | None            # s, TCP connect
    summary: StatedSummary | None


_TIME = r"(\d+\.\d+)-(\d+\.\d+) sec"
_BB = re.compile(r"^\[\s*(\d+)\]\s+" + _TIME + r"\s+\S+ \w*Bytes\s+\S+ \w*bits/sec\s+"
                 r"(\d+)=([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms\s+(\d+)\s+(\S+)(?: us)?\s+(\d+) rps\s*$")
_PDF = re.compile(r"^\[\s*(\d+)\]\s+" + _TIME + r" BB8(\(f\))?-PDF: bin\(w=(\d+)(us|ms)\):cnt\((\d+)\)=([\d:,]*) "
                  r"\(([\d./]+)%=([\d/]+),Outliers=(\d+),obl/obu=(\d+)/(\d+)\)")
_CONNECT = re.compile(r"^\[\s*(\d+)\] local .* connected with .*\(bb (w/quickack )?len/hold=(\d+)/(\d+)\)"
                      r"(?:.*\(ct=([\d.]+) ms\))?(?:.* on (.+))?$")
_FAIL = re.compile(r"^(.*(?:failed|refused|Bad address).*)$")


def _ms(text: str) -> float:
    """iperf's milliseconds -> seconds, rounded once ("0.043e-3" is the double
    nearest 43 us; 0.043 / 1e3 is not)."""
    return float(text + "e-3")


@damage_is_a_tool_error("iperf --bounceback", "see the raw output file")
def parse(text: str, where: str | None = None) -> BouncebackRun:
    """An iperf 2 ``--bounceback -e`` client report (stdout with stderr).

    ToolError when iperf reported a failure before any round trip, when no
    bounce-back flow or line is found, or when the histogram's counts do not
    add up to the count it states.
    """
    bb_id: int | None = None
    size = hold = 0
    quickack = False
    connected_at: str | None = None
    connect_time: float | None = None
    failures: list[str] = []
    lines: list[BBInterval] = []
    final_pdf: tuple[float, float, BBHistogram] | None = None
    for raw in text.splitlines():
        ln = raw.strip()
        m = _CONNECT.match(ln)
        if m:
            bb_id, quickack = int(m.group(1)), m.group(2) is not None
            size, hold = int(m.group(3)), int(m.group(4))
            connect_time = _ms(m.group(5)) if m.group(5) else None
            connected_at = m.group(6).strip() if m.group(6) else None
            continue
        m = _BB.match(ln)
        if m:
            if bb_id is not None and int(m.group(1)) != bb_id:
                continue
            tcp_rtt = m.group(10).partition("/")[2]
            lines.append(BBInterval(
                start=float(m.group(2)), end=float(m.group(3)), count=int(m.group(4)),
                mean=_ms(m.group(5)), min=_ms(m.group(6)), max=_ms(m.group(7)), stdev=_ms(m.group(8)),
                retries=int(m.group(9)),
                tcp_rtt=float(tcp_rtt + "e-6") if tcp_rtt.replace(".", "", 1).isdigit() else None,
                rps=int(m.group(11))))
            continue
        m = _PDF.match(ln)
        if m:
            if m.group(4):
                final_pdf = (float(m.group(2)), float(m.group(3)), _histogram(m, where))
            continue
        m = _FAIL.match(ln)
        if m and not ln.startswith("["):
            failures.append(m.group(1))
    if not lines:
        if failures:
            raise ToolError(f"iperf --bounceback: {failures[0]}", where=where,
                            hint="is an iperf 2 server running on that address and port?")
        raise ToolError("iperf --bounceback: no BB cnt=avg/min/max/stdev line in the output", where=where,
                        hint="run the client with --bounceback -e (iperf >= 2.1.8), text not CSV")
    total: BBInterval | None = None
    histogram: BBHistogram | None = None
    if final_pdf is not None:
        start, end, histogram = final_pdf
        same = [b for b in lines if abs(b.start - start) < 1e-9 and abs(b.end - end) < 1e-9]
        if not same:
            raise ToolError(f"iperf --bounceback: no total line for the final histogram's {start:g}-{end:g} s",
                            where=where)
        total = same[-1]
        lines.remove(total)
        if histogram.count != total.count:
            raise ToolError(f"iperf --bounceback: histogram counts {histogram.count}, total line {total.count}",
                            where=where)
    summary = None
    if total is not None:
        span = total.end - total.start
        summary = StatedSummary(count=total.count, duration=span, rate=total.count / span if span > 0 else None,
                                mean=total.mean, stdev=total.stdev, min=total.min, max=total.max,
                                counters={"tcp_retries": total.retries})
    return BouncebackRun(size=size, hold=hold / 1e6, quickack=quickack, intervals=tuple(lines), total=total,
                         histogram=histogram, connected_at=connected_at, connect_time=connect_time, summary=summary)


def _histogram(m: re.Match[str], where: str | None) -> BBHistogram:
    width_ns = int(m.group(5)) * (1000 if m.group(6) == "us" else 1000000)
    count = int(m.group(7))
    bins: dict[int, int] = {}
    for item in filter(None, m.group(8).split(",")):
        k, _, n = item.partition(":")
        if not k.isdigit() or not n.isdigit():
            raise ToolError(f"iperf --bounceback: histogram bin {item!r} is not k:n", where=where)
        bins[int(k)] = bins.get(int(k), 0) + int(n)
    below, above = int(m.group(12)), int(m.group(13))
    if sum(bins.values()) + below + above != count:
        raise ToolError(f"iperf --bounceback: histogram bins add up to {sum(bins.values())} + {below} + {above}, "
                        f"not cnt({count})", where=where)
    labels = [x for x in m.group(9).split("/") if x]
    values = m.group(10).split("/")
    if len(labels) != len(values):
        raise ToolError(f"iperf --bounceback: histogram bounds {m.group(9)}%={m.group(10)} do not pair up",
                        where=where)
    bounds = {float(p): int(v) * width_ns / 1e9 for p, v in zip(labels, values, strict=True)}
    return BBHistogram(width_ns=width_ns, bins=bins, count=count, below=below, above=above, bounds=bounds,
                       outliers=int(m.group(11)))
