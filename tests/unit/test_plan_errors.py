"""A newcomer's plan mistakes get the message that names the real mistake:
unknown tables and keys first with the name they most likely meant, allowed
values with the closest one, TOML syntax with a hint that fits, a default the
user never wrote named as a default."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from nicbench.core.errors import InputError
from nicbench.plan import parse_plan

PLAN = """name = "t"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[study]
kind = "tcp"
"""


def err(text: str) -> str:
    with pytest.raises(InputError) as e:
        parse_plan(text, "plan.toml")
    return e.value.one_line()


def test_a_misspelt_table_is_reported_first_and_its_missing_twin_is_not_a_second_problem():
    msg = err(PLAN.replace("[study]", "[studdy]"))
    assert "plan.toml: studdy: unknown table [studdy] (did you mean [study]?)" in msg
    assert "Field required" not in msg and "more problem" not in msg


def test_unknown_names_come_before_other_problems():
    # the duration is also wrong; the typo is what the user must see first
    msg = err(PLAN + 'durration = 3\nconnections = [0]\n')
    assert "study.durration: unknown key 'durration' (did you mean 'duration'?)" in msg
    assert "(and 1 more problem(s))" in msg


@pytest.mark.parametrize("edit, needle", [
    (('role = "client"', 'rol = "client"'), "hosts.c1.rol: unknown key 'rol' (did you mean 'role'?)"),
    (("[study]", '[link]\nspeeed = "1G"\n[study]'), "link.speeed: unknown key 'speeed' (did you mean 'speed'?)"),
    (('kind = "tcp"', 'kind = "tpc"'), "study.kind: 'tpc' is not allowed: use 'tcp', 'https', 'storage', "
                                       "'packets', 'udp' or 'latency' (did you mean 'tcp'?)"),
    (('kind = "tcp"', 'kind = "tcp"\nengine = "iperf"'), "study.engine: 'iperf' is not allowed: use 'iperf3', "
                                                         "'iperf2' or 'nbperf' (did you mean 'iperf3'?)"),
    (('kind = "tcp"', 'kind = "tcp"\ndirections = ["tx", "rxx"]'), "study.directions[1]: 'rxx' is not allowed: "
                                                                   "use 'tx', 'rx' or 'bidir' (did you mean 'rx'?)"),
])
def test_did_you_mean_for_keys_and_values(edit, needle):
    assert needle in err(PLAN.replace(*edit))


def test_nothing_close_is_suggested_as_nothing():
    msg = err(PLAN + "[study.zzz]\nq = 1\n")
    assert "unknown table [study.zzz]; allowed here:" in msg and "did you mean" not in msg


@pytest.mark.parametrize("text, hint", [
    (PLAN + 'kind = "https"\n', "a key is given twice"),
    (PLAN + '[hosts.srv]\nrole = "server"\n', "this table appears twice"),
    (PLAN + "io_sizes = [4K]\n", "strings in it need quotes"),
])
def test_toml_syntax_errors_get_a_hint_that_fits(text, hint):
    msg = err(text)
    assert "not valid TOML" in msg and "(at line" in msg and hint in msg
    if "twice" in hint:
        assert "quotes" not in msg


def test_a_default_trim_is_named_as_the_default_with_what_to_set():
    msg = err(PLAN + "duration = 1\n")
    assert "plan.toml: study.duration: 1 s leaves nothing after the default study.trim = 0.5 s" in msg
    assert "trim = 0.25" in msg
    msg = err(PLAN + "duration = 1\ntrim = 0.5\n")
    assert "study.trim = 0.5 s" in msg and "default" not in msg


def test_the_packet_study_names_its_default_trim_too():
    msg = err(PLAN.replace('kind = "tcp"', 'kind = "packets"') + "duration = 1\n")
    assert "study.duration: 1 s leaves nothing after the default study.trim = 0.5 s" in msg


def test_check_lists_every_point_and_says_where_it_runs(tmp_path):
    plan = tmp_path / "p.toml"
    plan.write_text(PLAN + 'directions = ["tx", "rx"]\nio_sizes = ["4K", "64K"]\nrepeats = 2\n')
    run = [sys.executable, "-m", "nicbench.cli.main", "check", str(plan)]
    p = subprocess.run(run, capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "the embedded lab 'lab': server srv, clients c1" in lines[0]
    assert "4 point(s) x 2 repeat(s) = 8 trials" in lines[1]
    assert [ln.strip() for ln in lines[2:]] == ["tx/c1/io4K", "tx/c1/io64K", "rx/c1/io4K", "rx/c1/io64K"]
    data = json.loads(subprocess.run(run + ["--json"], capture_output=True, text=True, cwd=ROOT,
                                     timeout=60).stdout)
    assert data["points"] == ["tx/c1/io4K", "tx/c1/io64K", "rx/c1/io4K", "rx/c1/io64K"] and data["trials"] == 8


def test_a_top_level_key_written_after_a_table_is_explained():
    msg = err(PLAN + 'tuning = "throughput"\n')
    assert "study.tuning: unknown key 'tuning'" in msg
    assert "hint: 'tuning' is a top-level key: move it above the first [table] header" in msg
