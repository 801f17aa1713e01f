"""Which format a file is in, from its content (and its name as a tie-break).

``detect(text, name)`` returns a format id from :data:`FORMATS` or raises
InputError listing what it looked for; ``force`` (a tool or format name)
overrides detection, as ``nicbench import TOOL FILE`` does.
"""

from __future__ import annotations

import json
import re

from ..core.errors import InputError

FORMATS = ("iperf3-json", "iperf3-text", "iperf2-csv", "iperf2-text", "fio-json", "wrk-text", "pktgen-text",
           "trafgen-text", "netperf-text", "sockperf-text", "irtt-json", "iperf3-json-stream",
           "ntttcp-xml", "nuttcp-text", "fio-terse")
# a tool name given by the user -> the formats it may mean, tried in order
TOOLS = {"iperf3": ("iperf3-json", "iperf3-json-stream", "iperf3-text"), "iperf2": ("iperf2-csv", "iperf2-text"),
         "iperf": ("iperf2-csv", "iperf2-text"), "fio": ("fio-json", "fio-terse"), "wrk": ("wrk-text",),
         "wrk2": ("wrk-text",),
         "pkt-gen": ("pktgen-text",), "pktgen": ("pktgen-text",), "trafgen": ("trafgen-text",),
         "netperf": ("netperf-text",), "sockperf": ("sockperf-text",), "irtt": ("irtt-json",),
         "ntttcp": ("ntttcp-xml",), "nuttcp": ("nuttcp-text",)}
_IPERF2_CSV = re.compile(r"^(?:[+-]\d{4}:)?\d{14}(?:\.\d+)?[^,]*,[^,]*,-?\d*,[^,]*,-?\d*,-?\d+,\d", re.M)


def _guess(text: str) -> list[str]:
    head = text[:200_000]
    out = []
    if re.search(r'^\{"event":\s*"start",\s*"data":', head, re.M):
        out.append("iperf3-json-stream")       # before iperf3-json: each line is a small JSON object
    if re.search(r'^(?:\^\[\[[0-9;]*[A-Za-z~]|\^[A-Z@\\\]^_?])*\{', head, re.M) and '"start"' in head and \
            re.search(r'"version":\s*"iperf 3|"intervals"|"error"', head):
        out.append("iperf3-json")
    if re.search(r"^\s*<ntttcp[sr][\s>]", head, re.M):
        out.append("ntttcp-xml")
    if re.search(r"^\s*\d+(?:\.\d+)? MB /\s*\d+(?:\.\d+)? sec =\s*\d+(?:\.\d+)? Mbps", head, re.M):
        out.append("nuttcp-text")
    if '"fio version"' in head:
        out.append("fio-json")
    elif re.search(r"^[345];fio-[^;]*;", head, re.M):
        out.append("fio-terse")
    if re.search(r"requests in [\d.]+\w+, [\d.]+\w*B read", head) or "nicbench-wrk-begin" in head:
        out.append("wrk-text")
    if "main_thread [" in head or re.search(r"^Speed: [\d.]+ [KMG]?pps", head, re.M):
        out.append("pktgen-text")
    if re.search(r"^\s*\d+ packets outgoing", head, re.M):
        out.append("trafgen-text")
    if re.search(r"^(MIGRATED )?\S.* TEST from .* AF_INET", head, re.M):
        out.append("netperf-text")
    if re.search(r"^sockperf: (?:\S+ )?(?:\[Valid Duration\]|Summary: |Total of \d+ messages)", head, re.M) or \
            re.search(r"^packet, txTime\(sec\), rxTime\(sec\)", head, re.M):
        out.append("sockperf-text")
    if '"json_format"' in head and '"round_trips"' in text and '"irtt"' in head:
        out.append("irtt-json")
    if _IPERF2_CSV.search(head):
        out.append("iperf2-csv")
    if re.search(r"\[\s*\*?\s*(\d+|SUM)\].*sec\s+[\d.]+\s+[KMGT]?Bytes", head):
        iperf2 = ("Write/Err" in head or "Read/Err" in head or "Client connecting to" in head
                  or "Server listening on" in head or re.search(r"\d\.\d{4}-\d+\.\d{4} sec", head))
        iperf3 = ("Connecting to host" in head or "iperf Done" in head
                  or re.search(r"(sender|receiver)\s*$", head, re.M) or "Accepted connection from" in head)
        out.append("iperf3-text" if iperf3 and not (iperf2 and not iperf3) else "iperf2-text")
    return out


def detect(text: str, name: str, force: str | None = None) -> str:
    """The format id of ``text``; ``force``: a tool or format name to use instead."""
    if force:
        if force in FORMATS:
            return force
        if force not in TOOLS:
            raise InputError(f"unknown tool {force!r}: nicbench imports {', '.join(sorted(TOOLS))}", where=name,
                             hint=f"name one of those tools, or a format ({', '.join(FORMATS)})")
        found = [f for f in _guess(text) if f in TOOLS[force]]
        return found[0] if found else TOOLS[force][0]
    found = _guess(text)
    if not found:
        what = "empty file" if not text.strip() else f"it looks like {describe(text)}"
        raise InputError(f"format not recognised: {what}", where=name,
                         hint=f"nicbench imports {', '.join(FORMATS)}; name the tool with --as TOOL "
                              f"({'|'.join(sorted(TOOLS))}) if the file is one of them")
    return found[0]


def describe(text: str) -> str:
    """What a file looks like, in a few words, for an error that cannot say
    which tool wrote it: its shape (JSON and its top keys, CSV and its
    field count, text and its first line) so its user sees what was read."""
    body = text.lstrip("\ufeff").strip()
    first = next((ln.strip() for ln in body.splitlines() if ln.strip()), "")
    if body[:1] in "{[":
        try:
            doc = json.loads(body)
        except (ValueError, RecursionError):
            return f"JSON that does not parse (first line {first[:60]!r})"
        if isinstance(doc, dict):
            keys = ", ".join(list(doc)[:6])
            return f"a JSON object with keys {keys or '(none)'}"
        return f"a JSON array of {len(doc)} item(s)"
    if "\x00" in body[:4096]:
        return "binary data"
    lines = [ln for ln in body.splitlines()[:50] if ln.strip()]
    commas = [ln.count(",") for ln in lines]
    if lines and min(commas) >= 2 and max(commas) == min(commas):
        return f"CSV of {commas[0] + 1} fields per line, first line {first[:60]!r}"
    return f"text of {len(body.splitlines())} line(s) starting {first[:60]!r}"
