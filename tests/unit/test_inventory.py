"""Ansible inventories (INI and YAML) into plan hosts, and plans of real hosts."""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

import pytest

from nicbench.core.errors import InputError
from nicbench.hosts.ansible import ansible_error, load_inventory
from nicbench.plan.inventory import (
    Inventory,
    InventoryError,
    expand_hosts,
    from_ansible_json,
    ignored_credentials,
    load,
    parse_ini,
    parse_yaml,
    plan_hosts,
    safe_yaml,
)
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


@pytest.mark.parametrize("reader", [load, load_inventory], ids=["own", "as-the-cli-reads-it"])
def test_a_plan_reads_its_inventory_relative_to_itself(tmp_path, reader):
    """Through nicbench's own parser (the plan's default reader) and through
    ``hosts.ansible.load_inventory`` (the CLI's: ansible-inventory when installed)."""
    (tmp_path / "lab.ini").write_text(INI)
    plan = tmp_path / "p.toml"
    plan.write_text('name = "r"\ninventory = "lab.ini"\n[study]\nconnections = [2]\n')
    from nicbench.plan.load import load_plan
    p, _ = load_plan(plan, read_inventory=reader)
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


@pytest.mark.parametrize("name, text, words, ansible_words", [
    ("lab.yml", "all:\n  hosts: [a, b]\n", "hosts must be a mapping", 'Invalid "hosts" entry'),
    ("lab.yml", "all:\n  hosts:\n    a: x\n", "variables must be a mapping", "expected dictionary"),
    ("lab.ini", "[nicbench_clients]\ngen[3:1:0]\n", "step must be at least 1", "range()"),
    ("lab.ini", "[nicbench_clients]\ngen1 ansible_port\n", "expected key=value host variable assignment",
     "key=value"),
])
@pytest.mark.parametrize("reader", ["own", "ansible"])
def test_malformed_inventories_are_one_line_errors(tmp_path, name, text, words, ansible_words, reader):
    """Through ansible-inventory (when installed) its own reason; through the
    fallback parser, nicbench's: either way one line naming the file."""
    if reader == "ansible" and shutil.which("ansible-inventory") is None:
        pytest.skip("ansible-inventory is not installed (scripts/install.sh installs ansible-core)")
    (tmp_path / name).write_text(text)
    with pytest.raises(InputError) as e:
        parse_plan(f'name = "r"\ninventory = "{name}"\n[study]\n', str(tmp_path / "p.toml"),
                   read_inventory=load if reader == "own" else load_inventory)
    line = e.value.one_line()
    assert (words if reader == "own" else ansible_words) in line and name in line and "\n" not in line


def test_a_cycle_of_children_is_refused_as_ansible_refuses_it():
    with pytest.raises(InventoryError, match="'a' as child to 'b' creates a recursive dependency loop"):
        parse_ini("[a:children]\nb\n[b:children]\na\n[b]\nh1 nicbench_role=client\n")


# -- inventories as Ansible reads them ------------------------------------------------

INV = Path(__file__).parent.parent / "fixtures" / "inventory"
needs_ansible = pytest.mark.skipif(shutil.which("ansible-inventory") is None,
                                   reason="ansible-inventory is not installed (apt-get install ansible-core)")


@pytest.mark.parametrize("pattern, hosts, port", [
    ("dut[2:3]", ["dut2", "dut3"], None),
    ("gen[01:03]", ["gen01", "gen02", "gen03"], None),
    ("gen[1:10:4]", ["gen1", "gen5", "gen9"], None),
    ("gen-[a:e:2]", ["gen-a", "gen-c", "gen-e"], None),
    ("r[1:2]n[a:b]", ["r1na", "r1nb", "r2na", "r2nb"], None),
    ("gen9:2209", ["gen9"], 2209),
    ("dut[2:3]:2222", ["dut2", "dut3"], 2222),
    ("[fe80::1]:22", ["fe80::1"], 22),
    ("fe80::1", ["fe80::1"], None),
])
def test_host_patterns_expand_as_in_ansible(pattern, hosts, port):
    assert expand_hosts(pattern) == (hosts, port)


@pytest.mark.parametrize("pattern, words", [
    ("h[1]", "begin:end"), ("h[01:3]", "equal widths"), ("h[1:]", "end"), ("host:", "ending in ':'"),
    ("h[a:5]", "neither numbers nor letters"), ("h[1:2", "closing"),
])
def test_bad_host_patterns_say_why(pattern, words):
    with pytest.raises(InventoryError, match=re.escape(words)):
        expand_hosts(pattern)


def _agree(own: Inventory, ans: Inventory) -> None:
    assert set(own.hosts) == set(ans.hosts)
    for h in ans.hosts:
        assert own.host_vars(h) == ans.host_vars(h), h
    for g in set(ans.groups) | set(ans.children):
        for h in ans.hosts:
            assert own.in_group(h, g) == ans.in_group(h, g), (h, g)
    assert plan_hosts(own, None) == plan_hosts(ans, None)


@pytest.mark.parametrize("lab, inv_file", [("lab-ini", "hosts.ini"), ("lab-yaml", "hosts.yml")])
def test_own_parser_agrees_with_ansible_inventory(lab, inv_file):
    """Ranges, children, group_vars/ and host_vars/ (files and directories,
    .yml/.yaml/.json), ansible_group_priority, a parent's group_vars file
    over a child's inventory vars: the fallback gives every host exactly the
    variables ansible-inventory 2.14 gave (recorded beside the fixture)."""
    own = load(INV / lab / inv_file)
    ans = from_ansible_json((INV / f"{lab}.ansible-inventory-2.14.18.json").read_text())
    assert ans.source == "ansible-inventory" and own.source == "nicbench"
    _agree(own, ans)


def test_what_the_shared_fixtures_hold():
    hosts = plan_hosts(load(INV / "lab-ini" / "hosts.ini"), None)
    assert set(hosts) == {"dut2", "dut3", "gen01", "gen02", "gen-a", "gen-c", "gen9"}
    assert hosts["dut2"]["port"] == 2200 and hosts["dut2"]["sudo"] is True          # host_vars/ file; "true"
    assert hosts["gen9"] == {"port": 2209, "test_ip": "192.168.50.99", "user": "labuser", "sudo": True,
                             "interface": "from_lab_file", "ssh": "gen9", "role": "client",
                             "ssh_args": ["-o", "ProxyJump=bastion.example"]}
    inv = load(INV / "lab-ini" / "hosts.ini")
    assert inv.host_vars("gen01")["tie"] == "alpha" and inv.host_vars("gen02")["tie"] == "beta"  # priority
    assert inv.host_vars("gen01")["tag"] == "twenty" and inv.host_vars("gen01")["speed"] == 100000
    y = load(INV / "lab-yaml" / "hosts.yml")
    assert y.host_vars("gen3")["tie"] == "rack2" and y.host_vars("gen3")["nicbench_test_ip"] == "192.168.60.3"


@needs_ansible
@pytest.mark.parametrize("lab, inv_file", [("lab-ini", "hosts.ini"), ("lab-yaml", "hosts.yml")])
def test_ansible_inventory_live_gives_what_was_recorded(lab, inv_file):
    live = load_inventory(INV / lab / inv_file)
    assert live.source == "ansible-inventory"
    _agree(load(INV / lab / inv_file), live)


@pytest.mark.parametrize("name, words", [
    ("novalue.ini", "expected key=value host variable assignment, got: ansible_port"),
    ("cycle.ini", "creates a recursive dependency loop"),
    ("undefined-child.ini", "section [lab:children] includes undefined group: nowhere"),
    ("hosts-list.yml", "hosts must be a mapping"),
])
def test_bad_inventories_are_refused_by_both_readers(name, words):
    with pytest.raises(InventoryError) as e:
        load(INV / "bad" / name)
    assert words.lower() in str(e.value).lower()
    if shutil.which("ansible-inventory"):
        with pytest.raises(InventoryError) as a:
            load_inventory(INV / "bad" / name)
        msg = str(a.value)
        assert msg.startswith("ansible-inventory refuses it: ") and "\n" not in msg
        ansible_words = {"hosts-list.yml": 'Invalid "hosts" entry for "all" group'}.get(name, words)
        assert ansible_words.lower() in msg.lower(), msg
        assert "[WARNING]" not in msg and "host- sampler" not in msg        # unwrapped, one line


def test_ansible_error_takes_the_plugin_that_fits_the_file():
    err = ("[WARNING]:  * Failed to parse /w/host-\nsampler/i.yml with auto plugin: no root\n'plugin' key found\n"
           "[WARNING]:  * Failed to parse /w/host-\nsampler/i.yml with yaml plugin: Invalid\n\"hosts\" entry\n"
           "[WARNING]: Unable to parse /w/i.yml as an inventory source\nERROR! No inventory was parsed\n")
    assert ansible_error(err, "/w/host-sampler/i.yml") == 'Invalid "hosts" entry'
    assert ansible_error("ERROR! Unexpected Exception: boom\n", "x.ini") == "Unexpected Exception: boom"


@pytest.mark.parametrize("use_ansible", [False, True])
def test_a_yaml_alias_bomb_is_refused_within_a_second(use_ansible):
    if use_ansible and shutil.which("ansible-inventory") is None:
        pytest.skip("ansible-inventory is not installed")
    t0 = time.monotonic()
    with pytest.raises(InventoryError, match="alias bomb"):
        load_inventory(INV / "bad" / "bomb.yml", use_ansible=use_ansible)
    assert time.monotonic() - t0 < 1.0


def test_an_alias_that_contains_itself_is_refused():
    with pytest.raises(InventoryError, match="refers to itself|not valid YAML"):
        safe_yaml("a: &x [1, *x]\n", "loop.yml")


def test_credentials_in_the_inventory_are_reported_as_ignored():
    inv = load(INV / "lab-ini" / "hosts.ini")
    warn = ignored_credentials(inv, sorted(inv.hosts))
    assert len(warn) == 1 and warn[0].startswith("dut2: ansible_password, ansible_become_password in the inventory "
                                                 "are ignored")
    y = load(INV / "lab-yaml" / "hosts.yml")
    assert [w.split(":")[0] for w in ignored_credentials(y, sorted(y.hosts))] == ["gen1"]
    assert "ansible_ssh_pass" in ignored_credentials(y, ["gen1"])[0]


def test_booleans_and_ports_are_read_as_ansible_reads_them():
    for text, sudo in (("yes", True), ("True", True), ("on", True), ("false", False), ("no", False)):
        hosts = plan_hosts(parse_ini(f"[nicbench_server]\nd ansible_become={text} ansible_port='22'\n"), None)
        assert hosts["d"]["sudo"] is sudo and hosts["d"]["port"] == 22
    with pytest.raises(InventoryError, match="neither true nor false"):
        plan_hosts(parse_ini("[nicbench_server]\nd ansible_become=maybe\n"), None)
    with pytest.raises(InventoryError, match="not a port number"):
        plan_hosts(parse_ini("[nicbench_server]\nd ansible_port=ssh\n"), None)


def test_dynamic_scripts_need_ansible(tmp_path):
    script = tmp_path / "inv.sh"
    script.write_text('#!/bin/sh\necho \'{"nicbench_clients": {"hosts": ["g1"]}, '
                      '"_meta": {"hostvars": {"g1": {"ansible_host": "10.203.0.5"}}}}\'\n')
    script.chmod(0o755)
    with pytest.raises(InventoryError, match="dynamic inventory script"):
        load_inventory(script, use_ansible=False)
    if shutil.which("ansible-inventory"):
        inv = load_inventory(script)
        assert plan_hosts(inv, None) == {"g1": {"ssh": "10.203.0.5", "role": "client"}}
