"""nuttcp's client output: optional ``-i`` interval lines, then its summary
line (the one with ``%TX``/``%RX``)::

     216.8125 MB /   1.00 sec = 1817.8571 Mbps    45 retrans    206 KB-cwnd
    2197.0657 MB /  10.00 sec = 1842.3790 Mbps 8 %TX 90 %RX 90 retrans 237 KB-cwnd 0.50 msRTT
     252.0586 MB /  10.00 sec =  211.4462 Mbps 99 %TX 50 %RX 1485 / 259593 drop/pkt 0.57 %loss 37.2012 msMaxJitter

Its "MB" are MiB (2197.0657 x 2^20 x 8 / 10.00 s is its 1842 Mbps, to the
rounding of its seconds); Mbps decimal.  A UDP summary's bytes are the
receiver's: its datagrams that arrived times their size make them (259593 -
1485 = 258108 x 1024 B = 252.06 MiB), and its drop counts are the
receiver's, so a UDP file has a receiver figure.  A TCP line does not say
which end measured it: it is taken as the transmitter's (sender-side,
said).  ``msMaxJitter`` is the worst jitter, not a mean: kept in the notes,
not as jitter.  nuttcp transmits from the client by default (``-t``).
"""

from __future__ import annotations

import re

from ..core.errors import InputError
from ..tools.base import FlowInterval
from . import traffic
from .model import Kind, ParsedFile

FORMAT = "nuttcp-text"
HINT = "save nuttcp's whole client output (with -i 1 for intervals)"
MIB = 2**20
_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?) MB /\s*(\d+(?:\.\d+)?) sec =\s*(\d+(?:\.\d+)?) Mbps(.*)$", re.M)
_DROP = re.compile(r"(\d+) / (\d+) ~?drop/pkt\s+(\d+(?:\.\d+)?) ~?%loss(?:\s+(\d+(?:\.\d+)?) msMaxJitter)?")
_RETR = re.compile(r"(\d+) retrans")


def parse(text: str, name: str) -> ParsedFile:
    lines = list(_LINE.finditer(text))
    if not lines:
        raise InputError("no nuttcp report line (\"N MB / T sec = R Mbps\")", where=name, hint=HINT)
    summary = next((m for m in reversed(lines) if "%TX" in m[4]), None)
    udp = bool(_DROP.search(text))
    kind: Kind = "udp" if udp else "tcp"
    side = "receiver" if udp else "sender"
    d = "tx"                  # the client transmits (nuttcp -t, its default)
    ivs = []
    t = 0.0
    for m in lines:
        if m is summary:
            continue
        secs = float(m[2])
        drop = _DROP.search(m[4])
        retr = _RETR.search(m[4])
        ivs.append(FlowInterval(t, t + secs, "fwd", side, int(float(m[1]) * MIB), 1,  # type: ignore[arg-type]
                                retransmits=int(retr[1]) if retr and not udp else None,
                                packets=int(drop[2]) if drop else None, lost=int(drop[1]) if drop else None))
        t += secs
    totals: dict[tuple[str, str], traffic.Total] = {}
    notes = ["nuttcp's MB are MiB; its figures are rounded to 4 decimals"]
    if summary is not None:
        drop = _DROP.search(summary[4])
        retr = _RETR.search(summary[4])
        totals[(d, side)] = traffic.Total(
            float(summary[1]) * MIB, float(summary[2]), packets=float(drop[2]) if drop else None,
            lost=float(drop[1]) if drop else None, retransmits=float(retr[1]) if retr and not udp else None,
            streams=1)
        if drop and drop[4]:
            notes.append(f"nuttcp's msMaxJitter {drop[4]} ms is its worst jitter, not a mean: not taken as jitter")
    if not udp:
        notes.append("nuttcp's TCP line does not say which end measured it: taken as the transmitter's")
    params: dict[str, object] = {"direction": d, "streams": 1, "protocol": kind.upper(), "engine": "nuttcp"}
    return traffic.build(name=name, fmt=FORMAT, tool="nuttcp", version=None, role="client", kind=kind,
                         params=params, intervals=ivs, totals=totals, start=None, host=name, notes=notes, hint=HINT,
                         tails=True)
