"""Every import parser over damaged input raises only nicbench's own errors,
within a bounded time per input (issue 21): truncation at every offset
(sampled for big files), bit flips, NaN/Infinity/1e308, duplicate keys,
10k-deep nesting and a 2 MB line."""

import contextlib
import json
import random
import time
from pathlib import Path

import pytest
from fuzzing import variants

from nicbench.core.errors import NicbenchError
from nicbench.importers import PARSERS, parse_file

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "import"
SEEDS = {  # one real file per format
    "iperf3-json": "iperf3/local/client_udp_gso.json", "iperf3-text": "iperf3-text/ext/cp_text.txt",
    "iperf2-csv": "iperf2/local/server_udp_e.csv", "iperf2-text": "iperf2-text/local/client_tx_p2_e.txt",
    "fio-json": "fio/local/client_server_2hosts.json", "wrk-text": "wrk/ext/wrk2_readme_latency.txt",
    "pktgen-text": "pktgen/ext/pktgen_netmap368_tx.txt", "trafgen-text": None,
    "netperf-text": "netperf/ext/netperf_pkb_udp_rr_o.txt", "sockperf-text": "sockperf/ext/doc_3.5_pp_tcp_m64.txt",
    "irtt-json": "irtt/ext/lens_starlink_0.9.1.json",
    # no --json-stream file from another project: a real -J report's sections as iperf3 3.17 streams them
    "iperf3-json-stream": "stream:iperf3/ext/cp_tx_omit3.json",
    "ntttcp-xml": "ntttcp/ext/pkb_ntttcp_tcp_receiver.xml", "nuttcp-text": "nuttcp/ext/pscheduler_udp_i1.txt",
    "fio-terse": "fio/ext/guide_3.32_rw_terse_normal.txt"}
BOUND = 2.0      # seconds per input, generous for a shared 2-core machine


def seed_text(fmt):
    rel = SEEDS[fmt]
    if rel is not None and rel.startswith("stream:"):
        d = json.loads((ROOT / rel.removeprefix("stream:")).read_text())
        events = [("start", d["start"])] + [("interval", iv) for iv in d["intervals"]] + [("end", d["end"])]
        return "".join(json.dumps({"event": k, "data": v}, separators=(",", ":")) + "\n" for k, v in events)
    if rel is None:
        return (ROOT.parent / "trafgen" / "0.6.8" / "one-cpu.out").read_text()
    return (ROOT / rel).read_text()


def run(fmt, text):
    t0 = time.monotonic()
    with contextlib.suppress(NicbenchError):
        parse_file(text, "fuzz", force=fmt, role="client" if fmt.startswith("iperf2") else None)
    assert time.monotonic() - t0 < BOUND


@pytest.mark.parametrize("fmt", sorted(PARSERS))
def test_parsers_raise_only_nicbench_errors(fmt):
    rng = random.Random(fmt)
    text = seed_text(fmt)
    for v in variants(text, rng):
        run(fmt, v)


def test_detection_over_noise_raises_only_nicbench_errors():
    rng = random.Random(7)
    for fmt in sorted(PARSERS):
        for v in list(variants(seed_text(fmt), rng))[::25]:
            with contextlib.suppress(NicbenchError):
                parse_file(v, "fuzz")
