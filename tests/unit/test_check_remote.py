"""``nicbench check`` on plans of real hosts: an inventory Ansible refuses is
one line naming the file, and each host's effective SSH settings (``ssh -G``,
nothing connected to) are shown and given in --json."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, ROOT

INV = FIXTURES / "inventory"


def nb(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "nicbench.cli.main", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=120, env={"PATH": "/usr/bin:/bin", "HOME": str(cwd),
                                                     "PYTHONPATH": str(ROOT / "src")})


@pytest.mark.parametrize("bad", ["cycle.ini", "novalue.ini", "hosts-list.yml"])
def test_an_inventory_ansible_refuses_is_one_line_naming_the_file(tmp_path, bad):
    shutil.copy(INV / "bad" / bad, tmp_path / bad)
    (tmp_path / "plan.toml").write_text(f'name = "x"\ninventory = "{bad}"\n[study]\nconnections = [1]\n')
    p = nb("check", "plan.toml", cwd=tmp_path)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"nicbench: bad input: {bad}: not an inventory"), p.stderr
    if shutil.which("ansible-inventory", path="/usr/bin:/bin"):
        assert "ansible-inventory refuses it: " in lines[0]


def test_check_shows_each_hosts_ssh_settings(tmp_path):
    if shutil.which("ssh") is None:
        pytest.skip("no ssh client")
    (tmp_path / ".ssh").mkdir()
    (tmp_path / "ssh_config").write_text("Host dut1\n  HostName 192.0.2.10\n  User bench\n  Port 2222\n"
                                         "  ProxyJump jump.example\n  IdentityFile ~/.ssh/lab_key\n")
    (tmp_path / "plan.toml").write_text(f"""name = "x"
[hosts.srv]
role = "server"
ssh = "dut1"
test_ip = "192.0.2.10"
ssh_args = ["-F", "{tmp_path / 'ssh_config'}"]
[hosts.c1]
role = "client"
ssh = "root@192.0.2.11"
port = 2200
test_ip = "192.0.2.11"
ssh_args = ["-F", "{tmp_path / 'ssh_config'}"]
[study]
connections = [1]
""")
    p = nb("check", "plan.toml", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "ssh srv: bench@192.0.2.10:2222 via jump.example, keys ~/.ssh/lab_key\n" in p.stdout
    assert "ssh c1: root@192.0.2.11:2200, ssh's default keys\n" in p.stdout
    got = json.loads(nb("check", "plan.toml", "--json", cwd=tmp_path).stdout)["ssh"]
    assert got["srv"] == {"hostname": "192.0.2.10", "user": "bench", "port": 2222, "proxy_jump": "jump.example",
                          "proxy_command": None, "identity_files": ["~/.ssh/lab_key"]}
