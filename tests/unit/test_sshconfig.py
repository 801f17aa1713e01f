"""SSH destinations are checked before ssh sees them, and each host's
effective settings come from ``ssh -G`` (recorded here with a temp config)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nicbench.core.errors import InputError, PreflightError
from nicbench.hosts.ssh import SshTarget
from nicbench.hosts.sshconfig import (
    check_ssh_destination,
    parse_ssh_g,
    resolve,
    ssh_destination_problem,
    ssh_g_argv,
)

FIX = Path(__file__).parent.parent / "fixtures" / "ssh" / "9.2" / "ssh-G"
needs_ssh = pytest.mark.skipif(shutil.which("ssh") is None, reason="openssh-client is not installed")


@pytest.mark.parametrize("dest, words", [
    ("-oProxyCommand=touch /tmp/pwned", "starts with '-'"),
    ("-Jevil", "starts with '-'"),
    ("-F/tmp/cfg", "starts with '-'"),
    ("", "empty"),
    ("dut1 -oProxyCommand=x", "' '"),
    ("dut1;reboot", "';'"),
    ("$(id)", "'$'"),
    ("dut1\n", "'\\n'"),
    ("@dut1", "not user@host"),
    ("bench@", "not user@host"),
    ("bench@-oProxyCommand=x", "not user@host"),
])
def test_destinations_ssh_would_misread_are_refused(dest, words):
    why = ssh_destination_problem(dest)
    assert why is not None and words in why
    with pytest.raises(InputError) as e:
        check_ssh_destination(dest, "hosts.gen1.ssh")
    assert e.value.where == "hosts.gen1.ssh" and "not an SSH destination" in e.value.one_line()


@pytest.mark.parametrize("dest", ["dut1", "bench@10.0.0.1", "gen-3.lab.example", "[fe80::1%eth0]",
                                  "ssh://bench@dut1:2222", "10.203.0.12"])
def test_ordinary_destinations_pass(dest):
    assert ssh_destination_problem(dest) is None and check_ssh_destination(dest, "x") == dest


def test_ssh_G_output_with_proxyjump_port_user_and_two_keys():
    s = parse_ssh_g((FIX / "dut1.txt").read_text())
    assert (s.hostname, s.user, s.port, s.proxy_jump, s.proxy_command) == ("10.203.0.11", "bench", 2222, "bastion",
                                                                           None)
    assert s.identity_files == ("~/.ssh/id_lab", "/etc/nicbench/lab_key")       # in the config's order
    assert s.connect_timeout is None and s.batch_mode is False
    assert s.summary() == "bench@10.203.0.11:2222 via bastion, keys ~/.ssh/id_lab, /etc/nicbench/lab_key"


def test_ssh_G_output_with_proxycommand_match_and_nicbench_options():
    g = parse_ssh_g((FIX / "gen-3.txt").read_text())
    assert g.proxy_command == "ssh -W %h:%p bastion" and g.proxy_jump is None and g.connect_timeout == 7
    assert "via ProxyCommand 'ssh -W %h:%p bastion'" in g.summary()
    m = parse_ssh_g((FIX / "match-root.txt").read_text())
    assert (m.user, m.hostname, m.port) == ("root", "10.203.0.12", 2200)          # the Match block's Port
    n = parse_ssh_g((FIX / "dut1-nicbench-argv.txt").read_text())
    assert n.port == 2022 and n.batch_mode and n.strict_host_key_checking == "true" and n.connect_timeout == 10


def test_what_is_not_ssh_G_output_is_an_error():
    with pytest.raises(InputError, match="no hostname, user and port"):
        parse_ssh_g("usage: ssh [-46AaCfGgKkMNnqsTtVvXxYy]\n", "dut1")


@needs_ssh
def test_resolve_runs_ssh_G_with_the_targets_own_options():
    t = SshTarget("dut1", port=2022, config=str(FIX / "ssh_config"))
    argv = ssh_g_argv(t)
    assert argv[-3:] == ["-G", "--", "dut1"] and "BatchMode=yes" in argv
    s = resolve(t, "dut1")
    assert s == parse_ssh_g((FIX / "dut1-nicbench-argv.txt").read_text())
    root = resolve(SshTarget("10.203.0.12", user="root", config=str(FIX / "ssh_config")), "gen2")
    assert root.port == 2200


@needs_ssh
def test_resolve_reports_a_bad_config_and_refuses_option_destinations(tmp_path):
    with pytest.raises(PreflightError) as e:
        resolve(SshTarget("broken", config=str(FIX / "bad_config")), "gen1")
    assert "Bad configuration option: portt" in e.value.one_line() and e.value.where == "gen1"
    marker = tmp_path / "pwned"
    with pytest.raises(PreflightError, match="starts with '-'"):
        resolve(SshTarget(f"-oProxyCommand=touch {marker}"), "gen1")
    assert not marker.exists()
