"""iperf 2 ``-y C`` CSV (2.0.x to 2.2): client or server, -P (sum lines with
id -1 are not streams), -R, -d/--full-duplex, UDP (server report fields).

Reuses :func:`nicbench.tools.iperf2.parse` (flows from the server port and
address, omit, wall-clock anchoring).  The CSV does not say which end wrote
it: the banner lines around it, or the UDP fields, tell; otherwise the
caller passes ``role``.
"""

from __future__ import annotations

import re

from ..core.errors import InputError, ToolError
from ..tools import iperf2 as tool
from . import traffic
from .model import ParsedFile, Role, finite

FORMAT = "iperf2-csv"
HINT = "run iperf with -y C -i 1 on both ends and import both files"


def role_of(text: str, lines: list[tool.CsvLine]) -> Role | None:
    """Which end wrote the CSV, when the file says so."""
    if "Server listening" in text:
        return "server"
    # "Client connecting" proves nothing: a dual-test (-d) server prints it too
    own = [ln for ln in lines if not ln.is_sum]
    udp = [ln for ln in own if ln.udp]
    if udp and len(udp) == len(own):
        # the client's own UDP lines carry no loss figures: total datagrams -1 on its summary
        return "client" if any(len(ln.udp) > 2 and ln.udp[2] < 0 for ln in udp) else "server"
    return None


def role_from_ports(text: str, lines: list[tool.CsvLine]) -> tuple[Role | None, str]:
    """Which end wrote the CSV, from its header or its ports; (role, why) or
    (None, why not).

    2.2's header names the writer's own fields (``writecnt``: the sending
    client's, ``readcnt``: the reading server's).  Before 2.1 each line is
    written from its writer's side (local address and port first), so the
    end whose local port is the listening one is the server, and a client's
    UDP file may carry the server's report of its own connection (from the
    listening port back to the client's).  From 2.1 on both ends write
    every line from the connecting end to the listening one: lines that all
    go to the listening port could be either end's."""
    header = next((ln for ln in text.splitlines() if ln.startswith("time,") and ",bytes," in ln), "")
    if ",readcnt" in header:
        return "server", "its header names the reading end's fields (readcnt)"
    if ",writecnt" in header:
        return "client", "its header names the sending end's fields (writecnt)"
    extra = _enhanced_tcp_fields(text)
    if extra in (6, 7):
        return "client", f"its enhanced TCP lines carry the sending end's write counts ({extra} fields after speed)"
    if extra == 9:
        return "server", "its enhanced TCP lines carry the reading end's read count and 8 read-size bins"
    own = [ln for ln in lines if not ln.is_sum and ln.sport and ln.dport]
    try:
        port = tool._server_port(own)
    except ToolError:
        port = None
    if port is None or not own:
        return None, "its ports name no listening port common to every line"
    out = {(ln.src, ln.sport) for ln in own if ln.dport == port and ln.sport != port}
    back = [ln for ln in own if ln.sport == port]
    if not back:
        return None, (f"every line goes to the listening port {port}, as iperf 2.1+ writes them at both ends")
    if not out:
        return "server", f"every line is written from the listening port {port} (local address first)"
    if all((ln.dst, ln.dport) in out for ln in back):
        first = next(ln.sport for ln in own if ln.dport == port)
        return "client", (f"its own connection goes from port {first} to the listening port {port} and the "
                          "server's report of it came back")
    return None, (f"it has connections both to and from the listening port {port} (a dual test): either end "
                  "could have written it")


def _enhanced_tcp_fields(text: str) -> int | None:
    """How many fields follow speed on an enhanced (-e) TCP line of 2.1.9+
    (its stamp carries the zone: ``+0000:``): a sender writes its write
    count, errors, retries, cwnd and RTT (6, or 7 from 2.2), a receiver its
    read count and 8 read-size bins (9).  None for other lines."""
    for raw in text.splitlines():
        f = raw.strip().split(",")
        if len(f) < 10 or not re.match(r"[+-]\d{4}:\d{14}", f[0]):
            continue
        if "-" not in f[6]:
            f = f[:6] + [f"{f[6]}-{f[7]}"] + f[8:]         # 2.2: start,end as two fields
        rest = f[9:]
        if not rest or any("." in x for x in rest) or not all(x.lstrip("-").isdigit() for x in rest):
            return None
        return len(rest)
    return None


def parse(text: str, name: str, *, role: Role | None = None, server_port: int | None = None) -> ParsedFile:
    skipped: list[str] = []
    lines = tool.parse_lines(text, strict=False, skipped=skipped)
    if not lines:
        raise InputError("no iperf2 CSV report lines", where=name, hint=HINT)
    inferred = ""
    said = role_of(text, lines)                   # the file's own word first, then the caller's, then its ports
    if said is not None:
        role = said
    elif role is None:
        role, why = role_from_ports(text, lines)
        if role is None:
            raise InputError(f"iperf2 CSV does not say which end wrote it ({why})", where=name,
                             hint="say which end wrote it: nicbench import --role client (or --role server) FILE")
        inferred = f"the {role}'s file, as {why} (--role overrides)"
    try:
        rep = tool.parse(text, role=role, server_port=server_port, strict=False)
    except ToolError as e:
        raise InputError(e.message, where=name, hint=e.hint) from None
    notes = [inferred] if inferred else []
    if skipped:
        notes.append(f"{len(skipped)} non-CSV line(s) skipped (banners, header)")
    sums = [ln for ln in lines if ln.is_sum]
    if sums:
        notes.append(f"{len(sums)} -P sum line(s) (id -1) not counted as streams")
    udp = any(ln.udp for ln in lines)
    kind = "udp" if udp else "tcp"
    totals: dict[tuple[str, str], traffic.Total] = {}
    for k, b in rep.totals.items():
        flow, side = k.split(".")
        secs = rep.spans.get(k, 0.0)
        u = rep.udp.get(k, ())
        jit, lost, tot, ooo = (u + (None,) * 5)[0], (u + (None,) * 5)[1], (u + (None,) * 5)[2], (u + (None,) * 5)[4]
        real = tot is not None and tot >= 0 and side == "receiver"
        totals[(traffic.direction_of(flow, role), side)] = traffic.Total(
            bytes=finite(b, "bytes", name), seconds=secs,
            packets=tot if real else None, lost=lost if real else None,
            jitter_s=jit / 1000 if real and jit is not None else None, out_of_order=ooo if real else None)
    flows = {iv.flow for iv in rep.intervals} | {k.split(".")[0] for k in rep.totals}
    d = {traffic.direction_of(f, role) for f in flows}
    streams = max((iv.streams for iv in rep.intervals), default=1)
    dropped: list[str] = []
    bad = [ln for ln in lines if ln.bps > 0 and ln.end > ln.start
           and abs(ln.bytes * 8 / (ln.end - ln.start) - ln.bps) > 0.05 * ln.bps and ln.end - ln.start >= 1]
    if bad:
        notes.append(f"{len(bad)} line(s) whose bits/s field disagrees with bytes over the interval by >5 %; "
                     "figures are computed from bytes and the interval")
    starts = [iv.abs_start for iv in rep.intervals if iv.abs_start is not None]
    params = {"direction": "bidir" if d == {"tx", "rx"} else (d.pop() if d else None), "streams": streams,
              "protocol": kind.upper(), "engine": "iperf2", "server_port": rep.server_port}
    return traffic.build(name=name, fmt=FORMAT, tool="iperf2", version=None, role=role, kind=kind,  # type: ignore[arg-type]
                         params=params, intervals=rep.intervals, totals=totals,
                         start=min(starts) if starts else None, host=name, notes=notes, dropped=dropped, hint=HINT,
                         pairs=[(ln.sport, ln.dport) for ln in lines if not ln.is_sum and ln.sport and ln.dport],
                         tails=True)
