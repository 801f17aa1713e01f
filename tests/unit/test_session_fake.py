"""A whole run through the session on fake hosts: no root, no lab, real
recorded tool outputs.  The session knows no study: it is handed a runner
factory (here the TCP study's, as the CLI would take it from the registry)."""

from __future__ import annotations

import pytest

from conftest import fixture_text
from nicbench.api import load_run, render
from nicbench.core.errors import Interrupted, PreflightError
from nicbench.hosts.fake import FakeHosts, FakeTransport, Script
from nicbench.hosts.spec import HostSpec, HostsSpec
from nicbench.plan import parse_plan
from nicbench.run.hosts import OpenedHosts
from nicbench.run.session import execute
from nicbench.store.archive import Archive
from nicbench.store.reader import open_run_dir
from nicbench.studies.tcp.runner import TcpRunner

PLAN = """
name = "fake-run"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
[study]
directions = ["tx"]
io_sizes = ["128K"]
connections = [4]
duration = 3
omit = 0
trim = 0.25
repeats = 2
timeout_margin = 1
"""


def responder(argv: list[str]) -> Script:
    if argv[:2] == ["iperf3", "--version"]:
        return Script("iperf 3.12 (cJSON 1.7.15)\nLinux srv 6.1.0 #1 SMP x86_64\n")
    if argv[:2] == ["iperf3", "--help"]:
        return Script("  -Z, --zerocopy  use a 'zero copy' method\n  --bidir\n  --get-server-output\n")
    if argv[:2] == ["iperf3", "-s"]:
        return Script(hang=True, listen=int(argv[argv.index("-p") + 1]))
    if argv[:2] == ["iperf3", "-c"]:
        return Script(stdout=fixture_text("iperf3", "3.12", "tx_p2.json"), runtime=3.01)
    if argv[0] == "ping":
        return Script("1 packets transmitted, 1 received\n")
    return Script()


class Recorder:
    def __init__(self, stop_after: int | None = None):
        self.events: list[str] = []
        self.stop_after = stop_after

    def begin(self, run_id, total, meta):
        self.events.append(f"begin {total} trim={meta['trim']}")

    def trial_start(self, spec):
        self.events.append(f"start {spec.trial_id}")

    def trial_end(self, rec, samples):
        self.events.append(f"end {rec.spec.trial_id} {rec.status}")
        if self.stop_after is not None and len([e for e in self.events if e.startswith("end")]) >= self.stop_after:
            raise KeyboardInterrupt

    def end(self):
        self.events.append("finish")


def opener(transports: dict[str, FakeTransport]):
    hosts = FakeHosts(HostsSpec("fake-run", 1500, (HostSpec("srv", "server", "", "198.18.0.1", 24),
                                                   HostSpec("c1", "client", "", "198.18.0.2", 24),
                                                   HostSpec("c2", "client", "", "198.18.0.3", 24))), transports)
    return hosts, (lambda plan: OpenedHosts(hosts))


def test_a_run_end_to_end_on_fake_hosts_is_stored_and_reported(tmp_path):
    ts = {h: FakeTransport(h, responder) for h in ("srv", "c1", "c2")}
    ts["srv"].files.update({"/proc/stat": fixture_text("proc", "stat.txt"),
                            "/proc/softirqs": fixture_text("proc", "softirqs.txt")})
    hosts, open_fake = opener(ts)
    prog = Recorder()
    out = execute(parse_plan(PLAN), PLAN, runner=TcpRunner, store=tmp_path, progress=prog, hosts_for=open_fake)
    assert out.status == "done" and (out.ok, out.failed) == (2, 0)
    assert prog.events == ["begin 2 trim=0.25", "start t0001", "end t0001 ok", "start t0002", "end t0002 ok",
                           "finish"]
    assert hosts.closed
    # the store has everything the results side needs, and nothing of the session
    r = open_run_dir(out.run_dir)
    m = r.meta()
    assert m["status"] == "done" and m["meta.engine"] == "iperf3" and m["meta.engine_version"] == "3.12"
    assert m["meta.tuning"]["profile"] == "stock" and not m["meta.tuning"]["applied"]
    assert {h.host for h in r.facts()} == {"srv", "c1", "c2"}            # no "machine": not a shared one
    assert (out.run_dir / "plan.toml").read_text() == PLAN
    assert all((out.run_dir / x.path).exists() for x in r.raw_outputs())
    r.close()
    view = load_run(out.run_dir)
    assert [t.status for t in view.trials] == ["ok", "ok"]
    assert view.points[0].median == pytest.approx(sum(t.gbps for t in view.trials) / 2)    # median of 2 repeats
    assert render(view).exists()


def test_a_preflight_problem_stops_before_the_run_directory_exists(tmp_path):
    def no_iperf3(argv):
        return Script(returncode=127) if argv[0] == "iperf3" else responder(argv)
    ts = {h: FakeTransport(h, no_iperf3 if h == "c2" else responder) for h in ("srv", "c1", "c2")}
    hosts, open_fake = opener(ts)
    with pytest.raises(PreflightError, match="c2: iperf3 is not installed"):
        execute(parse_plan(PLAN), PLAN, runner=TcpRunner, store=tmp_path, hosts_for=open_fake)
    # the archive was opened first (a bad store fails before any host is touched), but holds no run
    assert hosts.closed and not (tmp_path / "runs").exists()
    with Archive.open(tmp_path) as a:
        assert a.runs(include_hidden=True) == []


def test_ctrl_c_keeps_finished_points_and_closes_everything(tmp_path):
    ts = {h: FakeTransport(h, responder) for h in ("srv", "c1", "c2")}
    hosts, open_fake = opener(ts)
    with pytest.raises(Interrupted, match="after 1 of 2 points"):
        execute(parse_plan(PLAN), PLAN, runner=TcpRunner, store=tmp_path, progress=Recorder(stop_after=1),
                hosts_for=open_fake)
    [run_dir] = list((tmp_path / "runs").iterdir())
    r = open_run_dir(run_dir)
    assert r.meta()["status"] == "interrupted" and [t.status for t in r.trials()] == ["ok"]
    r.close()
    assert hosts.closed
    assert all(p.poll() is not None for t in ts.values() for p in t.spawned)     # no process outlives the run


def test_ctrl_c_before_the_run_is_recorded_says_nothing_was_recorded(tmp_path):
    """A signal while the hosts are prepared (after tuning, the facts are read
    again: seconds on a busy machine) lands before the run is recorded: it
    says so, not 'finished points are stored' with no run to find them in."""
    def ctrl_c_at_facts(argv):
        if argv[:2] == ["iperf3", "--version"]:
            raise KeyboardInterrupt
        return responder(argv)
    ts = {h: FakeTransport(h, ctrl_c_at_facts if h == "c1" else responder) for h in ("srv", "c1", "c2")}
    hosts, open_fake = opener(ts)
    with pytest.raises(Interrupted) as e:
        execute(parse_plan(PLAN), PLAN, runner=TcpRunner, store=tmp_path, hosts_for=open_fake)
    line = e.value.one_line()
    assert "before its first point" in line and "nothing was recorded" in line and "stored" not in line
    assert hosts.closed and not (tmp_path / "runs").exists()


def test_a_bug_in_one_point_fails_that_point_and_the_run_goes_on(tmp_path):
    """The audit's case: a parser exception (Infinity, deep nesting ...) gave
    'internal error' and lost every later point."""
    class Broken(TcpRunner):
        calls = 0

        def trial(self, env, spec, raw_dir):
            Broken.calls += 1
            if Broken.calls == 1:
                (raw_dir / "c1-client-5201.out").write_text('{"start": {"x": Infinity}')
                raise ValueError("could not convert string to float: 'Infinity'")
            return super().trial(env, spec, raw_dir)
    ts = {h: FakeTransport(h, responder) for h in ("srv", "c1", "c2")}
    hosts, open_fake = opener(ts)
    out = execute(parse_plan(PLAN), PLAN, runner=Broken, store=tmp_path, hosts_for=open_fake)
    assert (out.ok, out.failed) == (1, 1) and out.status == "done-with-failures"
    r = open_run_dir(out.run_dir)
    first, second = r.trials()
    assert first.status == "failed" and "internal error while running or reading the point: ValueError" in first.error
    assert "Traceback" in first.meta["internal_error"]
    assert [x.path for x in r.raw_outputs() if x.trial_id == "t0001"] == ["raw/t0001/c1-client-5201.out"]
    assert second.status == "ok"


def test_a_flagged_tuning_drift_is_said_in_the_summary_on_the_progress_line_and_in_the_report(tmp_path, monkeypatch):
    """on_tuning_drift = "flag" kept the point and said so only in its trial's
    meta: now the run's warnings (the summary), the progress line and the
    report's warnings name the point and the setting."""
    import io

    from rich.console import Console

    from nicbench.cli.progress import TerminalProgress
    from nicbench.run import session
    from nicbench.studies.tcp.view import TcpView
    from nicbench.tuning.types import Row
    applied = Row("srv", "sysctl net.ipv4.tcp_fin_timeout", "sysctl:net.ipv4.tcp_fin_timeout", "33", "33", "applied")
    moved = Row("srv", "sysctl net.ipv4.tcp_fin_timeout", "sysctl:net.ipv4.tcp_fin_timeout", "44", "33", "drifted",
                note="reads '44', the profile set '33': changed during the run")
    facts_and_tuning = session._facts_and_tuning

    def applying(r, pre):
        out = facts_and_tuning(r, pre)
        r.applied = [applied]
        return out
    reads = iter([[], [moved]])                       # found moved after the second repeat only
    monkeypatch.setattr(session, "_facts_and_tuning", applying)
    monkeypatch.setattr(session, "tuning_drift", lambda rows, targets: next(reads))
    ts = {h: FakeTransport(h, responder) for h in ("srv", "c1", "c2")}
    _, open_fake = opener(ts)
    text = 'on_tuning_drift = "flag"\n' + PLAN
    log = io.StringIO()
    prog = TerminalProgress(TcpView(), Console(file=log, force_terminal=False, width=400))
    out = execute(parse_plan(text), text, runner=TcpRunner, store=tmp_path, progress=prog, hosts_for=open_fake)
    assert out.status == "done" and out.ok == 2                                   # flagged, not failed
    said = "srv sysctl net.ipv4.tcp_fin_timeout: reads '44', the profile set '33': changed during the run"
    assert [w for w in out.warnings if "drifted" in w] == [
        "tuning drifted during tx/c4/io128K (repeat 2), the point is kept as the plan says "
        f"(on_tuning_drift = \"flag\"): {said}"]
    lines = log.getvalue().splitlines()
    assert lines[1].startswith("[1/2] ") and "drifted" not in lines[1]
    assert lines[2].startswith("[2/2] ") and lines[2].endswith(f" -- WARNING: tuning drifted: {said}")
    view = load_run(out.run_dir)
    assert [t.tuning_drift for t in view.trials] == [(), (said,)]
    page = render(view).read_text()
    assert "tuning drifted during tx/c4/io128K (repeat 2, trial t0002): srv sysctl net.ipv4.tcp_fin_timeout: " \
           "reads &#39;44&#39;" in page


def test_sigterm_is_said_as_sigterm_not_as_the_user(tmp_path):
    """A service manager's SIGTERM was reported as 'interrupted by the user'
    for the point in flight and 'stopped by the user' for the run."""
    import os
    import signal

    from nicbench.core.errors import Stopped
    from nicbench.run.kit import PointGuard

    class Terminating(Recorder):
        def trial_start(self, spec):
            super().trial_start(spec)
            if spec.trial_id == "t0002":
                os.kill(os.getpid(), signal.SIGTERM)      # the run's handler raises in this thread
    ts = {h: FakeTransport(h, responder) for h in ("srv", "c1", "c2")}
    hosts, open_fake = opener(ts)
    with pytest.raises(Interrupted) as e:
        execute(parse_plan(PLAN), PLAN, runner=TcpRunner, store=tmp_path, progress=Terminating(), hosts_for=open_fake)
    assert e.value.message.startswith("run terminated by SIGTERM after 1 of 2 points")
    assert hosts.closed
    # the point in flight: its guard says which signal
    for sig, words in ((signal.SIGTERM, "terminated by SIGTERM"), (signal.SIGINT, "interrupted by the user")):
        with PointGuard({}, list) as guard:
            raise Stopped(sig)
        assert (guard.status, guard.error) == ("interrupted", words)
    with PointGuard({}, list) as guard:
        raise KeyboardInterrupt                              # Python's own Ctrl-C
    assert guard.error == "interrupted by the user"
