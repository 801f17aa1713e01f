"""core.histogram: the stated percentile bound against numpy on random data,
exact count/min/max/mean, merging, the JSON form and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nicbench.core.errors import InputError, StoreError
from nicbench.core.histogram import HIGHEST_NS, LatencyHistogram
from nicbench.tools import sockperf

PERCENTS = [0.1, 1, 5, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.99, 99.999]


def datasets() -> list[tuple[str, np.ndarray]]:
    """Latencies in seconds, shaped like what the engines give and worse."""
    rng = np.random.default_rng(20261123)
    return [
        ("lognormal_30us", rng.lognormal(np.log(30e-6), 0.6, 50_000)),
        ("bimodal_idle_loaded", np.concatenate([rng.normal(25e-6, 3e-6, 40_000).clip(5e-6),
                                                rng.lognormal(np.log(2e-3), 1.0, 2_000)])),
        ("pareto_tail", (rng.pareto(1.2, 30_000) + 1) * 20e-6),
        ("uniform_1us_100s", rng.uniform(1e-6, 100.0, 20_000)),
        ("sub_2us_exact", rng.integers(1, 2048, 5_000) / 1e9),
        ("few", np.array([3.1e-5, 2.9e-5, 4.4e-4])),
        ("constant", np.full(1000, 12.345e-6)),
    ]


@pytest.mark.parametrize(("name", "data"), datasets(), ids=[n for n, _ in datasets()])
def test_percentile_bound_against_numpy(name: str, data: np.ndarray) -> None:
    """x_k <= v <= x_k + max(1 ns, x_k/1024) - 1 ns, k = max(1, int(p/100 n + 0.5))."""
    h = LatencyHistogram()
    h.record_many(data)
    ns = np.sort(np.rint(data * 1e9).astype(np.int64))
    n = len(ns)
    got = h.percentiles(PERCENTS)
    for p in PERCENTS:
        k = max(1, int(p * n / 100 + 0.5))
        x = int(ns[k - 1])
        v = round(got[float(p)] * 1e9)
        assert x <= v <= x + max(1, x // 1024) - 1, (name, p, x, v)
        assert abs(v - x) <= max(1, x * 2**-10), (name, p)            # the relative bound: < 0.098 %
    # exact count/min/max/mean (of the values rounded to the ns)
    assert h.count == n
    assert h.percentile(0) == h.min == ns[0] / 1e9 and h.percentile(100) == h.max == ns[-1] / 1e9
    assert h.mean == pytest.approx(ns.sum() / n / 1e9, rel=1e-12)


def test_exact_below_2048ns() -> None:
    data = np.arange(1, 2048) / 1e9
    h = LatencyHistogram.of(data)
    for p in (10, 50, 90, 99.9):
        k = max(1, int(p * len(data) / 100 + 0.5))
        assert round(h.percentile(p) * 1e9) == k           # value k ns is the k-th smallest


def test_merge_equals_recording_everything() -> None:
    sets = datasets()
    parts = [sets[0][1][:20_000], sets[1][1][:20_000], sets[2][1][:10_000]]
    hs = [LatencyHistogram.of(d) for d in parts]
    merged = LatencyHistogram.merged(hs)
    whole = LatencyHistogram.of(np.concatenate(parts))
    assert merged.count == whole.count == sum(len(d) for d in parts)
    assert (merged.min, merged.max, merged.mean) == (whole.min, whole.max, whole.mean)
    assert merged.percentiles(PERCENTS) == whole.percentiles(PERCENTS)
    empty = LatencyHistogram()
    empty.merge(hs[0])
    assert empty.percentiles([50, 99]) == hs[0].percentiles([50, 99]) and empty.min == hs[0].min


def test_json_round_trip_is_compact_and_exact() -> None:
    data = datasets()[1][1]
    h = LatencyHistogram.of(data)
    doc = json.loads(json.dumps(h.to_json()))
    assert len(json.dumps(doc)) < 16_000                     # 42 000 samples, bounded size
    back = LatencyHistogram.from_json(doc)
    assert (back.count, back.min, back.max, back.mean) == (h.count, h.min, h.max, h.mean)
    assert back.percentiles(PERCENTS) == h.percentiles(PERCENTS)
    empty = LatencyHistogram.from_json(LatencyHistogram().to_json())
    assert empty.count == 0


def test_json_damage_is_a_store_error() -> None:
    doc = LatencyHistogram.of([1e-5, 2e-5]).to_json()
    with pytest.raises(StoreError, match="not a nicbench-hdr-1"):
        LatencyHistogram.from_json({**doc, "format": "x"}, where="points/3/rtt")
    with pytest.raises(StoreError, match="hold 2 values, its count says 3"):
        LatencyHistogram.from_json({**doc, "count": 3})
    with pytest.raises(StoreError, match="do not decode"):
        LatencyHistogram.from_json({**doc, "hdr": "not base64 at all"})
    with pytest.raises(StoreError, match="layout differs"):
        LatencyHistogram.from_json({**doc, "digits": 2})
    with pytest.raises(StoreError, match="fall outside its buckets"):
        LatencyHistogram.from_json({**doc, "max": 10**9})


def test_bad_values_are_input_errors() -> None:
    h = LatencyHistogram()
    for bad in (-1e-6, float("nan"), float("inf"), HIGHEST_NS / 1e9 + 1):
        with pytest.raises(InputError, match="histogram: latency"):
            h.record(bad)
    with pytest.raises(InputError, match="outside 0 .. 100 s"):
        h.record_many([1e-5, 101.0])
    assert h.count == 0
    with pytest.raises(InputError, match="no values recorded"):
        h.percentile(50)
    h.record(1e-5, count=3)
    with pytest.raises(InputError, match="outside 0..100"):
        h.percentile(101)
    with pytest.raises(InputError, match="count"):
        h.record(1e-5, count=0)


def test_cdf() -> None:
    h = LatencyHistogram.of(datasets()[0][1][:10_000])
    cdf = h.cdf()
    xs, fs = [x for x, _ in cdf], [f for _, f in cdf]
    assert xs == sorted(xs) and fs == sorted(fs) and fs[-1] == 1.0 and xs[-1] == h.max
    assert len(cdf) < 5000                                    # bucket resolution, not one point per sample


def test_sockperf_samples_agree_with_its_own_percentiles() -> None:
    """sockperf's rank rule is the histogram's: its stated percentiles are
    within the stated bound of the histogram's (plus sockperf's 1 ns)."""
    fx = Path(__file__).resolve().parents[1] / "fixtures" / "sockperf" / "3.7" / "pp_tcp_m64_mps1000_loaded.csv"
    run = sockperf.parse_full_log(fx.read_text())
    h = LatencyHistogram.of(run.samples.rtt)
    for p, stated in run.summary.percentiles.items():
        assert 0 <= h.percentile(p) - stated + 2e-9 <= stated / 1024 + 4e-9, p
