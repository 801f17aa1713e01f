"""SSH transport, pure parts: ssh's argv, its failures explained, the
one-round-trip host check and the clock offset."""

from __future__ import annotations

from pathlib import Path

import pytest

from nicbench.hosts.ssh import SshTarget, explain
from nicbench.hosts.sshcheck import clock_offset, parse_check

FIX = Path(__file__).parent.parent / "fixtures" / "ssh" / "9.2"   # ssh's stderr, recorded against the lab's sshd


def test_ssh_argv_is_strict_and_multiplexed():
    t = SshTarget("lab1", user="bench", port=2222, identity="/k", options=("ProxyJump=bastion",),
                  prefix=("ip", "netns", "exec", "sw"), config="/cfg")
    a = t.ssh_argv("/tmp/c")
    assert a[:5] == ["ip", "netns", "exec", "sw", "ssh"] and a[5:7] == ["-F", "/cfg"]
    for opt in ("BatchMode=yes", "StrictHostKeyChecking=yes", "ControlPath=/tmp/c", "ProxyJump=bastion"):
        assert opt in a
    assert a[a.index("-l") + 1] == "bench" and a[a.index("-p") + 1] == "2222" and a[a.index("-i") + 1] == "/k"
    assert "-F" not in SshTarget("h").ssh_argv("/c")          # the user's own ~/.ssh/config by default


@pytest.mark.parametrize("case, words, hint", [
    ("host-key-changed", "host key has CHANGED", "ssh-keygen -R"),
    ("host-key-unknown", "not in known_hosts", "connect once by hand"),
    ("permission-denied", "authentication refused", "authorized_keys"),
    ("connection-refused", "nothing listens", "sshd running"),
    ("host-down", "does not answer", "host up"),
])
def test_ssh_failures_are_explained(case, words, hint):
    msg, h = explain((FIX / f"{case}.err").read_text())
    assert words in msg and hint in (h or "")


def test_clock_offset_takes_the_shortest_round_trip():
    # (local before, remote, local after): the 2 ms round trip wins over the 300 ms one
    off, unc = clock_offset([(100.0, 100.5, 100.3), (200.0, 200.021, 200.002)])
    assert off == pytest.approx(0.020) and unc == pytest.approx(0.001)
    assert clock_offset([]) is None


CHECK = """os Linux
uid 0
sudo no
bash old
missing setsid
left 4242 bash -c nicbench-gate iperf3 -s
if eth0 1500 198.18.0.2 fe80::1
noif eth9
"""


def test_host_check_lists_every_problem():
    c = parse_check("c1", CHECK, (0.2, 0.001), max_offset=0.05,
                    want={"eth0": ("198.18.0.9", 9000), "eth9": (None, None)})
    text = "; ".join(c.problems)
    assert "c1: interface eth9 does not exist" in text
    assert "clock is +200.0 ms off" in text and "chrony" in text
    assert "PIDs 4242" in text
    assert "bash >= 5" in text and "setsid is missing" in text
    assert "eth0 has MTU 1500, the plan wants 9000" in text and "does not have the plan's address 198.18.0.9" in text
    assert c.root and c.leftovers == (4242,)
    ok = parse_check("c1", "os FreeBSD\nuid 1000\nsudo yes\nif eth0 1500 198.18.0.2\n", (0.001, 0.001),
                     max_offset=0.05, want={"eth0": ("198.18.0.2", 1500)}, sudo_set=True)
    assert ok.problems == () and ok.root and ok.os == "FreeBSD"
    bsd = parse_check("c1", "os FreeBSD\nuid 0\nsudo yes\nmissing setsid\n", (0.001, 0.001), max_offset=0.05,
                      want={})
    assert bsd.problems == ("c1: setsid is missing (FreeBSD's base system has none: put a setsid(1) on the PATH (e.g. "
                            "util-linux's), as nicbench's process wrapper starts every tool in its own session with "
                            "it)",)
    mac = parse_check("m1", "os Darwin\nuid 0\nsudo no\n", (0.0, 0.001), max_offset=0.05, want={})
    assert mac.problems == ("m1: its OS is 'Darwin' (uname -s): nicbench drives Linux and FreeBSD hosts only",)
    assert parse_check("m1", "uid 0\n", (0.0, 0.001), max_offset=0.05, want={}).problems == (
        "m1: the host check did not say its OS (uname -s)",)
    no = parse_check("c1", "os Linux\nuid 1000\nsudo no\n", (0.0, 0.001), max_offset=0.05, want={})
    assert "sudo = true" in no.problems[0] and "asks for a password" in no.problems[0] and not no.root
    unset = parse_check("c1", "os Linux\nuid 1000\nsudo yes\n", (0.0, 0.001), max_offset=0.05, want={})
    assert "sudo = true" in unset.problems[0] and not unset.root     # sudo works, but the plan does not use it
    assert parse_check("c1", "", None, max_offset=0.05, want={}).problems[0] == \
        "c1: the host check printed nothing usable"


def test_what_a_login_shell_prints_is_not_taken_for_output(tmp_path):
    """A chatty .bashrc prints before the command shell's first answer and
    before a spawned tool's output: both are skipped."""
    import os
    import subprocess

    from nicbench.hosts.ssh import SshTransport
    from nicbench.hosts.transport import BEGIN_MARK
    from nicbench.hosts.transport import read_output as read
    f = tmp_path / "iperf3.out"
    f.write_text("Welcome to host a!\npyenv: warning\n" + BEGIN_MARK + '{"start": {}}\n')
    assert read(f) == '{"start": {}}\n'
    r, w = os.pipe()
    os.write(w, b"Welcome!\nmotd line\n@@nb-out ab12 3\nhi\n@@nb-err ab12 0\n@@nb-end ab12 0\n")
    os.close(w)
    fake = subprocess.Popen(["cat"], stdin=r, stdout=subprocess.PIPE)
    os.close(r)
    t = SshTransport("h", SshTarget("h"))
    import time
    assert t._answer(fake, "ab12", time.monotonic() + 5) == ("hi\n", "", 0)
    fake.wait()
    t.close()


def _fake_bin(d: Path, uid: str = "1000") -> dict[str, str]:
    """PATH with an ``id`` saying a non-root user and a ``sudo`` with no rule for it
    (what sudo 1.9 says to ``-n`` then), in front of the real tools."""
    import os
    d.mkdir()
    (d / "id").write_text(f"#!/bin/sh\necho {uid}\n")
    (d / "sudo").write_text("#!/bin/sh\necho 'sudo: a password is required' >&2\nexit 1\n")
    for f in d.iterdir():
        f.chmod(0o755)
    return {**os.environ, "PATH": f"{d}:{os.environ['PATH']}"}


def test_a_sudo_host_whose_sudo_asks_for_a_password_is_refused_saying_so(tmp_path):
    import subprocess

    from nicbench.hosts.sshcheck import _CHECK
    env = _fake_bin(tmp_path / "bin")
    out = subprocess.run(["sh", "-c", _CHECK, "nicbench-check"], env=env, capture_output=True, text=True,
                         timeout=30).stdout
    c = parse_check("c1", out, (0.0, 0.001), max_offset=0.05, want={}, sudo_set=True)
    # (other nicbench runs on this machine may show up as leftovers: only the sudo line matters)
    assert [p for p in c.problems if "sudo" in p] == [
        "c1: sudo = true, but sudo asks for a password (sudo: a password is required): give the login user a "
        "NOPASSWD sudo rule for nicbench's commands (e.g. 'USER ALL=(ALL) NOPASSWD: ALL' in /etc/sudoers.d), "
        "or log in as root"]
    assert not c.root
    gone = parse_check("c1", "os Linux\nuid 1000\nsudo no sh: 1: sudo: not found\n", (0.0, 0.001),
                       max_offset=0.05, want={}, sudo_set=True)
    assert gone.problems == ("c1: sudo = true, but 'sudo -n true' fails (sh: 1: sudo: not found): is sudo "
                             "installed, and may the login user use it?",)


def test_a_command_sudo_refuses_says_sudo_asks_for_a_password(tmp_path):
    """Through the real command shell (run here, not over SSH): a command on a
    sudo host whose sudo needs a password is one line saying so, not whatever
    the command's caller makes of its empty output."""
    import subprocess

    from nicbench.core.errors import PreflightError
    from nicbench.hosts.ssh import _SHELL, SshTransport
    env = _fake_bin(tmp_path / "bin")
    t = SshTransport("c1", SshTarget("c1", sudo=True))
    t._shell = subprocess.Popen(["sh", "-c", _SHELL], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=env)
    try:
        with pytest.raises(PreflightError) as e:
            t.run(["date", "+%s.%N"], timeout=10)
        assert e.value.where == "c1" and e.value.message == \
            "date: sudo asks for a password (sudo: a password is required)"
        assert "NOPASSWD" in (e.value.hint or "")
        assert t.run(["echo", "hi"], timeout=10, sudo=False).stdout == "hi\n"    # as the login user: no sudo
    finally:
        t._shell.stdin.close()
        t._shell.wait(5)
        t.close()
