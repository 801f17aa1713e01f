"""A bounded-size, mergeable latency histogram (HDR: log-linear buckets).

Built on the ``hdrhistogram`` package (HdrHistogram_py, the Python port of
Gil Tene's HdrHistogram): its bucket layout, percentile walk and its standard
compressed encoding (the "HISTF..." base64 text that the Java, C, Go and Rust
HdrHistograms and wrk2 read) are used as they are.  What this module adds:
seconds in and out, exact count/min/max/sum next to the buckets (the encoding
keeps only bucket-equivalent min/max), errors instead of silently dropped
values, and a JSON-able form.

Layout: values are recorded as integer nanoseconds, 1 ns .. 100 s, 3
significant digits: 2048 sub-buckets per power of two, so every value below
2048 ns is kept exactly and above that each bucket is at most 1/1024 of its
values wide.  28 672 counters (~224 KiB in memory), typically a few hundred
bytes to a few KiB encoded.

Percentile error bound (tested in tests/unit/test_histogram.py): for
``0 < p <= 100`` and n recorded values, let ``k = max(1, int(p/100 * n +
0.5))`` and ``x_k`` the k-th smallest value (after rounding to whole ns).
:meth:`LatencyHistogram.percentile` returns ``v`` with

    x_k <= v <= x_k + max(1 ns, x_k / 1024) - 1 ns,

i.e. it never under-states and over-states by less than 0.098 % (or 1 ns).
``p = 0`` gives the exact minimum, ``p = 100`` the exact maximum.
The rank rule ``int(p/100 * n + 0.5)`` is also sockperf's.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from hdrh.histogram import HdrHistogram  # type: ignore[import-untyped]

from .errors import InputError, StoreError

LOWEST_NS = 1
HIGHEST_NS = 100 * 10**9          # 100 s
DIGITS = 3
RELATIVE_ERROR = 1 / 1024         # bucket width / lowest value in it, above 2048 ns
FORMAT = "nicbench-hdr-1"


class LatencyHistogram:
    """Round-trip (or any) latencies in seconds, 1 ns .. 100 s."""

    def __init__(self) -> None:
        self._h = HdrHistogram(LOWEST_NS, HIGHEST_NS, DIGITS)
        self._count = 0
        self._min_ns: int | None = None
        self._max_ns: int | None = None
        self._sum_ns = 0

    # ---- recording -------------------------------------------------------
    @staticmethod
    def _to_ns(seconds: float) -> int:
        if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not math.isfinite(seconds):
            raise InputError(f"histogram: latency {seconds!r} is not a finite number of seconds", where="latency")
        ns = int(round(seconds * 1e9))
        if not 0 <= ns <= HIGHEST_NS:
            raise InputError(f"histogram: latency {seconds!r} s is outside 0 .. {HIGHEST_NS / 1e9:g} s",
                             where="latency", hint="a negative or >100 s round trip is a clock or parsing error")
        return ns

    def _add_ns(self, ns: int, count: int) -> None:
        if not self._h.record_value(ns, count):          # hdrh returns False instead of raising
            raise InputError(f"histogram: {ns} ns is outside its range", where="latency")
        self._count += count
        self._sum_ns += ns * count
        self._min_ns = ns if self._min_ns is None else min(self._min_ns, ns)
        self._max_ns = ns if self._max_ns is None else max(self._max_ns, ns)

    def record(self, seconds: float, count: int = 1) -> None:
        """Add ``count`` occurrences of one latency (s)."""
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise InputError(f"histogram: count {count!r} must be a whole number >= 1", where="count")
        self._add_ns(self._to_ns(seconds), count)

    def record_many(self, seconds: Sequence[float] | np.ndarray) -> None:
        """Add many latencies (s) at once: equal nanosecond values are counted
        together, so 10^5 samples cost ~0.1 s."""
        arr = np.asarray(seconds, dtype=float)
        if arr.size == 0:
            return
        if not np.all(np.isfinite(arr)):
            raise InputError("histogram: a latency is not a finite number", where="latency")
        ns = np.rint(arr * 1e9).astype(np.int64)
        if ns.min() < 0 or ns.max() > HIGHEST_NS:
            bad = arr[(ns < 0) | (ns > HIGHEST_NS)][0]
            raise InputError(f"histogram: latency {bad!r} s is outside 0 .. {HIGHEST_NS / 1e9:g} s", where="latency",
                             hint="a negative or >100 s round trip is a clock or parsing error")
        values, counts = np.unique(ns, return_counts=True)
        for v, c in zip(values.tolist(), counts.tolist(), strict=True):
            self._add_ns(v, c)

    @classmethod
    def of(cls, seconds: Iterable[float]) -> LatencyHistogram:
        h = cls()
        h.record_many(np.fromiter(seconds, dtype=float))
        return h

    def merge(self, other: LatencyHistogram) -> None:
        """Add every value of ``other`` to this one (both keep the same layout)."""
        if other._count == 0:
            return
        self._h.add(other._h)
        self._count += other._count
        self._sum_ns += other._sum_ns
        assert other._min_ns is not None and other._max_ns is not None
        self._min_ns = other._min_ns if self._min_ns is None else min(self._min_ns, other._min_ns)
        self._max_ns = other._max_ns if self._max_ns is None else max(self._max_ns, other._max_ns)

    @classmethod
    def merged(cls, parts: Iterable[LatencyHistogram]) -> LatencyHistogram:
        out = cls()
        for p in parts:
            out.merge(p)
        return out

    # ---- queries ---------------------------------------------------------
    @property
    def count(self) -> int:
        return self._count

    @property
    def min(self) -> float:
        """Exact smallest value (s, as recorded to the ns)."""
        return self._need()[0] / 1e9

    @property
    def max(self) -> float:
        """Exact largest value (s, as recorded to the ns)."""
        return self._need()[1] / 1e9

    @property
    def mean(self) -> float:
        """Exact mean (s) of the values as recorded to the ns."""
        self._need()
        return self._sum_ns / self._count / 1e9

    def _need(self) -> tuple[int, int]:
        if self._count == 0 or self._min_ns is None or self._max_ns is None:
            raise InputError("histogram: no values recorded", where="latency")
        return self._min_ns, self._max_ns

    def percentile(self, percent: float) -> float:
        """The ``percent`` percentile (s); see the module notes for its bound."""
        return self.percentiles([percent])[float(percent)]

    def percentiles(self, percents: Sequence[float]) -> dict[float, float]:
        """Several percentiles in one walk over the buckets: percent -> s."""
        lo, hi = self._need()
        for p in percents:
            if not isinstance(p, (int, float)) or not 0 <= p <= 100:
                raise InputError(f"histogram: percentile {p!r} is outside 0..100", where="percentile")
        inner = [float(p) for p in percents if 0 < p < 100]
        got = self._h.get_percentile_to_value_dict(inner) if inner else {}
        out: dict[float, float] = {}
        for p in percents:
            fp = float(p)
            if fp == 0:
                out[fp] = lo / 1e9
            elif fp == 100:
                out[fp] = hi / 1e9
            else:
                # the bucket's highest equivalent value, never beyond the exact max
                out[fp] = min(got[fp], hi) / 1e9
        return out

    def cdf(self) -> list[tuple[float, float]]:
        """(upper edge of each non-empty bucket in s, fraction of values <= it),
        ascending: what a CDF plot needs, at bucket resolution."""
        self._need()
        out = []
        run = 0
        top = self._max_ns or 0
        for item in self._h.get_recorded_iterator():
            run += item.count_added_in_this_iter_step
            edge = self._h.get_highest_equivalent_value(item.value_iterated_to)
            out.append((min(edge, top) / 1e9, run / self._count))
        return out

    # ---- storage ---------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """A compact JSON-able dict: exact count/min/max/sum (ns) and the
        buckets in HdrHistogram's standard compressed base64 encoding."""
        return {"format": FORMAT, "unit": "ns", "lowest": LOWEST_NS, "highest": HIGHEST_NS, "digits": DIGITS,
                "count": self._count, "min": self._min_ns, "max": self._max_ns, "sum": self._sum_ns,
                "hdr": self._h.encode().decode("ascii") if self._count else ""}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any], where: str | None = None) -> LatencyHistogram:
        """The inverse of :meth:`to_json`; StoreError naming ``where`` when the
        dict is not one, or its buckets disagree with its exact count."""
        if not isinstance(doc, Mapping) or doc.get("format") != FORMAT:
            raise StoreError(f"not a {FORMAT} histogram", where=where)
        if (doc.get("lowest"), doc.get("highest"), doc.get("digits"), doc.get("unit")) != \
                (LOWEST_NS, HIGHEST_NS, DIGITS, "ns"):
            raise StoreError("histogram layout differs from this nicbench's", where=where,
                             hint=f"expected 1 ns .. {HIGHEST_NS} ns, {DIGITS} digits")
        h = cls()
        count = doc.get("count")
        if not isinstance(count, int) or count < 0:
            raise StoreError(f"histogram count {count!r} is not a whole number", where=where)
        if count == 0:
            return h
        try:
            h._h.decode_and_add(str(doc["hdr"]))
        except Exception as e:  # hdrh raises assorted errors on bad input: one kind for the caller
            raise StoreError(f"histogram buckets do not decode ({type(e).__name__}: {e})", where=where) from None
        if h._h.get_total_count() != count:
            raise StoreError(f"histogram buckets hold {h._h.get_total_count()} values, its count says {count}",
                             where=where)
        mn, mx, sm = doc.get("min"), doc.get("max"), doc.get("sum")
        if not all(isinstance(x, int) for x in (mn, mx, sm)):
            raise StoreError("histogram min/max/sum are not whole nanoseconds", where=where)
        assert isinstance(mn, int) and isinstance(mx, int) and isinstance(sm, int)
        if not (h._h.values_are_equivalent(mn, h._h.get_min_value())
                and h._h.values_are_equivalent(mx, h._h.get_max_value())):
            raise StoreError(f"histogram min/max {mn}/{mx} ns fall outside its buckets", where=where)
        h._count, h._min_ns, h._max_ns, h._sum_ns = count, mn, mx, sm
        return h
