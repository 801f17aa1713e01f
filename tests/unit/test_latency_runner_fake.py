"""The latency runner against the fake transport, and its analysis on what it
stored: no root, real recorded tool outputs (tests/fixtures/sockperf/3.7,
irtt/0.9.0, iperf2/2.1.8/bounceback, and one loaded trial recorded by the
runner in the lab: sockperf/3.7/trial_loaded_udp_m64_mps1000/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import FIXTURES, fixture_text
from nicbench.core.errors import PreflightError
from nicbench.core.histogram import LatencyHistogram
from nicbench.hosts.fake import FakeHosts, FakeTransport, Script
from nicbench.hosts.spec import HostSpec, HostsSpec
from nicbench.plan import parse_plan
from nicbench.plan.matrix import trials
from nicbench.run.kit import PointEnv
from nicbench.studies.latency.analysis import agreement, point_stats, trial_result
from nicbench.studies.latency.runner import LatencyRunner
from nicbench.tools import bounceback, sockperf

SOCKPERF = FIXTURES / "sockperf" / "3.7"
TRIAL = SOCKPERF / "trial_loaded_udp_m64_mps1000"

PLAN = """
name = "l"
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
[study]
kind = "latency"
timeout_margin = 2
"""

VERSIONS = {"sockperf": fixture_text("sockperf", "3.7", "version.txt"),
            "irtt": fixture_text("irtt", "0.9.0", "version.txt"),
            "iperf": fixture_text("iperf2", "2.1.8", "bounceback", "version.txt")}


def arg(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


class Lab:
    """Fake hosts whose tools answer with recorded outputs; ``missing`` lists
    (host, tool) pairs not installed."""

    def __init__(self, plan, probe_log: str | dict[str, str], probe_out: str = "", load_json: str | None = None,
                 bb_text: str | None = None, missing: tuple[tuple[str, str], ...] = ()):
        self.plan = plan
        self.t: dict[str, FakeTransport] = {}
        for name in plan.hosts:
            self.t[name] = FakeTransport(name, self._responder(name, probe_log, probe_out, load_json, bb_text,
                                                               missing))
        hosts = tuple(HostSpec(n, h.role, "", f"198.18.0.{i + 1}", 24) for i, (n, h) in enumerate(plan.hosts.items()))
        self.hosts = FakeHosts(HostsSpec(plan.name, 1500, hosts, None, None, ()), self.t)

    def _responder(self, host, probe_log, probe_out, load_json, bb_text, missing):
        logs = probe_log if isinstance(probe_log, dict) else {"sockperf": probe_log, "irtt": probe_log}

        def respond(argv: list[str]) -> Script:
            tool = next((a for a in argv if a in ("sockperf", "irtt", "iperf", "iperf3")), argv[0])
            if (host, tool) in missing:
                return Script(returncode=127)
            if argv[0] == "ping":
                return Script("1 packets transmitted, 1 received\n")
            if argv[0] == "mktemp":
                return Script(f"/tmp/nicbench-latency.{host}\n")
            if argv in (["sockperf", "--version"], ["irtt", "version"], ["iperf", "-v"]):
                return Script(VERSIONS[argv[0]])
            if argv[:2] == ["iperf3", "--version"]:
                return Script("iperf 3.12 (cJSON 1.7.15)\n")
            if argv[:2] == ["iperf3", "--help"]:
                return Script("--bidir --zerocopy --get-server-output\n")
            rest = argv[argv.index(tool) + 1:] if tool in argv else []
            if rest[:1] in (["server"], ["-s"]):                            # engine and load servers
                if argv[0] == "iperf3":
                    return Script(hang=True, listen=int(arg(argv, "-p")))
                port = int(arg(argv, "-p") if "-p" in argv else arg(argv, "-b").lstrip(":"))
                udp = "--tcp" not in argv and tool != "iperf"
                return Script(hang=True, launcher=True, **({"udp_bound": port} if udp else {"listen": port}))
            if tool == "sockperf":          # a probe: its full log appears where it was asked to write it
                self.t[host].files[arg(argv, "--full-log")] = logs["sockperf"]
                return Script(stdout=probe_out, runtime=4.2)
            if tool == "irtt":
                self.t[host].files[arg(argv, "-o")] = logs["irtt"]
                return Script(runtime=2.0)
            if tool == "iperf":
                return Script(stdout=bb_text or "", runtime=2.0)
            if tool == "iperf3":
                return Script(stdout=load_json or "", runtime=6.0)
            return Script()
        return respond


def env(tmp_path: Path) -> PointEnv:
    return PointEnv(rel=lambda p: str(Path(p).relative_to(tmp_path)))


def run_all(lab: Lab, tmp_path: Path):
    r = LatencyRunner(lab.plan, lab.hosts)
    pre = r.preflight()
    e = env(tmp_path)
    r.start(e, tmp_path / "latency")
    outs = [r.trial(e, spec, tmp_path / spec.trial_id) for spec in trials(lab.plan)]
    r.stop(e, tmp_path / "latency")
    return pre, outs


def test_an_idle_sockperf_point_probes_every_client_on_its_own_port(tmp_path):
    plan = parse_plan(PLAN + 'message_sizes = [64]\nprotocols = ["udp"]')
    lab = Lab(plan, fixture_text("sockperf", "3.7", "pp_udp_m64_mps1000.csv"))
    pre, [out] = run_all(lab, tmp_path)
    assert pre.meta["engines"] == {"sockperf": "3.7"} and pre.meta["probe_clients"] == ["c1", "c2"]
    assert out.record.status == "ok", out.record.error
    # one sockperf server per probe client on the study server, each on its own port, bound to its address
    servers = lab.t["srv"].spawned
    assert [arg(list(p.argv), "-p") for p in servers] == ["11111", "11112"]
    assert all(arg(list(p.argv), "-i") == "198.18.0.1" and p.argv[0] == "timeout" for p in servers)
    # every probe behind the gate, released together, towards its own port; servers stopped after
    probes = [lab.t[c].spawned[0] for c in ("c1", "c2")]
    assert all(p.gated and p.released_at for p in probes)
    assert max(p.spawned_at for p in probes) <= min(p.released_at for p in probes)
    assert [arg(list(p.argv), "-p") for p in probes] == ["11111", "11112"]
    assert all(p.poll() is not None for p in servers)
    # the distribution is stored whole: the histogram holds every timed request of the log
    run = sockperf.parse_full_log(fixture_text("sockperf", "3.7", "pp_udp_m64_mps1000.csv"))
    for c in ("c1", "c2"):
        rec = out.record.meta["probes"][c]
        h = LatencyHistogram.from_json(rec["histogram"])
        assert h.count == rec["count"] == len(run.samples) == 1550
        assert h.max == run.summary.max and rec["stated"]["percentiles"]["99.0"] == run.summary.percentiles[99.0]
        assert len(json.dumps(rec["histogram"])) < 4000                        # bounded, whatever the count
        # its send times on the wall clock: sockperf's process clock placed at the gate stamp
        assert rec["window"][0] == pytest.approx(rec["launched"] + run.samples.sent[0])
    # and as a time series: answered requests per 0.5 s add up to the count
    for c in ("c1", "c2"):
        assert sum(s.value for s in out.samples if s.metric == "latency.requests" and s.tag("host") == c) == 1550
    # the log was fetched from the probe host, kept with the run, and removed there; scratch dirs removed
    assert any(r.role == "latency-log" and (tmp_path / r.path).exists() for r in out.raws)
    assert not lab.t["c1"].files
    assert ["rm", "-rf", "--one-file-system", "/tmp/nicbench-latency.c1"] in lab.t["c1"].commands
    # the analysis reads it back: percentiles of the two probes merged
    t = trial_result(out.record, out.samples)
    assert t.status == "ok" and t.merged is not None and t.merged.count == 3100
    assert t.percentiles["p99"] == pytest.approx(run.summary.percentiles[99.0], rel=1 / 1024)
    assert t.percentiles["max"] == run.summary.max and t.load_gbps is None and t.bound == "exact"


def test_a_loaded_point_starts_the_load_behind_the_same_barrier_and_measures_it_in_the_window(tmp_path):
    plan = parse_plan(PLAN + 'message_sizes = [64]\nprotocols = ["udp"]\nprobe_clients = ["c1"]\n'
                      'load = { kind = "tcp", connections = 2, lead = 1 }')
    lab = Lab(plan, (TRIAL / "full.csv").read_text(), (TRIAL / "client.out").read_text(),
              load_json=(TRIAL / "load_client.json").read_text())
    _, outs = run_all(lab, tmp_path)
    idle, loaded = outs
    assert idle.record.status == "ok" and loaded.record.status == "ok", loaded.record.error
    # idle: no load at all; loaded: one iperf3 server per load client, one client each on the server
    servers = [p for c in ("c1", "c2") for p in lab.t[c].spawned if p.argv[0] == "iperf3"]
    assert len(servers) == 2 and all(p.spawned_at >= idle.record.ended for p in servers)
    assert {arg(list(p.argv), "-p") for p in servers} == {"5201"}
    loads = [p for p in lab.t["srv"].spawned if p.argv[0] == "iperf3"]
    assert len(loads) == 2 and all(p.gated for p in loads)
    assert {arg(list(p.argv), "-c") for p in loads} == {"198.18.0.2", "198.18.0.3"}
    assert all(arg(list(p.argv), "-t") == "7" for p in loads)       # sockperf runs 5.2 s; + 1 s tail, whole s
    probe = lab.t["c1"].spawned[-1]
    # sockperf's own warm-up (2.4 s) is longer than the lead: load and probe are released at once
    assert abs(probe.released_at - min(p.released_at for p in loads)) < 0.05
    assert max(p.spawned_at for p in [*loads, probe]) <= min(p.released_at for p in [*loads, probe])
    t = trial_result(loaded.record, loaded.samples)
    assert t.status == "ok", t.error
    # the load's bytes in the probes' window: both load processes, covering the window
    assert t.load_gbps is not None and t.load_gbps > 1 and t.load_bytes and t.window
    rec = loaded.record.meta["load"]
    assert rec["probes_after_s"] == 0.0 and rec["seconds"] == 7
    pts = point_stats([trial_result(o.record, o.samples) for o in outs])
    idle_p, loaded_p = pts
    assert loaded_p.idle_point == idle_p.point and set(loaded_p.vs_idle) >= {"p50", "p99", "p99.9"}


def test_a_load_that_does_not_cover_the_window_fails_the_point(tmp_path):
    """The recorded irtt probe's send times are wall-clock stamps of the day it
    was recorded: today's load cannot have run then."""
    plan = parse_plan(PLAN + 'message_sizes = [64]\nprotocols = ["udp"]\nengines = ["irtt"]\n'
                      'probe_clients = ["c1"]\nrate = 100\nload = { kind = "tcp", lead = 0.5 }')
    lab = Lab(plan, fixture_text("irtt", "0.9.0", "udp_l64_i10ms.json"),
              load_json=(TRIAL / "load_client.json").read_text())
    _, (idle, loaded) = run_all(lab, tmp_path)
    assert idle.record.status == "ok", idle.record.error
    probe = lab.t["c1"].spawned[-1]
    load = next(p for p in lab.t["srv"].spawned if p.argv[0] == "iperf3")
    # irtt has no warm-up: it starts lead = 0.5 s after the load
    assert probe.released_at - load.released_at == pytest.approx(0.5, abs=0.05)
    t = trial_result(loaded.record, loaded.samples)
    assert t.status == "failed" and "not measured under the load" in (t.error or "")


def test_irtt_and_iperf2_probes_and_how_they_agree_with_sockperf(tmp_path):
    plan = parse_plan(PLAN + 'message_sizes = [64]\nengines = ["irtt", "iperf2", "sockperf"]\nrate = 100\n'
                      'probe_clients = ["c1"]')
    text = fixture_text("iperf2", "2.1.8", "bounceback", "client_l64_period1ms.txt")
    lab = Lab(plan, {"irtt": fixture_text("irtt", "0.9.0", "udp_l64_i10ms.json"),
                     "sockperf": fixture_text("sockperf", "3.7", "pp_udp_m64_mps200_halfrtt.csv")}, bb_text=text)
    _, outs = run_all(lab, tmp_path)
    by = {o.record.spec.point: o for o in outs}
    assert set(by) == {"udp/sockperf/m64/idle", "udp/irtt/m64/idle", "tcp/sockperf/m64/idle", "tcp/iperf2/m64/idle"}
    # irtt: its own JSON from the probe host, round trips with the server's turnaround included
    ir = trial_result(by["udp/irtt/m64/idle"].record, by["udp/irtt/m64/idle"].samples)
    assert ir.status == "ok" and ir.probes["c1"].count == 100 and ir.bound == "exact"
    # iperf 2: no samples, its 100 us histogram as upper bounds, its own exact mean/min/max
    bb = trial_result(by["tcp/iperf2/m64/idle"].record, by["tcp/iperf2/m64/idle"].samples)
    run = bounceback.parse(text)
    assert run.total is not None and run.histogram is not None
    pr = bb.probes["c1"]
    assert bb.status == "ok" and pr.bound == "upper" and pr.resolution_s == pytest.approx(1e-4)
    assert (pr.count, pr.mean, pr.min, pr.max) == (run.total.count, run.total.mean, run.total.min, run.total.max)
    for k, pct in (("p50", 50.0), ("p99", 99.0)):        # every percentile is its bin's upper edge
        assert pr.percentiles[k] == pytest.approx(run.histogram.upper_bound(pct), abs=1e-12)
        assert bb.percentiles[k] == pr.percentiles[k]
    iperf_95 = run.histogram.bounds[95.0]                         # iperf's own statement of the same
    assert pr.histogram.percentile(95) == pytest.approx(iperf_95, abs=run.histogram.width + 1e-6)
    # engines of one protocol and size side by side, sockperf first
    pts = point_stats([trial_result(o.record, o.samples) for o in outs])
    pairs = {(a.protocol, a.engine_a, a.engine_b): a for a in agreement(pts)}
    assert set(pairs) == {("udp", "sockperf", "irtt"), ("tcp", "sockperf", "iperf2")}
    assert pairs[("tcp", "sockperf", "iperf2")].bound_b == "upper"
    assert set(pairs[("udp", "sockperf", "irtt")].ratios) == {"p50", "p99", "p99.9", "mean", "min"}


def test_preflight_names_every_host_without_an_engine_in_one_line():
    plan = parse_plan(PLAN + 'message_sizes = [64]\nengines = ["sockperf", "irtt"]\nprotocols = ["udp"]\n'
                      'load = { kind = "tcp" }')
    lab = Lab(plan, "", missing=(("c2", "sockperf"), ("srv", "irtt"), ("c1", "iperf3")))
    with pytest.raises(PreflightError) as e:
        LatencyRunner(plan, lab.hosts).preflight()
    line = e.value.one_line()
    assert "\n" not in line
    assert "c2: sockperf is not installed (apt-get install sockperf)" in line
    assert "srv: irtt is not installed (apt-get install irtt)" in line and "c1: iperf3 is not installed" in line


def test_a_probe_that_got_no_answer_fails_its_point_with_sockperfs_reason(tmp_path):
    plan = parse_plan(PLAN + 'message_sizes = [64]\nprotocols = ["udp"]\nprobe_clients = ["c1"]')
    lab = Lab(plan, fixture_text("sockperf", "3.7", "err_udp_no_server.csv"),
              probe_out=fixture_text("sockperf", "3.7", "err_udp_no_server.out"))
    _, [out] = run_all(lab, tmp_path)
    assert out.record.status == "failed" and "c1" in (out.record.error or "")
    assert all(p.poll() is not None for p in lab.t["srv"].spawned)       # nothing left running
