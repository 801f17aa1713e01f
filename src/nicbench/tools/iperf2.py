"""iperf 2 (2.1.x): argv builders and a pure parser of its ``-y C`` CSV reports.

CSV, not the human text: each line is
``stamp,src_ip,src_port,dst_ip,dst_port,id,start-end,bytes,bits_per_second[,udp...]``
where ``stamp`` is the wall-clock end of the interval (local time, ms), and the
address pair is written sender first, whoever writes the line.  The flow is
therefore fixed by which end holds the *server port*; the side by the role of
the process that wrote the file.

Known traps:
- 2.1.8's server segfaults on ``-R``/``--full-duplex`` with a client ``-l 512K``
  unless the server is started with the same ``-l``; afterwards every test gets
  "connection refused".  :func:`server_argv` always takes the IO size.
- no per-test omit: nicbench runs omit+duration and marks the first ``omit``
  seconds as omitted itself;
- with ``-P`` 2.1.8 prints no sum lines in CSV: we sum streams per interval;
- each flow ends with a whole-test summary line (``0.0-T``), told apart from
  interval lines by its span;
- the stamps are the host's *local* time with no zone (2.1.8): a host in
  another time zone than this machine (or one crossing a DST change) would
  place every interval hours away.  nicbench's own runs start iperf under
  ``env TZ=UTC0`` (:data:`RUN_ENV`) and read their stamps as UTC
  (``parse(..., stamps_utc=True)``); files users bring are read as local time.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

from ..core.errors import ToolError
from .base import FlowInterval, MinVersion, ToolInfo, damage_is_a_tool_error, parse_version

NAME = "iperf"
MAX_STREAMS = 4096
RUN_ENV = ("env", "TZ=UTC0")     # every iperf 2 nicbench starts: its CSV stamps in UTC, whatever the host's zone


MIN_VERSION = MinVersion("iperf 2", (2, 1), "nicbench's iperf 2 runs (-e -y C with wall-clock stamps, -R, "
                                           "--full-duplex) and their CSV are tested on 2.1 (Debian 12: 2.1.8)")


def info_from(version_out: str) -> ToolInfo:
    first = version_out.strip().splitlines()[0] if version_out.strip() else ""
    v = parse_version(first)
    feats = {"full_duplex", "reverse"} if v >= (2, 1) else set()
    return ToolInfo(NAME, v, first, frozenset(feats))


def server_argv(*, port: int, interval: float, io_size: int, lifetime: float,
                window: int | None = None) -> list[str]:
    """A server that stops by itself after ``lifetime`` seconds (``-t``)."""
    argv = [*RUN_ENV, "iperf", "-s", "-p", str(port), "-i", f"{interval:g}", "-e", "-y", "C",
            "-l", str(io_size), "-t", f"{lifetime:g}"]
    if window:
        argv += ["-w", str(window)]
    return argv


def client_argv(*, target: str, port: int, duration: float, omit: float, interval: float,
                io_size: int, streams: int, mode: str, no_delay: bool = False,
                window: int | None = None, congestion: str | None = None) -> list[str]:
    argv = [*RUN_ENV, "iperf", "-c", target, "-p", str(port), "-t", f"{duration + omit:g}",
            "-i", f"{interval:g}", "-e", "-y", "C", "-l", str(io_size), "-P", str(streams)]
    if mode == "rev":
        argv.append("-R")
    elif mode == "bidir":
        argv.append("--full-duplex")
    if no_delay:
        argv.append("-N")
    if window:
        argv += ["-w", str(window)]
    if congestion:
        argv += ["-Z", congestion]
    return argv


# iperf 2 has no unpaced UDP (-b 0 is refused: "IPG delay target of inf secs"):
# "unlimited" asks for a rate no sender reaches, so the sender goes as fast as it can
UNPACED_BPS = 1e12


def udp_server_argv(*, port: int, interval: float, size: int, lifetime: float,
                    window: int | None = None) -> list[str]:
    """A UDP server (``-u``) that stops by itself after ``lifetime`` seconds; its
    report lines are the receiver's (loss, jitter, out-of-order)."""
    argv = [*RUN_ENV, "iperf", "-s", "-u", "-p", str(port), "-i", f"{interval:g}", "-e", "-y", "C",
            "-l", str(size), "-t", f"{lifetime:g}"]
    if window:
        argv += ["-w", str(window)]
    return argv


def udp_client_argv(*, target: str, port: int, duration: float, omit: float, interval: float,
                    size: int, streams: int, mode: str, rate_bps: float | None,
                    window: int | None = None) -> list[str]:
    """``rate_bps``: bit/s of UDP payload per stream (``-b`` paces each stream),
    None: unpaced (see :data:`UNPACED_BPS`); ``size``: payload bytes per datagram."""
    rate = UNPACED_BPS if rate_bps is None else rate_bps
    argv = [*RUN_ENV, "iperf", "-c", target, "-p", str(port), "-u", "-b", f"{rate:.0f}", "-t", f"{duration + omit:g}",
            "-i", f"{interval:g}", "-e", "-y", "C", "-l", str(size), "-P", str(streams)]
    if mode == "rev":
        argv.append("-R")
    elif mode == "bidir":
        argv.append("--full-duplex")
    if window:
        argv += ["-w", str(window)]
    return argv


@dataclass(frozen=True)
class CsvLine:
    stamp: float
    src: str
    sport: int
    dst: str
    dport: int
    ident: int
    start: float
    end: float
    bytes: int
    bps: float
    is_sum: bool = False              # a -P sum line (id -1): not a stream of its own
    udp: tuple[float, ...] = ()       # jitter ms, lost, total, percent, out-of-order (UDP lines)


@dataclass(frozen=True)
class Iperf2Report:
    intervals: tuple[FlowInterval, ...]
    totals: dict[str, int]             # "fwd.receiver" -> bytes, from summary lines
    server_port: int | None
    lines: int
    spans: dict[str, float] = field(default_factory=dict)           # "fwd.receiver" -> summary seconds
    # "fwd.receiver" -> summary UDP fields (jitter ms, lost, total, percent, out-of-order), streams summed
    udp: dict[str, tuple[float, ...]] = field(default_factory=dict)


_TZ_STAMP = re.compile(r"^(\d{14})(\.\d+)?\s*([+-]\d{4}|[A-Z]{1,5})?$")
# 2.1.9+: the zone first, ``+0000:20240908113035.128`` (kubernetes' agnhost, test/e2e/network/util_iperf.go)
_ZONE_FIRST = re.compile(r"^([+-]\d{4}):(\d{14}(?:\.\d+)?)$")


def _stamp(text: str, utc: bool = False) -> float:
    """``20261122135653.848`` (local wall clock, or UTC with ``utc``: an iperf
    run under :data:`RUN_ENV`) -> epoch seconds.  A zone written after the
    stamp (2.1.9+: ``+0100``, ``UTC``) is honoured when it is numeric or
    UTC/GMT; other names are read as local time."""
    z = _ZONE_FIRST.match(text.strip())
    if z:
        text = z.group(2) + z.group(1)
    m = _TZ_STAMP.match(text.strip())
    if m and m.group(3):
        zone = m.group(3)
        t = _dt.datetime.strptime(m.group(1), "%Y%m%d%H%M%S")
        sub_s = float(m.group(2)) if m.group(2) else 0.0
        if zone in ("UTC", "GMT", "Z"):
            return t.replace(tzinfo=_dt.UTC).timestamp() + sub_s
        if zone[0] in "+-":
            off = _dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[3:5])) * (1 if zone[0] == "+" else -1)
            return t.replace(tzinfo=_dt.timezone(off)).timestamp() + sub_s
        text = m.group(1) + (m.group(2) or "")
    whole, _, frac = text.strip().partition(".")
    if len(whole) != 14 or not whole.isdigit():
        raise ValueError(f"bad timestamp {text!r}")
    t = _dt.datetime.strptime(whole, "%Y%m%d%H%M%S")
    sub = float("0." + frac) if frac else 0.0
    return (t.replace(tzinfo=_dt.UTC).timestamp() if utc else time.mktime(t.timetuple())) + sub


def parse_lines(text: str, *, strict: bool = True, skipped: list[str] | None = None,
                stamps_utc: bool = False) -> list[CsvLine]:
    """The CSV report lines.  ``strict=False`` skips lines that are not CSV
    (2.2's header line, banners a dual test prints) and lists them in
    ``skipped``; a 2.2-style line with start and end as separate fields is
    read too.  Sum lines (id -1 or port 0, 2.0.x ``-P``) are flagged."""
    out = []
    udp_named: bool | None = None       # a header line says whether the fields after speed are UDP's
    for n, raw in enumerate(text.splitlines(), 1):
        ln = raw.strip()
        if not ln:
            continue
        f = [x.strip() for x in ln.split(",")]
        if f[0] == "time" and "bytes" in f:
            # 2.2's header: its names say what the fields after speed are (jitter: UDP)
            udp_named = "jitter" in f
        if len(f) >= 10 and _is_num(f[6]) and _is_num(f[7]) and "-" not in f[6]:
            f = f[:6] + [f"{f[6]}-{f[7]}"] + f[8:]       # 2.2: start,end as two fields
        if len(f) < 9 or not f[0].lstrip("+-")[:1].isdigit():
            if strict:
                raise ToolError(f"line {n} is not iperf2 CSV: {ln[:120]!r}",
                                hint="run iperf with -y C (nicbench never reads its human text)")
            if skipped is not None:
                skipped.append(ln[:120])
            continue
        try:
            a, _, b = f[6].partition("-")
            sport = int(f[2]) if f[2].lstrip("-").isdigit() else 0
            dport = int(f[4]) if f[4].lstrip("-").isdigit() else 0
            ident = int(f[5])
            # UDP: jitter (ms, "%.3f"), lost, total, percent, out-of-order; an enhanced (-e) TCP
            # line has as many fields after speed, all whole numbers (write count, errors,
            # retries, cwnd, rtt): without a header, the jitter's decimal point tells them apart
            is_udp = udp_named if udp_named is not None else (len(f) >= 13 and "." in f[9])
            udp = tuple(float(x) for x in f[9:14]) if is_udp and len(f) >= 13 else ()
            out.append(CsvLine(_stamp(f[0], stamps_utc), f[1], sport, f[3], dport, ident, float(a), float(b), int(f[7]),
                               float(f[8]), is_sum=ident < 0, udp=udp))
        except (ValueError, OverflowError) as e:
            if strict:
                raise ToolError(f"line {n}: {e}: {ln[:120]!r}") from None
            if skipped is not None:
                skipped.append(ln[:120])
    return out


def _is_num(x: str) -> bool:
    try:
        float(x)
    except ValueError:
        return False
    return True


def _server_port(lines: list[CsvLine]) -> int | None:
    """The port present in every line.  With one flow both of its ports are;
    then the one outside Linux's ephemeral range (32768-60999) is the server's,
    and if that does not decide it we say so rather than guess."""
    common: set[int] | None = None
    for ln in lines:
        if ln.is_sum:
            continue
        ports = {ln.sport, ln.dport} - {0}
        common = ports if common is None else common & ports
    if not common:
        return None
    if len(common) == 1:
        return next(iter(common))
    fixed = [p for p in common if not 32768 <= p <= 60999]
    if len(fixed) == 1:
        return fixed[0]
    raise ToolError(f"cannot tell the server port from the CSV (candidates {sorted(common)})",
                    hint="pass the server port (nicbench import iperf2 --port N)")


def stamps_late(info: ToolInfo) -> bool:
    """iperf 2.1.8 stamps each CSV line one reporting interval late: with
    ``-i 0.5`` the 0.0-0.5 line of a test started at t carries t + 1.0, and
    the last line a time after the process has exited (recorded in
    tests/fixtures/iperf2/2.1.8/client_loopback_i0.5_stamps.*).  Only the
    version measured here is corrected; others are checked against the exit
    stamp at run time."""
    return tuple(info.version[:3]) == (2, 1, 8)


@damage_is_a_tool_error("iperf 2", "see the raw output file")
def parse(text: str, *, role: Literal["client", "server"], omit: float = 0.0,
          server_port: int | None = None, interval: float | None = None,
          stamp_lag: float = 0.0, strict: bool = True, stamps_utc: bool = False) -> Iperf2Report:
    """Parse one process's CSV.  ``role``: which iperf end wrote it.

    Intervals that start before ``omit`` seconds are marked omitted.  Streams of
    the same flow are summed per interval.  Wall-clock placement: each flow
    gets one anchor, the median of ``stamp - end`` over its interval lines, so
    one late stamp (seen in 2.1.8 output) cannot move an interval.
    ``stamp_lag``: seconds every stamp is late by (see :func:`stamps_late`).
    ``stamps_utc``: the stamps are UTC (a run under :data:`RUN_ENV`), not local time.
    """
    lines = parse_lines(text, strict=strict, stamps_utc=stamps_utc)
    port = server_port or _server_port(lines)
    # the engine server's address: where the first connection to the server port
    # goes (a dual test -d connects back to the client's port, same number)
    server_ip = next((ln.dst for ln in lines if not ln.is_sum and ln.dport == port and ln.sport != port), None)
    if lines and port is None:
        raise ToolError("cannot tell the server port from the CSV", hint="pass the server port")
    durations = sorted(ln.end - ln.start for ln in lines if ln.end > ln.start)
    nominal = interval or (statistics.median(durations) if durations else 1.0)
    by_flow: dict[tuple, list[CsvLine]] = defaultdict(list)
    for ln in lines:
        if ln.is_sum:
            continue        # -P sum lines repeat the streams' bytes
        by_flow[(ln.ident, ln.src, ln.sport, ln.dst, ln.dport)].append(ln)
    per_iv: dict[tuple, list[tuple[CsvLine, float]]] = defaultdict(list)
    totals: dict[str, int] = {}
    spans: dict[str, float] = {}
    udp: dict[str, tuple[float, ...]] = {}
    # the client's own connections to the server: a line of the client's file that
    # answers one of them from the server's port is the server's report of it (UDP)
    mine = {(ln.src, ln.sport) for ln in lines if not ln.is_sum and ln.dport == port and ln.sport != port}
    for _key, fl in by_flow.items():
        if role == "client" and fl[0].sport == port and (fl[0].dst, fl[0].dport) in mine:
            flow, side = "fwd", "receiver"      # the server's report the client printed
        else:
            if server_ip is not None and fl[0].sport != port:
                flow = "fwd" if (fl[0].dst == server_ip and fl[0].dport == port) else "rev"
            else:
                flow = "rev" if fl[0].sport == port else "fwd"
            # the engine client sends fwd; the engine server sends rev
            side = "sender" if (flow == "fwd") == (role == "client") else "receiver"
        kept = []
        for i, ln in enumerate(fl):
            summary = len(fl) == 1 or (ln.start == 0.0 and i == len(fl) - 1 and i > 0) \
                or (ln.end - ln.start) > 1.5 * nominal
            if summary:
                k = f"{flow}.{side}"
                totals[k] = totals.get(k, 0) + ln.bytes
                spans[k] = max(spans.get(k, 0.0), ln.end - ln.start)
                if ln.udp:
                    udp[k] = _udp_summed(udp.get(k), ln.udp)
            else:
                kept.append(ln)
        if kept:
            anchor = statistics.median(ln.stamp - ln.end for ln in kept) - stamp_lag
            for ln in kept:
                per_iv[(flow, side, round(ln.start, 3), round(ln.end, 3))].append((ln, anchor))
    intervals = []
    for (flow, side, start, end), lns in sorted(per_iv.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
        abs_start = statistics.median(anchor + ln.start for ln, anchor in lns)
        packets, lost, jitter, ooo = _udp_fields([ln for ln, _ in lns], side)
        intervals.append(FlowInterval(start=start, end=end, flow=flow, side=side,
                                      bytes=sum(ln.bytes for ln, _ in lns), streams=len(lns),
                                      omitted=start < omit - 1e-9, abs_start=abs_start, packets=packets,
                                      lost=lost, jitter_s=jitter, out_of_order=ooo))
    return Iperf2Report(tuple(intervals), totals, port, len(lines), spans, udp)


def _udp_summed(a: tuple[float, ...] | None, b: tuple[float, ...]) -> tuple[float, ...]:
    """Two streams' UDP summary fields as one flow's: the worst jitter, lost,
    total and out-of-order summed, the percent recomputed.  A sender's total
    (-1: it has none) stays -1."""
    if a is None:
        return b
    if len(a) < 4 or len(b) < 4 or a[2] < 0 or b[2] < 0:
        return a if len(a) >= len(b) else b
    lost, total = a[1] + b[1], a[2] + b[2]
    out = (max(a[0], b[0]), lost, total, 100.0 * lost / total if total else 0.0)
    return out + ((a[4] + b[4],) if len(a) >= 5 and len(b) >= 5 else ())


def _udp_fields(lines: list[CsvLine], side: str) -> tuple[int | None, int | None, float | None, int | None]:
    """A UDP interval's (packets, lost, jitter s, out-of-order), streams summed.

    The receiver's lines carry jitter (ms), lost, total (datagrams expected by
    sequence number), percent and out-of-order; on the sender's, total is the
    datagrams sent and the other fields are zeros, not measurements.  TCP
    lines (no UDP fields): all None."""
    udp = [ln.udp for ln in lines if len(ln.udp) >= 3 and ln.udp[2] >= 0]
    if not udp or len(udp) != len(lines):
        return None, None, None, None
    packets = int(sum(u[2] for u in udp))
    if side != "receiver":
        return packets, None, None, None
    ooo = int(sum(u[4] for u in udp)) if all(len(u) >= 5 for u in udp) else None
    return packets, int(sum(u[1] for u in udp)), max(u[0] for u in udp) / 1000, ooo


def finished_flows(text: str, interval: float) -> int:
    """How many flows already printed their whole-test summary line.

    iperf2 flushes every report line, so once each expected flow has its
    summary the server holds nothing more for us and can be stopped at once
    (SIGINT/SIGTERM cost it ~0.9 s of listener timeout).
    """
    n = 0
    for ln in text.splitlines():
        f = ln.split(",")
        if len(f) < 9:
            continue
        a, _, b = f[6].partition("-")
        try:
            if float(a) == 0.0 and float(b) > 1.5 * interval:
                n += 1
        except ValueError:
            continue
    return n


def lifetime(duration: float, omit: float, margin: float) -> float:
    return math.ceil(duration + omit + margin)
