#!/usr/bin/env python3
"""How the archive and its dashboard hold up with 10,000 runs, on SQLite and
on PostgreSQL 15 (a throwaway server, as in the tests; needs root).

Synthesizes N runs shaped like TCP sweeps (36 points, one trial each,
``--samples`` samples per trial: sampled down from a real sweep's ~40k per
point, which would make 14 billion rows; the per-point figures every query
here reads are full size: 36 points x 15 metrics per run), then times:

- the runs page (``nicbench serve`` in its own process): server time from
  its Server-Timing header and wall time, first page, a deep page, a label
  filter (goal < 300 ms server time);
- a trend over every run (``Archive.trend`` for one metric at one point,
  and the trend page) (goal < 1 s);
- ``archive add`` of one realistic run directory of an older nicbench: 36
  points x 40,000 samples (1.44 million rows);
- the dashboard's memory (VmRSS and VmHWM of the serve process after the pages).

    .venv/bin/python bench/archive_scale.py [--runs 10000] [--samples 20] [--backend sqlite --backend postgresql]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from archive_synth import seed  # noqa: E402 - the tests' synthesizer, shared
from nicbench.records import RunInfo, Sample, TrialRecord, TrialSpec, make_tags  # noqa: E402
from nicbench.store.archive import Archive, RunFilter  # noqa: E402
from nicbench.store.location import StoreLocation, parse_store  # noqa: E402
from nicbench.store.runs import RunWriter as LegacyWriter  # noqa: E402
from nicbench.store.transfer import add_legacy  # noqa: E402
from pgserver import start_server  # noqa: E402


def get(url: str) -> tuple[float, float, int]:
    """(server ms from Server-Timing, wall ms, bytes) of one GET."""
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as r:
        body = r.read()
        timing = r.headers.get("server-timing", "")
    wall = (time.perf_counter() - t0) * 1000
    server = float(timing.split("dur=")[1]) if "dur=" in timing else float("nan")
    return server, wall, len(body)


def page_stats(url: str, n: int) -> dict[str, float]:
    get(url)                                  # warm: first connection, caches
    got = [get(url) for _ in range(n)]
    servers = sorted(g[0] for g in got)
    return {"server_ms_median": statistics.median(servers), "server_ms_max": servers[-1],
            "wall_ms_median": statistics.median(g[1] for g in got), "kbytes": got[0][2] / 1024}


def proc_mem(pid: int) -> dict[str, float]:
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("VmRSS", "VmHWM")):
            k, v = line.split(":")
            out[k + "_MiB"] = int(v.split()[0]) / 1024
    return out


def legacy_run(d: Path, points: int = 36, per_point: int = 40000) -> Path:
    """A run directory of an older nicbench (its own results.sqlite) of realistic size."""
    info = RunInfo("20250101-000000-big-00000001", "big", "tcp", time.time(), 'name = "big"\n', "plan", "0",
                   {"trim": 0.25})
    w = LegacyWriter.create(d, info)
    for k in range(points):
        tid = f"t{k + 1:04d}"
        spec = TrialSpec(tid, k, "tcp", f"tx/c{k % 3 + 1}/io{4 << (k % 4)}K", 0, {"direction": "tx"})
        samples = [Sample(tid, "tcp.bytes", 1e6 + i, "bytes", 1e9 + i * 0.01, 1e9 + i * 0.01 + 0.01,
                          make_tags(host=f"c{i % 3 + 1}", proc=i % 8, side="receiver", direction="tx"))
                   for i in range(per_point)]
        w.write_trial(TrialRecord(spec, "ok", 1e9, 1e9 + 10), samples, [])
    w.finish("done")
    return w.run_dir


def bench(loc: StoreLocation, runs: int, samples: int, legacy: Path, work: Path) -> dict[str, object]:
    res: dict[str, object] = {"backend": loc.kind, "runs": runs, "samples_per_trial": samples}
    a = Archive.open(loc)
    t0 = time.perf_counter()
    seed(a, runs, samples=samples)
    res["seed_s"] = round(time.perf_counter() - t0, 1)
    n = a.db.one("SELECT COUNT(*) FROM samples")
    res["sample_rows"] = int(n[0]) if n else 0
    t0 = time.perf_counter()
    rows = a.trend("gbps", ["tx/c1/io4K"])
    res["trend_query_s"] = round(time.perf_counter() - t0, 3)
    assert len(rows) == runs
    t0 = time.perf_counter()
    a.runs(RunFilter(kernel="6.3*"), limit=50)
    a.count(RunFilter(kernel="6.3*"))
    res["runs_query_filtered_s"] = round(time.perf_counter() - t0, 3)
    t0 = time.perf_counter()
    got = add_legacy(a, legacy)
    res["archive_add_1_44M_samples_s"] = round(time.perf_counter() - t0, 1)
    assert got.outcome == "added" and got.samples == 36 * 40000, got
    a.close()
    env = dict(os.environ)
    p = subprocess.Popen([sys.executable, "-m", "nicbench.cli.main", "serve", "--store", loc.url, "--port", "0",
                          "--cache", str(work / "cache")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env, start_new_session=True)
    try:
        assert p.stdout is not None
        url = p.stdout.readline().split(" on ", 1)[1].strip().rstrip("/")
        res["runs_page_first"] = page_stats(url + "/", 20)
        res["runs_page_deep"] = page_stats(url + "/?page=150", 10)
        res["runs_page_filtered"] = page_stats(url + "/?kernel=6.2*&tag=build-150", 10)   # 50 runs match
        # each filter of the runs page (the CLI's `runs` filters), alone, then all at once, and a deep filtered page
        since = time.strftime("%Y-%m-%d", time.localtime(time.time() - runs * 3600 / 2))
        for name, q in (("study", "study=tcp"), ("plan", "plan=synth-sweep-3"), ("host", "host=c2"),
                        ("kernel", "kernel=6.3*"), ("driver", "driver=veth"), ("tag", "tag=build-150"),
                        ("status", "status=done"), ("since", f"since={since}"),
                        ("all", f"study=tcp&plan=synth-sweep-3&host=c2&kernel=6.3*&driver=veth&tag=synthetic"
                                f"&status=done&since={since}"),
                        ("plan_page_30", "plan=synth-sweep-3&page=30")):
            res[f"runs_page_filter_{name}"] = page_stats(f"{url}/?{q}", 10)
        res["trend_page_all_runs"] = page_stats(url + "/trend?metric=gbps&point=tx/c1/io4K&study=tcp", 3)
        res["trend_page_last_60"] = page_stats(url + "/trend?metric=gbps&point=tx/c1/io4K&study=tcp&last=60", 10)
        res["dashboard_memory"] = proc_mem(p.pid)
    finally:
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=30)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "nicbench.cli.main", "trend", "gbps", "--point", "tx/c1/io4K",
                        "--store", loc.url, "--check"], capture_output=True, text=True, env=env, timeout=300)
    res["cli_trend_check_s"] = round(time.perf_counter() - t0, 2)
    res["cli_trend_exit"] = r.returncode
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--samples", type=int, default=20, help="samples per trial of the synthetic runs")
    ap.add_argument("--backend", action="append", choices=["sqlite", "postgresql"])
    args = ap.parse_args()
    backends = args.backend or ["sqlite", "postgresql"]
    work = Path(tempfile.mkdtemp(prefix="nbE-scale-"))
    results = []
    try:
        t0 = time.perf_counter()
        legacy = legacy_run(work / "legacy")
        print(f"older run directory of 36 x 40,000 samples written in {time.perf_counter() - t0:.1f} s",
              file=sys.stderr)
        for b in backends:
            if b == "sqlite":
                results.append(bench(parse_store(work / "sqlite"), args.runs, args.samples, legacy, work))
            else:
                srv = start_server()
                try:
                    os.environ["NICBENCH_RUNS"] = str(work / "pg-runs")
                    os.environ["PGPASSWORD"] = srv.password
                    loc = parse_store(srv.url(srv.create_db()))
                    results.append(bench(loc, args.runs, args.samples, legacy, work))
                finally:
                    srv.remove()
            print(json.dumps(results[-1], indent=1), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
