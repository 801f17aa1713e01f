"""A point's timeline, drawn from the archive alone: every client's
throughput per interval on one grid (bytes conserved), the cores busy by
state, retransmits and drops."""

from __future__ import annotations

import importlib
import shutil
from pathlib import Path

import pytest

from nicbench.api import load_run
from nicbench.records import Sample, make_tags
from nicbench.report.timeline import _binned, cpu_series, point_timelines, throughput_series

RUNS = Path(__file__).resolve().parents[1] / "fixtures" / "runs"


def test_spans_of_several_processes_add_up_on_one_grid():
    # two processes of one client, read 0.2 s apart: their bytes spread pro rata, none lost
    spans = [(0.0, 1.0, 100.0), (1.0, 2.0, 100.0), (0.2, 1.2, 50.0), (1.2, 2.0, 40.0)]
    rates = _binned(spans, 0.0, 0.5, 4)
    assert sum(r * 0.5 for r in rates) == pytest.approx(290.0)
    assert rates[0] == pytest.approx((50 + 0.3 * 50) / 0.5)


def test_series_per_client_and_state_from_samples():
    rx = make_tags(host="c1", proc="5201", direction="tx", side="receiver", omitted=0)
    warm = make_tags(host="c1", proc="5201", direction="tx", side="receiver", omitted=1)
    snd = make_tags(host="srv", proc="5201", direction="tx", side="sender", omitted=0)
    s = [Sample("t", "tcp.bytes", 10.0, "bytes", 0, 1, rx), Sample("t", "tcp.bytes", 99.0, "bytes", -1, 0, warm),
         Sample("t", "tcp.bytes", 12.0, "bytes", 0, 1, snd),
         Sample("t", "cpu.time", 0.5, "s", 0, 1, make_tags(host="m", cpu="0", state="softirq")),
         Sample("t", "cpu.time", 0.5, "s", 0, 1, make_tags(host="m", cpu="0", state="idle"))]
    assert throughput_series(s) == {"c1 tx": [(0, 1, 10.0)]}           # receivers only, warm-up left out
    assert cpu_series(s) == {("m", "softirq"): [(0, 1, 0.5)]}           # busy states only


def test_every_point_of_a_stored_run_gets_its_timeline(tmp_path):
    run = tmp_path / "tcp"
    shutil.copytree(RUNS / "tcp", run)
    view = load_run(run)
    out = tmp_path / "out"
    out.mkdir()
    files = point_timelines(view, out)
    assert sorted(files) == sorted({t.point for t in view.trials})
    assert all((out / f).stat().st_size > 5000 for f in files.values())


def test_a_value_held_over_its_span_is_averaged_or_topped_per_bin_and_a_gap_stays_one():
    import math

    from nicbench.report.timeline import _levels
    spans = [(0.0, 0.5, 100e-6), (0.5, 1.0, 300e-6), (2.0, 2.5, 50e-6)]
    mean = _levels(spans, 0.0, 1.0, 3, "mean")
    assert mean[0] == pytest.approx(200e-6) and math.isnan(mean[1]) and mean[2] == pytest.approx(50e-6)
    assert _levels(spans, 0.0, 1.0, 3, "max")[0] == pytest.approx(300e-6)


def test_what_the_archive_lacks_is_said_not_left_out(tmp_path):
    from nicbench.report.timeline import Panel, draw
    rx = make_tags(host="c1", proc="5201", direction="tx", side="receiver", omitted=0)
    only = [Sample("t", "tcp.bytes", 1e8, "bytes", i * 0.5, (i + 1) * 0.5, rx) for i in range(4)]
    png, notes = draw(only, tmp_path, "bare", "bare")
    assert png is not None and png.stat().st_size > 5000
    assert notes == ["the cores busy: no CPU reads of this trial in the archive",
                     "retransmits, drops and errors: no counters of this trial in the archive"]
    # a study's panel with no series, and nothing else either: no figure, and why
    png, notes = draw([], tmp_path, "none", "none", panels=[Panel("IOPS", {})], notes=["fio's IOPS: none"])
    assert png is None and notes[0] == "fio's IOPS: none"


@pytest.mark.parametrize(("kind", "said"), [
    ("https", "wrk reports its totals only"),
    ("storage", "this run kept each initiator's total only"),
    ("packets", "the generator reported a total only"),
    ("latency", "round-trip percentiles per interval"),
])
def test_every_study_draws_its_own_series_and_says_what_it_lacks(tmp_path, kind, said):
    from nicbench.registry import VIEWS
    from nicbench.report.timeline import timelines
    run = tmp_path / kind
    shutil.copytree(RUNS / kind, run)
    view = load_run(run)
    out = tmp_path / "out"
    out.mkdir()
    panels = importlib.import_module(f"nicbench.studies.{kind}.view").timeline_panels
    tl = timelines(view, out, panels)
    assert sorted(tl.files) == sorted({t.point for t in view.trials})
    assert all((out / f).stat().st_size > 5000 for f in tl.files.values())
    assert any(said in n for notes in tl.notes.values() for n in notes), tl.notes
    assert VIEWS[kind].kind == kind
