import glob
import os
import threading
from pathlib import Path

import pytest

from conftest import ROOT
from nicbench.core.errors import InputError
from nicbench.plan import load_plan, parse_plan
from nicbench.plan.matrix import trials

BASE = """
name = "t"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
[study]
io_sizes = ["512", "64K"]
connections = [2, 4]
directions = ["tx", "rx"]
duration = 3
omit = 1
"""


@pytest.mark.parametrize("path", sorted(glob.glob(str(ROOT / "examples" / "*.toml"))))
def test_every_example_plan_loads(path):
    plan, text = load_plan(path)
    assert plan.name and trials(plan) and text


def test_examples_exist_for_seed_000_and_002():
    names = {Path(p).name for p in glob.glob(str(ROOT / "examples" / "*.toml"))}
    assert any(n.startswith("seed000") for n in names) and any(n.startswith("seed002") for n in names)


def test_an_example_plan_drives_each_tcp_engine():
    """nbperf included: the engine that meets seed 000's start-skew goal has a
    plan to start from (every example is loaded above and checked against the
    JSON Schema in test_schema.py)."""
    plans = [load_plan(p)[0] for p in glob.glob(str(ROOT / "examples" / "*.toml"))]
    engines = {p.study.engine for p in plans if p.study.kind == "tcp"}
    assert engines == {"iperf3", "iperf2", "nbperf"}
    nbperf = load_plan(ROOT / "examples" / "seed000-tcp-nbperf.toml")[0]
    seed = load_plan(ROOT / "examples" / "seed000-tcp-multiclient.toml")[0]
    # the seed 000 replay but for its engine (and its lab, so both can be up at once)
    assert nbperf.study.model_copy(update={"engine": "iperf3", "skip_rx_copy": "auto"}) == seed.study
    assert (nbperf.link, nbperf.hosts) == (seed.link, seed.hosts) and nbperf.lab.name != seed.lab.name


def test_sizes_and_defaults():
    p = parse_plan(BASE)
    assert p.study.io_sizes == [512, 65536]
    assert p.server == "srv" and p.clients == ["c1", "c2"]
    assert len(trials(p)) == 2 * 2 * 2


def err(text):
    with pytest.raises(InputError) as e:
        parse_plan(text, "plan.toml")
    return e.value.one_line()


def test_unknown_key_names_path_and_allowed():
    msg = err(BASE.replace("omit = 1", "omit = 1\nzerocpy = true"))
    assert "plan.toml: study.zerocpy: unknown key 'zerocpy'" in msg and "zerocopy" in msg and "hint:" in msg


def test_unknown_host_key():
    msg = err(BASE.replace('[hosts.c1]\nrole = "client"', '[hosts.c1]\nrole = "client"\naddr = "x"'))
    assert "hosts.c1" in msg and "'addr'" in msg and "allowed here: role" in msg


@pytest.mark.parametrize("bad, needle", [
    ('io_sizes = ["10 Gb"]', "not a size"),
    ('io_sizes = [0]', "must be > 0"),
    ('io_sizes = ["0K"]', "must be > 0"),
    ('io_sizes = ["4K", "4096"]', "must not repeat"),
    ('io_sizes = ["8kB"]', "'8kB' is ambiguous"),
])
def test_bad_sizes(bad, needle):
    msg = err(BASE.replace('io_sizes = ["512", "64K"]', bad))
    assert "study.io_sizes" in msg and needle in msg


def test_client_that_does_not_exist():
    msg = err(BASE.replace("[study]", '[study]\nclients = ["c1", "c9"]'))
    assert "c9" in msg and "not in [hosts]" in msg


def test_bad_direction_lists_allowed():
    msg = err(BASE.replace('directions = ["tx", "rx"]', 'directions = ["up"]'))
    assert "study.directions[0]" in msg and "'tx', 'rx' or 'bidir'" in msg


def test_iperf2_cannot_zerocopy():
    msg = err(BASE.replace("[study]", '[study]\nengine = "iperf2"\nzerocopy = true'))
    assert "iperf2 has no zerocopy" in msg


def test_two_servers_rejected():
    msg = err(BASE.replace('[hosts.c2]\nrole = "client"', '[hosts.c2]\nrole = "server"'))
    assert "exactly one host" in msg


def test_trim_longer_than_duration():
    assert "nothing after trimming" in err(BASE.replace("duration = 3", "duration = 1\ntrim = 0.5"))


def test_toml_syntax_error():
    msg = err("name = t")
    assert msg.startswith("nicbench: bad input: plan.toml: not valid TOML")


def test_mtu_range():
    msg = err(BASE + "\n[link]\nmtu = 100\n")
    assert "link.mtu" in msg and "below 576" in msg and "every IPv4 host must accept" in msg
    assert "above 9216" in err(BASE + "\n[link]\nmtu = 9217\n")
    assert "from 1M" in err(BASE + '\n[link]\nspeed = "100k"\n')


def test_missing_file():
    with pytest.raises(InputError, match="not found"):
        load_plan("/nonexistent/plan.toml")


def test_interleaved_order_spreads_repeats():
    p = parse_plan(BASE.replace("omit = 1", "omit = 1\nrepeats = 2"))
    ts = trials(p)
    assert [t.repeat for t in ts[:8]] == [0] * 8 and ts[8].point == ts[0].point
    s = parse_plan(BASE.replace("omit = 1", 'omit = 1\nrepeats = 2\norder = "sequential"'))
    assert trials(s)[1].point == trials(s)[0].point


def test_quoted_duration_gets_a_hint():
    msg = err(BASE.replace("duration = 3", 'duration = "10s"'))
    assert "study.duration" in msg and "hint: write a plain number" in msg


def test_iperf3_limits_are_checked_before_anything_runs():
    assert "up to 1M" in err(BASE.replace('io_sizes = ["512", "64K"]', 'io_sizes = ["2M"]'))
    assert "whole seconds" in err(BASE.replace("duration = 3", "duration = 2.5"))
    p = parse_plan(BASE.replace("[study]", '[study]\nengine = "iperf2"').replace("duration = 3", "duration = 2.5"))
    assert p.study.duration == 2.5          # iperf2 takes fractions


def test_link_speed_strings():
    assert parse_plan(BASE + '\n[link]\nspeed = "10 Gb"\n').link.speed == 10e9
    assert parse_plan(BASE + '\n[link]\nspeed = "2500M"\nclient_speed = "1G"\n').link.client_speed == 1e9
    msg = err(BASE + '\n[link]\nspeed = "10GB"\n')
    assert "link.speed" in msg and "'B' means bytes" in msg
    assert "has no unit" in err(BASE + '\n[link]\nspeed = 10\n')


PLAN_SSH = """
name = "x"
[hosts.a]
role = "server"
ssh = "{a}"
test_ip = "192.0.2.1"
[hosts.b]
role = "client"
ssh = "b"
test_ip = "192.0.2.2"
[study]
kind = "tcp"
"""


@pytest.mark.parametrize("dest", ["-oProxyCommand=id", "-Jevil", "-F/tmp/cfg"])
def test_ssh_destinations_that_ssh_would_take_as_options_are_refused(dest):
    with pytest.raises(InputError) as e:
        parse_plan(PLAN_SSH.format(a=dest))
    assert "hosts.a.ssh" in e.value.one_line() and "ssh_args" in e.value.one_line()


def test_a_toml_nesting_bomb_is_one_line_in_no_time():
    import time
    t0 = time.monotonic()
    for bomb in ("a = " + "[" * 100000 + "]" * 100000, "a = " + "{b=" * 5000 + "1" + "}" * 5000):
        with pytest.raises(InputError, match="nested too deeply"):
            parse_plan(bomb)
    with pytest.raises(InputError, match="more than any plan needs"):
        parse_plan("# " + "x" * (2 << 20))
    assert time.monotonic() - t0 < 1.0


def test_passwords_in_an_inventory_are_said_to_be_ignored(tmp_path):
    (tmp_path / "lab.ini").write_text("[nicbench_server]\nsrv ansible_host=192.0.2.1 nicbench_test_ip=192.0.2.1 "
                                      "ansible_password=hunter2\n[nicbench_clients]\nc1 ansible_host=192.0.2.2 "
                                      "nicbench_test_ip=192.0.2.2\n")
    (tmp_path / "p.toml").write_text('name = "inv"\ninventory = "lab.ini"\n[study]\nkind = "tcp"\n')
    plan, _ = load_plan(tmp_path / "p.toml")
    assert [w for w in plan.warnings if "srv" in w and "ansible_password" in w]
    assert "hunter2" not in " ".join(plan.warnings)


def _hosts(n: int) -> str:
    return '[hosts.srv]\nrole = "server"\n' + "".join(f'[hosts.c{i}]\nrole = "client"\n' for i in range(1, n))


def test_the_lab_holds_64_hosts_and_says_what_a_too_small_subnet_holds():
    big = BASE.split("[hosts.srv]")[0] + _hosts(64) + "[study]" + BASE.split("[study]")[1]
    p = parse_plan(big)
    assert len(p.clients) == 63
    # a /26 has 62 host addresses, one kept for the switch (the SSH mode's controller): 61 hosts
    msg = err(big.replace('name = "t"', 'name = "t"\n[lab]\nsubnet = "198.18.0.0/26"'))
    assert "198.18.0.0/26 holds 61 hosts" in msg and "has 64" in msg and "shorter prefix" in msg


def test_plan_path_not_a_regular_file_is_refused_before_reading(tmp_path):
    # a FIFO with no writer blocked the read forever; /dev/zero never ends (/dev/null stands
    # for it here: the same kind of file, finite if the check is missing)
    fifo = tmp_path / "plan.toml"
    os.mkfifo(fifo)
    result: list = []

    def load() -> None:
        try:
            load_plan(fifo)
        except InputError as e:
            result.append(e)

    t = threading.Thread(target=load, daemon=True)
    t.start()
    t.join(5)
    if t.is_alive():                   # unblock the reader so the suite goes on
        with open(fifo, "w"):
            pass
        t.join(5)
        pytest.fail("load_plan blocked on a FIFO")
    assert "FIFO" in result[0].message and result[0].where == str(fifo)
    with pytest.raises(InputError, match="not a plan file: it is a character device"):
        load_plan("/dev/null")
    with pytest.raises(InputError, match="not a plan file: it is a directory"):
        load_plan(tmp_path)


def test_plan_size_is_checked_in_bytes_before_reading(tmp_path):
    big = tmp_path / "big.toml"
    big.write_text("# " + "\u00e9" * 600_000 + "\n")   # 1.2 MB in 600,002 characters
    with pytest.raises(InputError, match=r"1200003 bytes: more than any plan"):
        load_plan(big)
