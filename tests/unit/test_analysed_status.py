"""The analysis' decision is the point's status, stored once and read the
same everywhere (issue 33, item 1): a trial whose tools succeeded but whose
analysis rejects it is ``failed`` in the archive -- its row, the run's counts
and status, ``nicbench runs`` and its filters, the export and the report
header -- not only on the console; the runner's own record is kept and read
back for the next analysis."""

from __future__ import annotations

import json

import pytest
from test_archive_cli import nb
from test_archive_partial import run_once
from test_session_fake import responder

from conftest import fixture_text
from nicbench.hosts.fake import Script
from nicbench.registry import VIEWS
from nicbench.report.catalogue import summarise
from nicbench.store.archive import Archive
from nicbench.store.reader import RunReader


def short_window(argv: list[str]) -> Script:
    """c2's receiver reports one interval of the three seconds: its tools say
    nothing is wrong, the analysis finds the shared window far too short."""
    if argv[:2] == ["iperf3", "-c"] and argv[2] == "198.18.0.3":
        doc = json.loads(fixture_text("iperf3", "3.12", "tx_p2.json"))
        doc["server_output_json"]["intervals"] = doc["server_output_json"]["intervals"][:1]
        return Script(stdout=json.dumps(doc), runtime=3.01)
    return responder(argv)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    store = tmp_path_factory.mktemp("decided") / "arch"
    good, bad = run_once(store, responder), run_once(store, short_window)
    with Archive.open(store) as a:
        for r in (good, bad):
            summarise(a, r, VIEWS)
    return store, good, bad


def test_a_rejected_point_is_failed_in_the_archive(runs):
    store, good, bad = runs
    with Archive.open(store) as a:
        row = a.row(bad)
        assert (row.status, row.trials_ok, row.trials_failed) == ("done-with-failures", 0, 2)
        stored = a.db.query("SELECT status, error FROM trials WHERE rid = ?", (row.rid,))
        assert [s for s, _ in stored] == ["failed", "failed"]
        assert all("window is" in e for _, e in stored)
        assert a.row(good).status == "done"
        # the analysis starts again from what the runner recorded
        recs = RunReader(a, row).trials()
        assert [(r.status, r.error) for r in recs] == [("ok", None), ("ok", None)]
        # summarising again decides the same, once
        summarise(a, bad, VIEWS)
        assert a.db.query("SELECT status FROM trials WHERE rid = ?", (row.rid,)) == [("failed",), ("failed",)]
        assert "recorded" not in RunReader(a, row).trials()[0].meta


def test_lists_filters_and_exports_read_the_decision(capsys, runs):
    store, good, bad = runs
    code, out, err = nb(capsys, "runs", "--json", "--store", store)
    assert code == 0, err
    by_id = {r["run_id"]: r for r in json.loads(out)}
    assert by_id[bad]["status"] == "done-with-failures" and by_id[bad]["trials_failed"] == 2
    code, out, _ = nb(capsys, "runs", "--json", "--status", "done", "--store", store)
    assert [r["run_id"] for r in json.loads(out)] == [good]
    code, out, _ = nb(capsys, "export", "--format", "json", "--store", store)
    assert {r["run_id"]: r["status"] for r in json.loads(out)} == {good: "done", bad: "done-with-failures"}


def test_a_better_analysis_can_undo_a_decision(runs):
    """What was decided is not carved in stone: a decision that agrees with
    the runner again drops the override."""
    store, _, bad = runs
    with Archive.open(store) as a:
        row = a.row(bad)
        tids = [t for (t,) in a.db.query("SELECT trial_id FROM trials WHERE rid = ?", (row.rid,))]
        assert a.record_decisions(bad, [(t, "ok", None) for t in tids]) == "done"
        assert [r.meta.get("recorded") for r in RunReader(a, a.row(bad)).trials()] == [None, None]
        assert a.db.query("SELECT meta FROM trials WHERE rid = ?", (row.rid,))[0][0].find("recorded") < 0
        summarise(a, bad, VIEWS)
        assert a.row(bad).status == "done-with-failures"


def test_a_flagged_point_is_named_and_marked_without_colour(capsys):
    """Item 20: '36 points ok' while the report flags a point ABOVE CEILING;
    the terminal table printed its 101 % plain.  The mark is a character, so a
    pipe or CI's log shows it, and the summary names the point and why."""
    from nicbench.cli.tables import echo_table, flagged_points, points_table
    from nicbench.studies.tcp.view import HEADLINE
    rows = [{"point": "tx/c12/io128K", "direction": "tx", "connections": 12, "io": "128K", "gbps_median": 9.5,
             "pct_of_ceiling": 101.2, "above_ceiling": True},
            {"point": "tx/c12/io64K", "direction": "tx", "connections": 12, "io": "64K", "gbps_median": 9.3,
             "pct_of_ceiling": 99.0, "above_ceiling": False}]
    assert flagged_points(rows, HEADLINE) == [
        "tx/c12/io128K: % of ceiling 101 (above 100 %: the model or the measurement is wrong)"]
    echo_table(points_table(rows, HEADLINE))
    out = capsys.readouterr().out
    [above] = [line for line in out.splitlines() if "128K" in line]
    [fine] = [line for line in out.splitlines() if "64K" in line]
    assert "101 !" in above and "!" not in fine
    assert "!: flagged" in out


def _zeroed(doc: dict) -> dict:
    """An iperf3 report whose receiver counted nothing, exit 0, no error."""
    for part in (doc, doc["server_output_json"]):
        for iv in part["intervals"]:
            for x in [*iv["streams"], iv["sum"]]:
                x["bytes"], x["bits_per_second"] = 0, 0.0
    return doc


@pytest.mark.parametrize("how", ["zero bytes", "error after the report"])
def test_a_pair_that_moved_nothing_or_said_an_error_is_lost(tmp_path, how):
    """Item 2: c2's engine reported 0 bytes (or printed 'iperf3: error - ...'
    after its report) and exited 0: the pair is lost, the point partial and
    the pair named -- not a zero summed as a measurement."""
    def script(argv: list[str]) -> Script:
        if argv[:2] == ["iperf3", "-c"] and argv[2] == "198.18.0.3":
            doc = json.loads(fixture_text("iperf3", "3.12", "tx_p2.json"))
            if how == "zero bytes":
                return Script(stdout=json.dumps(_zeroed(doc)), runtime=3.01)
            return Script(stdout=json.dumps(doc), runtime=3.01,
                          stderr="iperf3: error - unable to receive results: Bad file descriptor\n")
        return responder(argv)
    store = tmp_path / "arch"
    run_id = run_once(store, script)
    with Archive.open(store) as a:
        row = a.row(run_id)
        recs = RunReader(a, row).trials()
    assert [r.status for r in recs] == ["partial", "partial"]
    lost = recs[0].meta["lost"]
    assert list(lost) == ["c2:5201"]
    assert ("moved no tx bytes" if how == "zero bytes" else "unable to receive results") in lost["c2:5201"]


def test_archive_summarise_stale_stores_the_decisions_of_runs_summarised_before(capsys, tmp_path):
    """A run summarised by the nicbench before this change kept a rejected
    point 'ok': 'archive summarise --stale' redoes it."""
    from nicbench.report import catalogue
    store = tmp_path / "arch"
    bad = run_once(store, short_window)
    with Archive.open(store) as a:
        a.write_summary(bad, [], None, "0.1.0+summary2")          # as the nicbench before left it
        assert a.row(bad).status == "done"
    code, _, err = nb(capsys, "archive", "summarise", "--stale", "--store", store)
    assert code == 0, err
    with Archive.open(store) as a:
        row = a.row(bad)
        assert (row.status, row.trials_failed, row.summary_version) == ("done-with-failures", 2,
                                                                        catalogue.SUMMARY_VERSION)
