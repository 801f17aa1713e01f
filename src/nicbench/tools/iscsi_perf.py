"""libiscsi's iscsi-perf as the iSCSI initiator where fio cannot reach a LUN.

Debian's fio has no libiscsi engine; iscsi-perf drives one LUN with
sequential (or random) READs only, runs until SIGINT, and has no
machine-readable output: its per-second lines are the only interface, so
they are parsed strictly (a line that does not match is ignored, a run
without any is an error with the tool's own words).  Its "MB" is 2^20 bytes;
nicbench keeps IOs and bytes (IOs x block size) instead.

    00:00:02 - lba 1530904, iops current 93139 (363 MB/s), iops average 95673 (373 MB/s), in_flight 16, busy 0
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import ToolError, tail
from .base import damage_is_a_tool_error

# bounded digit runs: an unbounded ``\d+`` first made a 2 MB line of digits
# (a damaged output) take minutes of regex backtracking
_LINE = re.compile(r"(\d{1,9}):(\d\d):(\d\d) - lba \d{1,20}, iops current (\d{1,12}) \((\d{1,12}) MB/s\), "
                   r"iops average (\d{1,12}) \((\d{1,12}) MB/s\)")


def argv(url: str, *, block_size: int, queue: int, initiator: str, seconds: float,
         random: bool = False) -> list[str]:
    """Bounded by coreutils timeout: SIGINT after ``seconds`` (iscsi-perf's own
    way to finish), SIGKILL 5 s later if it did not.  ``--foreground`` keeps
    both in the caller's process group, so stopping the group stops them."""
    out = ["timeout", "--foreground", "-s", "INT", "-k", "5", f"{seconds:g}", "iscsi-perf", "-i", initiator,
           "-m", str(queue), "-b", str(block_size // 512)]
    if random:
        out.append("-r")
    return out + [url]


@dataclass(frozen=True)
class Second:
    t: int                  # seconds since the I/O started
    iops: int               # IOs completed in that second


@damage_is_a_tool_error("iscsi-perf", "see the raw output file")
def parse(text: str) -> list[Second]:
    """The per-second IO counts; ToolError when the run never did I/O."""
    # iscsi-perf prints (rt % 3600) / 60 : rt / 60 : rt % 60 -- the second
    # field is the total minutes, the first only repeats them modulo an hour
    out = [Second(int(m.group(2)) * 60 + int(m.group(3)), int(m.group(4)))
           for m in _LINE.finditer(text.replace("\r", "\n"))]
    if not out:
        why = next((ln.strip() for ln in text.splitlines() if "Failed" in ln or "failed" in ln), None)
        raise ToolError(f"iscsi-perf did no I/O: {why or tail(text) or 'no output'}",
                        hint="is the target up and the LUN exported? ('tgtadm --op show --mode target')")
    return out


def measured(seconds: list[Second], ramp: float) -> tuple[float, float]:
    """(IOs, seconds) after the ramp.  Each line's rate covers the time since
    the previous line (a second, or longer when completions stalled), so it
    is weighted by that gap."""
    ios, prev, last = 0.0, 0.0, None
    for s in sorted(seconds, key=lambda s: s.t):
        if s.t > ramp:
            ios += s.iops * (s.t - max(prev, ramp))
            last = s.t
        prev = s.t
    return ios, (last - ramp) if last is not None else 0.0
