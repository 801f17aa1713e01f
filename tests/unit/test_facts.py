"""Host facts: the collection script's raw output, recorded on this machine,
turned into facts (pure), stored, compared between hosts and shown."""

import json
import platform
import subprocess
import sys

import pytest
from test_store import info

from conftest import fixture_text
from nicbench.hosts.factparse import parse_facts, sections
from nicbench.hosts.facts import SYSCTLS, script
from nicbench.records import Fact, HostFacts
from nicbench.report.facts import differences, facts_table
from nicbench.store.runs import RunReader, RunWriter
from nicbench.store.schema import MIGRATIONS, SCHEMA_VERSION, migrate


def facts(name, host="h", role="client"):
    return parse_facts(fixture_text("facts", name), host=host, role=role, collected=1.0)


def test_sections_keep_text_and_exit_codes():
    secs = sections(fixture_text("facts", "netns_veth.txt"))
    assert secs["uname"][1] == 0 and secs["uname"][0].startswith("Linux ")
    assert secs["nic eth9"] == ("!no-such-interface", 2)
    assert secs["ethtool-g eth0"][1] != 0                 # veth has no rings
    # a collection cut short (connection dropped mid-script): the open section has no exit code
    cut = sections(
        "@@nicbench-section uname\nLinux x 6.1 #1 x86_64\n@@nicbench-rc 0\n@@nicbench-section os-release\nNAME="
    )
    assert cut["os-release"] == ("NAME=", None)


def test_physical_like_nic_recorded_on_this_vm():
    """virtio-net behind a PCI function: bus address, MSI-X IRQs and their
    affinity, rings, channels, coalescing; NUMA node -1 is unknown, not 0."""
    h = facts("local_virtio.txt", role="local")
    assert h.value("if.eth0.driver") == "virtio_net" and h.value("if.eth0.bus") == "0000:00:03.0"
    assert h.value("if.eth0.irqs") == ["37:virtio2-config", "38:virtio2-input.0", "39:virtio2-output.0"]
    assert h.value("if.eth0.irq_affinity")["virtio2-input.0"] == "0-1"
    assert h.value("if.eth0.ring.rx") == {"current": 256, "max": 256}
    assert h.value("if.eth0.channels.combined") == {"current": 1, "max": 1}
    assert h.value("if.eth0.coalesce.rx-frames") == 1
    assert h.value("if.eth0.offload.tcp-segmentation-offload") == "on"
    assert "tx-tcp-segmentation" not in " ".join(f.key for f in h.facts)  # sub-features are left out
    nn = h.get("if.eth0.numa_node")
    assert nn.value is None and "-1" in nn.unknown
    assert h.get("if.eth0.speed_mbps").value is None and "(-1)" in h.get("if.eth0.speed_mbps").unknown
    assert h.get("if.eth0.pcie.link_width").value is None
    assert h.value("kernel") and h.value("distro").startswith("Debian")
    assert h.value("cpu.count") == 2 and h.value("numa.nodes") == 1 and h.value("mem.total_bytes") > 2**30
    assert h.get("cpu.governor").value is None and "cpufreq" in h.get("cpu.governor").unknown
    assert h.get("tuned.profile").unknown == "tuned is not installed"
    assert h.value("service.irqbalance") == "not running"
    assert h.value("sysctl.net.core.netdev_max_backlog") == 1000
    assert h.value("sysctl.net.ipv4.tcp_rmem") == "4096 131072 33554432"
    assert h.value("tool.iperf3") == "3.12" and h.value("tool.iperf") == "2.1.8"


def test_virtual_devices_say_why_facts_are_unknown():
    h = facts("local_virtio.txt", role="local")
    assert h.get("if.lo.driver").unknown == "ethtool -i: not supported by this driver"
    assert h.get("if.ifb0.ring").unknown == "ethtool -g: not supported by this driver"
    assert h.get("if.ifb0.numa_node").unknown.startswith("virtual device")
    assert h.get("if.ifb0.irqs").unknown.startswith("no IRQs")
    assert h.value("if.ifb0.operstate") == "down"


def test_namespace_host_missing_interface_and_tools():
    h = facts("netns_veth.txt")
    assert h.value("if.eth0.driver") == "veth" and h.value("if.eth0.speed_mbps") == 10000
    assert h.value("if.eth0.channels.rx") == {"current": 1, "max": 2}
    # host-wide sysctls a namespace cannot see are unknown, with the reason
    nb = h.get("sysctl.net.core.netdev_max_backlog")
    assert nb.value is None and "network namespace" in nb.unknown
    assert h.value("sysctl.net.ipv4.tcp_timestamps") == 1
    assert h.get("if.eth9.present").unknown == "no such interface on this host"
    assert h.get("if.eth9.irqs") is None  # said once, under "present"
    assert h.get("if.eth9.driver").unknown == "ethtool -i: no such interface on this host"
    assert h.get("tool.nginx").unknown == "not installed on this host"
    # every fact is either a value or an unknown with its reason
    assert all((f.value is None) != (f.unknown is None) for f in h.facts)


def test_fact_needs_a_value_or_a_reason():
    with pytest.raises(ValueError):
        Fact("k", None)
    with pytest.raises(ValueError):
        Fact("k", 1, "why")


def _with(h: HostFacts, host: str, **changes) -> HostFacts:
    fs = tuple(
        Fact(f.key, changes.get(f.key, f.value), f.unknown, f.source) if f.key in changes else f for f in h.facts
    )
    return HostFacts(host, h.role, h.collected, fs)


def test_differences_within_a_role_ignore_identity_facts():
    base = facts("netns_veth.txt")
    c1 = _with(base, "c1", hostname="a")
    c2 = _with(base, "c2", hostname="b", **{"sysctl.net.ipv4.tcp_timestamps": 0})
    srv = HostFacts("srv", "server", 1.0, _with(base, "srv", **{"if.eth0.mtu": 9000}).facts)
    assert differences([c1, c2, srv]) == {"client": ["sysctl.net.ipv4.tcp_timestamps"]}
    rows = facts_table([c1, c2, srv], summary=True)
    row = next(r for r in rows if r["key"] == "sysctl.net.ipv4.tcp_timestamps")
    assert row["differs"] and row["values"] == {"c1": "1", "c2": "0", "srv": "1"}
    assert not next(r for r in rows if r["key"] == "if.eth0.mtu")["differs"]  # another role
    assert all(not r["key"].startswith("if.eth0.offload.tx-") for r in rows)  # summary only


def test_store_roundtrip_and_migration_from_v1(tmp_path):
    w = RunWriter.create(tmp_path, info())
    h = facts("local_virtio.txt", host="srv", role="server")
    w.write_facts([h])
    w.finish("done")
    r = RunReader(tmp_path / "r1")
    [back] = r.facts()
    assert back == h
    # a run written before facts existed (schema 1) opens, migrates, has none
    import sqlite3

    old = tmp_path / "old.sqlite"
    db = sqlite3.connect(old)
    db.executescript("BEGIN;" + MIGRATIONS[0] + "PRAGMA user_version = 1;")
    assert migrate(db, str(old)) == 1
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert db.execute("SELECT COUNT(*) FROM facts").fetchone()[0] == 0


def test_script_refuses_odd_interface_names_and_lists_every_sysctl():
    with pytest.raises(ValueError):
        script(["eth0; rm -rf /"], [])
    text = script(["eth0"], ["iperf3"])
    assert all(k in text for k in SYSCTLS) and "ethtool -g eth0" in text and "iperf3 --version" in text


def test_facts_command_on_this_machine(tmp_path):
    """The real script on this machine (no root needed): kernel as Python sees it."""
    out = subprocess.run(
        [sys.executable, "-m", "nicbench.cli.main", "facts", "local", "--if", "lo", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    [h] = doc["hosts"]
    got = {f["key"]: f for f in h["facts"]}
    assert got["kernel"]["value"] == platform.release()
    assert got["if.lo.mtu"]["value"] == 65536


def test_facts_command_bad_host_is_one_line(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "nicbench.cli.main", "facts", "nosuchhost", "--lab", "zz9"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode in (2, 4) and out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert "hint:" in out.stderr


def test_the_servers_nic_irqs_come_from_its_facts():
    from nicbench.run.session import nic_irqs

    real = facts("local_virtio.txt", host="srv", role="server")
    veth = facts("netns_veth.txt", host="srv", role="server")
    assert nic_irqs([(real, "")], "srv", "eth0") == {
        "37": "eth0:virtio2-config",
        "38": "eth0:virtio2-input.0",
        "39": "eth0:virtio2-output.0",
    }
    assert nic_irqs([(veth, "")], "srv", "eth0") == {}


def test_other_packet_generators_are_recorded():
    """Kernel pktgen and netmap, recorded on this machine (it has neither);
    an older recording without the check says why it is unknown."""
    h = facts("machine-pktgen-absent.txt", host="machine", role="machine")
    assert h.value("packet.pktgen") == "absent (no /proc/net/pktgen, no module)"
    assert h.value("packet.netmap") == "absent (no /dev/netmap), no pkt-gen"
    old = facts("netns_veth.txt")
    assert old.value("packet.pktgen") is None and old.get("packet.pktgen").unknown
