import pytest

from nicbench.analysis.aggregate import NoSharedWindow, aggregate
from nicbench.records import Sample, make_tags


def iv(host, t0, t1, nbytes, *, direction="tx", side="receiver", omitted=0, proc=5201):
    return Sample("t1", "tcp.bytes", nbytes, "bytes", t0, t1,
                  make_tags(host=host, proc=proc, direction=direction, side=side, omitted=omitted))


def series(host, start, n, per_s, **kw):
    return [iv(host, start + i, start + i + 1, per_s, **kw) for i in range(n)]


def test_window_is_the_overlap_of_all_processes_and_pro_rata():
    # c1 runs 100..110, c2 runs 100.5..110.5: shared window 100.5..110
    s = series("c1", 100.0, 10, 1e9) + series("c2", 100.5, 10, 2e9)
    a = aggregate(s, direction="tx")
    assert a.window == pytest.approx((100.5, 110.0))
    # c1: 9.5 s of 1e9 B/s, c2: 9.5 s of 2e9 B/s
    assert a.bytes == pytest.approx(9.5e9 + 19e9)
    assert a.gbps == pytest.approx((28.5e9 * 8) / 9.5 / 1e9)
    # the aggregate is exactly the sum of the per-client parts over the same window
    assert sum(p.bytes for p in a.processes) == pytest.approx(a.bytes)
    assert a.per_host["c1"] == pytest.approx(8.0) and a.per_host["c2"] == pytest.approx(16.0)


def test_trim_cuts_both_ends_and_omitted_intervals_are_dropped():
    s = series("c1", 0.0, 1, 9e9, omitted=1) + series("c1", 1.0, 6, 1e9)
    a = aggregate(s, direction="tx", trim=1.0)
    assert a.window == pytest.approx((2.0, 6.0))
    assert a.gbps == pytest.approx(8.0)


def test_sender_side_and_direction_filters():
    s = series("c1", 0, 4, 1e9) + series("c1", 0, 4, 3e9, side="sender") + series("c1", 0, 4, 5e8, direction="rx")
    assert aggregate(s, direction="tx").gbps == pytest.approx(8.0)
    assert aggregate(s, direction="tx", side="sender").gbps == pytest.approx(24.0)
    assert aggregate(s, direction="rx").gbps == pytest.approx(4.0)


def test_time_series_bins_cover_the_window():
    a = aggregate(series("c1", 0, 4, 1e9), direction="tx", bin_s=1.0)
    assert len(a.series) == 4 and all(g == pytest.approx(8.0) for _, g in a.series)


def test_no_overlap_is_an_error():
    with pytest.raises(NoSharedWindow):
        aggregate(series("c1", 0, 2, 1e9) + series("c2", 5, 2, 1e9), direction="tx")
    with pytest.raises(NoSharedWindow):
        aggregate(series("c1", 0, 2, 1e9), direction="tx", trim=1.0)
    with pytest.raises(NoSharedWindow):
        aggregate([], direction="tx")


def _rec(direction="tx", layout=(("c1", 5201), ("c2", 5201)), duration=4.0):
    from nicbench.records import TrialRecord, TrialSpec
    spec = TrialSpec("t1", 0, "tcp", "p", 0, {"direction": direction, "duration": duration})
    return TrialRecord(spec, "ok", 0, 1, None, {"layout": [{"client": c, "port": p, "streams": 1}
                                                          for c, p in layout]})


def test_a_process_without_receiver_data_fails_the_point():
    from nicbench.studies.tcp.analysis import trial_result
    ok = trial_result(_rec(), series("c1", 0, 4, 1e9) + series("c2", 0, 4, 1e9), trim=0.0)
    assert ok.status == "ok" and ok.gbps == pytest.approx(16.0)
    bad = trial_result(_rec(), series("c1", 0, 4, 1e9), trim=0.0)     # c2 sent nothing back
    assert bad.status == "failed" and "no tx receiver data from c2:5201" in bad.error and bad.gbps is None


def test_bidir_needs_both_directions():
    from nicbench.studies.tcp.analysis import trial_result
    r = trial_result(_rec("bidir", layout=(("c1", 5201),)), series("c1", 0, 4, 1e9), trim=0.0)
    assert r.status == "failed" and "no rx receiver data" in r.error


def test_overlapping_or_gapped_timelines_fail_the_point():
    from nicbench.studies.tcp.analysis import trial_result
    overlap = series("c1", 0, 4, 1e9) + [iv("c1", 1.5, 2.5, 1e9)]
    r = trial_result(_rec(layout=(("c1", 5201),)), overlap, trim=0.0)
    assert r.status == "failed" and "overlap" in r.error
    gap = series("c1", 0, 2, 1e9) + series("c1", 3, 2, 1e9)
    r = trial_result(_rec(layout=(("c1", 5201),), duration=5.0), gap, trim=0.0)
    assert r.status == "failed" and "gap" in r.error


def test_a_window_much_shorter_than_planned_fails_the_point():
    from nicbench.studies.tcp.analysis import trial_result
    s = series("c1", 0, 4, 1e9) + series("c2", 2.5, 4, 1e9)    # c2 started 2.5 s late
    r = trial_result(_rec(), s, trim=0.0)
    assert r.status == "failed" and "window is 1.50s, expected about 4.00s" in r.error


def _if_bytes(host: str, rates: list[float], t0: float = 100.0, dt: float = 0.5) -> list[Sample]:
    tags = make_tags(host=host, direction="tx")
    return [Sample("t1", "if.bytes", r * dt, "bytes", t0 + i * dt, t0 + (i + 1) * dt, tags)
            for i, r in enumerate(rates)]


def test_the_longest_lull_is_the_longest_run_of_near_silent_counter_intervals():
    from nicbench.analysis.aggregate import longest_lull
    # 1e8 B/s, silent 1 s, back, silent 0.5 s: the 1 s stretch is the lull
    s = _if_bytes("srv", [1e8, 1e8, 0, 1e3, 1e8, 0, 1e8, 1e8])
    assert longest_lull(s, direction="tx", window=(100.0, 104.0), host="srv") == (101.0, 102.0)
    # only the part inside the window counts; another host's silence is not this one's
    assert longest_lull(s, direction="tx", window=(101.5, 104.0), host="srv") == (101.5, 102.0)
    assert longest_lull(s + _if_bytes("c1", [0] * 8), direction="tx", window=(100.0, 104.0),
                        host="srv") == (101.0, 102.0)
    # a steady host has none; 2 % of the mean is slow, not silent
    assert longest_lull(_if_bytes("srv", [1e8] * 8), direction="tx", window=(100.0, 104.0), host="srv") is None
    assert longest_lull(_if_bytes("srv", [1e8, 3e6, 1e8, 1e8]), direction="tx", window=(100.0, 102.0),
                        host="srv") is None
    # counters with a gap tell nothing
    gap = [x for i, x in enumerate(s) if i != 3]
    assert longest_lull(gap, direction="tx", window=(100.0, 104.0), host="srv") is None


def _old_series(samples, w0, w1, bin_s):
    """The per-bin sum over every sample that aggregate() used before issue 33
    (quadratic): the reference the linear one must equal to the last bit."""
    from nicbench.analysis.aggregate import _overlap
    from nicbench.core.units import gbps
    out, t = [], w0
    while t < w1 - 1e-9:
        t_next = min(t + bin_s, w1)
        bb = sum(x.value * _overlap(x.t_start, x.t_end, t, t_next) / (x.t_end - x.t_start) for x in samples)
        out.append((t, gbps(bb, t_next - t)))
        t = t_next
    return tuple(out)


def test_the_time_series_is_linear_in_intervals_and_equals_the_all_pairs_sum(monkeypatch):
    # issue 33: 2,000 intervals took 16 million overlap tests (25 s), 115,000 never finished
    import random

    from nicbench.analysis import aggregate as agg
    rnd = random.Random(33)
    s, t = [], 100.0
    for _ in range(400):               # uneven intervals (0.2-1.7 s) against 1 s bins, fractional bytes
        d = rnd.uniform(0.2, 1.7)
        s.append(iv("c1", t, t + d, rnd.uniform(1e8, 3e9)))
        t += d
    s += series("c2", 100.3, int(t - 101), 1.25e9)
    calls = 0
    real = agg._overlap

    def counted(*a):
        nonlocal calls
        calls += 1
        return real(*a)
    monkeypatch.setattr(agg, "_overlap", counted)
    a = aggregate(s, direction="tx", bin_s=1.0)
    n = len(s)
    # the window sum takes one test per sample; the series about two per sample and bin edge
    assert calls < 6 * n, f"{calls} overlap tests for {n} samples: not linear"
    monkeypatch.setattr(agg, "_overlap", real)
    by_proc = [x for x in s if x.tag("host") == "c1"] + [x for x in s if x.tag("host") == "c2"]
    assert a.series == _old_series(by_proc, *a.window, 1.0)      # identical floats, not approximately
    assert len(a.series) == len(_old_series(by_proc, *a.window, 1.0)) > 300
