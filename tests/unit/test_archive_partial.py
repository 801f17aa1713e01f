"""Partial points and imported runs in the archive: a run whose points lost a
client (``done-with-partial-points``) and a run made by ``nicbench import``
land in the catalogue like any run; ``nicbench runs`` and its filters, trend
(and its ``--check``), the tidy export and the dashboard show them for what
they are -- a partial figure is never held against complete ones unmarked,
an imported run says it was imported and from what."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from test_archive_cli import nb
from test_session_fake import PLAN, opener, responder

from conftest import fixture_text
from nicbench.hosts.fake import FakeTransport, Script
from nicbench.plan import parse_plan
from nicbench.run.session import execute
from nicbench.store import catalogue
from nicbench.store.archive import Archive
from nicbench.store.location import parse_store
from nicbench.store.reader import RunReader
from nicbench.studies.tcp.runner import TcpRunner
from nicbench.web.app import create_app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
POINT = "tx/c4/io128K"
TOKEN = "test-token-0123456789"


def lose_c2(argv: list[str]) -> Script:
    """c2's engine server is killed mid-point: its client says so and exits 1."""
    if argv[:2] == ["iperf3", "-c"] and argv[2] == "198.18.0.3":
        return Script(stdout=fixture_text("iperf3", "3.12", "err_killed.json"), returncode=1, runtime=1.0)
    return responder(argv)


def run_once(store: Path, script=responder) -> str:
    ts = {h: FakeTransport(h, script) for h in ("srv", "c1", "c2")}
    _, open_fake = opener(ts)
    return execute(parse_plan(PLAN), PLAN, runner=TcpRunner, store=store, hosts_for=open_fake).run_id


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    """Three complete runs, then one whose points lost c2, then an import."""
    store = tmp_path_factory.mktemp("partial") / "arch"
    complete = [run_once(store) for _ in range(3)]
    partial = run_once(store, lose_c2)
    return store, complete, partial


def test_a_partial_run_is_counted_and_filtered_apart(capsys, archive):
    store, complete, partial = archive
    code, out, err = nb(capsys, "runs", "--json", "--store", store)
    assert code == 0, err
    runs = {r["run_id"]: r for r in json.loads(out)}
    assert runs[partial]["status"] == "done-with-partial-points"
    assert (runs[partial]["trials_ok"], runs[partial]["trials_partial"], runs[partial]["trials_failed"]) == (0, 2, 0)
    assert all(runs[c]["status"] == "done" and runs[c]["trials_partial"] == 0 for c in complete)
    for status in ("partial", "done-with-partial-points"):
        code, out, _ = nb(capsys, "runs", "--json", "--status", status, "--store", store)
        assert [r["run_id"] for r in json.loads(out)] == [partial]
    code, out, _ = nb(capsys, "runs", "--json", "--status", "done", "--store", store)
    assert sorted(r["run_id"] for r in json.loads(out)) == sorted(complete)
    code, out, _ = nb(capsys, "runs", "--store", store)
    head, *rows = out.splitlines()
    assert "PARTIAL" in head.split()
    [row] = [r for r in rows if r.startswith(partial)]
    assert "done-with-partial-points" in row.split()


def test_trend_marks_a_partial_point_and_check_does_not_call_it_a_regression(capsys, archive):
    store, complete, partial = archive
    code, _, err = nb(capsys, "archive", "summarise", "--store", store)
    assert code == 0, err
    code, out, err = nb(capsys, "trend", "gbps", "--point", POINT, "--check", "--json", "--store", store)
    # the survivors' figure is about half the complete ones: a regression by the numbers, not by the facts
    assert code == 0, err
    doc = json.loads(out)
    vals = {r["run_id"]: r for r in doc["runs"]}
    assert vals[partial]["survivors_only"] and not any(vals[c]["survivors_only"] for c in complete)
    assert vals[partial]["value"] < 0.75 * min(vals[c]["value"] for c in complete)
    assert doc["check"][POINT]["state"] == "partial"
    code, out, _ = nb(capsys, "trend", "gbps", "--point", POINT, "--store", store)
    assert "(partial: survivors only)" in out and "is a partial point (survivors only): not judged" in out
    code, out, _ = nb(capsys, "export", "--format", "json", "--store", store)
    rows = {r["run_id"]: r for r in json.loads(out)}
    assert (rows[partial]["n_partial"], rows[partial]["survivors_only"], rows[partial]["n_ok"]) == (2, True, 0)
    assert all((rows[c]["n_partial"], rows[c]["survivors_only"]) == (0, False) for c in complete)
    # the runs list's headline over no complete point says whose figure it is
    with Archive.open(store) as a:
        assert a.row(partial).headline_point == f"{POINT}, partial: survivors only"
        assert a.row(complete[0]).headline_point == POINT


def test_the_dashboard_shows_partial_points_and_imported_runs(capsys, archive, tmp_path):
    store, complete, partial = archive
    nb(capsys, "archive", "summarise", "--store", store)
    f = FIXTURES / "iperf3" / "3.12" / "rx_p2.json"
    code, out, err = nb(capsys, "import", "--json", "--store", store, "--name", "by-hand", f)
    assert code == 0, err
    imported = json.loads(out)["run_id"]
    code, out, _ = nb(capsys, "runs", "--json", "--store", store)
    [row] = [r for r in json.loads(out) if r["run_id"] == imported]
    assert (row["source"], row["status"], row["name"]) == ("import", "done", "by-hand")
    code, out, _ = nb(capsys, "runs", "--store", store)
    assert "tcp (imported)" in next(ln for ln in out.splitlines() if ln.startswith(imported))
    app = create_app(parse_store(store), token=TOKEN, allowed_hosts=["127.0.0.1"], cache_root=tmp_path / "cache")
    with TestClient(app, base_url="http://127.0.0.1:8787") as client:
        page = client.get("/").text
        assert "+2 partial" in page and "done-with-partial-points" in page and ">imported<" in page
        assert client.get("/?status=partial").text.count("/run/") == 1
        page = client.get(f"/run/{partial}").text
        assert "2 partial (survivors only)" in page and 'id="partials"' in page and "c2:5201 lost" in page
        assert 'id="failures"' not in page
        page = client.get(f"/run/{imported}").text
        assert "imported (nicbench import): not measured by nicbench" in page and 'id="imported"' in page
        assert str(f) in page and "iperf3-json" in page
        page = client.get("/trend", params={"metric": "gbps", "point": POINT}).text
        assert 'class="flag partial"' in page and "partial: survivors only" in page
        assert 'class="partial"' in page          # the figure's hollow mark


def test_an_archive_of_schema_1_is_upgraded_with_its_partial_counts(store_url, monkeypatch):
    """Migration 1 -> 2, on SQLite and PostgreSQL, of a catalogue holding a
    run with a partial trial: the run's partial count is filled in."""
    monkeypatch.setattr(catalogue, "SCHEMA_VERSION", 1)
    with Archive.open(store_url) as a:
        assert a.db.one("SELECT version FROM nicbench_schema") == (1,)
        with a.db.transaction():
            a.db.execute("INSERT INTO runs (run_id, name, study, source, created, status, visible, nicbench_version, "
                         "plan_text, info_meta, extra, run_dir, machine, boot_id) VALUES ('r1', 'n', 'tcp', 'plan', "
                         "1.0, 'done-with-partial-points', 1, '0', '', '{}', '{}', '/x', 'm', 'b')")
            (rid,) = a.db.one("SELECT rid FROM runs WHERE run_id = 'r1'") or (None,)
            for tid, st in (("t0001", "partial"), ("t0002", "ok")):
                a.db.execute("INSERT INTO trials (rid, trial_id, idx, point, repeat, params, status, started, ended, "
                             "meta) VALUES (?, ?, 0, 'p', 0, '{}', ?, 0, 1, '{}')", (rid, tid, st))
    monkeypatch.undo()
    with Archive.open(store_url) as a:
        assert a.schema_version() == catalogue.SCHEMA_VERSION == 5
        row = a.row("r1")
        assert (row.trials_partial, row.trials_ok) == (1, 0)     # ok counts were the writer's; partial is backfilled


def test_an_import_lands_in_the_archive_with_its_provenance(capsys, store_url):
    """On SQLite and PostgreSQL: the run, its files' provenance and their
    byte copies, listed by 'nicbench runs' and summarised for trends."""
    files = [FIXTURES / "import/iperf3/local/client_tx_p2_noserver.json",
             FIXTURES / "import/iperf3/local/server_tx_p2.json"]
    code, out, err = nb(capsys, "import", "--json", "--store", store_url, *files)
    assert code == 0, err
    doc = json.loads(out)
    code, out, err = nb(capsys, "runs", "--json", "--store", store_url)
    assert code == 0, err
    [row] = json.loads(out)
    assert (row["run_id"], row["source"], row["status"], row["trials_ok"]) == (doc["run_id"], "import", "done", 1)
    assert row["headline"]["value"] is not None                      # summarised: trends and the list read it
    with Archive.open(store_url) as a:
        r = RunReader(a, a.resolve(doc["run_id"]))
        prov = r.info().meta["imported"]
        assert [p["name"] for p in prov] == [str(f) for f in files]
        assert [p["sha256"] for p in prov] == [hashlib.sha256(f.read_bytes()).hexdigest() for f in files]
        raws = r.raw_files()
        assert [x["sha256"] for x in raws] == [p["sha256"] for p in prov]
        assert all((Path(row["run_dir"]) / x["path"]).read_bytes() == f.read_bytes()
                   for x, f in zip(raws, files, strict=True))
        assert a.runs(include_hidden=True) == a.runs()                  # nothing half-written left behind
