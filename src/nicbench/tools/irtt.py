"""irtt (0.9+): argv builders and a pure parser of its ``-o FILE.json`` output.

irtt sends isochronous UDP requests (one every ``interval``) and records each
round trip with the client's wall and monotonic send/receive times and, unless
``--tstamp=none``, the server's receive and send times.  From those:

- ``rtt`` as irtt states it: client receive - client send (monotonic) *minus the
  server's processing time* when the server stamped both ends;
- ``client_rtt``: client receive - client send, the server's turnaround
  included, which is what sockperf and iperf 2 time (use it to compare engines);
- one-way ``send_delay``/``receive_delay`` from the wall clocks: meaningful only
  when the two hosts' clocks agree (always in one machine's lab; on real hosts
  only as far as their clock synchronisation goes).

Known traps (recorded in tests/fixtures/irtt/0.9.0):
- the server sizes its receive buffer from an MTU: the bound interface's when
  bound to an address, the largest in the namespace (lo: 64 KiB) when bound to
  ``:port``; a longer packet is dropped without a word (``udp_l4096_bound_addr``:
  100 % loss, exit 0).  :func:`server_argv` binds ``:port``;
- the server refuses intervals below 10 ms unless started with ``-i 0``;
- ``-o`` without ``.json`` writes gzip; ``-d``/``-i`` are Go durations;
- ``lost`` is a string (``"false"``, ``"true"``, ``"true_up"``, ``"true_down"``)
  in 0.9.0 although its manual shows booleans: both are read;
- a refused connection fails before any JSON is written (stderr ``Error: ...``);
  a server that dies mid-test ends the client's test early: fewer requests
  sent than ``duration / interval`` (:func:`check_complete`);
- ``-l`` counts irtt's own header: 60 B with both server timestamps and the
  default stats; a smaller ``-l`` is silently raised to it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.errors import InputError, ToolError
from .base import ToolInfo, damage_is_a_tool_error
from .rtt import UDP_MAX_PAYLOAD, RttSamples, StatedSummary, bounded, check_size, require_version

NAME = "irtt"
PACKAGE = "irtt"
MIN_VERSION = (0, 9, 0)
MIN_VERSION_REASON = "0.9.0 put the version and the test parameters (config.params) into the JSON output"
JSON_FORMAT = 1
MIN_SIZE = 60          # irtt's header with server send+receive timestamps (wall+monotonic) and stats
DEFAULT_PORT = 2112


def version_argv() -> list[str]:
    return ["irtt", "version"]


def info_from(version_out: str | None, host: str) -> ToolInfo:
    """``irtt version`` output (None: command not found) -> facts, or
    PreflightError naming ``host``."""
    return require_version(NAME, version_out, host, MIN_VERSION, MIN_VERSION_REASON, PACKAGE)


def check_message_size(size: int) -> None:
    check_size(NAME, size, "udp", MIN_SIZE, UDP_MAX_PAYLOAD, "irtt's own header with server timestamps",
               "an IPv4 UDP datagram's payload")


def _go_duration(seconds: float) -> str:
    return f"{int(round(seconds * 1e9))}ns"


def server_argv(*, port: int = DEFAULT_PORT, lifetime: float) -> list[str]:
    """A server on every address of its namespace (``:port``, so that it takes
    packets up to 64 KiB: see the module notes), any interval (``-i 0``),
    stopped after ``lifetime`` s by ``timeout`` (irtt's own ``-d`` bounds each
    client's test, not the server)."""
    return bounded(["irtt", "server", "-b", f":{port}", "-i", "0", "-d", _go_duration(lifetime)], lifetime)


def client_argv(*, target: str, port: int = DEFAULT_PORT, size: int, interval: float, duration: float,
                out_path: str, wait: float = 0.5, timer: str | None = None) -> list[str]:
    """One request every ``interval`` s for ``duration`` s, ``size`` bytes of
    UDP payload (irtt's header included), JSON to ``out_path`` (must end in
    ``.json``: irtt gzips anything else); then ``wait`` s for late replies.
    ``timer``: irtt's ``--timer`` (None: its default "comp", which sleeps;
    "busy" spins a core like sockperf's rate limiter, see bench/latency_engines.md).
    Hard-bounded by ``timeout`` (duration + wait + 15 s: connecting may take
    irtt's 1+2+4+8 s of open timeouts)."""
    check_message_size(size)
    if timer is not None and timer.split(":")[0] not in ("simple", "comp", "hybrid", "busy"):
        raise InputError(f"irtt: unknown timer {timer!r}", where="timer", hint="simple, comp, hybrid[:f] or busy")
    if not out_path.endswith(".json"):
        raise InputError(f"irtt: output path {out_path!r} must end in .json (irtt gzips any other name)",
                         where="out_path")
    if not (interval > 0 and duration > 0 and wait >= 0):
        raise InputError(f"irtt: interval {interval} s, duration {duration} s and wait {wait} s must be positive",
                         where="interval")
    argv = ["irtt", "client", "-i", _go_duration(interval), "-d", _go_duration(duration), "-l", str(size),
            f"--wait={_go_duration(wait)}", "-Q", "-o", out_path, f"{target}:{port}"]
    if timer is not None:
        argv.insert(-1, f"--timer={timer}")
    return bounded(argv, duration + wait + 15)


@dataclass(frozen=True)
class IrttRun:
    """One client run; every time in seconds.

    Per answered request, in send order: ``samples`` (irtt's rtt, send times
    on the wall clock), ``client_rtt``, and when the server stamped them
    ``server_time`` (its turnaround) and the one-way delays.  ``lost``: the
    sequence numbers never answered, with irtt's verdict on the direction.
    """

    samples: RttSamples
    client_rtt: tuple[float, ...]
    server_time: tuple[float, ...] | None
    send_delay: tuple[float, ...] | None
    receive_delay: tuple[float, ...] | None
    lost: Mapping[int, str]             # seqno -> "true" | "true_up" | "true_down"
    summary: StatedSummary
    interval: float                     # s, as asked
    duration: float                     # s, as asked
    length: int                         # B per packet, irtt header included
    expected: int                       # requests duration/interval would send

    @property
    def sent(self) -> int:
        return self.summary.sent or 0


def check_stderr(text: str, where: str | None = None) -> None:
    """ToolError for irtt's ``Error: ...`` line (it writes no JSON then)."""
    for ln in text.splitlines():
        if ln.strip().startswith("Error:"):
            raise ToolError(f"irtt: {ln.strip()[6:].strip()}", where=where,
                            hint="is the irtt server running on that address and port?")


def _ns(v: Any, what: str, where: str | None) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ToolError(f"irtt: {what} is not an integer of nanoseconds: {v!r}", where=where)
    return v


def _get(d: Any, *keys: str, where: str | None) -> Any:
    cur = d
    for k in keys:
        if not isinstance(cur, dict) or k not in cur:
            raise ToolError(f"irtt: JSON has no {'.'.join(keys)}", where=where,
                            hint="was this written by irtt >= 0.9 with -o FILE.json?")
        cur = cur[k]
    return cur


@damage_is_a_tool_error("irtt", "see the raw output file: was irtt killed mid-report?")
def parse(text: str, where: str | None = None) -> IrttRun:
    """irtt's JSON.  ToolError when it is not irtt 0.9 JSON, when nothing
    was answered, or when a round trip is inconsistent."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ToolError(f"irtt: output is not JSON ({e})", where=where,
                        hint="irtt writes JSON only with -o FILE.json; gzip for other names") from None
    fmt = _get(doc, "version", "json_format", where=where)
    if fmt != JSON_FORMAT:
        raise ToolError(f"irtt: JSON format {fmt}, this parser reads {JSON_FORMAT}", where=where,
                        hint="irtt 0.9.x writes format 1")
    params = _get(doc, "config", "params", where=where)
    stats = _get(doc, "stats", where=where)
    trips = _get(doc, "round_trips", where=where)
    interval = _ns(_get(params, "interval", where=where), "config.params.interval", where) / 1e9
    duration = _ns(_get(params, "duration", where=where), "config.params.duration", where) / 1e9
    sent_n = _ns(_get(stats, "packets_sent", where=where), "stats.packets_sent", where)
    recv_n = _ns(_get(stats, "packets_received", where=where), "stats.packets_received", where)
    if sent_n == 0 or recv_n == 0:
        raise ToolError(f"irtt: none of {sent_n} requests was answered", where=where,
                        hint="server down, a firewall, or packets longer than the server's buffer "
                             "(bind the server to :port)")
    rtt: list[float] = []
    sent: list[float] = []
    client_rtt: list[float] = []
    server_time: list[float] = []
    send_delay: list[float] = []
    receive_delay: list[float] = []
    lost: dict[int, str] = {}
    for i, rt in enumerate(trips):
        if not isinstance(rt, dict):
            raise ToolError(f"irtt: round_trips[{i}] is not an object", where=where)
        flag = str(rt.get("lost")).lower()
        seq = _ns(rt.get("seqno"), f"round_trips[{i}].seqno", where)
        if flag != "false":
            if flag not in ("true", "true_up", "true_down"):
                raise ToolError(f"irtt: round_trips[{i}].lost is {rt.get('lost')!r}", where=where)
            lost[seq] = flag
            continue
        ts = rt.get("timestamps") or {}
        c_send = ts.get("client", {}).get("send", {})
        c_recv = ts.get("client", {}).get("receive", {})
        s_recv = ts.get("server", {}).get("receive", {})
        s_send = ts.get("server", {}).get("send", {})
        delay = rt.get("delay") or {}
        r = _ns(delay.get("rtt"), f"round_trips[{i}].delay.rtt", where)
        full = _ns(c_recv.get("monotonic"), f"round_trips[{i}] client receive", where) \
            - _ns(c_send.get("monotonic"), f"round_trips[{i}] client send", where)
        turn = None
        if "monotonic" in s_recv and "monotonic" in s_send:
            turn = _ns(s_send["monotonic"], "server send", where) - _ns(s_recv["monotonic"], "server receive", where)
        # irtt's rtt is the client's time less the server's turnaround: check it
        if r != full - (turn or 0) or r < 0:
            raise ToolError(f"irtt: round_trips[{i}]: rtt {r} ns != client time {full} - server time {turn or 0}",
                            where=where)
        rtt.append(r / 1e9)
        client_rtt.append(full / 1e9)
        sent.append(_ns(c_send.get("wall"), f"round_trips[{i}] client send wall", where) / 1e9)
        if turn is not None:
            server_time.append(turn / 1e9)
        if "send" in delay and "receive" in delay:
            send_delay.append(_ns(delay["send"], "delay.send", where) / 1e9)
            receive_delay.append(_ns(delay["receive"], "delay.receive", where) / 1e9)
    n = len(rtt)
    if n != _ns(_get(stats, "rtt", "n", where=where), "stats.rtt.n", where):
        raise ToolError(f"irtt: {n} answered round trips but stats.rtt.n says {stats['rtt']['n']}", where=where)
    st = {k: _ns(_get(stats, "rtt", k, where=where), f"stats.rtt.{k}", where) for k in ("mean", "min", "max")}
    st["stddev"] = _ns(stats["rtt"].get("stddev", 0), "stats.rtt.stddev", where)
    if "median" in stats["rtt"]:
        st["median"] = _ns(stats["rtt"]["median"], "stats.rtt.median", where)
    dur_ns = stats.get("duration")
    dur = dur_ns / 1e9 if isinstance(dur_ns, int) and dur_ns > 0 else None
    counters = {k: int(stats[k]) for k in ("duplicates", "late_packets", "server_packets_received", "timer_misses")
                if isinstance(stats.get(k), int)}
    summary = StatedSummary(
        count=n, sent=sent_n, lost=sent_n - recv_n + int(stats.get("duplicates", 0) or 0), duration=dur,
        rate=n / dur if dur else None,
        mean=st["mean"] / 1e9, stdev=st["stddev"] / 1e9, min=st["min"] / 1e9, max=st["max"] / 1e9,
        median=st["median"] / 1e9 if "median" in st else None,
        percentiles={50.0: st["median"] / 1e9} if "median" in st else {}, counters=counters)
    return IrttRun(
        samples=RttSamples(tuple(rtt), tuple(sent), "epoch"), client_rtt=tuple(client_rtt),
        server_time=tuple(server_time) if len(server_time) == n else None,
        send_delay=tuple(send_delay) if len(send_delay) == n else None,
        receive_delay=tuple(receive_delay) if len(receive_delay) == n else None,
        lost=lost, summary=summary, interval=interval, duration=duration,
        length=_ns(_get(params, "length", where=where), "config.params.length", where),
        expected=int(math.floor(duration / interval + 1e-9)) if interval > 0 else 0)


def timer_misses(run: IrttRun) -> int:
    """Sends irtt's own timer skipped because it woke too late (``stats.timer_misses``):
    on a busy host its sleeping timer misses sends rather than sending late."""
    return int(run.summary.counters.get("timer_misses", 0))


def check_complete(run: IrttRun, tolerance: float = 0.05, where: str | None = None) -> None:
    """ToolError when the client's sends and its timer's misses together
    account for fewer than (1 - tolerance) of the requests ``duration /
    interval`` promises: its test ended early (the server went away).  Sends
    the timer missed (a busy host) are not an early end: the caller says how
    many (:func:`timer_misses`) with the rate achieved."""
    if run.sent + timer_misses(run) < run.expected * (1 - tolerance):
        raise ToolError(f"irtt: sent {run.sent} of {run.expected} requests ({run.duration:g} s every "
                        f"{run.interval * 1e3:g} ms, {timer_misses(run)} missed by its timer): the test ended early",
                        where=where, hint="did the server stop?")
