"""iperf 2 ``-y C`` CSV (2.0.x to 2.2): client or server, -P (sum lines with
id -1 are not streams), -R, -d/--full-duplex, UDP (server report fields).

Reuses :func:`nicbench.tools.iperf2.parse` (flows from the server port and
address, omit, wall-clock anchoring).  The CSV does not say which end wrote
it: the banner lines around it, or the UDP fields, tell; otherwise the
caller passes ``role``.
"""

from __future__ import annotations

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
    udp = [ln for ln in lines if ln.udp and not ln.is_sum]
    if udp:
        # the client's own UDP lines carry no loss figures: total datagrams -1 on its summary
        return "client" if any(len(ln.udp) > 2 and ln.udp[2] < 0 for ln in udp) else "server"
    return None


def parse(text: str, name: str, *, role: Role | None = None, server_port: int | None = None) -> ParsedFile:
    skipped: list[str] = []
    lines = tool.parse_lines(text, strict=False, skipped=skipped)
    if not lines:
        raise InputError("no iperf2 CSV report lines", where=name, hint=HINT)
    role = role_of(text, lines) or role          # the file's own word first, then the caller's
    if role is None:
        raise InputError("iperf2 CSV does not say which end wrote it", where=name,
                         hint="say which end wrote it: nicbench import --role client (or --role server) FILE")
    try:
        rep = tool.parse(text, role=role, server_port=server_port, strict=False)
    except ToolError as e:
        raise InputError(e.message, where=name, hint=e.hint) from None
    notes = []
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
                         pairs=[(ln.sport, ln.dport) for ln in lines if not ln.is_sum and ln.sport and ln.dport])
