"""README's "Importing what you already have": every example command runs
and prints the lines the README shows (its figures included), so the README
cannot drift from what nicbench says."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import ROOT
from nicbench.cli.main import main

SECTION = ROOT.joinpath("README.md").read_text().split("## Importing what you already have", 1)[1].split("\n## ", 1)[0]
EXAMPLES = [(m[1], m[2].splitlines()) for m in re.finditer(r"```\n\$ nicbench import (.*?)\n(.*?)```", SECTION, re.S)]


def test_every_format_has_an_example():
    shown = {f.split(": ")[1].split(" ")[0] for _, lines in EXAMPLES for f in lines[:1]}
    assert shown >= {"iperf3-json", "iperf3-text", "iperf2-csv", "iperf2-text", "fio-json", "wrk-text", "pktgen-text",
                     "trafgen-text", "netperf-text"}
    assert all("/ext/" in cmd for cmd, _ in EXAMPLES)             # third-party files only


@pytest.mark.parametrize("cmd, lines", EXAMPLES, ids=[c.split("/")[-1] for c, _ in EXAMPLES])
def test_readme_example_prints_what_the_readme_shows(capsys, monkeypatch, tmp_path, cmd, lines):
    monkeypatch.chdir(ROOT)                                          # the README's paths are relative to it
    with pytest.raises(SystemExit) as e:
        main(["import", "--store", str(tmp_path / "store"), *shlex.split(cmd)])
    out, err = capsys.readouterr()
    assert e.value.code == 0, err
    printed = out.splitlines()
    for line in lines:
        assert line in printed, f"README shows {line!r}; nicbench printed:\n{out}"
