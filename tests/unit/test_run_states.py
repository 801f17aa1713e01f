"""Half-done states (issue 33, items 4 and 7-11): a lab's lease, a lab left
half-built, a run directory deleted mid-run, a finished run waiting in the
spool, a disk full from the start, an import killed before its figures."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_archive import info, samples, trial

from conftest import FIXTURES, run_cli
from nicbench.core.errors import PreflightError, StoreError
from nicbench.lab import lease
from nicbench.store.archive import Archive
from nicbench.store.transfer import sync_spool
from nicbench.store.writer import SPOOL, RunWriter


def test_a_labs_lease_names_the_run_holding_it_and_frees_when_released(tmp_path, monkeypatch):
    monkeypatch.setenv("NICBENCH_STATE_DIR", str(tmp_path))
    assert lease.holder("l1") is None
    first = lease.Lease.take("l1", "plan-a")
    first.note_run("20261128-000000-plan-a-0000")
    held = lease.holder("l1")
    assert held is not None and held["pid"] == os.getpid() and held["run_id"] == "20261128-000000-plan-a-0000"
    with pytest.raises(PreflightError) as e:
        lease.Lease.take("l1", "plan-b")
    line = e.value.one_line()
    assert f"in use by run 20261128-000000-plan-a-0000 (pid {os.getpid()}, plan plan-a" in line
    assert "lab l1" in line and "nothing was started or stopped" in line
    other = lease.Lease.take("l2", "plan-b")       # another lab is another lease
    other.release()
    first.release()
    assert lease.holder("l1") is None
    lease.Lease.take("l1", "plan-b").release()


def _dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_recover_leaves_a_run_finished_into_its_spool_to_archive_sync(pg_server, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NICBENCH_RUNS", str(tmp_path / "runs"))
    monkeypatch.setenv("NICBENCH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("NICBENCH_RESTORE_DIR", str(tmp_path / "restore"))
    url = pg_server.url(pg_server.create_db())
    a = Archive.open(url)
    w = RunWriter.create(a, info("spooled"), total=3)
    w.write_trial(trial(0), samples("t0000"), [])
    pg_server.stop("immediate")
    try:
        for i in (1, 2):
            w.write_trial(trial(i), samples(f"t{i:04d}"), [])
        w.finish("done", ok=3)
    finally:
        pg_server.start()
    a.close()
    run_id = w.info.run_id
    with Archive.open(url) as pg:       # the run's process has ended since, as every run's does
        with pg.db.transaction():
            pg.db.execute("UPDATE runs SET pid = ?, pid_start = ? WHERE run_id = ?", (_dead_pid(), "1", run_id))
        assert pg.resolve(run_id).status == "aborted"     # what the archive alone says, until the sync
    code, out, err = run_cli(capsys, "recover", "--yes", "--store", url)
    assert code == 0, err
    assert f"run {run_id} finished (done, 3 of 3 points) into its local spool {w.run_dir / SPOOL}" in out, out
    assert "waiting for 'nicbench archive sync'" in out and "was killed" not in out and "marked aborted" not in out
    with Archive.open(url) as pg:
        assert pg.resolve(run_id).stored_status == "running"     # not marked aborted
        assert sync_spool(w.run_dir, pg) == [run_id]
        row = pg.resolve(run_id)
        assert (row.status, row.trials_done) == ("done", 3)


KILLED_AFTER_VISIBLE = """
import os, signal, sys
import nicbench.cli.imports as imports
from nicbench.cli.main import main
def die(*a, **k):          # the run is finished and visible; its figures were not written yet
    os.kill(os.getpid(), signal.SIGKILL)
imports.summarise = die
main(["import", "--store", sys.argv[1], "--name", "visible", *sys.argv[2:]])
"""


def test_an_import_killed_after_it_became_visible_is_summarised_by_recover(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("NICBENCH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("NICBENCH_RESTORE_DIR", str(tmp_path / "restore"))
    script = tmp_path / "imp.py"
    script.write_text(KILLED_AFTER_VISIBLE)
    v3 = FIXTURES / "iperf3" / "3.12"
    store = tmp_path / "st"
    p = subprocess.run([sys.executable, str(script), str(store), str(v3 / "tx_p2.json"), str(v3 / "rx_p2.json")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == -signal.SIGKILL, p.stderr
    with Archive.open(store) as a:
        [row] = a.runs()
        assert row.stored_status == "done" and a.points_of(row.run_id) == []
    code, out, err = run_cli(capsys, "recover", "--store", store)
    assert code == 0, err
    assert f"import {row.run_id} (done, 2 points) has no point figures: its process (pid {row.pid}) ended" in out
    assert "nicbench recover --yes" in out
    code, out, err = run_cli(capsys, "recover", "--yes", "--store", store)
    assert code == 0 and out.strip().endswith("done"), out + err
    with Archive.open(store) as a:
        assert [p.point for p in a.points_of(row.run_id)] and a.resolve(row.run_id).headline_value
    code, out, _ = run_cli(capsys, "recover", "--store", store)
    assert code == 0 and out.startswith("nothing left behind"), out


def test_a_run_directory_deleted_mid_run_stops_the_run_naming_it(tmp_path, capsys):
    """The audit's case: the point in flight failed as "killed", later points
    recreated the directory, the archive listed raw files that no longer
    existed and nothing said so."""
    from test_session_fake import PLAN, opener, responder

    from nicbench.hosts.fake import FakeTransport
    from nicbench.plan import parse_plan
    from nicbench.run.session import execute
    from nicbench.studies.tcp.runner import TcpRunner

    class DeletedMidPoint(TcpRunner):
        def trial(self, env, spec, raw_dir):
            out = super().trial(env, spec, raw_dir)
            if spec.index == 1:                  # the second point: someone removes the run directory
                shutil.rmtree(raw_dir.parent.parent)
            return out

    plan = PLAN.replace("repeats = 2", "repeats = 3")
    _, open_fake = opener({h: FakeTransport(h, responder) for h in ("srv", "c1", "c2")})
    with pytest.raises(StoreError) as e:
        execute(parse_plan(plan), plan, runner=DeletedMidPoint, store=tmp_path, hosts_for=open_fake)
    with Archive.open(tmp_path) as a:
        [row] = a.runs()
        trials = a.db.query("SELECT trial_id, status FROM trials WHERE rid = ?", (row.rid,))
        raws = [r[0] for r in a.db.query("SELECT trial_id FROM raw_outputs WHERE rid = ?", (row.rid,))]
    line = e.value.one_line()
    assert f"store: {row.run_dir}: the run directory was deleted during the run: the run stops" in line
    assert e.value.exit_code == 6 and "hint:" in line
    assert row.stored_status == "aborted" and [tuple(t) for t in trials] == [("t0001", "ok")]
    assert "t0002" not in raws and "t0003" not in raws       # nothing recorded of the point in flight
    assert not Path(row.run_dir).exists()                     # and no later point made it again

    # the report says which raw files are gone (its figures come from the archive)
    code, out, err = run_cli(capsys, "report", row.run_id, "--store", tmp_path, "--out", tmp_path / "rep")
    assert code == 0, err
    missing = [r for r in raws if r]
    assert missing and f"raw files missing from {row.run_dir}: {len(raws)} of {len(raws)}" in err, err


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (CI runs as root)")
@pytest.mark.parametrize(("runs_apart", "facts"), [(False, False), (False, True), (True, True)],
                         ids=["archive-full", "facts-file-full", "run-directory-full"])
def test_a_disk_full_from_the_start_says_disk_full_naming_the_path_and_keeps_no_empty_run(tmp_path, monkeypatch,
                                                                                        runs_apart, facts):
    """The audit's case: exit 1 "No space left on device" with no path and an
    empty aborted run left behind."""
    from test_session_fake import PLAN, opener, responder

    from nicbench.hosts.fake import FakeTransport, Script
    from nicbench.plan import parse_plan
    from nicbench.run.session import execute
    from nicbench.studies.tcp.runner import TcpRunner

    # the archive on the full disk, or only its run directories (the archive beside them, elsewhere)
    store = tmp_path / "arch" if runs_apart else tmp_path / "small"
    mnt = store / "runs" if runs_apart else store
    mnt.mkdir(parents=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "nbE-full33", str(mnt)], check=True)
    try:
        made = RunWriter.create.__func__            # type: ignore[attr-defined]

        def create_then_fill(cls, *a, **k):         # the run's row is made, then the disk has nothing left
            w = made(cls, *a, **k)
            fd = os.open(mnt / "filler", os.O_WRONLY | os.O_CREAT)
            try:
                while os.write(fd, b"\0" * 4096):
                    pass
            except OSError:
                pass
            os.close(fd)
            return w
        monkeypatch.setattr(RunWriter, "create", classmethod(create_then_fill))
        def with_facts(argv):               # the facts script's answer: a file nicbench writes itself
            text = "@@nicbench-section kernel\n6.1.0\n" * 200
            return Script(text) if facts and argv[:2] == ["sh", "-c"] else responder(argv)
        _, open_fake = opener({h: FakeTransport(h, with_facts) for h in ("srv", "c1", "c2")})
        with pytest.raises(StoreError) as e:
            execute(parse_plan(PLAN), PLAN, runner=TcpRunner, store=store, hosts_for=open_fake)
        line = e.value.one_line()
        assert e.value.exit_code == 6 and "disk full" in line and "nothing of the run is kept" in line, line
        # the file it could not write: a host's facts in the run directory, or the archive
        # the file it could not write: a host's facts, or (no facts to write) the archive
        assert f"store: {mnt}/" in line and ("/raw/facts/" if facts else "archive.sqlite") in line, line
        with Archive.open(store) as a:
            assert a.runs(include_hidden=True) == []                      # no empty aborted run
        assert [p.name for p in (store / "runs").iterdir() if p.name != "filler"] == []
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_sqlites_disk_io_error_on_a_full_disk_is_disk_full(tmp_path, monkeypatch):
    """SQLite says "disk I/O error" when it cannot grow its WAL or shared memory
    on a full disk: the audit saw exit 6 "disk I/O error", not "disk full"."""
    import sqlite3

    from nicbench.store import db
    a = Archive.open(tmp_path)
    try:
        err = sqlite3.OperationalError("disk I/O error")
        monkeypatch.setattr(db, "free_bytes", lambda where: 4096)
        got = a.db._map(err, None)
        assert isinstance(got, db.StoreFull) and "disk full" in got.message and got.where == a.db.where
        monkeypatch.setattr(db, "free_bytes", lambda where: 10 << 30)     # plenty free: a real I/O error
        got = a.db._map(err, None)
        assert not isinstance(got, db.StoreFull) and "disk I/O error" in got.message
    finally:
        a.close()
