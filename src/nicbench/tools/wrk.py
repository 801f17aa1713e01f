"""wrk as the HTTPS study's client: argv and the structured result of its done() hook.

wrk's own text is for people; nicbench runs it with ``wrk.lua`` (shipped next to
this module), whose ``done()`` prints one JSON object between markers.  wrk
counts every byte it read -- headers, bodies, partial bodies cut at the end,
and error responses -- so non-2xx/3xx responses and socket errors are
reported separately and a point with them is flagged, never silently summed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources

from ..core.errors import ToolError, tail
from .base import MinVersion, damage_is_a_tool_error

MIN_VERSION = MinVersion("wrk", (4, 0), "nicbench reads wrk's totals through the Lua done(summary, latency, "
                                        "requests) hook of wrk 4 (tested with 4.1)")

BEGIN, END = "nicbench-wrk-begin", "nicbench-wrk-end"


def lua_text() -> str:
    """The Lua hook printing wrk's results as JSON (written on each client host)."""
    return (resources.files("nicbench.tools") / "wrk.lua").read_text()


def client_argv(url: str, *, script: str, threads: int, connections: int, duration: float,
                timeout: float) -> list[str]:
    """``wrk -t T -c C -d Ns --timeout Ns -s SCRIPT URL`` (wrk wants whole seconds);
    ``script``: wrk.lua's path on the client host."""
    return ["wrk", "-t", str(threads), "-c", str(connections), "-d", f"{int(round(duration))}s",
            "--timeout", f"{int(max(1, round(timeout)))}s", "-s", script, url]


@dataclass(frozen=True)
class WrkResult:
    duration_s: float
    requests: int
    bytes: int
    errors: dict[str, int]
    latency_us: dict[str, float]
    percentiles_us: dict[str, int]

    @property
    def socket_errors(self) -> int:
        return sum(v for k, v in self.errors.items() if k != "status")

    @property
    def bad_status(self) -> int:
        return self.errors.get("status", 0)

    @property
    def gbps(self) -> float:
        return self.bytes * 8 / self.duration_s / 1e9 if self.duration_s > 0 else 0.0


@damage_is_a_tool_error("wrk", "see the raw output file: was wrk stopped before its done() hook?")
def parse(stdout: str, stderr: str = "") -> WrkResult:
    """The JSON block of wrk.lua's done(); a run that never got there (wrk
    exits at start when the first connection fails) is a ToolError with
    wrk's own words."""
    if BEGIN not in stdout or END not in stdout:
        why = tail(stderr) or tail(stdout) or "no output"
        hint = ("the server is not listening there: did nginx start?" if "unable to connect" in why
                else "wrk was stopped before its done() hook ran")
        raise ToolError(f"wrk printed no result: {why}", hint=hint)
    block = stdout.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    try:
        d = json.loads(block)
    except json.JSONDecodeError as e:
        raise ToolError(f"wrk result block is not JSON: {e}: {block[:120]!r}") from None
    lat = d.get("latency_us", {})
    return WrkResult(d["duration_us"] / 1e6, int(d["requests"]), int(d["bytes"]),
                     {k: int(v) for k, v in d.get("errors", {}).items()},
                     {k: float(lat[k]) for k in ("min", "max", "mean", "stdev") if k in lat},
                     {k: int(v) for k, v in (lat.get("percentiles") or {}).items()})



# ---- wrk's (and wrk2's) own text, as people save it ----
_TIME = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_SIZE = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "TB": 1024**4}
_REQS = re.compile(r"^\s*(\d+) requests in ([\d.]+)(us|ms|s|m|h), ([\d.]+)([KMGT]?B) read", re.M)
_SOCK = re.compile(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_NON2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")
_RPS = re.compile(r"^\s*Requests/sec:\s+([\d.]+)", re.M)
_TPS = re.compile(r"^\s*Transfer/sec:\s+([\d.]+)([KMGT]?B)", re.M)
_THREADS = re.compile(r"(\d+) threads and (\d+) connections")
_PCTL = re.compile(r"^\s*(\d+(?:\.\d+)?)%\s+([\d.]+)(us|ms|s|m|h)\s*$", re.M)


@dataclass(frozen=True)
class WrkText:
    """wrk's printed summary: ``duration_s`` seconds, ``bytes`` read (wrk's
    binary units, 3 significant digits), ``percentiles_s`` seconds by percent."""

    requests: int
    duration_s: float
    bytes: float
    requests_per_s: float | None
    transfer_per_s: float | None
    socket_errors: dict[str, int]
    bad_status: int
    threads: int | None
    connections: int | None
    percentiles_s: dict[float, float]
    hdr: bool


@damage_is_a_tool_error("wrk", "see the raw output file")
def parse_text(text: str) -> WrkText | None:
    """wrk's or wrk2's human summary, or None when the text has none."""
    m = _REQS.search(text)
    if not m:
        return None
    sock = _SOCK.search(text)
    bad = _NON2XX.search(text)
    rps, tps, th = _RPS.search(text), _TPS.search(text), _THREADS.search(text)
    hdr = "HdrHistogram" in text
    pct: dict[float, float] = {}
    block = text
    if "Latency Distribution" in text:
        block = text.split("Latency Distribution", 1)[1].split("Detailed Percentile", 1)[0]
        block = block.split("requests in", 1)[0]
        for p in _PCTL.finditer(block):
            pct[float(p[1])] = float(p[2]) * _TIME[p[3]]
    return WrkText(int(m[1]), float(m[2]) * _TIME[m[3]], float(m[4]) * _SIZE[m[5]],
                   float(rps[1]) if rps else None, float(tps[1]) * _SIZE[tps[2]] if tps else None,
                   dict(zip(("connect", "read", "write", "timeout"), map(int, sock.groups()), strict=True))
                   if sock else {}, int(bad[1]) if bad else 0,
                   int(th[1]) if th else None, int(th[2]) if th else None, pct, hdr)
