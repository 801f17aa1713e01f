"""The report from the store alone: ceilings, flags and exports (no lab needed)."""

import csv
import time

import pytest

from nicbench.api import load_run, render
from nicbench.api import rows as table_rows
from nicbench.plan.matrix import point_key
from nicbench.records import RunInfo, Sample, TrialRecord, TrialSpec, make_tags
from nicbench.store.runs import RunWriter


def _store_run(tmp_path, goodputs):
    meta = {"trim": 0.0, "server": "srv",
            "link": {"mtu": 1500, "speed_bps": 1e9, "client_speed_bps": None, "ip": 4,
                     "counters_count_frames": True, "tcp_timestamps": {"srv": 1, "c1": 1}}}
    w = RunWriter.create(tmp_path, RunInfo("r1", "rep", "tcp", time.time(), "", "plan", "0", meta))
    for i, (io, g) in enumerate(goodputs):
        tid = f"t{i}"
        spec = TrialSpec(tid, i, "tcp", point_key("tx", 1, io), 0,
                         {"direction": "tx", "connections": 1, "io_size": io, "engine": "iperf3", "duration": 4.0})
        samples = []
        for k in range(4):
            samples.append(Sample(tid, "tcp.bytes", g * 1e9 / 8, "bytes", k, k + 1,
                                  make_tags(host="c1", proc=5201, direction="tx", side="receiver", omitted=0)))
            it = make_tags(host="srv", ifname="eth0", direction="tx")
            samples.append(Sample(tid, "if.bytes", 81274 * 1514, "bytes", k, k + 1, it))
            samples.append(Sample(tid, "if.packets", 81274, "packets", k, k + 1, it))
        w.write_trial(TrialRecord(spec, "ok", 0, 4, None, {"server": "srv", "layout": [
            {"client": "c1", "port": 5201, "streams": 1}]}), samples, [])
    w.finish("done")
    return load_run(tmp_path / "r1")


def test_every_row_carries_ceiling_percent_and_wire(tmp_path):
    view = _store_run(tmp_path, [(4096, 0.90), (131072, 0.96)])
    rows = {r["io_size"]: r for r in table_rows(view)}
    # full precision in the rows and exports (the HTML rounds)
    assert rows[4096]["ceiling_gbps"] == pytest.approx(0.94148244, abs=1e-8)
    assert rows[4096]["ceiling_bps"] == pytest.approx(0.94148244e9, abs=10)
    assert round(rows[4096]["pct_of_ceiling"], 1) == 95.6 and rows[4096]["pct_of_ceiling"] != 95.6
    assert round(rows[4096]["wire_gbps"], 3) == 1.0 and round(rows[4096]["wire_pct_of_link"], 1) == 100.0
    assert not rows[4096]["above_ceiling"] and rows[131072]["above_ceiling"]
    index = render(view)
    html = index.read_text()
    assert "ceiling 0.941 Gbps of goodput per direction" in html and "TCP timestamps on" in html
    assert ">95.6<" in html
    assert html.count("ABOVE CEILING:") == 1 and "tx/c1/io128K" in html.split("ABOVE CEILING:")[1][:80]
    with open(index.parent / "points.csv") as f:
        got = {r["io_size"]: r for r in csv.DictReader(f)}
    assert got["131072"]["above_ceiling"] == "True" and round(float(got["4096"]["pct_of_ceiling"]), 1) == 95.6
    assert float(got["4096"]["bps_median"]) == pytest.approx(rows[4096]["gbps_median"] * 1e9)
    assert (index.parent / "throughput-tx.svg").stat().st_size > 0
