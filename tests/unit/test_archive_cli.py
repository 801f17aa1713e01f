"""The archive's commands: bad input is one line with its class's exit code
and writes nothing; run names cannot escape the store or forge rows; trend
--check gates CI; exports are tidy and exact."""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import socket
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from test_archive import write_run

from archive_synth import seed
from conftest import run_cli as nb
from nicbench.store.archive import Archive, PointSummary
from nicbench.store.runs import DB, RunWriter
from nicbench.store.schema import MIGRATIONS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def one_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_bad_store_urls_are_bad_input_and_write_nothing(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for url in ("postgresql://u@h:notaport/db", "mysql://u@h/db", "sqlite://elsewhere/x.sqlite", "postgresql://u@h"):
        code, _, err = nb(capsys, "runs", "--store", url)
        assert code == 2 and "bad input" in one_line(err)
    assert list(tmp_path.iterdir()) == []


def test_postgresql_refusing_the_login_or_down_is_a_store_error(capsys, pg_server, tmp_path):
    code, _, err = nb(capsys, "runs", "--store", pg_server.url(password="wrong"))
    line = one_line(err)
    assert code == 6 and "refused the login" in line and "wrong" not in line
    code, _, err = nb(capsys, "runs", "--store", f"postgresql://nbtest:x@/db?host={tmp_path}")
    assert code == 6 and "PostgreSQL unreachable" in one_line(err)


def test_an_archive_from_a_newer_nicbench_is_refused(capsys, tmp_path):
    Archive.open(tmp_path).close()
    db = sqlite3.connect(tmp_path / "archive.sqlite")
    db.execute("UPDATE nicbench_schema SET version = 99")
    db.commit()
    db.close()
    code, _, err = nb(capsys, "runs", "--store", tmp_path)
    assert code == 6 and "archive has schema 99" in one_line(err) and "upgrade nicbench" in err


def test_an_older_run_database_given_as_the_archive_says_how_to_bring_it_in(capsys, tmp_path):
    shutil.copytree(FIXTURES / "runs" / "tcp", tmp_path / "old")
    code, _, err = nb(capsys, "runs", "--store", tmp_path / "old" / DB)
    assert code == 6 and "nicbench archive add" in one_line(err)


def test_serve_on_a_port_in_use_is_one_line(capsys, tmp_path):
    Archive.open(tmp_path).close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        code, _, err = nb(capsys, "serve", "--store", tmp_path, "--port", port)
    assert code == 3 and f"port {port} is in use" in one_line(err)
    code, _, err = nb(capsys, "serve", "--store", tmp_path / "none", "--port", 0)
    assert code == 6 and "no archive here yet" in one_line(err)


def test_run_names_cannot_leave_the_store_or_forge_rows(capsys, tmp_path):
    store = tmp_path / "my store"
    f = FIXTURES / "iperf3" / "3.12" / "tx_p2.json"
    for name in ("/../../x", "../x", "a;rm -rf x", "$(touch pwned)", "a\nfake row", "", "-x", "a" * 65):
        code, _, err = nb(capsys, "import", "iperf3", f, "--name", name, "--store", store)
        assert code == 2 and "not allowed" in one_line(err)
    assert not store.exists() and not (tmp_path / "x").exists() and not Path("pwned").exists()
    code, out, err = nb(capsys, "import", "iperf3", f, "--name", "ok.name-1", "--store", store)
    assert code == 0, err
    [run_id] = re.findall(r"^run (\S+): tcp study", out, re.M)
    # the printed command is one a shell reads back as it was meant
    assert f"nicbench report {run_id} --store '{store}' renders it" in out
    # an older run directory whose name holds a newline and markup is one row, shown escaped
    old = tmp_path / "old"
    w = RunWriter.create(old, __import__("test_archive").info("x"))
    w.set_meta(name="evil\nFAKE-ROW done [red]x[/red]")
    w.finish("done")
    assert nb(capsys, "archive", "add", old, "--store", store)[0] == 0
    code, out, err = nb(capsys, "runs", "--store", store)
    lines = out.strip().splitlines()
    assert code == 0 and len(lines) == 3 and "evil\\nFAKE-ROW" in out, out
    assert all(not ln.startswith("FAKE-ROW") for ln in lines)


def test_runs_filters_print_full_ids(capsys, tmp_path):
    with Archive.open(tmp_path) as a:
        w1 = write_run(a, 1, name="alpha", tags=("build-7",))
        w2 = write_run(a, 1, name="beta")
    code, out, _ = nb(capsys, "runs", "--store", tmp_path)
    assert code == 0 and w1.info.run_id in out and w2.info.run_id in out
    code, out, _ = nb(capsys, "runs", "--store", tmp_path, "--tag", "build-7", "--kernel", "6.1*", "--json")
    assert [r["run_id"] for r in json.loads(out)] == [w1.info.run_id]
    code, out, _ = nb(capsys, "runs", "--store", tmp_path, "--plan", "beta", "--since", "1d")
    assert w2.info.run_id in out and w1.info.run_id not in out
    code, _, err = nb(capsys, "runs", "--store", tmp_path, "--since", "last tuesday")
    assert code == 2 and "--since" in one_line(err)
    code, _, err = nb(capsys, "report", "nope", "--store", tmp_path)
    assert code == 6 and "no run 'nope'" in one_line(err)


def test_trend_check_fails_on_a_regression_only(capsys, tmp_path):
    with Archive.open(tmp_path) as a:
        seed(a, 12, samples=0, metrics=("gbps", "cpu_pct"))
    code, out, err = nb(capsys, "trend", "gbps", "--point", "tx/c1/io4K", "--store", tmp_path, "--check")
    assert code == 0 and ": within" in out, err
    assert out.count("-synth-") == 12 and "kernel=6.1." in out
    with Archive.open(tmp_path) as a:
        seed(a, 1, samples=0, start=4e9, metrics=("gbps", "cpu_pct"), drop_last=0.5, rng_seed=8)
    code, out, err = nb(capsys, "trend", "gbps", "--point", "tx/c1/io4K", "--store", tmp_path, "--check",
                        "--window", "5")
    assert code == 8 and "regression" in one_line(err) and "outside the spread" in err
    # lower is better for CPU: the same drop is an improvement, not a failure
    code, out, _ = nb(capsys, "trend", "cpu_pct", "--study", "tcp", "--point", "tx/c1/io4K", "--store", tmp_path,
                      "--check")
    assert code == 0 and "improvement" in out
    code, _, err = nb(capsys, "trend", "nonsense", "--point", "x", "--store", tmp_path)
    assert code == 2 and "metrics: " in one_line(err)
    code, _, err = nb(capsys, "trend", "cpu_pct", "--point", "x", "--store", tmp_path)
    assert code == 2 and "several studies" in one_line(err)


def test_exports_are_tidy_and_exact(capsys, tmp_path):
    with Archive.open(tmp_path) as a:
        w = write_run(a, 1, tags=("t1",))
        a.write_summary(w.info.run_id, [
            PointSummary("tx/c1/io4K", {"direction": "tx", "io_size": 4096, "status": "x"}, 1, 0,
                         {"gbps": 0.1 + 0.2, "cpu_pct": None}),
            PointSummary("rx/c1/io4K", {"direction": "rx", "io_size": 4096, "status": "y"}, 2, 1,
                         {"gbps": 1 / 3, "cpu_pct": 12.5})], "gbps", "t")
    code, out, _ = nb(capsys, "export", "--store", tmp_path)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) == 2
    by = {r["point"]: r for r in rows}
    assert float(by["tx/c1/io4K"]["gbps"]) == 0.1 + 0.2 and float(by["rx/c1/io4K"]["gbps"]) == 1 / 3
    assert by["rx/c1/io4K"]["direction"] == "rx" and by["rx/c1/io4K"]["param.status"] == "y"
    assert by["rx/c1/io4K"]["run_id"] == w.info.run_id and by["rx/c1/io4K"]["tags"] == "t1"
    code, out, _ = nb(capsys, "export", "latest", "--format", "json", "--store", tmp_path)
    j = {r["point"]: r for r in json.loads(out)}
    assert j["tx/c1/io4K"]["gbps"] == 0.1 + 0.2 and j["tx/c1/io4K"]["cpu_pct"] is None
    assert j["tx/c1/io4K"]["io_size"] == 4096
    code, _, err = nb(capsys, "export", "--format", "parquet", "--store", tmp_path)
    assert code == 2 and "-o" in one_line(err)
    dest = tmp_path / "points.parquet"
    assert nb(capsys, "export", "--format", "parquet", "-o", dest, "--store", tmp_path)[0] == 0
    t = pq.read_table(dest).to_pylist()
    assert {r["point"]: r["gbps"] for r in t} == {"tx/c1/io4K": 0.1 + 0.2, "rx/c1/io4K": 1 / 3}
    assert {r["io_size"] for r in t} == {4096}


def test_archive_add_brings_an_older_store_in(capsys, tmp_path):
    old = tmp_path / "nicbench-runs"
    for study in ("tcp", "storage"):
        shutil.copytree(FIXTURES / "runs" / study, old / study)
    v1 = old / "broken"
    v1.mkdir()
    sqlite3.connect(v1 / DB).executescript(MIGRATIONS[0])       # an import of old killed before its meta
    code, out, err = nb(capsys, "archive", "add", old, "--store", tmp_path / "arch", "--tag", "legacy")
    assert code == 6 and out.count("added: ") == 2 and "damaged: " in out and "1 of 3" in one_line(err)
    code, out, _ = nb(capsys, "runs", "--store", tmp_path / "arch", "--tag", "legacy", "--json")
    runs = json.loads(out)
    assert sorted(r["study"] for r in runs) == ["storage", "tcp"] and all(r["headline"]["value"] for r in runs)
    code, out, _ = nb(capsys, "archive", "add", old / "tcp", "--store", tmp_path / "arch")
    assert code == 0 and out.startswith("present: ")
    code, out, _ = nb(capsys, "report", "latest", "--store", tmp_path / "arch", "--out", tmp_path / "rep")
    assert code == 0 and (tmp_path / "rep" / "index.html").exists()


BAD_TAGS = ("two\nlines", "a;b", "$(id)", "<b>x</b>", "")


def test_run_tag_is_refused_by_the_rule_archive_tag_uses_before_the_run_starts(capsys, tmp_path):
    # the plan path does not exist: a tag checked only once the run started would say that instead
    for bad in BAD_TAGS:
        code, out, err = nb(capsys, "run", tmp_path / "no-plan.toml", "--store", tmp_path / "arch",
                            "--tag", "ok-1", "--tag", bad)
        assert code == 2 and "--tag: tag " in err and "not allowed" in err and "not found" not in err, err
        assert "\n" not in err.strip()
        code2, _, err2 = nb(capsys, "archive", "tag", "latest", bad, "--store", tmp_path / "arch")
        assert code2 == 2 and "not allowed" in err2, err2
    assert not (tmp_path / "arch").exists()


def test_the_session_refuses_a_bad_tag_before_it_opens_any_host(tmp_path):
    from test_session_fake import PLAN

    from nicbench.core.errors import InputError
    from nicbench.plan import parse_plan
    from nicbench.run.session import execute

    def hosts_for(_plan):
        raise AssertionError("hosts opened")

    with pytest.raises(InputError, match=r"tag 'a\\nb' is not allowed"):
        execute(parse_plan(PLAN), PLAN, runner=object, store=tmp_path, tags=("a\nb",), hosts_for=hosts_for)
