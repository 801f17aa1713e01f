"""The dashboard in a real browser (headless Debian chromium): the runs
page with 1,000 runs, a run's report, compare, trend with its regression
flag, hostile text staying text, a run with partial points and an imported
run shown for what they are (the live lab run's page: test_archive_lab.py).
Screenshots are kept under the directory printed at the start."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
import time
from pathlib import Path

import pytest
from browser import artefacts, chromium, served
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from nicbench.cli.main import main
from nicbench.records import Fact, HostFacts, RunInfo, TrialRecord, TrialSpec
from nicbench.registry import VIEWS
from nicbench.report.catalogue import summarise
from nicbench.store.archive import Archive
from nicbench.store.runs import DB
from nicbench.store.transfer import add_legacy
from nicbench.store.writer import RunWriter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_archive_partial import lose_c2, run_once  # noqa: E402 - a run on fake hosts whose points lost c2

from archive_synth import seed  # noqa: E402 - tests/ holds the synthesizer the bench shares

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EVIL = '<script>window.pwned=1</script><img src=x onerror="window.pwned=2">'


@pytest.fixture(scope="module")
def shots(request):
    d = artefacts()
    with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
        print(f"\nscreenshots of the dashboard tests: {d}")
    return d


def _second_tcp_run(tmp: Path) -> Path:
    """The recorded TCP run again, as another run on another kernel (to compare)."""
    d = tmp / "old-tcp-b"
    shutil.copytree(FIXTURES / "runs" / "tcp", d)
    db = sqlite3.connect(d / DB)
    db.execute("UPDATE meta SET value = ? WHERE key = 'run_id'", (json.dumps("20261123-030000-golden-tcp-b"),))
    db.execute("UPDATE meta SET value = ? WHERE key = 'created'", (json.dumps(time.time() - 60),))
    db.execute("UPDATE facts SET value = ? WHERE key = 'kernel'", (json.dumps("6.19.0-candidate"),))
    db.commit()
    db.close()
    return d


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """1,000 runs: synthetic ones (the newest 40 % down), two recorded TCP
    runs, one whose points lost a client, one imported, one with hostile text."""
    tmp = tmp_path_factory.mktemp("dash")
    shutil.copytree(FIXTURES / "runs" / "tcp", tmp / "old-tcp")
    partial = run_once(tmp / "arch", lose_c2)
    with pytest.raises(SystemExit) as e:
        main(["import", "--store", str(tmp / "arch"), "--name", "by-hand", str(FIXTURES / "iperf3/3.12/rx_p2.json")])
    assert e.value.code in (0, None)
    with Archive.open(tmp / "arch") as a:
        [imported] = [r.run_id for r in a.runs() if r.source == "import"]
        seed(a, 995, samples=0, metrics=("gbps", "cpu_pct"), start=time.time() - 2000 * 3600, drop_last=0.6)
        ids = []
        for d in (tmp / "old-tcp", _second_tcp_run(tmp)):
            run_id = add_legacy(a, d).run_id
            assert run_id
            summarise(a, run_id, VIEWS)
            ids.append(run_id)
        info = RunInfo("20261123-040000-hostile-0001", EVIL, "tcp", time.time(), "", "plan", "0",
                       {"trim": 0.0, "warnings": [EVIL]})
        w = RunWriter.create(a, info, total=1)
        w.write_facts([HostFacts(EVIL, "server", 1.0, (Fact("kernel", EVIL),))])
        w.write_trial(TrialRecord(TrialSpec("t0001", 0, "tcp", EVIL, 0, {}), "failed", 1.0, 2.0, EVIL), [], [])
        w.finish("done-with-failures")
        assert a.count() == 1000
    with served(tmp / "arch", tmp / "cache") as url:
        yield url, ids, info.run_id, partial, imported


@pytest.fixture(scope="module")
def browser():
    with chromium() as d:
        yield d


def _full(d, path: Path) -> None:
    """A screenshot of the whole page (the window grown to its height)."""
    h = d.execute_script("return document.documentElement.scrollHeight")
    d.set_window_size(1400, min(max(900, h + 40), 6000))
    d.save_screenshot(str(path))
    d.set_window_size(1400, 1800)


def test_runs_page_with_a_thousand_runs(site, browser, shots):
    url, ids, *_ = site
    t0 = time.monotonic()
    browser.get(url + "/")
    load_s = time.monotonic() - t0
    assert browser.find_element(By.ID, "total").text == "1000 runs"
    rows = browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
    # one page of 50, whatever the archive holds (how long this shared machine took to
    # render it is printed, not asserted)
    assert len(rows) == 50, len(rows)
    print(f"nicbench-e2e runs page with 1000 runs: {load_s:.2f} s")
    assert "20261123-040000-hostile-0001" in rows[0].text          # newest first
    _full(browser, shots / "runs.png")
    browser.find_element(By.ID, "next").click()
    assert "page 2 of 20" in browser.find_element(By.CSS_SELECTOR, "nav.pages").text
    browser.get(url + "/?tag=build-110")
    assert browser.find_element(By.ID, "total").text == "50 runs"
    assert browser.execute_script("return window.pwned") is None


def test_open_a_run(site, browser, shots):
    url, ids, *_ = site
    browser.get(url + "/")
    browser.find_element(By.LINK_TEXT, ids[0]).click()
    # the study's figures, drawn in the page from the archive (their numbers: test_dashboard_charts.py)
    WebDriverWait(browser, 60).until(lambda d: d.execute_script(
        "return window.nicbenchCharts && Object.keys(window.nicbenchCharts).length"))
    assert sorted(browser.execute_script("return Object.keys(window.nicbenchCharts)")) == [
        f"{m}-{d}" for m in ("cpu", "throughput") for d in ("bidir", "rx", "tx")]
    assert browser.find_element(By.ID, "status").text == "done"
    assert len(browser.find_elements(By.CSS_SELECTOR, "#points tbody tr")) == 6
    assert browser.find_elements(By.CSS_SELECTOR, "#raw a")          # raw outputs listed for download
    _full(browser, shots / "run.png")


def test_compare_two_runs(site, browser, shots):
    url, ids, *_ = site
    browser.get(url + "/?study=tcp&plan=golden-tcp")
    for run_id in ids:
        browser.find_element(By.CSS_SELECTOR, f"input[value='{run_id}']").click()
    browser.find_element(By.CSS_SELECTOR, "#compare-form button").click()
    WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.ID, "compare"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#compare tbody tr")) == 6
    diffs = browser.find_element(By.ID, "differences").text
    # the kernel changed on every host: said once, with the hosts
    assert diffs.count("6.19.0-candidate") == 1 and "srv, c1, c2, c3" in diffs
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(
        "return window.nicbenchCharts && Object.keys(window.nicbenchCharts).length"))
    assert len(browser.find_elements(By.CSS_SELECTOR, "#charts figure.nb-chart canvas")) == 6
    _full(browser, shots / "compare.png")


def test_trend_flags_the_regression(site, browser, shots):
    url, *_ = site
    browser.get(url + "/trend?metric=gbps&point=tx/c1/io4K&study=tcp&last=60")
    verdict = browser.find_element(By.ID, "verdict")
    assert verdict.text.startswith("REGRESSION") and "of the 10 runs before it" in verdict.text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#trend tbody tr")) == 60
    assert browser.find_elements(By.CSS_SELECTOR, "#figure svg circle[stroke='#c00']")
    _full(browser, shots / "trend.png")


def test_hostile_text_stays_text(site, browser, shots):
    url, _, evil, *_ = site
    browser.get(f"{url}/run/{evil}")
    assert browser.execute_script("return window.pwned") is None
    assert EVIL in browser.find_element(By.TAG_NAME, "h1").text
    assert EVIL in browser.find_element(By.ID, "warnings").text
    assert not browser.find_elements(By.CSS_SELECTOR, "main img[src='x']")
    _full(browser, shots / "hostile.png")


def test_partial_and_imported_runs_say_what_they_are(site, browser, shots):
    url, _, _, partial, imported = site
    browser.get(url + "/?status=partial")
    assert browser.find_element(By.ID, "total").text == "1 run"
    [row] = browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
    assert partial in row.text and "done-with-partial-points" in row.text and "+2 partial" in row.text
    browser.find_element(By.LINK_TEXT, partial).click()
    WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.ID, "partials"))
    assert "2 partial (survivors only)" in browser.find_element(By.ID, "counts").text
    assert "c2:5201 lost" in browser.find_element(By.ID, "partials").text
    assert not browser.find_elements(By.ID, "failures")
    _full(browser, shots / "partial.png")
    browser.get(url + "/?plan=by-hand")
    [row] = browser.find_elements(By.CSS_SELECTOR, "#runs tbody tr")
    assert imported in row.text and "imported" in row.text
    browser.find_element(By.LINK_TEXT, imported).click()
    WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.ID, "imported"))
    assert browser.find_element(By.ID, "source").text.startswith("imported (nicbench import)")
    files = browser.find_element(By.ID, "imported").text
    assert "rx_p2.json" in files and "iperf3-json" in files and "3.12" in files
    _full(browser, shots / "imported.png")
