"""cpuset pinning on FreeBSD hosts: the NIC's NUMA domain and its CPUs from
the facts, ``cpuset -l LIST`` as the tools' launch prefix, and what applying a
profile may do there.

No FreeBSD machine runs here: the hosts are fakes running the real facts
script under dash with shims.  ``vm.ndomains`` is a recorded output
(tests/fixtures/freebsd/numa, SOURCES.md).  No recorded ``cpuset -g -d N``
or ``dev.X.N.%domain`` output was found: those shim lines are written in the
format of FreeBSD's own source (bin/cpuset/cpuset.c ``printaffinity``;
sys/kern/subr_bus.c ``device_sysctl_init``), and the ``pid -1 mask: `` /
``pid -1 domain`` prefixes of ``cpuset -g`` are the ones BastilleBSD's
scripts strip from the real command's output.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bsdfake import BsdHost, shims, sockstat14
from nicbench.core.errors import PreflightError, ToolError
from nicbench.hosts.facts import collect
from nicbench.hosts.fake import FakeHosts, FakeTransport, Script
from nicbench.hosts.numa_freebsd import cpu_list, domain_cpus, parse_cpuset_masks
from nicbench.hosts.spec import HostSpec, HostsSpec
from nicbench.plan import parse_plan
from nicbench.run.kit import PointEnv
from nicbench.studies.https.runner import HttpsRunner
from nicbench.tools import nginx
from nicbench.tuning.apply import apply
from nicbench.tuning.audit import audit
from nicbench.tuning.profile import Profile
from nicbench.tuning.types import Target

F = Path(__file__).parent.parent / "fixtures" / "freebsd"
pytestmark = pytest.mark.skipif(shutil.which("dash") is None, reason="dash is not installed")

# cpuset.c printaffinity(): "%s %jd%s mask: " then the CPUs joined by ", "
TWO_DOMAINS = {0: ", ".join(map(str, range(12))), 1: ", ".join(map(str, range(12, 24)))}


def test_cpuset_g_lines_are_read_by_target_and_anything_else_is_refused():
    text = ("pid -1 mask: 0, 1, 2, 3\n"
            "pid -1 domain policy: first-touch mask: 0, 1\n"
            "domain 1 mask: 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23\n")
    got = parse_cpuset_masks(text)
    assert got == {"pid -1": [0, 1, 2, 3], "domain 1": list(range(12, 24))}   # the policy line is not a CPU mask
    assert cpu_list(got["domain 1"]) == "12-23" and cpu_list([0, 2, 3, 4, 9]) == "0,2-4,9"
    with pytest.raises(ToolError, match="cannot read 'cpuset: getaffinity: Invalid argument'"):
        parse_cpuset_masks("cpuset: getaffinity: Invalid argument\n")
    with pytest.raises(ToolError, match="no CPUs listed for domain 1 of 2"):
        domain_cpus("domain 0 mask: 0, 1\n", 2)


def numa_host(tmp_path: Path, *, ndomains_file: Path | None, domains: dict[int, str], nic_domain: int | None,
              cpuset: bool = True) -> BsdHost:
    """A FreeBSD fake whose vtnet0 sits in ``nic_domain`` (None: no %domain)."""
    nd = (f"'-n vm.ndomains') sed 's/^vm.ndomains: //' '{ndomains_file}';;" if ndomains_file
          else "'-n vm.ndomains') echo 1;;")
    dev = "'dev.vtnet.0') echo 'dev.vtnet.0.%desc: VirtIO Networking Adapter'" + (
        f"; echo 'dev.vtnet.0.%domain: {nic_domain}';;" if nic_domain is not None else ";;")
    cases = "\n".join(f"  '-g -d {d}') echo 'domain {d} mask: {cpus}';;" for d, cpus in domains.items())
    bins = {
        "uname": 'case "$1" in -s) echo FreeBSD;; *) exit 127;; esac\n',
        "sysctl": f"""case "$*" in
  'hw kern.ipc net.inet.tcp kern.clockrate') cat '{F / 'misc' / 'kern.clockrate.txt'}'; echo 'hw.ncpu: 24';;
  {nd}
  {dev}
  *) exit 1;;
esac
""",
        "ifconfig": f"cat '{F / '14' / 'ifconfig-a-vtnet.txt'}'\n",
        "pciconf": "exit 1\n", "freebsd-version": "exit 127\n",
    }
    if cpuset:
        bins["cpuset"] = f'case "$*" in\n{cases}\n  *) exit 1;;\nesac\n'
    (tmp_path / "boot").mkdir(parents=True, exist_ok=True)
    return BsdHost("bsd1", shims(tmp_path / "bin", bins), tmp_path)


def pinning(**kw: object) -> Profile:
    return Profile.model_validate({"audit_only": True, "settings": [{"kind": "pinning", **kw}]})


def target(host: BsdHost) -> Target:
    facts, _ = collect(host, "server", ["vtnet0"], [])
    return Target("bsd1", "server", host, "bsd-bsd1", "vtnet0", facts)


def test_the_facts_hold_the_domains_their_cpus_and_the_nics_domain(tmp_path):
    t = target(numa_host(tmp_path, ndomains_file=F / "numa" / "vm.ndomains-r630.txt", domains=TWO_DOMAINS,
                         nic_domain=1))
    f = t.facts
    assert f is not None and f.value("numa.nodes") == 2
    assert f.value("numa.cpus") == {"node0": "0-11", "node1": "12-23"}
    assert f.value("if.vtnet0.numa_node") == 1 and f.get("if.vtnet0.numa_node").source == "sysctl dev.vtnet.0.%domain"  # type: ignore[union-attr]


def test_nic_node_pins_the_tools_to_the_nics_domain_under_cpuset(tmp_path):
    t = target(numa_host(tmp_path, ndomains_file=F / "numa" / "vm.ndomains-r630.txt", domains=TWO_DOMAINS,
                         nic_domain=1))
    plan = audit(pinning(policy="nic-node"), [t])
    [row] = plan.rows
    assert (row.status, row.wanted, row.scope) == ("ok", "12-23", "process")
    assert "NUMA domain 1 of vtnet0" in row.note
    assert 'command = "taskset" is Linux\'s: FreeBSD uses cpuset(1)' in row.note     # the default, said so
    assert plan.pin == {"bsd1": ["cpuset", "-l", "12-23"]} and plan.pin_cpus == {"bsd1": "12-23"}
    # what the studies launch (nginx in the https study, as every tool) gets the prefix
    env = PointEnv(pin=plan.pin)
    assert env.pinned("bsd1", nginx.argv("/tmp/p"))[:4] == ["cpuset", "-l", "12-23", "nginx"]
    assert env.pinned("other", ["wrk"]) == ["wrk"]
    # command = "cpuset" says what it does: no note
    [row] = audit(pinning(policy="nic-node", command="cpuset"), [t]).rows
    assert row.status == "ok" and "Linux" not in row.note


def test_a_single_domain_host_pins_to_all_its_cpus_and_a_silent_nic_on_two_domains_is_unknown(tmp_path):
    one = target(numa_host(tmp_path / "a", ndomains_file=None, domains={0: ", ".join(map(str, range(8)))},
                           nic_domain=None))
    assert one.facts is not None and one.facts.value("if.vtnet0.numa_node") is None
    plan = audit(pinning(policy="nic-node"), [one])
    [row] = plan.rows
    assert (row.status, row.wanted) == ("ok", "0-7") and "vm.ndomains = 1" in row.note
    two = target(numa_host(tmp_path / "b", ndomains_file=F / "numa" / "vm.ndomains-r630.txt", domains=TWO_DOMAINS,
                           nic_domain=None))
    plan = audit(pinning(policy="nic-node"), [two])
    [row] = plan.rows
    assert row.status == "unknown" and "no %domain" in row.note and "2 domains" in row.note
    assert plan.pin == {}                                     # never a guessed socket


def test_given_cpus_and_a_host_without_cpuset(tmp_path):
    t = target(numa_host(tmp_path / "a", ndomains_file=None, domains={0: "0, 1, 2, 3"}, nic_domain=None))
    plan = audit(pinning(policy="cpus", cpus="2-3"), [t])
    assert plan.pin == {"bsd1": ["cpuset", "-l", "2-3"]} and plan.rows[0].note.startswith("tools launched under "
                                                                                         "cpuset -l 2-3 (as given)")
    bare = target(numa_host(tmp_path / "b", ndomains_file=None, domains={}, nic_domain=None, cpuset=False))
    if shutil.which("cpuset") is None:                       # (this machine's PATH is the fake's too)
        [row] = audit(pinning(policy="cpus", cpus="0-1"), [bare]).rows
        assert row.status == "unsupported" and "/usr/bin/cpuset" in row.note
        # and its domains' CPUs are unknown, with the reason (no cpuset to ask)
        assert bare.facts is not None and bare.facts.value("numa.cpus") is None
        assert "cpuset -g -d" in (bare.facts.get("numa.nodes") or bare.facts.get("numa.cpus")).unknown  # type: ignore[union-attr,operator]


def test_a_pinning_only_profile_may_be_applied_to_freebsd_and_anything_more_is_refused(tmp_path):
    host = numa_host(tmp_path, ndomains_file=None, domains={0: "0, 1, 2, 3"}, nic_domain=None)
    t = target(host)
    only_pin = Profile.model_validate({"settings": [{"kind": "pinning", "policy": "cpus", "cpus": "1-2"}]})
    plan = apply(only_pin, [t])                   # nothing to write: the prefix is the whole setting
    assert plan.pin == {"bsd1": ["cpuset", "-l", "1-2"]} and [r.status for r in plan.rows] == ["ok"]
    more = Profile.model_validate({"settings": [{"kind": "pinning", "policy": "cpus", "cpus": "1-2"},
                                                {"kind": "sysctl", "key": "kern.ipc.maxsockbuf", "value": 1}]})
    with pytest.raises(PreflightError, match="FreeBSD host.*bsd1.*only audits"):
        apply(more, [t])
    assert not [c for c in host.commands if "=" in " ".join(c[3:]) and "sysctl" in " ".join(c)]


def test_command_cpuset_on_a_linux_host_is_unsupported_not_ignored():
    lin = Target("lin1", "client", FakeTransport("lin1"), "lin-lin1", "eth0", None)
    [row] = audit(pinning(policy="cpus", cpus="0", command="cpuset"), [lin]).rows
    assert row.status == "unsupported" and "FreeBSD's" in row.note


def test_the_https_study_launches_nginx_under_the_pin_prefix(tmp_path):
    """The https runner's nginx start goes through PointEnv.pinned: on a FreeBSD
    server, cpuset -l (cpuset execs nginx: the PID sockstat shows listening is
    the spawned one; tests/unit/test_freebsd_sockstat.py tests that wait)."""
    def srv(argv: list[str]) -> Script:
        if argv[:1] == ["sockstat"]:
            return Script(sockstat14([("root", "nginx", p.pid, 6 + i, "tcp4", f"198.18.0.1:{port}", "*:*", "LISTEN")
                                      for p in server.spawned for i, port in enumerate((443, 80))]))
        if argv[:2] == ["nginx", "-v"]:
            return Script(stderr="nginx version: nginx/1.22.1\n")
        if argv[:2] == ["openssl", "version"]:
            return Script("OpenSSL 3.0.17 1 Jul 2025\n")
        if argv[:1] == ["ping"]:
            return Script("1 packets transmitted, 1 received\n")
        if argv[:2] == ["sh", "-c"] and "mktemp -d" in argv[2]:
            return Script("/tmp/nicbench-nginx.fake\n")
        if "nginx" in argv and "-t" not in argv:
            return Script(hang=True)                 # no /proc here: sockstat answers
        return Script()

    def cli(argv: list[str]) -> Script:
        return Script("wrk 4.1.0 [epoll] Copyright (C) 2012 Will Glozer\n") if argv[:2] == ["wrk", "-v"] else Script()

    plan = parse_plan('name = "h"\n[hosts.srv]\nrole = "server"\n[hosts.c1]\nrole = "client"\n'
                      '[study]\nkind = "https"\nschemes = ["https"]\nconnections = [4]\nduration = 2\n')
    spec = HostsSpec("h", 1500, (HostSpec("srv", "server", "", "198.18.0.1", 24),
                                 HostSpec("c1", "client", "", "198.18.0.2", 24)), None, None, ())
    server = FakeTransport("srv", srv, os="FreeBSD")
    hosts = FakeHosts(spec, {"srv": server, "c1": FakeTransport("c1", cli)})
    r = HttpsRunner(plan, hosts)
    r.preflight()
    env = PointEnv(rel=lambda p: str(Path(p).relative_to(tmp_path)), pin={"srv": ["cpuset", "-l", "12-23"]})
    r.start(env, tmp_path / "https")
    [ng] = hosts.transport("srv").spawned
    assert list(ng.argv[:4]) == ["cpuset", "-l", "12-23", "nginx"]
    r.stop(env, tmp_path / "https")
