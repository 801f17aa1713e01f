import sqlite3
import time

import pytest

from nicbench.core.errors import StoreError
from nicbench.records import RawOutput, RunInfo, Sample, TrialRecord, TrialSpec, make_tags
from nicbench.store.runs import RunReader, RunWriter, list_runs, resolve
from nicbench.store.schema import SCHEMA_VERSION, migrate


def info(run_id="r1"):
    return RunInfo(run_id, "demo", "tcp", time.time(), 'name = "demo"\n', "plan", "0", {"trim": 0.5})


def trial(i):
    spec = TrialSpec(f"t{i}", i, "tcp", "tx/c1/io4K", 0, {"direction": "tx", "io_size": 4096})
    return TrialRecord(spec, "ok", 1.0, 2.0, None, {"start_skew_s": 0.001})


def sample(tid):
    return Sample(tid, "tcp.bytes", 10.0, "bytes", 1.0, 2.0, make_tags(host="c1", side="receiver"))


def test_roundtrip(tmp_path):
    w = RunWriter.create(tmp_path, info())
    raw = w.raw_dir("t1") / "x.out"
    raw.write_text("raw")
    w.write_trial(trial(1), [sample("t1")], [RawOutput("t1", "c1", "engine-server", "iperf3", "stdout", w.rel(raw))])
    w.finish("done")
    r = RunReader(tmp_path / "r1")
    assert r.info().plan_text.startswith("name") and r.info().meta["trim"] == 0.5
    assert r.meta()["status"] == "done"
    [t] = r.trials()
    assert t.spec.params["io_size"] == 4096 and t.meta["start_skew_s"] == 0.001
    [s] = r.samples()
    assert s.tag("host") == "c1" and s.unit == "bytes"
    assert (tmp_path / "r1" / r.raw_outputs()[0].path).read_text() == "raw"


def test_crash_mid_run_keeps_finished_trials(tmp_path):
    w = RunWriter.create(tmp_path, info())
    w.write_trial(trial(1), [sample("t1")], [])
    w.write_trial(trial(2), [sample("t2")], [])
    # no finish(): the process died here
    r = RunReader(tmp_path / "r1")
    assert len(r.trials()) == 2 and r.meta()["status"] == "running"
    assert list_runs(tmp_path)[0]["trials_ok"] == 2


def test_migration_from_empty_and_newer_schema_refused(tmp_path):
    db = sqlite3.connect(tmp_path / "a.sqlite")
    assert migrate(db, "a") == 0
    assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert migrate(db, "a") == SCHEMA_VERSION          # idempotent
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(StoreError, match="newer|knows up to"):
        migrate(db, "a")


def test_resolve(tmp_path):
    RunWriter.create(tmp_path, info("20260101-000000-a-0001")).finish("done")
    RunWriter.create(tmp_path, info("20260102-000000-b-0002")).finish("done")
    assert resolve(tmp_path, "latest").name.startswith("20260102")
    assert resolve(tmp_path, "20260101").name.startswith("20260101")
    with pytest.raises(StoreError, match="ambiguous"):
        resolve(tmp_path, "2026")
    with pytest.raises(StoreError, match="no run"):
        resolve(tmp_path, "nope")
