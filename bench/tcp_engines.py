#!/usr/bin/env python3
"""nbperf vs iperf3 3.12 (-Z) vs iperf 2.1.8: Gbps per busy core on one lab path, side by side.

Builds a server and three clients on a bridge (namespaces ``nbB-bt-*``,
10.202.0.0/24, MTU 1500, unshaped), then runs the same point -- the three
clients sending to the server, 4 connections each (12 in all), ``--seconds``
long, for each IO size -- with every engine in turn, the order rotated each
round, ``--pairs`` rounds:

- nbperf, receiver copying (``--recv copy``) and discarding (``--recv trunc``,
  MSG_TRUNC: iperf3 >= 3.16's ``--skip-rx-copy``); one server process, one
  client process per client host;
- iperf3 3.12 with ``-Z`` (sendfile): one server per client (3.12 serves one
  test at a time), ``-P 4``;
- iperf 2.1.8: one server per client, ``-P 4``.

Per run: aggregate Gbps = every receiver's payload bytes after the first
second / the time they span (each engine's own receiver intervals); busy
cores = the machine's busy CPU time (/proc/stat, every CPU: senders,
receivers and the kernel share this machine) over a window inside the steady
part / that window, less the user and system time of other people's programs
on this shared machine (processes outside the lab's namespaces; both figures
are printed); and Gbps per busy core.  Prints every run, then medians
(and min-max) per engine and IO size, and nbperf / iperf3.  ``--perf`` adds
one ``perf record -e cpu-clock -a`` run per engine at the first IO size and
prints where the CPU time went.  Needs root; takes the shared load lock.

    .venv/bin/python bench/tcp_engines.py [--pairs 3] [--seconds 5] [--io 128K 512] [--perf]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import cast

from nicbench.tools import iperf2, nbperf

LOCK = "/tmp/nicbench-load.lock"
PREFIX = "nbB-bt"
SUBNET = "10.202.0"
CLIENTS = ("c1", "c2", "c3")
PER_CLIENT = 4
ENGINES = ("nbperf-trunc", "nbperf-copy", "iperf3", "iperf2")


def sh(*args: str) -> None:
    r = subprocess.run(list(args), capture_output=True, text=True, timeout=30)
    if r.returncode:
        raise SystemExit(f"{' '.join(args)}: {r.stderr.strip()}")


def ns(host: str) -> str:
    return f"{PREFIX}-{host}"


def ip_of(host: str) -> str:
    return f"{SUBNET}.{1 + ('srv', *CLIENTS).index(host)}"


def lab_down() -> None:
    for h in ("sw", "srv", *CLIENTS):
        r = subprocess.run(["ip", "netns", "pids", ns(h)], capture_output=True, text=True)
        for pid in r.stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        subprocess.run(["ip", "netns", "del", ns(h)], capture_output=True)


def lab_up() -> None:
    """The embedded lab's shape (lab/topology.py): a bridge in its own namespace, one veth per host."""
    lab_down()
    sw = ns("sw")
    sh("ip", "netns", "add", sw)
    sh("ip", "-n", sw, "link", "add", "br0", "type", "bridge", "stp_state", "0")
    sh("ip", "-n", sw, "link", "set", "lo", "up")
    for h in ("srv", *CLIENTS):
        sh("ip", "netns", "add", ns(h))
        sh("ip", "link", "add", "eth0", "netns", ns(h), "type", "veth", "peer", "name", f"p-{h}", "netns", sw)
        sh("ip", "-n", sw, "link", "set", f"p-{h}", "mtu", "1500", "master", "br0", "up")
        sh("ip", "-n", ns(h), "link", "set", "lo", "up")
        sh("ip", "-n", ns(h), "link", "set", "eth0", "mtu", "1500", "up")
        sh("ip", "-n", ns(h), "addr", "add", f"{ip_of(h)}/24", "dev", "eth0")
    sh("ip", "-n", sw, "link", "set", "br0", "up")
    for knob in ("iptables", "ip6tables", "arptables"):
        subprocess.run(["ip", "netns", "exec", sw, "sysctl", "-qw", f"net.bridge.bridge-nf-call-{knob}=0"],
                       capture_output=True)
    for h in CLIENTS:
        sh("ip", "netns", "exec", ns(h), "ping", "-c", "1", "-W", "2", ip_of("srv"))


def proc_stat() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v[:8]) - idle, sum(v[:8])


def others() -> dict[int, int]:
    """utime + stime jiffies of every user-space process outside this lab's
    namespaces: other people's programs on this shared machine (kernel
    threads stay counted: ksoftirqd and kworkers carry the test's packets)."""
    ours = set()
    for h in ("sw", "srv", *CLIENTS):
        with contextlib.suppress(OSError):
            ours.add(os.stat(f"/run/netns/{ns(h)}").st_ino)
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            if os.stat(f"/proc/{d}/ns/net").st_ino in ours:
                continue
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[6]) & 0x00200000:        # PF_KTHREAD
            continue
        out[int(d)] = int(fields[11]) + int(fields[12])
    return out


def sleep_until(t: float) -> None:
    left = t - time.time()
    if left > 0:
        time.sleep(left)


def cpu_window(t0: float, seconds: float) -> tuple[float, float]:
    """Busy cores over [t0 + 1.5, t0 + seconds - 0.3] (wall clock): (the whole
    machine's, the machine's less other programs')."""
    sleep_until(t0 + 1.5)
    o0, (b0, a0) = others(), proc_stat()
    sleep_until(t0 + seconds - 0.3)
    o1, (b1, a1) = others(), proc_stat()
    theirs = sum(v - o0.get(pid, 0) for pid, v in o1.items())
    ncpu = os.cpu_count() or 1
    return (b1 - b0) / (a1 - a0) * ncpu, (b1 - b0 - theirs) / (a1 - a0) * ncpu


def spawn(host: str, argv: list[str], out: Path) -> subprocess.Popen:
    return subprocess.Popen(["ip", "netns", "exec", ns(host), *argv], stdout=open(out, "w"),
                            stderr=subprocess.STDOUT if out.suffix == ".json" else open(out.with_suffix(".err"), "w"))


def wait_all(procs: list[subprocess.Popen], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for p in procs:
        try:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            raise SystemExit(f"{p.args!r} did not stop in time") from None


def run_nbperf(io: int, seconds: float, recv: nbperf.RecvMode, send: nbperf.SendMode,
               tmp: Path) -> tuple[float, tuple[float, float]]:
    exe = nbperf.binary()
    assert exe
    srv = spawn("srv", nbperf.server_argv(exe, port=5301, lifetime=seconds + 20, clients=len(CLIENTS)),
                tmp / "nb-srv.out")
    time.sleep(0.3)
    start = time.time() + 1.0
    clis = [spawn(h, nbperf.client_argv(exe, server=ip_of("srv"), port=5301, start=start, duration=seconds,
                                        conns=PER_CLIENT, io_size=io, recv=recv, send=send, test=h),
                  tmp / f"nb-{h}.out") for h in CLIENTS]
    busy = cpu_window(start, seconds)
    wait_all(clis + [srv], seconds + 20)
    s = nbperf.parse_server((tmp / "nb-srv.out").read_text(), (tmp / "nb-srv.err").read_text())
    gbps = 0.0
    for h in CLIENTS:
        c = nbperf.parse_client((tmp / f"nb-{h}.out").read_text(), (tmp / f"nb-{h}.err").read_text())
        kept = [x for x in nbperf.receiver_samples(c, s) if x.t0 >= c.start + 1 - 1e-6 and x.t1 <= c.start
                + seconds + 0.01]
        gbps += sum(x.rx_bytes for x in kept) * 8 / (max(x.t1 for x in kept) - (c.start + 1)) / 1e9
    return gbps, busy


def run_iperf3(io: int, seconds: float, tmp: Path) -> tuple[float, tuple[float, float]]:
    srvs = [spawn("srv", ["iperf3", "-s", "-1", "-p", str(5201 + i)], tmp / f"i3-srv{i}.txt")
            for i in range(len(CLIENTS))]
    time.sleep(0.3)
    t0 = time.time()
    clis = [spawn(h, ["iperf3", "-c", ip_of("srv"), "-p", str(5201 + i), "-t", f"{seconds - 1:g}", "-O", "1",
                      "-P", str(PER_CLIENT), "-l", str(io), "-Z", "-J"], tmp / f"i3-{h}.json")
            for i, h in enumerate(CLIENTS)]
    busy = cpu_window(t0, seconds)
    wait_all(clis + srvs, seconds + 20)
    gbps = 0.0
    for h in CLIENTS:
        data = json.loads((tmp / f"i3-{h}.json").read_text())
        if "error" in data:
            raise SystemExit(f"iperf3 on {h}: {data['error']}")
        gbps += data["end"]["sum_received"]["bits_per_second"] / 1e9    # -O 1: the first second is not in it
    return gbps, busy


def run_iperf2(io: int, seconds: float, tmp: Path) -> tuple[float, tuple[float, float]]:
    srvs = [spawn("srv", iperf2.server_argv(port=5001 + i, interval=1, io_size=io, lifetime=seconds + 5),
                  tmp / f"i2-srv{i}.csv") for i in range(len(CLIENTS))]
    time.sleep(0.3)
    t0 = time.time()
    clis = [spawn(h, iperf2.client_argv(target=ip_of("srv"), port=5001 + i, duration=seconds - 1, omit=1, interval=1,
                                        io_size=io, streams=PER_CLIENT, mode="fwd"), tmp / f"i2-{h}.csv")
            for i, h in enumerate(CLIENTS)]
    busy = cpu_window(t0, seconds)
    wait_all(clis, seconds + 20)
    for p in srvs:
        p.send_signal(signal.SIGINT)
    wait_all(srvs, 10)
    gbps = 0.0
    for i in range(len(CLIENTS)):
        rep = iperf2.parse((tmp / f"i2-srv{i}.csv").read_text(), role="server", omit=1.0, server_port=5001 + i)
        kept = [iv for iv in rep.intervals if iv.side == "receiver" and not iv.omitted]
        gbps += sum(iv.bytes for iv in kept) * 8 / sum(iv.end - iv.start for iv in kept) / 1e9
    return gbps, busy


def one_run(engine: str, io: int, seconds: float, send: str, tmp: Path) -> dict:
    if send == "auto":
        send = "sendfile" if io >= 65536 else "send"
    if engine.startswith("nbperf"):
        gbps, busy = run_nbperf(io, seconds, cast(nbperf.RecvMode, engine.split("-")[1]),
                                cast(nbperf.SendMode, send), tmp)
    elif engine == "iperf3":
        gbps, busy = run_iperf3(io, seconds, tmp)
    else:
        gbps, busy = run_iperf2(io, seconds, tmp)
    return {"engine": engine, "io": io, "gbps": gbps, "machine": busy[0], "busy": busy[1], "per_core": gbps / busy[1]}


COMMS = {"nbperf-trunc": "nbperf", "nbperf-copy": "nbperf", "iperf3": "iperf3", "iperf2": "iperf"}


def profile(engine: str, io: int, seconds: float, send: str, tmp: Path) -> str:
    """One more run under ``perf record -e cpu-clock -a`` (software sampling:
    this VM has no hardware counters): the share of each command, then the
    top symbols inside the engine's own processes (kernel work done in their
    system calls and in the softirqs they run included)."""
    data = tmp / f"perf-{engine}.data"
    rec = subprocess.Popen(["perf", "record", "-e", "cpu-clock", "-a", "-F", "999", "-o", str(data), "--",
                            "sleep", f"{seconds - 1.5:g}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    one_run(engine, io, seconds, send, tmp)
    rec.wait(timeout=30)
    out = []
    for args in (["--sort", "comm", "--percent-limit", "2"],
                 ["--comms", COMMS[engine], "--sort", "dso,sym", "--percentage", "relative", "--percent-limit", "1.5"]):
        r = subprocess.run(["perf", "report", "-i", str(data), "--stdio", *args], capture_output=True, text=True)
        out += [ln for ln in r.stdout.splitlines() if ln.strip() and not ln.startswith("#")] + [""]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--io", nargs="+", default=["128K", "512"])
    ap.add_argument("--send", default="auto", choices=("auto", "send", "sendmsg", "zerocopy", "sendfile"),
                    help="nbperf's send call; auto: sendfile from 64 KiB up, send below (measured here: "
                         "sendfile is ~2x slower than send at 512 B, a little faster at 128 KiB); iperf3 "
                         "always runs with -Z (sendfile)")
    ap.add_argument("--engines", nargs="+", default=list(ENGINES), choices=ENGINES)
    ap.add_argument("--perf", action="store_true")
    a = ap.parse_args()
    if nbperf.binary() is None:
        raise SystemExit("nbperf is not built: run scripts/install.sh")
    sizes = [int(x[:-1]) * 1024 if x.upper().endswith("K") else int(x) for x in a.io]
    lock = os.open(LOCK, os.O_CREAT | os.O_RDWR, 0o666)
    fcntl.flock(lock, fcntl.LOCK_EX)
    runs, profiles = [], {}
    lab_up()
    try:
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d)
            for io in sizes:
                for i in range(a.pairs):
                    k = i % len(a.engines)
                    for eng in a.engines[k:] + a.engines[:k]:
                        r = one_run(eng, io, a.seconds, a.send, tmp)
                        runs.append(r)
                        print(f"{eng:13s} io {io:6d}: {r['gbps']:6.2f} Gbps, {r['busy']:.2f} busy cores "
                              f"({r['machine']:.2f} with other programs), {r['per_core']:6.2f} Gbps per busy core",
                              flush=True)
            if a.perf:
                for eng in a.engines:
                    profiles[eng] = profile(eng, sizes[0], a.seconds, a.send, tmp)
    finally:
        lab_down()
        os.close(lock)
    print()
    print("| IO | engine | Gbps (median) | busy cores (machine) | Gbps per busy core (median, min-max) |")
    print("|---|---|---|---|---|")
    for io in sizes:
        med = {}
        for eng in a.engines:
            rs = [r for r in runs if r["engine"] == eng and r["io"] == io]
            pc = [r["per_core"] for r in rs]
            med[eng] = statistics.median(pc)
            busy, machine = (statistics.median(r[k] for r in rs) for k in ("busy", "machine"))
            print(f"| {io} | {eng} | {statistics.median(r['gbps'] for r in rs):.2f} | {busy:.2f} ({machine:.2f}) | "
                  f"{med[eng]:.2f} ({min(pc):.2f}-{max(pc):.2f}) |")
        for eng in ("nbperf-trunc", "nbperf-copy"):
            if eng in med and "iperf3" in med:
                print(f"| {io} | {eng} / iperf3 | | | **{med[eng] / med['iperf3']:.2f}x** |")
    for eng, text in profiles.items():
        print(f"\n## perf record -e cpu-clock -a, {eng}, io {sizes[0]}\n{text}")


if __name__ == "__main__":
    main()
