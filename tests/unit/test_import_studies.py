"""Every study's import adapter on real files: ``nicbench import`` -> the
stored run -> the study's own analysis, and the figure the report prints,
computed by hand from the files (the arithmetic beside each case;
tests/fixtures/SOURCES.md says where each file comes from)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nicbench.api import load_run, render
from nicbench.cli.main import main
from nicbench.store.reader import open_run_dir

IMP = Path(__file__).resolve().parents[1] / "fixtures" / "import"
GiB, MiB = 2**30, 2**20


def imported(capsys, tmp_path, *args: object) -> list[dict]:
    """Import into a fresh store; the --json answer's runs."""
    with pytest.raises(SystemExit) as e:
        main(["import", "--json", "--store", str(tmp_path / "store"), *map(str, args)])
    out, err = capsys.readouterr()
    assert e.value.code == 0, err
    return json.loads(out)["runs"]


def one_run(capsys, tmp_path, *args: object):
    [run] = imported(capsys, tmp_path, *args)
    return run, load_run(Path(run["run_dir"]))


# (files and options, study, point, figure as the report prints it (its compare figure), relative tolerance:
# 1e-6 where samples sit on the epoch clock, whose doubles resolve 2.4e-7 s near 1.8e9)
CASES = [
    # a client's forward -J: the receiver's whole-test total, 4260298376 B over end.sum_received 2.001256 s
    ([IMP / "iperf3/local/client_tx_p2_noserver.json"], "tcp", "tx/c2/io128K", 4260298376 * 8 / 2.001256 / 1e9, 1e-6),
    # third party, iperf3 3.9 -O 3: end.streams[0].receiver 112065920 B over 10.277013 s
    ([IMP / "iperf3/ext/cp_tx_omit3.json"], "tcp", "tx/c1/io128K", 112065920 * 8 / 10.277013 / 1e9, 1e-6),
    # iperf3 3.0.11, no sender flags: 1518193248 B over 13.0001 s
    ([IMP / "iperf3/ext/i3py_3.0.11.json"], "tcp", "tx/c1/io128K", 1518193248 * 8 / 13.0001 / 1e9, 1e-6),
    # iperf3 text: receiver line 98.7 MBytes (MiB) over 0.00-10.16 s
    ([IMP / "iperf3-text/ext/cp_text.txt"], "tcp", "tx/c1", 98.7 * MiB * 8 / 10.16 / 1e9, 1e-9),
    # -P 2 text: [SUM] receiver 4.11 GBytes over 2.00 s
    ([IMP / "iperf3-text/local/client_tx_p2.txt"], "tcp", "tx/c2", 4.11 * GiB * 8 / 2.00 / 1e9, 1e-9),
    # iperf 2 CSV, client, one summary line: sender-side 1112670268 B over 0.0-10.0 s
    (["--role", "client", IMP / "iperf2/ext/iperf2_syno4862.csv"], "tcp", "tx/c1", 1112670268 * 8 / 10.0 / 1e9,
     1e-6),
    # iperf 2 -e text cut after 9 intervals: sender-side, (102+111+110+111+112+114+111+113+112) MiB over 9 s
    ([IMP / "iperf2-text/ext/iperf2_pscheduler394_e.txt"], "tcp", "tx/c1",
     (102 + 111 + 110 + 111 + 112 + 114 + 111 + 113 + 112) * MiB * 8 / 9.0 / 1e9, 1e-9),
    # netperf TCP_STREAM: 27175.27 10^6bits/s, at the sender
    ([IMP / "netperf/ext/netperf_doc_tcp_stream.txt"], "tcp", "tx/c1", 27175.27e6 / 1e9, 1e-9),
    # fio 3.33: 100667392 B over runtime 1007 ms = MB/s
    ([IMP / "fio/local/randread_4k.json"], "storage", "read/bs4K", 100667392 / 1.007 / 1e6, 1e-6),
    # fio client/server: "All clients" 198836224 B over 1001 ms
    ([IMP / "fio/local/client_server_2hosts.json"], "storage", "read/bs4K", 198836224 / 1.001 / 1e6, 1e-6),
    # two jobs, runtimes 1003 and 1001 ms, ending together: both jobs' bytes over the longer
    ([IMP / "fio/local/write_64k_json_normal.txt"], "storage", "write/bs64K",
     (2130575360 + 1917845504) / 1.003 / 1e6, 1e-6),
    # wrk: 17.76GB (GiB) read in 30.00s
    ([IMP / "wrk/ext/wrk_readme.txt"], "https", "http/c400", 17.76 * GiB * 8 / 30.00 / 1e9, 1e-9),
    # wrk2 with --latency: 19.81MB (MiB) read in 30.00s
    ([IMP / "wrk/ext/wrk2_readme_latency.txt"], "https", "http/c100", 19.81 * MiB * 8 / 30.00 / 1e9, 1e-9),
    # pkt-gen sending: (908.221+910.273+910.533+910.603) Kpkts over its 4 intervals, 801.259135 .. 805.262718 s
    ([IMP / "pktgen/ext/pktgen_netmap368_tx.txt"], "packets", "pkt-gen/ipv4/p1/t1/64B (sent)",
     (908.221 + 910.273 + 910.533 + 910.603) * 1e3 / (805.262718 - (802.259513 - 1.000378)) / 1e6, 1e-9),
    # pkt-gen receiving: 103 packets over 142.204416 .. 150.213064 s
    ([IMP / "pktgen/ext/pktgen_netmap102_rx.txt"], "packets", "pkt-gen/ipv4/p1/t1/1404B",
     103 / (150.213064 - (143.205469 - 1.001053)) / 1e6, 1e-9),
    # trafgen's summary: 42527020 packets over its longest CPU's 330 s 5228 us, 8 CPUs
    ([IMP / "trafgen/ext/trafgen_netdev_mab.txt"], "packets", "trafgen/ipv4/p1/t8/77B (sent)",
     42527020 / 330.005228 / 1e6, 1e-9),
]


@pytest.mark.parametrize("args, study, point, figure, tol", CASES, ids=[Path(str(c[0][-1])).name for c in CASES])
def test_the_figure_the_report_prints(capsys, tmp_path, args, study, point, figure, tol):
    run, view = one_run(capsys, tmp_path, *args)
    assert run["study"] == view.info.study == study and view.info.source == "import"
    [p] = run["points"]
    assert p["point"] == point and p["value"] == pytest.approx(figure, rel=tol)
    assert [t.status for t in view.trials] == ["ok"]
    index = render(view)
    assert index.exists() and "Imported with" in index.read_text()


def test_a_forward_client_json_is_a_receiver_total_said_in_words(capsys, tmp_path):
    """Issue 15's most common file: no receiver intervals, never a failed point."""
    run, view = one_run(capsys, tmp_path, IMP / "iperf3/local/client_tx_p2_noserver.json")
    [t] = view.trials
    rcv = t.receiver["tx"]
    assert rcv.side == "receiver" and rcv.bytes == 4260298376 and rcv.seconds == pytest.approx(2.001256)
    whole = [s for s in load_samples(view) if s.tag("whole") == "1"]
    assert len(whole) == 1 and whole[0].tag("side") == "receiver"
    # the sender's intervals, per stream 0..1.00003 and 1.000023..2.00041 s (the streams' widest span)
    assert t.sender["tx"].gbps == pytest.approx((2229534720 + 2039480320) * 8 / 2.00041 / 1e9, rel=1e-6)
    assert any("total without intervals" in w and "sender-side" in w for w in view.info.meta["warnings"])
    assert "whole-test total" in run["basis"]["tx/c2/io128K"]
    html = render(view).read_text()
    assert "a total without intervals (per-interval data is sender-side)" in html


def test_both_ends_of_one_test_use_the_servers_own_intervals(capsys, tmp_path):
    run, view = one_run(capsys, tmp_path, IMP / "iperf3/local/client_tx_p2_noserver.json",
                        IMP / "iperf3/local/server_tx_p2.json")
    [t] = view.trials
    # the server's three receiver intervals: 2225209344 + 2033647240 + 1441792 B over 0 .. 2.001256 s
    assert t.gbps == pytest.approx((2225209344 + 2033647240 + 1441792) * 8 / 2.001256 / 1e9)
    assert t.params["connections"] == 2                  # one process pair, not two clients
    assert not any(s.tag("whole") for s in load_samples(view) if s.tag("side") == "receiver")
    assert "tx/c2/io128K" not in run["basis"]
    [rec] = records(view)
    [proc] = rec.meta["processes"].values()
    assert len(proc) == 2


def test_sender_side_only_files_say_so_and_are_not_failed(capsys, tmp_path):
    run, view = one_run(capsys, tmp_path, "--role", "client", IMP / "iperf2/ext/iperf2_syno4862.csv")
    [t] = view.trials
    assert t.status == "ok" and t.receiver["tx"].side == "sender" and records(view)[0].meta["sender_only"] == ["tx"]
    assert "sender-side" in run["basis"]["tx/c1"]
    assert any("sender-side (what was sent, not what arrived)" in w for w in view.info.meta["warnings"])


def test_fio_job_groups_are_two_points_and_keep_their_latency(capsys, tmp_path):
    # fio 2.17, io_bytes KiB: read 1294256 KiB in 10.003 s, then write 393280 KiB in 10.004 s
    run, view = one_run(capsys, tmp_path, IMP / "fio/ext/pkb_pkb-7fb0c9d8-0_fio.json")
    got = {p["point"]: p["value"] for p in run["points"]}
    assert got == {"read/bs16K": pytest.approx(1294256 * 1024 / 10.003 / 1e6),
                   "write/bs16K": pytest.approx(393280 * 1024 / 10.004 / 1e6)}
    read = next(t for t in view.trials if t.point == "read/bs16K")
    # IOPS: 2.x has no total_ios, so the count is its iops field x runtime: 16 KiB each, as the bytes say
    assert read.iops == pytest.approx(read.mb_s * 1e6 / 16384, rel=2e-3)
    [fio] = next(r.meta["fio"] for r in records(view) if r.spec.point == "read/bs16K").values()
    [job] = fio["jobs"].values()
    assert job["read_p99_ns"] == pytest.approx(1352 * 1000)          # clat percentile 99.00 = 1352 us


def test_wrk_latency_percentiles_kept_as_the_runner_keeps_them(capsys, tmp_path):
    run, view = one_run(capsys, tmp_path, IMP / "wrk/ext/wrk2_readme_latency.txt")
    [rec] = records(view)
    [wrk] = rec.meta["wrk"].values()
    # HdrHistogram block: 50% 6.67ms, 90% 9.14ms, 99% 11.18ms
    assert wrk["percentiles_us"] == {"50": 6670, "90": 9140, "99": 11180} and wrk["requests"] == 60018
    assert view.points[0].requests == 60018 and view.points[0].scheme == "http"


def test_non_2xx_responses_fail_the_point_as_in_the_lab_and_keep_its_figures(capsys, tmp_path):
    """Imported as a failed point (issue 28), not refused: wrk's Requests/sec, its
    duration and its error counts stay visible."""
    run, view = one_run(capsys, tmp_path, IMP / "wrk/ext/pkb_wrk2_output_errors.txt")
    [t] = view.trials
    assert t.status == "failed" and "14 of 600 responses were not 2xx/3xx" in (t.error or "")
    # Requests/sec: 10.00, 600 requests in 1.00m
    assert (t.requests, t.bad_status, t.requests_per_s, t.seconds) == (600, 14, 10.00, 60.0)
    [f] = run["failed"]
    assert (f["point"], f["requests_per_s"], f["bad_status"]) == ("https/c2", 10.00, 14)
    [p] = view.points
    assert p.n_failed == 1 and p.requests_per_s == 10.00 and p.bad_status == 14


def test_wrk_requests_per_second_and_duration_are_in_the_report(capsys, tmp_path):
    run, view = one_run(capsys, tmp_path, IMP / "wrk/ext/wrk_readme.txt")
    [p] = view.points
    # wrk's README: "22464657 requests in 30.00s", "Requests/sec: 748868.53"
    assert p.requests_per_s == 748868.53 and p.seconds == 30.0
    html = render(view).read_text()
    assert "requests/s" in html and "748" in html


def test_a_sender_only_packet_point_is_compared_only_as_sent(capsys, tmp_path):
    run, view = one_run(capsys, tmp_path, IMP / "pktgen/ext/pktgen_netmap368_tx.txt")
    [t] = view.trials
    assert t.status == "ok" and t.rx_pps is None and t.tx_pps == pytest.approx(909093.18, rel=1e-6)
    assert run["points"][0]["metric"] == "Mpps sent"
    assert any("what was sent, not what arrived" in w for w in t.warnings)
    assert view.points[0].gbps_l2 is None or view.points[0].frame_size == 64


def load_samples(view):
    r = open_run_dir(view.run_dir)
    try:
        return r.samples()
    finally:
        r.close()


def records(view):
    r = open_run_dir(view.run_dir)
    try:
        return r.trials()
    finally:
        r.close()
