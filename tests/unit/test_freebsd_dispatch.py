"""A FreeBSD host is treated with FreeBSD's sources, chosen by the OS preflight
found (``uname -s``): facts, counters and CPU, the tuning audit, kTLS
evidence; what only Linux has is refused at preflight, naming the host.

No FreeBSD machine runs here.  The hosts are fakes whose commands run the
real nicbench scripts under dash, with ``sysctl``, ``ifconfig``,
``pciconf`` and ``netstat`` replaced by shims printing the recorded FreeBSD
outputs of tests/fixtures/freebsd (provenance in tests/fixtures/SOURCES.md).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from bsdfake import BsdHost, shims
from nicbench.core.errors import PreflightError, ToolError
from nicbench.hosts.facts import collect
from nicbench.hosts.fake import FakeTransport
from nicbench.plan import parse_plan
from nicbench.run.kit import PointSamplers
from nicbench.run.preflight import os_problems
from nicbench.sampling.sampler import NetTarget
from nicbench.studies.https import freebsd as https_bsd
from nicbench.tuning.apply import apply
from nicbench.tuning.audit import audit
from nicbench.tuning.profile import Profile
from nicbench.tuning.types import Target

F = Path(__file__).parent.parent / "fixtures" / "freebsd"
pytestmark = pytest.mark.skipif(shutil.which("dash") is None, reason="dash is not installed")


@pytest.fixture
def bsd(tmp_path: Path) -> BsdHost:
    cp = (F / "12.2-STABLE" / "kern.cp_times-excerpt.txt").read_text().split(":", 1)[1].strip()
    n = tmp_path / "n"
    d = shims(tmp_path / "bin", {
        "uname": 'case "$1" in -s) echo FreeBSD;; *) exit 127;; esac\n',
        "sysctl": f"""case "$*" in
  '-n kern.cp_times') echo '{cp}';;
  'kern.clockrate') cat '{F / 'misc' / 'kern.clockrate.txt'}';;
  'hw kern.ipc net.inet.tcp kern.clockrate') cat '{F / 'misc' / 'kern.clockrate.txt'}';;
  '-n hw.usb.no_pf') echo 1;;
  '-TN hw.usb.no_pf') echo hw.usb.no_pf;;
  '-n dev.ixl.0.iflib.use_logical_cores') echo 1;;
  '-TN dev.ixl.0.iflib.use_logical_cores') echo dev.ixl.0.iflib.use_logical_cores;;
  '-n kern.ipc.maxsockbuf') echo 2097152;;
  '-WN kern.ipc.maxsockbuf') echo kern.ipc.maxsockbuf;;
  *) exit 1;;
esac
""",
        # two recorded netstat -ibdn of one host, later and earlier: the counters move between reads
        "netstat": f"""[ "$1" = -I ] || exit 1
c=$(cat '{n}' 2>/dev/null || echo 0); echo $((c + 1)) > '{n}'
if [ $((c % 2)) = 0 ]; then cat '{F / '14' / 'netstat-ibdn-vtnet.txt'}'
else cat '{F / '14' / 'netstat-ibdn-vtnet-lo1.txt'}'; fi
""",
        "ifconfig": f"cat '{F / '14' / 'ifconfig-a-vtnet.txt'}'\n",
        "pciconf": f"cat '{F / '13.1-STABLE' / 'pciconf-lvbc-supermicro-excerpt.txt'}'\n",
        "freebsd-version": "exit 127\n",
    })
    (tmp_path / "boot").mkdir()
    shutil.copy(F / "misc" / "loader.conf.local-x710", tmp_path / "boot" / "loader.conf.local")
    return BsdHost("bsd1", d, tmp_path)


def test_facts_come_from_freebsd_tools(bsd):
    facts, raw = collect(bsd, "server", ["vtnet0"], ["iperf3"])
    assert "freebsd-version" in bsd.commands[0][2] and "/proc/" not in bsd.commands[0][2]
    assert facts.value("os") == "FreeBSD"
    assert facts.value("if.vtnet0.mtu") == 1500 and facts.value("if.vtnet0.offload.TSO4") == "on"
    assert facts.value("if.vtnet0.media") == "Ethernet autoselect (10Gbase-T <full-duplex>)"
    assert facts.value("if.vtnet0.driver") == "vtnet"
    assert "pciconf lists no vtnet0" in (facts.get("if.vtnet0.device").unknown or "")   # type: ignore[union-attr]
    assert facts.value("sysctl.kern.clockrate") == "{ hz = 1000, tick = 1000, profhz = 8128, stathz = 127 }"
    assert facts.value("loader.hw.usb.no_pf") == 1 and facts.value("loader.dev.ixl.0.iflib.use_logical_cores") == 1
    assert facts.value("kernel") is None and "uname" in (facts.get("kernel").unknown or "")   # no uname -r shim
    assert facts.get("tool.iperf3") is not None         # (the version of this machine's iperf3: the shims stop there)
    # a Linux host gets the Linux script, as before
    lin = FakeTransport("lin1")
    with pytest.raises(ToolError, match="printed nothing usable"):      # (the fake answers nothing)
        collect(lin, "client", ["eth0"], [])
    assert "/sys/class/net" in lin.commands[0][2] and "freebsd-version" not in lin.commands[0][2]


def test_cpu_and_interface_counters_come_from_the_sampler_on_the_host(bsd):
    """kern.cp_times (in stathz ticks) and netstat -I, stamped by the host: no
    per-process reads are asked of a FreeBSD host (it has no /proc)."""
    ps = PointSamplers("tr1", [NetTarget("bsd1", bsd, lambda: [], "vtnet0")], bsd, lambda: [(4242, "bsd1", "x", "x")],
                       machine="bsd1", nic_irqs={}, net_interval=0.2, cpu_interval=0.2)
    ps.start(first_read=True)
    time.sleep(1.2)
    ps.last_read()
    meta: dict = {}
    samples = ps.stop(meta)
    assert "counters_missing" not in meta, meta
    hs = meta["host_sampling"]["bsd1"]
    assert (hs["os"], hs["clock"]) == ("FreeBSD", "real_s") and hs["reads"] >= 4
    cpu = [s for s in samples if s.metric == "cpu.time"]
    assert {s.tag("cpu") for s in cpu} == {str(i) for i in range(13)}          # the 13 recorded CPUs
    assert all(s.tag("state") != "iowait" for s in cpu)                           # no Linux-only state invented
    rx = [s for s in samples if s.metric == "if.bytes" and s.tag("direction") == "rx"]
    assert rx and {s.value for s in rx} >= {15901987 - 46746}                      # the two recorded reads apart
    assert not [c for c in bsd.commands if "pid" in " ".join(c[3:])]


def test_the_tuning_audit_reads_sysctl_and_loader_conf_and_never_applies(bsd):
    profile = Profile.model_validate({"settings": [
        {"kind": "sysctl", "key": "hw.usb.no_pf", "value": 1},
        {"kind": "sysctl", "key": "dev.ixl.0.iflib.use_logical_cores", "value": 0},
        {"kind": "sysctl", "key": "kern.ipc.maxsockbuf", "value": 16777216},
        {"kind": "sysctl", "key": "net.core.rmem_max", "value": 4194304},
        {"kind": "governor", "value": "performance"}]})
    t = Target("bsd1", "server", bsd, "bsd-bsd1", "vtnet0")
    rows = {r.setting: r for r in audit(profile, [t]).rows}
    assert rows["sysctl hw.usb.no_pf"].status == "ok" and "loader.conf sets 1" in rows["sysctl hw.usb.no_pf"].note
    lc = rows["sysctl dev.ixl.0.iflib.use_logical_cores"]
    assert (lc.status, lc.current, lc.scope) == ("differs", "1", "loader")
    assert lc.note == ("loader tunable dev.ixl.0.iflib.use_logical_cores = 1 in loader.conf, the plan wants 0 "
                       "(takes effect at the next boot); nicbench does not write loader.conf")
    assert rows["sysctl kern.ipc.maxsockbuf"].status == "differs" and rows["sysctl kern.ipc.maxsockbuf"].scope == "host"
    assert rows["sysctl net.core.rmem_max"].status == "unsupported"           # a Linux key: not in this kernel
    assert rows["governor"].status == "unsupported" and "Linux" in rows["governor"].note
    with pytest.raises(PreflightError, match="FreeBSD host.*bsd1.*only audits"):
        apply(profile, [t])
    assert not [c for c in bsd.commands if "sysctl" in " ".join(c) and "=" in " ".join(c[3:])]   # nothing written


def test_ktls_evidence_from_the_session_gauges(bsd):
    has, why = https_bsd.kernel_tls(bsd)
    assert not has and "kern.ipc.tls.enable is absent" in why
    ev = https_bsd.TlsDuringPoint(bsd)
    ev.read_in(0.0)
    e = ev.evidence()
    assert e.mode == "unknown"                                                   # no kern.ipc.tls on this fake
    assert https_bsd.verdict("https", e, kernel_has_tls=False, why=why).startswith("not in use (kernel kTLS off")


PACKETS = """name = "p"
[hosts.gen]
role = "server"
ssh = "gen.example"
test_ip = "192.0.2.1"
[hosts.sink]
role = "client"
ssh = "sink.example"
test_ip = "192.0.2.2"
[study]
kind = "packets"
engines = ["nbgen", "trafgen"]
interfaces = { gen = ["ix0"], sink = ["ix0"] }
"""


def test_what_only_linux_has_is_a_preflight_problem_naming_the_host():
    plan = parse_plan(PACKETS)
    got = os_problems(plan, {"gen": "FreeBSD", "sink": "Linux"})
    assert got == ["gen: a FreeBSD host, but the packets study would run nbgen (an XDP / AF_XDP generator), "
                   "trafgen (netsniff-ng, AF_PACKET) there, which need Linux"]
    assert "XDP receiver" in os_problems(plan, {"gen": "Linux", "sink": "FreeBSD"})[0]
    tcp = parse_plan(PACKETS.replace('kind = "packets"\nengines = ["nbgen", "trafgen"]\n'
                                     'interfaces = { gen = ["ix0"], sink = ["ix0"] }\n', ""))
    # the study server runs iperf3's clients on FreeBSD; a client host runs its servers, watched through /proc
    assert os_problems(tcp, {"gen": "FreeBSD", "sink": "Linux"}) == []
    assert os_problems(tcp, {"gen": "FreeBSD", "sink": "FreeBSD"}) == [
        "sink: a FreeBSD host, but the tcp study would run iperf3 engine servers (nicbench watches their sockets "
        "through Linux's /proc) there, which need Linux"]
    nb = parse_plan(PACKETS.replace('kind = "packets"\nengines = ["nbgen", "trafgen"]\n'
                                    'interfaces = { gen = ["ix0"], sink = ["ix0"] }\n', 'engine = "nbperf"\n'))
    assert os_problems(nb, {"gen": "FreeBSD", "sink": "Linux"}) == [
        "gen: a FreeBSD host, but the tcp study would run nbperf (epoll, eventfd, Linux's TCP_INFO) there, "
        "which need Linux"]
