"""CPU sampled during a real TCP point agrees with an independent /proc/stat reader (root)."""

from __future__ import annotations

import os
import threading
import time

import pytest
from helpers import plan_text

from nicbench.api import execute, load_run
from nicbench.plan import parse_plan
from nicbench.sampling.procstat import BUSY, STATES, parse_proc_stat

pytestmark = pytest.mark.lab


def test_point_cpu_agrees_with_an_independent_reader(tmp_path):
    reads: list[tuple[float, dict]] = []
    stop = threading.Event()

    def reader():
        while not stop.is_set():
            t0 = time.time()
            s = parse_proc_stat(open("/proc/stat").read())
            reads.append(((t0 + time.time()) / 2, s))
            stop.wait(0.05)

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    text = plan_text("cpu", "e2ep", clients=1, io_sizes=("128K",), connections=(2,), duration=3, omit=1)
    try:
        out = execute(parse_plan(text), text, store=tmp_path)
    finally:
        stop.set()
        th.join()
    [t] = load_run(out.run_dir).trials
    assert t.cpu is not None and t.cpu.cpus == os.cpu_count()
    w0, w1 = t.cpu.window
    a = min(reads, key=lambda r: abs(r[0] - w0))
    b = min(reads, key=lambda r: abs(r[0] - w1))
    # how near the window's ends this reader's reads fell is this machine's scheduling (its
    # thread sleeps 50 ms between reads): the tolerance below grows by what they missed
    off = abs(a[0] - w0) + abs(b[0] - w1)
    cores = 0.0
    for cpu in (c for c in b[1] if c != "all"):
        d = {k: b[1][cpu].ticks[k] - a[1][cpu].ticks[k] for k in STATES}
        total = sum(d.values())
        cores += sum(d[k] for k in BUSY) / total
    # the same window read independently: same cores busy within a tenth of a core, plus
    # every CPU busy for the time the reads missed the window by (at most)
    tol = 0.1 + off / (w1 - w0) * os.cpu_count()
    assert t.cpu.cores_busy == pytest.approx(cores, abs=tol), (t.cpu.cores_busy, cores, off)
    assert 0.2 < t.cpu.cores_busy <= os.cpu_count() + 0.01
    assert any(k.startswith("engine-client") for k in t.cpu.tools)
    assert any(k.startswith("engine-server") for k in t.cpu.tools)
