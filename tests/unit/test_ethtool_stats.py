"""``ethtool -S`` parsed on recorded outputs of six drivers (provenance in
tests/fixtures/SOURCES.md and tests/fixtures/ethtool/README.md), and what the
meaning table makes of each driver's counters."""

from __future__ import annotations

from pathlib import Path

import pytest

from nicbench.core.nicstats import Stat, classify, imbalance
from nicbench.tools.ethtool import stats

FIX = Path(__file__).parents[1] / "fixtures" / "ethtool"


def load(driver: str, name: str) -> dict[str, int]:
    return stats((FIX / driver / name).read_text())


def queues(driver: str, counters: dict[str, int], what: str = "packets") -> dict[tuple[str, int], int]:
    """(direction, queue) -> the sum of the counters the table calls ``what``."""
    out: dict[tuple[str, int], int] = {}
    for name, v in counters.items():
        s = classify(driver, name)
        if s is not None and s.meaning == what and s.queue is not None:
            out[(s.direction, s.queue)] = out.get((s.direction, s.queue), 0) + v
    return out


def meaning(driver: str, counters: dict[str, int], m: str) -> dict[str, int]:
    return {k: v for k, v in counters.items() if (s := classify(driver, k)) is not None and s.meaning == m}


def test_mlx5_one_channel_and_its_ring_pause_and_port_discards():
    c = load("mlx5_core", "lore_xdp_regression_6.5.txt")
    assert len(c) == 108
    assert queues("mlx5_core", c) == {("rx", 0): 7282880}
    assert queues("mlx5_core", c, "bytes") == {("rx", 0): 436973482}
    assert meaning("mlx5_core", c, "ring") == {"rx_out_of_buffer": 534918379, "rx0_buff_alloc_err": 0}
    assert classify("mlx5_core", "rx_out_of_buffer") == Stat("ring", "rx", None)
    assert classify("mlx5_core", "rx0_buff_alloc_err") == Stat("ring", "rx", 0)
    assert set(meaning("mlx5_core", c, "discard")) == {"rx_discards_phy", "rx_prio0_discards",
                                                      "rx_steer_missed_packets", "rx0_oversize_pkts_sw_drop"}
    assert meaning("mlx5_core", c, "pause") == {"tx_pause_ctrl_phy": 44414017, "tx_global_pause": 44414017}
    # a duration is not a count of frames, and XDP's own drops are a program's choice
    assert classify("mlx5_core", "tx_global_pause_duration") is None
    assert classify("mlx5_core", "rx0_xdp_drop") is None


def test_ice_queues_and_its_port_counters():
    c = load("ice", "go_ethtool_metrics_02_sfp_10_or_25g_sr.txt")
    q = queues("ice", c)
    rx = sorted(k[1] for k in q if k[0] == "rx")
    tx = sorted(k[1] for k in q if k[0] == "tx")
    assert rx == list(range(len(rx))) and tx == list(range(len(tx))) and len(rx) >= 2
    assert q[("rx", 0)] == 620059326 and q[("tx", 0)] == 3659792718
    assert meaning("ice", c, "ring") == {"rx_dropped": 3, "rx_dropped.nic": 0}
    assert classify("ice", "link_xoff_rx.nic") == Stat("pause", "rx", None)
    assert classify("ice", "rx_crc_errors.nic") == Stat("error", "rx", None)
    assert meaning("ice", c, "error")["tx_errors"] == 5


def test_i40e_dotted_queue_names():
    c = load("i40e", "go_ethtool_metrics_01_int_tp.txt")
    q = queues("i40e", c)
    assert q[("tx", 0)] == 108004507162 and q[("rx", 0)] == 109838386137
    assert len({k[1] for k in q}) >= 2
    assert classify("i40e", "port.rx_dropped") == Stat("ring", "rx", None)
    assert classify("i40e", "port.link_xoff_rx") == Stat("pause", "rx", None)
    assert classify("i40e", "rx-3.packets") == Stat("packets", "rx", 3)     # the newer spelling


def test_bnxt_rings_keep_their_prefix_and_sum_per_queue():
    c = load("bnxt_en", "go_ethtool_metrics_00_sfp_10gsr85.txt")
    assert c["[0]: rx_ucast_packets"] == 276347403
    q = queues("bnxt_en", c)
    # ucast + mcast + bcast of ring 0, as the driver printed them
    assert q[("rx", 0)] == 276347403 + 1829492 + 30964
    assert q[("tx", 0)] == 5860187670 + 1
    assert classify("bnxt_en", "[3]: rx_discards") == Stat("ring", "rx", 3)
    assert meaning("bnxt_en", c, "pause") == {"rx_pause_frames": 0, "tx_pause_frames": 0, "rx_pfc_frames": 0,
                                              "tx_pfc_frames": 0}
    assert meaning("bnxt_en", c, "discard")["rx_total_discard_pkts"] == 13


def test_virtio_old_and_new_names():
    old = load("virtio_net", "go_ethtool_metrics_01_do_kernel_5_15.txt")
    assert queues("virtio_net", old) == {("rx", 0): 1869634984, ("tx", 0): 2157765149}
    assert meaning("virtio_net", old, "ring") == {"rx_queue_0_drops": 0}
    # 6.10 and later print no per-queue packets in ethtool -S (they moved to netlink queue stats)
    new = load("virtio_net", "local_eth0_6.18.txt")
    assert queues("virtio_net", new) == {}
    assert set(meaning("virtio_net", new, "ring")) == {"rx_drops", "rx0_drops"}
    assert classify("virtio_net", "rx_queue_0_xdp_packets") is None


def test_veth_counts_its_napi_queues_as_packets():
    c = load("veth", "lab_2q_gro.txt")
    assert "peer_ifindex" in c
    q = queues("veth", c)
    # two rx queues, each at 0: these datagrams did not take veth's NAPI path (README.md there)
    assert q == {("rx", 0): 0, ("rx", 1): 0}
    assert load("veth", "lab_2q_idle.txt") == c
    assert classify("veth", "rx_queue_1_xdp_packets") == Stat("packets", "rx", 1)
    assert classify("veth", "rx_queue_1_drops") == Stat("ring", "rx", 1)
    assert classify("veth", "rx_queue_1_xdp_drops") is None
    assert classify("veth", "peer_ifindex") is None


@pytest.mark.parametrize("text, why", [
    ("NIC statistics:\n     rx_packets: 12\n     tx_packets: x1\n", "line 3"),
    ("no stats available\n", "line 1"),
    ("NIC statistics:\n", "no counters"),
    ("", "no counters"),
])
def test_output_not_understood_is_named(text, why):
    with pytest.raises(ValueError, match=why):
        stats(text)


def test_a_name_printed_twice_keeps_both():
    assert stats("NIC statistics:\n  a: 1\n  a: 2\n") == {"a": 1, "a#2": 2}


def test_imbalance_index():
    assert imbalance([100, 100, 100, 100]) == 0
    assert imbalance([400, 0, 0, 0]) == 1
    assert imbalance([75, 25]) == pytest.approx(0.5)
    assert imbalance([5]) is None and imbalance([0, 0]) is None
