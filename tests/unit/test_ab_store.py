"""A/B results in the archive (store/ab.py), on SQLite and PostgreSQL: the
migration that adds them keeps what was there, a row links its two runs and
goes with them."""

from __future__ import annotations

import pytest

from nicbench.core.errors import StoreError
from nicbench.records import RunInfo
from nicbench.store import catalogue
from nicbench.store.ab import ab_result, ab_results, finish_ab, insert_ab
from nicbench.store.archive import Archive


def _run(a: Archive, run_id: str, tmp_path) -> None:
    a.insert_run(RunInfo(run_id, "abw", "tcp", 1.0, "", "plan", "0"), tmp_path / run_id, visible=True, total=2)


def test_an_archive_of_schema_2_gains_ab_results_and_keeps_its_runs(store_url, monkeypatch, tmp_path):
    monkeypatch.setattr(catalogue, "SCHEMA_VERSION", 2)
    with Archive.open(store_url) as a:
        assert a.schema_version() == 2
        _run(a, "r-a", tmp_path)
    monkeypatch.undo()
    with Archive.open(store_url) as a:
        assert a.schema_version() == catalogue.SCHEMA_VERSION == 5
        assert a.row("r-a").name == "abw" and ab_results(a) == []


def test_an_ab_row_links_its_runs_is_judged_and_goes_with_them(store_url, tmp_path):
    with Archive.open(store_url) as a:
        _run(a, "r-a", tmp_path)
        _run(a, "r-b", tmp_path)
        insert_ab(a, "ab-1", "abw", "tcp", "r-a", "r-b", "small", "rec.toml", 4)
        row = ab_result(a, "latest")
        assert (row.ab_id, row.status, row.b_won, row.run_a, row.run_b, row.rounds) == (
            "ab-1", "running", None, "r-a", "r-b", 4)
        finish_ab(a, "ab-1", "done", True, {"summary": "B won", "points": [{"point": "p", "outcome": "B better"}]})
        row = ab_result(a, "ab")
        assert row.status == "done" and row.b_won is True and row.result["summary"] == "B won"
        assert row.finished is not None
        with pytest.raises(StoreError, match="no A/B 'zz'"):
            ab_result(a, "zz")
        a.delete_run("r-b")
        assert ab_results(a) == []
