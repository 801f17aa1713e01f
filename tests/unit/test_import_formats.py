"""Imported third-party and local outputs: the headline figure computed by hand
(tests/fixtures/SOURCES.md shows the arithmetic), detection, and the errors."""

from pathlib import Path

import pytest

from nicbench.core.errors import InputError
from nicbench.importers import detect, parse_file, points
from nicbench.importers.group import engine_direction, group
from nicbench.importers.headline import headline

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "import"


def load(rel: str, role=None):
    text = (ROOT / rel).read_text(errors="replace")
    return parse_file(text, rel, role=role)


# (file, format, headline value, relative tolerance, unit)
CASES = [
    ("iperf3/ext/cp_tx_omit3.json", "iperf3-json", 112065920 * 8 / 10.277013, 1e-9, "bit/s"),
    ("iperf3/ext/cp_bytes_n.json", "iperf3-json", 208696064 * 8 / 21.521865, 1e-9, "bit/s"),
    ("iperf3/ext/i3py_3.0.11.json", "iperf3-json", 1518193248 * 8 / 13.0001, 1e-9, "bit/s"),
    ("iperf3/local/client_tx_p2_noserver.json", "iperf3-json", 17030498351.03555, 1e-9, "bit/s"),
    ("iperf3/local/server_tx_p2.json", "iperf3-json", 17030498351.03555, 1e-9, "bit/s"),
    ("iperf3/local/client_udp_gso.json", "iperf3-json", 12495000 * 8 / 2.000315, 1e-9, "bit/s"),
    ("iperf3/local/server_udp.json", "iperf3-json", 12495000 * 8 / 2.000315, 1e-9, "bit/s"),
    ("iperf3-text/ext/cp_text.txt", "iperf3-text", 81.5e6, 5e-3, "bit/s"),
    ("iperf3-text/ext/iperf3_issue909_udp.txt", "iperf3-text", 1.09e6, 5e-3, "bit/s"),
    ("iperf3-text/local/client_tx_p2.txt", "iperf3-text", 17.6e9, 5e-3, "bit/s"),
    ("iperf2-text/ext/iperf2_pscheduler394_e.txt", "iperf2-text",
     (102 + 111 + 110 + 111 + 112 + 114 + 111 + 113 + 112) * 2**20 * 8 / 9.0, 1e-9, "bit/s"),
    ("iperf2-text/local/client_udp_e.txt", "iperf2-text", 2.51 * 2**20 * 8 / 2.002, 1e-9, "bit/s"),
    ("iperf2/local/server_udp_e.csv", "iperf2-csv", 2626890 * 8 / 2.0, 1e-9, "bit/s"),
    ("fio/local/client_server_2hosts.json", "fio-json", 198836224 / 1.001, 1e-9, "B/s"),
    ("fio/local/write_64k_json_normal.txt", "fio-json", (2130575360 + 1917845504) / 1.003, 1e-9, "B/s"),
    ("wrk/ext/pkb_wrk_result.txt", "wrk-text", 9605.69, 0, "req/s"),
    ("wrk/ext/wrk2_readme_latency.txt", "wrk-text", 2000.28, 0, "req/s"),
    ("wrk/ext/wrk_issue256.txt", "wrk-text", 258.88, 0, "req/s"),
    ("wrk/ext/wrk_issue371.txt", "wrk-text", 17193.20, 0, "req/s"),
    ("wrk/ext/wrk_techempower117.txt", "wrk-text", 13769.23, 0, "req/s"),
    ("wrk/ext/wrk_readme.txt", "wrk-text", 748868.53, 0, "req/s"),
    ("pktgen/ext/pktgen_netmap368_tx.txt", "pktgen-text",
     (908.221 + 910.273 + 910.533 + 910.603) * 1e3 / ((1000378 + 1001001 + 1001154 + 1001050) / 1e6), 1e-9, "pps"),
    ("pktgen/ext/pktgen_netmap536_summary.txt", "pktgen-text", 14.307e6, 1e-12, "pps"),
    ("netperf/ext/netperf_doc_tcp_stream.txt", "netperf-text", 27175.27e6, 1e-12, "bit/s"),
    ("netperf/ext/netperf_doc_tcp_rr.txt", "netperf-text", 59421.52, 0, "trans/s"),
    ("netperf/ext/netperf_doc_tcp_rr_k.txt", "netperf-text", 60074.74, 0, "trans/s"),
    ("netperf/ext/netperf_pkb_udp_rr_o.txt", "netperf-text", 1359.71, 0, "trans/s"),
    ("netperf/ext/pkb_netperf_results.txt", "netperf-text", 2217.06, 0, "trans/s"),
]


@pytest.mark.parametrize("rel, fmt, value, tol, unit", CASES, ids=[c[0] for c in CASES])
def test_headline_figure(rel, fmt, value, tol, unit):
    p = load(rel)
    assert p.format == fmt
    label, got, u = headline(p)
    assert u == unit
    assert got == pytest.approx(value, rel=tol, abs=1e-9)


def test_fio_job_groups_ran_one_after_another_are_one_point_each():
    # fio 2.17, io_bytes in KiB: group 0 read 1294256 KiB in 10.003 s, group 1 write 393280 KiB in 10.004 s;
    # summing them would add two rates that never ran at the same time
    p = load("fio/ext/pkb_pkb-7fb0c9d8-0_fio.json")
    with pytest.raises(InputError, match="2 points"):
        headline(p)
    read, write = points(p)
    assert (read.params["op"], read.params["block_size"]) == ("read", 16384)
    assert (write.params["op"], write.params["block_size"]) == ("write", 16384)
    assert headline(read)[1] == pytest.approx(1294256 * 1024 / 10.003)
    assert headline(write)[1] == pytest.approx(393280 * 1024 / 10.004)
    # placed back to back, the write group ending at the document's timestamp (1506559552)
    assert max(s.t_end for s in write.samples) == 1506559552
    assert max(s.t_end for s in read.samples) == pytest.approx(1506559552 - 10.004)
    assert len(group([read, write])) == 2
    one = load("fio/local/randread_4k.json")
    assert points(one) == [one]


def test_iperf2_csv_needs_a_role_and_then_reads_bytes_not_the_bps_field():
    # one line from port 41703 to the listening 5001: iperf 2.1+ writes that at both ends, so it asks
    with pytest.raises(InputError, match="as iperf 2.1. writes them at both ends"):
        load("iperf2/ext/iperf2_syno4862.csv")
    p = load("iperf2/ext/iperf2_syno4862.csv", role="client")
    # 1112670268 B over 0.0-10.0 s = 890.1 Mbit/s; the line's own bits/s field says 8.87 Gbit/s
    assert headline(p)[1] == pytest.approx(1112670268 * 8 / 10.0)
    assert any("disagrees" in n for n in p.notes)


def test_client_forward_json_uses_receiver_totals_and_says_so():
    p = load("iperf3/local/client_tx_p2_noserver.json")
    assert p.params["direction"] == "tx" and p.role == "client" and p.params["streams"] == 2
    whole = [s for s in p.samples if s.tag("whole") == "1"]
    assert len(whole) == 1 and whole[0].tag("side") == "receiver"
    assert any("sender-side" in n for n in p.notes)
    assert not p.relative_time and p.start is not None


def test_pre_37_json_without_sender_flags_is_a_forward_test():
    p = load("iperf3/ext/i3py_3.0.11.json")
    assert {s.tag("direction") for s in p.samples} == {"tx"}


def test_udp_carries_loss_and_jitter_metrics():
    p = load("iperf3/local/client_udp_gso.json")
    assert p.kind == "udp" and {"udp.bytes", "udp.lost", "udp.jitter"} <= {s.metric for s in p.samples}
    assert p.totals["tx.receiver.lost"] == 0


@pytest.mark.parametrize("rel, match", [
    ("iperf3/ext/cp_3.6_bytes_n.json", "receiver reported 0 bytes"),
    ("iperf3/ext/cp_damaged.json", "truncated or damaged"),
    ("iperf3/ext/cp_error.json", "never ran"),
    ("iperf3/ext/cp_empty.txt", "empty file"),
    ("wrk/ext/wrk_issue497.txt", "0 requests"),
    ("wrk/local/refused.txt", "not recognised"),
])
def test_unusable_files_are_input_errors_naming_file_and_fix(rel, match):
    with pytest.raises(InputError, match=match) as e:
        load(rel)
    assert e.value.where == rel and e.value.hint


def test_damaged_json_never_falls_back_to_the_nested_server_output():
    good = (ROOT.parent / "iperf3" / "3.12" / "tx_p2.json").read_text()
    with pytest.raises(InputError, match="damaged"):
        parse_file(good.rstrip()[:-1], "cut.json", force="iperf3")        # last } missing
    import re
    nan = re.sub(r'"retransmits":\s*\d+', '"retransmits":\t-nan', good, count=1)
    p = parse_file(nan, "nan.json")
    assert p.dropped and "nan" in p.dropped[0]


def test_all_zero_bytes_is_an_error():
    import json
    d = json.loads((ROOT / "iperf3/local/client_tx_p2_noserver.json").read_text())
    for iv in d["intervals"]:
        for st in iv["streams"]:
            st["bytes"] = 0
    for st in d["end"]["streams"]:
        st["sender"]["bytes"] = st["receiver"]["bytes"] = 0
    with pytest.raises(InputError, match="every byte count is 0"):
        parse_file(json.dumps(d), "zero.json")


@pytest.mark.parametrize("rel, fmt", [(c[0], c[1]) for c in CASES] + [
    ("iperf2/local/client_dual.csv", "iperf2-csv"), ("fio/local/randrw_in_log.txt", "fio-json"),
    ("fio/ext/pkb_pkb-7fb0c9d8-0_fio.json", "fio-json")])
def test_detection(rel, fmt):
    assert detect((ROOT / rel).read_text(errors="replace"), rel) == fmt


def test_grouping_parallel_ports_and_repeats():
    a = load("pktgen/ext/pktgen_netmap368_tx.txt")
    b = load("pktgen/ext/pktgen_netmap102_rx.txt")
    c = load("iperf3/local/client_tx_p2_noserver.json")
    gs = group([a, b, c])
    assert len(gs) == 3
    assert len(group([a, b], together=True)) == 1
    label, value, unit = headline(group([c, c], together=True)[0].files)
    assert value == pytest.approx(2 * headline(c)[1]) and "summed" in label


def test_both_ends_of_one_test_name_the_same_connections_and_point():
    c = load("iperf3/local/client_tx_p2_noserver.json")
    s = load("iperf3/local/server_tx_p2.json")
    assert c.extra["pairs"] == s.extra["pairs"] and len(c.extra["pairs"]) == 2
    # the server received the client's tx: one point, keyed by the engine client's direction
    assert s.params["direction"] == "rx" and engine_direction(s) == "tx"
    assert len(group([c, s])) == 1
    t = load("iperf2-text/local/server_tx_e.txt")
    assert t.extra["pairs"] == [(5001, 53020), (5001, 53036)]
    assert load("iperf2-text/local/client_tx_p2_e.txt").extra["pairs"] == t.extra["pairs"]


def test_a_total_over_zero_seconds_has_no_rate():
    # iperf 2.1.8 server in -n mode (tests/fixtures/iperf2/2.1.8/server_n.csv): 104857600 B "0.0-0.0"
    text = (ROOT.parent / "iperf2" / "2.1.8" / "server_n.csv").read_text()
    with pytest.raises(InputError, match="over 0 s") as e:
        parse_file(text, "server_n.csv", role="server")
    assert "client's file" in e.value.hint
    # the client's file of the same test: 104857600 B in 0.0-0.1 s, sender-side
    c = parse_file((ROOT.parent / "iperf2" / "2.1.8" / "client_n.csv").read_text(), "client_n.csv", role="client")
    assert headline(c)[1] == pytest.approx(104857600 * 8 / 0.1)


def test_pktgen_frame_size_from_its_own_bits_and_packets():
    # 435.946 Mbps / 907.878 Kpps / 8 = 60 B without FCS -> 64 with it
    assert load("pktgen/ext/pktgen_netmap368_tx.txt").params["frame_size"] == 64
    # 369.6 Kbps / 33 pps / 8 = 1400 B -> 1404
    assert load("pktgen/ext/pktgen_netmap102_rx.txt").params["frame_size"] == 1404
    # Speed line: 6.867 Gbps / 14.307 Mpps / 8 = 60 B -> 64
    assert load("pktgen/ext/pktgen_netmap536_summary.txt").params["frame_size"] == 64


def test_trafgen_frame_size_counts_the_fcs():
    # 3104472460 bytes / 42527020 packets = 73 B handed to the NIC, 77 on the wire with the FCS
    p = load("trafgen/ext/trafgen_netdev_mab.txt")
    assert p.params["frame_size"] == 77 and p.params["cpus"] == 8
    assert headline(p)[1] == pytest.approx(42527020 / 330.005228)


def test_wrk_scheme_from_the_url_it_printed():
    assert load("wrk/ext/pkb_wrk2_output.txt").params["scheme"] == "https"
    assert load("wrk/ext/wrk_readme.txt").params["scheme"] == "http"
    assert "scheme" not in load("wrk/ext/wrk_issue371.txt").params      # no "Running ... @ URL" line
