"""The NIC's own counters (``ethtool -S``) of every host's test interface,
read at the start and at the end of a point.

One command per host per read, through the host's Transport (inside the
lab's namespace, over SSH on a real host): ``ethtool -i`` for the driver
(its counters mean what the driver says, ``core.nicstats``), ``ethtool
-S``, and the interface's IRQs with their per-CPU counts from
/proc/interrupts (found as the host facts find them; a veth has none:
``nic.irq`` Samples, nonzero deltas).  The two reads of a host are made from this machine and stamped on
its clock (the middle of each command), so a host's own clock does not
enter.  Their deltas become ``nic.stat`` Samples, one per counter, tagged
with the host, the interface, the driver and the counter's own name; a
read that failed (no ethtool, a driver without statistics, a FreeBSD host:
its ``sysctl dev.<driver>.<unit>`` is not read) is said in the point's meta
under ``nic_stats_missing``, never guessed.

Which counters become samples: every counter the meaning table names
(per-queue packets and bytes, drops, pauses, errors: a queue that carried
nothing is the spread's evidence too) and every other counter that moved.
A 64-channel mlx5 prints thousands of counters, most of them still.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ..core.nicstats import classify
from ..hosts.facts import IRQS_SH
from ..records import Sample, make_tags
from ..tools.ethtool import stats
from .netdev import delta
from .netstat import parse_interrupts
from .sampler import NetTarget

# ethtool -i's driver line, then -S and its exit status, then the interface's IRQs
# with their per-CPU counts (the host facts' own finding of them) under
# /proc/interrupts' CPU header; the marks split them
_SCRIPT = IRQS_SH + (
    'i=$1; echo "@@nicbench-driver"; ethtool -i "$i" 2>/dev/null | sed -n "s/^driver: //p"; '
    'echo "@@nicbench-stats"; ethtool -S "$i" 2>&1; echo "@@nicbench-rc $?"; '
    'echo "@@nicbench-irqs"; head -n 1 /proc/interrupts; irqs "$i"')


def argv(ifname: str) -> list[str]:
    """The one command a read runs on a host."""
    return ["sh", "-c", _SCRIPT, "nicbench-nicstats", ifname]


@dataclass(frozen=True)
class NicRead:
    """One read of one interface: its driver and counters, or why not."""

    host: str
    ifname: str
    t: float                       # this machine's clock, s
    driver: str | None
    counters: dict[str, int] | None
    why: str | None = None
    irqs: dict[str, dict[str, int]] | None = None    # "ifname:queue name" -> cpu -> interrupts so far


def parse_irqs(ifname: str, text: str) -> dict[str, dict[str, int]]:
    """The interface's IRQ lines (``IRQ<TAB>affinity<TAB>counts name``)
    under /proc/interrupts' header -> ``"ifname:name"`` -> cpu -> count
    (pure; CPUs named by the header, as ``parse_interrupts`` does)."""
    lines = text.splitlines()
    if not lines:
        return {}
    rows = [ln.split("\t") for ln in lines[1:] if ln.count("\t") >= 2]
    table = parse_interrupts("\n".join([lines[0]] + [f"{r[0]}: {r[2]}" for r in rows]))
    out: dict[str, dict[str, int]] = {}
    for irq, (counts, desc) in table.items():
        if counts:
            out[f"{ifname}:{desc.split()[-1] if desc.split() else irq}"] = counts
    return out


def parse_read(host: str, ifname: str, t: float, out: str) -> NicRead:
    """A read from the command's output (pure)."""
    driver_part, _, rest = out.partition("@@nicbench-stats\n")
    driver = driver_part.replace("@@nicbench-driver", "").strip() or None
    rest, _, irq_text = rest.partition("@@nicbench-irqs\n")
    irqs = parse_irqs(ifname, irq_text) or None
    body, sep, rc = rest.rpartition("@@nicbench-rc ")
    if not sep or rc.strip() != "0":
        text = " ".join(body.split())[-160:] or "no output"
        missing = "ethtool not found" if "not found" in text and "ethtool" in text else text
        return NicRead(host, ifname, t, driver, None, f"ethtool -S {ifname}: {missing}", irqs)
    try:
        return NicRead(host, ifname, t, driver, stats(body), None, irqs)
    except ValueError as e:
        return NicRead(host, ifname, t, driver, None, f"ethtool -S {ifname}: output not understood: {e}", irqs)


class NicStatSampler:
    """The start and end reads of every (host, interface) of a point."""

    def __init__(self, targets: Sequence[NetTarget], *, trial_id: str, timeout: float = 10.0):
        seen: dict[tuple[str, str], NetTarget] = {}
        for tg in targets:
            if tg.ifname:
                seen.setdefault((tg.host, tg.ifname), tg)
        self.targets = list(seen.values())
        self.trial_id, self.timeout = trial_id, timeout
        self.reads: list[NicRead] = []
        self._lock = threading.Lock()
        self._first: threading.Thread | None = None
        self._ended = False

    def _read_one(self, tg: NetTarget) -> NicRead:
        t0 = time.time()
        try:
            r = tg.transport.run(argv(str(tg.ifname)), timeout=self.timeout)
            out = r.stdout
        except Exception as e:  # noqa: BLE001 - a read must never fail the point: said as missing
            return NicRead(tg.host, str(tg.ifname), t0, None, None, f"ethtool -S {tg.ifname}: {e}")
        return parse_read(tg.host, str(tg.ifname), (t0 + time.time()) / 2, out)

    def read(self) -> None:
        """Every target at once (one thread each: over SSH each is a round trip)."""
        if not self.targets:
            return
        with ThreadPoolExecutor(max_workers=min(16, len(self.targets))) as ex:
            got = list(ex.map(self._read_one, self.targets))
        with self._lock:
            self.reads += got

    def start(self) -> NicStatSampler:
        """The first read, in the background: the point's tools start meanwhile."""
        self._first = threading.Thread(target=self.read, name="nic-stats", daemon=True)
        self._first.start()
        return self

    def end(self) -> None:
        """The last read (once): after the first has finished."""
        if self._ended:
            return
        self._ended = True
        if self._first is not None:
            self._first.join(timeout=self.timeout + 5)
        self.read()

    def stop(self, meta: dict) -> list[Sample]:
        self.end()
        with self._lock:
            reads = list(self.reads)
        missing = {f"{r.host} {r.ifname}": r.why for r in reads if r.why}
        if missing:
            meta["nic_stats_missing"] = missing
        return nic_samples(reads, self.trial_id)


def nic_samples(reads: Sequence[NicRead], trial_id: str) -> list[Sample]:
    """``nic.stat`` Samples from the first and last good read of each (host,
    interface): the counters the meaning table names, and any other that
    moved.  A counter that went backwards (the driver reset its statistics)
    is left out."""
    out = irq_samples(reads, trial_id)
    by: dict[tuple[str, str], list[NicRead]] = {}
    for r in sorted(reads, key=lambda r: r.t):
        if r.counters is not None:
            by.setdefault((r.host, r.ifname), []).append(r)
    for (host, ifname), rs in by.items():
        if len(rs) < 2 or rs[-1].t <= rs[0].t:
            continue
        a, b = rs[0], rs[-1]
        driver = b.driver or a.driver
        for name in a.counters.keys() & b.counters.keys():  # type: ignore[union-attr]
            d = delta(a.counters[name], b.counters[name])  # type: ignore[index]
            if d is None or (d == 0 and classify(driver, name) is None):
                continue
            out.append(Sample(trial_id, "nic.stat", float(d), "count", a.t, b.t,
                              make_tags(host=host, ifname=ifname, driver=driver or "unknown", stat=name)))
    return out


def irq_samples(reads: Sequence[NicRead], trial_id: str) -> list[Sample]:
    """``nic.irq`` Samples: each of the interface's IRQs' interrupts per CPU
    between the first and last read that found them, nonzero only (a
    128-CPU host would otherwise store mostly zeros)."""
    by: dict[tuple[str, str], list[NicRead]] = {}
    for r in sorted(reads, key=lambda r: r.t):
        if r.irqs:
            by.setdefault((r.host, r.ifname), []).append(r)
    out: list[Sample] = []
    for (host, ifname), rs in by.items():
        a, b = rs[0], rs[-1]
        if len(rs) < 2 or b.t <= a.t:
            continue
        for label in a.irqs.keys() & b.irqs.keys():  # type: ignore[union-attr]
            ca, cb = a.irqs[label], b.irqs[label]  # type: ignore[index]
            for cpu in ca.keys() & cb.keys():
                d = delta(ca[cpu], cb[cpu], bits=32)     # the kernel counts them in unsigned int
                if d:
                    out.append(Sample(trial_id, "nic.irq", float(d), "count", a.t, b.t,
                                      make_tags(host=host, ifname=ifname, irq=label, cpu=cpu)))
    return out
