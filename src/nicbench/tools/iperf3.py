"""iperf3: argv builders and a pure parser of its ``-J`` output.

Known traps handled here:
- failures are reported in an ``"error"`` key of otherwise valid JSON;
- text can surround the JSON (warnings): the report is the object opening at a
  line start, never a nested object of a damaged report;
- ``--bidir`` output repeats keys in some versions: we read per-stream entries and
  their ``sender`` flag, never the ``sum*`` keys, so repeats cannot hide data;
- iperf3 < 3.16 has no ``--skip-rx-copy`` and is single-threaded: features are
  detected from ``--help``, never assumed from the plan;
- ``-t`` and ``-O`` are whole seconds; ``-P`` is capped at 128 per process.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

import msgspec

from ..core.errors import ToolError
from .base import FlowInterval, FlowRow, MinVersion, ToolInfo, damage_is_a_tool_error, parse_version

NAME = "iperf3"
MAX_STREAMS = 128

_FEATURES = {"--skip-rx-copy": "skip_rx_copy", "--bidir": "bidir", "--zerocopy": "zerocopy",
             "--get-server-output": "server_output", "--json-stream": "json_stream"}


# From iperf3's release notes: 3.10 fixed garbled JSON output (#1086, #1118,
# #1143) and --reverse tests that did not terminate (#982); 3.11 renamed the
# --bidir reverse channel's JSON objects (#952) to the names nicbench reads.
MIN_VERSION = MinVersion("iperf3", (3, 10), "older releases can print garbled JSON and hang in --reverse tests "
                                            "(fixed in 3.10: iperf3 issues #1086, #1118, #1143, #982)")
MIN_BIDIR = MinVersion("iperf3", (3, 11), "--bidir reports name their reverse channel as nicbench reads it only "
                                          "from 3.11 on (iperf3 issue #952)")


def info_from(version_out: str, help_out: str) -> ToolInfo:
    """Tool facts from ``iperf3 --version`` and ``iperf3 --help`` text."""
    first = version_out.strip().splitlines()[0] if version_out.strip() else ""
    feats = {name for flag, name in _FEATURES.items() if flag in help_out}
    return ToolInfo(NAME, parse_version(first), first, frozenset(feats))


def server_argv(port: int, interval: float = 1.0) -> list[str]:
    """A one-off server (``-1``): it exits by itself after one test.

    The server reports at its own ``-i``, not the client's: pass the same.
    """
    return ["iperf3", "-s", "-1", "-J", "-p", str(port), "-i", f"{interval:g}"]


def client_argv(info: ToolInfo, *, target: str, port: int, duration: float, omit: float,
                interval: float, io_size: int, streams: int, mode: str,
                zerocopy: bool = False, no_delay: bool = False, skip_rx_copy: bool = False,
                window: int | None = None, congestion: str | None = None) -> list[str]:
    """``mode``: fwd (client sends), rev (``-R``), bidir (``--bidir``)."""
    if not 1 <= streams <= MAX_STREAMS:
        raise ValueError(f"iperf3 takes 1..{MAX_STREAMS} streams per process, not {streams}")
    argv = ["iperf3", "-c", target, "-p", str(port),
            "-t", str(int(math.ceil(duration))), "-O", str(int(math.ceil(omit))),
            "-i", f"{interval:g}", "-l", str(io_size), "-P", str(streams),
            "-J", "--get-server-output"]
    if mode == "rev":
        argv.append("-R")
    elif mode == "bidir":
        if not info.has("bidir"):
            raise ToolError(f"iperf3 {info.version_str} has no --bidir", hint="install iperf3 >= 3.7")
        argv.append("--bidir")
    if zerocopy:
        argv.append("-Z")
    if no_delay:
        argv.append("-N")
    if skip_rx_copy:
        argv.append("--skip-rx-copy")
    if window:
        argv += ["-w", str(window)]
    if congestion:
        argv += ["-C", congestion]
    return argv


def udp_client_argv(info: ToolInfo, *, target: str, port: int, duration: float, omit: float,
                    interval: float, size: int, streams: int, mode: str, rate_bps: float | None,
                    window: int | None = None) -> list[str]:
    """A UDP test: ``rate_bps`` is bit/s of UDP payload *per stream* (iperf3's
    ``-b``; left out, iperf3 would send 1 Mbit/s), None for unpaced (``-b 0``);
    ``size`` is the payload bytes of each datagram (``-l``, 16..65507)."""
    if not 1 <= streams <= MAX_STREAMS:
        raise ValueError(f"iperf3 takes 1..{MAX_STREAMS} streams per process, not {streams}")
    argv = ["iperf3", "-c", target, "-p", str(port), "-u", "-b", "0" if rate_bps is None else f"{rate_bps:.0f}",
            "-t", str(int(math.ceil(duration))), "-O", str(int(math.ceil(omit))),
            "-i", f"{interval:g}", "-l", str(size), "-P", str(streams), "-J", "--get-server-output"]
    if mode == "rev":
        argv.append("-R")
    elif mode == "bidir":
        if not info.has("bidir"):
            raise ToolError(f"iperf3 {info.version_str} has no --bidir", hint="install iperf3 >= 3.7")
        argv.append("--bidir")
    if window:
        argv += ["-w", str(window)]
    return argv


@dataclass(frozen=True)
class UdpTotal:
    """One UDP flow and side over the measured part of a test, as iperf3's end
    report gives it.  The receiver's ``packets`` are those it expected by
    sequence number, ``lost`` the gaps; the sender's are the datagrams sent
    (its own lost and out-of-order are echoes of the receiver's: left out)."""

    packets: int | None           # None: iperf3 printed a count that cannot be true (see count)
    lost: int | None = None
    out_of_order: int | None = None
    jitter_s: float | None = None
    streams: int = 1


@dataclass(frozen=True)
class Iperf3Report:
    version: str | None
    error: str | None
    protocol: str | None
    num_streams: int | None
    blksize: int | None
    duration: float | None
    omit: float | None
    reverse: bool
    bidir: bool
    timesecs: int | None
    intervals: tuple[FlowInterval, ...]
    has_server_output: bool
    totals: dict[str, int]           # "fwd.sender" -> bytes, from per-stream end entries
    last_end: float = 0.0            # end of this process's own last interval, on its clock
    peer_last_end: float = 0.0       # the same for the server's intervals, on the server's clock
    udp: dict[str, UdpTotal] = field(default_factory=dict)   # "fwd.receiver" -> UDP datagram totals
    # bytes: what -w asked (sock_bufsize, 0: nothing), what each end's sockets got
    # (sndbuf/rcvbuf_actual: the kernel doubles the ask and caps it at [rw]mem_max)
    socket_buffers: dict[str, int] = field(default_factory=dict)
    damage: tuple[str, ...] = ()     # what was repaired to read the report (see load_json)
    quirks: tuple[str, ...] = ()     # figures iperf3 printed that cannot be true, unwrapped or left unknown (see count)


_NON_NUMBER = re.compile(r"(?<=[:\[,])(\s*)(-?nan|-?inf(?:inity)?)\b", re.IGNORECASE)


def load_json(text: str, *, lean: bool = False) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The iperf3 JSON report in ``text`` and the damage repaired on the way.

    Only a ``{`` at the start of a line can open the report: iperf3 (cJSON)
    writes every nested object inline, so a damaged report (truncated, or
    holding a C ``-nan``) can never fall back to its nested
    ``server_output_json`` -- it is an error instead.  Junk lines around the
    report (warnings, even with braces) are skipped.  ``nan``/``inf`` tokens
    that C's printf wrote into the JSON are read as null and named in the
    returned damage notes; so are JSON's own NaN/Infinity.

    ``lean``: the intervals' objects (client's and server's) may hold only
    what :func:`flow_rows` and the parsers read of them (their streams'
    :data:`LEAN_STREAM`, the sum's ``omitted``, whether ``sum_bidir_reverse``
    is there); the
    rest of the report is whole.  A 200 MB report's tree is a third
    smaller, and quicker to make and to free.
    """
    clean = _clean_report(text, lean)
    if clean is not None:
        return clean, ()
    damage: list[str] = []

    def constant(tok: str) -> None:
        damage.append(f"a {tok} value was read as null")
        return None

    fixed, n = _NON_NUMBER.subn(lambda m: m.group(1) + "null", text)
    if n:
        bad = sorted({m.group(2) for m in _NON_NUMBER.finditer(text)})
        damage.append(f"{n} non-number value(s) ({', '.join(bad)}) were read as null")
    dec = json.JSONDecoder(parse_constant=constant)
    first_err: str | None = None
    for m in re.finditer(r"^\{", fixed, re.M):
        try:
            obj, _ = dec.raw_decode(fixed, m.start())
        except json.JSONDecodeError as e:
            first_err = first_err or f"{e.msg} at char {e.pos}"
            continue
        except RecursionError:
            raise ToolError("iperf3 JSON is nested too deeply to be a report",
                            hint="this is not iperf3 output, or it is damaged") from None
        if isinstance(obj, dict) and isinstance(obj.get("start"), dict):
            return obj, tuple(damage)
    if first_err is not None:
        raise ToolError(f"iperf3 JSON is truncated or damaged ({first_err})",
                        hint="the process was probably killed mid-report; see the raw output file")
    raise ToolError("no JSON in iperf3 output" + (f": {text.strip()[:200]!r}" if text.strip() else " (empty)"),
                    hint="the process may have been killed before it printed its report")


class _NotClean(Exception):
    """A JSON constant (NaN, Infinity) met while reading a report the fast way."""


def _refuse_constant(tok: str) -> None:
    raise _NotClean(tok)


def _clean_report(text: str, lean: bool = False) -> dict[str, Any] | None:
    """The report when it needs no repair, else None (then :func:`load_json`
    takes the slow way, which names the damage).

    Searching the whole text for C's ``nan``/``inf`` first cost 3 s per
    27 MB (issue 33: a 200 MB report); a report that reads as plain JSON
    with no constant in it, and no such token in the junk around it, is
    what that search would have left unchanged.
    """
    whole = _whole_report(text, lean)
    if whole is not None:
        return whole
    dec = json.JSONDecoder(parse_constant=_refuse_constant)
    for m in re.finditer(r"^\{", text, re.M):
        try:
            obj, end = dec.raw_decode(text, m.start())
        except (json.JSONDecodeError, _NotClean, RecursionError):
            return None
        if isinstance(obj, dict) and isinstance(obj.get("start"), dict):
            if _NON_NUMBER.search(text, 0, m.start()) or _NON_NUMBER.search(text, end):
                return None
            return obj
    return None


_LEADING_SPACE = re.compile(r"[ \t\r\n]*")


def _whole_report(text: str, lean: bool = False) -> dict[str, Any] | None:
    """The report when ``text`` is nothing else (JSON whitespace around one
    object opening at a line start), read by msgspec; else None.

    msgspec builds the same dicts, lists, strings and numbers as the json
    module, in a third of its time (a 200 MB report: 1.4 s, not 3.5 s).
    Whatever the json module reads differently, msgspec refuses -- NaN and
    Infinity, numbers past a double's range, lone surrogates, text around
    the report -- and those go the json module's way as before.  (Lean, the
    fields it skips are checked as JSON all the same, but for a number's
    range: the json module reads 1e400 there as inf, which nothing reads.)
    """
    i = _LEADING_SPACE.match(text).end()        # type: ignore[union-attr]  # (it matches the empty string)
    if text[i:i + 1] != "{" or (i and text[i - 1] != "\n"):
        return None
    try:
        obj = _lean_report(text) if lean else msgspec.json.decode(text)
    except (msgspec.DecodeError, RecursionError):
        return None
    return obj if isinstance(obj.get("start"), dict) else None


class _LeanStream(TypedDict, total=False):
    """What flow_rows (with count, lost_count and _is_omitted) and the
    parsers read of an interval's stream: a lean report's streams hold
    these keys, when the report has them, each value as the json module
    reads it."""

    start: Any
    end: Any
    bytes: Any
    sender: Any
    omitted: Any
    retransmits: Any
    packets: Any
    lost_packets: Any
    lost_percent: Any
    jitter_ms: Any
    rtt: Any
    snd_cwnd: Any
    snd_wnd: Any


class _LeanSum(TypedDict, total=False):
    omitted: Any


class _LeanInterval(TypedDict, total=False):
    streams: list[_LeanStream]
    sum: _LeanSum
    sum_bidir_reverse: Any             # read: whether it is there


LEAN_STREAM = tuple(_LeanStream.__annotations__)
_FIELDS = msgspec.json.Decoder(dict[str, msgspec.Raw])       # an object, each value still JSON text
_VALUE = msgspec.json.Decoder()
_INTERVALS = msgspec.json.Decoder(list[_LeanInterval] | None)


def _lean_report(text: str) -> dict[str, Any]:
    """The report with lean intervals (see :func:`load_json`), its own and
    the server's (``server_output_json``); every other value whole.  Keys
    keep their order and the last of a repeated key wins, as in a dict the
    json module makes."""
    out: dict[str, Any] = {}
    for key, raw in _FIELDS.decode(text).items():
        if key == "intervals":
            out[key] = _INTERVALS.decode(raw)
        elif key == "server_output_json":
            try:
                server = _FIELDS.decode(raw)
            except msgspec.ValidationError:          # not an object: as it is
                out[key] = _VALUE.decode(raw)
            else:
                out[key] = {k: _INTERVALS.decode(r) if k == "intervals" else _VALUE.decode(r)
                            for k, r in server.items()}
        else:
            out[key] = _VALUE.decode(raw)
    return out


def extract_json(text: str) -> dict[str, Any]:
    """The iperf3 JSON object in ``text`` (see :func:`load_json`)."""
    return load_json(text)[0]


def sends(start: dict, is_server: bool) -> bool:
    """Whether this process sent the test's data, from ``test_start.reverse`` and
    the role: the per-stream ``sender`` flag only exists from iperf3 3.7 on."""
    ts = start.get("test_start") if isinstance(start.get("test_start"), dict) else {}
    return (not is_server) != bool((ts or {}).get("reverse"))


# iperf3 3.12 prints some datagram counts as unsigned numbers: an interval's
# lost count that reordering made negative (a late datagram fills a gap an
# earlier interval counted) reads 1.8446744073709552e+19 beside a correct
# lost_percent (-0.0118 % of 8491 datagrams: -1; fixture udp_lost_wrapped.json,
# recorded by the UDP nbperf e2e); a receiving -R client's end sum_sent packets
# reads ~1.8e19 too.  cJSON prints them as doubles, so the count itself cannot
# be unwrapped; a lost count is recovered from lost_percent x packets when that
# gives a whole number, else it is unknown -- never a number made up.
_WRAPPED = 2**63            # a negative 64-bit count printed unsigned is at least this


def count(v: object) -> int | None:
    """A datagram count as iperf3 printed it, or None if it cannot be true."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or abs(v) >= _WRAPPED:
        return None
    return int(v)


def _sum_counts(vs: Iterable[object]) -> int | None:
    got = [count(v) for v in vs]
    return None if None in got else sum(x for x in got if x is not None)


def lost_count(d: dict) -> int | None:
    """``lost_packets`` of one iperf3 UDP entry (interval stream, end sum or
    stream), recovered from ``lost_percent`` when 3.12 printed it wrapped."""
    lost = count(d.get("lost_packets"))
    if lost is not None or d.get("lost_packets") is None:
        return lost
    pct, packets = d.get("lost_percent"), count(d.get("packets"))
    if isinstance(pct, (int, float)) and packets:
        exact = pct * packets / 100
        if abs(exact - round(exact)) < 1e-6:
            return round(exact)
    return None


def _impossible(d: dict) -> list[str]:
    """What the report holds that cannot be true, and what was made of it."""
    out = []
    for where, doc in (("", d), ("server's ", d.get("server_output_json"))):
        if not isinstance(doc, dict):
            continue
        bad = [st for iv in doc.get("intervals", []) or [] for st in iv.get("streams", [])
               if isinstance(st, dict) and st.get("lost_packets") is not None and count(st["lost_packets"]) is None]
        if bad:
            lost = [lost_count(st) for st in bad]
            made = ("recovered from lost_percent: " + ", ".join(map(str, lost)) if None not in lost
                    else "those intervals' loss is unknown")
            out.append(f"the {where}intervals hold {len(bad)} impossible lost-datagram count(s) "
                       f"({bad[0]['lost_packets']:.3g}: a negative count printed unsigned, iperf3 3.12 with "
                       f"reordering); {made}")
    return out


def _intervals(intervals: Sequence[dict], *, is_server: bool, omit: float,
               duration: float | None, by_peer: bool = False,
               default_sender: bool | None = None) -> list[FlowInterval]:
    """Per-interval flow bytes, on one continuous clock from the test start
    (:func:`flow_rows`, as FlowIntervals)."""
    return [FlowInterval(*r) for r in flow_rows(intervals, is_server=is_server, omit=omit, duration=duration,
                                                by_peer=by_peer, default_sender=default_sender)]


def flow_rows(intervals: Sequence[dict], *, is_server: bool, omit: float,
              duration: float | None, by_peer: bool = False,
              default_sender: bool | None = None) -> list[FlowRow]:
    """Per-interval flow bytes, on one continuous clock from the test start.

    iperf3 restarts its interval clock at 0 when the ``-O`` warm-up (``omit``
    seconds) ends, and 3.12 prints the first measured interval badly: seen here
    with a start *later* than its end, or squeezed into a fraction of a
    millisecond (0.5003 -> 0.5006 holding half a second of bytes), and the last
    warm-up interval missing.  Whether the clock restarted is decided from
    where the measured intervals *end* (about ``duration``, not omit +
    duration); then the first measured interval starts at 0 after the warm-up.
    When that first interval's printed span is broken (reversed, or under half
    a normal interval) its bytes reach back into the warm-up by an unknown
    amount -- in a shaped -R run the receiver counted 3.45 MB more than the
    sender sent, so iperf3's own total is inflated too -- and it is marked as
    warm-up: the measured part starts where it ends.
    """
    out: list[FlowRow] = []
    omitted = [_is_omitted(iv) for iv in intervals]         # once each: a long report has 100,000s
    restarted, nominal = False, 0.0
    if omit > 0:
        # (without a warm-up the clock never restarts: nothing here is read, and a
        # long report's every stream is not gone over twice more for it)
        measured = [iv for iv, o in zip(intervals, omitted, strict=True) if not o]
        last_end = max((float(st["end"]) for iv in measured for st in iv.get("streams", [])), default=0.0)
        if duration:
            restarted = last_end <= duration + 0.5 * omit
        else:  # no duration (byte-count mode): a first measured start near 0 means a restart
            firsts = [float(st["start"]) for st in (measured[0].get("streams", []) if measured else [])]
            restarted = bool(firsts) and min(firsts) < 0.5 * omit
        spans = sorted(float(st["end"]) - float(st["start"]) for iv in measured[1:] for st in iv.get("streams", []))
        nominal = spans[len(spans) // 2] if spans else 0.0
    own = (not is_server) if default_sender is None else default_sender     # a stream without a sender flag
    row = tuple.__new__          # a FlowRow from its 17 fields, without the keyword machinery
    first_measured = True
    prev_end = 0.0
    for iv, is_omitted in zip(intervals, omitted, strict=True):
        streams = iv.get("streams", [])
        demoted = False
        if not is_omitted and restarted and first_measured and nominal > 0 and any(
                float(st["start"]) > float(st["end"]) or float(st["end"]) - float(st["start"]) < 0.5 * nominal
                for st in streams):
            # Its bytes cover an unknown stretch that reaches back into the
            # warm-up (a -R receiver got 3.45 MB more than its sender sent):
            # it is warm-up, and the measured part starts where it ends.
            is_omitted = demoted = True
        counted = not is_omitted or demoted
        at_restart = counted and restarted and first_measured
        base = omit if (restarted and counted) else 0.0
        groups: dict[tuple[str, str], list[tuple[float, float, dict]]] = {}
        for st in streams:
            s0, s1 = float(st["start"]), float(st["end"])
            if at_restart:
                s0 = 0.0          # the first measured interval starts at the restart
            elif s0 > s1:
                s0 = prev_end if not is_omitted else 0.0
            sender = bool(st.get("sender", own))
            # the engine client sends the fwd flow; the engine server receives it
            key = _KEYS[sender != is_server, sender]
            g = groups.get(key)
            if g is None:
                groups[key] = [(s0, s1, st)]
            else:
                g.append((s0, s1, st))
        ends = []
        for (flow, side), sts in sorted(groups.items()) if len(groups) > 1 else groups.items():
            # one pass over the group's streams (a long report has 100,000s of
            # intervals): the same values, added and compared in the same order
            # as a comprehension per figure would; the lists of what a TCP
            # report lacks (UDP's) are made only when a stream has it
            s0, s1 = sts[0][0], sts[0][1]
            nbytes: list[Any] = []
            retr: list[Any] = []
            pk: list[int | None] | None = None
            lost: list[int | None] | None = None
            jit: list[float] | None = None
            # the sender's tcp_info at the interval's end (Linux; snd_wnd since iperf3 3.10):
            # kept only when every stream of the group says it, or the sums would mislead
            rtt: list[float] = []
            cwnd: list[int] = []
            wnd: list[int] = []
            sending = side == "sender"
            for a, b, st in sts:
                if a < s0:
                    s0 = a
                if b > s1:
                    s1 = b
                nbytes.append(st["bytes"])
                x = st.get("retransmits")
                if x is not None:
                    retr.append(x)
                if "packets" in st:
                    if pk is None:
                        pk = []
                    pk.append(count(st["packets"]))
                if "lost_packets" in st:
                    if lost is None:
                        lost = []
                    lost.append(lost_count(st))
                if "jitter_ms" in st:
                    if jit is None:
                        jit = []
                    jit.append(float(st["jitter_ms"]) / 1000)
                if sending:
                    x = st.get("rtt")
                    if isinstance(x, (int, float)) and x > 0:
                        rtt.append(x)
                    x = st.get("snd_cwnd")
                    if isinstance(x, int):
                        cwnd.append(x)
                    x = st.get("snd_wnd")
                    if isinstance(x, int):
                        wnd.append(x)
            ends.append(s1)
            n = len(sts)
            whole = sending and len(rtt) == len(cwnd) == n
            out.append(row(FlowRow, (
                base + s0, base + s1, flow, side, int(sum(nbytes)), n, is_omitted,
                sum(retr) if retr else None, None, by_peer,
                sum(x for x in pk if x is not None) if pk and None not in pk else None,
                sum(x for x in lost if x is not None) if lost and None not in lost else None,
                max(jit) if jit else None, None,
                sum(rtt) / len(rtt) / 1e6 if whole else None, sum(cwnd) if whole else None,
                sum(wnd) if whole and len(wnd) == n else None)))
        if counted and ends:
            prev_end = max(ends)
            first_measured = False
    return out


# (flow, side) of a stream by (whether it is the fwd flow, whether this process sent it)
_KEYS = {(True, True): ("fwd", "sender"), (True, False): ("fwd", "receiver"),
         (False, True): ("rev", "sender"), (False, False): ("rev", "receiver")}


def _is_omitted(iv: dict) -> bool:
    if (iv.get("sum") or {}).get("omitted"):
        return True
    for s in iv.get("streams", []):   # noqa: SIM110 - any(), without a generator per interval
        if s.get("omitted"):
            return True
    return False


def _totals(end: dict, is_server: bool, into: dict[str, int], default_sender: bool | None = None) -> None:
    """Per-stream end entries: the key names the side, the ``sender`` flag says
    whether this process sent the stream (which fixes the flow); before 3.7
    there is no flag and ``default_sender`` (see :func:`sends`) decides."""
    for (flow, side), parts in end_entries(end, is_server, default_sender).items():
        into[f"{flow}.{side}"] = into.get(f"{flow}.{side}", 0) + sum(int(p["bytes"]) for p in parts)


def end_entries(end: dict, is_server: bool, default_sender: bool | None = None) -> dict[tuple[str, str], list[dict]]:
    """The per-stream TCP ``end`` entries grouped by (flow, side); see :func:`_totals`."""
    dflt = (not is_server) if default_sender is None else default_sender
    out: dict[tuple[str, str], list[dict]] = {}
    for st in end.get("streams", []):
        for side in ("sender", "receiver"):
            part = st.get(side)
            if not isinstance(part, dict) or "bytes" not in part:
                continue
            flow = "fwd" if bool(part.get("sender", dflt)) != is_server else "rev"
            out.setdefault((flow, side), []).append(part)
    return out


def _udp_totals(end: dict, is_server: bool, into: dict[str, UdpTotal], default_sender: bool | None = None) -> None:
    """UDP ``end.streams[].udp`` entries of one process, by flow and side (the
    ``sender`` flag, before 3.7 ``default_sender``, says which side it is)."""
    dflt = (not is_server) if default_sender is None else default_sender
    parts: dict[tuple[str, str], list[dict]] = {}
    for st in end.get("streams", []):
        u = st.get("udp") if isinstance(st, dict) else None
        if not isinstance(u, dict) or u.get("packets") is None:
            continue
        sender = bool(u.get("sender", dflt))
        flow = "fwd" if sender != is_server else "rev"
        parts.setdefault((flow, "sender" if sender else "receiver"), []).append(u)
    for (flow, side), us in parts.items():
        if side == "sender":
            t = UdpTotal(_sum_counts(u["packets"] for u in us), streams=len(us))
        else:
            jit = [float(u["jitter_ms"]) / 1000 for u in us if u.get("jitter_ms") is not None]
            ooo = [int(u["out_of_order"]) for u in us if u.get("out_of_order") is not None]
            lost = [lost_count(u) if u.get("lost_packets") is not None else 0 for u in us]
            t = UdpTotal(_sum_counts(u["packets"] for u in us),
                         sum(x for x in lost if x is not None) if None not in lost else None,
                         sum(ooo) if ooo else None, max(jit) if jit else None, len(us))
        into.setdefault(f"{flow}.{side}", t)


def _buffers(start: dict, prefix: str) -> dict[str, int]:
    keys = ("sock_bufsize", "sndbuf_actual", "rcvbuf_actual")
    return {prefix + k.removesuffix("_actual"): int(start[k]) for k in keys if isinstance(start.get(k), (int, float))}


@damage_is_a_tool_error("iperf3", "see the raw output file: was the process killed mid-report?")
def parse(text: str) -> Iperf3Report:
    """Parse the client's ``-J --get-server-output`` (or a server's ``-J``) output."""
    d, damage = load_json(text)
    start = d.get("start", {}) or {}
    ts = start.get("test_start", {}) or {}
    server = d.get("server_output_json")
    omit = float(ts.get("omit") or 0)
    duration = float(ts["duration"]) if ts.get("duration") else None
    # a server's own -J output (imported by hand) says so in its start section
    is_server = "accepted_connection" in start
    own_sends = sends(start, is_server)
    intervals = _intervals(d.get("intervals", []), is_server=is_server, omit=omit, duration=duration,
                           default_sender=own_sends)
    last_end = max((i.end for i in intervals), default=0.0)
    totals: dict[str, int] = {}
    _totals(d.get("end", {}) or {}, is_server, totals, own_sends)
    udp: dict[str, UdpTotal] = {}
    _udp_totals(d.get("end", {}) or {}, is_server, udp, own_sends)
    peer_last_end = 0.0
    if isinstance(server, dict):
        peer = _intervals(server.get("intervals", []), is_server=True, omit=omit, duration=duration,
                          by_peer=True, default_sender=not own_sends)
        peer_last_end = max((i.end for i in peer), default=0.0)
        intervals += peer
        server_totals: dict[str, int] = {}
        _totals(server.get("end", {}) or {}, True, server_totals, not own_sends)
        for k, v in server_totals.items():
            totals.setdefault(k, v)   # receiver-side totals the client lacks
        _udp_totals(server.get("end", {}) or {}, True, udp, not own_sends)
    end = d.get("end", {}) or {}
    bidir = "sum_sent_bidir_reverse" in end or any(
        "sum_bidir_reverse" in iv for iv in d.get("intervals", []))
    tstamp = (start.get("timestamp") or {}).get("timesecs")
    bufs = _buffers(start, "")
    if isinstance(server, dict) and isinstance(server.get("start"), dict):
        bufs |= _buffers(server["start"], "peer_")
    return Iperf3Report(
        version=start.get("version"), error=d.get("error"),
        protocol=ts.get("protocol"), num_streams=ts.get("num_streams"), blksize=ts.get("blksize"),
        duration=ts.get("duration"), omit=ts.get("omit"), reverse=bool(ts.get("reverse")),
        bidir=bidir, timesecs=int(tstamp) if tstamp is not None else None,
        intervals=tuple(intervals), has_server_output=isinstance(server, dict), totals=totals,
        last_end=last_end, peer_last_end=peer_last_end, udp=udp, socket_buffers=bufs, damage=damage,
        quirks=tuple(_impossible(d)))
