"""engine = "nbperf" in a TCP plan on the embedded lab (root): a shaped link
reads within its ceiling and what its interface counters carried, as iperf3
does on the same lab, with the start skew the engine achieved recorded.
Asserted is what nicbench decides and how two counts of the same traffic in
one run agree, not how fast this shared machine was (docs/results.md keeps
the measured nbperf / iperf3 ratios)."""

from __future__ import annotations

import re
import threading

import pytest
from helpers import goodput_agrees_with_the_wire, kill_server_in, namespaces, plan_text

from nicbench.api import execute, load_run, render
from nicbench.plan import parse_plan

pytestmark = pytest.mark.lab


def _run(tmp_path, engine: str, lab: str):
    text = plan_text(f"nbperf-{engine}", lab, engine=engine, clients=2, directions=("tx", "rx"),
                     io_sizes=("128K",), connections=(4,), duration=5, omit=1, trim=0.25, speed="1G")
    view = load_run(execute(parse_plan(text), text, store=tmp_path / engine).run_dir)
    assert namespaces(lab) == []
    return view


def test_nbperf_on_a_shaped_link_reads_within_its_ceiling_and_its_counters_like_iperf3(tmp_path):
    nb = _run(tmp_path, "nbperf", "nbpf")
    for t in nb.trials:
        assert t.status == "ok", t.error
        # the start is the engine's: every connection's first send, both clients (how
        # close they came is this machine's scheduling: printed below, not asserted)
        assert t.start_skew_s is not None and t.start_skew_s >= 0, t.start_skew_s
        assert t.cpu is not None and t.counters is not None and t.wire, t.point
    assert re.search(r"Engine nbperf \d+\.\d+\.\d+", render(nb).read_text())
    ip = _run(tmp_path, "iperf3", "nbpf3")
    assert [t.status for t in ip.trials] == ["ok", "ok"], [t.error for t in ip.trials]
    by = {p.point: p.median for p in ip.points}
    # each engine against the wire it ran on, in its own run: the two runs are
    # minutes apart on a shared machine, so their figures are compared by eye only
    for view in (nb, ip):
        for p in view.points:
            assert p.ceiling_gbps == pytest.approx(1448 / 1538, abs=1e-6)
            assert not p.above_ceiling and not p.wire_above_link, (p.point, p.max_of_ceiling, p.max_wire_of_link)
            goodput_agrees_with_the_wire(p)
    for p in nb.points:
        skew = max(t.start_skew_s or 0 for t in nb.trials if t.point == p.point)
        print(f"{p.point}: nbperf {p.median:.4f} Gbps ({p.of_ceiling:.2%} of ceiling), iperf3 {by[p.point]:.4f} "
              f"Gbps, ratio {p.median / by[p.point]:.4f}, start skew {skew * 1e3:.3f} ms")


def test_a_killed_nbperf_server_leaves_a_partial_point_with_the_survivors_data(tmp_path):
    """The iperf engines' rule holds for nbperf: one client host's engine
    server killed mid-point loses that pair only; the point is partial and
    its figure is the survivor's."""
    text = plan_text("nblost", "nbpl", engine="nbperf", clients=2, connections=(2,), duration=4, omit=0,
                     speed="1G")
    killed: list[int] = []
    k = threading.Thread(target=kill_server_in, args=("nb-nbpl-c2", "nbperf", "server", 1.5, killed), daemon=True)
    k.start()
    out = execute(parse_plan(text), text, store=tmp_path)
    k.join(5)
    assert killed, f"no nbperf seen in nb-nbpl-c2 (run {out.status}, {out.run_dir})"
    assert out.status == "done-with-partial-points" and out.partial == 1, (out.status, out.run_dir)
    view = load_run(out.run_dir)
    [t] = view.trials
    assert t.status == "partial" and "c2:5201 lost" in t.error, t.error
    # c1's data kept, as c1's alone (how fast c1 went alone on the 1G link is not the point)
    assert set(t.receiver["tx"].per_host) == {"c1"} and t.gbps > 0, t.receiver
    [p] = view.points
    assert p.survivors_only and p.median == pytest.approx(t.gbps)
    page = render(view).read_text()
    assert "survivors only" in page and "c2:5201 lost" in page
    assert namespaces("nbpl") == []
