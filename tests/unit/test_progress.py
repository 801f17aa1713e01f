import io
import json

from rich.console import Console

from conftest import FIXTURES
from nicbench.cli.progress import TerminalProgress
from nicbench.cli.tables import points_table
from nicbench.records import Sample, TrialRecord, TrialSpec, make_tags
from nicbench.studies.tcp.view import HEADLINE, TcpView


def _trial(status="ok"):
    spec = TrialSpec("t0001", 0, "tcp", "tx/c2/io128K", 0, {})
    samples = [Sample("t0001", "tcp.bytes", 1.25e9, "bytes", float(i), float(i + 1),
                      make_tags(host="c1", proc=5201, direction="tx", side="receiver", omitted=0))
               for i in range(3)]
    return spec, TrialRecord(spec, status, 0.0, 3.0, None if status == "ok" else "boom"), samples


def test_live_progress_on_a_terminal_shows_count_point_and_last_result():
    buf = io.StringIO()
    p = TerminalProgress(TcpView(), Console(file=buf, force_terminal=True, width=150, color_system=None))
    spec, rec, samples = _trial()
    p.begin("run-1", 2, {"trim": 0.0})
    p.trial_start(spec)
    p.trial_end(rec, samples)
    p.end()
    out = buf.getvalue()
    assert "run run-1: 2 points" in out and "1/2" in out and "10.0 Gbps" in out and "tx/c2/io128K" in out


def test_failed_point_is_printed_and_quiet_when_not_a_terminal():
    buf = io.StringIO()
    p = TerminalProgress(TcpView(), Console(file=buf, force_terminal=True, width=150, color_system=None))
    spec, rec, samples = _trial("failed")
    p.begin("r", 1, {}), p.trial_start(spec), p.trial_end(rec, samples), p.end()
    assert "boom" in buf.getvalue() and "FAILED" in buf.getvalue()



def test_not_a_terminal_gets_one_plain_line_per_point():
    """CI logs and nohup: no bar, no escape codes, but never silent until the end."""
    log = io.StringIO()
    q = TerminalProgress(TcpView(), Console(file=log, force_terminal=False, width=40))
    spec, rec, samples = _trial()
    fspec, frec, fsamples = _trial("failed")
    q.begin("run-9", 2, {"trim": 0.0})
    q.trial_start(spec), q.trial_end(rec, samples)
    q.trial_start(fspec), q.trial_end(frec, fsamples)
    q.end()
    assert log.getvalue().splitlines() == ["run run-9: 2 points", "[1/2] tx/c2/io128K 10.0 Gbps",
                                           "[2/2] tx/c2/io128K FAILED: boom"]
    assert "\x1b" not in log.getvalue()


def test_the_results_table_has_the_reports_headline_columns():
    rows = json.loads((FIXTURES / "runs" / "tcp" / "golden.json").read_text())["points"]
    out = io.StringIO()
    Console(file=out, width=200, force_terminal=False).print(points_table(rows, HEADLINE, title="golden: results"))
    text = out.getvalue()
    lines = text.splitlines()
    assert lines[0].startswith("golden: results")
    assert all(c.label in lines[1] for c in HEADLINE[:4])
    assert any(ln.split()[:5] == ["tx", "3", "8K", "1.88", "—"] for ln in lines)   # 3 significant figures
    assert len([ln for ln in lines if ln.split()[:1] in (["tx"], ["rx"], ["bidir"])]) == len(rows)
