"""The host sampler's stream (``hostsampler.sh``) as parsed reads, and its
clock mapped to the controller's (pure).

The sampler runs on the host, reads /proc (Linux) or sysctl/netstat
(FreeBSD) every interval and stamps each read with the host's own clock, so
a rate computed from two reads carries no network round trip.  Its stdout::

    @@nbs hello 1 os=Linux clock=mono_ns res=1e-9 interval=0.25 seconds=60 pid=4242
    @@nbs offset C0 REAL C1        sampler clock, host wall clock (date +%s.%N), sampler clock
    @@nbs once clockrate LINE      FreeBSD: kern.clockrate (cp_times ticks per second)
    @@nbs tick SEQ T0              sampler clock before the first read of the tick
    @@nbs src NAME N               then exactly N raw lines: one source's text
    @@nbs gone NAME                a source that could not be read (a process that exited)
    @@nbs kids PID CHILD...        a followed process's children
    @@nbs tock SEQ T1              sampler clock after the last read: the tick is complete
    @@nbs bye REASON T             deadline | stdin | ticker; REASON's offset pair just before
    @@nbs error MESSAGE            the sampler refused to start

Clocks (``clock=``): ``mono_ns`` is CLOCK_MONOTONIC in ns (Linux, from
/proc/timer_list, root); ``uptime_s`` is /proc/uptime, 10 ms resolution (the
kernel truncates it to hundredths, so each stamp is 0-10 ms early);
``real_s`` is the wall clock itself (FreeBSD, ``date +%s.%N``; 1 s
resolution where date has no %N, before FreeBSD 14.1).  Times here are
seconds.

Sources are the raw text the existing parsers take: ``stat`` ->
:func:`parse_proc_stat`, ``net/dev`` -> :func:`parse_net_dev`, ``net/snmp``
and ``net/netstat`` -> :func:`parse_snmp`, ``softirqs`` ->
:func:`net_softirqs`, ``interrupts`` -> :func:`parse_interrupts`,
``pid/N`` -> :func:`parse_pid_stat`, ``status/N`` -> :func:`cpus_allowed`;
FreeBSD's ``cp_times``, ``netstat-ib``, ``netstat-I/IF`` ->
:mod:`nicbench.sampling.freebsd`; its ``netstat-s-tcp`` and ``vmstat-i``
are kept raw (no parser until a recorded FreeBSD output tests one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources

from ..core.errors import ToolError
from . import freebsd
from .netdev import IfCounters, parse_net_dev
from .netstat import net_softirqs, parse_interrupts, parse_snmp
from .procstat import USER_HZ, CpuTimes, ProcCpu, cpus_allowed, parse_pid_stat, parse_proc_stat

MARK = "@@nbs "
VERSION = "1"
# seconds per unit of each clock the sampler may use
CLOCK_UNIT = {"mono_ns": 1e-9, "uptime_s": 1.0, "real_s": 1.0}
ITEMS = ("cpu", "softirqs", "interrupts", "net", "snmp")


def script() -> str:
    """The sampler's source (package data), to run with ``sh -c``."""
    return resources.files("nicbench.sampling").joinpath("hostsampler.sh").read_text()


def sampler_argv(interval: float, seconds: int, items: Sequence[str], *, shell: str = "sh") -> list[str]:
    """``sh -c SCRIPT nicbench-sampler INTERVAL SECONDS ITEM...``: the sampler
    as one command (no file to copy to the host).  ``items``: ``cpu``,
    ``softirqs``, ``interrupts``, ``net``, ``net:IF``, ``snmp``, ``pid:PID``.
    ``interval`` in seconds; ``seconds`` the hard limit on its run time."""
    if not 0.01 <= interval <= 3600:
        raise ValueError(f"sampler interval {interval!r} s is outside 0.01-3600")
    if not 1 <= seconds <= 7 * 86400:
        raise ValueError(f"sampler run time {seconds!r} s is outside 1 s - 7 days")
    for it in items:
        kind, _, arg = it.partition(":")
        ok = (it in ITEMS or (kind == "pid" and arg.isdigit())
              or (kind == "net" and arg != "" and all(c.isalnum() or c in "_.:-" for c in arg)))
        if not ok:
            raise ValueError(f"not a sampler item: {it!r}")
    return [shell, "-c", script(), "nicbench-sampler", f"{interval:g}", str(int(seconds)), *items]


@dataclass(frozen=True)
class ClockPair:
    """One reading of the host's wall clock bracketed by two sampler-clock
    readings (seconds): the wall clock was read between ``before`` and ``after``."""

    before: float
    real: float
    after: float


@dataclass(frozen=True)
class HostTick:
    """One tick's reads, raw.  ``t0``/``t1``: sampler clock (s) before the
    first and after the last read; every source of the tick was read in
    between."""

    seq: int
    t0: float
    t1: float
    sources: Mapping[str, str]
    gone: tuple[str, ...] = ()
    kids: Mapping[int, tuple[int, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class HostStream:
    host: str
    os: str
    clock: str                    # mono_ns | uptime_s | real_s
    resolution: float             # s
    interval: float               # s
    sampler_pid: int | None
    pairs: tuple[ClockPair, ...]
    ticks: tuple[HostTick, ...]
    once: Mapping[str, str]
    end: str | None               # why it stopped; None: the stream was cut (the sampler or the link died)
    problems: tuple[str, ...]


def _hello(host: str, words: list[str]) -> dict[str, str]:
    kv = dict(w.split("=", 1) for w in words[2:] if "=" in w)
    if words[1:2] != [VERSION]:
        raise ToolError(f"host sampler speaks version {words[1:2] or '?'}, nicbench reads {VERSION}", where=host,
                        hint="the sampler script and nicbench come from different versions")
    for k in ("os", "clock", "res", "interval"):
        if k not in kv:
            raise ToolError(f"host sampler's hello lacks {k}=", where=host)
    if kv["clock"] not in CLOCK_UNIT:
        raise ToolError(f"host sampler uses an unknown clock {kv['clock']!r}", where=host)
    return kv


def parse_stream(text: str, host: str) -> HostStream:
    """Every complete tick of the sampler's output.  A tick cut short (the
    stream ended inside it) is left out and named in ``problems``; a sampler
    that refused to start or never said hello is a ToolError naming the host."""
    lines = text.split("\n")
    hello: dict[str, str] | None = None
    unit = 1.0
    pairs: list[ClockPair] = []
    ticks: list[HostTick] = []
    once: dict[str, str] = {}
    problems: list[str] = []
    end: str | None = None
    cur: dict | None = None
    i = 0

    def stamp(s: str) -> float:
        """A time on the sampler clock in seconds; NaN when the clock read failed."""
        try:
            return float(s) * unit
        except ValueError:
            return float("nan")

    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.startswith(MARK):
            if line.strip() and hello is None:
                continue          # a login shell's start-up chatter before the sampler
            if line.strip():
                problems.append(f"unframed line {i}: {line[:80]!r}")
            continue
        words = line[len(MARK):].split(" ")
        kind = words[0]
        if kind == "error":
            raise ToolError(f"host sampler refused to start: {' '.join(words[1:])}", where=host)
        if kind == "hello":
            hello = _hello(host, words)
            unit = CLOCK_UNIT[hello["clock"]]
            continue
        if hello is None:
            raise ToolError("host sampler output does not start with its hello line", where=host)
        try:
            if kind == "offset":
                pairs.append(ClockPair(stamp(words[1]), float(words[2]), stamp(words[3])))
            elif kind == "once":
                name, _, rest = " ".join(words[1:]).partition(" ")
                once[name] = (once[name] + "\n" + rest) if name in once else rest
            elif kind == "tick":
                if cur is not None:
                    problems.append(f"tick {cur['seq']} has no end")
                cur = {"seq": int(words[1]), "t0": stamp(words[2]), "sources": {},
                       "gone": [], "kids": {}}
            elif kind == "src" and cur is not None:
                name, n = words[1], int(words[2])
                if i + n > len(lines) - 1:
                    break                 # cut inside the source's lines (the last one has no newline)
                cur["sources"][name] = "\n".join(lines[i:i + n]) + ("\n" if n else "")
                i += n
            elif kind == "gone" and cur is not None:
                cur["gone"].append(words[1])
            elif kind == "kids" and cur is not None:
                cur["kids"][int(words[1])] = tuple(int(w) for w in words[2:] if w)
            elif kind == "tock" and cur is not None:
                t1 = stamp(words[2])
                if int(words[1]) != cur["seq"]:
                    problems.append(f"tick {cur['seq']} ended as {words[1]}")
                elif not (cur["t0"] <= t1):          # NaN (a failed clock read) or backwards
                    problems.append(f"tick {cur['seq']} has no usable time ({cur['t0']}, {t1}): left out")
                else:
                    ticks.append(HostTick(cur["seq"], cur["t0"], t1, cur["sources"], tuple(cur["gone"]),
                                          cur["kids"]))
                cur = None
            elif kind == "bye":
                end = words[1]
            else:
                problems.append(f"line {i}: unexpected {kind!r}")
        except (IndexError, ValueError):
            problems.append(f"line {i}: malformed {line[:80]!r}")
    if hello is None:
        raise ToolError("host sampler printed nothing usable (no hello line)", where=host,
                        hint="the host needs a POSIX sh, awk, sleep with fractional seconds, mktemp and mkfifo")
    if cur is not None:
        problems.append(f"tick {cur['seq']} was cut short (the stream ended inside it)")
    if end is None:
        problems.append("the stream ended without the sampler saying why: it (or the connection) died")
    pid = hello.get("pid", "")
    return HostStream(host, hello["os"], hello["clock"], float(hello["res"]), float(hello["interval"]),
                      int(pid) if pid.isdigit() else None, tuple(pairs), tuple(ticks), once, end, tuple(problems))


# -- parsed reads ---------------------------------------------------------

@dataclass(frozen=True)
class HostRead:
    """One tick parsed with nicbench's own parsers.  Times are the sampler
    clock in seconds (map them with :class:`ClockMap`); ``cpu_hz``: ticks
    per second of ``cpu`` (USER_HZ on Linux, stathz on FreeBSD).  A source
    the tick did not read is None, never an empty stand-in."""

    seq: int
    t0: float
    t1: float
    cpu: dict[str, CpuTimes] | None
    cpu_hz: int | None
    net_dev: dict[str, IfCounters] | None
    proto: dict[str, dict[str, int]] | None
    softirqs: dict[str, dict[str, int]] | None
    interrupts: dict[str, tuple[dict[str, int], str]] | None
    procs: dict[int, ProcCpu]
    allowed: dict[int, str]
    kids: Mapping[int, tuple[int, ...]]
    gone: tuple[str, ...]

    @property
    def t(self) -> float:
        """Midpoint of the tick (s): the reads happened within ``t +- (t1 - t0) / 2``."""
        return (self.t0 + self.t1) / 2


def _stathz(once: Mapping[str, str]) -> int | None:
    text = once.get("clockrate")
    return freebsd.parse_clockrate(text).get("stathz") if text else None


def parse_reads(stream: HostStream) -> list[HostRead]:
    """Every tick of ``stream`` through the parsers of its OS."""
    out = []
    bsd = stream.os == "FreeBSD"
    stathz = _stathz(stream.once) if bsd else None
    for tk in stream.ticks:
        s = tk.sources
        procs: dict[int, ProcCpu] = {}
        allowed: dict[int, str] = {}
        for name, text in s.items():
            kind, _, num = name.partition("/")
            try:
                if kind == "pid":
                    procs[int(num)] = parse_pid_stat(text)
                elif kind == "status":
                    a = cpus_allowed(text)
                    if a is not None:
                        allowed[int(num)] = a
            except (ValueError, IndexError):
                continue          # a process that exited mid-read: as if gone
        if bsd:
            cpu = freebsd.parse_cp_times(s["cp_times"]) if "cp_times" in s else None
            ifs: dict[str, IfCounters] | None = None
            for name, text in s.items():
                if name == "netstat-ib" or name.startswith("netstat-I/"):
                    ifs = (ifs or {}) | freebsd.parse_netstat_i(text)
            # netstat -s -p tcp and vmstat -i stay raw in tk.sources: no parser yet (freebsd.py)
            out.append(HostRead(tk.seq, tk.t0, tk.t1, cpu, stathz if cpu is not None else None, ifs, None,
                                None, None, procs, allowed, tk.kids, tk.gone))
            continue
        proto = None
        if "net/snmp" in s or "net/netstat" in s:
            proto = parse_snmp(s.get("net/snmp", "")) | parse_snmp(s.get("net/netstat", ""))
        out.append(HostRead(
            tk.seq, tk.t0, tk.t1,
            parse_proc_stat(s["stat"]) if "stat" in s else None, USER_HZ if "stat" in s else None,
            parse_net_dev(s["net/dev"]) if "net/dev" in s else None, proto,
            net_softirqs(s["softirqs"]) if "softirqs" in s else None,
            parse_interrupts(s["interrupts"]) if "interrupts" in s else None,
            procs, allowed, tk.kids, tk.gone))
    return out


# -- clocks ---------------------------------------------------------------

@dataclass(frozen=True)
class ClockMap:
    """Sampler clock -> controller clock: ``controller = sampler + shift``.

    ``uncertainty`` (s) bounds the error of one mapped time: the sampler
    clock's tie to the host's wall clock (half its tightest bracket plus the
    clock's resolution) plus the uncertainty of the measured host-controller
    offset.  It is the same for every stamp of the stream, so it cancels in
    a rate between two reads of one host; only each read's own span
    (``t1 - t0``) and the clock's resolution enter those."""

    shift: float
    uncertainty: float
    resolution: float


def clock_map(stream: HostStream, offset: float, offset_uncertainty: float) -> ClockMap:
    """The map for ``stream`` given the host's measured wall-clock offset
    (``offset`` = host clock - controller clock, s, as preflight measures it)
    and its uncertainty.  Raises ToolError when the sampler gave no usable
    tie, or when its ties at start and end disagree by more than their
    uncertainties (the host's clock was stepped during the run)."""
    if stream.clock == "real_s":
        tie, tie_unc = 0.0, stream.resolution
    else:
        good = [p for p in stream.pairs if p.after >= p.before]      # (False for NaN)
        if not good:
            raise ToolError("host sampler gave no reading of the host's wall clock", where=stream.host)
        best = min(good, key=lambda p: p.after - p.before)
        tie = best.real - (best.before + best.after) / 2
        tie_unc = (best.after - best.before) / 2 + stream.resolution
        for p in good:
            d = p.real - (p.before + p.after) / 2
            if abs(d - tie) > tie_unc + (p.after - p.before) / 2 + stream.resolution:
                raise ToolError(f"the host's wall clock moved by {(d - tie) * 1000:+.1f} ms against its monotonic "
                                "clock during sampling (stepped by NTP?)", where=stream.host,
                                hint="let chrony/ntpd settle (slew, not step) before measuring")
    return ClockMap(tie - offset, tie_unc + abs(offset_uncertainty), stream.resolution)


def to_controller(t: float, cmap: ClockMap) -> tuple[float, float]:
    """A sampler-clock time (s) on the controller's clock, with its
    uncertainty (s)."""
    return t + cmap.shift, cmap.uncertainty
