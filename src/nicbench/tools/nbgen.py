"""nbgen, nicbench's own XDP packet generator (native/nbgen, built by
``nicbench setup``): where it is, argv and parsers.

nbgen prints JSON lines: an opening event, cumulative counts every
``--interval``, and a closing ``"event": "end"`` line.  ``tx`` counts what
its XDP program handed to XDP_TX (per CPU); ``rx`` counts the test flow its
XDP program saw on the receiver's interface (and dropped).  Errors are one
line on stderr starting ``nbgen: `` with a distinct exit code.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field

from ..core.errors import ToolError
from ..native.build import built
from .base import damage_is_a_tool_error

EXIT = {2: "usage", 3: "privileges", 4: "not supported"}


def binary() -> str | None:
    """Where nbgen is: $NICBENCH_NBGEN, this user's build of this version's
    sources (``nicbench setup``, native/build.py), or on PATH."""
    env = os.environ.get("NICBENCH_NBGEN")
    if env:
        return env if os.access(env, os.X_OK) else None
    return built() or shutil.which("nbgen")


def tx_argv(exe: str, dev: str, frames: list[bytes], *, duration: float, cpus: list[int] | None = None,
            rate: float | None = None, interval: float = 0.25) -> list[str]:
    """One thread per frame (the frames differ in UDP source port)."""
    argv = [exe, "tx", "--dev", dev, "--duration", f"{duration:g}", "--interval", f"{interval:g}"]
    for f in frames:
        argv += ["--frame", f.hex()]
    if cpus:
        argv += ["--cpus", ",".join(map(str, cpus))]
    if rate:
        argv += ["--rate", f"{rate:.0f}"]
    return argv


def rx_argv(exe: str, dev: str, *, duration: float, port: int, mode: str = "auto",
            interval: float = 0.25) -> list[str]:
    return [exe, "rx", "--dev", dev, "--duration", f"{duration:g}", "--port", str(port), "--xdp", mode,
            "--interval", f"{interval:g}"]


@dataclass(frozen=True)
class Tx:
    t_start: float
    t_end: float
    sent: int
    sent_bytes: int
    paced_out: int
    per_cpu: tuple[int, ...]
    reads: tuple[tuple[float, int], ...]          # (time, cumulative frames), from t_start
    threads: tuple[dict, ...] = ()
    stopped: bool = False                         # ended by a signal, not by its duration


@dataclass(frozen=True)
class Rx:
    attached: float
    mode: str                                     # native | generic
    why: str                                      # why not native, when generic
    reads: tuple[tuple[float, int, int], ...]     # (time, cumulative frames, cumulative bytes)
    packets: int
    bytes: int
    other: int                                    # frames that were not the test flow (passed)
    per_cpu: tuple[int, ...] = field(default_factory=tuple)
    ended: bool = True


def _lines(stdout: str) -> list[dict]:
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue          # a line cut by a kill
    return out


def error_of(stderr: str) -> str | None:
    for line in reversed(stderr.splitlines()):
        if line.startswith("nbgen: "):
            return line[len("nbgen: "):].strip()
    return None


def _fail(what: str, stdout: str, stderr: str, where: str) -> ToolError:
    msg = error_of(stderr)
    return ToolError(f"nbgen {what}: {msg}" if msg else f"nbgen {what} printed no result", where=where)


@damage_is_a_tool_error("nbgen tx", "see the raw output file")
def parse_tx(stdout: str, stderr: str = "", where: str = "") -> Tx:
    lines = _lines(stdout)
    start = next((d for d in lines if d.get("event") == "start"), None)
    end = next((d for d in lines if d.get("event") == "end"), None)
    if start is None or end is None or error_of(stderr):
        raise _fail("tx", stdout, stderr, where)
    reads = [(end["t_start"], 0)] + [(d["t"], int(d["sent"])) for d in lines if "sent" in d and "event" not in d]
    reads.append((end["t_end"], int(end["sent"])))
    return Tx(end["t_start"], end["t_end"], int(end["sent"]), int(end.get("sent_bytes", 0)),
              int(end.get("paced_out", 0)), tuple(end.get("per_cpu", ())), tuple(reads),
              tuple(end.get("threads", ())), bool(end.get("stopped")))


@damage_is_a_tool_error("nbgen rx", "see the raw output file")
def parse_rx(stdout: str, stderr: str = "", where: str = "") -> Rx:
    """The receiver's counts; a run cut short (no end line) keeps its reads."""
    lines = _lines(stdout)
    att = next((d for d in lines if d.get("event") == "attached"), None)
    if att is None:
        raise _fail("rx", stdout, stderr, where)
    end = next((d for d in lines if d.get("event") == "end"), None)
    reads = [(att["t"], 0, 0)] + [(d["t"], int(d["packets"]), int(d["bytes"])) for d in lines
                                  if "packets" in d and "event" not in d]
    if end is not None:
        reads.append((end["t"], int(end["packets"]), int(end["bytes"])))
    last = reads[-1]
    return Rx(att["t"], att["mode"], att.get("why", ""), tuple(reads), last[1], last[2],
              int((end or {}).get("other", 0)), tuple((end or {}).get("per_cpu", ())), end is not None)
