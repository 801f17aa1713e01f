"""sockperf (3.6+): argv builders and pure parsers of its ``--full-log`` file.

sockperf's client times every answered request with the TSC and, with
``--full-log FILE``, writes the run's summary followed by one CSV line per
request of the timed window::

    packet, txTime(sec), rxTime(sec), rtt(usec)
    0, 2.402144067, 2.402202967, 58.900

``txTime``/``rxTime`` are seconds since the client process started (TSC
ticks from a base taken at start-up, calibrated against CLOCK_MONOTONIC over
0.1 s), so only differences inside one run mean anything (clock "process").

Known traps (recorded in tests/fixtures/sockperf/3.7):
- sockperf exits 0 after rejecting an argument, after "connection refused" and
  when no reply came: failures are read from its text, never from the exit code;
- without ``--full-rtt`` every number is RTT/2 (the header says ``latency``):
  the parser doubles them and says so (``halved``); the builders always ask RTT;
- ``-t`` takes whole seconds only; the test starts ~2 s after the process
  (its "Warmup stage" of dummy messages), its first 0.4 s are a warm-up and
  ~50 ms at the end a cool-down, both outside the timed window (``[Valid
  Duration]``): the timed requests of ``-t 2`` are sent 2.4 .. 3.95 s after
  the process started;
- ``--no-rdtsc`` (CLOCK_MONOTONIC instead of the TSC) makes 3.7 report "No
  valid observations found": not used;
- the server has no lifetime option (it runs until a signal: see
  :func:`server_argv`) and accepts messages up to 65507 B unless given ``-m``;
  a larger TCP message makes it drop the connection;
- message size is 14 B at least (sockperf's own header), 65507 B at most for
  UDP over IPv4, 1048575 B for TCP (sockperf's cap).

Percentiles as sockperf states them: the sample of rank ``int(0.5 + p/100 * n)``
(1-based) of the sorted RTTs, e.g. p99 of 1549 samples is the 1534th.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from ..core.errors import InputError, ToolError
from .base import ToolInfo, damage_is_a_tool_error
from .rtt import UDP_MAX_PAYLOAD, Protocol, RttSamples, StatedSummary, bounded, check_size, require_version

NAME = "sockperf"
PACKAGE = "sockperf"
MIN_VERSION = (3, 6)
MIN_VERSION_REASON = "--full-rtt (whole round trips rather than RTT/2 in the per-request log) arrived in 3.6"
MIN_SIZE = 14                  # sockperf's own message header
TCP_MAX_SIZE = 1048575         # sockperf's cap on -m
SERVER_DEFAULT_MAX = 65507     # what a server accepts without -m
PRE_TEST = 2.0                 # s from process start to the test's start: its "Warmup stage" (measured: the
                               # first timed request at 2.40 s, -t 2 exits after 4.2 s; fixtures/sockperf/3.7)
WARMUP = 0.4                   # s, sockperf's fixed warm-up before the timed window
COOLDOWN = 0.05                # s, about what 3.7 leaves out at the end (measured: 1.55 s valid of -t 2)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_FLOAT = r"[-+]?\d+(?:\.\d+)?"


def version_argv() -> list[str]:
    return ["sockperf", "--version"]


def info_from(version_out: str | None, host: str) -> ToolInfo:
    """``sockperf --version`` output (None: command not found) -> facts, or
    PreflightError naming ``host``."""
    return require_version(NAME, version_out, host, MIN_VERSION, MIN_VERSION_REASON, PACKAGE)


def check_message_size(size: int, protocol: Protocol) -> None:
    high = UDP_MAX_PAYLOAD if protocol == "udp" else TCP_MAX_SIZE
    why_high = "an IPv4 UDP datagram's payload" if protocol == "udp" else "sockperf's cap on -m"
    check_size(NAME, size, protocol, MIN_SIZE, high, "sockperf's own header", why_high)


def server_argv(*, bind: str, port: int, protocol: Protocol, max_size: int, lifetime: float) -> list[str]:
    """A server on ``bind:port`` that stops after ``lifetime`` s (SIGINT by
    ``timeout``: sockperf's server has no lifetime of its own).  ``max_size``:
    the largest message any client will send (``-m`` when above 65507)."""
    check_message_size(max_size, protocol)
    argv = ["sockperf", "server", "-i", bind, "-p", str(port)]
    if protocol == "tcp":
        argv.append("--tcp")
    if max_size > SERVER_DEFAULT_MAX:
        argv += ["-m", str(max_size)]
    return bounded(argv, lifetime)


def client_argv(*, target: str, port: int, protocol: Protocol, size: int, duration: int, log_path: str,
                rate: int | None = None, mode: str = "ping-pong", reply_every: int = 1) -> list[str]:
    """A client that runs ``duration`` whole seconds (warm-up included) and
    writes every timed request to ``log_path``.

    ``rate``: requests per second (``--mps``); None = back to back (ping-pong
    only).  ``mode``: ``ping-pong`` (every request answered) or ``under-load``
    (``rate`` requests/s, one in ``reply_every`` answered and timed).
    Hard-bounded by ``timeout`` (duration + 10 s).
    """
    check_message_size(size, protocol)
    if isinstance(duration, bool) or not isinstance(duration, int) or duration < 1:
        raise InputError(f"sockperf: duration must be whole seconds >= 1, not {duration!r} (its -t)",
                         where="duration", hint="round the point duration up to whole seconds")
    if mode not in ("ping-pong", "under-load"):
        raise InputError(f"sockperf: unknown mode {mode!r}", where="mode", hint="ping-pong or under-load")
    if mode == "under-load" and rate is None:
        raise InputError("sockperf: under-load needs a rate (messages per second)", where="rate")
    argv = ["sockperf", mode, "-i", target, "-p", str(port), "-m", str(size), "-t", str(duration),
            f"--mps={rate if rate is not None else 'max'}", "--full-rtt", "--full-log", log_path]
    if protocol == "tcp":
        argv.insert(2, "--tcp")
    if mode == "under-load":
        argv += ["--reply-every", str(reply_every)]
    return bounded(argv, duration + 10)


@dataclass(frozen=True)
class SockperfRun:
    """One client run.  Every time in seconds, whole round trips (also when
    sockperf printed RTT/2: ``halved`` says it did and nicbench doubled)."""

    samples: RttSamples          # the timed window's requests; clock "process"
    summary: StatedSummary       # sockperf's own statistics of that window
    halved: bool
    params: str                  # "--mps=1000 --burst=1 ..." as sockperf restates them
    warmup: float | None         # s (None: not printed, before 3.5)
    total_sent: int              # whole run, warm-up included
    total_received: int


_ERRORS = [
    (re.compile(r"sockperf: '(-[\w-]+)' (Invalid .*)"), "sockperf rejected its argument '{0}': {1}",
     "fix the argument sockperf names (it exits 0 all the same)"),
    (re.compile(r"sockperf: ERROR: (.*)"), "sockperf: {0}", "is the sockperf server running and reachable?"),
    (re.compile(r"sockperf: (No messages were received from the server.*)"), "sockperf: {0}",
     "no reply at all: server down, wrong address/port or a firewall"),
    (re.compile(r"sockperf: (No valid observations found.*)"), "sockperf: {0}",
     "the timed window was empty: run longer (-t counts the 0.4 s warm-up)"),
]


def check_text(text: str, where: str | None = None) -> None:
    """ToolError for the failures sockperf reports only in text (stdout,
    stderr or the full log), since its exit code is 0 for them."""
    for raw in text.splitlines():
        ln = _ANSI.sub("", raw).strip()
        for rx, msg, hint in _ERRORS:
            m = rx.search(ln)
            if m:
                raise ToolError(msg.format(*m.groups()), where=where, hint=hint)


def _num(rx: str, text: str, what: str, where: str | None) -> re.Match[str]:
    m = re.search(rx, text)
    if not m:
        raise ToolError(f"sockperf: no {what} line in its output", where=where,
                        hint="was this written by sockperf >= 3.6 ping-pong/under-load?")
    return m


@damage_is_a_tool_error("sockperf", "see the raw output file: was sockperf killed mid-log?")
def parse_full_log(text: str, where: str | None = None) -> SockperfRun:
    """The file ``--full-log`` wrote: summary + one line per timed request.

    ToolError when sockperf reported a failure, when the table is missing or
    malformed, or when its count or RTT column disagrees with the summary.
    """
    check_text(text, where)
    clean = _ANSI.sub("", text)
    if re.search(r"Printing statistics for Server No: [1-9]", clean):
        raise ToolError("sockperf: statistics of more than one server in one log", where=where,
                        hint="one server per client run")
    header = re.search(r"^packet, txTime\(sec\), rxTime\(sec\), (rtt|latency)\(usec\)\s*$", clean, re.M)
    if not header:
        raise ToolError("sockperf: no per-request table in the full log", where=where,
                        hint="run the client with --full-log FILE")
    halved = header.group(1) == "latency"
    factor = 2.0 if halved else 1.0
    summary, run = _summary(clean[:header.start()], factor, where)
    rtt: list[float] = []
    sent: list[float] = []
    for n, raw in enumerate(clean[header.end():].splitlines(), 1):
        ln = raw.strip()
        if not ln:
            continue
        if ln.startswith("---"):
            break
        f = [x.strip() for x in ln.split(",")]
        try:
            idx, tx, rx, col = int(f[0]), float(f[1]), float(f[2]), float(f[3])
        except (ValueError, IndexError):
            raise ToolError(f"sockperf: full-log line {n} is not 'packet, tx, rx, rtt': {ln[:80]!r}",
                            where=where) from None
        if idx != len(rtt):
            raise ToolError(f"sockperf: full-log line {n} has packet {idx}, expected {len(rtt)}", where=where)
        # the column is (rx - tx) in us (halved without --full-rtt); both are
        # printed to the ns, so they agree to ~1.5 ns unless the file is damaged
        if abs((rx - tx) * 1e6 / factor - col) > 0.0025:
            raise ToolError(f"sockperf: full-log line {n}: rtt column {col} us disagrees with rx - tx", where=where)
        rtt.append(_us(f[3], factor))
        sent.append(tx)
    if len(rtt) != summary.count:
        raise ToolError(f"sockperf: {len(rtt)} per-request lines but the summary counts {summary.count}",
                        where=where, hint="a truncated full log?")
    return SockperfRun(samples=RttSamples(tuple(rtt), tuple(sent), "process"), summary=summary, halved=halved,
                       params=run.params, warmup=run.warmup, total_sent=run.total_sent,
                       total_received=run.total_received)


@damage_is_a_tool_error("sockperf", "see the raw output file")
def parse_summary(text: str, where: str | None = None) -> tuple[StatedSummary, bool]:
    """sockperf's statistics from its stdout (no per-request samples);
    (summary, halved)."""
    check_text(text, where)
    clean = _ANSI.sub("", text)
    halved = re.search(r"avg-lat(?:ency)?=", clean) is not None
    summary, _ = _summary(clean, 2.0 if halved else 1.0, where)
    return summary, halved


class _Run(NamedTuple):
    params: str
    warmup: float | None           # s (None: before 3.5, which did not print it)
    total_sent: int
    total_received: int


def _us(text: str, factor: float) -> float:
    """sockperf's microseconds -> seconds, rounded once (``"0.043e-6"`` parsed
    as a whole is the double nearest the decimal; x * 1e-6 is not always)."""
    return float(text + "e-6") * factor


def _summary(clean: str, factor: float, where: str | None) -> tuple[StatedSummary, _Run]:
    # (before 3.5 no warm-up time; before 3.6 "avg-lat=" with a space, "<MAX>" without brackets from 3.8)
    total = _num(r"\[Total Run\] RunTime=(" + _FLOAT + r") sec;(?: Warm up time=(\d+) msec;)? SentMessages=(\d+); "
                 r"ReceivedMessages=(\d+)", clean, "[Total Run]", where)
    valid = _num(r"\[Valid Duration\] RunTime=(" + _FLOAT + r") sec; SentMessages=(\d+); ReceivedMessages=(\d+)",
                 clean, "[Valid Duration]", where)
    avg = _num(r"====> avg-(?:rtt|latency|lat)=\s*(" + _FLOAT + r") \(std-dev=(" + _FLOAT + r")", clean, "avg", where)
    counts = _num(r"# dropped messages = (\d+); # duplicated messages = (\d+); # out-of-order messages = (\d+)",
                  clean, "dropped/duplicated/out-of-order", where)
    obs = _num(r"Total (\d+) observations", clean, "observations", where)
    mx = _num(r"<?MAX>? observation =\s*(" + _FLOAT + ")", clean, "<MAX>", where)
    mn = _num(r"<?MIN>? observation =\s*(" + _FLOAT + ")", clean, "<MIN>", where)
    pct = {float(p): _us(v, factor)
           for p, v in re.findall(r"---> percentile\s+(" + _FLOAT + r")\s*=\s*(" + _FLOAT + ")", clean)}
    params = re.search(r"test was performed using the following parameters: (.*)", clean)
    duration = float(valid.group(1))
    received = int(valid.group(3))
    summary = StatedSummary(
        count=int(obs.group(1)), sent=int(valid.group(2)), lost=int(counts.group(1)), duration=duration,
        rate=received / duration if duration > 0 else None,
        mean=_us(avg.group(1), factor), stdev=_us(avg.group(2), factor),
        min=_us(mn.group(1), factor), max=_us(mx.group(1), factor), median=pct.get(50.0),
        percentiles=pct,
        counters={"dropped": int(counts.group(1)), "duplicated": int(counts.group(2)),
                  "out_of_order": int(counts.group(3))})
    run = _Run(params.group(1).strip() if params else "", int(total.group(2)) / 1000.0 if total.group(2) else None,
               int(total.group(3)), int(total.group(4)))
    return summary, run
