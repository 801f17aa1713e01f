"""docs/import.md ("Importing what you already have"): every example command
runs and prints the lines the page shows (its figures included), so the
documentation cannot drift from what nicbench says."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import ROOT
from nicbench.cli.main import main

SECTION = ROOT.joinpath("docs", "import.md").read_text()
EXAMPLES = [(m[1], m[2].splitlines()) for m in re.finditer(r"```\n\$ nicbench import (.*?)\n(.*?)```", SECTION, re.S)]


def test_every_format_has_an_example():
    shown = {f.split(": ")[1].split(" ")[0] for _, lines in EXAMPLES for f in lines[:1]}
    assert shown >= {"iperf3-json", "iperf3-text", "iperf2-csv", "iperf2-text", "fio-json", "wrk-text", "pktgen-text",
                     "trafgen-text", "netperf-text", "sockperf-text", "irtt-json", "ntttcp-xml", "nuttcp-text"}
    assert all("/ext/" in cmd for cmd, _ in EXAMPLES)             # third-party files only


@pytest.mark.parametrize("cmd, lines", EXAMPLES, ids=[c.split("/")[-1] for c, _ in EXAMPLES])
def test_readme_example_prints_what_the_readme_shows(capsys, monkeypatch, tmp_path, cmd, lines):
    monkeypatch.chdir(ROOT)                                          # the page's paths are relative to it
    with pytest.raises(SystemExit) as e:
        main(["import", "--store", str(tmp_path / "store"), *shlex.split(cmd)])
    out, err = capsys.readouterr()
    assert e.value.code == 0, err
    printed = out.splitlines()
    for line in lines:
        assert line in printed, f"docs/import.md shows {line!r}; nicbench printed:\n{out}"
