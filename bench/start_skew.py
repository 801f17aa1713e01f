#!/usr/bin/env python3
"""nbperf's achieved start skew on the seed 000 replay, per IO size.

Runs ``examples/seed000-tcp-multiclient.toml`` with ``engine = "nbperf"``
(zerocopy = sendfile, as the seed's ``-Z``), cut to the IO sizes and
connection count given (default 128K and 512K, 12 connections over the 3
clients, TX/RX/BiDi, 2 repeats), in a lab of its own (``sk000``), and prints
each trial's ``start_skew_s`` -- last minus first first-send over every
connection of every client -- then min / median / max per IO size.  The
issue's goal is < 1 ms between clients in the lab.  Needs root; takes the
shared load lock.

    .venv/bin/python bench/start_skew.py [--io 128K 512K] [--connections 12] [--repeats 2]
"""

from __future__ import annotations

import argparse
import fcntl
import re
import statistics
import tempfile
from pathlib import Path

from nicbench.api import execute
from nicbench.plan import parse_plan
from nicbench.store.reader import open_run_dir

LOCK = "/tmp/nicbench-load.lock"
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "seed000-tcp-multiclient.toml"


def with_key(text: str, key: str, value: str) -> str:
    """``key = value`` in place of the example's line for ``key`` (one must exist)."""
    out, n = re.subn(rf"(?m)^{re.escape(key)}\s*=.*$", f"{key} = {value}", text)
    if n != 1:
        raise SystemExit(f"{EXAMPLE}: expected one '{key} =' line, found {n}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--io", nargs="+", default=["128K", "512K"])
    ap.add_argument("--connections", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    text = EXAMPLE.read_text()
    for key, value in (("engine", '"nbperf"'), ("io_sizes", "[" + ", ".join(f'"{s}"' for s in a.io) + "]"),
                       ("connections", f"[{a.connections}]"), ("repeats", str(a.repeats))):
        text = with_key(text, key, value)
    if text.count('name = "s000"') != 1:
        raise SystemExit(f"{EXAMPLE}: expected the lab's 'name = \"s000\"' line")
    text = text.replace('name = "s000"', 'name = "sk000"')         # a lab of its own
    with open(LOCK, "w") as lock, tempfile.TemporaryDirectory(prefix="nicbench-skew.") as store:
        fcntl.flock(lock, fcntl.LOCK_EX)
        out = execute(parse_plan(text), text, store=Path(store))
        by_io: dict[str, list[float]] = {}
        for t in open_run_dir(out.run_dir).trials():
            skew = t.meta.get("start_skew_s")
            ms = f"{skew * 1e3:.3f} ms" if isinstance(skew, (int, float)) else "none"
            print(f"{t.spec.point:24s} {t.status:8s} start skew {ms}")
            if t.status == "ok" and isinstance(skew, (int, float)):
                size = int(t.spec.params["io_size"])
                by_io.setdefault(f"{size // 1024}K" if size % 1024 == 0 else f"{size}B", []).append(skew * 1e3)
    for io, v in by_io.items():
        print(f"io {io}: {len(v)} trials, start skew min {min(v):.3f} / median {statistics.median(v):.3f} "
              f"/ max {max(v):.3f} ms")


if __name__ == "__main__":
    main()
