"""The latency study's probe engines as units: the registry and the plan
name the same engines, each engine file is what the runner drives, and a
point's raw outputs name the tool that wrote them (the probe engine, the
TCP load's iperf3, the engine's fetched log)."""

from __future__ import annotations

from typing import get_args

from test_latency_runner_fake import PLAN, TRIAL, Lab, run_all

from nicbench.plan import parse_plan
from nicbench.plan.studies.latency import SERVES, WAITING, Engine
from nicbench.studies.latency.engines import ENGINES


def test_the_registry_and_the_plan_know_the_same_engines():
    assert set(ENGINES) == set(get_args(Engine)) == set(SERVES) == set(WAITING)
    assert all(e.name == name for name, e in ENGINES.items())


def test_a_loaded_points_raw_outputs_name_the_tool_that_wrote_them(tmp_path):
    plan = parse_plan(PLAN + 'message_sizes = [64]\nprotocols = ["udp"]\nprobe_clients = ["c1"]\n'
                      'conditions = ["loaded"]\nload = { kind = "tcp", connections = 2, lead = 1 }')
    lab = Lab(plan, (TRIAL / "full.csv").read_text(), (TRIAL / "client.out").read_text(),
              load_json=(TRIAL / "load_client.json").read_text())
    _, [out] = run_all(lab, tmp_path)
    assert out.record.status == "ok", out.record.error
    tools = {(r.role, r.tool) for r in out.raws}
    assert tools == {("latency-server", "sockperf"), ("latency-client", "sockperf"), ("latency-log", "sockperf"),
                     ("load-server", "iperf3"), ("load-client", "iperf3")}
    assert {r.stream for r in out.raws if r.role == "latency-log"} == {"stdout"}
    assert set(out.record.meta["argv"]) == {"srv:server:11111", "c1:client", "c1:load-server:5201",
                                            "c2:load-server:5201", "srv:load-client:c1:5201",
                                            "srv:load-client:c2:5201"}
    assert isinstance(out.record.meta["overhead_s"], float)
