"""engine = "nbperf" in the UDP study: its pairs as intervals and totals, the
runner against the fake transport with the engine's recorded outputs
(tests/fixtures/nbperf/1.0.0, recorded by tests/fixtures/nbperf/capture.sh),
and what the plan refuses."""

from __future__ import annotations

import pytest
from test_nbperf_runner_fake import ADDR, _host, engine, env, text

from nicbench.core.errors import InputError, PreflightError
from nicbench.plan import parse_plan
from nicbench.plan.matrix import trials
from nicbench.run import nbperf as rn
from nicbench.studies.udp import measure as um
from nicbench.studies.udp import runner as udp
from nicbench.studies.udp.analysis import udp_trial
from nicbench.tools import nbperf
from nicbench.tools.base import ToolInfo

HOSTS = """
[hosts.srv]
role = "server"
[hosts.c1]
role = "client"
[hosts.c2]
role = "client"
"""


def run_of(case: str) -> tuple[nbperf.ClientRun, nbperf.ServerRun]:
    return nbperf.parse_client(text(f"{case}.client.out")), nbperf.parse_server(text(f"{case}.server.out"))


def plan_of(study: str):
    return parse_plan(f'name = "u"\n{HOSTS}\n[study]\nkind = "udp"\nengine = "nbperf"\ntimeout_margin = 1\n{study}')


def test_a_udp_pair_is_one_interval_per_flow_side_and_interval_summed_over_its_flows():
    c, s = run_of("udp-tx")            # 2 flows x 50 Mbit/s of 1400-byte datagrams, 2 s, intervals of 1 s
    ivs = rn.udp_intervals(c, s, omit=1.0)
    rcv = [iv for iv in ivs if iv.side == "receiver"]
    snd = [iv for iv in ivs if iv.side == "sender"]
    assert {iv.flow for iv in ivs} == {"fwd"} and all(iv.streams == 2 for iv in ivs)
    # the receiver's bytes are the server's conn_end totals; its packets those expected by sequence number
    assert sum(iv.bytes for iv in rcv) == sum(e.rx_bytes for e in s.ends) == c.summary.peer_rx_bytes
    assert sum(iv.packets or 0 for iv in rcv) == sum(e.udp.peer_tx_packets or 0 for e in s.ends if e.udp)
    assert sum(iv.packets or 0 for iv in snd) == sum(e.udp.tx_packets for e in c.ends if e.udp) == 17858
    # placed on the wall clock at the grid (start + k x interval), the first second the warm-up
    first = min(rcv, key=lambda iv: iv.abs_start or 0)
    assert first.omitted and first.abs_start == pytest.approx(c.start, abs=1e-3)
    # the warm-up's interval omitted; what came after the end (a last interval nbperf stamps) left out
    assert [iv.omitted for iv in sorted(rcv, key=lambda iv: iv.abs_start or 0)] == [True, False]
    assert max((iv.abs_start or 0) + iv.end for iv in ivs) == pytest.approx(c.start + c.duration, abs=2e-3)
    assert all(iv.lost == 0 and iv.jitter_s is not None and iv.jitter_s < 1e-3 for iv in rcv)
    # 100 Mbit/s of payload over the measured second
    measured = [iv for iv in rcv if not iv.omitted and iv.end - iv.start > 0.5]
    assert sum(iv.bytes for iv in measured) * 8 / sum(iv.end - iv.start for iv in measured) == \
        pytest.approx(100e6, rel=0.001)


def test_bidir_totals_are_keyed_as_iperf3s_and_count_every_datagram():
    c, s = run_of("udp-bidir")
    tot = rn.udp_totals(c, s)
    assert set(tot) == {"fwd.sender", "fwd.receiver", "rev.sender", "rev.receiver"}
    for k in ("fwd", "rev"):
        assert tot[f"{k}.receiver"]["packets"] == tot[f"{k}.sender"]["packets"] == 1699
        assert tot[f"{k}.receiver"]["lost"] == 0 and tot[f"{k}.receiver"]["received_bytes"] == 2500928


def test_a_tcp_output_is_not_taken_for_udp_intervals():
    c, s = run_of("tcp-tx")
    with pytest.raises(Exception, match="without udp counts"):
        rn.udp_intervals(c, s, omit=0)


def ctx_of(plan, cases: dict[str, str]) -> um.UdpContext:
    clients = list(cases)
    return um.UdpContext(plan.study, "srv", clients, engine(cases), ADDR,
                          ToolInfo("nbperf", (1, 0, 0), "nbperf 1.0.0"), 1500, exes={h: "/x/nbperf" for h in ADDR})


def test_a_point_paces_each_stream_at_the_clients_rate_over_its_streams_and_keeps_the_receivers_counts(tmp_path):
    plan = plan_of('rates = ["100M"]\nstreams = [2]\ndatagram_sizes = [1400]\nduration = 1\nomit = 1\n'
                   'interval = 1\ntrim = 0.25')
    [spec] = trials(plan)
    ctx = ctx_of(plan, {"c1": "udp-tx"})
    m = udp.measure(ctx, env(tmp_path), spec, tmp_path / spec.trial_id, 100e6)
    assert m.record.status == "ok", m.record.error
    [cli] = ctx.transports["srv"].spawned  # type: ignore[attr-defined]
    a = cli.argv
    assert a[a.index("--proto") + 1] == "udp" and a[a.index("--conns") + 1] == "2"
    assert a[a.index("--rate") + 1] == "50000000" and a[a.index("--io") + 1] == "1400"   # per stream
    assert a[a.index("--duration") + 1] == "2"              # the warm-up runs too, tagged omitted
    sent, got, loss = m.figures()
    assert got == pytest.approx(100e6, rel=0.002) and sent == pytest.approx(100e6, rel=0.002) and loss == 0
    assert m.record.meta["udp_totals"]["c1:5201"]["fwd.receiver"]["packets"] == 17858
    t = udp_trial(m.record, m.samples, 0.25)
    assert t.directions["tx"].gbps == pytest.approx(0.1, rel=0.01) and t.loss == 0


def test_a_killed_server_loses_its_pair_with_the_engines_reason_and_keeps_the_others(tmp_path):
    plan = plan_of('rates = ["100M"]\ndatagram_sizes = [1472]\nduration = 1\nomit = 1\ninterval = 1')
    [spec] = trials(plan)
    m = udp.measure(ctx_of(plan, {"c1": "udp-tx", "c2": "killed-server"}), env(tmp_path), spec,
                    tmp_path / spec.trial_id, 100e6)
    assert m.record.status == "partial" and "c2:5201 lost" in m.record.error and "reset" in m.record.error
    assert m.record.meta["lost"].keys() == {"c2:5201"}
    assert {k for k, _ in m.tallies} == {"c1:5201"}
    assert {x.tag("host") for x in m.samples if x.metric.startswith("udp.")} == {"c1"}


def test_preflight_counts_two_descriptors_a_stream():
    plan = plan_of('rates = ["1G"]\nstreams = [400]')
    ts = {"srv": _host("srv"), "c1": _host("c1", hard="800"), "c2": _host("c2")}
    with pytest.raises(PreflightError) as e:
        udp.preflight(plan, ts, ADDR, 1500)
    assert "c1: open-files limit is 800, the nbperf server needs 864 for 400 connections" in e.value.one_line()
    ctx, _ = udp.preflight(plan_of('rates = ["1G"]\nstreams = [4]'), ts, ADDR, 1500)
    assert ctx.exes == {"srv": "/x/nbperf", "c1": "/x/nbperf", "c2": "/x/nbperf"} and ctx.tool.version == (1, 0, 0)


def test_the_plan_takes_nbperf_and_refuses_datagrams_below_its_header():
    assert plan_of('rates = ["1G"]\nduration = 2.5').study.engine == "nbperf"     # not whole seconds: fine
    with pytest.raises(InputError) as e:
        plan_of('rates = ["1G"]\ndatagram_sizes = [20]')
    line = e.value.one_line()
    assert "study.datagram_sizes" in line and "20 bytes is below 32, the header nbperf" in line
