"""The TCP trial runner against the fake transport: no root, real recorded outputs."""

from dataclasses import replace
from pathlib import Path

import pytest

from conftest import fixture_text
from nicbench.core.errors import PreflightError
from nicbench.hosts.fake import FakeTransport, Script
from nicbench.plan import parse_plan
from nicbench.plan.matrix import trials
from nicbench.report.tables import table
from nicbench.run.iperf import detect_tool
from nicbench.run.kit import PointEnv
from nicbench.studies.tcp.engines import TcpHosts
from nicbench.studies.tcp.engines.iperf2 import Iperf2
from nicbench.studies.tcp.engines.iperf3 import Iperf3
from nicbench.studies.tcp.engines.pairs import TcpContext
from nicbench.studies.tcp.view import HEADLINE, table_rows
from nicbench.tools import iperf3

ENGINE = {"iperf3": Iperf3, "iperf2": Iperf2}


def run_trial(ctx, env, spec, raw_dir):
    """One point of the engine the plan names, as its preflight left it (``ctx``)."""
    return ENGINE[ctx.study.engine].prepared(ctx).trial(env, spec, raw_dir)


def preflight(study, server, clients, transports, addresses):
    engine = ENGINE[study.engine](TcpHosts(study, server, list(clients), transports, addresses))
    pre = engine.preflight()
    return engine.ctx, list(pre.warnings)


PLAN = """
name = "f"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
[study]
io_sizes = ["128K"]
connections = [4]
duration = 3
omit = 0
trim = 0.25
timeout_margin = 1
"""
INFO = iperf3.info_from("iperf 3.12", "--bidir --zerocopy")


def env(tmp_path):
    """What the session hands the study: run-relative raw paths, every host's test interface."""
    return PointEnv(rel=lambda p: str(Path(p).relative_to(tmp_path)),
                    ifnames={"srv": "eth0", "c1": "eth0", "c2": "eth0"})


def make_ctx(tmp_path, client_script):
    plan = parse_plan(PLAN)
    servers = {c: FakeTransport(c, lambda argv: Script(hang=True, listen=int(argv[argv.index("-p") + 1])))
               for c in ("c1", "c2")}
    srv = FakeTransport("srv", client_script)
    ctx = TcpContext(plan.study, "srv", plan.clients, {"srv": srv, **servers}, {"c1": "198.18.0.2", "c2": "198.18.0.3"},
                     INFO)
    return plan, ctx, srv, servers


def test_point_runs_all_clients_behind_one_barrier(tmp_path):
    plan, ctx, srv, servers = make_ctx(tmp_path, lambda argv: Script(
        stdout=fixture_text("iperf3", "3.12", "tx_p2.json"), runtime=3.01))
    [spec] = trials(plan)
    rec, samples, raws = run_trial(ctx, env(tmp_path), spec, tmp_path / spec.trial_id)
    assert rec.status == "ok", rec.error
    # anchored at the exit stamp minus the last interval's end (3.0003 s in the fixture)
    assert set(rec.meta["anchors"].values()) == {"exit"}
    for key, start in rec.meta["test_starts"].items():
        assert 0 <= start - rec.meta["launch_stamps"][key] < 0.05
    # one server per client, each on its own port, started before the clients
    # what was launched on the client hosts: one engine server each (commands run
    # there besides, such as the samplers' reads, are not processes of the point)
    assert [list(p.argv[0:2]) for t in servers.values() for p in t.spawned] == [["iperf3", "-s"]] * 2
    clients = srv.spawned
    assert len(clients) == 2 and all(p.gated and p.released_at for p in clients)
    # a barrier, not a sequential launch: every client exists before the first is released
    assert max(p.spawned_at for p in clients) <= min(p.released_at for p in clients)
    assert {p.argv[p.argv.index("-c") + 1] for p in clients} == {"198.18.0.2", "198.18.0.3"}
    assert all(p.argv[p.argv.index("-P") + 1] == "2" for p in clients)     # 4 total over 2 clients
    assert rec.meta["start_skew_s"] is not None and rec.meta["start_skew_s"] < 0.5
    hosts = {s.tag("host") for s in samples if s.tag("side") == "receiver"}
    assert hosts == {"c1", "c2"}
    assert len(raws) == 8 and all((tmp_path / r.path).exists() for r in raws)


def test_anchor_falls_back_to_launch_when_the_exit_is_implausible():
    from nicbench.run.iperf import iperf3_anchor
    assert iperf3_anchor(100.0, 104.1, 4.0) == (pytest.approx(100.1), "exit")      # 100 ms of set-up
    assert iperf3_anchor(100.0, 110.0, 4.0) == (100.0, "launch")                  # 6 s "set-up": hung exit
    assert iperf3_anchor(100.0, None, 4.0) == (100.0, "launch")
    assert iperf3_anchor(None, 104.0, 4.0) == (100.0, "exit")


def test_interface_counters_are_sampled_during_the_point(tmp_path):
    import itertools
    tick = itertools.count()

    def net_dev():
        n = next(tick)   # tx grows 10x faster than rx: tx must come out as the study's "tx"
        return ("Inter-|\n face |bytes\n"
                f"  eth0: {n * 100} {n} 0 0 0 0 0 0 {n * 1000} {n * 10} 0 0 0 0 0 0\n")

    plan, ctx, srv, servers = make_ctx(tmp_path, lambda argv: Script(
        stdout=fixture_text("iperf3", "3.12", "tx_p2.json"), runtime=3.01))
    srv.counters = net_dev
    rec, samples, _ = run_trial(ctx, env(tmp_path), trials(plan)[0], tmp_path / "t")
    by = {(s.metric, s.tag("direction")): s for s in samples if s.metric.startswith("if.")}
    assert by and all(s.tag("host") == "srv" and s.tag("ifname") == "eth0" for s in by.values())
    tx = sum(s.value for s in samples if s.metric == "if.bytes" and s.tag("direction") == "tx")
    rx = sum(s.value for s in samples if s.metric == "if.bytes" and s.tag("direction") == "rx")
    assert tx == 10 * rx > 0
    assert srv.net_dev_fallback_reads >= 1      # the last read, after the clients exited


def test_error_key_fails_the_point_with_a_hint(tmp_path):
    plan, ctx, *_ = make_ctx(tmp_path, lambda argv: Script(stdout=fixture_text("iperf3", "3.12", "err_busy.json")))
    [spec] = trials(plan)
    rec, samples, _ = run_trial(ctx, env(tmp_path), spec, tmp_path / "t")
    assert rec.status == "failed" and "busy" in rec.error and "hint:" in rec.error
    assert samples == []


def test_truncated_output_fails_the_point(tmp_path):
    plan, ctx, *_ = make_ctx(tmp_path, lambda argv: Script(stdout=fixture_text("iperf3", "3.12", "err_truncated.json")))
    rec, _, _ = run_trial(ctx, env(tmp_path), trials(plan)[0], tmp_path / "t")
    assert rec.status == "failed" and "truncated" in rec.error


def test_hung_client_is_stopped_at_its_time_limit(tmp_path):
    plan, ctx, srv, servers = make_ctx(tmp_path, lambda argv: Script(hang=True))
    rec, _, _ = run_trial(ctx, env(tmp_path), trials(plan)[0], tmp_path / "t")
    assert rec.status == "failed" and "still running" in rec.error
    assert all(p.poll() is not None for p in srv.spawned)                 # stopped
    assert all(p.poll() is not None for t in servers.values() for p in t.spawned)


def test_server_that_cannot_listen_fails_with_its_own_error(tmp_path):
    plan, ctx, srv, servers = make_ctx(tmp_path, lambda argv: Script())
    servers["c1"].responder = lambda argv: Script(
        stdout='{"error": "unable to start listener for connections: Address already in use"}', returncode=1)
    rec, _, _ = run_trial(ctx, env(tmp_path), trials(plan)[0], tmp_path / "t")
    assert rec.status == "failed" and "Address already in use" in rec.error and "port_base" in rec.error
    assert srv.spawned == []                                                # no client started


def test_missing_tool_in_preflight():
    t = FakeTransport("c1", lambda argv: Script(returncode=127))
    with pytest.raises(PreflightError, match="iperf3 is not installed"):
        detect_tool(t, "iperf3")


def test_a_late_server_clock_is_placed_by_its_end(tmp_path):
    # Recorded: a busy --bidir iperf3 server whose interval clock started 0.51 s
    # after the client's; anchored at the client's clock its intervals would sit
    # half a second early and break the shared window.
    rep = iperf3.parse(fixture_text("iperf3", "3.12", "bidir_busy_server_clock_late.json"))
    assert rep.last_end == pytest.approx(4.0, abs=0.01) and rep.peer_last_end == pytest.approx(3.49, abs=0.01)
    plan = parse_plan(
        PLAN.replace("[study]", '[study]\ndirections = ["bidir"]')
        .replace("duration = 3", "duration = 3\nomit = 1")
        .replace("omit = 0\n", "")
    )
    servers = {
        c: FakeTransport(c, lambda argv: Script(hang=True, listen=int(argv[argv.index("-p") + 1])))
        for c in ("c1", "c2")
    }
    srv = FakeTransport(
        "srv",
        lambda argv: Script(stdout=fixture_text("iperf3", "3.12", "bidir_busy_server_clock_late.json"), runtime=4.19),
    )
    ctx = TcpContext(
        plan.study, "srv", plan.clients, {"srv": srv, **servers}, {"c1": "198.18.0.2", "c2": "198.18.0.3"}, INFO
    )
    rec, samples, _ = run_trial(ctx, env(tmp_path), trials(plan)[0], tmp_path / "t")
    assert rec.meta["peer_clock_offsets"]["c1:5201"] == pytest.approx(0.51, abs=0.01)
    # its measured span is shorter (its warm-up ran long on its own clock), but the
    # data is real and correctly placed: the point stands
    from nicbench.studies.tcp.analysis import trial_result

    r = trial_result(rec, samples, plan.study.trim)
    assert r.status == "ok", r.error
    for host in ("c1", "c2"):
        ends = {
            d: max(
                s.t_end
                for s in samples
                if s.tag("host") == host and s.tag("direction") == d and s.tag("side") == "receiver"
            )
            for d in ("tx", "rx")
        }
        assert ends["tx"] == pytest.approx(ends["rx"], abs=0.05)


def test_a_damaged_report_fails_the_point_naming_the_damage(tmp_path):
    # a C "-nan" in one figure (derived from tx_p2.json, see capture.sh): the client's
    # own report must not be trusted, and its nested server output is not a fallback
    plan, ctx, *_ = make_ctx(tmp_path, lambda argv: Script(stdout=fixture_text("iperf3", "3.12", "tx_p2_nan.json"),
                                                           runtime=3.01))
    rec, samples, _ = run_trial(ctx, env(tmp_path), trials(plan)[0], tmp_path / "t")
    assert rec.status == "failed" and "c1:5201: its report is damaged" in rec.error and "-nan" in rec.error
    assert not [s for s in samples if s.metric == "tcp.bytes"]


def test_a_missing_report_names_the_pair(tmp_path):
    plan, ctx, *_ = make_ctx(tmp_path, lambda argv: Script(stdout="", runtime=3.01))
    rec, _, _ = run_trial(ctx, env(tmp_path), trials(plan)[0], tmp_path / "t")
    assert rec.status == "failed" and "iperf3 to c1:5201: no JSON in iperf3 output (empty)" in rec.error


def test_a_non_zero_exit_fails_the_point_even_with_a_clean_report(tmp_path):
    plan, ctx, *_ = make_ctx(tmp_path, lambda argv: Script(stdout=fixture_text("iperf3", "3.12", "tx_p2.json"),
                                                           stderr="iperf3: interrupt - the client has terminated\n",
                                                           returncode=1, runtime=3.01))
    rec, _, _ = run_trial(ctx, env(tmp_path), trials(plan)[0], tmp_path / "t")
    assert rec.status == "failed" and "exited 1" in rec.error and "client has terminated" in rec.error


def test_zero_bytes_received_is_a_failed_point_not_0_gbps(tmp_path):
    from nicbench.studies.tcp.analysis import trial_result
    plan, ctx, *_ = make_ctx(tmp_path, lambda argv: Script(
        stdout=fixture_text("iperf3", "3.12", "tx_p2_zero_bytes.json"), runtime=3.01))
    rec, samples, _ = run_trial(ctx, env(tmp_path), trials(plan)[0], tmp_path / "t")
    # the tools said nothing was wrong, but a pair that moved nothing is lost: here the only one
    assert rec.status == "failed" and "c1:5201 moved no tx bytes" in rec.error
    r = trial_result(rec, samples, plan.study.trim)
    assert r.status == "failed" and r.gbps is None
    # the analysis alone (a run stored before the runner knew) says the same
    r = trial_result(replace(rec, status="ok", error=None, meta={}), samples, plan.study.trim)
    assert r.status == "failed" and r.gbps is None


def test_an_engine_older_than_nicbench_runs_is_refused_at_preflight_with_the_reason():

    def old(version):
        def respond(argv):
            if argv[:2] == ["iperf3", "--version"]:
                return Script(f"iperf {version} (cJSON 1.7.13)\n")
            if argv[:2] == ["iperf3", "--help"]:
                return Script("--zerocopy --bidir --get-server-output\n")
            return Script("1 received\n")
        return respond
    plan = parse_plan(PLAN.replace("[study]", '[study]\ndirections = ["tx", "bidir"]'))
    ts = {"srv": FakeTransport("srv", old("3.12")), "c1": FakeTransport("c1", old("3.9")),
          "c2": FakeTransport("c2", old("3.10.1"))}
    with pytest.raises(PreflightError) as e:
        preflight(plan.study, "srv", plan.clients, ts, {"c1": "198.18.0.2", "c2": "198.18.0.3"})
    msg = e.value.message
    assert "c1: iperf3 3.9 is older than 3.10" in msg and "garbled JSON" in msg
    assert "c2: iperf3 3.10.1 is older than 3.11" in msg and "#952" in msg      # bidir asked
    assert "srv:" not in msg


def test_established_peers_from_a_recorded_tcp_table():
    from nicbench.run.procnet import established_peers
    text = fixture_text("proc", "net_tcp_established.txt")
    assert established_peers(text, 5201) == [("198.18.7.1", 40123)]
    assert established_peers(text, 40123) == [("127.0.0.1", 5201)]
    assert established_peers("garbage\n 0: zz:zz yy:yy 01\n", 5201) == []


def test_a_server_held_by_another_peer_is_named_when_the_point_hangs(tmp_path):
    """The audit's case: an idle peer holding the one-off iperf3 server failed
    points with 'the path may be stalled'."""
    plan, ctx, srv, servers = make_ctx(tmp_path, lambda argv: Script(hang=True))
    ctx = TcpContext(ctx.study, "srv", ctx.clients, ctx.transports, {**ctx.addresses, "srv": "198.18.0.1"}, INFO)
    table = fixture_text("proc", "net_tcp_established.txt")
    real_read = servers["c1"].read_text

    def read(path):
        first = servers["c1"].spawned[0].pid if servers["c1"].spawned else None
        if path == f"/proc/{first}/net/tcp":
            return real_read(path).rstrip("\n") + "\n" + table.splitlines()[3] + "\n"   # 198.18.7.1 -> :5201
        return real_read(path)
    servers["c1"].read_text = read
    rec, _, _ = run_trial(ctx, env(tmp_path), trials(plan)[0], tmp_path / "t")
    assert rec.status == "failed"
    assert "the engine server on c1:5201 is busy with another peer, 198.18.7.1:40123" in rec.error


def test_a_host_that_is_gone_is_named_when_the_point_hangs(tmp_path):
    plan, ctx, srv, servers = make_ctx(tmp_path, lambda argv: Script(hang=True))
    servers["c1"].gone = True
    rec, _, _ = run_trial(ctx, env(tmp_path), trials(plan)[0], tmp_path / "t")
    assert rec.status == "failed" and "c1 is unreachable" in rec.error and "path may be stalled" not in rec.error


def test_a_lost_client_makes_the_point_partial_and_keeps_the_survivors(tmp_path):
    """The audit's case: one client's engine server killed mid-point failed the
    point with 0 samples, the other client's complete data left in raw files."""
    from nicbench.studies.tcp.analysis import point_stats, trial_result

    def per_client(argv):
        target = argv[argv.index("-c") + 1]
        if target == "198.18.0.3":        # c2's engine server was killed: iperf3 says so and exits 1
            return Script(stdout=fixture_text("iperf3", "3.12", "err_killed.json"), returncode=1, runtime=1.0)
        return Script(stdout=fixture_text("iperf3", "3.12", "tx_p2.json"), runtime=3.01)
    plan, ctx, *_ = make_ctx(tmp_path, per_client)
    rec, samples, raws = run_trial(ctx, env(tmp_path), trials(plan)[0], tmp_path / "t")
    assert rec.status == "partial" and rec.error.startswith("partial: c2:5201 lost: iperf3 to c2:5201 exited 1")
    assert set(rec.meta["lost"]) == {"c2:5201"}
    assert {s.tag("host") for s in samples if s.metric == "tcp.bytes"} == {"c1"}      # the survivor's data
    r = trial_result(rec, samples, plan.study.trim)
    assert r.status == "partial" and r.gbps is not None and r.clients_used == 1
    [p] = point_stats([r])
    assert p.survivors_only and p.n_partial == 1 and p.n_ok == 0 and p.median == pytest.approx(r.gbps)
    # the report's tables say so: the Gbps cell flagged, ok/failed counting the partial repeat
    [row] = table(table_rows([p]), HEADLINE).rows
    cells = dict(zip([c.label for c in HEADLINE], row, strict=True))
    assert cells["Gbps (median)"].alert and cells["ok/failed"].text == "0/0 (+1 partial)"


def test_every_client_lost_is_a_failed_point(tmp_path):
    plan, ctx, *_ = make_ctx(tmp_path, lambda argv: Script(stdout=fixture_text("iperf3", "3.12", "err_killed.json"),
                                                           returncode=1, runtime=1.0))
    rec, samples, _ = run_trial(ctx, env(tmp_path), trials(plan)[0], tmp_path / "t")
    assert rec.status == "failed" and "c1:5201" in rec.error and "c2:5201" in rec.error


def test_a_pair_whose_output_cannot_be_parsed_is_lost_with_why_never_the_run():
    """run.point.parsed_or_lost, shared by the iperf, UDP and nbperf runners:
    nicbench's own error in its words (after the label, when it does not name
    the pair itself), a parser bug as output not understood, the value passed
    through otherwise."""
    from nicbench.core.errors import ToolError
    from nicbench.run.point import parsed_or_lost

    def tool_error():
        raise ToolError("no end record", where="srv", hint="run it again")

    def parser_bug():
        raise KeyError("sum")
    lost: dict[str, str] = {}
    assert parsed_or_lost("c1:5201", lost, "iperf3", lambda: 7) == 7 and lost == {}
    assert parsed_or_lost("c1:5201", lost, "iperf3", tool_error) is None
    assert lost["c1:5201"] == "no end record (hint: run it again)"
    assert parsed_or_lost("c2:5201", lost, "nbperf", tool_error, label="nbperf to c2:5201") is None
    assert lost["c2:5201"] == "nbperf to c2:5201: no end record (hint: run it again)"
    assert parsed_or_lost("c3:5201", lost, "iperf2", parser_bug) is None
    assert lost["c3:5201"] == "iperf2 to c3:5201: tool output not understood: KeyError: 'sum'"
    assert parsed_or_lost("c4:5201", lost, "iperf2", parser_bug, label="the iperf2 server on c4:5201") is None
    assert lost["c4:5201"].startswith("the iperf2 server on c4:5201: tool output not understood: KeyError")


def test_an_open_files_limit_too_low_for_the_streams_is_refused_at_preflight_naming_host_and_limit():
    """The audit's case: a low ulimit -n on the engine host let the TCP point
    start and fail mid-way with 'Too many open files', blamed on another client."""

    def limited(n):
        def respond(argv):
            if argv[:2] == ["sh", "-c"] and argv[2] == "ulimit -n":
                return Script(f"{n}\n")
            if argv[:2] == ["iperf3", "--version"]:
                return Script("iperf 3.12 (cJSON 1.7.15)\n")
            if argv[:2] == ["iperf3", "--help"]:
                return Script("--zerocopy --bidir --get-server-output\n")
            return Script("1 received\n")
        return respond
    # 200 connections over 2 clients, at most 128 streams a process: 100 per client host in one
    # process each; the study server runs both engine clients, 100 streams each (a socket and a buffer file
    # per stream and direction with --bidir)
    plan = parse_plan(PLAN.replace("connections = [4]", 'connections = [4, 200]\ndirections = ["tx", "bidir"]'))
    ts = {"srv": FakeTransport("srv", limited(300)), "c1": FakeTransport("c1", limited(64)),
          "c2": FakeTransport("c2", limited(1024))}
    with pytest.raises(PreflightError) as e:
        preflight(plan.study, "srv", plan.clients, ts, {"c1": "198.18.0.2", "c2": "198.18.0.3"})
    msg = e.value.message
    assert "srv: open-files limit is 300 (ulimit -n), an iperf3 client process needs 416 for 100 streams" in msg
    assert "c1: open-files limit is 64 (ulimit -n), an iperf3 server process needs 416 for 100 streams" in msg
    assert "c2:" not in msg and "ulimit -n, systemd LimitNOFILE" in msg
    ok = {h: FakeTransport(h, limited(1024)) for h in ("srv", "c1", "c2")}
    preflight(plan.study, "srv", plan.clients, ok, {"c1": "198.18.0.2", "c2": "198.18.0.3"})


def test_a_stopped_engine_process_is_named_not_the_path(tmp_path):
    """The audit's case: a SIGSTOPped engine client was reported as 'the path
    may be stalled'; /proc/PID/stat says it is stopped (state T)."""
    plan, ctx, srv, servers = make_ctx(tmp_path, lambda argv: Script(hang=True, stopped=True))
    rec, _, _ = run_trial(ctx, env(tmp_path), trials(plan)[0], tmp_path / "t")
    assert rec.status == "failed" and "path may be stalled" not in rec.error
    pids = [p.pid for p in srv.spawned]
    assert f"srv: iperf3 (pid {pids[0]}) is stopped, not the path: /proc/{pids[0]}/stat says state T" in rec.error
    assert "SIGCONT resumes it" in rec.error
