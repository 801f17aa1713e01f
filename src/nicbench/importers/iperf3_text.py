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
# ids: a stream, [SUM], iperf 2's [ *1] (the reverse direction of -R and --full-duplex) and
# [SUM-2]; rates in bits/sec, or in Bytes/sec with -f K/M/G (binary, as the transfer)
_LINE = re.compile(
    r"^\[\s*(?P<id>\*?\s*(?:\d+|SUM)(?:-\d+)?)\](?:\[(?P<tag>[TR]X-[CS])\])?\s+(?P<a>\d+\.\d+)-\s*(?P<b>\d+\.\d+)"
    r"\s+sec\s+(?P<xfer>\d+(?:\.\d+)?)\s+(?P<xu>[KMGT]?)Bytes\s+(?P<rate>\d+(?:\.\d+)?)\s+(?P<ru>[KMGT]?)"
    r"(?P<rk>bits|Bytes)/sec(?P<rest>.*)$")
# bounded and anchored on a non-digit: a 2 MB run of digits must not backtrack quadratically
_UDP = re.compile(r"(?<![\d.])(?P<jit>\d{1,12}(?:\.\d{1,12})?)\s+ms\s+(?P<lost>-?\d{1,15})/\s*(?P<tot>\d{1,15})\s+\(")


@dataclass(frozen=True)
class TextLine:
    """One report line: ``ident`` is the stream id or "SUM"; bytes binary-scaled."""

    ident: str                  # "1", "SUM", iperf 2's "*1" (reverse) and "SUM-2"
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
    exact: bool = False         # bytes printed without a prefix (-f b): not rounded

    @property
    def stream(self) -> str:
        """The stream (or SUM) without iperf 2's reverse mark and pass number."""
        return self.ident.lstrip("*").strip().split("-")[0]

    @property
    def reverse(self) -> bool:
        """iperf 2's ``[ *N]``: the direction opposite to the file's plain rows."""
        return self.ident.startswith("*")


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
        rate = float(m["rate"]) * (_BITS[m["ru"]] if m["rk"] == "bits" else 8 * _BYTES[m["ru"]])
        ident = m["id"].replace(" ", "")
        out.append(TextLine(ident if ident[:1] == "*" or ident.startswith("SUM") else str(int(ident)), m["tag"],
                            float(m["a"]), float(m["b"]), float(m["xfer"]) * _BYTES[m["xu"]], rate, side, omitted,
                            retr, float(u["jit"]) / 1000 if u else None, int(u["lost"]) if u else None,
                            int(u["tot"]) if u else sent, exact=not m["xu"]))
    return out


_CONNECTED = re.compile(r"local \S+ port (\d{1,5}) connected to \S+ port (\d{1,5})")
_DEFAULT_PORT = 5201


def role_of(text: str) -> Role | None:
    if "Connecting to host" in text:
        return "client"
    if "Server listening" in text or "Accepted connection" in text:
        return "server"
    return None


def role_from_ports(text: str) -> tuple[Role | None, str]:
    """Which end wrote a text without its banner, from its ``local A port P
    connected to B port Q`` lines: iperf3 prints them from the writer's side,
    so the end whose local port is the listening one is the server (the
    listening port: the one every connection shares, iperf3's 5201 when
    both ends share none)."""
    pairs = [(int(a), int(b)) for a, b in _CONNECTED.findall(text)]
    if not pairs:
        return None, "it has no 'connected to' lines"
    local, remote = {a for a, _ in pairs}, {b for _, b in pairs}
    if len(remote) == 1 and (len(local) > 1 or _DEFAULT_PORT in remote or len(pairs) == 1 and
                             not 32768 <= next(iter(remote)) <= 60999 and 32768 <= pairs[0][0] <= 65535):
        return "client", f"its connections go to port {next(iter(remote))} from its own port(s)"
    if len(local) == 1 and (len(remote) > 1 or _DEFAULT_PORT in local):
        return "server", f"its connections come in on its port {next(iter(local))}"
    return None, "its ports do not say which end listened"


def _timeline(ivs: list[FlowInterval], totals: dict[tuple[str, str], traffic.Total],
              role: Role | None) -> tuple[list[FlowInterval], list[str]]:
    """A text log's intervals as a timeline: a line printed twice (a log
    concatenated, a terminal's scroll-back) counts once; where one flow and
    side's intervals miss a stretch (a lost line) or overlap, and the file
    has that flow and side's whole-test summary, the summary is the figure
    and those intervals are left out (said) -- rather than a point refused
    for a broken timeline whose total is right there."""
    seen: set[tuple[object, ...]] = set()
    kept: list[FlowInterval] = []
    repeated = 0
    for iv in ivs:
        key = (iv.flow, iv.side, iv.start, iv.end, iv.bytes)
        if key in seen:
            repeated += 1
            continue
        seen.add(key)
        kept.append(iv)
    notes = [f"{repeated} interval line(s) printed twice counted once"] if repeated else []
    by: dict[tuple[str, str], list[FlowInterval]] = {}
    for iv in kept:
        by.setdefault((iv.flow, iv.side), []).append(iv)
    drop: set[tuple[str, str]] = set()
    for (flow, side), group in by.items():
        group = sorted((iv for iv in group if not iv.omitted), key=lambda iv: iv.start)
        spans = sorted(iv.end - iv.start for iv in group)
        nominal = spans[len(spans) // 2] if spans else 0.0
        for a, b in zip(group, group[1:], strict=False):
            if abs(b.start - a.end) > 0.25 * nominal:
                d = traffic.direction_of(flow, role)
                if (d, side) in totals:
                    drop.add((flow, side))
                    what = "missing" if b.start > a.end else "overlapping"
                    notes.append(f"{d} {side}: its intervals are {what} at {a.end:g}-{b.start:g} s: the whole-test "
                                 "summary is the figure and those intervals are left out")
                break
    return [iv for iv in kept if (iv.flow, iv.side) not in drop], notes


def _old_udp_summaries(text: str, udp: bool) -> list[TextLine]:
    """iperf3 before 3.1 ended a UDP client's text with one summary line per
    stream, with jitter and loss but without ``sender``/``receiver``: the
    lines after the last ``- - -`` separator that carry jitter and no side."""
    if not udp or "- - - -" not in text:
        return []
    tail = text[text.rindex("- - - -"):]
    return [ln for ln in lines(tail, udp) if ln.side is None and ln.jitter_s is not None and ln.start == 0]


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
    inferred = ""
    said = role_of(text)                         # the file's own word first, then the caller's, then its ports
    if said is not None:
        role = said
    elif role is None:
        role, why = role_from_ports(text)
        if role is not None:
            inferred = f"the {role}'s text, as {why} (--role overrides)"
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
    old_udp = _old_udp_summaries(text, udp)
    for ln in ls:
        if ln in old_udp:
            continue
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
    ivs, fixes = _timeline(ivs, totals, role)
    ver = re.search(r"iperf (3\.\d+(?:\.\d+)?)", text)
    params: dict[str, object] = {"direction": "bidir" if bidir else ("rx" if (role == "server") != rev else "tx"),
              "streams": len(streams) or 1, "protocol": kind.upper(), "engine": "iperf3"}
    if ivs:
        params["duration"] = max(iv.end for iv in ivs if not iv.omitted) if any(not iv.omitted for iv in ivs) else None
    notes = ["figures from iperf3 text are rounded to 3 significant digits"]
    if inferred:
        notes.insert(0, inferred)
    notes += fixes
    for ln in old_udp:
        if multi and ln.ident != "SUM":
            continue
        flow = _flow(ln.tag, role, sends)
        d = traffic.direction_of(flow, role)
        if ln.packets and ln.lost is not None and 0 <= ln.lost <= ln.packets:
            got = ln.bytes * (ln.packets - ln.lost) / ln.packets
            totals[(d, "sender")] = traffic.Total(ln.bytes, ln.end - ln.start, packets=ln.packets,
                                                  streams=len(streams) or 1)
            totals[(d, "receiver")] = traffic.Total(got, ln.end - ln.start, packets=ln.packets, lost=ln.lost,
                                                    jitter_s=ln.jitter_s, streams=len(streams) or 1)
            notes.append(f"{d}: the UDP summary has no sender/receiver word (iperf3 before 3.1): its bytes "
                         f"({ln.bytes:.0f}) are the sender's, its jitter and loss ({ln.lost}/{ln.packets}) the "
                         f"receiver's; the bytes received are derived as the sent bytes x {ln.packets - ln.lost}/"
                         f"{ln.packets} datagrams arrived (iperf3's datagrams are all one size)")
    if peer:
        notes.append("receiver intervals come from the server's text report (--get-server-output)")
    return traffic.build(name=name, fmt=FORMAT, tool="iperf3", version=ver[1] if ver else None, role=role,
                         kind=kind, params=params, intervals=ivs, totals=totals, start=start,
                         host=name, notes=notes, pairs=traffic.connection_pairs(text),
                         hint=HINT, tails=True)
