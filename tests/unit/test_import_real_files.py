"""Issue 28: files labs already have, written by other projects (provenance in
tests/fixtures/SOURCES.md), each figure checked against what the file itself
says -- iperf 2 CSV and text forms, iperf3 text forms, the tool's own
whole-test total as the figure, and what an unknown file is said to be."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from conftest import import_json as imp
from conftest import run_cli as nb
from nicbench.api import load_run
from nicbench.core.errors import InputError
from nicbench.importers import parse_file
from nicbench.importers.headline import details, headline

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "import"
MIB = 2**20


def load(rel: str, role=None, force=None):
    return parse_file((ROOT / rel).read_text(errors="replace"), rel, force=force, role=role)


# (file, format, role, headline bit/s as the file states it, relative tolerance)
CASES = [
    # iperf 2.1.9+ CSV: the zone before the stamp; enhanced TCP (6 integer fields after speed) is not UDP
    ("iperf2/ext/k8s_agnhost_2.1.9_e_tcp.csv", "iperf2-csv", "client",
     (5220466748 + 5127667712) * 8 / 2.0, 1e-12),
    # 2.2: a header line, start and end as two fields; its header names the writer's fields (writecnt)
    ("iperf2/ext/k8s_agnhost_2.2_e_tcp_header.csv", "iperf2-csv", "client",
     (7817396288 + 7550795776 + 8703574016) * 8 / 3.0, 1e-12),
    # the whole-test line 0.0-10.2 is the figure, not the 0.0-1.0 interval
    ("iperf2/ext/kubeovn_2.2_e_tcp_total.csv", "iperf2-csv", "client", 110755904 * 8 / 10.2, 1e-12),
    # iperf 2 -e --format b: exact bytes, the whole-test line per stream / [SUM]
    ("iperf2-text/ext/pscheduler_tcp_p1_fb.txt", "iperf2-text", "client", 33292419132 * 8 / 6.01, 1e-12),
    ("iperf2-text/ext/pscheduler_tcp_p2_fb.txt", "iperf2-text", "client", 58089668728 * 8 / 6.00, 1e-12),
    ("iperf2-text/ext/pscheduler_tcp_p4_uneven.txt", "iperf2-text", "client", 686162160 * 8 / 10.01, 1e-12),
    # UDP: one Server Report per stream, summed: 789390 + 792330 B, the longer span 6.01 s
    ("iperf2-text/ext/pscheduler_udp_p1_fb.txt", "iperf2-text", "client", 790860 * 8 / 6.01, 1e-12),
    ("iperf2-text/ext/pscheduler_udp_p2_fb.txt", "iperf2-text", "client", (789390 + 792330) * 8 / 6.01, 1e-12),
    # PerfKitBenchmarker's iperf 2 texts (MBytes are MiB)
    ("iperf2-text/ext/pkb_tcp_p1.txt", "iperf2-text", "client", 14063 * MIB * 8 / 60.0, 1e-12),
    ("iperf2-text/ext/pkb_tcp_p2.txt", "iperf2-text", "client", 14095 * MIB * 8 / 60.01, 1e-12),
    ("iperf2-text/ext/pkb_tcp_p1_i1.txt", "iperf2-text", "client", 601 * MIB * 8 / 5.37, 1e-12),
    ("iperf2-text/ext/pkb_tcp_p3_i1.txt", "iperf2-text", "client", 739 * MIB * 8 / 5.24, 1e-12),
    ("iperf2-text/ext/pkb_udp_p1.txt", "iperf2-text", "client", 7.50 * MIB * 8 / 60.0, 1e-12),
    ("iperf2-text/ext/pkb_udp_p2.txt", "iperf2-text", "client", 2 * 7.50 * MIB * 8 / 60.0, 1e-12),
    # -f K: transfer and rate in KBytes (gVisor's benchmark-tools test data)
    ("iperf2-text/ext/gvisor_bench_fK.txt", "iperf2-text", "client", 459520 * 1024 * 8 / 10.0, 1e-12),
    # EURECOM OpenRAN labs, iperf 2 -R -e: the [ *1] whole-test row
    ("iperf2-text/ext/mobsys_oran_reverse_mcs9_e.txt", "iperf2-text", "client", 163 * MIB * 8 / 60.86, 1e-12),
    ("iperf2-text/ext/mobsys_oran_reverse_mcs28_e.txt", "iperf2-text", "client", 525 * MIB * 8 / 60.40, 1e-12),
    # iperf3 text on Windows (PKB): -f M -P 5, its [SUM] receiver row
    ("iperf3-text/ext/pkb_win_tcp_p5_fM.txt", "iperf3-text", "client", 1.64 * 2**30 * 8 / 3.01, 1e-12),
]


@pytest.mark.parametrize("rel, fmt, role, value, tol", CASES, ids=[c[0] for c in CASES])
def test_the_figure_is_what_the_file_says(rel, fmt, role, value, tol):
    p = load(rel)
    assert (p.format, p.role) == (fmt, role)
    assert headline(p)[1] == pytest.approx(value, rel=tol)


def test_zone_first_stamps_are_read_as_that_zone():
    p = load("iperf2/ext/k8s_agnhost_2.1.9_e_tcp.csv")
    # +0000:20240908113035.128 ends the 0.0-1.0 interval
    first = min(s.t_start for s in p.samples)
    assert first == pytest.approx(dt.datetime(2024, 9, 8, 11, 30, 34, 128000, tzinfo=dt.UTC).timestamp())
    assert p.kind == "tcp" and not any(s.metric.startswith("udp.") for s in p.samples)


def test_role_inferred_is_said_and_role_overrides_it():
    p = load("iperf2/ext/k8s_agnhost_2.2_e_tcp_header.csv")
    assert any("client's file" in n and "writecnt" in n and "--role overrides" in n for n in p.notes)
    assert load("iperf2/ext/k8s_agnhost_2.2_e_tcp_header.csv", role="server").role == "server"
    q = load("iperf2/ext/k8s_agnhost_2.1.9_e_tcp.csv")
    assert any("write counts (6 fields after speed)" in n for n in q.notes)


def test_a_dual_test_needs_its_role_then_the_server_report_is_the_forward_receiver():
    """ChromiumOS tast: a UDP dual test's client CSV, with the server's report of
    the client's own connection and the dual test's connection back."""
    with pytest.raises(InputError, match="dual test"):
        load("iperf2/ext/cros_tast_2.0_udp_dual_client.csv")
    p = load("iperf2/ext/cros_tast_2.0_udp_dual_client.csv", role="client")
    assert p.kind == "udp" and p.params["direction"] == "bidir"
    # tx: the server's report (392785470 B over 9.8 s, 539 of 267740 lost); rx: received back, 3822 lost
    assert (p.totals["tx.receiver.bytes"], p.totals["tx.receiver.seconds"]) == (392785470, 9.8)
    assert (p.totals["tx.receiver.lost"], p.totals["tx.receiver.packets"]) == (539, 267740)
    assert (p.totals["rx.receiver.bytes"], p.totals["rx.receiver.lost"]) == (368989110, 3822)
    # the total the ChromiumOS test expects: 615832488 bit/s
    assert headline(p)[1] == pytest.approx(392785470 * 8 / 9.8 + 368989110 * 8 / 10.0)
    assert round(headline(p)[1]) == 615832488


def test_server_reports_of_every_stream_are_summed():
    p = load("iperf2-text/ext/pscheduler_udp_p2_fb.txt")
    assert p.kind == "udp" and p.params["io_size"] == 1470
    assert p.totals["tx.receiver.packets"] == 538 + 538 and p.totals["tx.receiver.lost"] == 1 + 0
    assert p.totals["tx.receiver.jitter_s"] == pytest.approx(0.008e-3)
    # -f b prints exact bytes: no rounding note
    assert not any("rounded" in n for n in p.notes)
    q = load("iperf2-text/ext/pkb_udp_p2.txt")
    assert q.kind == "udp" and q.totals["tx.receiver.lost"] == 1 and q.totals["tx.receiver.packets"] == 10700


def test_the_tools_total_is_the_figure_and_the_intervals_the_timeline():
    """iperf 2's [SUM] 0.00-5.24 after intervals to 5.00: what the total counts
    past the intervals is one more sample, so the samples add up to the total."""
    p = load("iperf2-text/ext/pkb_tcp_p3_i1.txt")
    ivs = [s for s in p.samples if s.metric == "tcp.bytes" and s.tag("side") == "sender"]
    tail = [s for s in ivs if s.tag("tail") == "1"]
    assert len(ivs) == 6 and len(tail) == 1
    assert (tail[0].t_start, tail[0].t_end) == pytest.approx((5.0, 5.24))
    assert sum(s.value for s in ivs) == pytest.approx(739 * MIB)
    assert any("runs 0.24 s past its last interval" in n for n in p.notes)


def test_the_study_figure_is_the_tools_total(capsys, tmp_path):
    doc = imp(capsys, tmp_path / "s", ROOT / "iperf2-text/ext/pkb_tcp_p3_i1.txt")
    [pt] = doc["runs"][0]["points"]
    # sender-side (no receiver figure in the file): the [SUM] line's 739 MBytes over 5.24 s, not 1.24 Gbit/s
    assert pt["value"] == pytest.approx(739 * MIB * 8 / 5.24 / 1e9, rel=1e-9)


def test_reverse_rows_are_the_received_direction(capsys, tmp_path):
    """iperf 2 -R -e: [ *1] rows are what the client received (OpenRAN lab logs)."""
    p = load("iperf2-text/ext/mobsys_oran_reverse_e.txt")
    assert p.role == "client" and p.params["direction"] == "rx"
    assert headline(p) == ("receiver bit/s", pytest.approx(290 * MIB * 8 / 60.67), "bit/s")
    assert any("[ *N] rows" in n for n in p.notes)
    # its intervals end at 60.00; the total runs to 60.18 s: that stretch is one more sample
    q = load("iperf2-text/ext/mobsys_oran_reverse_tail_e.txt")
    assert headline(q)[1] == pytest.approx(511 * MIB * 8 / 60.18)
    assert any("runs 0.18 s past its last interval" in n for n in q.notes)
    u = load("iperf2-text/ext/mobsys_oran_udp_reverse_e.txt")
    assert (u.kind, u.params["direction"], u.totals["rx.receiver.packets"], u.totals["rx.receiver.lost"]) == \
        ("udp", "rx", 35668, 0)
    assert headline(u)[1] == pytest.approx(50.0 * MIB * 8 / 10.60)
    doc = imp(capsys, tmp_path / "s", ROOT / "iperf2-text/ext/mobsys_oran_reverse_tail_e.txt")
    [pt] = doc["runs"][0]["points"]
    assert pt["point"].startswith("rx/c1") and pt["value"] == pytest.approx(511 * MIB * 8 / 60.18 / 1e9)


def test_old_iperf3_udp_summary_without_side_words():
    """iperf3 on Windows (PKB): the UDP summary has no sender/receiver word."""
    p = load("iperf3-text/ext/pkb_win_udp_nosuffix.txt")
    assert p.role == "client" and any("connections go to port 5201" in n for n in p.notes)
    assert p.totals["tx.sender.bytes"] == 492 * MIB
    assert (p.totals["tx.receiver.lost"], p.totals["tx.receiver.packets"]) == (35148, 62949)
    assert p.totals["tx.receiver.bytes"] == pytest.approx(492 * MIB * (62949 - 35148) / 62949)
    assert any("before 3.1" in n and "derived" in n for n in p.notes)


def test_unknown_format_says_what_the_file_looks_like_and_what_exists(tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(InputError) as e:
        parse_file(f.read_text(), str(f))
    assert "CSV of 3 fields per line" in e.value.message
    assert "iperf3-json" in e.value.hint and "sockperf-text" in e.value.hint and "--as TOOL" in e.value.hint
    with pytest.raises(InputError) as e:
        parse_file('{"hello": 1, "world": 2}', "j.json")
    assert "a JSON object with keys hello, world" in e.value.message


def test_an_unknown_tool_name_is_said_to_be_one(capsys, tmp_path):
    code, _, err = nb(capsys, "import", "--store", tmp_path / "s", "ntttcpx",
                      ROOT / "iperf2-text/ext/pkb_tcp_p1.txt")
    assert code == 2 and "unknown tool 'ntttcpx'" in err and "iperf3" in err and "No such file" not in err
    code, _, err = nb(capsys, "import", "--store", tmp_path / "s", "--as", "ntttcpx",
                      ROOT / "iperf2-text/ext/pkb_tcp_p1.txt")
    assert code == 2 and "unknown format 'ntttcpx'" in err


def test_keys_a_terminal_echoed_before_the_report_are_removed(capsys, tmp_path):
    """CloudPilot: '^C{' (the client stopped by hand, CRLF line ends) and '^[[F{'."""
    p = load("iperf3/ext/cp_ctrlc_interrupted.json")
    assert p.format == "iperf3-json" and any("'^C' a terminal echoed" in n for n in p.notes)
    # interrupted: the receiver's 0 is the server's results that never came; the sender's total is the figure
    assert p.partial and any("interrupted before the server's results" in d for d in p.dropped)
    assert headline(p) == ("sender bit/s", pytest.approx(210922112 * 8 / 10.527207136154175), "bit/s")
    doc = imp(capsys, tmp_path / "s", ROOT / "iperf3/ext/cp_ctrlc_interrupted.json")
    [pt] = doc["runs"][0]["points"]
    assert "sender-side" in doc["runs"][0]["basis"][pt["point"].removesuffix(" (sent)")]
    # CRLF line ends and a blank first line: the same report
    q = load("iperf3/ext/cp_crlf_blank_first.json")
    assert headline(q)[1] == pytest.approx(207344912 * 8 / 44.016, rel=1e-4)
    # ^[[F glued before a -n 10K report whose receiver truly got nothing: read, then refused for that
    with pytest.raises(InputError, match="receiver reported 0 bytes while the sender sent 56320"):
        load("iperf3/ext/cp_escape_glued_n.json")
    # ^C glued before a report cut off at 8 KiB: read as iperf3 JSON, refused as truncated
    with pytest.raises(InputError, match="truncated or damaged"):
        load("iperf3/ext/cp_ctrlc_truncated.json")


def test_fio_readwrite_has_each_operations_own_figures(capsys, tmp_path):
    """fio randrw (recorded here: tests/fixtures/import/fio/local): read and write each
    have their bandwidth and IOPS, in --json and in the storage study's points."""
    doc = imp(capsys, tmp_path / "s", ROOT / "fio/local/randrw_in_log.txt")
    [h] = doc["files"][0]["headline"]
    got = {d["label"]: d["value"] for d in h["details"]}
    # read: 83480576 B and 20381 IOs over 1.001 s; write: 83574784 B, 20404 IOs
    assert got == {"read bytes/s": pytest.approx(83480576 / 1.001), "read IOPS": pytest.approx(20381 / 1.001),
                   "write bytes/s": pytest.approx(83574784 / 1.001), "write IOPS": pytest.approx(20404 / 1.001)}
    view = load_run(Path(doc["run_dir"]))
    [p] = view.points
    assert p.read_iops == pytest.approx(20381 / 1.001) and p.write_mb_s == pytest.approx(83574784 / 1.001 / 1e6)
    assert p.iops == pytest.approx((20381 + 20404) / 1.001)


def test_udp_files_carry_loss_and_jitter_beside_the_headline(capsys, tmp_path):
    doc = imp(capsys, tmp_path / "s", ROOT / "iperf2-text/ext/pscheduler_udp_p2_fb.txt")
    got = {d["label"]: d["value"] for d in doc["files"][0]["headline"][0]["details"]}
    assert got == {"tx datagrams lost": pytest.approx(100 * 1 / 1076), "tx jitter": pytest.approx(0.008e-3)}


def test_iperf3_bidir_text_takes_each_directions_receiver_row():
    """ChromiumOS tast: iperf3 --bidir UDP text; each direction's figure is its
    receiver row (TX-C: 42.3 MBytes over 10.05 s, RX-C: 45.3 MBytes), not an interval."""
    p = load("iperf3-text/ext/cros_tast_udp_bidir.txt")
    assert (p.role, p.kind, p.params["direction"]) == ("client", "udp", "bidir")
    assert p.totals["tx.receiver.bytes"] == pytest.approx(42.3 * MIB)
    assert p.totals["rx.receiver.bytes"] == pytest.approx(45.3 * MIB)
    assert (p.totals["tx.receiver.lost"], p.totals["tx.receiver.packets"]) == (34716, 67486)
    # the total the ChromiumOS test expects: 73118608 bit/s (35307272 + 37811336), to the text's rounding
    assert headline(p)[1] == pytest.approx(73118608, rel=1e-6)
    q = load("iperf3-text/ext/cros_tast_tcp_p4_summary.txt", role="client")
    assert headline(q)[1] == pytest.approx(114 * MIB * 8 / 10.02)        # [SUM] receiver; ChromiumOS: 95439256


def test_json_stream_is_read_as_its_json_report(tmp_path):
    """iperf3 --json-stream (3.17+) writes the -J report's sections as events, one per line
    (iperf3's iperf_json_finish); no such file from another project was found, so the
    events are made here from a real -J report (CloudPilot, iperf3 3.9) as iperf3 3.17 prints them."""
    d = json.loads((ROOT / "iperf3/ext/cp_tx_omit3.json").read_text())
    lines = [json.dumps({"event": "start", "data": d["start"]}, separators=(",", ":"))]
    lines += [json.dumps({"event": "interval", "data": iv}, separators=(",", ":")) for iv in d["intervals"]]
    lines.append(json.dumps({"event": "end", "data": d["end"]}, separators=(",", ":")))
    stream = "\n".join(lines) + "\n"
    p = parse_file(stream, "stream.json")
    assert p.format == "iperf3-json-stream" and headline(p) == headline(load("iperf3/ext/cp_tx_omit3.json"))
    assert any(f"{len(d['intervals'])} interval events" in n for n in p.notes)
    cut = "\n".join(lines[:-1]) + "\n"             # stopped before its end event
    with pytest.raises(InputError, match="no end summary"):
        parse_file(cut, "cut.json")


@pytest.mark.parametrize("rel, kind, side, value", [
    # PerfKitBenchmarker's NTttcp 5.33 XML: "MB" are MiB (its own mbps: 291.484/291.485, 189.447, 245.153)
    ("ntttcp/ext/pkb_ntttcp_tcp_receiver.xml", "tcp", "receiver", 2085.379314 * MIB * 8 / 60.015),
    ("ntttcp/ext/pkb_ntttcp_tcp_sender.xml", "tcp", "sender", 2085.383034 * MIB * 8 / 60.015),
    ("ntttcp/ext/pkb_ntttcp_udp_receiver.xml", "udp", "receiver", 1355.365845 * MIB * 8 / 60.015),
    ("ntttcp/ext/pkb_ntttcp_udp_sender.xml", "udp", "sender", 1753.907349 * MIB * 8 / 60.015),
    # nuttcp: MB are MiB; a UDP summary is its receiver's (258108 x 1024 B = 252.06 MiB)
    ("nuttcp/ext/pscheduler_tcp_i1.txt", "tcp", "sender", 2197.0657 * MIB * 8 / 10.00),
    ("nuttcp/ext/pscheduler_tcp_summary.txt", "tcp", "sender", 68.7253 * MIB * 8 / 10.15),
    ("nuttcp/ext/pscheduler_udp_i1.txt", "udp", "receiver", 252.0586 * MIB * 8 / 10.00),
    ("nuttcp/ext/pkb_udp_summary.txt", "udp", "receiver", 1416.3418 * MIB * 8 / 10.00),
])
def test_ntttcp_and_nuttcp(rel, kind, side, value):
    p = load(rel)
    assert p.kind == kind and headline(p)[0].startswith(side) and headline(p)[1] == pytest.approx(value, rel=1e-9)


def test_ntttcp_sender_and_receiver_files_are_one_point(capsys, tmp_path):
    doc = imp(capsys, tmp_path / "s", ROOT / "ntttcp/ext/pkb_ntttcp_tcp_sender.xml",
              ROOT / "ntttcp/ext/pkb_ntttcp_tcp_receiver.xml")
    [pt] = doc["runs"][0]["points"]
    # the receiver's 2085.379314 MiB over 60.015 s, 2 threads, 150-byte buffers
    assert pt["point"] == "tx/c2/io150" and pt["value"] == pytest.approx(2085.379314 * MIB * 8 / 60.015 / 1e9)
    u = load("nuttcp/ext/pkb_udp_summary.txt")
    assert (u.totals["tx.receiver.lost"], u.totals["tx.receiver.packets"]) == (104429, 1554763)


@pytest.mark.parametrize("rel, kind, direction, side, value", [
    # netperf's own manual (doc/netperf.texi): MIGRATED/omni send tests count at the receiver
    ("netperf/ext/netperf_doc_tcp_stream.txt", "tcp", "tx", "receiver", 27175.27e6),
    ("netperf/ext/netperf_doc_tcp_maerts.txt", "tcp", "rx", "receiver", 81.14e6),      # the netserver sends
    ("netperf/ext/netperf_doc_tcp_sendfile.txt", "tcp", "tx", "sender", 81.83e6),      # classic, not migrated
    ("netperf/ext/netperf_doc_udp_stream.txt", "udp", "tx", "receiver", 2748.50e6),    # its second line
])
def test_netperf_streams_say_whose_count_they_are(rel, kind, direction, side, value):
    p = load(rel)
    assert (p.kind, p.params["direction"]) == (kind, direction)
    assert headline(p) == (f"{side} bit/s", pytest.approx(value, rel=1e-12), "bit/s")


def test_netperf_udp_stream_says_what_did_not_arrive():
    p = load("netperf/ext/netperf_doc_udp_stream.txt")
    # "105672 - 104844 or 828 messages did not make it" (netperf.texi)
    assert (p.totals["tx.receiver.lost"], p.totals["tx.receiver.packets"]) == (828, 105672)
    assert p.params["io_size"] == 32768
    with pytest.raises(InputError, match="the receiver reported 0 bytes while the sender sent"):
        load("netperf/ext/netperf_doc_udp_stream_zero.txt")


def test_a_log_with_a_missing_or_repeated_interval_keeps_its_receiver_summary(capsys, tmp_path):
    """esnet/iperf issue #1351: an iperf3 3.11 server's text, its receiver row 10.5 GBytes
    over 0.00-10.00.  The same log with one interval line lost, and with one printed
    twice (edits of that real file): the summary is still the figure."""
    real = (ROOT / "iperf3-text/ext/iperf3_issue1351_server.txt").read_text()
    p = load("iperf3-text/ext/iperf3_issue1351_server.txt")
    assert (p.role, p.params["direction"]) == ("server", "rx")
    assert headline(p)[1] == pytest.approx(10.5 * 2**30 * 8 / 10.00)
    lost = tmp_path / "lost.txt"
    lost.write_text(real.replace("[  5]   4.00-5.00   sec  1.08 GBytes  9.27 Gbits/sec\n", ""))
    twice = tmp_path / "twice.txt"
    line = "[  5]   6.00-7.00   sec  1.08 GBytes  9.24 Gbits/sec\n"
    twice.write_text(real.replace(line, line + line))
    q = parse_file(lost.read_text(), "lost.txt")
    assert any("missing at 4-5 s" in n for n in q.notes)
    assert not [s for s in q.samples if s.tag("side") == "receiver" and s.tag("whole") != "1"]
    r = parse_file(twice.read_text(), "twice.txt")
    assert any("1 interval line(s) printed twice counted once" in n for n in r.notes)
    # lost: the receiver row; twice: its own intervals, each counted once (the 10.00-10.00 line spans no time)
    each = (1.01 + 1.02 + 1.01 + 1.03 + 6 * 1.08) * 2**30
    for f, value in ((lost, 10.5 * 2**30 * 8 / 10.00), (twice, each * 8 / 10.00)):
        doc = imp(capsys, tmp_path / f.stem, f)
        [pt] = doc["runs"][0]["points"]
        assert pt["value"] == pytest.approx(value / 1e9, rel=1e-9)


def test_fio_terse_lines_match_the_normal_text_beside_them():
    """A fio 3.32 guide's rw run printed as a terse line and as normal text: the
    terse line's figures are the normal text's (issued rwts: total=16398,16393)."""
    p = load("fio/ext/guide_3.32_rw_terse_normal.txt")
    assert (p.format, p.version, p.params["op"], p.params["block_size"]) == ("fio-terse", "3.32", "readwrite", 4096)
    assert (p.totals["read.ios"], p.totals["write.ios"]) == (16398, 16393)
    assert p.totals["read.bytes"] == 65592 * 1024 and p.totals["read.seconds"] == 10.001
    # normal text: read IOPS=1639, BW=6559KiB/s (6716kB/s); clat 50.00th=[133] us, terse 50%=132 us
    got = {a: v for a, v, _ in details(p)}
    assert got["read bytes/s"] == pytest.approx(6716e3, rel=1e-3) and round(got["read IOPS"]) == 1640
    assert p.totals["read.latency.p50"] == pytest.approx(132e-6)
