"""netperf TCP_RR / UDP_RR results imported into the latency study
(``studies/latency/imported.py``): the adapter on every RR fixture (figures
read by hand from the files, microseconds -> seconds), the import through
the CLI into a run whose report renders without a CDF, ``nicbench compare``
against the stored lab run of the latency study (tests/fixtures/runs/latency),
and what is refused."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from conftest import FIXTURES
from conftest import import_json as imp
from conftest import run_cli as nb
from nicbench.api import load_run
from nicbench.core.errors import InputError
from nicbench.importers import parse_file, points
from nicbench.importers.adapt import ImportedRun, ImportOptions
from nicbench.importers.group import group
from nicbench.studies.latency.analysis import LatencyPoint, LatencyTrial
from nicbench.studies.latency.imported import LatencyImport
from nicbench.studies.latency.view import LatencyView

NP = FIXTURES / "import" / "netperf" / "ext"
GOLDEN = FIXTURES / "runs" / "latency"
US = 1e-6


def adapt(*paths: Path, io_size: int | None = None, together: bool = False) -> ImportedRun:
    parsed = [q for p in paths for q in points(parse_file(p.read_text(), p.name))]
    return LatencyImport().adapt(group(parsed, together), ImportOptions(io_size=io_size))


# file, protocol, p50, p90, p99, min, max, stddev (us, as the -o line prints them), transactions/s
STATED = [
    ("netperf_pkb_tcp_rr_o.txt", "tcp", 683, 735, 841, 600, 900, 783.80, 1405.50),
    ("netperf_pkb_udp_rr_o.txt", "udp", 700, 757, 891, 600, 1000, 808.44, 1359.71),
    # the wrapped header: 442,487,589 then Stddev 81.26, Minimum 361, Maximum 9688
    ("pkb_netperf_results.txt", "udp", 442, 487, 589, 361, 9688, 81.26, 2217.06),
]


@pytest.mark.parametrize("name, proto, p50, p90, p99, mn, mx, sd, tps", STATED, ids=[s[0] for s in STATED])
def test_stated_figures_become_one_probe_of_an_idle_back_to_back_point(name, proto, p50, p90, p99, mn, mx, sd, tps):
    run = adapt(NP / name, io_size=1)
    [t] = run.trials
    assert t.point == f"{proto}/netperf/m1/idle"
    assert dict(t.params) == {"protocol": proto, "engine": "netperf", "message_size": 1, "condition": "idle",
                              "rate": "max", "duration": None, "waiting": "back to back (blocks in recv)"}
    [(host, rec)] = t.meta["probes"].items()
    assert host == name and rec["percentiles_bound"] == "stated" and "histogram" not in rec
    assert rec["percentiles"] == pytest.approx({"p50": p50 * US, "p90": p90 * US, "p99": p99 * US}, rel=1e-12)
    assert (rec["min"], rec["max"]) == pytest.approx((mn * US, mx * US), rel=1e-12)
    assert rec["rate"] == tps and rec["stated"]["stddev_s"] == pytest.approx(sd * US, rel=1e-12)
    # not printed by these runs: no mean, no elapsed time, so no transaction count and no samples
    assert rec["mean"] is None and rec["count"] is None and rec["window"] is None and t.samples == ()
    assert rec["stated"]["burst"] == 0                       # the banner's "first burst 0"
    assert "message size 1 B as --io-size gave it (the file does not say it)" in t.notes
    assert run.meta["engine"] == "netperf" and run.meta["probe_clients"] == [name]


def test_the_latency_analysis_takes_stated_figures_as_they_are(capsys, tmp_path):
    doc = imp(capsys, tmp_path / "s", "--io-size", "1", NP / "netperf_pkb_tcp_rr_o.txt")
    view = load_run(Path(doc["run_dir"]))
    [t] = view.trials
    assert isinstance(t, LatencyTrial) and t.status == "ok" and t.bound == "stated" and t.merged is None
    assert t.percentiles == pytest.approx({"p50": 683 * US, "p90": 735 * US, "p99": 841 * US, "max": 900 * US})
    assert t.min == pytest.approx(600 * US) and t.mean is None and t.rate == 1405.50
    [p] = view.points
    assert isinstance(p, LatencyPoint) and p.bound == "stated" and p.merged is None and p.lost_fraction is None
    assert "p99.9" not in p.percentiles                          # netperf does not state it
    [s] = LatencyView().point_summaries(view)
    assert s.values["p99_us"] == pytest.approx(841) and s.values["p99.9_us"] is None
    assert s.values["rate"] == 1405.50 and s.values["lost_pct"] is None


def test_a_classic_table_gives_its_mean_round_trip_marked_derived():
    """Issue 28: netperf's classic TCP_RR table has only its transaction rate; with one
    transaction outstanding (no burst) that is the mean round trip: imported, marked derived."""
    p = parse_file((NP / "netperf_doc_tcp_rr.txt").read_text(), "netperf_doc_tcp_rr.txt")
    # 16384  87380  1  1  10.00  59421.52: socket sizes, request 1 B, response 1 B, 10 s, transactions/s
    assert (p.params["protocol"], p.params["request_size"], p.params["response_size"]) == ("tcp", 1, 1)
    assert p.totals["transactions"] == pytest.approx(594215.2)
    t = adapt(NP / "netperf_doc_tcp_rr.txt").trials[0]
    [rec] = t.meta["probes"].values()
    assert rec["mean"] == pytest.approx(1 / 59421.52) and rec["derived"] == ["mean"] and rec["percentiles"] == {}
    assert any("derived as 1 / its transaction rate" in n for n in t.notes)


def test_throughput_only_selectors_give_a_derived_mean():
    t = adapt(NP / "netperf_doc_tcp_rr_k.txt", io_size=1).trials[0]
    [rec] = t.meta["probes"].values()
    assert rec["mean"] == pytest.approx(1 / 60074.74) and rec["derived"] == ["mean"]
    # an omni test that says neither TCP nor UDP (-o THROUGHPUT alone): its protocol is asked for
    with pytest.raises(InputError, match="do not say TCP or UDP") as e:
        adapt(NP / "netperf_doc_omni_rr_o.txt", io_size=1)
    assert "--protocol" in (e.value.hint or "")


def test_a_burst_without_latency_is_refused(tmp_path):
    """With a first burst several transactions are outstanding: 1/rate is no round trip."""
    src = (NP / "netperf_doc_tcp_rr.txt").read_text().replace(": demo", ": first burst 4 : demo")
    f = tmp_path / "burst.txt"
    f.write_text(src)
    with pytest.raises(InputError, match="no round-trip time in the file, only 59421.52 transactions/s"):
        adapt(f)


def with_columns(src: Path, dest: Path, **extra: str) -> Path:
    """A copy of a PKB -o output with more selectors' columns, as netperf
    prints them when asked for (e.g. ``REQUEST_SIZE`` -> "Request Size Bytes")."""
    banner, head, values = src.read_text().splitlines()[:3]
    dest.write_text("\n".join([banner, ",".join([head, *extra]), ",".join([values, *extra.values()])])
                    + "\n")
    return dest


def test_sizes_elapsed_and_mean_when_the_file_states_them(tmp_path):
    f = with_columns(NP / "netperf_pkb_tcp_rr_o.txt", tmp_path / "rr_sized.txt", **{
        "Request Size Bytes": "64", "Response Size Bytes": "64", "Elapsed Time (sec)": "60.00",
        "Mean Latency Microseconds": "711.23"})
    [t] = adapt(f).trials
    assert t.point == "tcp/netperf/m64/idle" and t.params["duration"] == 60.0 and t.meta["message_size_from"] == "file"
    rec = t.meta["probes"]["rr_sized.txt"]
    assert rec["mean"] == pytest.approx(711.23 * US) and rec["count"] == round(1405.50 * 60)
    assert rec["window"] == [0.0, 60.0]
    got = {s.metric: s.value for s in t.samples}
    assert got == pytest.approx({"latency.requests": 84330, "latency.rtt_mean": 711.23 * US,
                                 "latency.rtt_max": 900 * US})
    # --io-size never overrides what the file says
    assert adapt(f, io_size=1).trials[0].point == "tcp/netperf/m64/idle"


def test_different_request_and_response_sizes_are_refused(tmp_path):
    f = with_columns(NP / "netperf_pkb_tcp_rr_o.txt", tmp_path / "rr_1_1024.txt",
                     **{"Request Size Bytes": "1", "Response Size Bytes": "1024"})
    with pytest.raises(InputError, match="one size both ways"):
        adapt(f)


def test_tcp_crr_is_not_a_round_trip_of_the_study(tmp_path):
    src = (NP / "netperf_pkb_tcp_rr_o.txt").read_text()
    f = tmp_path / "crr.txt"
    f.write_text(src.replace("MIGRATED TCP REQUEST/RESPONSE TEST", "MIGRATED TCP Connect/Request/Response TEST"))
    with pytest.raises(InputError, match="TCP_CRR opens a connection for every transaction"):
        adapt(f, io_size=1)


def test_several_netperf_processes_of_one_point_keep_only_what_combines_exactly(capsys, tmp_path):
    """Two UDP_RR files without a clock and of the same point are one point
    run together (two probes): a percentile of percentiles is never made;
    the max and the min are exact over both."""
    doc = imp(capsys, tmp_path / "s", "--io-size", "1", NP / "netperf_pkb_udp_rr_o.txt",
              NP / "pkb_netperf_results.txt")
    [run] = doc["runs"]
    assert run["points"] == []                                   # no p99: no headline figure
    assert any("2 netperf processes ran together" in n for n in run["notes"])
    view = load_run(Path(run["run_dir"]))
    [t] = view.trials
    assert isinstance(t, LatencyTrial) and t.status == "ok" and len(t.probes) == 2
    assert t.percentiles == pytest.approx({"max": 9688 * US}) and t.min == pytest.approx(361 * US)
    [p] = view.points
    assert p.per_host["pkb_netperf_results.txt"] == pytest.approx({"p50": 442 * US, "p99": 589 * US})


def test_import_through_the_cli_renders_a_report_without_a_cdf(capsys, tmp_path):
    store = tmp_path / "s"
    code, out, err = nb(capsys, "import", "--store", store, "--io-size", "1", NP / "netperf_pkb_udp_rr_o.txt")
    assert code == 0, err
    assert "-> latency study; the file says 1359.71 trans/s (transactions/s)" in out
    assert "  udp/netperf/m1/idle: p99 RTT (us) 891 (1 repeat)" in out.splitlines()
    doc = imp(capsys, tmp_path / "s2", "--io-size", "1", NP / "netperf_pkb_udp_rr_o.txt")
    prov = doc["files"][0]
    assert (prov["format"], prov["kind"], prov["study"]) == ("netperf-text", "rr", "latency")
    code, out, err = nb(capsys, "report", doc["run_id"], "--store", tmp_path / "s2", "--out", tmp_path / "rep")
    assert code == 0, err
    rep = tmp_path / "rep"
    assert not list(rep.glob("cdf-*")) and list(rep.glob("cost-udp-netperf.*"))
    page = (rep / "index.html").read_text()
    assert "Imported with <code>nicbench import</code>" in page and "netperf (stated)" in page
    assert "so they have no CDF" in page
    [row] = list(csv.DictReader((rep / "points.csv").open()))
    # full precision, seconds
    assert (row["p50_s"], row["p99_s"], row["max_s"], row["min_s"]) == ("0.0007", "0.000891", "0.001", "0.0006")
    assert (row["p999_s"], row["mean_s"], row["percentiles_bound"], row["requests_per_s"]) == \
        ("", "", "stated", "1359.71")
    pj = json.loads((rep / "points.json").read_text())
    probe = pj["trials"][0]["probes"]["netperf_pkb_udp_rr_o.txt"]
    assert probe["count"] is None and probe["sent"] is None and probe["stated"]["stddev_s"] == 808.44 * US


def test_compare_an_imported_netperf_run_with_a_lab_latency_run(capsys, tmp_path):
    """The stored lab run has no netperf point: B's tcp/netperf/m64/idle meets
    A's tcp/sockperf/m64/idle (sockperf, the primary, over iperf2 at the same
    protocol, size and condition), said in one line; lower is better."""
    lab = tmp_path / "lab"
    shutil.copytree(GOLDEN, lab)
    store = tmp_path / "s"
    doc = imp(capsys, store, "--io-size", "64", NP / "netperf_pkb_tcp_rr_o.txt")
    code, out, err = nb(capsys, "compare", lab, doc["run_id"], "--store", store, "--json")
    assert code == 0, err
    cmp = json.loads(out)
    assert cmp["matched"] == [{"a": "tcp/sockperf/m64/idle", "b": "tcp/netperf/m64/idle", "note": (
        "different engines: A sockperf (1000 requests/s, spins (busy-waits on the TSC)), B netperf (back to back "
        "(blocks in recv)); each times its own round trip")}]
    assert [m["metric"] for m in cmp["metrics"]] == ["p99 RTT (us)", "p50 RTT (us)", "p99.9 RTT (us)"]
    assert not any(m["higher_is_better"] for m in cmp["metrics"])
    by = {m["metric"]: {p["point"]: p for p in m["points"]} for m in cmp["metrics"]}
    p99 = by["p99 RTT (us)"]["tcp/sockperf/m64/idle"]
    lab_p99 = LatencyView().compare_values(load_run(lab))[0].values["tcp/sockperf/m64/idle"]
    assert (p99["n_a"], p99["n_b"], p99["median_b"]) == (2, 1, pytest.approx(841))
    assert p99["factor"] == pytest.approx(841 / ((lab_p99[0] + lab_p99[1]) / 2))
    assert by["p50 RTT (us)"]["tcp/sockperf/m64/idle"]["median_b"] == pytest.approx(683)
    assert by["p99.9 RTT (us)"]["tcp/sockperf/m64/idle"]["n_b"] == 0         # not stated: absent, not zero
    assert "tcp/netperf/m64/idle" not in by["p99 RTT (us)"]
    code, out, err = nb(capsys, "compare", lab, doc["run_id"], "--store", store)
    assert code == 0 and "B's tcp/netperf/m64/idle is compared as A's tcp/sockperf/m64/idle" in out


def test_two_netperf_imports_of_one_point_compare_by_name(capsys, tmp_path):
    store = tmp_path / "s"
    a = imp(capsys, store, "--io-size", "1", "--name", "a", NP / "netperf_pkb_udp_rr_o.txt")
    b = imp(capsys, store, "--io-size", "1", "--name", "b", NP / "pkb_netperf_results.txt")
    code, out, err = nb(capsys, "compare", a["run_id"], b["run_id"], "--store", store, "--json")
    assert code == 0, err
    cmp = json.loads(out)
    assert cmp["matched"] == []
    [p] = cmp["points"]
    assert p["point"] == "udp/netperf/m1/idle" and p["factor"] == pytest.approx(589 / 891)
