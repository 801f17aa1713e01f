"""netmap's pkt-gen (luigirizzo/netmap apps/pkt-gen/pkt-gen.c) as the packet
study's engine: argv of a generator (``-f tx``) and a receiver (``-f rx``),
and their console output read into counts per report interval.

What the argv rests on, from pkt-gen.c:

- ``-i netmap:IF`` takes the NIC's rings over (traffic bypasses the host
  stack); ``-l`` is the frame size without the 4-byte FCS; ``-4``/``-6``,
  ``-s``/``-d`` ``ADDR:PORT`` (IPv6 as ``[ADDR]:PORT``, extract_ipv6_addr),
  ``-S``/``-D`` MACs; ``-p`` threads, one ring each; ``-T`` ms between reports;
  ``-w`` seconds to wait for the link after netmap mode resets it.
- ``-R`` paces *each thread* (every sender sleeps ``g.tx_period``, computed
  from the one ``tx_rate``): a per-port rate is divided among the threads.
- pkt-gen has no duration: SIGINT ends it cleanly (threads cancelled, the
  final ``Sent``/``Received``/``Speed:`` lines printed), so the generator runs
  under ``timeout -s INT`` (in FreeBSD's base system and coreutils).
- Rate lines come from ``D()`` (netmap_user.h): on stderr, stamped
  ``SSS.UUUUUU`` = the host's ``gettimeofday`` seconds modulo 1000 and its
  microseconds; :func:`unwrap` puts them back on the host's clock from any
  instant known to within 500 s.

The console is read by one pure parser (:func:`parse`), whether nicbench ran
pkt-gen or a user brings its output (:mod:`nicbench.importers.pktgen`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import ToolError

FCS = 4
REPORT_MS = 250             # pkt-gen's default is 1000: four reads a second for the window's edges
WRAP = 1000.0               # D() stamps seconds modulo 1000


def _addr(ip: str, port: int) -> str:
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def tx_argv(dev: str, *, frame_size: int, ip: int, src_ip: str, dst_ip: str, src_mac: str, dst_mac: str,
            sport: int, dport: int, threads: int, duration: float, wait: int, rate: float | None = None,
            first_cpu: int | None = None, cpus: int | None = None) -> list[str]:
    """One port's generator: ``threads`` threads (one TX ring each) for
    ``duration`` s after a ``wait``-s link wait; ``rate`` frames/s for the
    port (split among the threads, each of which pkt-gen paces on its own);
    ``frame_size`` with the FCS.  With several threads the UDP source port
    takes ``threads`` values (pkt-gen steps through them), so a receiver's
    RSS spreads the flows as nbgen's per-thread frames do."""
    src = _addr(src_ip, sport) if threads == 1 else f"{_addr(src_ip, sport)}-{_addr(src_ip, sport + threads - 1)}"
    argv = ["timeout", "-s", "INT", f"{duration + wait:g}", "pkt-gen", "-i", f"netmap:{dev}", "-f", "tx",
            "-l", str(frame_size - FCS), f"-{ip}", "-s", src, "-d", _addr(dst_ip, dport), "-S", src_mac,
            "-D", dst_mac, "-p", str(threads), "-T", str(REPORT_MS), "-w", str(wait)]
    if rate:
        argv += ["-R", str(max(1, round(rate / threads)))]
    if first_cpu is not None:
        argv += ["-a", str(first_cpu)]           # thread i on CPU first + i (start_threads)
    if cpus is not None:
        argv += ["-c", str(cpus)]                # ... modulo the host's CPUs
    return argv


def rx_argv(dev: str, *, threads: int, wait: int) -> list[str]:
    """One port's receiver: counts every frame on the port's RX rings (netmap
    takes them from the host stack, so nothing else sees the test flow);
    stopped with SIGINT after the generators end."""
    return ["pkt-gen", "-i", f"netmap:{dev}", "-f", "rx", "-p", str(threads), "-T", str(REPORT_MS), "-w", str(wait)]


def unwrap(stamp: float, near: float) -> float:
    """A ``D()`` stamp (seconds modulo 1000) as the host clock's seconds, the
    one nearest ``near`` (an instant of that host's clock known to +-500 s)."""
    base = near - (near % WRAP)
    return min((base - WRAP + stamp, base + stamp, base + WRAP + stamp), key=lambda t: abs(t - near))


# -- the console, pure -------------------------------------------------------------------

_SCALE = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9}
# main_thread's report: "802.259513 main_thread [2416] 907.878 Kpps (908.221 Kpkts 435.946 Mbps in 1000378 usec)"
_LINE = re.compile(r"^\s*(?P<ts>\d+\.\d+)\s+main_thread\s+\[\d+\]\s+(?P<pps>[\d.]+)\s*(?P<pu>[KMG]?)pps\s+"
                   r"\((?P<n>[\d.]+)\s*(?P<nu>[KMG]?)pkts(?:\s+(?P<bps>[\d.]+)\s*(?P<bu>[KMG]?)bps)?\s+in\s+"
                   r"(?P<us>\d+)\s+usec\)", re.M)
# newer builds' last words: "Speed: 14.307 Mpps Bandwidth: 6.867 Gbps (raw 9.614 Gbps)"
_SPEED = re.compile(r"Speed:\s+([\d.]+)\s*([KMG]?)pps(?:\s+Bandwidth:\s+([\d.]+)\s*([KMG]?)bps)?", re.M)
_IFACE = re.compile(r"(Sending on|Receiving from) (?:netmap:)?(\S+?):\s*(?:(\d+) queues, (\d+) threads)?")
_V6 = re.compile(r"range is \[?[0-9a-fA-F]*::")


@dataclass(frozen=True)
class Report:
    """One ``main_thread`` rate line."""

    stamp: float            # its D() stamp: the host's seconds modulo 1000 (:func:`unwrap`)
    usec: float             # the interval's length, microseconds, as pkt-gen prints it
    packets: int            # frames in the interval
    pps: float              # frames/s
    bps: float | None       # bits/s of the frames without their FCS, when the line gives it


@dataclass(frozen=True)
class Console:
    """What pkt-gen's console output says, nothing inferred."""

    reports: tuple[Report, ...]
    direction: str | None   # tx ("Sending on"), rx ("Receiving from"), None: not said
    port: str | None        # the interface it named, without "netmap:"
    threads: int | None
    ipv6: bool              # its address range is IPv6
    speed_pps: float | None  # the final "Speed:" line of newer builds, frames/s
    speed_bps: float | None
    ready: bool             # it printed "Ready..." (netmap mode entered, link wait over)


def parse(text: str) -> Console:
    """pkt-gen's console output (stdout and stderr together) as it is; raises nothing."""
    iface = _IFACE.search(text)
    reports = []
    for m in _LINE.finditer(text):
        bps = float(m["bps"]) * _SCALE[m["bu"]] if m["bps"] else None
        reports.append(Report(float(m["ts"]), float(m["us"]), round(float(m["n"]) * _SCALE[m["nu"]]),
                              float(m["pps"]) * _SCALE[m["pu"]], bps))
    sp = _SPEED.search(text)
    return Console(tuple(reports), ("tx" if iface[1] == "Sending on" else "rx") if iface else None,
                   iface[2] if iface else None, int(iface[4]) if iface and iface[4] else None,
                   bool(_V6.search(text)), float(sp[1]) * _SCALE[sp[2]] if sp else None,
                   float(sp[3]) * _SCALE[sp[4]] if sp and sp[3] else None, "Ready..." in text)


# -- a run nicbench started --------------------------------------------------------------

@dataclass(frozen=True)
class Interval:
    t_start: float          # host clock, s
    t_end: float
    packets: int


@dataclass(frozen=True)
class Run:
    """One pkt-gen run as its console output says: the report intervals (on
    the host's clock), their total, the port and direction it named."""

    intervals: tuple[Interval, ...]
    packets: int
    port: str
    direction: str           # tx | rx
    ready: bool              # it printed "Ready..." (netmap mode entered, link wait over)


def parse_run(out: str, err: str, *, near: float, where: str) -> Run:
    """pkt-gen's stdout and stderr -> its intervals on the host clock;
    ``near``: an instant of that host's clock within 500 s of the run.  A
    run with no rate line is a ToolError with pkt-gen's last words."""
    whole = out + "\n" + err
    c = parse(whole)
    usec = sum(r.usec for r in c.reports)
    # no interval of any length, nor a Speed line; or intervals that all counted 0 frames
    if (usec == 0 and c.speed_pps is None) or (usec > 0 and not any(r.packets for r in c.reports)):
        last = [ln.strip() for ln in whole.splitlines() if ln.strip()]
        raise ToolError(f"pkt-gen printed no rate line: {last[-1][:160] if last else 'no output'}", where=where,
                        hint="is the NIC in netmap mode (kldload netmap / the netmap module) and the user root?")
    if not c.reports:
        raise ToolError("pkt-gen printed only its final Speed line, no interval counts", where=where)
    # each interval's end put on the host clock, its start the interval's own length before it
    intervals = tuple(Interval(unwrap(r.stamp, near) - r.usec / 1e6, unwrap(r.stamp, near), r.packets)
                      for r in c.reports)
    return Run(intervals, sum(i.packets for i in intervals), c.port or where, c.direction or "tx", c.ready)


def ready(err: str) -> bool:
    """pkt-gen has entered netmap mode and waited for the link: its threads run."""
    return "Ready..." in err
