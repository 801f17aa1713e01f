"""What a reader of a report meets: three significant figures everywhere,
counters whole, a headline table and the rest folded away, per-client values
on one line, latency percentiles shown, and a single-point packet figure with
plain axis labels and its ceiling line."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from matplotlib.lines import Line2D

from conftest import FIXTURES
from nicbench.api import load_run, render
from nicbench.registry import VIEWS
from nicbench.report.numbers import count, num, whole
from nicbench.report.tables import Col, table
from nicbench.studies.packets.analysis import PacketPoint
from nicbench.studies.packets.view import packet_axes, packet_rows


@pytest.mark.parametrize("x, text", [(9.4132, "9.41"), (0.62345, "0.623"), (12.345, "12.3"), (1183.4, "1183"),
                                     (0.001234, "0.00123"), (3.2, "3.20"), (100.0, "100"), (0, "0"), (None, "—"),
                                     (0.9996, "1.00"), (-0.5, "-0.500")])
def test_three_significant_figures_keeping_integer_digits(x, text):
    assert num(x) == text


def test_counters_are_whole():
    assert count(1198.0) == "1198" and count(7) == "7" and count(None) == "—"
    assert whole(1198.0) == 1198 and isinstance(whole(1198.0), int) and whole(0.5) == 0.5


def test_a_column_formats_by_kind():
    rows = [{"g": 1.23456, "n": 12.0, "t": "tx"}]
    t = table(rows, [Col("g", "g"), Col("n", "n", "count"), Col("t", "t", "text")])
    assert [c.text for c in t.rows[0]] == ["1.23", "12", "tx"] and t.rows[0][2].left


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, Path]:
    out = {}
    for kind in ("tcp", "https", "storage", "packets"):
        run = tmp_path_factory.mktemp(kind) / kind
        shutil.copytree(FIXTURES / "runs" / kind, run)
        out[kind] = render(load_run(run))
    return out


def _cells(html: str) -> list[str]:
    return re.findall(r"<td[^>]*>(?:<b>)?([^<]*)(?:</b>)?</td>", html)


@pytest.mark.parametrize("kind", ["tcp", "https", "storage", "packets"])
def test_headline_then_folded_detail_and_no_long_decimals(reports, kind):
    html = reports[kind].read_text()
    points = html[html.index("<h2>Points</h2>"):]
    headline = points[:points.index("<details")]
    assert headline.count("<table") == 1
    n_cols = headline[:headline.index("</tr>")].count("<th")
    assert n_cols <= 11, n_cols                               # not 23 columns
    assert '<details class="detail"><summary>Detail: every column' in points
    measured = "".join(re.findall(r'<table class="points[^"]*">.*?</table>', html, re.S))   # facts stay verbatim
    assert measured
    for cell in _cells(measured):
        # no float with more decimals than 3 significant figures need, no counter as 1198.0
        m = re.fullmatch(r"-?(\d+)\.(\d+)", cell.strip())
        if m:
            lead = m.group(1).lstrip("0")
            figures = len(lead) + len(m.group(2)) if lead else len(m.group(2).lstrip("0"))
            assert figures <= 3, cell


def test_per_client_values_stay_on_one_line(reports):
    html = reports["tcp"].read_text()
    cell = re.search(r"<td class=\"l\">(c1 [0-9.]+ · c2 [0-9.]+ · c3 [0-9.]+)</td>", html)
    assert cell, "per-client cell"
    assert "table.points td{white-space:nowrap}" in html


def test_latency_percentiles_are_shown(reports):
    https = reports["https"].read_text()
    assert "latency p50 ms" in https and "p99 ms" in https
    view = load_run(reports["https"].parent.parent)
    rows = VIEWS["https"].rows(view)
    assert all(r["latency_p99_s"] and r["latency_p50_s"] <= r["latency_p99_s"] for r in rows)
    # the slowest client's wrk percentile (the stored run: c1 p99 333674 us, c2 ...)
    storage = reports["storage"].read_text()
    assert "p99 µs" in storage
    srows = VIEWS["storage"].rows(load_run(reports["storage"].parent.parent))
    assert all(r["latency_p99_s"] and 1e-6 < r["latency_p99_s"] < 1 for r in srows)


def test_a_single_point_packet_figure_has_plain_labels_and_a_ceiling_line():
    p = PacketPoint("nbgen/ipv4/p1/t1/64B", "nbgen", 4, 1, 1, 64, 1, 0, 6.02, 6.02, 6.02, 6.1, 0.001, 14.88,
                    1.9, 95.0, 0.9, 6.1, 6.0, 0.0, ("native",), None, (), ())
    fig, ax = packet_axes(packet_rows([p]), "one point", "10G")
    assert ax.get_yscale() == "linear"
    fig.canvas.draw()
    labels = [t.get_text() for t in ax.get_yticklabels() if t.get_text()]
    assert labels and not any("10^" in s or "times" in s for s in labels)
    ceilings = [ln for ln in ax.get_lines() if isinstance(ln, Line2D) and str(ln.get_label()).startswith("line rate")]
    assert ceilings and ceilings[0].get_ydata()[0] == pytest.approx(14.88)
    assert ax.get_ylim()[1] > 14.88                       # the ceiling is inside the axes
