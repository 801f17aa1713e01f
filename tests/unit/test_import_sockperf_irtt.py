"""sockperf and irtt outputs run elsewhere (issue 28), imported onto the
records the latency study's own runner stores; figures checked against what
each file says (provenance in tests/fixtures/SOURCES.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import import_json as imp
from conftest import run_cli as nb
from nicbench.core.errors import InputError
from nicbench.importers import parse_file
from nicbench.importers.adapt import ImportOptions
from nicbench.importers.group import group
from nicbench.importers.headline import headline
from nicbench.studies.latency.imported import LatencyImport

FIX = Path(__file__).resolve().parents[1] / "fixtures"
EXT = FIX / "import"
US = 1e-6


def load(path: Path):
    return parse_file(path.read_text(), str(path))


def adapt(*paths: Path, **opts):
    return LatencyImport().adapt(group([load(p) for p in paths]), ImportOptions(**opts))


@pytest.mark.parametrize("rel, proto, size, mean_half, p50_half, n, secs", [
    # sockperf 3.5's documentation: "avg-lat" is half the round trip (no --full-rtt)
    ("doc_3.5_pp_tcp_m64.txt", "tcp", 64, 9.017, 6.222, 528579, 9.550),
    ("doc_3.5_pp_udp_mc_m16384.txt", "udp", 16384, 20.771, 19.279, 229630, 9.550),
    ("doc_3.5_pp_udp_vma_m64.txt", "udp", 64, 0.951, 0.943, 4951987, 9.550),
])
def test_sockperf_summaries_are_round_trips(rel, proto, size, mean_half, p50_half, n, secs):
    p = load(EXT / "sockperf/ext" / rel)
    assert (p.format, p.kind, p.version) == ("sockperf-text", "rr", "3.5")
    assert (p.params["protocol"], p.params["message_size"], p.params["rate"]) == (proto, size, "max")
    # the tool's own headline: its mean, doubled into a round trip (the file's "Latency is" is RTT/2)
    assert headline(p) == ("round trip, mean (2 x sockperf's 'Latency is')", pytest.approx(2 * mean_half * US), "s")
    assert p.totals["latency.p50"] == pytest.approx(2 * p50_half * US)
    assert (p.totals["transactions"], p.totals["seconds"]) == (n, secs)
    assert any("half the round trip" in x for x in p.notes)


def test_sockperf_summary_is_a_latency_point_with_stated_figures(capsys, tmp_path):
    doc = imp(capsys, tmp_path / "s", EXT / "sockperf/ext/doc_3.5_pp_tcp_m64.txt")
    [f] = doc["files"]
    assert (f["format"], f["study"]) == ("sockperf-text", "latency")
    assert f["headline"][0]["value"] == pytest.approx(18.034 * US) and f["headline"][0]["unit"] == "s"
    [pt] = doc["runs"][0]["points"]
    # the study's headline: p99 RTT, 2 x sockperf's "percentile 99.000 = 16.193"
    assert pt["point"] == "tcp/sockperf/m64/idle" and pt["value"] == pytest.approx(2 * 16.193)
    t = adapt(EXT / "sockperf/ext/doc_3.5_pp_tcp_m64.txt").trials[0]
    [rec] = t.meta["probes"].values()
    assert rec["percentiles_bound"] == "stated" and rec["engine"] == "sockperf"
    assert rec["percentiles"]["p99"] == pytest.approx(2 * 16.193 * US)
    assert rec["stated"]["sent"] == 528579 and rec["stated"]["lost"] == 0
    assert t.params["waiting"].startswith("back to back")


def test_sockperf_full_log_is_the_runners_exact_record(capsys, tmp_path):
    """sockperf 3.7's --full-log (recorded here): every round trip, so the exact histogram."""
    log = FIX / "sockperf/3.7/pp_tcp_m64_mps1000.csv"
    with pytest.raises(InputError, match="do not say TCP or UDP"):
        adapt(log)
    t = adapt(log, protocol="tcp").trials[0]
    [rec] = t.meta["probes"].values()
    assert rec["percentiles_bound"] == "exact" and rec["count"] == 1550 and rec["lost"] == 0
    # the full log's own summary: min 18.424 us, max 1335.903 us, 1550 answered at --mps=1000
    assert (rec["min"], rec["max"]) == (pytest.approx(18.424 * US), pytest.approx(1335.903 * US))
    assert t.params["rate"] == 1000 and t.params["waiting"] == "spins (busy-waits on the TSC)"
    assert {s.metric for s in t.samples} == {"latency.requests", "latency.rtt_mean", "latency.rtt_max"}
    assert sum(s.value for s in t.samples if s.metric == "latency.requests") == 1550
    doc = imp(capsys, tmp_path / "s", "--protocol", "tcp", log)
    assert doc["runs"][0]["points"][0]["point"] == "tcp/sockperf/m64/idle"


def test_sockperf_under_load_without_its_command_line():
    p = load(FIX / "sockperf/3.7/ul_udp_m64_mps10000.out")
    assert p.params["mode"] == "under-load" and p.params["reply_every"] == 99
    assert "message_size" not in p.params and p.params["rate"] is None
    with pytest.raises(InputError, match="sizes are not in the file"):
        adapt(FIX / "sockperf/3.7/ul_udp_m64_mps10000.out")
    t = adapt(FIX / "sockperf/3.7/ul_udp_m64_mps10000.out", io_size=64).trials[0]
    assert t.point == "udp/sockperf/m64/idle" and "one message in 99" in t.params["waiting"]


def test_sockperf_throughput_mbps_are_binary_and_sender_side(capsys, tmp_path):
    """sockperf issue #140: 155961 msg/s x 32768 B; its "4873.781 MBps (38990.250 Mbps)" are 2^20-based."""
    p = load(EXT / "sockperf/ext/issue140_3.7_tp_tcp_m32768.txt")
    assert (p.kind, p.params["io_size"]) == ("tcp", 32768)
    assert headline(p) == ("sender bit/s", pytest.approx(155961 * 32768 * 8), "bit/s")
    assert headline(p)[1] == pytest.approx(38990.250 * 2**20, rel=1e-7)
    assert any("2^20-based" in n for n in p.notes)
    doc = imp(capsys, tmp_path / "s", EXT / "sockperf/ext/issue140_3.7_tp_tcp_m32768.txt")
    [pt] = doc["runs"][0]["points"]
    assert pt["point"] == "tx/c1/io32K" and pt["value"] == pytest.approx(155961 * 32768 * 8 / 1e9)


def test_irtt_json_is_the_runners_exact_record(capsys, tmp_path):
    """LENS (Starlink) dataset's irtt example: 5 round trips, nanoseconds."""
    path = EXT / "irtt/ext/lens_starlink_0.9.1.json"
    p = load(path)
    assert (p.format, p.version, p.params["message_size"], p.params["rate"]) == ("irtt-json", "0.9.1-clarkzjw", 60, 1)
    # irtt's own stats.rtt.mean, 16616803 ns
    assert headline(p) == ("round trip, mean (irtt's rtt, turnaround excluded)", pytest.approx(0.016616803), "s")
    t = adapt(path).trials[0]
    [rec] = t.meta["probes"].values()
    assert rec["percentiles_bound"] == "exact" and rec["count"] == 5 and rec["sent"] == 5 and rec["lost"] == 0
    # whole round trips (client receive - send): seqno 0, 1707277440790127432 - 1707277440772833721 ns
    assert rec["max"] == pytest.approx((1707277440790127432 - 1707277440772833721) / 1e9, rel=1e-3)
    assert rec["window"][0] == pytest.approx(1707277440.772833721)
    doc = imp(capsys, tmp_path / "s", path)
    assert doc["runs"][0]["points"][0]["point"] == "udp/irtt/m60/idle"


def test_tools_are_named_in_the_old_form(capsys, tmp_path):
    code, out, err = nb(capsys, "import", "--store", tmp_path / "s", "sockperf",
                        EXT / "sockperf/ext/doc_3.5_pp_tcp_m64.txt")
    assert code == 0 and "sockperf-text (as asked)" in out, err
    code, out, err = nb(capsys, "import", "--store", tmp_path / "t", "--as", "irtt",
                        EXT / "irtt/ext/lens_starlink_0.9.1.json")
    assert code == 0 and "irtt-json (as asked)" in out, err
