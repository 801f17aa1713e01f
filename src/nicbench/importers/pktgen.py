"""netmap pkt-gen console output: ``main_thread [...] N pps (M pkts [B bps] in U usec)``
lines, one file per port (several files run together form one multi-port
point), or only the final ``Speed: X Mpps`` line of newer builds.  The
leading time stamps are seconds of pkt-gen's own clock: times are relative.

The frame size (with the 4-byte FCS, as the packet study counts it) comes
from pkt-gen's own bits per second over its packets per second: pkt-gen
counts frames without their FCS.
"""

from __future__ import annotations

import re
import statistics

from ..core.errors import InputError
from .model import ParsedFile, no_point, sample

FORMAT = "pktgen-text"
HINT = "save pkt-gen's console output (its main_thread lines) for each port"
_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}
_LINE = re.compile(r"^\s*(?P<ts>\d+\.\d+)\s+main_thread\s+\[\d+\]\s+(?P<pps>[\d.]+)\s*(?P<pu>[KMG]?)pps\s+"
                   r"\((?P<n>[\d.]+)\s*(?P<nu>[KMG]?)pkts(?:\s+(?P<bps>[\d.]+)\s*(?P<bu>[KMG]?)bps)?\s+in\s+"
                   r"(?P<us>\d+)\s+usec\)", re.M)
_SPEED = re.compile(r"Speed:\s+([\d.]+)\s*([KMG]?)pps(?:\s+Bandwidth:\s+([\d.]+)\s*([KMG]?)bps)?", re.M)
_IFACE = re.compile(r"(Sending on|Receiving from) (?:netmap:)?(\S+?):\s*(?:(\d+) queues, (\d+) threads)?")
FCS = 4


def parse(text: str, name: str) -> ParsedFile:
    iface = _IFACE.search(text)
    mode = ("tx" if iface[1] == "Sending on" else "rx") if iface else None
    port = iface[2] if iface else name
    metric = "pkt.received" if mode == "rx" else "pkt.sent"
    samples = []
    pkts = usec = 0.0
    per_frame: list[float] = []
    for m in _LINE.finditer(text):
        n = float(m["n"]) * _SCALE[m["nu"]]
        us = float(m["us"])
        t1 = float(m["ts"])
        samples.append(sample(metric, round(n), "packets", t1 - us / 1e6, t1, host=name, port=port))
        pkts += round(n)
        usec += us
        pps = float(m["pps"]) * _SCALE[m["pu"]]
        if m["bps"] and pps > 0:
            per_frame.append(float(m["bps"]) * _SCALE[m["bu"]] / pps / 8)
    totals: dict[str, float] = {}
    notes = []
    if usec > 0:
        totals = {"packets": pkts, "seconds": usec / 1e6}
    else:
        sp = _SPEED.search(text)
        if not sp:
            if "main_thread" in text or "pkt-gen" in text:
                raise no_point(name, "no main_thread rate lines and no Speed summary", HINT)
            raise InputError("no pkt-gen rate lines", where=name, hint=HINT)
        totals = {"pps": float(sp[1]) * _SCALE[sp[2]]}
        if sp[3] and totals["pps"] > 0:
            per_frame.append(float(sp[3]) * _SCALE[sp[4]] / totals["pps"] / 8)
        notes.append("only pkt-gen's final Speed line: a rate without a packet count or intervals")
    if mode is None:
        notes.append("the file does not say whether pkt-gen sent or received; read as sent")
    if usec > 0 and pkts == 0:
        raise no_point(name, "every interval counted 0 packets", "check the link and the other end")
    params: dict[str, object] = {"direction": mode or "tx", "port": port, "engine": "pkt-gen",
                                 "ip": 6 if re.search(r"range is \[?[0-9a-fA-F]*::", text) else 4}
    if iface and iface[4]:
        params["threads"] = int(iface[4])
    if per_frame:
        params["frame_size"] = round(statistics.median(per_frame)) + FCS
        notes.append(f"frame size {params['frame_size']} B (with FCS) from pkt-gen's bits/s over its packets/s")
    return ParsedFile(name=name, format=FORMAT, tool="pkt-gen", version=None, role=None, kind="packets",
                      params=params, samples=samples, totals=totals, relative_time=True, notes=tuple(notes))
