"""The one figure a person reads first, per parsed file or group of files run
together: ``headline(x) -> (label, value, unit)``.

Traffic: receiver bits/s over the receiver's own span (iperf3's receiver
bits/s), summed over directions for bidir and over files run together; the
sender's when the file has no receiver figure (the label says so).  Storage:
bytes/s per op summed (read+write).  HTTP: requests/s.  Packets: packets/s.
RR: transactions/s, or the tool's own figure where it states one
(``extra["headline"]``: sockperf's and irtt's mean round trip, seconds).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.errors import InputError
from .model import ParsedFile


def _one(p: ParsedFile) -> tuple[str, float, str]:
    if p.extra.get("points"):
        raise InputError(f"the file holds {len(p.extra['points'])} points that ran one after another: "
                         "no one figure", where=p.name, hint="take the headline of each of points(file)")
    own = p.extra.get("headline")
    if own is not None:
        # the tool's own headline figure (sockperf's and irtt's mean round trip)
        return own[0], float(own[1]), own[2]
    t = p.totals
    if p.kind in ("tcp", "udp"):
        if "bps" in t:
            return f"{p.params.get('side', 'sender')} bit/s (netperf)", t["bps"], "bit/s"
        dirs = sorted({k.split(".")[0] for k in t})
        total, sides = 0.0, set()
        for d in dirs:
            side = "receiver" if t.get(f"{d}.receiver.seconds") else "sender"
            secs = t.get(f"{d}.{side}.seconds", 0.0)
            if secs > 0:
                total += t[f"{d}.{side}.bytes"] * 8 / secs
                sides.add(side)
        if not sides:
            # no whole-test line (a cut-off text): the measured intervals, sender-side
            ivs = [s for s in p.samples if s.metric.endswith(".bytes") and s.tag("omitted") != "1"]
            span = max((s.t_end for s in ivs), default=0.0) - min((s.t_start for s in ivs), default=0.0)
            if span > 0:
                sides = {f"{ivs[0].tag('side')} (intervals only)"}
                total = sum(s.value for s in ivs) * 8 / span
        label = "+".join(sorted(sides)) + " bit/s" + (" (" + "+".join(dirs) + ")" if len(dirs) > 1 else "")
        return label, total, "bit/s"
    if p.kind == "storage":
        v = sum(t[f"{op}.bytes"] / t[f"{op}.seconds"] for op in ("read", "write")
                if t.get(f"{op}.seconds"))
        return "storage bytes/s", v, "B/s"
    if p.kind == "http":
        v = t["requests_per_s"] if "requests_per_s" in t else t["requests"] / t["seconds"]
        return "requests/s", v, "req/s"
    if p.kind == "packets":
        v = t["pps"] if "pps" in t else t["packets"] / t["seconds"]
        return "packets/s", v, "pps"
    return "transactions/s", t["transactions_per_s"], "trans/s"


def details(p: ParsedFile) -> list[tuple[str, float, str]]:
    """The tool's other own figures beside its headline, as it reports them:
    fio's per-operation bandwidth and IOPS (readwrite, randrw), UDP loss and
    jitter per direction, a request/response tool's transactions/s and p99."""
    t = p.totals
    out: list[tuple[str, float, str]] = []
    if p.kind == "storage":
        for op in ("read", "write"):
            secs = t.get(f"{op}.seconds")
            if secs:
                out.append((f"{op} bytes/s", t[f"{op}.bytes"] / secs, "B/s"))
                if f"{op}.ios" in t:
                    out.append((f"{op} IOPS", t[f"{op}.ios"] / secs, "IO/s"))
    elif p.kind == "udp":
        for d in ("tx", "rx"):
            k = f"{d}.receiver"
            if t.get(f"{k}.packets") and f"{k}.lost" in t:
                out.append((f"{d} datagrams lost", 100.0 * t[f"{k}.lost"] / t[f"{k}.packets"], "%"))
            if f"{k}.jitter_s" in t:
                out.append((f"{d} jitter", t[f"{k}.jitter_s"], "s"))
    elif p.kind == "rr":
        if "transactions_per_s" in t:
            out.append(("transactions/s", t["transactions_per_s"], "trans/s"))
        if "latency.p99" in t:
            out.append(("round trip p99", t["latency.p99"], "s"))
    return out


def headline(x: ParsedFile | Sequence[ParsedFile]) -> tuple[str, float, str]:
    """One file's figure, or the sum over files run together (one point)."""
    files = [x] if isinstance(x, ParsedFile) else list(x)
    if not files:
        raise InputError("no files to sum")
    parts = [_one(p) for p in files]
    units = {u for _, _, u in parts}
    if len(units) != 1:
        raise InputError(f"files of different kinds cannot be summed ({', '.join(sorted(units))})")
    labels = sorted({lb for lb, _, _ in parts})
    return ("; ".join(labels) + (f" summed over {len(files)} files" if len(files) > 1 else ""),
            sum(v for _, v, _ in parts), units.pop())
