"""The archive under faults: a disk that fills, PostgreSQL going away
mid-run, an import killed half-way, older run directories brought in
(issue 17's upgrade, issue 21's faults)."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_archive import FACTS, info, samples, trial

from nicbench.api import load_run, rows
from nicbench.registry import VIEWS
from nicbench.report.catalogue import summarise
from nicbench.store.archive import Archive
from nicbench.store.reader import RunReader, open_run_dir
from nicbench.store.runs import DB, list_runs, resolve
from nicbench.store.runs import RunWriter as LegacyWriter
from nicbench.store.schema import MIGRATIONS
from nicbench.store.transfer import add_legacy, spools, sync_spool
from nicbench.store.writer import RESERVE, SPOOL, RunWriter

HERE = Path(__file__).parent
RUNS = HERE.parent / "fixtures" / "runs"
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (CI runs as root)")


@root_only
def test_a_full_disk_is_one_line_keeps_finished_points_and_aborts_the_run(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=3m", "nbE-full", str(mnt)], check=True)
    try:
        script = tmp_path / "fill.py"
        script.write_text(textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(HERE)!r})
            from test_archive import info, samples, trial
            from nicbench.store.archive import Archive
            from nicbench.store.db import StoreFull
            from nicbench.store.writer import RunWriter
            a = Archive.open({str(mnt)!r})
            w = RunWriter.create(a, info("filler"), total=10000)
            n = 0
            try:
                for i in range(10000):
                    w.write_trial(trial(i), samples(f"t{{i:04d}}", 400), [])
                    n += 1
            except StoreFull as e:
                w.finish("failed")           # what the session's clean-up does
                print(n, flush=True)
                print(e.one_line(), file=sys.stderr)
                sys.exit(e.exit_code)
        """))
        p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
        assert p.returncode == 6, p.stderr
        [line] = p.stderr.strip().splitlines()
        assert str(mnt / "archive.sqlite") in line and "disk full" in line and "MB free" in line
        assert "needs about" in line and "Traceback" not in line
        written = int(p.stdout)
        assert written > 5
        db = sqlite3.connect(str(mnt / "archive.sqlite"))
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        db.close()
        with Archive.open(mnt) as a:
            [row] = a.runs()
            assert row.stored_status == "aborted" and row.trials_done == written
            r = RunReader(a, row)
            assert r.meta()["aborted"].startswith("disk full")
            assert len(r.samples()) == written * 400      # every finished point whole, nothing of the one in flight
        assert not (Path(row.run_dir) / RESERVE).exists()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_postgresql_going_away_mid_run_spools_and_syncs_once(pg_server, tmp_path, monkeypatch):
    monkeypatch.setenv("NICBENCH_RUNS", str(tmp_path / "runs"))
    url = pg_server.url(pg_server.create_db())
    a = Archive.open(url)
    w = RunWriter.create(a, info("outage"), total=4)
    w.write_facts(FACTS)
    for i in range(2):
        w.write_trial(trial(i), samples(f"t{i:04d}"), [])
    pg_server.stop("immediate")
    try:
        for i in range(2, 4):
            w.write_trial(trial(i), samples(f"t{i:04d}"), [])
        w.finish("done", ok=4)
        assert w.archive.loc.kind == "sqlite" and "nicbench archive sync" in w.notes[0]
        r = open_run_dir(w.run_dir)                   # the run directory knows it is spooled
        assert len(r.trials()) == 4 and r.meta()["status"] == "done" and len(r.facts()) == 2
        r.close()
    finally:
        pg_server.start()
    a.close()
    kept = tmp_path / "spool-copy.sqlite"
    shutil.copyfile(w.run_dir / SPOOL, kept)
    with Archive.open(url) as pg:
        assert pg.resolve(w.info.run_id).trials_done == 2     # what PostgreSQL had before the outage
        assert spools(tmp_path / "runs") == [w.run_dir]
        assert sync_spool(w.run_dir, pg) == [w.info.run_id]
        assert spools(tmp_path / "runs") == []
        # the same spool pushed again (a sync whose end was lost): nothing twice
        shutil.copyfile(kept, w.run_dir / SPOOL)
        sync_spool(w.run_dir, pg)
        row = pg.resolve(w.info.run_id)
        assert (row.status, row.trials_done) == ("done", 4)
        counts = [pg.db.one(f"SELECT COUNT(*) FROM {t} WHERE rid = ?", (row.rid,))[0]  # type: ignore[index]
                  for t in ("trials", "samples", "facts", "labels")]
        assert counts == [4, 12, 5, 5]
    # the run directory points at PostgreSQL again (run.json never holds the password: libpq's PGPASSWORD does)
    monkeypatch.setenv("PGPASSWORD", pg_server.password)
    r = open_run_dir(w.run_dir)
    assert r.archive.loc.kind == "postgresql" and len(r.samples()) == 12
    r.close()


def test_older_run_directories_come_in_whole_and_read_the_same(tmp_path):
    """Today's per-run databases (schema 2, and schema 1 without facts) into
    the archive: the same trials, samples, facts and raw outputs, the same
    table from the study's view; adding again adds nothing."""
    legacy = tmp_path / "old"
    for study in ("tcp", "https", "storage", "packets"):
        shutil.copytree(RUNS / study, legacy / study)
    v1 = legacy / "v1"
    v1.mkdir()
    db = sqlite3.connect(v1 / DB)
    db.executescript(MIGRATIONS[0] + "PRAGMA user_version = 1;")
    db.executemany("INSERT INTO meta VALUES (?, ?)", [("run_id", '"20250101-000000-v1-0001"'), ("name", '"v1"'),
                                                     ("study", '"tcp"'), ("created", "1735689600.0"),
                                                     ("status", '"done"'), ("meta.trim", "0.5")])
    db.commit()
    db.close()
    with Archive.open(tmp_path / "arch") as a:
        for d in sorted(legacy.iterdir()):
            got = add_legacy(a, d)
            assert got.outcome == "added", got
            if d.name != "v1":
                summarise(a, got.run_id, VIEWS)
                before = load_run(d)
                after = load_run(d, a, got.run_id)
                assert rows(after) == rows(before)
                assert after.facts == before.facts and after.info == before.info
                r = RunReader(a, a.resolve(got.run_id))
                old = __import__("nicbench.store.runs", fromlist=["RunReader"]).RunReader(d, readonly=True)
                assert r.trials() == old.trials() and r.samples() == old.samples()
                assert [x.path for x in r.raw_outputs()] == list(dict.fromkeys(x.path for x in old.raw_outputs()))
            assert add_legacy(a, d).outcome == "present"
        assert a.count() == 5
        assert RunReader(a, a.resolve("20250101-000000-v1-0001")).facts() == []


def test_a_damaged_older_run_is_listed_as_damaged_never_a_crash(tmp_path):
    """An import of an older nicbench killed before its meta was written: a
    database with tables and no run id."""
    store = tmp_path / "nicbench-runs"
    LegacyWriter.create(store, info("good")).finish("done")
    half = store / "99990101-000000-half-0000"
    (half / "raw").mkdir(parents=True)
    db = sqlite3.connect(half / DB)
    db.executescript("".join(MIGRATIONS) + "PRAGMA user_version = 2;")
    db.close()
    listed = {r["run_id"]: r for r in list_runs(store)}
    assert listed[half.name]["damaged"] and listed[half.name]["status"].startswith("damaged: no run_id")
    assert resolve(store, "latest").name != half.name          # 'report latest' skips it
    p = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "archive", "add", str(store), "--store",
                        str(tmp_path / "arch")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 6 and "damaged: " in p.stdout and "added: " in p.stdout, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


KILLED_IMPORT = """
import os, signal, sys
from nicbench.cli.main import main
from nicbench.store.writer import RunWriter
orig = RunWriter.write_trial
def write_then_die(self, *x, **y):          # the first trial committed, then the process is gone
    orig(self, *x, **y)
    os.kill(os.getpid(), signal.SIGKILL)
RunWriter.write_trial = write_then_die
main(["import", "--store", sys.argv[1], "--name", "half", *sys.argv[2:]])
"""


def test_an_import_killed_half_way_shows_nothing_and_recover_removes_it(tmp_path):
    script = tmp_path / "imp.py"
    script.write_text(KILLED_IMPORT)
    v3 = HERE.parent / "fixtures" / "iperf3" / "3.12"
    store = tmp_path / "st"
    p = subprocess.run([sys.executable, str(script), str(store), str(v3 / "tx_p2.json"), str(v3 / "rx_p2.json")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == -signal.SIGKILL, p.stderr
    assert [d.name[:5] for d in (store / "runs").iterdir()] == [".tmp-"]

    def nb(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "nicbench.cli.main", *args, "--store", str(store)],
                              capture_output=True, text=True, timeout=60)
    runs = nb("runs")
    assert runs.returncode == 0 and runs.stdout.startswith("no runs"), runs.stderr
    rep = nb("report", "latest")
    assert rep.returncode == 6 and "the archive has no runs" in rep.stderr and "KeyError" not in rep.stderr
    found = nb("recover")
    assert found.returncode == 0 and "import " in found.stdout and "killed half-way" in found.stdout
    done = nb("recover", "--yes")
    assert done.returncode == 0, done.stderr
    assert list((store / "runs").iterdir()) == []
    with Archive.open(store) as a:
        assert a.runs(include_hidden=True) == []


def test_recover_marks_a_killed_run_aborted(tmp_path):
    store = tmp_path / "st"
    script = tmp_path / "w.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(HERE)!r})
        from test_archive import write_run
        from nicbench.store.archive import Archive
        write_run(Archive.open({str(store)!r}), n=1, name="killed", finish=None)
        os.kill(os.getpid(), signal.SIGKILL)
    """))
    subprocess.run([sys.executable, str(script)], timeout=60)
    env = {**os.environ, "NICBENCH_RESTORE_DIR": str(tmp_path / "restore")}
    p = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "recover", "--yes", "--store", str(store)],
                       capture_output=True, text=True, timeout=60, env=env)
    assert p.returncode == 0 and "was killed after 1 of 1 points: marked aborted" in p.stdout, p.stderr
    with Archive.open(store) as a:
        [row] = a.runs()
        assert row.stored_status == "aborted"

