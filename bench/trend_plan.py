#!/usr/bin/env python3
"""A whole plan's change-point check over an archive of 10,000 runs, on
SQLite and on PostgreSQL 15 (a throwaway server, as in the tests; needs
root).  Goal: under 5 s for the 36 points of one plan.

The archive is the scale tests' synthetic one (tests/archive_synth.py: TCP
sweeps of 36 points, 5 plans taking turns, a slow drift by driver build,
facts of 4 hosts per run).  Timed, each as a user runs it (a new process,
imports included) and as the dashboard would call it (``plan_trend`` in
an open archive):

- ``nicbench trend --plan synth-sweep-0 --check --junit F``: one plan's
  2,000 runs (under the default --last 1000: its newest 1,000);
- the same with ``--last 2000``: every run of the plan;
- with ``--uncapped``, ``--plan 'synth-sweep-*' --last 10000``: all 10,000
  runs as one series per point (PELT is quadratic: about a second a point).

    .venv/bin/python bench/trend_plan.py [--runs 10000] [--backend sqlite --backend postgresql] [--uncapped]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from archive_synth import seed  # noqa: E402 - the tests' synthesizer, shared
from nicbench.registry import VIEWS  # noqa: E402
from nicbench.report.regressions import plan_trend  # noqa: E402
from nicbench.store.archive import Archive, RunFilter  # noqa: E402
from nicbench.store.location import StoreLocation, parse_store  # noqa: E402
from pgserver import start_server  # noqa: E402

# (label, --plan, --last, times run): the uncapped 10,000-run case once (PELT is quadratic: ~1 s a point)
CASES = (("one plan, default --last", "synth-sweep-0", None, 3),
         ("one plan, every run", "synth-sweep-0", 2000, 3),
         ("every plan as one, 10,000 runs", "synth-sweep-*", 10000, 1))


def cli(loc: StoreLocation, plan: str, last: int | None, junit: Path) -> tuple[float, int, dict[str, object]]:
    argv = [sys.executable, "-m", "nicbench.cli.main", "trend", "--plan", plan, "--check", "--junit", str(junit),
            "--json", "--store", loc.url] + (["--last", str(last)] if last else [])
    t0 = time.perf_counter()
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    wall = time.perf_counter() - t0
    doc, _ = json.JSONDecoder().raw_decode(r.stdout)
    return wall, r.returncode, doc


def bench(loc: StoreLocation, runs: int, work: Path, uncapped: bool) -> dict[str, object]:
    res: dict[str, object] = {"backend": loc.kind, "runs": runs}
    a = Archive.open(loc)
    t0 = time.perf_counter()
    seed(a, runs, samples=1)
    res["seed_s"] = round(time.perf_counter() - t0, 1)
    metric = VIEWS["tcp"].metrics[0]
    for label, plan, last, times in CASES[:None if uncapped else 2]:
        walls, codes = [], set()
        doc: dict[str, object] = {}
        for _ in range(times):
            wall, code, doc = cli(loc, plan, last, work / "junit.xml")
            walls.append(wall)
            codes.add(code)
        t0 = time.perf_counter()
        t = plan_trend(a, metric, "tcp", RunFilter(name=plan), last_runs=last or 1000)
        inproc = time.perf_counter() - t0
        res[label] = {"cli_s_median": round(statistics.median(walls), 2), "cli_s_max": round(max(walls), 2),
                      "plan_trend_s": round(inproc, 2), "exit_codes": sorted(codes), "runs_read": doc["runs"],
                      "points": len(t.points), "change_points": t.changepoints, "flagged": len(t.flagged)}
    a.close()
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=10000)
    ap.add_argument("--backend", action="append", choices=["sqlite", "postgresql"])
    ap.add_argument("--uncapped", action="store_true", help="also every plan's 10,000 runs as one series")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="nb-trendplan-"))
    try:
        for b in args.backend or ["sqlite", "postgresql"]:
            if b == "sqlite":
                res = bench(parse_store(work / "sqlite"), args.runs, work, args.uncapped)
            else:
                srv = start_server()
                try:
                    os.environ["NICBENCH_RUNS"] = str(work / "pg-runs")
                    os.environ["PGPASSWORD"] = srv.password
                    res = bench(parse_store(srv.url(srv.create_db())), args.runs, work, args.uncapped)
                finally:
                    srv.remove()
            print(json.dumps(res, indent=1), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
