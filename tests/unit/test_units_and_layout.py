import pytest

from nicbench.core.units import UnitError, format_size, gbps, parse_size
from nicbench.run.iperf import layout


@pytest.mark.parametrize("text, n", [("512", 512), (512, 512), ("4K", 4096), ("4KiB", 4096),
                                     ("64k", 65536), ("1M", 1 << 20), ("512 KiB", 524288),
                                     ("512B", 512), ("1GiB", 1 << 30)])
def test_parse_size(text, n):
    assert parse_size(text) == n


@pytest.mark.parametrize("bad", ["10 Gb", "4KB/s", "", "-1", 0, "0", True])
def test_parse_size_rejects(bad):
    with pytest.raises(UnitError):
        parse_size(bad)


@pytest.mark.parametrize("text, binary, si", [("8kB", 8192, 8000), ("8KB", 8192, 8000), ("1MB", 1 << 20, 10**6),
                                              ("2GB", 2 << 30, 2 * 10**9)])
def test_kb_is_ambiguous_and_the_error_gives_both_readings(text, binary, si):
    """kB is 1000 B in SI and 1024 B in iperf/fio: refused, never silently one of them."""
    with pytest.raises(UnitError) as e:
        parse_size(text)
    msg = str(e.value)
    assert "ambiguous" in msg and f"for {binary} bytes" in msg and f"or {si} for {si} bytes" in msg


def test_format_size_and_gbps():
    assert [format_size(x) for x in (512, 2048, 524288, 1 << 20, 1000)] == ["512", "2K", "512K", "1M", "1000"]
    assert gbps(1.25e9, 1.0) == pytest.approx(10.0)


def test_layout_total_spreads_evenly():
    slots = layout(12, ["c1", "c2", "c3"], "total", 128, 5201)
    assert [(s.client, s.port, s.streams) for s in slots] == [("c1", 5201, 4), ("c2", 5201, 4), ("c3", 5201, 4)]
    assert sum(s.streams for s in layout(7, ["a", "b", "c"], "total", 128, 5201)) == 7


def test_layout_fewer_connections_than_clients_skips_idle_clients():
    assert [s.client for s in layout(2, ["c1", "c2", "c3"], "total", 128, 5201)] == ["c1", "c2"]


def test_layout_splits_above_the_process_cap():
    slots = layout(300, ["c1"], "total", 128, 5201)
    assert [s.streams for s in slots] == [100, 100, 100]
    assert [s.port for s in slots] == [5201, 5202, 5203]
    per = layout(192, ["c1", "c2"], "client", 128, 6001)
    assert sum(s.streams for s in per) == 384 and all(s.streams <= 128 for s in per)


def test_listening_socket_belongs_to_the_server_process():
    from conftest import fixture_text
    from nicbench.run.procnet import listening, listening_ports, socket_inodes
    table = listening(fixture_text("proc", "net_tcp6_iperf3_listen.txt"))
    mine = socket_inodes(fixture_text("proc", "fd_links_iperf3.txt").split())
    assert 5201 in table and table[5201] & mine            # iperf3's own socket, recorded for real
    assert listening_ports(fixture_text("proc", "net_tcp_empty.txt")) == set()
    assert not (table[5201] & socket_inodes(["socket:[1]", "pipe:[2]"]))  # someone else's listener


def test_a_live_lab_is_compared_with_its_plan_mtu_addresses_and_shaping():
    from nicbench.lab.topology import make_spec, tbf_rate, topology_problems
    spec = make_spec("t", [("srv", "server"), ("c1", "client")], 1500, speed_bps=2e9)
    good = {"srv": {"mtu": 1500, "up": True, "addrs": ["198.18.0.1/24"], "tbf_bps": float(tbf_rate(2e9, 1500)),
                    "port_tbf_bps": float(tbf_rate(2e9, 1500)), "direct": {}},
            "c1": {"mtu": 1500, "up": True, "addrs": ["198.18.0.2/24"], "tbf_bps": None, "port_tbf_bps": None,
                   "direct": {}}}
    assert topology_problems(spec, good) == []
    bad = {"srv": {**good["srv"], "tbf_bps": None}, "c1": {**good["c1"], "mtu": 1400, "addrs": []}}
    problems = topology_problems(spec, bad)
    assert "c1: eth0 has MTU 1400, the plan wants 1500" in problems
    assert any(p.startswith("c1: eth0 does not have 198.18.0.2/24") for p in problems)
    assert any(p.startswith("srv: eth0 is not shaped, the plan wants a tbf of 1969 Mbit/s") for p in problems)
    assert topology_problems(spec, {"srv": good["srv"]}) == ["c1: its namespace nb-t-c1 is gone"]


def test_every_mtu_on_the_lab_path_is_compared_with_the_plan():
    """Both ends of each host's veth and the bridge: a switch port set lower
    than the hosts drops their full-size frames and the point stalls."""
    from nicbench.lab.topology import make_spec, topology_problems
    spec = make_spec("t", [("srv", "server"), ("c1", "client")], 1500)
    host = {"mtu": 1500, "up": True, "tbf_bps": None, "port_tbf_bps": None, "direct": {}, "port_mtu": 1500}
    good = {"srv": {**host, "addrs": ["198.18.0.1/24"]}, "c1": {**host, "addrs": ["198.18.0.2/24"]}}
    assert topology_problems(spec, good, {"mtu": 1500}) == []
    bad = {**good, "c1": {**good["c1"], "port_mtu": 1400}, "srv": {**good["srv"], "port_mtu": None}}
    assert topology_problems(spec, bad, {"mtu": 9000}) == [
        "switch: br0 in nb-t-sw has MTU 9000, the plan wants 1500",
        "srv: its switch port p-srv (in nb-t-sw) is gone",
        "c1: its switch port p-c1 (in nb-t-sw) has MTU 1400, the plan wants 1500"]
