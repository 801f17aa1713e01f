"""engine = "nbperf" in a TCP plan on the embedded lab (root): a shaped link
reads within its ceiling, close to iperf3 on the same lab, with the start
skew the engine achieved recorded."""

from __future__ import annotations

import pytest
from helpers import namespaces, plan_text

from nicbench.api import execute, load_run
from nicbench.plan import parse_plan

pytestmark = pytest.mark.lab


def _run(tmp_path, engine: str, lab: str):
    text = plan_text(f"nbperf-{engine}", lab, engine=engine, clients=2, directions=("tx", "rx"),
                     io_sizes=("128K",), connections=(4,), duration=5, omit=1, trim=0.25, speed="1G")
    view = load_run(execute(parse_plan(text), text, store=tmp_path / engine).run_dir)
    assert namespaces(lab) == []
    return view


def test_nbperf_on_a_shaped_link_reads_its_ceiling_like_iperf3(tmp_path):
    nb = _run(tmp_path, "nbperf", "nbpf")
    for t in nb.trials:
        assert t.status == "ok", t.error
        # the start is the engine's: every connection's first send, both clients
        assert t.start_skew_s is not None and 0 <= t.start_skew_s < 0.005, t.start_skew_s
        assert t.cpu is not None and t.counters is not None and t.wire, t.point
    for p in nb.points:
        assert p.ceiling_gbps == pytest.approx(1448 / 1538, abs=1e-6)
        assert 0.95 <= p.of_ceiling <= 1.005, (p.point, p.median)
        assert not p.above_ceiling
        assert p.wire_gbps / p.link_gbps == pytest.approx(1.0, abs=0.03), (p.point, p.wire_gbps)
    ip = _run(tmp_path, "iperf3", "nbpf3")
    by = {p.point: p.median for p in ip.points}
    for p in nb.points:
        skew = max(t.start_skew_s or 0 for t in nb.trials if t.point == p.point)
        print(f"{p.point}: nbperf {p.median:.4f} Gbps ({p.of_ceiling:.2%} of ceiling), iperf3 {by[p.point]:.4f} "
              f"Gbps, ratio {p.median / by[p.point]:.4f}, start skew {skew * 1e3:.3f} ms")
        assert p.median == pytest.approx(by[p.point], rel=0.02), (p.point, p.median, by[p.point])
