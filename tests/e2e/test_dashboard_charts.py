"""The dashboard's interactive charts in a real browser (headless Debian
chromium): a run's page draws the study's own figures from the archive (read
back from the chart's data, not its pixels), hover shows a point's values,
a drag zooms, a legend click hides a line, a click on a point opens its
timeline and limit, the view survives as a URL, a chart downloads as PNG,
and the compare page draws one line per run.  No page logs a console error
(a script or style the CSP refused would).  Screenshots are kept under the
directory printed at the start."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest
from browser import artefacts, chromium, console_errors, served
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from nicbench.registry import VIEWS
from nicbench.report.catalogue import summarise
from nicbench.report.timeline import point_grid
from nicbench.report.view import load_run
from nicbench.store.archive import Archive
from nicbench.store.runs import DB
from nicbench.store.transfer import add_legacy

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def shots(request):
    d = artefacts() / "charts"
    d.mkdir(parents=True, exist_ok=True)
    with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
        print(f"\nscreenshots of the dashboard chart tests: {d}")
    return d


def _copy(tmp: Path, kind: str, run_id: str | None = None) -> Path:
    d = tmp / f"{kind}-{run_id or 'orig'}"
    shutil.copytree(FIXTURES / "runs" / kind, d)
    if run_id:
        db = sqlite3.connect(d / DB)
        db.execute("UPDATE meta SET value = ? WHERE key = 'run_id'", (json.dumps(run_id),))
        db.execute("UPDATE facts SET value = ? WHERE key = 'kernel'", (json.dumps("6.19.0-candidate"),))
        db.commit()
        db.close()
    return d


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The recorded TCP run, the same run again on another kernel, the recorded latency run."""
    tmp = tmp_path_factory.mktemp("charts")
    ids = []
    with Archive.open(tmp / "arch") as a:
        for d in (_copy(tmp, "tcp"), _copy(tmp, "tcp", "20261123-030000-golden-tcp-b"), _copy(tmp, "latency")):
            run_id = add_legacy(a, d).run_id
            assert run_id
            summarise(a, run_id, VIEWS)
            ids.append(run_id)
    with served(tmp / "arch", tmp / "cache") as url:
        yield url, ids, tmp


@pytest.fixture(scope="module")
def browser(site):
    with chromium() as d:
        d.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow",
                                                          "downloadPath": str(site[2] / "downloads")})
        yield d


def _charts(d) -> dict:
    """Every chart as drawn: uPlot's own series labels, data and x scale."""
    WebDriverWait(d, 60).until(lambda d: d.execute_script(
        "return window.nicbenchCharts && Object.keys(window.nicbenchCharts).length > 0"))
    return d.execute_script("""
        const out = {};
        for (const [id, u] of Object.entries(window.nicbenchCharts)) {
          out[id] = {labels: u.series.map(s => s.label), show: u.series.map(s => s.show), data: u.data,
                     min: u.scales.x.min, max: u.scales.x.max};
        }
        return out;""")


def _fragment(d) -> dict[str, str]:
    h = d.execute_script("return window.location.hash").lstrip("#")
    return dict(kv.split("=", 1) for kv in h.split("&") if "=" in kv)


def _full(d, path: Path) -> None:
    h = d.execute_script("return document.documentElement.scrollHeight")
    d.set_window_size(1400, min(max(900, h + 40), 6000))
    d.save_screenshot(str(path))
    d.set_window_size(1400, 1800)


def _at(d, chart: str, series: int, idx: int) -> tuple[float, float]:
    """Where point ``idx`` of ``series`` is, from the centre of the chart's plot area (CSS px)."""
    return d.execute_script("""
        const u = window.nicbenchCharts[arguments[0]];
        const x = u.valToPos(u.data[0][arguments[2]], "x"), y = u.valToPos(u.data[arguments[1]][arguments[2]], "y");
        return [x - u.over.clientWidth / 2, y - u.over.clientHeight / 2];""", chart, series, idx)


def _over(d, chart: str):
    return d.find_element(By.CSS_SELECTOR, f"#chart-{chart} .u-over")


def test_a_runs_page_draws_the_studys_figures_from_the_archive(site, browser, shots):
    url, ids, _ = site
    browser.get(f"{url}/run/{ids[0]}")
    drawn = _charts(browser)
    rows = VIEWS["tcp"].rows(load_run(FIXTURES / "runs" / "tcp", VIEWS))
    assert set(drawn) == {f"{m}-{d}" for m in ("throughput", "cpu") for d in ("tx", "rx", "bidir")}
    for direction in ("tx", "rx", "bidir"):
        mine = sorted((r for r in rows if r["direction"] == direction), key=lambda r: r["io_size"])
        c = drawn[f"throughput-{direction}"]
        # x: the IO sizes; one line (3 connections) of this direction's points only; the ceiling dashed
        assert c["labels"] == ["IO size (bytes)", "3 connections", "line-rate ceiling"]
        assert c["data"][0] == [r["io_size"] for r in mine]
        assert c["data"][1] == pytest.approx([r["gbps_median"] for r in mine], rel=1e-12)
        assert c["data"][2] == pytest.approx([r["ceiling_gbps"] for r in mine], rel=1e-12)
        assert drawn[f"cpu-{direction}"]["data"][1] == pytest.approx([r["cores_busy"] for r in mine], rel=1e-12)
    assert console_errors(browser) == []
    _full(browser, shots / "run-charts.png")


def test_hover_zoom_toggle_and_click_and_the_url_keeps_them(site, browser, shots):
    url, ids, _ = site
    browser.get(f"{url}/run/{ids[0]}")
    drawn = _charts(browser)["throughput-rx"]
    # hover the second point: the readout names its size and value (4 significant digits, as drawn)
    dx, dy = _at(browser, "throughput-rx", 1, 1)
    over = _over(browser, "throughput-rx")
    ActionChains(browser).move_to_element_with_offset(over, round(dx), round(dy)).perform()
    WebDriverWait(browser, 10).until(lambda d: d.find_element(By.CSS_SELECTOR, "#chart-throughput-rx .readout").text)
    readout = browser.find_element(By.CSS_SELECTOR, "#chart-throughput-rx .readout").text
    y = drawn["data"][1][1]
    assert readout.startswith("128K") and f"3 connections: {float(f'{y:.4g}'):g}" in readout, readout
    assert "% of ceiling" in readout
    legend = browser.find_elements(By.CSS_SELECTOR, "#chart-throughput-rx .u-legend .u-series .u-value")
    assert legend[1].text == f"{float(f'{y:.4g}'):g}"
    # a click on the point opens its timeline and limit, and names it in the URL
    ActionChains(browser).click().perform()
    point = "rx/c3/io128K"
    WebDriverWait(browser, 10).until(lambda d: _fragment(d).get("point", "").replace("%2F", "/") == point)
    opened = [e.get_attribute("data-point") for e in browser.find_elements(By.CSS_SELECTOR, "details[open]")]
    assert opened == [point]
    # drag from a quarter to three quarters of the width: x zooms in, the URL says so
    w = over.size["width"]
    ActionChains(browser).move_to_element_with_offset(over, -w // 4, 0).click_and_hold() \
        .move_by_offset(w // 2, 0).release().perform()
    z = WebDriverWait(browser, 10).until(lambda d: _fragment(d).get("z.throughput-rx"))
    zoomed = _charts(browser)["throughput-rx"]
    lo, hi = (float(v) for v in z.replace("%2C", ",").split(","))
    assert drawn["min"] < zoomed["min"] < zoomed["max"] < drawn["max"]
    assert lo == pytest.approx(zoomed["min"], rel=1e-5) and hi == pytest.approx(zoomed["max"], rel=1e-5)
    # a legend click hides the line
    browser.find_elements(By.CSS_SELECTOR, "#chart-throughput-rx .u-legend .u-series th")[1].click()
    WebDriverWait(browser, 10).until(lambda d: _fragment(d).get("h.throughput-rx") == "1")
    _full(browser, shots / "run-zoomed.png")
    # the URL reproduces the view: zoom, hidden line, open point
    link = browser.current_url
    browser.get("about:blank")
    browser.get(link)
    again = _charts(browser)["throughput-rx"]
    assert again["min"] == pytest.approx(zoomed["min"], rel=1e-5) and again["max"] == pytest.approx(zoomed["max"],
                                                                                                     rel=1e-5)
    assert again["show"][1] is False and _charts(browser)["throughput-tx"]["show"][1] is True
    assert [e.get_attribute("data-point") for e in browser.find_elements(By.CSS_SELECTOR, "details[open]")] == [point]
    # a double click shows all again, and the URL forgets the zoom
    ActionChains(browser).double_click(_over(browser, "throughput-rx")).perform()
    WebDriverWait(browser, 10).until(lambda d: "z.throughput-rx" not in _fragment(d))
    assert console_errors(browser) == []


def test_a_chart_downloads_as_png(site, browser, shots):
    url, ids, tmp = site
    browser.get(f"{url}/run/{ids[0]}")
    _charts(browser)
    browser.find_element(By.CSS_SELECTOR, "#chart-throughput-tx button.png").click()
    want = tmp / "downloads" / "golden-tcp-throughput-tx.png"
    deadline = time.monotonic() + 30
    while not want.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert want.exists(), sorted(p.name for p in (tmp / "downloads").glob("*"))
    data = want.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    shutil.copy(want, shots / want.name)
    assert console_errors(browser) == []


def test_compare_draws_a_line_per_run_with_each_points_interval(site, browser, shots):
    url, ids, _ = site
    browser.get(f"{url}/compare?run={ids[0]}&run={ids[1]}#z.throughput-tx=9000,120000")
    drawn = _charts(browser)
    c = drawn["throughput-tx"]
    assert c["labels"] == ["IO size (bytes)", f"{ids[0]}: 3 connections", f"{ids[1]}: 3 connections",
                           "line-rate ceiling"]
    assert c["data"][1] == c["data"][2]                 # the same measurements, under another kernel
    assert (c["min"], c["max"]) == (9000, 120000)       # the zoom the URL asked for
    table = browser.find_element(By.ID, "compare").text
    assert table.count("n=1") == 12 and "needs 2 ok repeats a side" in table
    assert "6.19.0-candidate" in browser.find_element(By.ID, "differences").text
    _full(browser, shots / "compare-charts.png")
    assert console_errors(browser) == []


def test_latency_figures_per_protocol(site, browser, shots):
    url, ids, _ = site
    browser.get(f"{url}/run/{ids[2]}")
    drawn = _charts(browser)
    assert set(drawn) == {"p99-udp", "p99-tcp", "p50-udp", "p50-tcp"}
    rows = VIEWS["latency"].rows(load_run(FIXTURES / "runs" / "latency", VIEWS))
    c = drawn["p99-tcp"]
    for i, label in enumerate(c["labels"][1:], start=1):
        engine, condition = label.split()
        mine = sorted((r for r in rows if r["protocol"] == "tcp" and r["engine"] == engine
                       and r["condition"] == condition), key=lambda r: r["message_size"])
        assert c["data"][i] == pytest.approx([r["p99_s"] * 1e6 for r in mine], rel=1e-12)
    assert console_errors(browser) == []
    _full(browser, shots / "latency-charts.png")


def test_a_points_timeline_draws_its_intervals_and_moves_in_step(site, browser, shots):
    url, ids, _ = site
    point = "rx/c3/io128K"
    browser.get(f"{url}/run/{ids[0]}#point={point}")           # the URL opens the point
    WebDriverWait(browser, 60).until(lambda d: d.execute_script(
        "const t = window.nicbenchTimelines && window.nicbenchTimelines[arguments[0]]; return t && t.length",
        point))
    drawn = browser.execute_script("""
        return window.nicbenchTimelines[arguments[0]].map(u => ({labels: u.series.map(s => s.label),
                                                                  data: u.data}));""", point)
    _, g, _ = point_grid(load_run(FIXTURES / "runs" / "tcp", VIEWS), point)
    assert g is not None and len(drawn) == 3                  # throughput, cores busy, counters
    [(_, lines)] = g.panels
    first = drawn[0]
    assert first["labels"][1:] == list(lines)
    assert first["data"][0][:-1] == pytest.approx(g.edges[:-1])
    for i, ys in enumerate(lines.values(), start=1):
        assert first["data"][i][:-1] == pytest.approx(ys)      # the last value repeats: the step's end
    assert drawn[1]["labels"][1:] == [state for _, state, _ in g.cpu]
    # hovering one panel moves the others' cursors to the same interval
    over = browser.find_elements(By.CSS_SELECTOR, f"details[data-point='{point}'] .u-over")[0]
    ActionChains(browser).move_to_element_with_offset(over, 0, 0).perform()
    idxs = WebDriverWait(browser, 10).until(lambda d: d.execute_script(
        "const i = window.nicbenchTimelines[arguments[0]].map(u => u.cursor.idx);"
        "return i.every(x => x !== null && x === i[0]) ? i : null;", point))
    assert len(idxs) == 3
    browser.find_element(By.CSS_SELECTOR, f"details[data-point='{point}']").screenshot(
        str(shots / "timeline.png"))
    assert console_errors(browser) == []
