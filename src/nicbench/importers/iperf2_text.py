"""iperf 2 human text, plain or ``-e`` enhanced, client or server, TCP or UDP,
any ``-f`` unit (``-f b`` prints exact bytes; ``-f K`` rates in KBytes/sec).

Report lines share iperf3's shape and are read by
:func:`nicbench.importers.iperf3_text.lines`.  Per stream, the whole-test
line is the one starting at 0 that follows the stream's intervals (its start
drops back), or the only line; with -P the ``[SUM]`` lines count, their
whole-test ``[SUM] 0.00-5.24`` being the tool's own total (the intervals are
the timeline: see :func:`nicbench.importers.traffic.build`).  ``[ *N]`` rows
are the reverse direction (-R, --full-duplex): what the file's own process
received when it is the client.  A UDP client's ``Server Report`` lines (one
per stream) are the receiver's totals, summed over the streams.  No wall
clock: times are relative.
"""

from __future__ import annotations

import re
from collections import defaultdict

from ..core.errors import InputError
from ..tools.base import FlowInterval
from . import iperf3_text, traffic
from .iperf3_text import TextLine
from .model import ParsedFile, Role

FORMAT = "iperf2-text"
HINT = "run iperf with -y C (CSV) for exact figures, or save its whole text output"
_DATAGRAM = re.compile(r"(?:Sending|Receiving) (\d{1,6}) byte datagrams")
_REPORT = re.compile(r"^\[\s*(\*?\s*\d+)\] Server Report:")
_ID = re.compile(r"^\[\s*(\*?\s*(?:\d+|SUM)(?:-\d+)?)\]")


def _split(text: str) -> tuple[str, list[str]]:
    """(the process's own lines, its Server Report lines): a report line is
    the first report line of its stream after that stream's ``Server
    Report:`` (iperf 2 prints the other streams' lines in between)."""
    own: list[str] = []
    reports: list[str] = []
    pending: set[str] = set()
    for raw in text.splitlines():
        ln = raw.strip()
        m = _REPORT.match(ln)
        if m:
            pending.add(m[1].replace(" ", ""))
            continue
        i = _ID.match(ln)
        key = i[1].replace(" ", "") if i else None
        if key in pending and iperf3_text.lines(ln):
            pending.discard(key)
            reports.append(ln)
        else:
            own.append(ln)
    return "\n".join(own), reports


def _whole(rows: list[TextLine]) -> tuple[list[TextLine], TextLine | None]:
    """One stream's (or SUM's) rows -> (intervals, whole-test line).  The
    whole-test line starts at 0 after the intervals (the start drops back),
    or is the only row."""
    if len(rows) == 1:
        return [], rows[0]
    last = rows[-1]
    if last.start == 0 and any(r.start > 0 for r in rows[:-1]):
        return rows[:-1], last
    return rows, None


def parse(text: str, name: str, *, role: Role | None = None) -> ParsedFile:
    # the file's own word first, then the caller's
    role = ("server" if "Server listening" in text else "client" if "Client connecting" in text else None) or role
    own, report = _split(text)
    ls = iperf3_text.lines(own)
    if not ls:
        raise InputError("no iperf2 report lines in the text", where=name, hint=HINT)
    udp = bool(re.search(r"\bUDP (?:port|buffer)|[Dd]atagrams", text))
    kind = "udp" if udp else "tcp"
    ivs: list[FlowInterval] = []
    totals: dict[tuple[str, str], traffic.Total] = {}
    streams_of: dict[str, int] = {}
    for flow in ("fwd", "rev"):
        rows = [ln for ln in ls if ln.reverse == (flow == "rev")]
        if not rows:
            continue
        multi = any(ln.stream == "SUM" for ln in rows)
        by: dict[str, list[TextLine]] = defaultdict(list)
        for ln in rows:
            if (ln.stream == "SUM") == multi:
                by[ln.stream].append(ln)
        streams = len({ln.stream for ln in rows if ln.stream != "SUM"}) or 1
        streams_of[flow] = streams
        # the file's process sends fwd when it is the client (rev: the reverse rows it received)
        side = "sender" if (flow == "fwd") != (role == "server") else "receiver"
        d = traffic.direction_of(flow, role)
        for _, srows in sorted(by.items()):
            intervals, whole = _whole(srows)
            for ln in intervals:
                ivs.append(FlowInterval(ln.start, ln.end, flow, side, int(ln.bytes), streams,  # type: ignore[arg-type]
                                        retransmits=ln.retransmits, packets=ln.packets, lost=ln.lost,
                                        jitter_s=ln.jitter_s))
            if whole is not None:
                prev = totals.get((d, side))
                totals[(d, side)] = traffic.Total(
                    whole.bytes + (prev.bytes if prev else 0.0), max(whole.end - whole.start, prev.seconds if prev
                                                                      else 0.0),
                    packets=whole.packets, lost=whole.lost, jitter_s=whole.jitter_s, retransmits=whole.retransmits,
                    streams=streams)
    srv = iperf3_text.lines("\n".join(report))
    if srv:
        # one Server Report per stream: the receiver's totals, summed over the streams
        lost = [ln.lost for ln in srv if ln.lost is not None]
        packets = [ln.packets for ln in srv if ln.packets is not None]
        jitter = [ln.jitter_s for ln in srv if ln.jitter_s is not None]
        totals[("tx", "receiver")] = traffic.Total(
            sum(ln.bytes for ln in srv), max(ln.end - ln.start for ln in srv),
            packets=sum(packets) if len(packets) == len(srv) else None,
            lost=sum(lost) if len(lost) == len(srv) else None, jitter_s=max(jitter) if jitter else None,
            streams=len(srv))
    ver = re.search(r"iperf version (2\.\d+\.\d+\S*)", text)
    dirs = {traffic.direction_of(f, role) for f in streams_of}
    params: dict[str, object] = {"direction": "bidir" if len(dirs) > 1 else dirs.pop(),
                                 "streams": max(streams_of.values()), "protocol": kind.upper(), "engine": "iperf2"}
    size = _DATAGRAM.search(text) if udp else None
    if size:
        params["io_size"] = int(size[1])         # the datagram size its banner states (-l)
    notes = [] if all(ln.exact for ln in ls + srv) else \
        ["figures from iperf2 text are rounded to 3 significant digits"]
    if srv:
        notes.append(f"the receiver's total comes from the UDP Server Report ({len(srv)} stream(s) summed)")
    if "rev" in streams_of:
        notes.append("[ *N] rows are the reverse direction (-R or --full-duplex): "
                     + ("what this client received" if role != "server" else "what this server sent"))
    return traffic.build(name=name, fmt=FORMAT, tool="iperf2", version=ver[1] if ver else None, role=role,
                         kind=kind, params=params, intervals=ivs, totals=totals, start=None, host=name,  # type: ignore[arg-type]
                         notes=notes, hint=HINT, pairs=traffic.connection_pairs(text), tails=True)
