"""The archive, the same tests against SQLite and a throwaway PostgreSQL 15
(the ``store_url`` fixture of tests/conftest.py)."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from nicbench.core.errors import InputError, StoreError
from nicbench.records import Fact, HostFacts, RawOutput, RunInfo, Sample, TrialRecord, TrialSpec, make_tags
from nicbench.store.archive import Archive, PointSummary, RunFilter
from nicbench.store.catalogue import SCHEMA_VERSION
from nicbench.store.location import parse_store
from nicbench.store.names import new_run_id
from nicbench.store.reader import RunReader
from nicbench.store.transfer import push
from nicbench.store.writer import RunWriter

ROOT = Path(__file__).resolve().parents[2]


def info(name: str = "demo", study: str = "tcp", created: float | None = None) -> RunInfo:
    return RunInfo(new_run_id(name), name, study, created or time.time(), 'name = "demo"\n', "plan", "0",
                   {"trim": 0.5, "clients": ["c1"]})


def trial(i: int, status: str = "ok") -> TrialRecord:
    spec = TrialSpec(f"t{i:04d}", i, "tcp", f"tx/c1/io{4 * (i + 1)}K", 0,
                     {"direction": "tx", "io_size": 4096 * (i + 1)})
    return TrialRecord(spec, status, 100.0 + i, 101.0 + i, None if status == "ok" else "boom", {"skew": 0.001})


def samples(tid: str, n: int = 3) -> list[Sample]:
    return [Sample(tid, "tcp.bytes", 1e6 + k + 0.1, "bytes", 100.0 + k, 101.0 + k,
                   make_tags(host="c1", side="receiver", proc=k)) for k in range(n)]


FACTS = [HostFacts("srv", "server", 1.0, (Fact("kernel", "6.1.0-nb"), Fact("if.eth0.driver", "ixgbe"),
                                          Fact("if.eth0.firmware", "0x8000"),
                                          Fact("sysctl.x", None, unknown="not readable"))),
         HostFacts("c1", "client", 1.0, (Fact("kernel", "6.1.0-nb"),))]


def write_run(a: Archive, n: int = 2, name: str = "demo", tags: tuple[str, ...] = (), finish: str | None = "done",
              created: float | None = None) -> RunWriter:
    w = RunWriter.create(a, info(name, created=created), total=n, tags=tags)
    w.write_facts(FACTS)
    for i in range(n):
        raw = w.raw_dir(f"t{i:04d}") / "c1.out"
        raw.write_text(f"raw output {i}\n")
        w.write_trial(trial(i), samples(f"t{i:04d}"),
                      [RawOutput(f"t{i:04d}", "c1", "client", "iperf3", "stdout", w.rel(raw))])
    if finish:
        w.finish(finish, ok=n, failed=0)
    return w


def test_a_run_reads_back_as_written(store_url):
    with Archive.open(store_url) as a:
        w = write_run(a, tags=("nightly",))
        r = RunReader(a, a.resolve(w.info.run_id))
        assert r.info() == w.info and r.meta()["status"] == "done" and r.meta()["meta.trim"] == 0.5
        assert r.trials() == [trial(0), trial(1)]
        assert r.samples() == samples("t0000") + samples("t0001")
        assert r.samples("t0001", "tcp.bytes") == samples("t0001")
        assert r.facts() == FACTS
        [raw0, raw1] = r.raw_files()
        assert raw1["sha256"] == hashlib.sha256(b"raw output 1\n").hexdigest() and raw1["size"] == 13
        assert (Path(r.row.run_dir) / raw0["path"]).read_text() == "raw output 0\n"
        row = a.resolve("latest")
        assert (row.status, row.trials_done, row.trials_ok, row.trials_total) == ("done", 2, 2, 2)
        assert row.labels == {"host": ("c1", "srv"), "kernel": ("6.1.0-nb",), "driver": ("ixgbe",),
                              "firmware": ("0x8000",), "tag": ("nightly",)}
        # the run directory says which archive and run it is
        assert (Path(row.run_dir) / "run.json").exists() and (Path(row.run_dir) / "plan.toml").exists()
        assert not (Path(row.run_dir) / ".space-reserve").exists()      # kept only while the run is written


def _killed_writer(store: str, tmp: Path, trials: int) -> None:
    """A writer in another process, killed with SIGKILL after ``trials`` trials."""
    script = tmp / "writer.py"
    script.write_text(textwrap.dedent(f"""
        import os, signal, sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_archive import write_run
        from nicbench.store.archive import Archive
        a = Archive.open({store!r})
        write_run(a, n={trials}, name="killed", finish=None)
        print("ready", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """))
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert p.returncode == -signal.SIGKILL and "ready" in p.stdout, p.stderr


def test_a_killed_run_stays_visible_as_aborted_with_its_finished_trials(store_url, tmp_path):
    _killed_writer(store_url, tmp_path, 2)
    with Archive.open(store_url) as a:
        [row] = a.runs()
        assert row.stored_status == "running" and row.status == "aborted" and row.trials_done == 2
        assert [r.run_id for r in a.runs(RunFilter(status="aborted"))] == [row.run_id]
        assert a.runs(RunFilter(status="running")) == []
        assert len(RunReader(a, row).trials()) == 2
        assert [r.run_id for r in a.stale_runs()] == [row.run_id]
        a.set_status(row.run_id, "aborted", "found by a test")
        assert a.resolve(row.run_id).stored_status == "aborted" and a.stale_runs() == []


def test_filters_and_references(store_url):
    with Archive.open(store_url) as a:
        t = time.time()
        w1 = write_run(a, 1, name="alpha", tags=("build-1",), created=t - 86400 * 3)
        w2 = write_run(a, 1, name="beta", tags=("build-2",), created=t - 3600)
        ids = {w.info.run_id for w in (w1, w2)}
        assert {r.run_id for r in a.runs()} == ids and a.count() == 2
        assert [r.run_id for r in a.runs(RunFilter(name="al*"))] == [w1.info.run_id]
        assert [r.run_id for r in a.runs(RunFilter(tag="build-2"))] == [w2.info.run_id]
        assert a.count(RunFilter(kernel="6.1*", driver="ixgbe", host="srv")) == 2
        assert a.count(RunFilter(driver="e1000")) == 0
        assert a.count(RunFilter(since=t - 86400)) == 1 and a.count(RunFilter(until=t - 86400)) == 1
        assert a.count(RunFilter(study="tcp")) == 2 and a.count(RunFilter(study="https")) == 0
        # a glob's LIKE wildcards in the text are literal
        assert a.count(RunFilter(name="al%")) == 0 and a.count(RunFilter(name="_lpha")) == 0
        assert a.resolve("latest").run_id == w2.info.run_id
        assert a.resolve(w1.info.run_id[:-3]).run_id == w1.info.run_id
        assert a.resolve(str(w1.run_dir)).run_id == w1.info.run_id
        with pytest.raises(StoreError, match="ambiguous"):
            a.resolve(w1.info.run_id[:4])
        with pytest.raises(StoreError, match="no run 'nope'"):
            a.resolve("nope")
        with pytest.raises(StoreError, match="already in the archive"):
            a.insert_run(w1.info, w1.run_dir, visible=True, total=1)


def test_summaries_trends_and_exports_keep_full_precision(store_url):
    with Archive.open(store_url) as a:
        ids = []
        for k in range(4):
            w = write_run(a, 1, created=time.time() - 100 * (4 - k))
            v = 0.1 + 0.2 + k if k < 3 else 1e-300      # 0.30000000000000004: not rounded anywhere
            a.write_summary(w.info.run_id, [PointSummary("tx/c1/io4K", {"direction": "tx", "io_size": 4096}, 1, 0,
                                                         {"gbps": v, "cpu_pct": None})], "gbps", "test")
            ids.append(w.info.run_id)
        got = a.trend("gbps", ["tx/c1/io4K"])
        assert [r.run_id for r in got] == ids and got[0].value == 0.1 + 0.2 and got[-1].value == 1e-300
        assert got[0].labels["kernel"] == ("6.1.0-nb",)
        assert [r.run_id for r in a.trend("gbps", ["tx/c1/io4K"], limit=2)] == ids[-2:]
        rows = a.export_rows(RunFilter(run_ids=(ids[0],)))
        assert rows == [{"run_id": ids[0], "plan": "demo", "study": "tcp", "created": rows[0]["created"],
                         "status": "done", "kernel": "6.1.0-nb", "driver": "ixgbe", "tags": "", "point": "tx/c1/io4K",
                         "n_ok": 1, "n_failed": 0, "n_partial": 0, "survivors_only": False,
                         "params": {"direction": "tx", "io_size": 4096},
                         "metrics": {"gbps": 0.1 + 0.2, "cpu_pct": None}}]
        row = a.resolve(ids[1])
        assert (row.headline_metric, row.headline_value, row.headline_point) == ("gbps", 0.1 + 0.2 + 1,
                                                                                  "tx/c1/io4K")
        assert a.points_of(ids[1])[0].values["gbps"] == 0.1 + 0.2 + 1


WRITER = """
import sys, time
sys.path.insert(0, {here!r})
from test_archive import info, samples, trial
from nicbench.store.archive import Archive
from nicbench.store.writer import RunWriter
a = Archive.open({store!r})
w = RunWriter.create(a, info("w{k}"), total={n})
for i in range({n}):
    w.write_trial(trial(i), samples(f"t{{i:04d}}", 300), [])
w.finish("done")
print(w.info.run_id)
"""


def test_two_runs_write_while_the_dashboard_reads(store_url, tmp_path):
    """Two writer processes commit trial after trial into one archive while
    this process reads it in a loop: no 'database is locked', no collision,
    nothing lost."""
    Archive.open(store_url).close()
    procs = []
    for k in range(2):
        script = tmp_path / f"w{k}.py"
        script.write_text(WRITER.format(here=str(Path(__file__).parent), store=store_url, k=k, n=25))
        procs.append(subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))
    reads, errors = 0, []
    with Archive.open(store_url, create=False) as a:
        while any(p.poll() is None for p in procs):
            try:
                for row in a.runs(limit=10):
                    RunReader(a, row).samples()
                a.count(RunFilter(status="running"))
                reads += 1
            except StoreError as e:
                errors.append(e.one_line())
        outs = [p.communicate(timeout=60) for p in procs]
        assert all(p.returncode == 0 for p in procs), outs
        assert errors == [] and reads > 0
        rows = a.runs()
        assert len(rows) == 2 and {r.trials_done for r in rows} == {25}
        for r in rows:
            assert len(RunReader(a, r).samples()) == 25 * 300


def test_schema_versions(store_url, tmp_path):
    with Archive.open(store_url) as a:
        assert a.schema_version() == SCHEMA_VERSION
        a.db.execute("UPDATE nicbench_schema SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match=f"archive has schema {SCHEMA_VERSION + 1}, this nicbench knows up to"):
        Archive.open(store_url)


def test_two_first_openers_make_one_schema(store_url):
    errors: list[BaseException] = []

    def opener() -> None:
        try:
            Archive.open(store_url).close()
        except BaseException as e:  # noqa: BLE001 - collected for the assertion
            errors.append(e)
    threads = [threading.Thread(target=opener) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Archive.open(store_url) as a:
        assert a.schema_version() == SCHEMA_VERSION


def test_pushing_a_run_twice_adds_no_row_twice(store_url, tmp_path):
    src = Archive.open(tmp_path / "spool.sqlite")
    w = write_run(src, 3)
    src.write_summary(w.info.run_id, [PointSummary("tx/c1/io4K", {}, 1, 0, {"gbps": 1.5})], "gbps", "t")
    with Archive.open(store_url) as dest:
        push(src, w.info.run_id, dest)
        push(src, w.info.run_id, dest)
        row = dest.resolve(w.info.run_id)
        counts = {t: dest.db.one(f"SELECT COUNT(*) FROM {t} WHERE rid = ?", (row.rid,))[0]  # type: ignore[index]
                  for t in ("trials", "samples", "facts", "raw_outputs", "labels", "points", "point_values")}
        assert counts == {"trials": 3, "samples": 9, "facts": 5, "raw_outputs": 3, "labels": 5, "points": 1,
                          "point_values": 1}
        assert row.status == "done" and row.trials_done == 3 and row.headline_value == 1.5
    src.close()


def test_store_specs_that_do_not_parse_are_bad_input(tmp_path):
    for bad in ("postgresql://u@h:notaport/db", "mysql://u@h/db", "sqlite://otherhost/x.sqlite",
                "postgresql://u@h", "postgresql://u@h/db?sslmode=sometimes&bogus_option=1", "a\nb"):
        with pytest.raises(InputError):
            parse_store(bad)
    assert parse_store(str(tmp_path)).target == str(tmp_path / "archive.sqlite")
    assert parse_store(f"sqlite://{tmp_path}/x.db").target == str(tmp_path / "x.db")
    loc = parse_store("postgresql://nb:secret@db.example/lab")
    assert loc.kind == "postgresql" and "secret" not in loc.display
    os.environ.pop("NICBENCH_STORE", None)
