"""The dashboard without a browser (Starlette's test client): what it shows
is escaped, every response carries the CSP, a foreign Host is refused, no
endpoint reaches outside the archive, changes need the token, and a live run
streams progress from the archive as the writer commits."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from test_archive import samples, trial

from nicbench.records import Fact, HostFacts, RawOutput, RunInfo, TrialRecord, TrialSpec
from nicbench.registry import VIEWS
from nicbench.report.catalogue import summarise
from nicbench.store.archive import Archive
from nicbench.store.location import parse_store
from nicbench.store.transfer import add_legacy
from nicbench.store.writer import RunWriter
from nicbench.web.app import CSP, create_app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
EVIL = '<script>alert("x")</script><img src=x onerror=alert(1)>'
TOKEN = "test-token-0123456789"


def hostile_run(a: Archive) -> RunWriter:
    """A run whose name, hosts, kernel and tool error are markup, with a raw
    output row that points outside its directory."""
    info = RunInfo("20260101-000000-hostile-0001", EVIL, "tcp", 1.7e9, "", "plan", "0",
                   {"trim": 0.0, "warnings": [EVIL]})
    w = RunWriter.create(a, info, total=2)
    w.write_facts([HostFacts(EVIL, "server", 1.0, (Fact("kernel", EVIL), Fact("if.eth0.driver", EVIL)))])
    spec = TrialSpec("t0001", 0, "tcp", EVIL, 0, {"direction": "tx", "io_size": 4096})
    raw = w.raw_dir("t0001") / "ok.out"
    raw.write_text("real raw text\n")
    w.write_trial(TrialRecord(spec, "failed", 1.0, 2.0, EVIL), samples("t0001"), [
        RawOutput("t0001", "srv", "server", "iperf3", "stdout", w.rel(raw)),
        RawOutput("t0001", "srv", "server", "iperf3", "stderr", "../../../../../../etc/passwd")])
    w.finish("done-with-failures")
    summarise(a, info.run_id, VIEWS)
    return w


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("web")
    shutil.copytree(FIXTURES / "runs" / "tcp", tmp_path / "old-tcp")
    with Archive.open(tmp_path / "arch") as a:
        good = add_legacy(a, tmp_path / "old-tcp").run_id
        assert good is not None
        summarise(a, good, VIEWS)
        bad = hostile_run(a).info.run_id
    app = create_app(parse_store(tmp_path / "arch"), token=TOKEN, allowed_hosts=["127.0.0.1", "localhost"],
                     cache_root=tmp_path / "cache")
    with TestClient(app, base_url="http://127.0.0.1:8787") as client:
        yield client, good, bad, tmp_path


def test_what_the_pages_show_is_escaped_and_every_response_has_the_csp(site):
    client, good, bad, _ = site
    pages = ["/", f"/run/{bad}", f"/run/{good}", f"/compare?run={good}&run={bad}",
             f"/trend?metric=gbps&point={EVIL}", f"/run/{good}/report/", "/run/nope", "/static/live.js"]
    for url in pages:
        r = client.get(url)
        assert r.headers["content-security-policy"] in (CSP, r.headers["content-security-policy"]), url
        assert "script-src 'self'" in r.headers["content-security-policy"] or "sandbox" in \
            r.headers["content-security-policy"]
        assert r.headers["x-content-type-options"] == "nosniff"
        assert "<script>alert" not in r.text and "<img src=x" not in r.text, url
    page = client.get(f"/run/{bad}").text
    assert page.count("&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") >= 4     # name, host, warning, error
    assert client.get("/").text.count("&lt;script&gt;") >= 2
    assert client.get(f"/run/{good}/report/").headers["content-security-policy"].endswith("frame-ancestors 'none'")
    assert client.get("/run/nope").status_code == 404


def test_a_foreign_host_header_is_refused(site):
    client, good, _, _ = site
    for host in ("evil.example", "evil.example:8787", "127.0.0.1.evil.example"):
        r = client.get("/", headers={"host": host})
        assert r.status_code == 400 and "content-security-policy" in r.headers
    assert client.get("/", headers={"host": "localhost:8787"}).status_code == 200


def test_no_endpoint_reaches_outside_the_archive(site):
    client, good, bad, tmp_path = site
    (tmp_path / "secret.txt").write_text("secret")
    for url in [f"/run/{good}/report/..%2F..%2F..%2Fsecret.txt", f"/run/{good}/report/%2Fetc%2Fpasswd",
                "/run/..%2F..%2Fetc/report/passwd", f"/run/{good}/report/plan.toml",
                f"/run/{bad}/raw/1", f"/run/{bad}/raw/99", "/static/../app.py", "/static/%2E%2E/app.py",
                f"/run/{good}/report/index.html%00.png", f"/run/{good}/timeline?point=..%2F..%2Fsecret.txt",
                f"/run/{good}/timeline?point=%2Fetc%2Fpasswd", f"/run/{good}/timeline"]:
        r = client.get(url)
        assert r.status_code in (404, 400), url
        assert "root:" not in r.text and "secret" not in r.text
    r = client.get(f"/run/{bad}/raw/0")
    assert r.status_code == 200 and r.text == "real raw text\n" and len(r.headers["x-nicbench-sha256"]) == 64
    assert r.headers["content-disposition"].startswith("attachment")
    # the whole surface: pages (A/B pages too), the report's files, raw outputs by number, static files, one POST
    paths = sorted(getattr(rt, "path", "") for rt in client.app.routes)
    assert paths == ["/", "/ab", "/ab/{ab_id}", "/compare", "/run/{run_id}", "/run/{run_id}/events",
                     "/run/{run_id}/raw/{seq:int}", "/run/{run_id}/report/", "/run/{run_id}/report/{name}",
                     "/run/{run_id}/tag", "/run/{run_id}/timeline", "/static", "/trend"]


def test_tagging_needs_the_token_and_the_same_origin(site):
    client, good, _, _ = site
    url = f"/run/{good}/tag"
    assert client.post(url, data={"tag": "x1"}).status_code == 403
    assert client.post(url, data={"tag": "x1", "token": "wrong"}).status_code == 403
    assert client.post(url, data={"tag": "x1", "token": TOKEN},
                       headers={"origin": "http://evil.example"}).status_code == 403
    assert client.post(url, data={"tag": "<b>", "token": TOKEN}).status_code == 400
    assert client.get(url).status_code == 405 and client.put("/").status_code == 405
    r = client.post(url, data={"tag": "driver-42", "token": TOKEN}, headers={"origin": "http://127.0.0.1:8787"},
                    follow_redirects=False)
    assert r.status_code == 303
    assert "driver-42" in client.get(f"/run/{good}").text


def test_runs_compare_and_trend_pages(site):
    client, good, bad, _ = site
    runs = client.get("/?study=tcp")
    assert runs.status_code == 200 and good in runs.text and bad in runs.text
    assert " runs" in runs.text and float(runs.headers["server-timing"].split("dur=")[1]) > 0
    assert good not in client.get("/?tag=nothing").text
    cmp = client.get(f"/compare?run={good}&run={good}")
    assert cmp.status_code == 200 and 'id="chart-data"' in cmp.text
    assert "no host fact or tuning setting differs" in cmp.text
    assert client.get(f"/compare?run={good}").status_code == 400
    point = "tx/c3/io128K"
    tr = client.get(f"/trend?metric=gbps&point={point}")
    assert tr.status_code == 200 and "not enough history" in tr.text and good in tr.text
    run = client.get(f"/run/{good}")
    # the study's figures drawn live from the archive (tests/unit/test_web_charts.py); the report's PNGs stay
    assert run.status_code == 200 and 'id="chart-data"' in run.text and "/report/throughput-tx.png" not in run.text
    assert client.get(f"/run/{good}/report/throughput-tx.png").headers["content-type"] == "image/png"
    # each point's timeline sits with its verdict, not in the figures' list
    timelines = run.text[run.text.index('id="timelines"'):]
    assert "<b>tx/c3/io128K</b>" in timelines and 'limit <b class="limit">wire</b>' in timelines
    assert "/report/timeline-tx_c3_io128K.png" in timelines
    assert "timeline-" not in run.text[run.text.index('id="figures"'):run.text.index('id="timelines"')]
    assert client.get(f"/run/{good}/report/timeline-tx_c3_io128K.png").headers["content-type"] == "image/png"


def _events(lines, n: int) -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    event = None
    for line in lines:
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event:
            out.append((event, json.loads(line[6:])))
            if len(out) == n:
                return out
    return out


def test_a_live_run_streams_each_new_point_from_the_archive(site):
    client, _, _, tmp_path = site
    with Archive.open(tmp_path / "arch") as a:
        info = RunInfo("20260101-000000-live-0001", "live", "tcp", 1.8e9, "", "plan", "0", {"trim": 0.0})
        w = RunWriter.create(a, info, total=3)
        w.write_trial(trial(0), samples("t0000"), [])
        page = client.get(f"/run/{info.run_id}")
        assert 'id="live"' in page.text and "/static/live.js" in page.text and '<span id="done">1</span>' in page.text
        with client.stream("GET", f"/run/{info.run_id}/events") as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = r.iter_lines()
            [(ev, first)] = _events(lines, 1)
            assert ev == "progress" and (first["done"], first["total"], first["status"]) == (1, 3, "running")
            w.write_trial(trial(1), samples("t0001"), [])          # the writer commits: the page hears of it
            [(ev, second)] = _events(lines, 1)
            assert ev == "progress" and second["done"] == 2 and second["eta_s"] is not None
            assert "<svg" in second["figure"] and len(second["last"]) == 2
            w.write_trial(trial(2), samples("t0002"), [])
            w.finish("done")
            got = _events(lines, 2)
            assert [e for e, _ in got][-1] == "end" and got[0][1]["status"] == "done"


def test_a_storage_runs_page_shows_each_points_limit_beside_its_timeline(tmp_path):
    """Every study's points get their verdict and timeline on the run page,
    runs made before verdicts too (the stored storage run is one)."""
    shutil.copytree(FIXTURES / "runs" / "storage", tmp_path / "old-storage")
    with Archive.open(tmp_path / "arch") as a:
        rid = add_legacy(a, tmp_path / "old-storage").run_id
        assert rid is not None
        summarise(a, rid, VIEWS)
    app = create_app(parse_store(tmp_path / "arch"), token=TOKEN, allowed_hosts=["127.0.0.1"],
                     cache_root=tmp_path / "cache")
    with TestClient(app, base_url="http://127.0.0.1:8787") as client:
        page = client.get(f"/run/{rid}").text
        timelines = page[page.index('id="timelines"'):]
        assert "<b>read/bs4K</b>" in timelines and 'limit <b class="limit">cpu</b>' in timelines
        assert 'limit <b class="limit">wire</b>: read throughput' in timelines
        assert "/report/timeline-read_bs4K.png" in timelines and "checked: device: not measured" in timelines
        assert client.get(f"/run/{rid}/report/timeline-read_bs4K.png").headers["content-type"] == "image/png"
        report = client.get(f"/run/{rid}/report/").text
        assert "Timelines and limits" in report and "this run kept each initiator&#39;s total only" in report
