"""sockperf client output, 3.x: ping-pong and under-load summaries (stdout),
``--full-log`` files (one line per timed request), and throughput summaries.

Read with :mod:`nicbench.tools.sockperf`'s own parsers (the latency study's
engine).  What sockperf's figures mean:

- its "latency" is half the round trip unless ``--full-rtt`` (3.6+: the
  header says ``avg-rtt``/``rtt``; ``avg-lat``/``latency`` is RTT/2): the
  tools parser doubles those, and the notes say so;
- its "MBps" and "Mbps" are 2^20-based (``BandWidth is 4873.781 MBps
  (38990.250 Mbps)`` is 155961 msg/s x 32768 B / 2^20): the throughput is
  taken from its message rate and size, in bytes and decimal bits;
- its stdout does not say the message size unless the file holds the
  command line (``$ sockperf ping-pong ... -m 64``) or the full log's
  parameter line (``--msg-size=64``); under-load replies every Nth message
  (``--reply-every``).

Ping-pong and under-load are request/response (kind ``rr``): the latency
study's probes.  Its records: params ``protocol`` (tcp/udp), ``message_size`` (bytes
each way), ``rate`` (``--mps``: requests/s or "max"), ``reply_every``;
totals ``latency.<p50|p90|p99|mean|min|max|stddev>`` (seconds, whole round
trips), ``transactions`` (answered requests), ``transactions_per_s``
(answered over sockperf's valid window), ``seconds``, ``sent``,
``lost`` (sockperf's dropped messages); ``extra["rtt"]`` the per-request
round trips of a full log (:class:`nicbench.tools.rtt.RttSamples`, sockperf's
process clock).  The headline is sockperf's own: the mean round trip.

A throughput summary is traffic (kind ``tcp`` or ``udp``): what the client
sent, sender-side (sockperf's throughput mode has no receiver report).
"""

from __future__ import annotations

import re
from typing import Any

from ..core.errors import InputError, ToolError
from ..tools import sockperf as tool
from ..tools.rtt import StatedSummary
from . import traffic
from .model import Kind, ParsedFile, no_point

FORMAT = "sockperf-text"
HINT = ("save sockperf's client output with its command line (or its --full-log FILE), and run it with "
        "--full-rtt (whole round trips)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PROTO = re.compile(r"\[\s*\d+\] IP = \S+\s+PORT =\s*\d+ # (TCP|UDP)")
_CMD = re.compile(r"^\S*\$\s*(?:\S+=\S+\s+)*\S*sockperf(?:\.bin)?\s+(\S+)(.*)$", re.M)
_VERSION = re.compile(r"== version #(\d+\.\d+)")
# the percentiles the latency study's records state
_PCTS = {"p50": 50.0, "p90": 90.0, "p99": 99.0}


def _option(args: str, *names: str) -> str | None:
    """The value of a command-line option (``-m 64``, ``--msg-size=64``, ``--mps max``)."""
    for n in names:
        m = re.search(rf"(?:^|\s){re.escape(n)}(?:=|\s+)(\S+)", args)
        if m:
            return m[1]
    return None


def _command(clean: str) -> tuple[str | None, str]:
    """(mode, arguments) from a ``$ sockperf MODE ...`` line, or the full log's parameter line."""
    m = _CMD.search(clean)
    if m:
        mode = {"pp": "ping-pong", "ul": "under-load", "tp": "throughput"}.get(m[1], m[1])
        return mode, m[2]
    p = re.search(r"test was performed using the following parameters: (.*)", clean)
    return None, p[1] if p else ""


def parse(text: str, name: str) -> ParsedFile:
    try:
        tool.check_text(text, name)
    except ToolError as e:
        raise InputError(e.message, where=name, hint=e.hint) from None
    clean = _ANSI.sub("", text)
    mode, args = _command(clean)
    ver = _VERSION.search(clean)
    proto = _PROTO.search(clean)
    params: dict[str, Any] = {"engine": "sockperf", "protocol": proto[1] if proto else
                              ("TCP" if re.search(r"(?:^|\s)--tcp\b", args) else None)}
    if proto is None and mode is not None and params["protocol"] is None:
        params["protocol"] = "UDP"          # the command line is whole: without --tcp, sockperf runs UDP
    if "Summary: Message Rate is" in clean or "Summary: BandWidth is" in clean:
        return _throughput(clean, name, args, params, ver[1] if ver else None)
    return _latency(text, clean, name, mode, args, params, ver[1] if ver else None)


def _latency(text: str, clean: str, name: str, mode: str | None, args: str, params: dict[str, Any],
             version: str | None) -> ParsedFile:
    notes: list[str] = []
    rtt = None
    try:
        if re.search(r"^packet, txTime\(sec\), rxTime\(sec\), (?:rtt|latency)\(usec\)", clean, re.M):
            run = tool.parse_full_log(text, name)
            summary, halved, rtt = run.summary, run.halved, run.samples
            notes.append(f"sockperf's full log: {len(rtt)} timed requests, each round trip kept")
        else:
            summary, halved = tool.parse_summary(text, name)
    except ToolError as e:
        raise InputError(e.message, where=name, hint=e.hint or HINT) from None
    if params.get("protocol"):
        params["protocol"] = params["protocol"].lower()      # as the latency study's points name it
    if halved:
        notes.append("sockperf printed latency = half the round trip (no --full-rtt): its figures are doubled "
                     "here into round trips")
    size = _option(args, "-m", "--msg-size", "--msg_size")
    if size is not None:
        params["message_size"] = int(size)
    mps = _option(args, "--mps", "--pps")
    params["rate"] = None if mps is None else "max" if mps == "max" else int(float(mps))
    if mps is None and summary.sent and summary.duration:
        notes.append(f"the file does not give --mps: it sent {summary.sent / summary.duration:.6g} requests/s in "
                     "its valid window")
    every = _option(args, "--reply-every", "-r")
    if every is not None:
        params["reply_every"] = int(every)
    elif mode == "under-load" or (summary.sent and summary.count and summary.count * 1.5 < summary.sent
                                  and not summary.lost):
        params["reply_every"] = round(summary.sent / summary.count) if summary.sent and summary.count else None
        notes.append(f"under-load: about one message in {params['reply_every']} was answered ({summary.sent} sent, "
                     f"{summary.count} answered; the file does not give --reply-every)")
    params["mode"] = mode or ("under-load" if params.get("reply_every", 1) not in (None, 1) else "ping-pong")
    if summary.count == 0:
        raise no_point(name, "sockperf answered no request in its valid window",
                       "is the server reachable? run longer (-t counts the 0.4 s warm-up)")
    totals: dict[str, float] = {"transactions": float(summary.count)}
    if summary.duration:
        totals["seconds"] = summary.duration
        totals["transactions_per_s"] = summary.count / summary.duration
        params["duration"] = summary.duration
    if summary.sent is not None:
        totals["sent"] = float(summary.sent)
    totals.update(_latency_totals(summary))
    label = "round trip, mean (2 x sockperf's 'Latency is')" if halved else \
        "round trip, mean (sockperf's 'Round trip is')"
    extra: dict[str, Any] = {"stated": summary, "headline": (label, summary.mean, "s")}
    if rtt is not None:
        extra["rtt"] = rtt
    if "message_size" not in params:
        notes.append("sockperf's output does not say its message size (-m); give it with --io-size")
    return ParsedFile(name=name, format=FORMAT, tool="sockperf", version=version, role="client", kind="rr",
                      params=params, samples=[], totals=totals, relative_time=True, notes=tuple(notes),
                      extra=extra)


def _latency_totals(s: StatedSummary) -> dict[str, float]:
    """``latency.*`` totals (seconds) from a stated summary."""
    out: dict[str, float] = {}
    for k, pct in _PCTS.items():
        if pct in s.percentiles:
            out[f"latency.{k}"] = s.percentiles[pct]
    for k, v in (("mean", s.mean), ("min", s.min), ("max", s.max), ("stddev", s.stdev)):
        if v is not None:
            out[f"latency.{k}"] = v
    if s.lost is not None:
        out["lost"] = float(s.lost)
    return out


def _throughput(clean: str, name: str, args: str, params: dict[str, Any], version: str | None) -> ParsedFile:
    """``sockperf throughput``: messages sent over the test, the message size
    from its NOTE (or the command line); bytes = messages x size."""
    sent = re.search(r"Total of (\d+) messages sent in ([\d.]+) sec", clean)
    rate = re.search(r"Summary: Message Rate is (\d+) \[msg/sec\]", clean)
    size = re.search(r"using msg-size=(\d+)", clean) or re.search(r"(?:^|\s)(?:-m|--msg-size)[=\s]+(\d+)", args)
    bw = re.search(r"Summary: BandWidth is ([\d.]+) MBps \(([\d.]+) Mbps\)", clean)
    if not size or not (sent or rate):
        raise no_point(name, "a sockperf throughput summary without its message count and size",
                       "save the whole client output (its 'Total of N messages sent' and NOTE lines)")
    msg = int(size[1])
    if sent:
        n, secs = int(sent[1]), float(sent[2])
    else:
        assert rate is not None
        n, secs = int(rate[1]), 1.0
    kind: Kind = "udp" if params["protocol"] == "UDP" else "tcp"
    notes = [f"sockperf throughput: {n} messages of {msg} B sent in {secs:g} s (sender-side: its throughput "
             "mode has no receiver report)"]
    if bw:
        notes.append(f"sockperf's own BandWidth {bw[1]} MBps ({bw[2]} Mbps) is 2^20-based: "
                     f"{float(bw[1]) * 2**20 * 8 / 1e9:.6g} Gbit/s in decimal units")
    if rate and sent and int(rate[1]) > 0:
        # its Message Rate is over its own (unrounded) timing: that span is the figure's
        secs = n / int(rate[1])
        notes.append(f"the span is {n} messages / its Message Rate {rate[1]} msg/s = {secs:.6g} s (it prints "
                     f"{sent[2]} s, rounded)")
    params = {**params, "direction": "tx", "streams": 1, "io_size": msg, "duration": secs}
    return traffic.build(name=name, fmt=FORMAT, tool="sockperf", version=version, role="client", kind=kind,
                         params=params, intervals=[], totals={("tx", "sender"): traffic.Total(n * msg, secs)},
                         start=None, host=name, notes=notes, hint=HINT)
