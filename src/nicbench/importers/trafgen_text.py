"""trafgen's exit summary (packets and bytes outgoing, seconds per CPU),
parsed by :func:`nicbench.tools.trafgen.parse`; relative times."""

from __future__ import annotations

from ..core.errors import InputError
from ..tools import trafgen as tool
from .model import ParsedFile, no_point, sample

FORMAT = "trafgen-text"
FCS = 4          # trafgen counts the bytes it hands the NIC; the packet study's frames include the FCS
HINT = "stop trafgen with SIGINT (timeout -s INT) so it prints its summary, and save its output"


def parse(text: str, name: str) -> ParsedFile:
    s = tool.parse(text)
    if s is None:
        raise InputError("no trafgen summary (\"N packets outgoing\")", where=name, hint=HINT)
    if s.seconds <= 0 or s.packets <= 0:
        raise no_point(name, f"{s.packets} packets over {s.seconds:g} s", HINT)
    samples = [sample("pkt.sent", s.packets, "packets", 0.0, s.seconds, host=name, port=name)]
    return ParsedFile(name=name, format=FORMAT, tool="trafgen", version=None, role=None, kind="packets",
                      params={"direction": "tx", "cpus": len(s.per_cpu) or None, "engine": "trafgen",
                              "frame_size": round(s.bytes / s.packets) + FCS},
                      samples=samples, totals={"packets": float(s.packets), "bytes": float(s.bytes),
                                               "seconds": s.seconds}, relative_time=True,
                      notes=("seconds: the longest CPU's sending time from trafgen's summary",))
