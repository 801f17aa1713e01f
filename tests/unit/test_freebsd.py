"""FreeBSD parsers on recorded real FreeBSD outputs (tests/fixtures/SOURCES.md,
section FreeBSD), and the host sampler's FreeBSD branch driven by those
outputs.  No FreeBSD machine runs here."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from nicbench.core.errors import ToolError
from nicbench.hosts.factparse_freebsd import (
    KtlsEvidence,
    audit_loader,
    ktls_evidence,
    parse_dev_sysctl,
    parse_ifconfig,
    parse_loader_conf,
    parse_pciconf,
    parse_sysctl,
)
from nicbench.sampling.freebsd import parse_clockrate, parse_cp_times, parse_netstat_i
from nicbench.sampling.hostrecords import clock_map, parse_reads, parse_stream, sampler_argv
from nicbench.sampling.netdev import delta
from nicbench.sampling.procstat import cpu_deltas

F = Path(__file__).parent.parent / "fixtures" / "freebsd"


def test_netstat_ibdn_link_rows_carry_the_counters():
    ifs = parse_netstat_i((F / "14" / "netstat-ibdn-vtnet.txt").read_text())
    assert set(ifs) == {"vtnet0", "lo0"}                    # address rows are not interfaces
    v = ifs["vtnet0"].values
    assert (v["rx_packets"], v["rx_bytes"], v["tx_packets"], v["tx_bytes"], v["tx_drop"]) == (579, 46746, 210,
                                                                                             26242, 0)
    later = parse_netstat_i((F / "14" / "netstat-ibdn-vtnet-lo1.txt").read_text())
    assert set(later) == {"vtnet0", "lo0", "lo1"}
    assert delta(v["rx_bytes"], later["vtnet0"]["rx_bytes"]) == 15901987 - 46746


def test_netstat_ndi_without_bytes_and_a_down_interface():
    ifs = parse_netstat_i((F / "16.0-CURRENT" / "netstat-ndi-apu2.txt").read_text())
    assert set(ifs) == {"igb0", "igb1", "igb2", "enc0", "lo0"}          # "enc0*": down, star dropped
    assert ifs["igb1"].values == {"rx_packets": 77816389, "rx_errs": 0, "rx_drop": 0, "tx_packets": 2,
                                  "tx_errs": 0, "tx_colls": 0, "tx_drop": 0}
    assert "rx_bytes" not in ifs["igb1"].values                          # not asked (-b): absent, not zero


def test_netstat_i_refuses_what_it_cannot_read():
    with pytest.raises(ToolError, match="no header"):
        parse_netstat_i("netstat: kvm not available\n")
    with pytest.raises(ToolError, match="does not know: Ihw"):
        parse_netstat_i("Name Mtu Network Address Ipkts Ihw\n")


def test_cp_times_per_cpu_in_stathz_ticks():
    cpus = parse_cp_times((F / "12.2-STABLE" / "kern.cp_times-excerpt.txt").read_text())
    assert len(cpus) == 14 and cpus["0"].ticks == {"user": 119169, "nice": 344788, "system": 336514,
                                                   "irq": 125390, "idle": 896317803}
    assert cpus["all"].ticks["idle"] == sum(c.ticks["idle"] for k, c in cpus.items() if k != "all")
    hz = parse_clockrate((F / "misc" / "kern.clockrate.txt").read_text())
    assert hz == {"hz": 1000, "tick": 1000, "profhz": 8128, "stathz": 127}
    # one CPU 127 ticks later: one second at stathz, and no Linux-only state invented
    later = {k: v for k, v in cpus.items()}
    t = dict(cpus["3"].ticks)
    t["idle"] += 127
    later["3"] = type(cpus["3"])("3", t)
    d = cpu_deltas(cpus, later, hz=hz["stathz"])["3"]
    assert d["idle"] == pytest.approx(1.0) and "iowait" not in d and "softirq" not in d


def test_cp_times_drops_cpus_that_do_not_run_and_refuses_a_torn_list():
    text = (F / "12.2-STABLE" / "kern.cp_times-excerpt.txt").read_text().strip() + " 0 0 0 0 0" * 3
    assert len(parse_cp_times(text)) == 14                 # the absent CPUs' zero blocks are not CPUs
    with pytest.raises(ToolError, match="not a multiple of 5"):
        parse_cp_times("kern.cp_times: 1 2 3 4 5 6")


def test_pciconf_devices_and_their_pcie_links():
    devs = {d.name: d for d in parse_pciconf((F / "13.1-STABLE" / "pciconf-lvbc-supermicro-excerpt.txt").read_text())}
    t6 = devs["t6nex0"]
    assert (t6.driver, t6.selector, t6.vendor_id, t6.device_id) == ("t6nex", "pci0:2:0:4", "0x1425", "0x6408")
    assert t6.device == "T62100-SO-CR Unified Wire Ethernet Controller" and t6.link_width == (16, 16)
    assert devs["ix1"].link_speed == (5.0, 5.0) and devs["ix1"].link_width == (8, 8)
    assert devs["none77"].driver is None and devs["none77"].class_name == "mass storage"
    old = parse_pciconf((F / "misc" / "dpdk-pciconf-l-t5nex.txt").read_text())[0]   # card=/chip= form
    assert (old.name, old.vendor_id, old.device_id) == ("t5nex0", "0x1425", "0x5401")


def test_ifconfig_flags_offloads_media_and_addresses():
    ifs = parse_ifconfig((F / "14" / "ifconfig-a-vtnet.txt").read_text())
    v = ifs["vtnet0"]
    assert v.mtu == 1500 and "LOWER_UP" in v.flags and {"TSO4", "TSO6", "LRO"} <= set(v.options)
    assert v.media == "Ethernet autoselect (10Gbase-T <full-duplex>)" and v.status == "active"
    assert v.inet == ["140.211.10.91"] and v.inet6[0] == "fe80::f816:3eff:feba:3e25"
    hb = parse_ifconfig((F / "handbook" / "ifconfig-dc.txt").read_text())
    assert hb["dc1"].status == "no carrier" and hb["lo0"].mtu == 16384 and hb["lo0"].options == ["RXCSUM", "TXCSUM"]
    with pytest.raises(ToolError, match="no interface"):
        parse_ifconfig("ifconfig: interface ix9 does not exist\n")


def test_sysctl_and_driver_attributes():
    fw = parse_dev_sysctl((F / "misc" / "dpdk-sysctl-t5nex-firmware.txt").read_text())
    assert fw == {"t5nex.0": {"firmware": "1.25.6.0"}}
    cpu = parse_dev_sysctl((F / "misc" / "sysctl-dev.cpu.0.txt").read_text())["cpu.0"]
    assert (cpu["desc"], cpu["driver"], cpu["parent"], cpu["location"]) == ("ACPI CPU", "cpu", "acpi0",
                                                                             "handle=\\_PR_.PR00")
    assert cpu["freq"] == "3600" and cpu["pnpinfo"] == "_HID=none _UID=0"
    assert parse_sysctl((F / "misc" / "kern.clockrate.txt").read_text()) == {
        "kern.clockrate": "{ hz = 1000, tick = 1000, profhz = 8128, stathz = 127 }"}


def test_loader_conf_is_read_and_audited_never_written():
    conf = parse_loader_conf((F / "misc" / "loader.conf.local-x710").read_text())
    assert conf["hw.usb.no_pf"] == "1"                         # the tab + comment after the value
    assert conf["dev.ixl.0.iflib.use_logical_cores"] == "1" and conf["fib_dxr_load"] == "YES"
    assert parse_loader_conf((F / "misc" / "dpdk-loader.conf").read_text())["hw.contigmem.num_buffers"] == "2"
    problems = audit_loader(conf, {"hw.ixl.flow_control": "0", "machdep.hyperthreading_intr_allowed": "0",
                                   "kern.ipc.tls.enable": "1"}, host="dut1")
    assert len(problems) == 2 and all(p.startswith("dut1: loader tunable") for p in problems)
    assert any("kern.ipc.tls.enable is not set" in p and "does not write loader.conf" in p for p in problems)
    with pytest.raises(ToolError, match="line 1 is not name=value"):
        parse_loader_conf("hw.cxgbe.nrxq 32\n")


def test_ktls_evidence_from_the_session_gauges():
    """Sysctl names from sys/kern/uipc_ktls.c; no recorded kern.ipc.tls output of a FreeBSD host using
    kTLS was found, so this checks the decision, not a parser of such output."""
    base = {"kern.ipc.tls.stats.offload_total": "10", "kern.ipc.tls.sw.gcm": "0", "kern.ipc.tls.ifnet.gcm": "0"}
    assert ktls_evidence(base, {**base, "kern.ipc.tls.stats.offload_total": "42",
                                "kern.ipc.tls.ifnet.gcm": "32"}).mode == "ifnet"
    assert ktls_evidence(base, {**base, "kern.ipc.tls.stats.offload_total": "12",
                                "kern.ipc.tls.sw.gcm": "2"}).mode == "sw"
    assert ktls_evidence(base, dict(base)) == KtlsEvidence("none", "0 session(s) set up; active: sw 0, ifnet 0, toe 0")
    assert ktls_evidence({}, {}).mode == "unknown"


# -- the sampler's FreeBSD branch, on the recorded outputs ---------------------------

@pytest.mark.skipif(shutil.which("dash") is None, reason="dash is not installed")
def test_the_sampler_freebsd_branch_frames_recorded_outputs(tmp_path):
    """uname, sysctl and netstat replaced by scripts that print the recorded
    FreeBSD outputs (date is this machine's own): the FreeBSD branch of the
    awk program runs for real under dash and its stream parses."""
    cp = (F / "12.2-STABLE" / "kern.cp_times-excerpt.txt").read_text().split(":", 1)[1].strip()
    shims = {
        "uname": "#!/bin/sh\necho FreeBSD\n",
        "sysctl": "#!/bin/sh\n"
                  f"case \"$*\" in '-n kern.cp_times') echo '{cp}';; "
                  f"'kern.clockrate') cat '{F / 'misc' / 'kern.clockrate.txt'}';; *) exit 1;; esac\n",
        "netstat": f"#!/bin/sh\n[ \"$*\" = -ibdn ] && exec cat '{F / '14' / 'netstat-ibdn-vtnet.txt'}'; exit 1\n",
    }
    for name, body in shims.items():
        (tmp_path / name).write_text(body)
        (tmp_path / name).chmod(0o755)
    argv = sampler_argv(0.1, 1, ["cpu", "net"], shell="dash")
    # the script puts the system directories first on PATH: run it with its PATH line pointing at the shims
    script = argv[2].replace("PATH=/usr/local/sbin:", f"PATH={tmp_path}:/usr/local/sbin:")
    env = dict(os.environ, PATH=f"{tmp_path}:{os.environ['PATH']}")
    p = subprocess.Popen(["dash", "-c", script, *argv[3:]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True, env=env, start_new_session=True)
    out = p.stdout.read()  # type: ignore[union-attr]        # stdin stays open: it stops at its deadline
    p.wait(timeout=20)
    p.stdin.close()  # type: ignore[union-attr]
    s = parse_stream(out, "bsd1")
    assert (s.os, s.clock, s.resolution) == ("FreeBSD", "real_s", 1e-9) and s.end == "deadline" and not s.problems
    reads = parse_reads(s)
    assert reads and reads[0].cpu_hz == 127 and len(reads[0].cpu or {}) == 14
    assert (reads[0].net_dev or {})["vtnet0"]["rx_bytes"] == 46746
    assert clock_map(s, 0.0, 0.0).shift == 0.0
