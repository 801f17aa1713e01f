"""Importing what people already have: tool outputs run by hand or by other
harnesses become :class:`ParsedFile` records (pure parsers, no store access).

``parse_file(text, name, force=None, role=None)`` detects the format (or
uses ``force``), parses, and turns any failure into nicbench's own errors.
"""

from __future__ import annotations

from collections.abc import Callable

from ..core.errors import InputError, NicbenchError
from . import (
    fio_json,
    fio_terse,
    iperf2_csv,
    iperf2_text,
    iperf3_json,
    iperf3_stream,
    iperf3_text,
    irtt_json,
    netperf_text,
    ntttcp_xml,
    nuttcp_text,
    pktgen,
    sockperf_text,
    trafgen_text,
    wrk_text,
)
from .bounds import check as check_bounds
from .detect import detect
from .model import ParsedFile, Role

__all__ = ["HINTS", "ParsedFile", "PARSERS", "detect", "parse_file", "points"]

PARSERS: dict[str, Callable[[str, str], ParsedFile]] = {
    "iperf3-json": iperf3_json.parse, "iperf3-text": iperf3_text.parse, "iperf2-csv": iperf2_csv.parse,
    "iperf2-text": iperf2_text.parse, "fio-json": fio_json.parse, "wrk-text": wrk_text.parse,
    "pktgen-text": pktgen.parse, "trafgen-text": trafgen_text.parse, "netperf-text": netperf_text.parse,
    "sockperf-text": sockperf_text.parse, "irtt-json": irtt_json.parse, "iperf3-json-stream": iperf3_stream.parse,
    "ntttcp-xml": ntttcp_xml.parse, "nuttcp-text": nuttcp_text.parse, "fio-terse": fio_terse.parse}

# per format, how to produce a file nicbench can use in full (for error hints)
HINTS: dict[str, str] = {
    "iperf3-json": iperf3_json.HINT, "iperf3-text": iperf3_text.HINT, "iperf2-csv": iperf2_csv.HINT,
    "iperf2-text": iperf2_text.HINT, "fio-json": fio_json.HINT, "wrk-text": wrk_text.HINT, "wrk-lua": wrk_text.HINT,
    "pktgen-text": pktgen.HINT, "trafgen-text": trafgen_text.HINT, "netperf-text": netperf_text.HINT,
    "sockperf-text": sockperf_text.HINT, "irtt-json": irtt_json.HINT, "iperf3-json-stream": iperf3_stream.HINT,
    "ntttcp-xml": ntttcp_xml.HINT, "nuttcp-text": nuttcp_text.HINT, "fio-terse": fio_terse.HINT}


def parse_file(text: str, name: str, force: str | None = None, role: Role | None = None) -> ParsedFile:
    """Detect and parse one file.  Raises only NicbenchError subclasses: a
    parser tripping over a damaged file (a missing key, a wrong type) becomes
    an InputError naming the file, never a traceback; so does a figure
    outside :mod:`.bounds`."""
    fmt = detect(text, name, force)
    try:
        if role is not None and fmt in ("iperf2-csv", "iperf2-text", "iperf3-text"):
            p = {"iperf2-csv": iperf2_csv.parse, "iperf2-text": iperf2_text.parse,
                 "iperf3-text": iperf3_text.parse}[fmt](text, name, role=role)
        else:
            p = PARSERS[fmt](text, name)
        for q in points(p):
            check_bounds(q)         # a figure no NIC carries, or intervals against the file's own summary
        return p
    except NicbenchError as e:
        if isinstance(e, InputError):
            raise
        raise InputError(e.message, where=name, hint=e.hint) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError, OverflowError, ZeroDivisionError,
            RecursionError) as e:
        raise InputError(f"{fmt}: the file is damaged or not {fmt} output ({type(e).__name__}: {str(e)[:120]})",
                         where=name, hint="check that the file is complete; re-run the tool if it was cut off") \
            from None


def points(p: ParsedFile) -> list[ParsedFile]:
    """The points one parsed file holds: itself, or (a fio document whose job
    groups ran one after another) one file per group."""
    inner = p.extra.get("points")
    return list(inner) if inner else [p]
