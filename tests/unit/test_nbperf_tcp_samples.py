"""nbperf's JSON lines -> the TCP study's samples (run/nbperf.py), on output
recorded from the real engine (tests/fixtures/nbperf/1.0.0, see its README)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nicbench.analysis.aggregate import aggregate, timeline_problems
from nicbench.core.errors import ToolError
from nicbench.plan import parse_plan
from nicbench.run.nbperf import first_sends
from nicbench.studies.tcp.engines.nbperf import pair_samples, pairs
from nicbench.tools import nbperf

FIX = Path(__file__).parent.parent / "fixtures" / "nbperf" / "1.0.0"


def run(name: str) -> tuple[nbperf.ClientRun, nbperf.ServerRun]:
    def t(f: str) -> str:
        p = FIX / f
        return p.read_text() if p.exists() else ""
    return (nbperf.parse_client(t(f"{name}.client.out"), t(f"{name}.client.err")),
            nbperf.parse_server(t(f"{name}.server.out"), t(f"{name}.server.err")))


def total(samples, **tags) -> float:
    return sum(s.value for s in samples if s.metric == "tcp.bytes" and all(s.tag(k) == str(v) for k, v in tags.items()))


def test_tx_receiver_bytes_are_the_servers_every_byte_once_per_interval():
    c, s = run("tcp-tx")
    out = pair_samples("t", "c1", 5301, c, s, omit=0)
    rx_total = sum(e.rx_bytes for e in s.ends if e.session == c.session)
    assert total(out, direction="tx", side="receiver") == rx_total            # drain included, nothing twice
    assert total(out, direction="tx", side="sender") == c.summary.tx_bytes == rx_total
    assert {x.tag("direction") for x in out} == {"tx"}
    # three connections summed into one sample per interval: 4 x 0.5 s + the drain after the end
    recv = sorted((x for x in out if x.metric == "tcp.bytes" and x.tag("side") == "receiver"), key=lambda x: x.t_start)
    # the server's stamps moved onto the client's clock by the offset it measured (µs here: one clock)
    assert len(recv) == 5 and recv[0].t_start == pytest.approx(c.start - c.clock_offset, abs=1e-6)
    assert abs(c.clock_offset) < 1e-4
    assert [x.tag("streams") for x in recv[:4]] == ["3"] * 4
    assert timeline_problems(out, direction="tx") == []
    assert all(x.tag("host") == "c1" and x.tag("proc") == "5301" for x in out)
    assert any(x.metric == "tcp.retransmits" and x.tag("side") == "sender" for x in out)
    assert not any(x.metric == "tcp.retransmits" and x.tag("side") == "receiver" for x in out)


def test_the_warm_up_is_tagged_omitted_by_the_interval_grid():
    c, s = run("tcp-tx")
    out = pair_samples("t", "c1", 5301, c, s, omit=1.0)
    recv = sorted((x for x in out if x.metric == "tcp.bytes" and x.tag("side") == "receiver"), key=lambda x: x.t_start)
    assert [x.tag("omitted") for x in recv] == ["1", "1", "0", "0", "0"]
    agg = aggregate(out, direction="tx", trim=0.0)
    assert agg.window[0] == pytest.approx(c.start + 1.0, abs=0.01)


def test_rx_receiver_is_the_client_and_bidir_has_both_directions():
    c, s = run("tcp-rx-sendfile-trunc")
    out = pair_samples("t", "c1", 5301, c, s, omit=0)
    assert total(out, direction="rx", side="receiver") == c.summary.rx_bytes == c.summary.peer_tx_bytes
    assert {x.tag("direction") for x in out} == {"rx"}
    assert len(first_sends(c, s)) == c.conns       # the server's first sends are the achieved start
    c, s = run("tcp-bidir")
    out = pair_samples("t", "c1", 5301, c, s, omit=0)
    assert total(out, direction="tx", side="receiver") == c.summary.peer_rx_bytes
    assert total(out, direction="rx", side="receiver") == c.summary.rx_bytes
    for d in ("tx", "rx"):
        assert timeline_problems(out, direction=d) == []


def test_a_failed_session_on_the_server_loses_the_pair():
    c, _ = run("tcp-tx")
    s = nbperf.parse_server((FIX / "killed-client.server.out").read_text(),
                            (FIX / "killed-client.server.err").read_text())
    with pytest.raises(ToolError):
        pair_samples("t", "c1", 5301, c, s, omit=0)     # another session: not this client's


def test_pairs_spread_connections_like_the_iperf_engines():
    plan = parse_plan('name = "x"\n[hosts.s]\nrole = "server"\n[hosts.a]\nrole = "client"\n[hosts.b]\n'
                      'role = "client"\n[study]\nengine = "nbperf"\nconnections = [3]\n')
    assert [(p.client, p.conns) for p in pairs(plan.study, ["a", "b"], 3)] == [("a", 2), ("b", 1)]
    assert [(p.client, p.conns) for p in pairs(plan.study, ["a", "b"], 1)] == [("a", 1)]


def test_nbperf_plans_take_io_up_to_its_limit():
    base = 'name = "x"\n[hosts.s]\nrole = "server"\n[hosts.a]\nrole = "client"\n[study]\nengine = "nbperf"\n'
    assert parse_plan(base + 'io_sizes = ["4M"]\n').study.io_sizes == [4 << 20]
    with pytest.raises(Exception, match="up to 4M"):
        parse_plan(base + 'io_sizes = ["8M"]\n')


def test_a_starved_threads_late_boundaries_still_give_one_contiguous_timeline():
    """A CPU-starved receiver thread reads a connection's boundary late: here
    0.3 s late, then once more than a whole interval late (one reported
    interval spanning two grid slots).  Summing 'the k-th interval of every
    connection' overlapped or left gaps (a seed 000 replay's bidir points
    were rejected: 'c1:5201 tx has a 0.185s gap').  Spread over the grid pro
    rata, the slots are contiguous, on the grid, and every byte counts once."""
    from nicbench.analysis.aggregate import timeline_problems
    from nicbench.records import Sample as Rec
    from nicbench.records import make_tags
    from nicbench.run.nbperf import per_interval

    def row(conn: int, t0: float, t1: float, rx: int) -> nbperf.Sample:
        return nbperf.Sample("server", "t", "s", conn, 0, 100.0 + t0, 100.0 + t1, 0, rx)

    regular = [row(0, k * 0.5, (k + 1) * 0.5, 1000) for k in range(6)]
    late = [row(1, 0.0, 0.5, 1000), row(1, 0.5, 1.3, 1600), row(1, 1.3, 2.6, 2600), row(1, 2.6, 3.0, 800)]
    slots = per_interval(regular + late, lambda r: r.rx_bytes, 100.0, 0.5, 0.0)
    grid = [(k * 0.5, (k + 1) * 0.5) for k in range(6)]
    assert [(round(a - 100, 6), round(b - 100, 6)) for a, b, *_ in slots] == grid
    assert sum(b for _, _, b, _, _ in slots) == 6000 + 6000                  # every byte once
    assert [n for *_, n in slots] == [2] * 6
    # conn 1's 1600 bytes over 0.5-1.3: 1000 in 0.5-1.0, 600 in 1.0-1.3; its 2600 over 1.3-2.6: 400 + 1000 x 2 + 200
    assert [b for _, _, b, _, _ in slots] == [2000, 2000, 2000, 2000, 2000, 2000]
    samples = [Rec("t", "tcp.bytes", float(b), "bytes", a, z, make_tags(host="c1", proc=5201, direction="tx",
                                                                      side="receiver")) for a, z, b, _, _ in slots]
    assert timeline_problems(samples, direction="tx") == []


def _run_of(version: str, name: str) -> tuple[nbperf.ClientRun, nbperf.ServerRun]:
    d = FIX.parent / version
    return (nbperf.parse_client((d / f"{name}.client.out").read_text(), ""),
            nbperf.parse_server((d / f"{name}.server.out").read_text(), ""))


@pytest.mark.parametrize("name, direction", [("tcp-tx", "tx"), ("tcp-rx-sendfile-trunc", "rx"), ("tcp-bidir", "tx"),
                                             ("tcp-bidir", "rx")])
def test_receiver_bytes_are_the_kernels_as_they_arrived_and_add_up_to_the_engines_reads(name, direction):
    """nbperf 1.1.0 reports per interval the bytes the kernel received in order
    (tcpi_bytes_received less the handshake and the FIN): placed when they
    arrived, so a reader that falls behind cannot move bytes across interval
    and window edges.  Used only when, connection by connection, they add up
    to exactly the bytes the engine read."""
    from nicbench.run.nbperf import receiver_counts
    c, s = _run_of("1.1.0", name)
    rows = [x for x in s.samples if x.session == c.session] if direction == "tx" else c.samples
    _, kernel = receiver_counts(rows)
    assert kernel
    counted: dict[str, bool] = {}
    out = pair_samples("t", "c1", 5301, c, s, omit=0, counted=counted)
    assert counted[direction] is True
    app = sum(r.rx_bytes for r in rows)
    assert total(out, direction=direction, side="receiver") == app              # every byte once
    # per interval the samples are the kernel's arrivals on the grid, not the engine's reads
    from nicbench.run.nbperf import per_interval
    shift = -c.clock_offset if direction == "tx" else 0.0
    recv = sorted((x for x in out if x.metric == "tcp.bytes" and x.tag("side") == "receiver"
                   and x.tag("direction") == direction), key=lambda x: x.t_start)
    by_kernel = [b for _, _, b, _, _ in per_interval(rows, lambda r: r.tcp.kernel_rx_bytes, c.start, c.interval,
                                                        shift)]
    by_reads = [b for _, _, b, _, _ in per_interval(rows, lambda r: r.rx_bytes, c.start, c.interval, shift)]
    assert [x.value for x in recv] == by_kernel != by_reads


def test_without_the_kernels_count_or_when_it_does_not_add_up_the_engines_reads_are_used():
    from dataclasses import replace as dc_replace

    from nicbench.run.nbperf import receiver_counts
    c, s = run("tcp-tx")                                        # 1.0.0: no kernel_rx_bytes
    mine = [x for x in s.samples if x.session == c.session]
    assert receiver_counts(mine)[1] is False
    c, s = _run_of("1.1.0", "tcp-tx")
    mine = [x for x in s.samples if x.session == c.session]
    assert receiver_counts(mine)[1] is True
    off = [dc_replace(mine[0], tcp=dc_replace(mine[0].tcp, kernel_rx_bytes=mine[0].tcp.kernel_rx_bytes + 1)), *mine[1:]]
    count, kernel = receiver_counts(off)
    assert kernel is False and count(off[0]) == off[0].rx_bytes
