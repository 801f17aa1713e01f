"""The parsers of the tools nicbench runs, over damaged output: only nicbench's
own errors, in bounded time (issue 21).  A parser that raised anything else used
to take the point down as an "internal error"; worse, one that returned a
number from damaged output would record it.  Each seed is a real recorded
output of the tool (tests/fixtures/<tool>/<version>/, see capture scripts)."""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fuzzing import variants

from nicbench.core.errors import NicbenchError
from nicbench.tools import bounceback, fio, iperf2, iperf3, irtt, iscsi_perf, nbgen, pktgen, sockperf, trafgen, wrk

FIX = Path(__file__).resolve().parents[1] / "fixtures"
BOUND = 2.0      # seconds per input, generous for a shared 2-core machine

PARSERS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "iperf3": ("iperf3/3.12/bidir_p2.json", iperf3.parse),
    "iperf3-udp": ("iperf3/3.12/udp.json", iperf3.parse),
    "iperf2-client": ("iperf2/2.1.8/client_tx_p2.csv", lambda t: iperf2.parse(t, role="client")),
    "iperf2-server": ("iperf2/2.1.8/server_udp.csv", lambda t: iperf2.parse(t, role="server")),
    "fio": ("fio/3.33/nbd_randrw_numjobs2_status_interval.json", fio.parse),
    "fio-documents": ("fio/3.33/nbd_read_status_interval.json", lambda t: fio.final_document(t)),
    "wrk": ("wrk/4.1.0/https_ok.txt", wrk.parse),
    "wrk-text": ("wrk/4.1.0/https_ok.txt", wrk.parse_text),
    "sockperf-full-log": ("sockperf/3.7/pp_udp_m64_mps1000.csv", sockperf.parse_full_log),
    "sockperf-summary": ("sockperf/3.7/pp_udp_m64_mps1000.out", sockperf.parse_summary),
    "bounceback": ("iperf2/2.1.8/bounceback/client_l64_period1ms.txt", bounceback.parse),
    "irtt": ("irtt/0.9.0/udp_l64_i10ms.json", irtt.parse),
    "nbgen-tx": ("nbgen/1.0.0/tx-rate.out", nbgen.parse_tx),
    "nbgen-rx": ("nbgen/1.0.0/rx-generic-lo.out", nbgen.parse_rx),
    "trafgen": ("trafgen/0.6.8/two-cpus.out", trafgen.parse),
    # recorded by others (netmap issues #368, #102: import/pktgen/ext, SOURCES.md): no netmap here
    "pkt-gen-tx": ("import/pktgen/ext/pktgen_netmap368_tx.txt",
                   lambda t: pktgen.parse_run("", t, near=1_763_884_801.0, where="tx")),
    "pkt-gen-rx": ("import/pktgen/ext/pktgen_netmap102_rx.txt",
                   lambda t: pktgen.parse_run(t, "", near=1_763_884_801.0, where="rx")),
    "iscsi-perf": ("iscsi-perf/0.1/seq_read_4k_m16.txt", iscsi_perf.parse),
}


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_tool_parsers_raise_only_nicbench_errors_in_bounded_time(name):
    rel, parse = PARSERS[name]
    text = (FIX / rel).read_text()
    parse(text)                                     # the undamaged seed parses
    rng = random.Random(name)
    for v in variants(text, rng, cuts=100, flips=40):
        t0 = time.monotonic()
        with contextlib.suppress(NicbenchError):
            parse(v)
        assert time.monotonic() - t0 < BOUND, (name, len(v), v[:80])
