"""The latency study's schema: its points, and bad input as one-line errors
naming the key."""

from __future__ import annotations

import pytest

from nicbench.core.errors import InputError
from nicbench.plan import parse_plan
from nicbench.plan.matrix import trials
from nicbench.plan.studies.latency import probe_timing

BASE = """
name = "l"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
[study]
kind = "latency"
"""


def plan(extra: str):
    return parse_plan(BASE + extra, "plan.toml")


def err(extra: str) -> str:
    with pytest.raises(InputError) as e:
        plan(extra)
    line = e.value.one_line()
    assert "\n" not in line and line.startswith("nicbench: bad input: plan.toml: ")
    return line


def test_points_pair_engines_with_their_protocols_and_alternate_idle_and_loaded():
    p = plan('message_sizes = [64, "16K"]\nengines = ["sockperf", "irtt", "iperf2"]\nrepeats = 2\n'
             'load = { kind = "tcp", connections = 3 }')
    keys = [k for k, _ in p.study.points()]
    assert keys[:4] == ["udp/sockperf/m64/idle", "udp/sockperf/m64/loaded", "udp/sockperf/m16K/idle",
                        "udp/sockperf/m16K/loaded"]
    # irtt measures UDP only, iperf 2's bounce-back TCP only
    assert {k.split("/")[1] for k in keys if k.startswith("udp/")} == {"sockperf", "irtt"}
    assert {k.split("/")[1] for k in keys if k.startswith("tcp/")} == {"sockperf", "iperf2"}
    # interleaved repeats: idle and loaded of one probe run next to each other in every round
    order = [t.point for t in trials(p)]
    assert len(order) == 2 * 16 and order[0].endswith("/idle") and order[1] == order[0].replace("idle", "loaded")
    params = dict(p.study.points())["udp/irtt/m64/loaded"]
    assert params["waiting"].startswith("sleeps") and params["rate"] == 1000


def test_idle_only_without_a_load_and_the_waiting_of_back_to_back():
    p = plan('message_sizes = [64]\nrate = "max"\nprotocols = ["tcp"]')
    assert [k for k, _ in p.study.points()] == ["tcp/sockperf/m64/idle"]
    assert dict(p.study.points())["tcp/sockperf/m64/idle"]["waiting"].startswith("back to back")


def test_measured_seconds_cover_sockperfs_warm_up_and_the_loads_lead_and_tail():
    pre, run = probe_timing("sockperf", 3)
    assert (pre, run) == (pytest.approx(2.4), pytest.approx(5.2))
    p = plan('message_sizes = [64]\nduration = 3\nload = { kind = "tcp", lead = 3 }')
    # the load starts 0.6 s before sockperf, runs through it and 1 s after it
    assert p.study.measured_seconds() == pytest.approx(0.6 + 5.2 + 1.0)


@pytest.mark.parametrize("extra, words", [
    ("", "study.message_sizes: Field required"),
    ("message_sizes = []", "study.message_sizes: List should have at least 1 item"),
    ("message_sizes = [8]", "study.message_sizes: sockperf: UDP message size 8 B is below its minimum 14 B"),
    ('message_sizes = [64, "64K"]\nprotocols = ["udp"]', "UDP message size 65536 B is above its maximum 65507 B"),
    ('message_sizes = [32]\nengines = ["irtt"]\nprotocols = ["udp"]', "irtt: UDP message size 32 B is below"),
    ('message_sizes = ["256K"]\nengines = ["iperf2"]\nprotocols = ["tcp"]', "iperf --bounceback: TCP message size"),
    ('message_sizes = [64]\nload = { kind = "tcpp" }', "study.load: kind = 'tcpp': no study of that kind"),
    ('message_sizes = [64]\nload = { kind = "https" }', "kind = 'https': no study of that kind"),
    ('message_sizes = [64]\nload = { connections = 2 }', "study.load: a load needs kind = \"tcp\""),
    ('message_sizes = [64]\nconditions = ["loaded"]', "\"loaded\" points need a load"),
    ('message_sizes = [64]\nengines = ["irtt"]\nprotocols = ["udp"]\nrate = "max"', "irtt sends on a fixed interval"),
    ('message_sizes = [64]\nengines = ["iperf2"]\nprotocols = ["udp"]', "study.engines: iperf2 measures TCP only"),
    ('message_sizes = [64]\nengines = ["irtt"]', "study.protocols: no engine in study.engines measures TCP"),
    ('message_sizes = [64]\nrate = "fast"', "study.rate: 'fast' is not a rate"),
    ('message_sizes = [64]\nrate = 0', "study.rate: 0 is not a rate"),
    ('message_sizes = [64]\nprobe_clients = ["c9"]', "study.probe_clients names 'c9', which is not a client host"),
    ('message_sizes = [64]\nload = { kind = "tcp", clients = ["srv"] }', "study.load.clients names 'srv'"),
    ('message_sizes = [64]\nload = { kind = "tcp", io_size = "2M" }', "study.load.io_size: iperf3 takes blocks"),
    ('message_sizes = [64]\nduration = 1.5', "study.duration"),
])
def test_bad_input_is_one_line_naming_the_key(extra, words):
    assert words in err(extra)
