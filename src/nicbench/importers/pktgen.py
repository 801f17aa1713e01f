"""netmap pkt-gen console output: ``main_thread [...] N pps (M pkts [B bps] in U usec)``
lines, one file per port (several files run together form one multi-port
point), or only the final ``Speed: X Mpps`` line of newer builds, parsed by
:func:`nicbench.tools.pktgen.parse`.  The leading time stamps are seconds of
pkt-gen's own clock: times are relative.

The frame size (with the 4-byte FCS, as the packet study counts it) comes
from pkt-gen's own bits per second over its packets per second: pkt-gen
counts frames without their FCS.
"""

from __future__ import annotations

import statistics

from ..core.errors import InputError
from ..tools import pktgen as tool
from .model import ParsedFile, no_point, sample

FORMAT = "pktgen-text"
HINT = "save pkt-gen's console output (its main_thread lines) for each port"


def parse(text: str, name: str) -> ParsedFile:
    c = tool.parse(text)
    port = c.port or name
    metric = "pkt.received" if c.direction == "rx" else "pkt.sent"
    samples = [sample(metric, r.packets, "packets", r.stamp - r.usec / 1e6, r.stamp, host=name, port=port)
               for r in c.reports]
    pkts = sum(r.packets for r in c.reports)
    usec = sum(r.usec for r in c.reports)
    per_frame = [r.bps / r.pps / 8 for r in c.reports if r.bps is not None and r.pps > 0]
    totals: dict[str, float] = {}
    notes = []
    if usec > 0:
        totals = {"packets": float(pkts), "seconds": usec / 1e6}
    else:
        if c.speed_pps is None:
            if "main_thread" in text or "pkt-gen" in text:
                raise no_point(name, "no main_thread rate lines and no Speed summary", HINT)
            raise InputError("no pkt-gen rate lines", where=name, hint=HINT)
        totals = {"pps": c.speed_pps}
        if c.speed_bps is not None and c.speed_pps > 0:
            per_frame.append(c.speed_bps / c.speed_pps / 8)
        notes.append("only pkt-gen's final Speed line: a rate without a packet count or intervals")
    if c.direction is None:
        notes.append("the file does not say whether pkt-gen sent or received; read as sent")
    if usec > 0 and pkts == 0:
        raise no_point(name, "every interval counted 0 packets", "check the link and the other end")
    params: dict[str, object] = {"direction": c.direction or "tx", "port": port, "engine": "pkt-gen",
                                 "ip": 6 if c.ipv6 else 4}
    if c.threads is not None:
        params["threads"] = c.threads
    if per_frame:
        params["frame_size"] = round(statistics.median(per_frame)) + tool.FCS
        notes.append(f"frame size {params['frame_size']} B (with FCS) from pkt-gen's bits/s over its packets/s")
    return ParsedFile(name=name, format=FORMAT, tool="pkt-gen", version=None, role=None, kind="packets",
                      params=params, samples=samples, totals=totals, relative_time=True, notes=tuple(notes))
