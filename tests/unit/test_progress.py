import io

from rich.console import Console

from nicbench.cli.progress import TerminalProgress
from nicbench.records import Sample, TrialRecord, TrialSpec, make_tags
from nicbench.studies.tcp.view import TcpView


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
    quiet = io.StringIO()
    q = TerminalProgress(TcpView(), Console(file=quiet, force_terminal=False))
    q.begin("r", 1, {}), q.trial_start(spec), q.trial_end(rec, samples), q.end()
    assert quiet.getvalue() == ""
