"""FreeBSD has no /proc/net: nginx's readiness and the busy-port checks ask
the base system's ``sockstat`` there (issue 19).

Recorded outputs (tests/fixtures/freebsd/sockstat, SOURCES.md): an old
release's ``sockstat -Ptcp`` (perkeep's test data: fixed-width columns that
run together) and FreeBSD 15's ``sockstat -l4`` (a GitLab host's nginx
master and worker, both holding the listening socket).  Neither was run with
``-s``, and no recorded output of ``sockstat -46 -l -q -s -w`` with a traceable
source was found: those lines are rendered in the format of FreeBSD's own
source by tests/bsdfake.py (``sockstat14``: sockstat.c's ``display`` /
``displaysock``; ``sockstat15``: 15's libxo main.c), and said so here.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from bsdfake import BsdHost, SockRow, shims, sockstat14, sockstat15
from nicbench.core.errors import PreflightError, ToolError
from nicbench.hosts.fake import FakeHosts, FakeProcess, FakeTransport, Script
from nicbench.hosts.spec import HostSpec, HostsSpec
from nicbench.plan import parse_plan
from nicbench.run import sockstat
from nicbench.run.kit import PointEnv
from nicbench.run.preflight import busy_ports
from nicbench.sampling.sockstat_freebsd import (
    SockstatRow,
    bound_ports,
    listening_ports,
    parse_sockstat,
    sockstat_argv,
    split_address,
)
from nicbench.studies.https.runner import HttpsRunner

F = Path(__file__).parent.parent / "fixtures" / "freebsd" / "sockstat"

# what -l shows on a FreeBSD nginx server: its master (root) and a worker
# (www) both hold the listening sockets; a socket no process holds; a bound
# TCP socket not yet listening; sshd dual-stack; a link-local ntpd (UDP)
SERVER: list[SockRow] = [
    ("root", "nginx", 15825, 6, "tcp4", "198.18.0.1:443", "*:*", "LISTEN"),
    ("root", "nginx", 15825, 7, "tcp4", "198.18.0.1:80", "*:*", "LISTEN"),
    ("www", "nginx", 15826, 6, "tcp4", "198.18.0.1:443", "*:*", "LISTEN"),
    ("www", "nginx", 15826, 7, "tcp4", "198.18.0.1:80", "*:*", "LISTEN"),
    ("root", "sshd", 812, 4, "tcp46", "*:22", "*:*", "LISTEN"),
    ("root", "sshd", 812, 5, "tcp6", "fe80::5054:ff:fe12:3456%vtnet0:2222", "*:*", "LISTEN"),
    (None, "", 0, 0, "tcp6", "::1:4045", "*:*", "LISTEN"),
    ("nobody", "a-very-long-name", 99999, 103, "tcp4", "127.0.0.1:8080", "*:*", "CLOSED"),
]
UDP: list[SockRow] = [
    ("ntpd", "ntpd", 800, 20, "udp6", "fe80::1%vtnet0:123", "*:*", None),
    ("ntpd", "ntpd", 800, 21, "udp4", "*:123", "*:*", None),
    ("root", "syslogd", 700, 7, "udp46", "*:514", "*:*", None),
]


def test_the_command_lists_listening_and_bound_sockets_with_states_and_whole_addresses():
    assert sockstat_argv("tcp") == ["sockstat", "-46", "-l", "-q", "-s", "-w", "-P", "tcp"]
    assert sockstat_argv("udp")[-1] == "udp"


@pytest.mark.parametrize("render", [sockstat14, sockstat15], ids=["13-14", "15"])
def test_rows_in_the_sources_formats_read_whole(render):
    rows = parse_sockstat(render(SERVER + UDP), where="bsd1")
    assert rows[0] == SockstatRow("root", "nginx", 15825, 6, "tcp4", "198.18.0.1", 443, "LISTEN")
    assert rows[4].proto == "tcp46" and rows[4].local_port == 22 and rows[4].family == "tcp"
    assert rows[5].local_addr == "fe80::5054:ff:fe12:3456%vtnet0" and rows[5].local_port == 2222
    assert rows[6][:4] == ("?" if render is sockstat14 else "??", "?" if render is sockstat14 else "??", None, None)
    assert rows[6].local_addr == "::1" and rows[6].local_port == 4045
    assert rows[7].command == "a-very-lon" and rows[7].pid == 99999 and rows[7].fd == 103
    assert [r.state for r in rows[8:]] == [None, None, None]        # UDP: no state (15: ??)
    assert [r.local_port for r in rows[8:]] == [123, 123, 514]
    # the master's listening ports; the bound, not yet listening 8080 is busy but not listening
    assert listening_ports(rows, 15825) == {443, 80}
    assert listening_ports(rows) == {443, 80, 22, 2222, 4045}
    assert bound_ports(rows) == {443, 80, 22, 2222, 4045, 8080, 123, 514}


def test_freebsd_15_l4_a_gitlab_host_nginx_master_and_worker_hold_the_socket():
    """Recorded: FreeBSD 15 (libxo columns: the PID right-aligned), without -s."""
    rows = parse_sockstat((F / "15-gitlab-sockstat-l4-excerpt.txt").read_text(), where="gitlab")
    assert [(r.user, r.command, r.pid, r.fd, r.proto, r.local_addr, r.local_port) for r in rows] == [
        ("www", "nginx", 15826, 8, "tcp4", "*", 80), ("root", "nginx", 15825, 8, "tcp4", "*", 80),
        ("git", "ruby34", 2224, 11, "tcp4", "127.0.0.1", 8082), ("git", "ruby34", 2223, 16, "tcp4", "127.0.0.1", 8092),
        ("redis", "redis-serv", 1143, 6, "tcp4", "127.0.0.1", 6379),
        ("postgres", "postgres", 1084, 7, "tcp4", "127.0.0.1", 5432)]
    assert bound_ports(rows) == {80, 8082, 8092, 6379, 5432}
    # without -s no row says LISTEN: nothing is taken as listening (nicbench runs -s)
    assert {r.state for r in rows} == {None} and listening_ports(rows) == set()


def test_an_old_releases_fixed_columns_read_where_they_can_and_are_refused_where_they_ran_together():
    """Recorded: perkeep's ``sockstat -Ptcp`` of an old release: a 10-character
    command glued to its PID is split at the column; an address glued to the
    next, or a stray column, is refused, never guessed."""
    text = (F / "perkeep-sockstat-Ptcp.txt").read_text()
    with pytest.raises(ToolError, match=r"no foreign address in .*192\.168\.123\.5:9000192") as e:
        parse_sockstat(text, where="bsd9")
    assert e.value.where == "bsd9"
    lines = text.splitlines()
    refused = [ln for ln in lines if _refused(ln)]
    assert [ln.split()[-1] for ln in refused] == ["192.168.123.5:9000192.168.123.21:49866",
                                                  "192.168.123.5:8000192.168.123.21:49826", "*:*"]
    rows = parse_sockstat("\n".join(ln for ln in lines if ln not in refused), where="bsd9")
    assert len(rows) == len(lines) - 1 - 3                       # the header is skipped
    assert rows[0] == SockstatRow("really-long-user", "spc in nam", 63210, 3, "tcp4", "*", 9000, None)
    assert (rows[3].command, rows[3].pid, rows[3].local_port) == ("really-lon", 62928, 8000)
    assert [(r.user, r.pid, r.fd, r.proto, r.local_port) for r in rows[-2:]] == [
        ("?", None, None, "tcp4", 895), ("?", None, None, "tcp6", 777)]
    nginx = [r for r in rows if r.command == "nginx"]
    assert {(r.pid, r.proto, r.local_port) for r in nginx} == {(62982, "tcp4", 80), (62982, "tcp6", 80),
                                                               (2152, "tcp4", 80), (2152, "tcp6", 80)}


def _refused(line: str) -> bool:
    try:
        parse_sockstat(line, where="x")
        return False
    except ToolError:
        return True


def test_addresses_as_sockstat_prints_them_and_what_is_not_one():
    assert split_address("*:443", where="h") == ("*", 443)
    assert split_address("*:*", where="h") == ("*", None)
    assert split_address("10.0.0.1:80", where="h") == ("10.0.0.1", 80)
    assert split_address("::1:953", where="h") == ("::1", 953)
    assert split_address("[::1]:8080", where="h") == ("::1", 8080)
    assert split_address("fe80::1%lo0:123", where="h") == ("fe80::1%lo0", 123)
    for bad in ("443", "nginx:80", "10.0.0.1:", "10.0.0.1:70000", "2001:db8:1234:5678::1"):
        with pytest.raises(ToolError, match="sockstat: ") as e:
            split_address(bad, where="h")
        assert e.value.where == "h"


def test_what_is_not_a_row_of_the_command_is_refused_with_the_line():
    annotated = "root     Xvnc        2585 4   tcp4   127.0.0.1:5910        *:*  #VNC\n"
    with pytest.raises(ToolError, match=r"unexpected columns '#VNC'"):
        parse_sockstat(annotated, where="h")
    with pytest.raises(ToolError, match=r"unexpected columns 'LISTEN'"):     # a state on a UDP row
        parse_sockstat("root     syslogd      700 7   udp4   *:514                 *:*    LISTEN\n", where="h")
    with pytest.raises(ToolError, match="cannot read the line"):             # an SCTP address continued
        parse_sockstat("                                     10.0.0.2:5001         *:*\n", where="h")
    with pytest.raises(ToolError, match="cannot tell the command from the PID"):
        parse_sockstat("root     ab12 3   tcp4   *:1                   *:*\n", where="h")
    assert parse_sockstat("USER     COMMAND    PID   FD  PROTO  LOCAL ADDRESS         FOREIGN ADDRESS\n\n",
                          where="h") == []


# -- on a fake FreeBSD host (the shims answer sockstat) -------------------------------------------------

needs_dash = pytest.mark.skipif(shutil.which("dash") is None, reason="dash is not installed")


class NginxBsdHost(BsdHost):
    """A FreeBSD server whose sockstat shows what is listening now: before
    nginx starts, ``before``; once it runs, its master (the spawned process's
    PID) and a worker (``workers`` lines: the worker alone, or the master on one
    port only, for the negative cases)."""

    def __init__(self, tmp: Path, before: list[SockRow], udp: list[SockRow], render=sockstat14):
        self.tcp_file, self.udp_file = tmp / "sockstat-tcp.txt", tmp / "sockstat-udp.txt"
        self.render = render
        self.tcp_file.write_text(render(before) if before else "")
        self.udp_file.write_text(render(udp) if udp else "")
        self.before = before
        super().__init__("srv", shims(tmp / "bin", {
            "uname": 'case "$1" in -s) echo FreeBSD;; *) exit 127;; esac\n',
            "sockstat": f"""case "$*" in
  '-46 -l -q -s -w -P tcp') cat '{self.tcp_file}';;
  '-46 -l -q -s -w -P udp') cat '{self.udp_file}';;
  *) echo "usage: sockstat [-46CcfIiLlnqSsUuvw] [-j jid] [-p ports] [-P protocols]" >&2; exit 1;;
esac
""",
            "nginx": 'echo "nginx version: nginx/1.26.2" >&2\n',
            "openssl": "echo 'OpenSSL 3.0.15 3 Sep 2024'\n",
            "ping": "echo '1 packets transmitted, 1 packets received, 0.0% packet loss'\n",
        }), tmp)
        self.responder = lambda argv: Script(hang=True) if "nginx" in argv else Script()

    def spawn(self, argv, *, stdout, stderr, gated=False):  # type: ignore[override]
        p = super().spawn(argv, stdout=stdout, stderr=stderr, gated=gated)
        if "nginx" in argv:
            self.tcp_file.write_text(self.render(self.before + self.nginx_rows(p)))
        return p

    def nginx_rows(self, p: FakeProcess) -> list[SockRow]:
        return [("root", "nginx", p.pid, 6, "tcp4", "198.18.0.1:443", "*:*", "LISTEN"),
                ("root", "nginx", p.pid, 7, "tcp4", "198.18.0.1:80", "*:*", "LISTEN"),
                ("www", "nginx", p.pid + 1, 6, "tcp4", "198.18.0.1:443", "*:*", "LISTEN")]


def https_hosts(srv: FakeTransport) -> tuple[object, FakeHosts]:
    def cli(argv: list[str]) -> Script:
        return Script("wrk 4.1.0 [epoll] Copyright (C) 2012 Will Glozer\n") if argv[:2] == ["wrk", "-v"] else Script()

    plan = parse_plan('name = "h"\n[hosts.srv]\nrole = "server"\n[hosts.c1]\nrole = "client"\n'
                      '[study]\nkind = "https"\nschemes = ["https"]\nconnections = [4]\nduration = 2\n')
    spec = HostsSpec("h", 1500, (HostSpec("srv", "server", "", "198.18.0.1", 24),
                                 HostSpec("c1", "client", "", "198.18.0.2", 24)), None, None, ())
    return plan, FakeHosts(spec, {"srv": srv, "c1": FakeTransport("c1", cli)})


@needs_dash
@pytest.mark.parametrize("render", [sockstat14, sockstat15], ids=["13-14", "15"])
def test_nginx_on_a_freebsd_server_is_ready_once_sockstat_shows_its_master_listening(tmp_path, render):
    srv = NginxBsdHost(tmp_path, SERVER[4:6], UDP, render)
    plan, hosts = https_hosts(srv)
    r = HttpsRunner(plan, hosts)
    r.preflight()
    env = PointEnv(rel=lambda p: str(Path(p).relative_to(tmp_path)))
    r.start(env, tmp_path / "https")
    [ng] = srv.spawned
    asked = [c for c in srv.commands if c[:1] == ["sockstat"]]
    assert asked[-1] == ["sockstat", "-46", "-l", "-q", "-s", "-w", "-P", "tcp"]
    assert sockstat.pid_listening(srv, ng.pid) == {443, 80}
    assert sockstat.pid_listening(srv, ng.pid + 1) == {443}      # a worker: not the process nicbench waits on
    assert not any("/proc/" in " ".join(c) for c in srv.commands)
    r.stop(env, tmp_path / "https")


@needs_dash
def test_preflight_on_a_freebsd_server_finds_the_https_port_taken(tmp_path):
    taken = [("root", "httpd", 4242, 3, "tcp46", "*:443", "*:*", "LISTEN")]
    srv = NginxBsdHost(tmp_path, SERVER[4:8] + taken, UDP)
    assert busy_ports(srv) == {22, 2222, 4045, 8080, 443}
    plan, hosts = https_hosts(srv)
    with pytest.raises(PreflightError, match="srv: port 443 already in use"):
        HttpsRunner(plan, hosts).preflight()


@needs_dash
def test_a_sockstat_that_fails_says_so_naming_the_host(tmp_path):
    broken = BsdHost("bsd2", shims(tmp_path / "bin2", {"sockstat": "echo 'sockstat: sysctl: Operation not "
                                                                    "permitted' >&2; exit 1\n"}), tmp_path)
    with pytest.raises(ToolError, match=r"sockstat -46 -l -q -s -w -P tcp failed: sockstat: sysctl") as e:
        busy_ports(broken)
    assert e.value.where == "bsd2"


def test_linux_hosts_still_read_proc_net():
    lin = FakeTransport("lin1", files={"/proc/net/tcp": "  sl  local_address rem_address   st\n"
                                       "   0: 00000000:01BB 00000000:0000 0A 0:0 0:0 0 0 0 1\n"})
    assert busy_ports(lin) == {443}
    assert not any(c[:1] == ["sockstat"] for c in lin.commands)
