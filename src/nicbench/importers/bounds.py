"""What an imported figure can be: the plausibility bounds every parsed file
is held to before it becomes a point.

Issue 33 found damaged files imported as clean points: byte counts of 1e23
as 1.6e15 Gbit/s, a file whose intervals said 166x what its own summary
said.  Here every figure of a :class:`ParsedFile` (its totals and its
samples, summed per series) must be finite, not negative, within what any
NIC can carry, and a traffic file's intervals must agree with its own
whole-test summary.

A file that breaks one is **refused** (an InputError naming the file, the
field and the figure), not stored as a failed point: an import is all or
nothing and a point its study's analysis rejects is already refused before
anything is written (``cli/imports.py``), so a refusal is what a failed
imported point is today; and a figure no NIC can carry is not a
measurement -- stored, even under a failed status, it would reach the
samples, exports and sums.  The one line shows both figures, so nothing the
file said is hidden from its user.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from ..core.errors import InputError
from .model import ParsedFile

# 10 Tbit/s: six times the fastest Ethernet being standardised (1.6 TbE,
# IEEE 802.3dj), and above what one host's memory can move (12 channels of
# DDR5-4800: 3.7 Tbit/s) -- no tool process measured more through a NIC.
MAX_BPS = 1e13
# the smallest Ethernet frame (64 B + 20 B of preamble and gap) at MAX_BPS:
# 14.9 G frames/s.  Requests, transactions and IOs each take a frame at least.
MAX_PPS = MAX_BPS / (84 * 8)
# intervals against the file's own summary, as rates (a rate is not changed by
# intervals a file leaves out, e.g. iperf3's -O warm-up): the real files in
# tests/fixtures differ by at most 1.36x (iperf 2.1.8 --bounceback-congest,
# its sender intervals) and 0.83x (iperf3 3.12 --bidir, a busy server's clock
# half a second late); more than 2x apart, one of the two is wrong.
MAX_DISAGREEMENT = 2.0
# counts that can be negative: a datagram the receiver counted lost, then got late
_SIGNED = (".lost",)
_HINT = "the file is damaged or edited, or not this tool's output; re-run the tool and import its own output"
_RATES = {"bytes": ("bit/s", 8.0, MAX_BPS), "packets": ("packets/s", 1.0, MAX_PPS),
          "ios": ("IO/s", 1.0, MAX_PPS), "requests": ("requests/s", 1.0, MAX_PPS),
          "transactions": ("transactions/s", 1.0, MAX_PPS)}
_DIRECT = {"bps": ("bit/s", MAX_BPS), "pps": ("packets/s", MAX_PPS), "requests_per_s": ("requests/s", MAX_PPS),
           "transactions_per_s": ("transactions/s", MAX_PPS)}


def _human(v: float, unit: str) -> str:
    for k, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= k:
            return f"{v / k:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"


def _refuse(p: ParsedFile, what: str) -> InputError:
    return InputError(what, where=p.name, hint=_HINT)


def _value(p: ParsedFile, field: str, v: float) -> None:
    if not math.isfinite(v):
        raise _refuse(p, f"{field} is {v!r}: not a number a tool measures")
    if v < 0 and not field.endswith(_SIGNED):
        raise _refuse(p, f"{field} is negative ({v:.6g}): a count or a time cannot be")


def _rate(p: ParsedFile, field: str, amount: float, seconds: float, what: str, verb: str = "is") -> None:
    unit, scale, bound = _RATES[what]
    rate = amount * scale / seconds if seconds > 0 else 0.0
    if rate > bound:
        raise _refuse(p, f"{field} {verb} {amount:.4g} {what} over {seconds:g} s = {_human(rate, unit)}: more than "
                      f"any NIC carries (bound {_human(bound, unit)})")


def _what(name: str) -> str | None:
    last = name.rsplit(".", 1)[-1]
    return last if last in _RATES else None


def check(p: ParsedFile) -> None:
    """Raise InputError (naming ``p.name`` and the field) for a figure that cannot be true."""
    t = p.totals
    for key, v in t.items():
        _value(p, f"its summary's {key}", v)
    for key, v in t.items():
        what = _what(key)
        secs = t.get(key[: -len(what)] + "seconds") if what else None
        if what and secs:
            _rate(p, f"its summary's {key}", v, secs, what)
        if key in _DIRECT and v > _DIRECT[key][1]:
            unit, bound = _DIRECT[key]
            raise _refuse(p, f"its summary's {key} is {_human(v, unit)}: more than any NIC carries "
                          f"(bound {_human(bound, unit)})")
    series = _series(p)
    for (metric, tags), (total, t0, t1, n) in series.items():
        what = metric.rsplit(".", 1)[-1]
        if what in _RATES:
            _rate(p, f"its {metric} intervals ({_tagline(tags)}, {n} of them)", total, t1 - t0, what, "sum to")
    if p.kind in ("tcp", "udp"):
        _agreement(p, series)


def _tagline(tags: Iterable[tuple[str, str]]) -> str:
    d = dict(tags)
    return " ".join(x for x in (d.get("direction"), d.get("side"), d.get("op")) if x) or "untagged"


def _series(p: ParsedFile) -> dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, float, float, int]]:
    """Per metric and tag set (one series of one process, side and
    direction): the sum of its values, its first start, last end, count.
    One pass, a dict lookup per sample (a 200 MB file has 340,000); a tag
    set is looked up by identity (the rule in :mod:`nicbench.records`) for
    its first equal one, which keys the series (equal tag sets, one series)."""
    acc: dict[tuple[str, tuple[tuple[str, str], ...]], list[float]] = defaultdict(lambda: [0.0, math.inf, -math.inf, 0])
    first: dict[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]] = {}
    same: dict[int, tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]] = {}
    for s in p.samples:
        t = s.tags
        e = same.get(id(t))
        if e is None:
            e = same[id(t)] = (t, first.setdefault(t, t))
        a = acc[(s.metric, e[1])]
        v = s.value
        if not math.isfinite(v) or (v < 0 and not s.metric.endswith(_SIGNED)):
            _value(p, f"an interval's {s.metric} ({_tagline(s.tags)}, {s.t_start:g}-{s.t_end:g} s)", v)
        a[0] += v
        if s.t_start < a[1]:
            a[1] = s.t_start
        if s.t_end > a[2]:
            a[2] = s.t_end
        a[3] += 1
    return {k: (a[0], a[1], a[2], int(a[3])) for k, a in acc.items()}


def _agreement(p: ParsedFile, series: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[float, float, float, int]]) \
        -> None:
    """A traffic file's measured intervals against its own whole-test
    summary, per direction and side, as rates."""
    by: dict[tuple[str, str], list[tuple[float, float, float, int]]] = defaultdict(list)
    for (metric, tags), agg in series.items():
        d = dict(tags)
        if metric.endswith(".bytes") and d.get("omitted") != "1" and d.get("whole") != "1":
            by[(d.get("direction", ""), d.get("side", ""))].append(agg)
    for (direction, side), aggs in sorted(by.items()):
        nbytes, secs = p.totals.get(f"{direction}.{side}.bytes"), p.totals.get(f"{direction}.{side}.seconds")
        ib = sum(a[0] for a in aggs)
        span = max(a[2] for a in aggs) - min(a[1] for a in aggs)
        if not nbytes or not secs or span <= 0 or ib <= 0:
            continue
        iv_rate, sum_rate = ib * 8 / span, nbytes * 8 / secs
        factor = max(iv_rate, sum_rate) / min(iv_rate, sum_rate)
        if factor > MAX_DISAGREEMENT:
            raise _refuse(p, f"{direction} {side}: its intervals sum to {ib:.4g} bytes over {span:g} s "
                          f"({_human(iv_rate, 'bit/s')}) but its own summary says {nbytes:.4g} bytes over {secs:g} s "
                          f"({_human(sum_rate, 'bit/s')}): {factor:.3g}x apart (real files differ by at most "
                          f"1.4x; over {MAX_DISAGREEMENT:g}x one of them is wrong)")
