#!/usr/bin/env python3
"""How long do N processes take to all start when woken at one instant?

No SSH, no lab: N bash shells each wait for one start time -- with the gate's
own ``read -t`` (default), ``sleep``, or ``read -t`` and an exec -- then stamp
``$EPOCHREALTIME`` and run ``sleep 0.5``.  Prints the spread of the stamps.
This is the floor under bench/ssh_scale.py's start skew on this machine: on
2 vCPUs, 16 simultaneous wake-ups take milliseconds to all run.

    python3 bench/wake_herd.py [--n 16] [--repeats 3]
"""

from __future__ import annotations

import argparse
import subprocess
import time

WAIT = {
    "read-t": 'IFS= read -r -t "$(( d / 1000000 )).$(printf %06d $(( d % 1000000 )))" _',
    "sleep": 'sleep "$(( d / 1000000 )).$(printf %06d $(( d % 1000000 )))"',
}


def spread(n: int, wait: str, exec_tool: bool) -> float:
    shim = ('IFS= read -r t; d=$(( t - ${EPOCHREALTIME/[.,]/} )); if (( d > 0 )); then ' + WAIT[wait] + '; fi; '
            'printf "S %s\\n" "$EPOCHREALTIME" >&2; ' + ('exec "$@"' if exec_tool else '"$@"'))
    ps = [subprocess.Popen(["bash", "-c", shim, "herd", "sleep", "0.5"], stdin=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True) for _ in range(n)]
    time.sleep(0.3)
    t = int((time.time() + 0.1) * 1e6)
    for p in ps:
        assert p.stdin is not None
        p.stdin.write(f"{t}\n")
        p.stdin.flush()                  # stdin stays open: EOF would end read -t early
    for p in ps:
        p.wait(10)
    stamps = []
    for p in ps:
        assert p.stderr is not None and p.stdin is not None
        stamps.append(float(p.stderr.read().split("S ")[1].split()[0]))
        p.stdin.close()
    return (max(stamps) - min(stamps)) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[3, 16])
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    print("| processes | wait | tool | spread ms (each repeat) |")
    print("|---|---|---|---|")
    for n in a.n:
        for wait, ex in (("read-t", False), ("read-t", True), ("sleep", False)):
            runs = [spread(n, wait, ex) for _ in range(a.repeats)]
            print(f"| {n} | {wait} | {'exec' if ex else 'fork'} | {', '.join(f'{x:.2f}' for x in runs)} |")


if __name__ == "__main__":
    main()
