"""Regressions found, located and explained, in the lab (root): one TCP
point on a 100 Mbit/s link with a ~6 ms round trip (the standing queue of
scripts/standing-queue.py: no netem here), run three times stock, three
times under a profile that caps the server's receive buffers at 32 KiB (its
window then holds the point well under the link), and three times stock
again.  ``nicbench trend --plan`` must find the two change points at the
runs where the profile came and went and name the tuning profile as what
changed; ``--check`` fails (exit 8, JUnit failure saying it) while the
newest runs are the limited ones and passes once they recovered.  Asserted:
what nicbench decides, never how fast this shared machine was."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from xml.etree import ElementTree

import pytest
from helpers import ROOT, cli, namespaces

pytestmark = pytest.mark.lab

LAB = "e2etr"
PLAN = "e2etrend"
POINT = "rx/c1/io128K"


def plans(d):
    """The same plan twice: with the limiting profile, and stock (no tuning line)."""
    text = (ROOT / "examples" / "ab-window.toml").read_text()
    text = text.replace('name = "ab-window"', f'name = "{PLAN}"').replace('name = "abw"', f'name = "{LAB}"')
    text = text.replace("repeats = 3 ", "repeats = 1 ").replace("duration = 3\n", "duration = 2\n")
    limited, stock = d / "limited.toml", d / "stock.toml"
    limited.write_text(text)
    stock.write_text("\n".join(line for line in text.splitlines() if not line.startswith("tuning = ")) + "\n")
    return stock, limited


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    d = tmp_path_factory.mktemp("trend")
    stock, limited = plans(d)
    code, _, err = cli("lab", "up", stock)
    assert code == 0, err
    queue = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "standing-queue.py"), LAB],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.0)
    assert queue.poll() is None, queue.communicate()
    try:
        yield stock, limited, d / "store", d
    finally:
        queue.send_signal(signal.SIGTERM)
        queue.wait(timeout=10)
        cli("lab", "down", LAB)
        assert namespaces(LAB) == []


def run(plan, store) -> str:
    code, out, err = cli("run", plan, "--no-report", "--json", "--store", store)
    assert code == 0, err
    return json.loads(out)["run_id"]


def trend(store, *extra):
    code, out, err = cli("trend", "--plan", PLAN, "--json", "--store", store, *extra)
    doc, _ = json.JSONDecoder().raw_decode(out)
    [p] = doc["points"]
    assert p["point"] == POINT
    return code, doc, p, err


def test_the_profile_is_found_where_it_came_and_went_and_named(lab):
    stock, limited, store, d = lab
    ids = [run(stock, store) for _ in range(3)] + [run(limited, store) for _ in range(3)]
    # the newest runs are the limited ones: the gate fails, saying where and why
    junit = d / "trend.xml"
    code, doc, p, err = trend(store, "--check", "--junit", junit)
    assert code == 8, err
    assert doc["flagged"] == [POINT] and p["status"] == "regression"
    [drop] = p["change_points"]
    assert (drop["run_before"], drop["run_after"], drop["direction"]) == (ids[2], ids[3], "regression"), drop
    assert drop["changes"][0]["what"] == "tuning profile"
    assert (drop["changes"][0]["before"], drop["changes"][0]["after"]) == ("stock", "small-buffers")
    [case] = ElementTree.parse(junit).getroot().iter("testcase")
    fail = case.find("failure")
    assert fail is not None and "tuning profile stock -> small-buffers" in fail.get("message", "")
    # three stock runs more: both change points, at the right runs, each naming the profile
    ids += [run(stock, store) for _ in range(3)]
    code, doc, p, err = trend(store, "--check")
    assert code == 0, err
    assert p["status"] == "improvement" and doc["flagged"] == []
    drop, back = p["change_points"]
    assert (drop["run_after"], drop["direction"]) == (ids[3], "regression")
    assert (back["run_before"], back["run_after"], back["direction"]) == (ids[5], ids[6], "improvement")
    assert (back["changes"][0]["what"], back["changes"][0]["before"], back["changes"][0]["after"]) == (
        "tuning profile", "small-buffers", "stock")
    # the profile leads the plan's ranking, and the limited runs' stored verdicts say window
    assert doc["ranking"][0]["what"] == "tuning profile"
    assert "window" in drop["verdicts_after"], drop
