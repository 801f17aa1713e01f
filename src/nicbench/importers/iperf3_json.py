"""iperf3 ``-J`` output, 3.0 to 3.2x: client or server, TCP or UDP, -R,
--bidir, -P, -O, -n, --get-server-output (``server_output_json`` or 3.12's
``server_output_text``).

Reuses :mod:`nicbench.tools.iperf3` for the JSON itself (damage-aware
loading, per-stream intervals on one clock, the pre-3.7 sender rule).  What
it adds: whole-test totals per direction and side with their own spans (the
receiver's span is its ``end - start``, as iperf3 computes its receiver
bits/s), UDP loss and jitter, and the decision of what a point can use.
"""

from __future__ import annotations

import re
from typing import Any

from ..core.errors import InputError, ToolError
from ..tools import iperf3 as tool
from ..tools.base import FlowInterval, FlowRow
from . import iperf3_text, traffic
from .model import ParsedFile, Role, finite

FORMAT = "iperf3-json"
# what a complete report's end object holds (TCP: streams, sum_sent/sum_received; UDP: sum too)
_END_KEYS = ("streams", "sum", "sum_sent", "sum_received")
HINT = "run the client with -J --get-server-output (and the server with -J) for a complete report"


def _span(parts: list[dict], name: str) -> tuple[float, float]:
    s0 = min(finite(p.get("start", 0), "end.streams[].start", name) for p in parts)
    s1 = max(finite(p.get("end", 0), "end.streams[].end", name) for p in parts)
    return s0, max(s1 - s0, 0.0)


def _tcp_totals(end: dict, is_server: bool, own_sends: bool, role: Role, name: str) -> dict:
    out: dict[tuple[str, str], traffic.Total] = {}
    for (flow, side), parts in tool.end_entries(end, is_server, own_sends).items():
        t0, secs = _span(parts, name)
        nbytes = sum(finite(p["bytes"], "end.streams[].bytes", name) for p in parts)
        d = traffic.direction_of(flow, role)
        if side == "sender" and nbytes == 0 and d == "rx":
            continue        # a receiving process's empty "sender" entry: it measured nothing there
        retr = [p["retransmits"] for p in parts if p.get("retransmits") is not None]
        out[(d, side)] = traffic.Total(
            bytes=nbytes, seconds=secs, t0=t0,
            retransmits=sum(finite(r, "retransmits", name) for r in retr) if retr else None, streams=len(parts))
    return out


def _udp_total(s: dict, name: str, streams: int) -> traffic.Total:
    def opt(k: str) -> float | None:
        return finite(s[k], f"end.{k}", name) if s.get(k) is not None else None

    def counted(k: str) -> float | None:   # 3.12 prints some counts wrapped (tools.iperf3.count): unknown
        v = opt(k)
        return None if v is None else (tool.lost_count(s) if k == "lost_packets" else tool.count(v))
    jit = opt("jitter_ms")
    return traffic.Total(bytes=finite(s.get("bytes", 0), "end.sum.bytes", name),
                         seconds=finite(s.get("end", 0), "end.sum.end", name)
                         - finite(s.get("start", 0), "start", name),
                         t0=finite(s.get("start", 0), "end.sum.start", name), packets=counted("packets"),
                         lost=counted("lost_packets"), jitter_s=jit / 1000 if jit is not None else None,
                         out_of_order=opt("out_of_order"), streams=streams)


def _udp_totals(end: dict, own_sends: bool, streams: int, name: str, notes: list[str]) -> dict:
    """UDP: ``sum_sent``/``sum_received`` (3.7+) or one ``sum`` whose loss and
    jitter are the receiver's and whose bytes are this process's."""
    mine = "tx" if own_sends else "rx"
    out: dict[tuple[str, str], traffic.Total] = {}
    ooo = sum(float((st.get("udp") or {}).get("out_of_order") or 0) for st in end.get("streams", []))
    if isinstance(end.get("sum_received"), dict) or isinstance(end.get("sum_sent"), dict):
        if isinstance(end.get("sum_sent"), dict) and own_sends:
            t = _udp_total(end["sum_sent"], name, streams)
            out[(mine, "sender")] = traffic.Total(t.bytes, t.seconds, t.t0, packets=t.packets, streams=streams)
        if isinstance(end.get("sum_received"), dict):
            t = _udp_total(end["sum_received"], name, streams)
            if t.bytes > 0 or not own_sends:
                out[(mine, "receiver")] = traffic.Total(t.bytes, t.seconds, t.t0, t.packets, t.lost, t.jitter_s,
                                                        ooo, streams=streams)
    elif isinstance(end.get("sum"), dict):
        t = _udp_total(end["sum"], name, streams)
        if own_sends:
            out[(mine, "sender")] = traffic.Total(t.bytes, t.seconds, t.t0, packets=t.packets, streams=streams)
            if t.packets and t.lost is not None:
                got = t.bytes * (t.packets - t.lost) / t.packets
                out[(mine, "receiver")] = traffic.Total(got, t.seconds, t.t0, t.packets - t.lost, t.lost,
                                                        t.jitter_s, ooo, streams=streams)
                notes.append(f"{mine}: UDP receiver bytes derived from the sender's bytes and the receiver's loss "
                             f"({t.lost:.0f} of {t.packets:.0f} datagrams)")
        else:
            out[(mine, "receiver")] = t
    return out


# what a terminal echoed at a line's start, glued before the report's "{": ^C (the client
# was stopped), or an escape sequence in caret notation (^[[A: an arrow key)
_GLUED = re.compile(r"^((?:\^\[\[[0-9;]*[A-Za-z~]|\^[A-Z@\\\]^_?])+)(?=\{)", re.M)


def unglued(text: str) -> tuple[str, str | None]:
    """``text`` without the keys a terminal echoed before the report's
    ``{`` (looked for in its first 64 KiB), and what was removed."""
    m = _GLUED.search(text, 0, 65536)
    if m is None:
        return text, None
    return text[:m.start()] + text[m.end():], m[1]


def parse(text: str, name: str) -> ParsedFile:
    """One iperf3 JSON report; InputError when it holds no usable point."""
    text, glued = unglued(text)
    try:
        d, damage = tool.load_json(text, lean=True)     # its intervals: what flow_rows reads
    except ToolError as e:
        raise InputError(e.message, where=name, hint=e.hint) from None
    start = d["start"]
    is_server = "accepted_connection" in start
    role: Role = "server" if is_server else "client"
    ts = start.get("test_start")
    notes: list[str] = [f"{glued!r} a terminal echoed before the report was removed"
                        + (" (^C: the client was stopped by hand)" if "^C" in glued else "")] if glued else []
    dropped = [f"damaged report: {x}" for x in damage]
    err = d.get("error")
    ver = str(start.get("version") or "").replace("iperf ", "") or None
    if not isinstance(ts, dict):
        why = (f"iperf3 reported: {err}" if err
               else "the report has no test_start, intervals or end (the test never ran)")
        raise InputError(f"no usable result: {why}", where=name, hint=HINT)
    own_sends = tool.sends(start, is_server)
    proto = str(ts.get("protocol") or "TCP").upper()
    kind = "udp" if proto == "UDP" else "tcp"
    omit = finite(ts.get("omit") or 0, "test_start.omit", name)
    duration = finite(ts["duration"], "test_start.duration", name) if ts.get("duration") else None
    streams = int(finite(ts.get("num_streams") or 1, "test_start.num_streams", name))
    # rows, not FlowIntervals: the same fields, built in a fraction of the time (a long report has 100,000s)
    ivs: list[FlowInterval | FlowRow] = []
    ivs += tool.flow_rows(d.get("intervals") or [], is_server=is_server, omit=omit, duration=duration,
                          default_sender=own_sends)
    end = d.get("end") if isinstance(d.get("end"), dict) else {}
    assert isinstance(end, dict)
    if not any(end.get(k) for k in _END_KEYS):
        # iperf3 writes its end object when the test completes: without it the intervals
        # are what ran before the process stopped, and no summary can check them
        raise InputError("the report has no end summary (end.streams, end.sum*), which iperf3 writes when the "
                         "test completes: the test did not finish" + (f" (iperf3 reported: {err})" if err else ""),
                         where=name, hint=HINT)
    totals = (_udp_totals(end, own_sends, streams, name, notes) if kind == "udp"
              else _tcp_totals(end, is_server, own_sends, role, name))
    server = d.get("server_output_json")
    if isinstance(server, dict):
        ivs += tool.flow_rows(server.get("intervals") or [], is_server=True, omit=omit, duration=duration,
                              by_peer=True, default_sender=not own_sends)
        send = server.get("end") if isinstance(server.get("end"), dict) else {}
        assert isinstance(send, dict)
        if kind == "udp":
            # keyed from the server's own view: its rx is this client's tx
            peer = {("tx" if dd == "rx" else "rx", side): t
                    for (dd, side), t in _udp_totals(send, not own_sends, streams, name, []).items()}
        else:
            peer = _tcp_totals(send, True, not own_sends, role, name)
        for key, t in peer.items():
            totals.setdefault(key, t)       # receiver-side totals the client lacks
        notes.append("receiver intervals come from the server's own report (--get-server-output), on its clock")
    elif isinstance(d.get("server_output_text"), str) and d["server_output_text"].strip():
        try:
            peer_text = iperf3_text.parse(d["server_output_text"], name, role="server")
        except InputError:
            dropped.append("server_output_text holds no report lines")
        else:
            ivs += _text_intervals(peer_text)
            notes.append("receiver intervals come from the server's text report (server_output_text), "
                         "rounded to 3 significant digits")
    bidir = "sum_sent_bidir_reverse" in end or any(isinstance(iv, dict) and "sum_bidir_reverse" in iv
                                                   for iv in d.get("intervals") or [])
    # the intervals are flow intervals now: let their JSON go before the samples are made
    # (a 200 MB report's tree is ~400 MB)
    d["intervals"] = None
    if isinstance(server, dict):
        server["intervals"] = None
    if err:
        dropped.append(f"iperf3 reported an error: {err} (the test ended early; totals cover what ran)")
        zero = [k for k, t in totals.items() if k[1] == "receiver" and t.bytes == 0]
        if zero and "interrupt" in str(err) and any(t.bytes > 0 for k, t in totals.items() if k[1] == "sender"):
            # stopped by hand (^C): the server's results never reached the client, so its
            # receiver figure is an empty 0, not a measurement; the sender's is what ran
            for k in zero:
                del totals[k]
            dropped.append("the receiver's total is 0 because the client was interrupted before the server's "
                           "results reached it: the point is partial, its figure what the sender says")
    tstamp = (start.get("timestamp") or {}).get("timesecs") if isinstance(start.get("timestamp"), dict) else None
    t_start = finite(tstamp, "start.timestamp.timesecs", name) if tstamp is not None else None
    if t_start is not None:
        notes.append("start time from start.timestamp.timesecs (whole seconds)")
    blk = ts.get("blksize")
    params: dict[str, Any] = {
        "direction": "bidir" if bidir else ("tx" if own_sends else "rx"), "streams": streams,
        "io_size": int(finite(blk, "test_start.blksize", name)) if blk else None, "protocol": proto,
        "duration": duration, "omit": omit, "engine": "iperf3"}
    if ts.get("bytes"):
        params["bytes"] = int(finite(ts["bytes"], "test_start.bytes", name))
    if proto == "UDP" and ts.get("target_bitrate"):
        # -b, bit/s per stream (0: unlimited, left out)
        params["target_bitrate"] = finite(ts["target_bitrate"], "test_start.target_bitrate", name)
    return traffic.build(name=name, fmt=FORMAT, tool="iperf3", version=ver, role=role, kind=kind,  # type: ignore[arg-type]
                         params=params, intervals=ivs, totals=totals, start=t_start, host=name, notes=notes,
                         dropped=dropped, hint=HINT, pairs=_pairs(start))


def _pairs(start: dict) -> list[tuple[int, int]]:
    """Both ports of every stream's connection (``start.connected``)."""
    out = []
    for c in start.get("connected") or []:
        if isinstance(c, dict) and all(isinstance(c.get(k), int) and not isinstance(c.get(k), bool)
                                       for k in ("local_port", "remote_port")):
            out.append((c["local_port"], c["remote_port"]))
    return out


def _text_intervals(p: ParsedFile) -> list[FlowInterval]:
    """The receiver intervals of a parsed server text report, back as flow intervals."""
    out = []
    for s in p.samples:
        if s.metric.endswith(".bytes") and s.tag("side") == "receiver" and s.tag("whole") is None:
            flow = "fwd" if s.tag("direction") == "rx" else "rev"
            out.append(FlowInterval(s.t_start, s.t_end, flow, "receiver", int(s.value),  # type: ignore[arg-type]
                                    int(s.tag("streams") or 1), s.tag("omitted") == "1", by_peer=True))
    return out
