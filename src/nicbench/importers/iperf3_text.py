"""iperf3's human text (client or server, TCP or UDP, -R, --bidir, -P).

Interval lines ``[  5]   0.00-1.00   sec  2.59 MBytes  21.8 Mbits/sec ...``;
summary lines end in ``sender`` or ``receiver``; ``[SUM]`` lines add up
``-P`` streams; ``--bidir`` tags lines ``[TX-C]``/``[RX-C]`` (client) or
``[TX-S]``/``[RX-S]`` (server).  Transfer is binary (KBytes = 1024 B),
Bitrate decimal; both are rounded to 3 significant digits by iperf3, so
figures from text carry that precision (the notes say so).  No wall clock:
times are relative to the test start.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import InputError
from ..tools.base import FlowInterval
from . import traffic
from .model import Kind, ParsedFile, Role

FORMAT = "iperf3-text"
HINT = "run iperf3 with -J (on the client with --get-server-output) for a complete report"
_BYTES = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4}
_BITS = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}
_LINE = re.compile(
    r"^\[\s*(?P<id>\d+|SUM)\](?:\[(?P<tag>[TR]X-[CS])\])?\s+(?P<a>\d+\.\d+)-\s*(?P<b>\d+\.\d+)\s+sec\s+"
    r"(?P<xfer>\d+(?:\.\d+)?)\s+(?P<xu>[KMGT]?)Bytes\s+(?P<rate>\d+(?:\.\d+)?)\s+(?P<ru>[KMGT]?)bits/sec"
    r"(?P<rest>.*)$")
# bounded and anchored on a non-digit: a 2 MB run of digits must not backtrack quadratically
_UDP = re.compile(r"(?<![\d.])(?P<jit>\d{1,12}(?:\.\d{1,12})?)\s+ms\s+(?P<lost>-?\d{1,15})/\s*(?P<tot>\d{1,15})\s+\(")


@dataclass(frozen=True)
class TextLine:
    """One report line: ``ident`` is the stream id or "SUM"; bytes binary-scaled."""

    ident: str
    tag: str | None
    start: float
    end: float
    bytes: float
    bps: float
    side: str | None            # "sender"/"receiver" on summary lines, else None
    omitted: bool
    retransmits: int | None
    jitter_s: float | None
    lost: int | None
    packets: int | None


def lines(text: str, udp: bool = False) -> list[TextLine]:
    """Every interval and summary line of iperf3 text, in order.  ``udp``: the
    number after a sender's interval rate is its datagram count (the "Total
    Datagrams" column), not TCP's retransmits."""
    out = []
    for raw in text.splitlines():
        m = _LINE.match(raw.strip())
        if not m:
            continue
        rest = m["rest"].strip()
        side = next((s for s in ("sender", "receiver") if rest.endswith(s)), None)
        omitted = "(omitted)" in rest
        u = _UDP.search(rest)
        retr = sent = None
        if side != "receiver" and not u:
            nums = rest.split()
            if nums and nums[0].isdigit():
                if udp:
                    sent = int(nums[0])
                else:
                    retr = int(nums[0])
        out.append(TextLine(m["id"], m["tag"], float(m["a"]), float(m["b"]),
                            float(m["xfer"]) * _BYTES[m["xu"]], float(m["rate"]) * _BITS[m["ru"]], side, omitted,
                            retr, float(u["jit"]) / 1000 if u else None, int(u["lost"]) if u else None,
                            int(u["tot"]) if u else sent))
    return out


def role_of(text: str) -> Role | None:
    if "Connecting to host" in text:
        return "client"
    if "Server listening" in text or "Accepted connection" in text:
        return "server"
    return None


def _flow(tag: str | None, role: Role | None, sends: bool) -> str:
    """fwd (engine client -> server) or rev, from a bidir tag or the test mode."""
    if tag:
        client_sends = (tag[:2] == "TX") == (tag[3] == "C")
        return "fwd" if client_sends else "rev"
    return "fwd" if sends != (role == "server") else "rev"


def parse(text: str, name: str, *, role: Role | None = None, peer: bool = False,
          start: float | None = None) -> ParsedFile:
    """Parse iperf3 text.  ``peer``: this text is the other end's report
    (``server_output_text``), already placed on the client's test clock."""
    role = role_of(text) or role                 # the file's own word first, then the caller's
    rev = "Reverse mode" in text
    bidir = bool(re.search(r"\[[TR]X-[CS]\]", text))
    udp = "Datagrams" in text or bool(_UDP.search(text))
    sends = (role != "server") != rev
    ls = lines(text, udp)
    if not ls:
        raise InputError("no iperf3 report lines in the text", where=name, hint=HINT)
    streams = {ln.ident for ln in ls if ln.ident != "SUM"}
    multi = len(streams) > 1 or any(ln.ident == "SUM" for ln in ls)
    kind: Kind = "udp" if udp else "tcp"
    ivs: list[FlowInterval] = []
    totals: dict[tuple[str, str], traffic.Total] = {}
    for ln in ls:
        # with several streams only [SUM] lines count (per direction with --bidir)
        if multi and ln.ident != "SUM" and not (bidir and not any(x.ident == "SUM" and x.tag == ln.tag for x in ls)):
            continue
        flow = _flow(ln.tag, role, sends)
        d = traffic.direction_of(flow, role)
        if ln.side:
            if ln.bytes == 0 and ln.bps == 0 and ln.side == "sender" and role == "server":
                continue    # a server prints a 0-byte "sender" line for the flow it received
            prev = totals.get((d, ln.side))
            totals[(d, ln.side)] = traffic.Total(
                bytes=ln.bytes + (prev.bytes if prev else 0), seconds=ln.end - ln.start, t0=ln.start,
                packets=ln.packets, lost=ln.lost, jitter_s=ln.jitter_s if ln.side == "receiver" else None,
                retransmits=ln.retransmits, streams=len(streams) or 1)
        else:
            # interval lines: the sender's on the sending end, the receiver's on the other
            mine_sends = (flow == "fwd") != (role == "server")
            ivs.append(FlowInterval(ln.start, ln.end, flow, "sender" if mine_sends else "receiver",  # type: ignore[arg-type]
                                    int(ln.bytes), len(streams) or 1, omitted=ln.omitted,
                                    retransmits=ln.retransmits, packets=ln.packets, lost=ln.lost,
                                    jitter_s=ln.jitter_s))
    ver = re.search(r"iperf (3\.\d+(?:\.\d+)?)", text)
    params: dict[str, object] = {"direction": "bidir" if bidir else ("rx" if (role == "server") != rev else "tx"),
              "streams": len(streams) or 1, "protocol": kind.upper(), "engine": "iperf3"}
    if ivs:
        params["duration"] = max(iv.end for iv in ivs if not iv.omitted) if any(not iv.omitted for iv in ivs) else None
    notes = ["figures from iperf3 text are rounded to 3 significant digits"]
    if peer:
        notes.append("receiver intervals come from the server's text report (--get-server-output)")
    return traffic.build(name=name, fmt=FORMAT, tool="iperf3", version=ver[1] if ver else None, role=role,
                         kind=kind, params=params, intervals=ivs, totals=totals, start=start,
                         host=name, notes=notes, pairs=traffic.connection_pairs(text),
                         hint=HINT)
