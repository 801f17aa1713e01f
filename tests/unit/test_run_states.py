"""Half-done states (issue 33, items 4 and 7-11): a lab's lease, a lab left
half-built, a run directory deleted mid-run, a finished run waiting in the
spool, a disk full from the start, an import killed before its figures."""

from __future__ import annotations

import os
import subprocess

import pytest
from test_archive import info, samples, trial

from conftest import run_cli
from nicbench.core.errors import PreflightError
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
