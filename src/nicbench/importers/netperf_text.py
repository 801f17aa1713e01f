"""netperf output: classic TCP_STREAM/UDP_STREAM and TCP_RR/UDP_RR/TCP_CRR
tables, and omni output selectors (``-o`` CSV with a header line, ``-k``
key=value).  Throughput in the units netperf names (10^6bits/s, Trans/s);
latencies in microseconds become seconds.  No wall clock.

Request/response files also say, when the file does: the protocol (from the
test's banner, or omni's ``PROTOCOL`` selector), the request and response
sizes in bytes (the classic table's columns, or ``REQUEST_SIZE`` /
``RESPONSE_SIZE``) and the initial burst (the banner's "first burst N", or
``BURST_SIZE``): ``params`` ``protocol``, ``request_size``,
``response_size``, ``burst``; what the file does not say is left out.
"""

from __future__ import annotations

import csv
import io
import re

from ..core.errors import InputError
from . import traffic
from .model import Kind, ParsedFile, finite, no_point, sample

FORMAT = "netperf-text"
HINT = "run netperf with -- -o (or -k) and save its output"
_TEST = re.compile(r"^(?:MIGRATED )?(.+?) TEST from", re.M)
_LAT = {"50th Percentile Latency Microseconds": "p50", "90th Percentile Latency Microseconds": "p90",
        "99th Percentile Latency Microseconds": "p99", "Mean Latency Microseconds": "mean",
        "Minimum Latency Microseconds": "min", "Maximum Latency Microseconds": "max",
        "Stddev Latency Microseconds": "stddev"}
# -k names -> the -o header's names (netperf's omni output selectors)
_KEYS = {"THROUGHPUT": "Throughput", "THROUGHPUT_UNITS": "Throughput Units", "P50_LATENCY":
         "50th Percentile Latency Microseconds", "P90_LATENCY": "90th Percentile Latency Microseconds",
         "P99_LATENCY": "99th Percentile Latency Microseconds", "MEAN_LATENCY": "Mean Latency Microseconds",
         "MIN_LATENCY": "Minimum Latency Microseconds", "MAX_LATENCY": "Maximum Latency Microseconds",
         "STDDEV_LATENCY": "Stddev Latency Microseconds", "ELAPSED_TIME": "Elapsed Time (sec)",
         "PROTOCOL": "Protocol", "REQUEST_SIZE": "Request Size Bytes", "RESPONSE_SIZE": "Response Size Bytes",
         "BURST_SIZE": "Initial Burst Requests"}
_BURST = re.compile(r":\s*first burst (\d+)")


def _fields(text: str, name: str) -> tuple[dict[str, str], list[str]]:
    notes: list[str] = []
    kv = dict(re.findall(r"^([A-Z_0-9]+)=(.*)$", text, re.M))
    if kv:
        return {str(_KEYS.get(k) or k): v.strip() for k, v in kv.items()}, notes
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for i, ln in enumerate(lines[:-1]):
        if ln.startswith("Throughput,") or ",Throughput," in ln:
            # a header wrapped by a terminal or an editor continues until the value line
            j = i + 1
            while j < len(lines) and not re.match(r"^\s*-?\d", lines[j]):
                j += 1
            if j >= len(lines):
                break
            if j > i + 1:
                notes.append("the -o header line was wrapped; its pieces were joined")
            head = next(csv.reader(io.StringIO(" ".join(lines[i:j]))))
            vals = next(csv.reader(io.StringIO(lines[j])))
            if len(head) != len(vals):
                notes.append(f"-o header has {len(head)} names but the value line {len(vals)} values; "
                             "matched by position")
            return dict(zip(head, vals, strict=False)), notes
    return {}, notes


def parse(text: str, name: str) -> ParsedFile:
    t = _TEST.search(text)
    test = t[1].strip().upper() if t else ""
    f, notes = _fields(text, name)
    omni = bool(f)                       # -o/-k output selectors: netperf's omni tests
    rr = "REQUEST/RESPONSE" in test or "Trans" in f.get("Throughput Units", "")
    udp_rcv: list[str] | None = None
    if not f:
        # classic table: the first line of numbers holds the result in its last column
        rows = [ln.split() for ln in text.splitlines() if re.match(r"^\s*\d+\s+\d+\s+\d+", ln)]
        # UDP_STREAM's second line is the receiver's: socket size, elapsed, messages, throughput
        second = [ln.split() for ln in text.splitlines() if re.match(r"^\s*\d+\s+\d+\.\d+\s+\d+\s+\d", ln)]
        udp_rcv = second[0] if second and len(second[0]) == 4 else None
        rows = [r for r in rows if len(r) >= 5]
        if not rows:
            raise InputError("no netperf result line", where=name, hint=HINT)
        f = {"Throughput": rows[0][-1], "Elapsed Time (sec)": rows[0][-2],
             "Throughput Units": "Trans/s" if rr else "10^6bits/s"}
        if not rr and "UDP" in test and len(rows[0]) == 6:
            # socket size, message size, elapsed, messages okay, errors, throughput
            f["Elapsed Time (sec)"] = rows[0][2]
        if rr and len(rows[0]) == 6:
            # Send and Recv socket sizes, Request and Resp. sizes, Elapsed, Trans. Rate
            f["Request Size Bytes"], f["Response Size Bytes"] = rows[0][2], rows[0][3]
        notes.append("classic netperf table: the last column of the first result line")
    if "Throughput" not in f:
        raise no_point(name, "no Throughput field", HINT)
    thr = finite(f["Throughput"], "Throughput", name)
    unit = f.get("Throughput Units", "")
    secs = finite(f.get("Elapsed Time (sec)", 0) or 0, "Elapsed Time", name)
    tags = dict(host=name, proc="0")
    params: dict[str, object] = {"test": test or None, "engine": "netperf"}
    totals: dict[str, float] = {}
    samples = []
    if rr:
        totals["transactions_per_s"] = thr
        if secs:
            totals["seconds"] = secs
            totals["transactions"] = thr * secs
            samples.append(sample("rr.transactions", thr * secs, "count", 0.0, secs, **tags))
        for k, label in _LAT.items():
            if f.get(k) not in (None, ""):
                v = finite(f[k], k, name) / 1e6
                totals[f"latency.{label}"] = v
                samples.append(sample(f"rr.latency.{label}", v, "s", 0.0, secs, **tags))
        kind: Kind = "rr"
        params.update(_rr_params(text, test, f, name))
    else:
        scale = {"10^6bits/s": 1e6, "10^9bits/s": 1e9, "10^3bits/s": 1e3, "bits/s": 1.0}.get(unit)
        if scale is None:
            raise InputError(f"throughput unit {unit!r} not understood", where=name, hint="use netperf -f m or g")
        if thr > 0 and secs:
            return _stream(text, name, test, thr * scale, secs, omni, udp_rcv, notes)
        totals["bps"] = thr * scale
        kind = "udp" if "UDP" in test else "tcp"
        side = _side(text, test, omni)
        params["side"] = side
        params["direction"] = "rx" if "MAERTS" in test else "tx"
        notes.append(f"netperf's throughput here is its {side}'s" + (" (omni: the remote receiver's count for a "
                                                                     "send test)" if side == "receiver" else ""))
    if thr <= 0:
        raise no_point(name, "throughput is 0", HINT)
    return ParsedFile(name=name, format=FORMAT, tool="netperf", version=None, role="client", kind=kind,
                      params=params, samples=samples, totals=totals,
                      relative_time=True, notes=tuple(notes))


def _side(text: str, test: str, omni: bool) -> str:
    """Whose count netperf's throughput is: its omni tests (every -o/-k output,
    and the MIGRATED banner of 2.5+) take a send test's from the remote
    receiver and a receive test's (MAERTS) from the local receiver
    (src/nettest_omni.c: ``remote_bytes_xferd`` unless ``NETPERF_RECV_ONLY``);
    the classic tests before the migration counted what was sent."""
    if "MAERTS" in test or omni or re.search(r"^MIGRATED ", text, re.M):
        return "receiver"
    return "sender"


def _stream(text: str, name: str, test: str, bps: float, secs: float, omni: bool, udp_rcv: list[str] | None,
            notes: list[str]) -> ParsedFile:
    """A _STREAM/_MAERTS result as a traffic file: whose count it is (:func:`_side`),
    the direction (MAERTS: the netserver sends), a classic UDP_STREAM's two lines."""
    udp = "UDP" in test
    kind: Kind = "udp" if udp else "tcp"
    d = "rx" if "MAERTS" in test else "tx"
    side = _side(text, test, omni)
    size = re.search(r"^\s*\d+\s+(\d+)\s+\d+\.\d+\s+\d+\s+\d+\s+[\d.]+\s*$", text, re.M) if udp else None
    totals: dict[tuple[str, str], traffic.Total] = {}
    if udp and udp_rcv is not None:
        # the first line is the sender's (messages sent), the second the receiver's (messages received)
        sent = re.search(r"^\s*\d+\s+\d+\s+\d+\.\d+\s+(\d+)\s+(\d+)\s+[\d.]+\s*$", text, re.M)
        n_sent = int(sent[1]) if sent else None
        r_secs, r_msgs, r_mbps = float(udp_rcv[1]), int(udp_rcv[2]), float(udp_rcv[3])
        totals[(d, "sender")] = traffic.Total(bps * secs / 8, secs, packets=n_sent, streams=1)
        if r_secs > 0:
            totals[(d, "receiver")] = traffic.Total(
                r_mbps * 1e6 * r_secs / 8, r_secs, packets=n_sent, streams=1,
                lost=n_sent - r_msgs if n_sent is not None and n_sent >= r_msgs else None)
        notes.append("netperf UDP_STREAM: its first line is the sender's, its second the receiver's"
                     + (f" ({n_sent - r_msgs} of {n_sent} messages did not arrive)" if n_sent is not None else ""))
    else:
        totals[(d, side)] = traffic.Total(bps * secs / 8, secs, streams=1)
        notes.append(f"netperf's throughput here is its {side}'s" + (
            " (omni: the remote receiver's count for a send test, src/nettest_omni.c)" if side == "receiver"
            and "MAERTS" not in test else " (MAERTS: the netserver sends, netperf receives)" if "MAERTS" in test
            else " (a classic test before netperf 2.5's omni migration)"))
    params: dict[str, object] = {"direction": d, "streams": 1, "protocol": kind.upper(), "engine": "netperf",
                                 "test": test or None}
    if size:
        params["io_size"] = int(size[1])
    return traffic.build(name=name, fmt=FORMAT, tool="netperf", version=None, role="client", kind=kind,
                         params=params, intervals=[], totals=totals, start=None, host=name, notes=notes, hint=HINT)


def _rr_params(text: str, test: str, f: dict[str, str], name: str) -> dict[str, object]:
    """What a request/response file says of its point: protocol, sizes (bytes), initial burst."""
    out: dict[str, object] = {}
    proto = f.get("Protocol", "").strip().upper() or next((p for p in ("TCP", "UDP") if test.startswith(p)), "")
    if proto in ("TCP", "UDP"):
        out["protocol"] = proto.lower()
    for field_, key in (("Request Size Bytes", "request_size"), ("Response Size Bytes", "response_size"),
                        ("Initial Burst Requests", "burst")):
        if f.get(field_) not in (None, ""):
            out[key] = int(finite(f[field_], field_, name))
    b = _BURST.search(text)
    if b and "burst" not in out:
        out["burst"] = int(b[1])
    return out
