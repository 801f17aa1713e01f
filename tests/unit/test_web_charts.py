"""The dashboard's interactive charts as data (web/charts.py over each
study's ChartSpec list), the page that carries them, and the charting
library fetched at build time (scripts/webassets.py)."""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from nicbench.registry import VIEWS
from nicbench.report.catalogue import summarise
from nicbench.report.timeline import point_grid
from nicbench.report.view import load_run
from nicbench.store.archive import Archive
from nicbench.store.location import parse_store
from nicbench.store.runs import DB
from nicbench.store.transfer import add_legacy
from nicbench.web.app import CSP, create_app
from nicbench.web.charts import chart_data

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures"
STUDIES = ("tcp", "udp", "https", "storage", "packets", "latency")


def _rows(kind: str) -> list[dict]:
    return VIEWS[kind].rows(load_run(FIXTURES / "runs" / kind, VIEWS))


def test_tcp_draws_one_chart_per_direction_with_the_rows_numbers():
    rows = _rows("tcp")
    charts = {c["id"]: c for c in chart_data(VIEWS["tcp"].charts, [("", rows)])}
    assert set(charts) == {"throughput-tx", "throughput-rx", "throughput-bidir", "cpu-tx", "cpu-rx", "cpu-bidir"}
    for direction in ("tx", "rx", "bidir"):
        c = charts[f"throughput-{direction}"]
        mine = sorted((r for r in rows if r["direction"] == direction), key=lambda r: r["io_size"])
        assert c["x"] == [float(r["io_size"]) for r in mine] == [8192.0, 131072.0]
        [line] = c["series"]
        assert line["label"] == "3 connections"
        assert line["y"] == [r["gbps_median"] for r in mine]
        assert line["low"] == [r["gbps_min"] for r in mine] and line["high"] == [r["gbps_max"] for r in mine]
        assert line["points"] == [r["point"] for r in mine]
        assert c["ceiling"] == [r["ceiling_gbps"] for r in mine]
    assert charts["cpu-rx"]["ceiling"] is None


@pytest.mark.parametrize("kind", STUDIES)
def test_no_line_joins_points_of_different_splits_or_series(kind):
    """tx, rx and bidir (or read and write, udp and tcp) are never one line; every
    value of a line is its point's own figure, scaled to the chart's unit."""
    spec_of = {s.name: s for s in VIEWS[kind].charts}
    rows = {r["point"]: r for r in _rows(kind)}
    charts = chart_data(VIEWS[kind].charts, [("", list(rows.values()))])
    assert charts, kind
    for c in charts:
        spec = spec_of[c["id"].split("-", 1)[0]]
        splits = {tuple(rows[p][k] for k in spec.split) for line in c["series"] for p in line["points"] if p}
        assert len(splits) == 1, (c["id"], splits)
        for line in c["series"]:
            keys = {tuple(rows[p][k] for k in spec.series) for p in line["points"] if p}
            assert len(keys) == 1, (c["id"], line["label"], keys)
            for x, y, p in zip(c["x"], line["y"], line["points"], strict=True):
                if p is not None:
                    assert rows[p][spec.x] == x and y == pytest.approx(rows[p][spec.y] * spec.scale, rel=1e-12)
                else:
                    assert y is None


def test_several_runs_get_a_line_each_named_by_run():
    rows = _rows("tcp")
    other = [{**r, "gbps_median": r["gbps_median"] / 2} for r in rows]
    [c] = [c for c in chart_data(VIEWS["tcp"].charts, [("run-a", rows), ("run-b", other)])
           if c["id"] == "throughput-tx"]
    assert [s["label"] for s in c["series"]] == ["run-a: 3 connections", "run-b: 3 connections"]
    assert [s["run"] for s in c["series"]] == ["run-a", "run-b"]
    assert c["series"][1]["y"] == [y / 2 for y in c["series"][0]["y"]]


def test_a_row_without_a_figure_or_a_size_is_left_out():
    rows = _rows("tcp")
    broken = [{**rows[0], "gbps_median": None}, {**rows[1], "io_size": "auto"}, *rows[2:]]
    charts = {c["id"]: c for c in chart_data(VIEWS["tcp"].charts[:1], [("", broken)])}
    got = {p for c in charts.values() for s in c["series"] for p in s["points"] if p}
    assert got == {r["point"] for r in rows[2:]}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("charts")
    shutil.copytree(FIXTURES / "runs" / "tcp", tmp / "tcp")
    with Archive.open(tmp / "arch") as a:
        run_id = add_legacy(a, tmp / "tcp").run_id
        assert run_id
        summarise(a, run_id, VIEWS)
    app = create_app(parse_store(tmp / "arch"), token="t" * 20, allowed_hosts=["127.0.0.1"], cache_root=tmp / "c")
    with TestClient(app, base_url="http://127.0.0.1:8787") as c:
        yield c, run_id


def test_the_run_page_carries_the_chart_data_as_json_and_the_library_from_static(client):
    c, run_id = client
    r = c.get(f"/run/{run_id}")
    assert r.status_code == 200 and r.headers["content-security-policy"] == CSP
    block = re.search(r'<script type="application/json" id="chart-data">(.*?)</script>', r.text, re.S)
    assert block
    shown = json.loads(block.group(1))
    assert shown == json.loads(json.dumps(chart_data(VIEWS["tcp"].charts, [("", _rows("tcp"))])))
    for src in ("/static/vendor/uPlot.iife.min.js", "/static/vendor/uPlot.min.css", "/static/charts.js"):
        assert src in r.text
        got = c.get(src)
        assert got.status_code == 200 and got.headers["content-security-policy"] == CSP and got.content
    # every point's timeline and limit is one click away: the chart's points name their details
    for p in (p for ch in shown for s in ch["series"] for p in s["points"] if p):
        assert f'data-point="{p}"' in r.text


def test_json_in_the_page_cannot_close_its_script_block():
    """Jinja's tojson escapes <, > and & : a label with markup stays data."""
    env = create_app.__globals__["jinja2"].Environment(autoescape=True)
    out = env.from_string("{{ x | tojson }}").render(x=[{"label": "</script><script>alert(1)</script>"}])
    assert "</script>" not in out and json.loads(out)[0]["label"].startswith("</script>")


# ---- the charting library, fetched at build time ----
def _webassets():
    spec = importlib.util.spec_from_file_location("webassets", ROOT / "scripts" / "webassets.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_pinned_library_is_in_the_package_and_a_changed_file_is_noticed(tmp_path):
    w = _webassets()
    assert w.current(), "run scripts/install.sh (or python3 scripts/webassets.py) first"
    copy = tmp_path / "vendor"
    shutil.copytree(w.DEST, copy)
    assert w.current(copy)
    (copy / "uPlot.iife.min.js").write_text("window.evil = 1;")
    assert not w.current(copy)
    (copy / "VERSION.json").unlink()
    assert not w.current(copy)


def test_a_tarball_that_is_not_the_pinned_one_is_refused(tmp_path):
    w = _webassets()
    fake = tmp_path / "uplot-1.6.32.tgz"
    fake.write_bytes(b"not the registry's file")
    with pytest.raises(w.Failed, match="is not the pinned"):
        w._verify(fake)
    good = "sha512-" + base64.b64encode(hashlib.sha512(fake.read_bytes()).digest()).decode()
    assert good != w.INTEGRITY


def test_compare_draws_a_line_per_run_and_gives_each_point_its_interval(tmp_path):
    """Two copies of the recorded latency run (two repeats a point): the study's
    charts carry one line per run and series, the table a Welch interval per point."""
    with Archive.open(tmp_path / "arch") as a:
        ids = []
        for name in ("one", "two"):
            shutil.copytree(FIXTURES / "runs" / "latency", tmp_path / name)
            if name == "two":
                db = sqlite3.connect(tmp_path / name / DB)
                db.execute("UPDATE meta SET value = ? WHERE key = 'run_id'", (json.dumps("20261123-050000-lat-two"),))
                db.commit()
                db.close()
            rid = add_legacy(a, tmp_path / name).run_id
            assert rid
            ids.append(rid)
    assert ids[0] != ids[1]
    app = create_app(parse_store(tmp_path / "arch"), token="t" * 20, allowed_hosts=["127.0.0.1"],
                     cache_root=tmp_path / "c")
    with TestClient(app, base_url="http://127.0.0.1:8787") as c:
        r = c.get(f"/compare?run={ids[0]}&run={ids[1]}")
        assert r.status_code == 200, r.text[-500:]
        shown = json.loads(re.search(r'id="chart-data">(.*?)</script>', r.text, re.S).group(1))
        runs = {s["run"] for ch in shown for s in ch["series"]}
        assert runs == set(ids)
        for ch in shown:
            by_run = {}
            for s in ch["series"]:
                by_run.setdefault(s["label"].split(": ", 1)[1], []).append(s["y"])
            assert all(len(v) == 2 and v[0] == v[1] for v in by_run.values())     # the same run twice
        # the same values: a zero difference, its interval around zero
        assert r.text.count("+0.00 % [") == 16
        assert c.get("/compare?" + "&".join(f"run={ids[0]}" for _ in range(7))).status_code == 400


def test_a_points_timeline_as_json_is_the_reports_grid(client):
    c, run_id = client
    view = load_run(FIXTURES / "runs" / "tcp", VIEWS)
    t, g, notes = point_grid(view, "rx/c3/io128K")
    assert g is not None
    r = c.get(f"/run/{run_id}/timeline", params={"point": "rx/c3/io128K"})
    assert r.status_code == 200 and r.headers["content-security-policy"] == CSP
    got = r.json()
    assert got["trial"] == t.trial_id and got["t"] == pytest.approx(g.edges[:-1]) and got["notes"] == notes
    [(panel, lines)] = g.panels
    assert got["panels"][0]["ylabel"] == panel.ylabel == "Gbit/s"
    shown = {ln["label"]: ln["values"] for ln in got["panels"][0]["lines"]}
    assert list(shown) == list(lines) == ["c1 rx", "c2 rx", "c3 rx"]
    for label, ys in lines.items():
        assert shown[label] == pytest.approx(ys)
    assert [ln["label"] for ln in got["panels"][1]["lines"]] == [state for _, state, _ in g.cpu]
    assert [pytest.approx(list(w)) for w in g.windows] == got["windows"]
    assert c.get(f"/run/{run_id}/timeline", params={"point": "<b>nope</b>"}).status_code == 404
    page = c.get(f"/run/{run_id}").text
    assert f'data-src="/run/{run_id}/timeline?point=rx/c3/io128K"' in page
