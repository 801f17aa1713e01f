import pytest

from conftest import fixture_text
from nicbench.analysis.aggregate import wire_rate
from nicbench.records import Sample, TrialRecord, TrialSpec, make_tags
from nicbench.sampling.netdev import delta, parse_net_dev
from nicbench.studies.tcp.analysis import LinkInfo, point_stats, trial_result


def test_parse_recorded_net_dev():
    ns = parse_net_dev(fixture_text("proc", "net_dev_netns.txt"))
    assert set(ns) == {"lo"} and ns["lo"]["rx_packets"] == ns["lo"]["tx_packets"] == 6
    host = parse_net_dev(fixture_text("proc", "net_dev_host.txt"))
    assert "lo" in host and all("tx_bytes" in c.values for c in host.values())


def test_old_kernel_with_fewer_columns():
    text = "Inter-|\n face |bytes\n  eth0: 100 2 0 0 200 3 0 0\n"
    c = parse_net_dev(text)["eth0"]
    assert c["rx_bytes"] == 100 and c["rx_packets"] == 2 and c["tx_bytes"] == 200 and c["tx_packets"] == 3


def test_counter_wrap_and_reset():
    assert delta(2**64 - 10, 5) == 15
    assert delta(2**32 - 10, 5, bits=32) == 15
    assert delta(10**12, 5) is None          # went back: reset, not a wrap


def _samples(gbps_goodput, frames_per_s, frame_bytes=1514, seconds=4):
    out = []
    for i in range(seconds):
        tags = make_tags(host="c1", proc=5201, direction="tx", side="receiver", omitted=0)
        out.append(Sample("t1", "tcp.bytes", gbps_goodput * 1e9 / 8, "bytes", i, i + 1, tags))
        itags = make_tags(host="srv", ifname="eth0", direction="tx")
        out.append(Sample("t1", "if.bytes", frames_per_s * frame_bytes, "bytes", i, i + 1, itags))
        out.append(Sample("t1", "if.packets", frames_per_s, "packets", i, i + 1, itags))
    return out


def test_wire_rate_adds_24_bytes_per_frame():
    w = wire_rate(_samples(0.94, 81274), direction="tx", window=(0.5, 3.5))
    assert w.frames_per_s == pytest.approx(81274)
    assert w.wire_bps == pytest.approx(81274 * 1538 * 8)       # = 1.0000 Gbit/s


def _run(goodput, timestamps):
    spec = TrialSpec("t1", 0, "tcp", "tx/c1/io128K", 0, {"direction": "tx", "duration": 4.0})
    rec = TrialRecord(spec, "ok", 0, 4, None, {"layout": [{"client": "c1", "port": 5201, "streams": 1}]})
    link = LinkInfo(1500, 1e9, 4, timestamps, True)
    r = trial_result(rec, _samples(goodput, 81274), 0.0, link)
    return r, point_stats([r], link)[0]


def test_every_point_carries_its_ceiling_and_wire_rate():
    r, p = _run(0.94, True)
    assert p.ceiling_gbps == pytest.approx(1448 / 1538, abs=1e-6)
    assert p.of_ceiling == pytest.approx(0.94 / (1448 / 1538), abs=1e-6) and not p.above_ceiling
    assert p.wire_gbps == pytest.approx(1.0, abs=0.001) and p.link_gbps == 1.0


def test_a_result_above_its_ceiling_is_flagged():
    # 0.948 Gbps fits a 1 Gbit link only without timestamps (ceiling 0.9493);
    # a model that assumed them on (0.9416) must flag it, not report 100.7 %
    _, wrong = _run(0.948, True)
    assert wrong.above_ceiling and wrong.of_ceiling > 1.005
    _, right = _run(0.948, False)
    assert not right.above_ceiling


def test_unshaped_lab_has_no_ceiling():
    link = LinkInfo(1500, None, 4, True, False)
    assert link.ceiling() is None
    assert LinkInfo.from_meta({"link": {"mtu": 9000, "speed_bps": 2e9, "tcp_timestamps": {"srv": 1, "c1": 0}}}
                              ).timestamps is False


def _bidir_trial(tx_gbps, rx_gbps, rep=0, tid="t1"):
    out = []
    for d, g in (("tx", tx_gbps), ("rx", rx_gbps)):
        for i in range(4):
            out.append(Sample(tid, "tcp.bytes", g * 1e9 / 8, "bytes", i, i + 1,
                              make_tags(host="c1", proc=5201, direction=d, side="receiver", omitted=0)))
    spec = TrialSpec(tid, rep, "tcp", "bidir/c1/io128K", rep, {"direction": "bidir", "duration": 4.0})
    rec = TrialRecord(spec, "ok", 0, 4, None, {"layout": [{"client": "c1", "port": 5201, "streams": 1}]})
    return rec, out


def test_one_direction_above_its_ceiling_is_flagged_even_if_the_sum_is_not():
    link = LinkInfo(1500, 2e9, 4, True, False)
    r = trial_result(*_bidir_trial(1.94, 1.20), 0.0, link)      # tx 103 % of 1.883, total 83 %
    [p] = point_stats([r], link)
    assert p.of_ceiling < 0.9 and p.above_ceiling and p.max_of_ceiling == pytest.approx(1.94 / 1.8830, abs=1e-3)


def test_one_repeat_above_its_ceiling_is_flagged_even_if_the_median_is_not():
    link = LinkInfo(1500, 2e9, 4, True, False)
    rs = [trial_result(*_bidir_trial(g, 0.5, rep=i, tid=f"t{i}"), 0.0, link)
          for i, g in enumerate((1.92, 1.87, 1.86))]
    [p] = point_stats(rs, link)
    assert p.above_ceiling and p.max_of_ceiling == pytest.approx(1.92 / 1.8830, abs=1e-3)


def test_client_speed_bounds_the_ceiling_by_the_clients_in_use():
    link = LinkInfo(1500, 2e9, 4, True, False, client_speed_bps=0.5e9)
    assert link.speed_for(1) == 0.5e9 and link.speed_for(3) == 1.5e9 and link.speed_for(8) == 2e9
    only_clients = LinkInfo(1500, None, 4, True, True, client_speed_bps=1e9)
    assert only_clients.ceiling(2).goodput_bps == pytest.approx(2e9 * 1448 / 1538)
    assert LinkInfo.from_meta({"link": {"mtu": 1500, "speed_bps": None, "client_speed_bps": 1e9}}).client_speed_bps


def test_wire_above_the_link_speed_is_flagged():
    _, p = _run(0.94, True)
    assert not p.wire_above_link
    spec = TrialSpec("t1", 0, "tcp", "tx/c1/io512", 0, {"direction": "tx", "duration": 4.0})
    rec = TrialRecord(spec, "ok", 0, 4, None, {"layout": [{"client": "c1", "port": 5201, "streams": 1}]})
    link = LinkInfo(1500, 1e9, 4, True, True)
    # 512-byte segments: 578-byte frames counted, 1.025 x the wire time tbf charged
    r = trial_result(rec, _samples(0.8, 211000, frame_bytes=578), 0.0, link)
    [p] = point_stats([r], link)
    assert p.wire_above_link and p.max_wire_of_link > 1.005


def test_wire_rate_needs_counters_over_the_whole_window():
    s = _samples(0.94, 81274)
    assert wire_rate(s, direction="tx", window=(0.5, 3.5)) is not None
    short = [x for x in s if not (x.metric.startswith("if.") and x.t_start >= 3)]   # counters end at 3 s
    assert wire_rate(short, direction="tx", window=(0.5, 3.5)) is None
    no_packets = [x for x in s if x.metric != "if.packets"]
    assert wire_rate(no_packets, direction="tx", window=(0.5, 3.5)) is None
    assert wire_rate(s, direction="tx", window=(0.5, 3.5), host="other") is None


def test_odd_column_counts_are_not_guessed():
    assert parse_net_dev(" face |bytes\n  eth0: 1 2 3\n") == {}


def test_goodput_far_under_what_the_interface_carried_is_flagged():
    # the audit's case: a pair that reported 0 bytes left out of the sum -- 0.474 Gbit/s
    # recorded while the wire carried ~0.95; the interface's counters tell, whatever the engine said
    r, p = _run(0.47, True)
    assert r.status == "ok" and set(r.below_carried) == {"tx"} and r.below_carried["tx"] == pytest.approx(0.5, abs=0.01)
    assert any("of the TCP payload the server's interface carried" in w for w in r.warnings)
    assert p.min_of_carried == pytest.approx(0.5, abs=0.01)
    fine, q = _run(0.94, True)                # 1448 of 1514 bytes a frame: 0.99 of the carried payload
    assert fine.below_carried == {} and q.min_of_carried is None
