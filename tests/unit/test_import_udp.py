"""The UDP study's import adapter on real files (tests/fixtures/SOURCES.md and
tests/fixtures/import/capture_local.sh say where each comes from): ``nicbench
import`` -> the stored run -> the UDP study's own analysis, each figure
computed by hand from the file (the arithmetic beside each case)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES
from conftest import run_cli as nb
from nicbench.api import load_run
from nicbench.studies.udp.analysis import UdpTrial

IMP = FIXTURES / "import"
KiB, MiB = 2**10, 2**20


def one_trial(capsys, tmp_path: Path, *args: object) -> UdpTrial:
    code, out, err = nb(capsys, "import", "--json", "--store", tmp_path / "store", *args)
    assert code == 0, err
    [run] = json.loads(out)["runs"]
    assert run["study"] == "udp"
    view = load_run(Path(run["run_dir"]))
    [t] = view.trials
    assert isinstance(t, UdpTrial) and t.status == "ok", (t.status, t.error)
    return t


def test_an_iperf3_client_json_with_the_servers_report(capsys, tmp_path):
    # iperf3 3.12 -u -b 50M -l 1400 -J --get-server-output: the server's intervals 6245400 + 6249600 B
    # over 0 .. 2.000083 s, 8925 datagrams of 1400 B, none lost; -b is per stream (1 stream)
    t = one_trial(capsys, tmp_path, IMP / "iperf3/local/client_udp_gso.json")
    assert t.point == "tx/c1/s1/50M/1400B" and t.size == 1400 and t.params["rate_bps"] == 50e6
    assert t.gbps == pytest.approx((6245400 + 6249600) * 8 / 2.000083 / 1e9, rel=1e-6)
    assert t.datagrams_per_s == pytest.approx((6245400 + 6249600) / 1400 / 2.000083, rel=1e-6)
    r = t.directions["tx"]
    assert r.expected == pytest.approx(4461 + 4464) and r.lost == 0 and t.loss == 0
    assert r.jitter_max_s == pytest.approx(0.008670246891312804e-3)


def test_both_ends_of_one_iperf3_test_are_one_point(capsys, tmp_path):
    t = one_trial(capsys, tmp_path, IMP / "iperf3/local/client_udp_gso.json", IMP / "iperf3/local/server_udp.json")
    assert t.point == "tx/c1/s1/50M/1400B"
    assert t.gbps == pytest.approx((6245400 + 6249600) * 8 / 2.000083 / 1e9, rel=1e-6) and t.loss == 0


def test_an_iperf2_server_csv_tells_its_datagram_size_by_its_exact_totals(capsys, tmp_path):
    # iperf 2.1.8 server -u -y C: intervals 1312710 + 1311240 B over 0.0-2.0 s; its summary 2626890 B in
    # 1787 datagrams, 0 lost: 1470 B each; no offered rate in a server's CSV
    t = one_trial(capsys, tmp_path, IMP / "iperf2/local/server_udp_e.csv")
    assert t.point == "tx/c1/s1/unknown/1470B" and t.size == 1470
    assert t.gbps == pytest.approx((1312710 + 1311240) * 8 / 2.0 / 1e9, rel=1e-6)
    assert t.directions["tx"].expected == pytest.approx(893 + 892) and t.loss == 0


def test_an_iperf2_client_text_uses_its_server_report(capsys, tmp_path):
    # "Sending 1470 byte datagrams"; Server Report: 2.51 MBytes over 0.0000-2.0020 s, 0/1787 lost
    t = one_trial(capsys, tmp_path, IMP / "iperf2-text/local/client_udp_e.txt")
    assert t.point == "tx/c1/s1/unknown/1470B"
    assert t.gbps == pytest.approx(2.51 * MiB * 8 / 2.002 / 1e9, rel=1e-9)
    assert t.directions["tx"].expected == 1787 and t.loss == 0


def test_a_third_party_iperf3_text_with_the_size_given(capsys, tmp_path):
    # esnet/iperf issue 909 (iperf3 3.7): receiver 399 KBytes (KiB) over 0.00-3.00 s, 0/25 lost, 0.019 ms;
    # its datagrams are 16332 B (its own warning says so; the text's figures cannot tell it exactly)
    code, _, err = nb(capsys, "import", "--store", tmp_path / "s", IMP / "iperf3-text/ext/iperf3_issue909_udp.txt")
    assert code == 2 and "--io-size" in err and "iperf3_issue909_udp.txt" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "s").exists()
    t = one_trial(capsys, tmp_path, "--io-size", "16332", IMP / "iperf3-text/ext/iperf3_issue909_udp.txt")
    assert t.point == "tx/c1/s1/unknown/16332B" and t.fragments == 12
    assert t.gbps == pytest.approx(399 * KiB * 8 / 3.00 / 1e9, rel=1e-9)
    assert t.datagrams_per_s == pytest.approx(399 * KiB / 16332 / 3.00, rel=1e-9)
    assert t.directions["tx"].expected == 25 and t.loss == 0
    assert t.directions["tx"].jitter_s == pytest.approx(0.019e-3)


@pytest.mark.parametrize("path", [IMP / "iperf2/local/client_udp_plain.csv",
                                  FIXTURES / "iperf2/2.1.8/client_udp.csv"])
def test_a_sender_only_udp_file_is_refused_saying_how_to_get_the_receivers_report(capsys, tmp_path, path):
    code, out, err = nb(capsys, "import", "--store", tmp_path / "s", path)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert path.name in err and "receiver's report" in err
    assert "--get-server-output" in err and "Server Report" in err
    assert not (tmp_path / "s").exists()
