"""iperf3 ``--json-stream`` output (3.17+): one JSON object per line,
``{"event": "start"|"interval"|"end"|"error"|"server_output_json"|
"server_output_text", "data": ...}``.

Each event's data is the matching section of the ``-J`` report (iperf3's
``iperf_json_finish`` writes the same cJSON objects one by one), so the
lines are assembled into that report and read by :mod:`.iperf3_json`: one
parser for both.  A stream cut short (the client stopped before its
``end`` event) has no whole-test summary and is refused as the ``-J``
report without ``end`` is; lines that are not JSON (a terminal's echo, a
warning) are skipped and counted.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..core.errors import InputError
from . import iperf3_json
from .model import ParsedFile

FORMAT = "iperf3-json-stream"
HINT = "save iperf3 --json-stream's whole output (every line, its end event included)"


def assemble(text: str, name: str) -> tuple[dict[str, Any], int]:
    """The ``-J`` report the stream's events make, and how many lines were not events."""
    doc: dict[str, Any] = {"intervals": []}
    skipped = 0
    for raw in text.splitlines():
        ln = raw.strip()
        if not ln:
            continue
        try:
            ev = json.loads(ln)
        except (ValueError, RecursionError):
            skipped += 1
            continue
        if not isinstance(ev, dict) or not isinstance(ev.get("event"), str):
            skipped += 1
            continue
        kind, data = ev["event"], ev.get("data")
        if kind == "interval":
            doc["intervals"].append(data)
        elif kind in ("start", "end", "error", "server_output_json", "server_output_text"):
            doc[kind] = data
        else:
            skipped += 1
    if "start" not in doc:
        raise InputError("no start event in the iperf3 JSON stream", where=name, hint=HINT)
    return doc, skipped


def parse(text: str, name: str) -> ParsedFile:
    doc, skipped = assemble(text, name)
    p = iperf3_json.parse(json.dumps(doc), name)
    notes = [f"iperf3 --json-stream: {len(doc['intervals'])} interval events assembled into its -J report"]
    if skipped:
        notes.append(f"{skipped} line(s) that are not stream events skipped")
    return dataclasses.replace(p, format=FORMAT, notes=tuple(notes) + p.notes)
