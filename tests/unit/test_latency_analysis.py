"""The latency study's analysis on recorded outputs: distributions from the
store, the load inside the probes' window, repeats into points, what the load
costs, iperf 2's upper bounds."""

from __future__ import annotations

import pytest

from conftest import FIXTURES, fixture_text
from nicbench.core.histogram import LatencyHistogram
from nicbench.records import TrialRecord, TrialSpec
from nicbench.run.iperf import flow_samples
from nicbench.studies.latency.analysis import load_in_window, point_stats, probe_result, trial_result
from nicbench.tools import iperf3, sockperf

LOAD = FIXTURES / "sockperf" / "3.7" / "trial_loaded_udp_m64_mps1000" / "load_client.json"


def probe(name: str, start: float = 1000.0) -> dict:
    """A probe's stored record from a recorded sockperf log, its first request at ``start``."""
    run = sockperf.parse_full_log(fixture_text("sockperf", "3.7", name))
    rtt, sent = run.samples.rtt, run.samples.sent
    assert sent is not None
    h = LatencyHistogram.of(rtt)
    return {"histogram": h.to_json(), "percentiles_bound": "exact", "resolution_s": None, "count": h.count,
            "sent": run.summary.sent, "lost": run.summary.lost, "mean": h.mean, "min": h.min, "max": h.max,
            "window": [start, start + sent[-1] - sent[0] + rtt[-1]]}


def record(point: str, repeat: int, probes: dict, condition: str, status: str = "ok") -> TrialRecord:
    spec = TrialSpec(f"t{point}{repeat}", 0, "latency", point, repeat,
                     {"protocol": "udp", "engine": "sockperf", "message_size": 64, "condition": condition})
    return TrialRecord(spec, status, 0.0, 1.0, None if status == "ok" else "boom", {"probes": probes})


def load_samples(anchor: float):
    rep = iperf3.parse(LOAD.read_text())
    return rep, flow_samples("t", "c1", 5201, anchor, rep.intervals, anchor)


def test_the_load_in_a_window_is_its_receiver_bytes_there_and_nothing_when_it_does_not_cover_it():
    rep, samples = load_samples(1000.0)
    got = load_in_window(samples, (1001.0, 1005.0))
    assert got is not None
    nbytes, gbps = got
    # the receiver's 0.5 s intervals 1..5 s, whole: what iperf3 itself counted there
    want = sum(i.bytes for i in rep.intervals if i.side == "receiver" and i.start >= 1.0 and i.end <= 5.0 + 2e-3)
    assert nbytes == pytest.approx(want, rel=1e-3) and gbps == pytest.approx(want * 8 / 4.0 / 1e9, rel=1e-3)
    assert load_in_window(samples, (999.0, 1002.0)) is None              # before the load began
    assert load_in_window(samples, (1005.0, 1007.0)) is None             # after it ended
    holed = [s for s in samples if not (1002.0 <= s.t_start < 1002.5)]
    assert load_in_window(holed, (1001.0, 1004.0)) is None               # a missing interval is not zero bytes
    assert load_in_window([], (1001.0, 1002.0)) is None


def test_a_loaded_trial_without_its_load_in_the_window_fails_and_one_with_it_reports_its_gbps():
    _, samples = load_samples(1000.0)
    inside = record("p", 0, {"c1": probe("pp_udp_m64_mps1000_loaded.csv", 1001.0)}, "loaded")
    t = trial_result(inside, samples)
    assert t.status == "ok" and t.load_gbps is not None and t.load_gbps > 1
    assert t.window is not None and t.window[0] == 1001.0
    outside = record("p", 0, {"c1": probe("pp_udp_m64_mps1000_loaded.csv", 2000.0)}, "loaded")
    t = trial_result(outside, samples)
    assert t.status == "failed" and "not measured under the load" in (t.error or "")
    # the idle twin needs no load
    assert trial_result(record("p", 0, {"c1": probe("pp_udp_m64_mps1000.csv")}, "idle"), []).status == "ok"


def test_repeats_become_a_point_and_the_cost_of_the_load_is_loaded_over_idle():
    idle = [record("udp/sockperf/m64/idle", r, {"c1": probe("pp_udp_m64_mps1000.csv")}, "idle") for r in range(2)]
    _, samples = load_samples(1000.0)
    loaded = [record("udp/sockperf/m64/loaded", r, {"c1": probe("pp_udp_m64_mps1000_loaded.csv", 1001.0)}, "loaded")
              for r in range(2)]
    failed = record("udp/sockperf/m64/loaded", 2, {}, "loaded", status="failed")
    trials = [trial_result(r, samples) for r in [idle[0], loaded[0], idle[1], loaded[1], failed]]
    pi, pl = point_stats(trials)
    assert (pi.n_ok, pi.n_failed, pl.n_ok, pl.n_failed) == (2, 0, 2, 1) and pl.errors == ("boom",)
    idle_run = sockperf.parse_full_log(fixture_text("sockperf", "3.7", "pp_udp_m64_mps1000.csv"))
    loaded_run = sockperf.parse_full_log(fixture_text("sockperf", "3.7", "pp_udp_m64_mps1000_loaded.csv"))
    # HDR keeps each percentile within 1/1024 above sockperf's own (same rank rule)
    for k, pct in (("p50", 50.0), ("p99", 99.0)):
        assert idle_run.summary.percentiles[pct] <= pi.percentiles[k] <= idle_run.summary.percentiles[pct] * 1.001
    assert pl.idle_point == pi.point and pi.idle_point is None
    assert pl.vs_idle["p99"] == pytest.approx(pl.percentiles["p99"] / pi.percentiles["p99"])
    assert pl.vs_idle["p99"] > 10                     # 75 us -> 2.8 ms in these recordings
    assert pl.percentiles["max"] == loaded_run.summary.max and pl.min == loaded_run.summary.min
    assert pl.merged is not None and pl.merged.count == 2 * len(loaded_run.samples)
    assert pl.load_gbps is not None and pl.lost_fraction == 0.0


def test_upper_bound_percentiles_snap_to_their_bin_edge_and_never_pass_the_maximum():
    h = LatencyHistogram()
    h.record(100e-6 - 1e-9, 90)             # iperf 2's bin 1 [0, 100 us), recorded at its upper edge
    h.record(3.7e-3 - 1e-9, 10)             # bin 37, whose round trips were at most 3.669 ms
    rec = {"histogram": h.to_json(), "percentiles_bound": "upper", "resolution_s": 1e-4, "count": 100, "sent": 100,
           "lost": 0, "mean": 4e-4, "min": 3.0e-5, "max": 3.669e-3, "window": [0.0, 1.0]}
    p = probe_result("c1", rec, "test")
    assert p.percentiles["p50"] == pytest.approx(1e-4, abs=1e-15)
    assert p.percentiles["p99"] == p.percentiles["max"] == 3.669e-3
    assert (p.bound, p.min, p.mean) == ("upper", 3.0e-5, 4e-4)
