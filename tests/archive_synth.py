"""Synthetic runs for the archive's scale tests and benchmark (never shown
as measurements: their names start with ``synth`` and their tag is
``synthetic``).

Each run is shaped like a TCP sweep: 36 points (3 directions x 3 connection
counts x 4 IO sizes), one trial each, ``samples`` samples per trial, facts
of 4 hosts, and the per-point figures the TCP view stores.  Values follow a
slow drift by "driver build" with noise, so trends have something to show.
"""

from __future__ import annotations

import json
import random
import time
from typing import Any

from nicbench.store.archive import Archive
from nicbench.store.writer import FACT_COLS, SAMPLE_COLS, TRIAL_COLS

DIRS = ("tx", "rx", "bidir")
CONNS = (1, 4, 12)
IOS = (4096, 65536, 131072, 524288)
METRICS = ("gbps", "gbps_min", "gbps_max", "gbps_stdev", "tx_gbps", "rx_gbps", "sender_gbps", "pct_of_ceiling",
           "wire_gbps", "cores_busy", "cpu_pct", "gbps_per_core", "cpu_s_per_gb", "retransmits", "drops")
HOSTS = (("srv", "server"), ("c1", "client"), ("c2", "client"), ("c3", "client"))


def _key(d: str, c: int, io: int) -> str:
    return f"{d}/c{c}/io{io // 1024}K"


POINTS = [(_key(d, c, io), {"direction": d, "connections": c, "io_size": io, "engine": "iperf3"})
          for d in DIRS for c in CONNS for io in IOS]


def seed(archive: Archive, n: int, *, samples: int = 20, start: float | None = None, batch: int = 200,
         rng_seed: int = 7, drop_last: float | None = None, metrics: tuple[str, ...] = METRICS) -> list[str]:
    """``n`` synthetic runs, one hour apart, into ``archive``; their ids.
    ``drop_last``: the newest run's values times this (a regression to find);
    ``metrics``: which per-point figures to store (the first must be gbps)."""
    rng = random.Random(rng_seed)
    t0 = start if start is not None else time.time() - n * 3600.0
    ids: list[str] = []
    db = archive.db
    for b in range(0, n, batch):
        with db.transaction():
            for i in range(b, min(n, b + batch)):
                created = t0 + i * 3600.0
                run_id = time.strftime("%Y%m%d-%H%M%S", time.localtime(created)) + f"-synth-{i:06d}"
                build = 100 + i // 50
                kernel = f"6.{1 + i // 2000}.{i % 7}"
                db.execute(
                    "INSERT INTO runs (run_id, name, study, source, created, finished, heartbeat, status, visible, "
                    "nicbench_version, plan_text, info_meta, extra, run_dir, machine, boot_id, pid, pid_start, "
                    "trials_total, trials_done, trials_ok, trials_failed) VALUES "
                    "(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (run_id, f"synth-sweep-{i % 5}", "tcp", "plan", created, created + 600, created + 600, "done", 1,
                     "synthetic", 'name = "synth"\n', json.dumps({"trim": 0.25, "clients": ["c1", "c2", "c3"]}),
                     "{}", f"/nonexistent/synthetic/{run_id}", "synthetic", "", None, None, 36, 36, 36, 0))
                row = db.one("SELECT rid FROM runs WHERE run_id = ?", (run_id,))
                assert row is not None
                rid = int(row[0])
                scale = 1.0 + 0.002 * (build - 100) + rng.gauss(0, 0.01)
                if drop_last is not None and i == n - 1:
                    scale *= drop_last
                trials, srows, pvals, pts = [], [], [], []
                for k, (point, params) in enumerate(POINTS):
                    tid = f"t{k + 1:04d}"
                    base = 2.0 + 14.0 * min(1.0, params["io_size"] / 131072) * (1 + 0.2 * (params["connections"] > 1))
                    g = base * scale
                    trials.append((rid, tid, k, point, 0, json.dumps(params, sort_keys=True), "ok", created + k * 10,
                                   created + k * 10 + 8, None, "{}"))
                    for s in range(samples):
                        t = created + k * 10 + s * 8.0 / samples
                        srows.append((rid, tid, s, "tcp.bytes", g * 1e9 / 8 * (8.0 / samples), "bytes", t,
                                      t + 8.0 / samples, json.dumps({"host": f"c{1 + s % 3}", "side": "receiver"})))
                    vals = {m: g * (1 + 0.01 * j) for j, m in enumerate(metrics)}
                    pvals += [(m, point, rid, v) for m, v in vals.items()]
                    pts.append((rid, point, json.dumps(params, sort_keys=True), 1, 0))
                db.copy_in("trials", TRIAL_COLS, trials)
                db.copy_in("samples", SAMPLE_COLS, srows)
                db.copy_in("facts", FACT_COLS, [
                    (rid, h, key, j * 10 + q, role, created, json.dumps(v), None, "synthetic")
                    for j, (h, role) in enumerate(HOSTS)
                    for q, (key, v) in enumerate([("kernel", kernel), ("if.eth0.driver", "veth"),
                                                  ("if.eth0.driver_version", f"1.{build}"), ("cpu.count", 2)])])
                archive.add_labels(rid, [("host", h) for h, _ in HOSTS] + [("kernel", kernel), ("driver", "veth"),
                                                                           ("tag", "synthetic"),
                                                                           ("tag", f"build-{build}")])
                db.copy_in("points", ("rid", "point", "params", "n_ok", "n_failed"), pts)
                db.copy_in("point_values", ("metric", "point", "rid", "value"), pvals)
                gbps = {pp: v for m, pp, _r, v in pvals if m == "gbps"}
                best = max(gbps, key=lambda p: gbps[p])
                db.execute("UPDATE runs SET headline_metric = 'gbps', headline_value = ?, headline_point = ?, "
                           "summary_version = 'synthetic' WHERE rid = ?", (gbps[best], best, rid))
                ids.append(run_id)
    return ids


def info() -> dict[str, Any]:
    return {"points": len(POINTS), "metrics": len(METRICS), "hosts": len(HOSTS)}
