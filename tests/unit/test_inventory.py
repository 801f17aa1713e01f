"""Ansible inventories (INI and YAML) into plan hosts, and plans of real hosts."""

from __future__ import annotations

import pytest

from nicbench.core.errors import InputError
from nicbench.plan.inventory import InventoryError, parse_ini, parse_yaml, plan_hosts
from nicbench.plan.load import parse_plan

INI = """# a lab as Ansible knows it
[nicbench_server]
dut1 ansible_host=10.0.0.1 nicbench_test_ip=192.168.50.1 nicbench_interface=ens1f0

[nicbench_clients]
gen1 ansible_host=10.0.0.2 nicbench_test_ip=192.168.50.2
gen2 ansible_host=10.0.0.3 nicbench_test_ip=192.168.50.3 ansible_port=2222

[loadgens:children]
nicbench_clients

[loadgens:vars]
nicbench_interface=ens2f0
ansible_become=true

[all:vars]
ansible_user=bench
ansible_ssh_common_args='-o ProxyJump=bastion.example'
"""

YAML = """
all:
  vars:
    ansible_user: bench
  children:
    nicbench_server:
      hosts:
        dut1: {ansible_host: 10.0.0.1, nicbench_test_ip: 192.168.50.1, nicbench_interface: ens1f0}
    loadgens:
      vars: {nicbench_interface: ens2f0, ansible_become: true}
      children:
        nicbench_clients:
          hosts:
            gen1: {ansible_host: 10.0.0.2, nicbench_test_ip: 192.168.50.2}
"""


def test_ini_inventory_with_groups_children_and_vars():
    hosts = plan_hosts(parse_ini(INI), None)
    assert set(hosts) == {"dut1", "gen1", "gen2"}
    d, g2 = hosts["dut1"], hosts["gen2"]
    assert d == {"ssh": "10.0.0.1", "test_ip": "192.168.50.1", "interface": "ens1f0", "user": "bench",
                 "ssh_args": ["-o", "ProxyJump=bastion.example"], "role": "server"}
    assert g2["port"] == 2222 and g2["interface"] == "ens2f0" and g2["sudo"] is True and g2["role"] == "client"


def test_yaml_inventory_nests_the_same_way():
    hosts = plan_hosts(parse_yaml(YAML), None)
    assert hosts["gen1"]["interface"] == "ens2f0" and hosts["gen1"]["sudo"] is True
    assert hosts["dut1"]["interface"] == "ens1f0" and hosts["dut1"]["user"] == "bench"


def test_plan_hosts_pick_from_the_inventory_and_win_over_it():
    hosts = plan_hosts(parse_ini(INI), {"dut1": {"role": "server"}, "gen1": {"role": "client", "sudo": False}})
    assert set(hosts) == {"dut1", "gen1"} and hosts["gen1"]["sudo"] is False
    with pytest.raises(InventoryError, match="'gen9' of \\[hosts\\] is not in the inventory"):
        plan_hosts(parse_ini(INI), {"gen9": {"role": "client"}})
    with pytest.raises(InventoryError, match="no host has a role"):
        plan_hosts(parse_ini("[web]\nw1\n"), None)
    with pytest.raises(InventoryError, match="line 1"):
        parse_ini("[broken\n")


def test_a_plan_reads_its_inventory_relative_to_itself(tmp_path):
    (tmp_path / "lab.ini").write_text(INI)
    plan = tmp_path / "p.toml"
    plan.write_text('name = "r"\ninventory = "lab.ini"\n[study]\nconnections = [2]\n')
    from nicbench.plan.load import load_plan
    p, _ = load_plan(plan)
    assert p.remote and p.server == "dut1" and p.hosts["gen2"].port == 2222
    with pytest.raises(InputError) as e:
        parse_plan('name = "r"\ninventory = "nope.ini"\n[study]\n', str(tmp_path / "p.toml"))
    assert "cannot read the inventory" in e.value.one_line() and "inventory" in e.value.one_line()


@pytest.mark.parametrize("hosts, words", [
    ('[hosts.a]\nrole = "server"\nssh = "a"\n[hosts.b]\nrole = "client"\nssh = "b"\ntest_ip = "10.0.0.2"\n',
     "need ssh and test_ip; a lack(s) them"),
    ('[hosts.a]\nrole = "server"\nssh = "a"\ntest_ip = "nope"\n[hosts.b]\nrole = "client"\n', "not an IP address"),
])
def test_real_host_plans_say_what_is_missing(hosts, words):
    with pytest.raises(InputError) as e:
        parse_plan('name = "r"\n' + hosts + "[study]\nconnections = [2]\n", "r.toml")
    assert words in e.value.one_line()


def test_packets_on_real_hosts_names_their_port_nics():
    base = ('name = "r"\n[hosts.a]\nrole = "server"\nssh = "a"\ntest_ip = "10.0.0.1"\n[hosts.b]\nrole = "client"\n'
            'ssh = "b"\ntest_ip = "10.0.0.2"\n[study]\nkind = "packets"\nports = [1, 2]\n')
    with pytest.raises(InputError, match="study.interfaces.a: .* a needs 2"):
        parse_plan(base, "r.toml")
    p = parse_plan(base + 'interfaces = { a = ["ens1f0", "ens1f1"], b = ["ens2f0", "ens2f1"] }\n', "r.toml")
    assert p.study.interfaces["b"] == ["ens2f0", "ens2f1"]
    lab = 'name = "l"\n[hosts.a]\nrole = "server"\n[hosts.b]\nrole = "client"\n[study]\nkind = "packets"\n'
    with pytest.raises(InputError, match="the lab names its back-to-back ports"):
        parse_plan(lab + 'interfaces = { a = ["x"], b = ["y"] }\n', "l.toml")


@pytest.mark.parametrize("name, text, words", [
    ("lab.yml", "all:\n  hosts: [a, b]\n", "hosts must be a mapping"),
    ("lab.yml", "all:\n  hosts:\n    a: x\n", "variables must be a mapping"),
    ("lab.ini", "[nicbench_clients]\ngen[1:3]\n", "host ranges"),
])
def test_malformed_inventories_are_one_line_errors(tmp_path, name, text, words):
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as e:
        parse_plan(f'name = "r"\ninventory = "{name}"\n[study]\n', str(tmp_path / "p.toml"))
    assert words in e.value.one_line() and name in e.value.one_line()


def test_a_cycle_of_children_does_not_loop():
    inv = parse_ini("[a:children]\nb\n[b:children]\na\n[b]\nh1 nicbench_role=client\n")
    assert inv.host_vars("h1") == {"nicbench_role": "client"}
