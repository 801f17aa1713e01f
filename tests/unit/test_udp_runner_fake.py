"""The UDP runner against the fake transport: no root, real recorded outputs
(tests/fixtures/capture_udp.sh).  What it starts, behind which barrier, with
which rates; what it makes of the receivers' counts; how a receiver that gets
nothing fails the point; the maximum-rate search's loop."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from conftest import fixture_text
from nicbench.core.errors import PreflightError
from nicbench.hosts.fake import FakeHosts, FakeTransport, Script
from nicbench.hosts.spec import HostSpec, HostsSpec
from nicbench.plan import parse_plan
from nicbench.plan.matrix import trials
from nicbench.records import Sample, TrialRecord, make_tags
from nicbench.run.kit import PointEnv
from nicbench.studies.udp import measure as um
from nicbench.studies.udp import runner as udp
from nicbench.studies.udp.analysis import udp_points, udp_trial
from nicbench.studies.udp.engines import iperf3 as ue3

HOSTS = """
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
"""


def plan_of(study: str, link: str = ""):
    return parse_plan(f'name = "u"\n{link}\n{HOSTS}\n[study]\nkind = "udp"\ntimeout_margin = 1\n{study}')


def versions(argv: list[str]) -> Script | None:
    if argv[:2] == ["iperf3", "--version"]:
        return Script("iperf 3.12 (cJSON 1.7.15)\n")
    if argv[:2] == ["iperf3", "--help"]:
        return Script("  --bidir  --get-server-output\n")
    if argv[:2] == ["iperf", "--version"]:
        return Script(stderr="iperf version 2.1.8 (12 August 2022) pthreads\n")
    if argv[0] == "ping":
        return Script("1 packets transmitted, 1 received\n")
    return None


def client_host(server: Script, streams: int = 1):
    """A client host: its engine server as ``server`` says (listening on the -p port)."""
    def respond(argv: list[str]) -> Script:
        if v := versions(argv):
            return v
        port = int(argv[argv.index("-p") + 1]) if "-p" in argv else 0
        if argv[:2] == ["iperf3", "-s"]:
            return Script(server.stdout, hang=True, listen=port, udp_streams=server.udp_streams)
        if argv[:2] == ["iperf", "-s"]:
            return Script(server.stdout, hang=True, udp_bound=port)
        return Script()
    return respond


def study_server(client: Script):
    def respond(argv: list[str]) -> Script:
        return versions(argv) or (client if argv[0] in ("iperf3", "iperf") else Script())
    return respond


def fake(plan, server: Script, client: Script) -> FakeHosts:
    hosts = tuple(HostSpec(n, h.role, "", f"198.18.0.{i + 1}", 24) for i, (n, h) in enumerate(plan.hosts.items()))
    ts = {n: FakeTransport(n, client_host(server) if n != "srv" else study_server(client)) for n in plan.hosts}
    return FakeHosts(HostsSpec(plan.name, 1500, hosts, None, None), ts)


def env(tmp_path: Path) -> PointEnv:
    return PointEnv(rel=lambda p: str(Path(p).relative_to(tmp_path)))


def searcher(plan) -> udp.UdpRunner:
    """A runner past preflight on hosts whose tools answer nothing: for tests that replace measure()."""
    r = udp.UdpRunner(plan, fake(plan, Script(), Script()))
    r.preflight()
    return r


def run(plan, hosts, tmp_path):
    r = udp.UdpRunner(plan, hosts)
    r.preflight()
    [spec] = trials(plan)
    return r.trial(env(tmp_path), spec, tmp_path / spec.trial_id)


V3 = lambda name: fixture_text("iperf3", "3.12", name)  # noqa: E731
V2 = lambda name: fixture_text("iperf2", "2.1.8", name)  # noqa: E731


def test_iperf3_point_paces_every_stream_and_keeps_the_receivers_counts(tmp_path):
    plan = plan_of('rates = ["20M"]\nstreams = [2]\ndatagram_sizes = [1000]\nduration = 2\nomit = 1')
    hosts = fake(plan, Script(udp_streams=2), Script(V3("udp_p2_omit.json"), runtime=3.01))
    out = run(plan, hosts, tmp_path)
    assert out.record.status == "ok", out.record.error
    servers = [p for c in ("c1", "c2") for p in hosts.transport("c1" if c == "c1" else "c2").spawned]
    clients = hosts.transport("srv").spawned
    assert [p.argv[:2] for p in servers] == [("iperf3", "-s")] * 2
    assert len(clients) == 2 and all(p.gated and p.released_at for p in clients)
    assert max(p.spawned_at for p in clients) <= min(p.released_at for p in clients)      # one barrier
    assert max(p.spawned_at for p in servers) <= min(p.spawned_at for p in clients)       # servers first
    for p in clients:      # 20M per client over its 2 streams: -b is per stream
        a = p.argv
        assert "-u" in a and a[a.index("-b") + 1] == "10000000" and a[a.index("-P") + 1] == "2"
        assert a[a.index("-l") + 1] == "1000" and "--get-server-output" in a
    got = {s.tag("host") for s in out.samples if s.metric == "udp.packets" and s.tag("side") == "receiver"}
    assert got == {"c1", "c2"}
    assert out.record.meta["udp_totals"]["c1:5201"]["fwd.receiver"]["packets"] == 9998
    assert out.record.meta["socket_buffers"]["c1:5201"]["peer_rcvbuf"] == 212992
    t = udp_trial(out.record, out.samples, 0.25)
    assert t.status == "ok" and t.loss == 0.0 and t.directions["tx"].datagrams_per_s > 0


def test_iperf3_receiver_that_counted_nothing_fails_the_point_with_the_reason(tmp_path):
    plan = plan_of('rates = ["20M"]\ndatagram_sizes = [1000]\nduration = 2\nomit = 0\nclient_counts = [1]')
    hosts = fake(plan, Script(udp_streams=1), Script(V3("udp_all_dropped.json"), runtime=2.01))
    out = run(plan, hosts, tmp_path)
    assert out.record.status == "failed"
    assert "tx c1:5201: the receiver on c1 counted no datagram (4998 sent): UDP from srv to c1" in out.record.error
    assert "firewall" in out.record.error and "0 % loss of 0" in out.record.error


def test_iperf3_set_up_datagram_that_never_arrives_fails_at_once(tmp_path):
    plan = plan_of('rates = ["20M"]\nduration = 10\nomit = 0\nclient_counts = [1]')
    hosts = fake(plan, Script(udp_streams=0), Script(V3("udp_firewalled.json"), hang=True))
    t0 = time.monotonic()
    out = run(plan, hosts, tmp_path)
    assert time.monotonic() - t0 < ue3.UDP_SETUP_S + 2          # not the point's 11 s time limit
    assert out.record.status == "failed" and "c1:5201 got the UDP set-up datagram of 0 of 1" in out.record.error
    assert "firewall on c1" in out.record.error
    assert all(p.poll() is not None for p in hosts.transport("srv").spawned)         # stopped


def test_iperf3_client_whose_set_up_answer_never_returns_says_so_at_its_time_limit(tmp_path):
    plan = plan_of('rates = ["20M"]\nduration = 1\nomit = 0\nclient_counts = [1]')
    hosts = fake(plan, Script(udp_streams=1), Script(V3("udp_firewalled.json"), hang=True))
    out = run(plan, hosts, tmp_path)
    assert out.record.status == "failed" and "never started its UDP test in 2s" in out.record.error
    assert "a firewall on srv" in out.record.error


def test_iperf3_parameter_error_is_iperf3s_own_words(tmp_path):
    plan = plan_of('rates = ["20M"]\nduration = 1\nomit = 0\nclient_counts = [1]')
    err = fixture_text("iperf3", "3.12", "udp_blksize_8.err")
    hosts = fake(plan, Script(udp_streams=1), Script(V3("udp_blksize_8.out"), err, returncode=1))
    out = run(plan, hosts, tmp_path)
    assert out.record.status == "failed" and "block size invalid" in out.record.error


def test_a_pair_lost_mid_point_leaves_a_partial_point_with_the_survivors_counts(tmp_path):
    """c2's iperf3 server killed mid-test (recorded: udp_server_killed.json, the
    client's "control socket has closed unexpectedly"): c2's pair is lost and
    named, c1's counts are kept, the point is partial -- not failed (c1's good
    numbers lost), not ok (half the point's traffic missing)."""
    plan = plan_of('rates = ["20M"]\nstreams = [2]\ndatagram_sizes = [1000]\nduration = 2\nomit = 1')
    hosts = fake(plan, Script(udp_streams=2), Script())
    good, killed = Script(V3("udp_p2_omit.json"), runtime=3.01), Script(V3("udp_server_killed.json"), runtime=1.6,
                                                                         returncode=1)

    def server_host(argv: list[str]) -> Script:
        if v := versions(argv):
            return v
        return killed if "198.18.0.3" in argv else good          # c2's address

    hosts.transport("srv").responder = server_host
    out = run(plan, hosts, tmp_path)
    rec = out.record
    assert rec.status == "partial", rec.error
    assert "c2:5201 lost: " in rec.error and "control socket has closed unexpectedly" in rec.error
    assert set(rec.meta["lost"]) == {"c2:5201"}
    assert {s.tag("host") for s in out.samples if s.metric.startswith("udp.")} == {"c1"}
    t = udp_trial(rec, out.samples, 0.25)
    assert t.status == "partial" and set(t.directions["tx"].received.per_host) == {"c1"}
    assert t.loss == 0.0 and t.gbps == pytest.approx(0.04, rel=0.05)     # the recording's 2 streams x 20 Mbit/s
    [pt] = udp_points([t])
    assert pt.survivors_only and pt.n_partial == 1 and pt.n_ok == 0 and pt.n_failed == 0 and pt.gbps == t.gbps


def test_iperf2_point_reads_the_servers_csv_as_the_receiver(tmp_path):
    plan = plan_of('engine = "iperf2"\nrates = ["40M"]\nstreams = [2]\ndatagram_sizes = [1000]\nduration = 2\n'
                   'omit = 0\nclient_counts = [1]')
    hosts = fake(plan, Script(V2("udp_server_p2.csv")), Script(V2("udp_client_p2.csv"), runtime=2.0))
    out = run(plan, hosts, tmp_path)
    assert out.record.status == "ok", out.record.error
    [srv_proc] = hosts.transport("c1").spawned
    assert srv_proc.argv[:3] == ("iperf", "-s", "-u") and srv_proc.signals          # stopped once summaries came
    [cli] = hosts.transport("srv").spawned
    assert cli.argv[cli.argv.index("-b") + 1] == "20000000" and cli.argv[cli.argv.index("-l") + 1] == "1000"
    lost = sum(s.value for s in out.samples if s.metric == "udp.lost")
    assert lost == 1 and out.record.meta["udp_totals"]["c1:5201"]["fwd.receiver"][2] == 10492


def test_iperf2_bidir_stream_whose_receiver_stopped_at_its_start_fails_the_point_saying_why(tmp_path):
    # recorded in the lab e2e (iperf 2.1.8, --full-duplex -P 2): one of the client's two receiving streams
    # ended at once on "recvmsg failed: Connection refused" while the server sent both; a 0.0-0.0 summary
    plan = plan_of('engine = "iperf2"\ndirections = ["bidir"]\nrates = ["100M"]\nstreams = [2]\n'
                   'datagram_sizes = [1472]\nduration = 3\nomit = 1\nclient_counts = [1]')
    hosts = fake(plan, Script(V2("udp_server_fd_p2_refused.csv")),
                 Script(V2("udp_client_fd_p2_refused.csv"), V2("udp_client_fd_p2_refused.err"), runtime=4.0))
    out = run(plan, hosts, tmp_path)
    assert out.record.status == "failed"
    assert ("iperf 2 on srv stopped receiving 1 of the 2 rx streams of c1:5201 at their start "
            '("recvmsg failed: Connection refused"') in out.record.error
    assert "use streams = [1]" in out.record.error


def test_iperf2_server_that_heard_nothing_fails_the_point(tmp_path):
    plan = plan_of('engine = "iperf2"\nrates = ["20M"]\ndatagram_sizes = [1000]\nduration = 1\nomit = 0\n'
                   'client_counts = [1]')
    hosts = fake(plan, Script(V2("udp_server_firewalled.csv")), Script(V2("udp_client_firewalled.csv"), runtime=1.0))
    out = run(plan, hosts, tmp_path)
    assert out.record.status == "failed"
    assert "the receiver on c1 reported nothing (2623 sent)" in out.record.error


def test_preflight_names_each_host_without_the_engine_and_a_busy_port():
    plan = plan_of('rates = ["1G"]')
    hosts = fake(plan, Script(), Script())
    hosts.transport("c2").responder = lambda argv: Script(returncode=127) if argv[0] == "iperf3" else Script()
    hosts.transport("c1").files["/proc/net/udp"] = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 00000000:1451 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 77\n")
    with pytest.raises(PreflightError) as e:
        udp.UdpRunner(plan, hosts).preflight()
    assert "c2: iperf3 is not installed" in e.value.message and "c1: port(s) 5201 already in use" in e.value.message
    assert e.value.message.count("\n") == 0


def test_preflight_refuses_an_open_files_limit_too_low_for_the_streams():
    plan = plan_of('rates = ["1G"]\nstreams = [1, 100]\ndirections = ["bidir"]')
    hosts = fake(plan, Script(), Script())

    def limited(respond, n):
        return lambda argv: Script(f"{n}\n") if argv[:3] == ["sh", "-c", "ulimit -n"] else respond(argv)
    for name, limit in (("srv", 1024), ("c1", 100)):
        hosts.transport(name).responder = limited(hosts.transport(name).responder, limit)
    with pytest.raises(PreflightError) as e:
        udp.UdpRunner(plan, hosts).preflight()
    assert e.value.message.endswith("c1: open-files limit is 100 (ulimit -n), an iperf3 server process needs 416 "
                                    "for 100 streams (raise the open-files limit where the tools start (ulimit -n, "
                                    "systemd LimitNOFILE, /etc/security/limits.conf), or fewer streams per process)")
    assert "srv:" not in e.value.message and "c2:" not in e.value.message


def test_search_bisects_the_rate_per_client_under_the_link_ceiling(monkeypatch, tmp_path):
    """A path that carries 400 Mbit/s of payload: unpaced loses, the 2-client
    share of a 1G link's UDP ceiling is tried next, loses, and the bisection
    closes in below it."""
    plan = plan_of('rates = ["max"]\ndatagram_sizes = [1472]\nsearch_steps = 10\nsearch_resolution = 0.02',
                   '[link]\nspeed = "1G"')
    r = searcher(plan)
    assert r.ctx is not None
    tried: list[float | None] = []

    def measure(ctx, env, spec, raw_dir, rate):
        tried.append(rate)
        offered = 2 * (rate if rate else 1.5e9)
        got = min(offered, 400e6)
        tally = um.Tally(sent_bytes=int(offered / 8), sent_s=1.0, expected=1000,
                          lost=round(1000 * (1 - got / offered)), got_bytes=int(got / 8), got_s=1.0,
                          receiver_seen=True)
        rec = TrialRecord(spec, "ok", 0.0, 1.0, None, {"rate_per_client_bps": rate})
        return um.Measured(rec, [], [], {("c1:5201", "tx"): tally})

    monkeypatch.setattr(udp, "measure", measure)
    [spec] = trials(plan)
    rec, _, _ = udp.run_trial(r.ctx, env(tmp_path), spec, tmp_path)
    upper = udp.upper_per_client(r.ctx, 1472, 2)
    assert upper == pytest.approx(1e9 * 1472 / 1538 / 2)                 # the 1G UDP ceiling, shared by 2
    assert tried[0] is None and tried[1] == upper and tried[2] == pytest.approx(upper / 2)
    s = rec.meta["search"]
    assert rec.status == "ok" and s["steps"][0]["passed"] is False
    assert s["rate_per_client_bps"] == pytest.approx(200e6, rel=0.02) and s["rate_per_client_bps"] <= 200e6
    assert rec.meta["rate_per_client_bps"] == s["rate_per_client_bps"]      # the best step's own record
    assert len(s["steps"]) <= 11


def test_search_without_a_clean_rate_fails_naming_the_lowest_tried(monkeypatch, tmp_path):
    plan = plan_of('rates = ["max"]\nsearch_steps = 2')
    r = searcher(plan)

    def measure(ctx, env, spec, raw_dir, rate):
        t = um.Tally(sent_bytes=10**6, sent_s=1.0, expected=100, lost=50, got_bytes=5 * 10**5, got_s=1.0,
                      receiver_seen=True)
        return um.Measured(TrialRecord(spec, "ok", 0.0, 1.0, None, {}), [], [], {("c1:5201", "tx"): t})

    monkeypatch.setattr(udp, "measure", measure)
    rec, samples, _ = udp.run_trial(r.ctx, env(tmp_path), trials(plan)[0], tmp_path)
    assert rec.status == "failed" and samples == [] and "no rate tried had loss <= 0.100%" in rec.error
    assert "per client" in rec.error and len(rec.meta["search"]["steps"]) == 3


def test_search_counts_a_step_whose_receiver_got_nothing_as_all_lost(monkeypatch, tmp_path):
    """Overload that lets nothing through (fragmented datagrams whose fragments
    were lost) is a failing step, not the end of the search."""
    plan = plan_of('rates = ["max"]\nsearch_steps = 3')
    r = searcher(plan)

    def measure(ctx, env, spec, raw_dir, rate):
        if rate is None:        # unpaced: the receiver's reassembly collapsed
            t = um.Tally(sent=1000, sent_bytes=10**7, sent_s=1.0, receiver_seen=True)
            rec = TrialRecord(spec, "failed", 0.0, 1.0, "nothing", {})
            return um.Measured(rec, [], [], {("c1:5201", "tx"): t}, nothing="nothing came")
        t = um.Tally(sent_bytes=int(rate / 8), sent_s=1.0, expected=100, lost=0, got_bytes=int(rate / 8),
                      got_s=1.0, receiver_seen=True)
        return um.Measured(TrialRecord(spec, "ok", 0.0, 1.0, None, {}), [], [], {("c1:5201", "tx"): t})

    monkeypatch.setattr(udp, "measure", measure)
    rec, _, _ = udp.run_trial(r.ctx, env(tmp_path), trials(plan)[0], tmp_path)
    steps = rec.meta["search"]["steps"]
    assert rec.status == "ok" and steps[0]["loss"] == 1.0 and steps[0]["received_bps"] == 0.0
    assert steps[0]["passed"] is False and all(st["passed"] for st in steps[1:])


def test_search_step_that_lost_a_pair_ends_the_search_and_fails_the_point(monkeypatch, tmp_path):
    """The survivors' loss is not the point's: no rate may be judged on it."""
    plan = plan_of('rates = ["max"]\nsearch_steps = 4')
    r = searcher(plan)
    tried: list[float | None] = []

    def measure(ctx, env, spec, raw_dir, rate):
        tried.append(rate)
        t = um.Tally(sent_bytes=10**6, sent_s=1.0, expected=100, lost=50, got_bytes=5 * 10**5, got_s=1.0,
                      receiver_seen=True)
        status, err = ("ok", None) if len(tried) == 1 else ("partial", "partial: c2:5201 lost: killed")
        return um.Measured(TrialRecord(spec, status, 0.0, 1.0, err, {"lost": {"c2:5201": "killed"}}),
                            [_survivor_sample(spec.trial_id)], [], {("c1:5201", "tx"): t})

    monkeypatch.setattr(udp, "measure", measure)
    rec, samples, _ = udp.run_trial(r.ctx, env(tmp_path), trials(plan)[0], tmp_path)
    # the survivors' samples of that step go too: they are not the point's figures
    assert len(tried) == 2 and rec.status == "failed" and samples == []
    assert "search step 1" in rec.error and "c2:5201 lost" in rec.error and "the search stopped" in rec.error
    assert len(rec.meta["search"]["steps"]) == 1


def _survivor_sample(trial_id: str) -> Sample:
    return Sample(trial_id, "udp.bytes", 5e5, "bytes", 0.0, 1.0,
                  make_tags(host="c1", port=5201, side="receiver", direction="tx"))


def test_search_step_that_failed_keeps_its_samples_as_before(monkeypatch, tmp_path):
    """Only a step turned from partial to failed drops its samples; a step that
    failed by itself keeps what it measured, as every failed point does."""
    plan = plan_of('rates = ["max"]\nsearch_steps = 4')
    r = searcher(plan)

    def measure(ctx, env, spec, raw_dir, rate):
        return um.Measured(TrialRecord(spec, "failed", 0.0, 1.0, "iperf3 to c1:5201 exited 1", {}),
                            [_survivor_sample(spec.trial_id)], [], {})

    monkeypatch.setattr(udp, "measure", measure)
    rec, samples, _ = udp.run_trial(r.ctx, env(tmp_path), trials(plan)[0], tmp_path)
    assert rec.status == "failed" and "search step 0" in rec.error and "exited 1" in rec.error
    assert samples == [_survivor_sample(rec.spec.trial_id)]


def test_search_where_nothing_ever_arrives_fails_with_the_reason(monkeypatch, tmp_path):
    plan = plan_of('rates = ["max"]\nsearch_steps = 2')
    r = searcher(plan)

    def measure(ctx, env, spec, raw_dir, rate):
        t = um.Tally(sent=500, sent_bytes=10**6, sent_s=1.0, receiver_seen=True)
        return um.Measured(TrialRecord(spec, "failed", 0.0, 1.0, "x", {}), [], [], {("c1:5201", "tx"): t},
                            nothing="UDP from srv to c1 does not arrive")

    monkeypatch.setattr(udp, "measure", measure)
    rec, _, _ = udp.run_trial(r.ctx, env(tmp_path), trials(plan)[0], tmp_path)
    assert rec.status == "failed" and "no step's receiver counted anything" in rec.error
    assert "step 0 (unpaced): UDP from srv to c1 does not arrive" in rec.error


def counter(host: str, metric: str, value: float, direction: str | None = None):
    from nicbench.records import Sample, make_tags
    return Sample("t", metric, value, "count", 100.0, 101.0, make_tags(host=host, direction=direction))


def test_why_nothing_arrived_from_the_receivers_counters(tmp_path):
    plan = plan_of('rates = ["1G"]')
    r = udp.UdpRunner(plan, fake(plan, Script(), Script()))
    r.preflight()
    why = lambda cs: um.why_nothing(r.ctx, "srv", "c1", 5201, cs, 3000)  # noqa: E731
    assert "does not arrive, 4 frames came in" in why([counter("c1", "if.packets", 4, "rx")])
    collapsed = why([counter("c1", "if.packets", 2900, "rx"), counter("c1", "net.ip.reasm_fails", 1200)])
    assert "2900 frames reached c1 but no datagram was reassembled (1200 reassembly failures)" in collapsed
    assert "ipfrag_high_thresh" in collapsed
    fw = why([counter("c1", "if.packets", 2900, "rx"), counter("c1", "net.udp.in_datagrams", 0)])
    assert "2900 frames reached c1's interface but UDP delivered 0 datagrams" in fw and "firewall on c1" in fw


def test_fragmented_points_wait_until_no_host_holds_fragments():
    t = FakeTransport("c1")
    held = fixture_text("proc", "net_sockstat_frag_held.txt")
    reads = iter([held, held, fixture_text("proc", "net_sockstat.txt")])
    t.files["/proc/sys/net/ipv4/ipfrag_time"] = "30\n"
    t.read_text = lambda path: next(reads) if path == "/proc/net/sockstat" else FakeTransport.read_text(t, path)
    waited, still = um.drain_fragments({"c1": t}, ["c1"])
    assert still == [] and 0.9 <= waited < 2.0
    t.files["/proc/sys/net/ipv4/ipfrag_time"] = "0\n"
    t.read_text = lambda path: held if path == "/proc/net/sockstat" else FakeTransport.read_text(t, path)
    waited, still = um.drain_fragments({"c1": t}, ["c1"])
    assert still == ["c1"] and waited >= 1.0                 # gave up after ipfrag_time + 1 s


def test_a_wrapped_lost_count_is_recovered_from_lost_percent(tmp_path):
    """Recorded (udp_lost_wrapped.json): iperf3 3.12's server counted one
    datagram lost at 2.0-2.5 s and found it late at 2.5-3.0 s (385 arrived out
    of order): that interval's lost_packets printed as 1.8446744073709552e+19
    beside lost_percent -0.0118 of 8491.  Read as a count it made a loss of
    2.7e14 recorded ok; it is -1."""
    from nicbench.tools import iperf3
    text = fixture_text("iperf3", "3.12", "udp_lost_wrapped.json")
    rep = iperf3.parse(text)
    assert rep.quirks and "recovered from lost_percent: -1" in rep.quirks[0] and "1.84e+19" in rep.quirks[0]
    lost = [iv.lost for iv in rep.intervals if iv.side == "receiver" and not iv.omitted]
    assert -1 in lost and all(x is not None and abs(x) <= 1 for x in lost)
    assert sum(lost) == rep.udp["fwd.receiver"].lost == 0
    assert rep.udp["fwd.sender"].packets == 50950


def test_only_a_wrapped_count_is_refused_a_large_true_one_is_kept():
    from nicbench.tools import iperf3
    assert iperf3.count(12_000_000_000) == 12_000_000_000          # 10 streams x 1 Mpps x 20 min: true
    assert iperf3.count(-3) == -3
    for wrapped in (1.8446744073709552e19, 1.8446744073709535e19, 1.8446744073709468e19):   # as recorded
        assert iperf3.count(wrapped) is None
    assert iperf3.lost_count({"lost_packets": 1.8446744073709552e19, "lost_percent": -0.01177717583323519,
                              "packets": 8491}) == -1
    assert iperf3.lost_count({"lost_packets": 1.8446744073709552e19, "packets": 8491}) is None


def test_a_wrapped_lost_count_that_cannot_be_recovered_is_an_unknown_loss_never_a_number(tmp_path):
    import json

    from nicbench.tools import iperf3
    d = json.loads(fixture_text("iperf3", "3.12", "udp_lost_wrapped.json"))
    for iv in d["server_output_json"]["intervals"]:       # the recording, less the percent to recover it from
        for st in iv["streams"]:
            if st["lost_packets"] > 2**31:
                del st["lost_percent"]
    text = json.dumps(d)
    rep = iperf3.parse(text)
    assert rep.quirks and "those intervals' loss is unknown" in rep.quirks[0]
    assert any(iv.side == "receiver" and iv.lost is None and iv.packets for iv in rep.intervals)
    plan = plan_of('rates = ["200M"]\ndatagram_sizes = [1472]\nduration = 3\nomit = 1\nclient_counts = [1]')
    hosts = fake(plan, Script(udp_streams=1), Script(text, runtime=4.01))
    out = run(plan, hosts, tmp_path)
    assert out.record.status == "ok"                       # the throughput is good
    assert any("impossible lost-datagram count" in w for w in out.record.meta["warnings"])
    t = udp_trial(out.record, out.samples, 0.25)
    assert t.gbps is not None and t.gbps > 0
    assert t.loss is None
    # what a search step is judged by: the same run's own counts say the loss cannot be told
    r = udp.UdpRunner(plan, fake(plan, Script(udp_streams=1), Script(text, runtime=4.01)))
    r.preflight()
    [spec] = trials(plan)
    m = udp.measure(r.ctx, env(tmp_path), spec, tmp_path / "again", 200e6)
    assert m.record.status == "ok" and m.tallies[("c1:5201", "tx")].lost_unknown
    sent, got, loss = m.figures()
    assert got > 0 and loss is None


def test_a_search_step_whose_loss_cannot_be_told_does_not_pass(monkeypatch, tmp_path):
    plan = plan_of('rates = ["max"]\nsearch_steps = 3')
    r = searcher(plan)

    def measure(ctx, env, spec, raw_dir, rate):
        t = um.Tally(sent_bytes=10**6, sent_s=1.0, expected=100, lost=0, got_bytes=10**6, got_s=1.0,
                      receiver_seen=True, lost_unknown=rate is None)
        return um.Measured(TrialRecord(spec, "ok", 0.0, 1.0, None, {}), [], [], {("c1:5201", "tx"): t})

    monkeypatch.setattr(udp, "measure", measure)
    rec, _, _ = udp.run_trial(r.ctx, env(tmp_path), trials(plan)[0], tmp_path)
    steps = rec.meta["search"]["steps"]
    assert steps[0]["rate_per_client_bps"] is None and steps[0]["passed"] is False and steps[0]["loss"] is None
    assert rec.meta["search"]["rate_per_client_bps"] is not None        # found among the paced steps
