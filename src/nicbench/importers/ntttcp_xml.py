"""NTttcp's XML report (``-xml FILE``; Windows NTttcp 5.x, and ntttcp-for-linux's
``-x``): ``<ntttcps>`` is the sender's, ``<ntttcpr>`` the receiver's.

What the file says: ``total_bytes`` in "MB" that are MiB (its own
``throughput metric="MB/s"`` x 8 x 1.048576 is its ``mbps``), ``realtime``
(s, the timed run, warm-up and cool-down excluded), one ``<thread>`` per
connection, ``<parameters>`` (``udp``, ``port``, ``max_active_threads``)
and ``bufferLen`` (bytes per send/receive call).  No wall clock; the two
files of one test share their port (``extra["pairs"]``), so they are one
process pair.  The sender's file is the client's (tx), the receiver's the
server's.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET  # noqa: S405 -- a tool's report; no DTD or entities are read (see _SAFE)

from ..core.errors import InputError
from . import traffic
from .model import Kind, ParsedFile, Role, finite

FORMAT = "ntttcp-xml"
HINT = "save NTttcp's XML report (-xml FILE on Windows, -x FILE with ntttcp-for-linux) on both ends"
MIB = 2**20
# an XML report has no DTD: refusing one keeps entity expansion (billion laughs) out
_SAFE = re.compile(r"<!DOCTYPE|<!ENTITY", re.I)


def _num(root: ET.Element, path: str, what: str, name: str) -> float | None:
    el = root.find(path)
    if el is None or el.text is None or not el.text.strip():
        return None
    return finite(el.text.strip(), what, name)


def parse(text: str, name: str) -> ParsedFile:
    if _SAFE.search(text[:4096]):
        raise InputError("the XML declares a DTD or entities: not an NTttcp report", where=name, hint=HINT)
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as e:
        raise InputError(f"NTttcp XML does not parse ({e})", where=name, hint=HINT) from None
    if root.tag not in ("ntttcps", "ntttcpr"):
        raise InputError(f"XML root <{root.tag}>, not NTttcp's <ntttcps> or <ntttcpr>", where=name, hint=HINT)
    sender = root.tag == "ntttcps"
    role: Role = "client" if sender else "server"
    udp = (root.findtext("parameters/udp") or "").strip().lower() == "true"
    kind: Kind = "udp" if udp else "tcp"
    mb = _num(root, "total_bytes", "total_bytes", name)
    secs = _num(root, "realtime", "realtime", name)
    if mb is None or not secs:
        raise InputError("the report has no total_bytes or realtime", where=name, hint=HINT)
    unit = (root.find("total_bytes").get("metric") or "MB") if root.find("total_bytes") is not None else "MB"  # type: ignore[union-attr]
    if unit != "MB":
        raise InputError(f"total_bytes in {unit!r}, not NTttcp's MB", where=name, hint=HINT)
    nbytes = mb * MIB
    threads = len(root.findall("thread")) or int(_num(root, "parameters/max_active_threads", "threads", name) or 1)
    port = root.findtext("parameters/port")
    buf = _num(root, "bufferLen", "bufferLen", name)
    side = "sender" if sender else "receiver"
    d = "tx" if sender else "rx"          # from this file's own process (the receiver's: it received)
    bufs = _num(root, "total_buffers", "total_buffers", name)
    total = traffic.Total(nbytes, secs, streams=threads,
                          packets=bufs if udp and bufs is not None else None,
                          retransmits=_num(root, "packets_retransmitted", "packets_retransmitted", name)
                          if sender and not udp else None)
    notes = [f"NTttcp {'sender' if sender else 'receiver'}: {mb:g} MB (MiB) over {secs:g} s, {threads} thread(s)"]
    stated = [el for el in root.findall("throughput") if el.get("metric") == "mbps"]
    if stated and stated[0].text:
        notes.append(f"its own throughput {stated[0].text.strip()} \"mbps\" is 2^20-based: "
                     f"{nbytes * 8 / secs / 1e6:.6g} Mbit/s in decimal units")
    if udp and bufs is not None:
        notes.append(f"UDP: {bufs:.0f} datagrams of {buf or '?'} B {'sent' if sender else 'received'}; a receiver's "
                     "file does not count the lost ones")
    params: dict[str, object] = {"direction": d, "streams": threads, "protocol": kind.upper(), "engine": "ntttcp"}
    if buf:
        params["io_size"] = int(buf)
    return traffic.build(name=name, fmt=FORMAT, tool="ntttcp", version=root.get("version"), role=role, kind=kind,
                         params=params, intervals=[], totals={(d, side): total}, start=None, host=name,
                         notes=notes, hint=HINT, pairs=[(int(port), 0)] if port and port.isdigit() else [])
