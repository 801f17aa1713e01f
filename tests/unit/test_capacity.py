"""The capacity model (analysis/capacity.py): cores at 100-800 Gbit/s at a
point's measured cost per byte, withheld with why when that cost was not
measured cleanly."""

from __future__ import annotations

import pytest

from nicbench.analysis.capacity import ASSUMPTION, Repeat, capacity
from nicbench.analysis.cpu import CpuUsage


def usage(cores: float, gaps: dict | None = None) -> CpuUsage:
    return CpuUsage("srv", (0.0, 3.0), 2, {"0": {"softirq": cores / 2}, "1": {"system": cores / 2}}, cores, "0",
                    cores / 2, "softirq", {}, gaps or {})


def test_cores_at_faster_links_from_the_median_cost():
    c = capacity([Repeat(2.0, usage(1.0), [2.0, 2.0, 2.0]), Repeat(2.0, usage(1.2), [2.0, 2.1, 1.9]),
                  Repeat(2.0, usage(1.4))])
    assert c.withheld is None and c.host == "srv"
    assert c.cores_per_gbps == pytest.approx(0.6)
    assert c.cores_at == pytest.approx({100: 60.0, 200: 120.0, 400: 240.0, 800: 480.0})
    assert c.as_dict()["assumption"] == ASSUMPTION and "softirq included" in ASSUMPTION


@pytest.mark.parametrize(("repeats", "why"), [
    ([Repeat(2.0, None)], "no CPU measured"),
    ([Repeat(2.0, usage(1.0, {"1": (0.8, "offline")}))], "CPU 1 80% (offline)"),
    ([Repeat(2.0, usage(1.0), [2.0, 0.5, 2.0, 2.0])], "not steady"),
])
def test_withheld_where_the_cost_was_not_measured_cleanly(repeats, why):
    c = capacity(repeats)
    assert c.cores_per_gbps is None and c.cores_at == {} and why in c.withheld


def test_no_repeat_no_model():
    assert capacity([]) is None
