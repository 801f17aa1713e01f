"""iperf 2 human text, plain or ``-e`` enhanced, client or server, TCP or UDP.

Report lines share iperf3's shape and are read by
:func:`nicbench.importers.iperf3_text.lines`; the whole-test line is the one
starting at 0 whose span is longer than an interval; with -P the ``[SUM]``
lines count.  A UDP client's ``Server Report`` is the receiver's total.
No wall clock: times are relative.
"""

from __future__ import annotations

import re
import statistics

from ..core.errors import InputError
from ..tools.base import FlowInterval
from . import iperf3_text, traffic
from .model import ParsedFile, Role

FORMAT = "iperf2-text"
HINT = "run iperf with -y C (CSV) for exact figures, or save its whole text output"
_DATAGRAM = re.compile(r"(?:Sending|Receiving) (\d{1,6}) byte datagrams")


def parse(text: str, name: str, *, role: Role | None = None) -> ParsedFile:
    # the file's own word first, then the caller's
    role = ("server" if "Server listening" in text else "client" if "Client connecting" in text else None) or role
    pre, _, report = text.partition("Server Report:")
    ls = iperf3_text.lines(pre)
    if not ls:
        raise InputError("no iperf2 report lines in the text", where=name, hint=HINT)
    udp = "UDP" in text.split("\n", 3)[-1][:400] or "Datagrams" in text
    kind = "udp" if udp else "tcp"
    multi = any(ln.ident == "SUM" for ln in ls)
    use = [ln for ln in ls if (ln.ident == "SUM") == multi]
    spans = [ln.end - ln.start for ln in use if ln.end > ln.start]
    nominal = statistics.median(spans) if spans else 1.0
    sends = role != "server"
    side = "sender" if sends else "receiver"
    d = "tx" if sends else "rx"
    flow = "fwd"
    ivs: list[FlowInterval] = []
    totals: dict[tuple[str, str], traffic.Total] = {}
    streams = len({ln.ident for ln in ls if ln.ident != "SUM"}) or 1
    for ln in use:
        if ln.start == 0 and ln.end - ln.start > 1.5 * nominal or len(use) == 1:
            totals[(d, side)] = traffic.Total(ln.bytes, ln.end - ln.start, packets=ln.packets, lost=ln.lost,
                                              jitter_s=ln.jitter_s, retransmits=ln.retransmits, streams=streams)
        else:
            ivs.append(FlowInterval(ln.start, ln.end, flow, side, int(ln.bytes), streams,  # type: ignore[arg-type]
                                    retransmits=ln.retransmits, packets=ln.packets, lost=ln.lost,
                                    jitter_s=ln.jitter_s))
    srv = iperf3_text.lines(report)
    if srv:
        ln = srv[-1]
        totals[("tx", "receiver")] = traffic.Total(ln.bytes, ln.end - ln.start, packets=ln.packets, lost=ln.lost,
                                                   jitter_s=ln.jitter_s, streams=streams)
    ver = re.search(r"iperf version (2\.\d+\.\d+\S*)", text)
    params: dict[str, object] = {"direction": d, "streams": streams, "protocol": kind.upper(), "engine": "iperf2"}
    size = _DATAGRAM.search(text) if udp else None
    if size:
        params["io_size"] = int(size[1])         # the datagram size its banner states (-l)
    notes = ["figures from iperf2 text are rounded to 3 significant digits"]
    if srv:
        notes.append("the receiver's total comes from the UDP Server Report")
    return traffic.build(name=name, fmt=FORMAT, tool="iperf2", version=ver[1] if ver else None, role=role,
                         kind=kind, params=params, intervals=ivs, totals=totals, start=None, host=name,  # type: ignore[arg-type]
                         notes=notes, hint=HINT, pairs=traffic.connection_pairs(text))
