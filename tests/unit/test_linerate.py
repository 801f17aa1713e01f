"""The wire model, checked against the seeds' own numbers."""

import pytest

from nicbench.core import linerate as L


def test_worked_example_of_the_docstring():
    c = L.tcp(400e9, 1500)
    assert (c.payload_per_frame, c.wire_per_frame) == (1448, 1538)
    assert c.goodput_bps / 1e9 == pytest.approx(376.593, abs=0.001)


def test_seed000_378_gbps_at_mtu_1500_needs_tcp_timestamps_off():
    # ~378 Gbps per direction on 400G at MTU 1500 is ABOVE the ceiling with
    # timestamps (376.59) and below it without (379.71): the seed's stack must
    # have run without the 12-byte timestamp option (1460 payload bytes, not 1448).
    with_ts = L.tcp(400e9, 1500, timestamps=True).goodput_bps / 1e9
    without = L.tcp(400e9, 1500, timestamps=False).goodput_bps / 1e9
    assert with_ts < 378 < without
    assert 378 / without == pytest.approx(0.9955, abs=0.001)
    # bidirectional ~744 Gbps against 2 x 379.71
    assert 744 / (2 * without) == pytest.approx(0.980, abs=0.001)


def test_seed002_396_gbps_rx_at_mtu_9000_is_line_rate():
    # seed 002 turned timestamps off (sysctl tcp_timestamps=0): ceiling 396.55 Gbps;
    # 396 RX is 99.86 % of it; 387 TX is 97.6 %.  With jumbo frames the ceiling
    # is 99.1 % of the link, so 396 Gbps is "line rate" in the plainest sense.
    c = L.tcp(400e9, 9000, timestamps=False)
    assert c.goodput_bps / 1e9 == pytest.approx(396.548, abs=0.001)
    assert 396e9 / c.goodput_bps == pytest.approx(0.9986, abs=0.0005)
    assert 387e9 / c.goodput_bps == pytest.approx(0.9759, abs=0.0005)
    assert c.efficiency == pytest.approx(8960 / 9038)


def test_seed003_45_and_54_mpps_against_the_64_byte_line_rate():
    # 64-byte frames at 40G: 40e9 / (84 x 8) = 59.52 Mpps.  One port's 45 Mpps is
    # 75.6 % of line rate; the dual-port 54 Mpps is 27 Mpps per port, 45.4 % --
    # the adapter (PCIe / one CPU), not the wire, limits the dual-port case.
    line = L.frame_rate(40e9, 64)
    assert line / 1e6 == pytest.approx(59.524, abs=0.001)
    assert 45e6 / line == pytest.approx(0.756, abs=0.001)
    assert 27e6 / line == pytest.approx(0.4536, abs=0.001)
    assert L.frame_rate(10e9) / 1e6 == pytest.approx(14.881, abs=0.001)
    assert L.frame_rate(100e9) / 1e6 == pytest.approx(148.81, abs=0.01)
    assert L.frame_rate(400e9) / 1e6 == pytest.approx(595.24, abs=0.01)


SEED004_READ = {2048: 4216, 4096: 4610, 8192: 4731, 16384: 4647, 32768: 4713}


def test_seed004_fcoe_read_mb_per_s_from_2k_is_at_the_40g_ceiling():
    # FCoE at 40G (frames up to 2180 B): per FC frame 88 wire bytes of framing;
    # reads also carry one FCP_RSP frame per I/O.  From 2 KiB the seed's READ MB/s
    # is 92.6 %..99.98 % of the ceiling: "line rate from 2 KB" holds, and nothing is
    # above the ceiling -- which only holds with MB = 10^6 (4731 MiB/s would be 39.7
    # Gbit/s, above the 37.86 Gbit/s the wire allows at 8 KiB).
    for io, mbs in SEED004_READ.items():
        c = L.storage(40e9, 2180, "fcoe", io, op="read")
        assert 0.92 < mbs / c.mb_per_s <= 1.0, (io, mbs, c.mb_per_s)
    c8k = L.storage(40e9, 2180, "fcoe", 8192)
    assert 4731 / c8k.mb_per_s == pytest.approx(0.9998, abs=0.0005)
    assert c8k.goodput_bps < 4731 * 2**20 * 8
    # below 2 KiB the ceiling is I/O-bound, not reached: 512 B reads did 1049 MB/s
    assert 1049 / L.storage(40e9, 2180, "fcoe", 512).mb_per_s < 0.3
    # the 50/50 mix uses both directions: 9423 MB/s at 32 KiB fits under 2 x one way
    assert L.storage(40e9, 2180, "fcoe", 32768, op="readwrite").mb_per_s > 9423


def test_tls_records_cost_22_or_29_bytes():
    base = L.tcp(10e9, 1500)
    t13 = L.tls(10e9, 1500, version="1.3")
    t12 = L.tls(10e9, 1500, version="1.2")
    assert t13.goodput_bps == pytest.approx(base.goodput_bps * 16384 / 16406)
    assert t12.goodput_bps == pytest.approx(base.goodput_bps * 16384 / 16413)


def test_storage_over_tcp_pdus():
    base = L.tcp(10e9, 1500).goodput_bps
    assert L.storage(10e9, 1500, "nbd", 4096).goodput_bps == pytest.approx(base * 4096 / 4112)
    assert L.storage(10e9, 1500, "nbd", 4096, op="write").goodput_bps == pytest.approx(base * 4096 / 4124)
    # iSCSI 32 KiB read with 8 KiB PDUs: 4 x 48-byte headers
    assert L.storage(10e9, 1500, "iscsi", 32768).goodput_bps == pytest.approx(base * 32768 / (32768 + 192))
    assert L.storage(10e9, 1500, "nvme-tcp", 4096).goodput_bps == pytest.approx(base * 4096 / 4120)
    c = L.storage(10e9, 1500, "nbd", 4096)
    assert c.iops == pytest.approx(c.goodput_bps / 8 / 4096)


def test_ipv6_vlan_udp():
    assert L.tcp(10e9, 1500, ip=6).payload_per_frame == 1500 - 40 - 20 - 12
    assert L.tcp(10e9, 1500, vlan=True).wire_per_frame == 1542
    u = L.udp(10e9, 1500)
    assert u.payload_per_frame == 1472 and u.wire_per_frame == 1538
    small = L.udp(10e9, 1500, payload=18)      # 18 + 8 + 20 = 46: exactly the 64-byte minimum
    assert small.wire_per_frame == 84
    assert L.udp(10e9, 1500, payload=1).wire_per_frame == 84   # padded
    assert L.udp(10e9, 1500, payload=18, vlan=True).wire_per_frame == 88      # 18+4+46+4 = 72 > 64
    assert L.udp(10e9, 1500, ip=6).payload_per_frame == 1500 - 40 - 8
    assert L.udp(10e9, 1500, ip=6, payload=1).wire_per_frame == 87            # 14 + (1+8+40) + 4 = 67 > 64



@pytest.mark.parametrize("text, bps", [("10G", 10e9), ("10g", 10e9), ("10 Gb", 10e9), ("10Gbit/s", 10e9),
                                       ("10 Gbits/s", 10e9), ("10GBit/s", 10e9),
                                       ("10000M", 10e9), ("2.5G", 2.5e9), ("400G", 400e9), ("100m", 1e8),
                                       ("1T", 1e12)])
def test_speed_strings_have_one_meaning(text, bps):
    assert L.parse_speed(text) == bps


@pytest.mark.parametrize("bad, why", [("10", "no decimal prefix"), (10, "no unit"), (1e10, "no unit"),
                                      ("100bps", "no decimal prefix"), ("-1G", "not a link speed"),
                                      ("10GB", "bytes"),
                                      ("10GiB", "binary"), ("10Gi", "binary"), ("fast", "not a link speed"),
                                      ("0G", "above zero"), ("", "not a link speed")])
def test_speed_strings_refused_with_the_reason(bad, why):
    with pytest.raises(L.ModelError, match=why):
        L.parse_speed(bad)


@pytest.mark.parametrize("mtu, ip, why", [(575, 4, "below 576"), (1279, 6, "IPv6 minimum link MTU"),
                                          (9217, 4, "above 9216")])
def test_mtu_bounds(mtu, ip, why):
    with pytest.raises(L.ModelError, match=why):
        L.tcp(10e9, mtu, ip=ip)


def test_frame_size_bounds_and_fcoe_mtu():
    with pytest.raises(L.ModelError, match="below the Ethernet minimum of 64"):
        L.frame_rate(10e9, 63)
    with pytest.raises(L.ModelError, match="2158"):
        L.storage(40e9, 1500, "fcoe", 4096)
    # 2180-byte frames need an Ethernet MTU of 2158 (2180 - 14 header - 4 VLAN - 4 FCS)
    assert L.storage(40e9, 2158, "fcoe", 4096).goodput_bps == L.storage(40e9, 2180, "fcoe", 4096).goodput_bps


def test_writes_take_the_best_case_a_peer_allows():
    base = L.tcp(10e9, 1500).goodput_bps
    # iSCSI ImmediateData: a 4K write is one command PDU carrying the data
    assert L.storage(10e9, 1500, "iscsi", 4096, op="write").goodput_bps == pytest.approx(base * 4096 / 4144)
    assert L.storage(10e9, 1500, "iscsi", 4096, digests=True).goodput_bps == pytest.approx(base * 4096 / 4152)
    # NVMe/TCP in-capsule data: the 72-byte capsule carries a 4K write
    assert L.storage(10e9, 1500, "nvme-tcp", 4096, op="write").goodput_bps == pytest.approx(base * 4096 / 4168)
    # larger than one PDU: more 24-byte H2CData headers
    big = L.storage(10e9, 1500, "nvme-tcp", 262144, op="write", max_pdu_data=65536)
    assert big.goodput_bps == pytest.approx(base * 262144 / (262144 + 72 + 3 * 24))
    # FCoE writes carry an FCP_CMND frame (32-byte payload) with the data
    w = L.storage(40e9, 2158, "fcoe", 2048, op="write")
    assert w.goodput_bps == pytest.approx(40e9 * 2048 / (2048 + 88 + 88 + 32))


def test_readwrite_is_twice_the_slower_direction():
    for t in ("nbd", "iscsi", "nvme-tcp"):
        r = L.storage(10e9, 1500, t, 4096, op="read")
        w = L.storage(10e9, 1500, t, 4096, op="write")
        rw = L.storage(10e9, 1500, t, 4096, op="readwrite")
        assert rw.goodput_bps == pytest.approx(2 * min(r.goodput_bps, w.goodput_bps))
        assert "50/50" in rw.notes[-1]


def test_frames_goodput_counts_frame_bytes():
    f = L.frames(10e9, 64)
    assert f.goodput_bps == pytest.approx(f.frames_per_s * 64 * 8)
    assert f.wire_per_frame == 84
