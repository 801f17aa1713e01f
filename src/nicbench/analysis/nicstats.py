"""What the NIC's own counters and its interrupts say about one trial (pure).

From the ``nic.stat`` and ``nic.irq`` Samples (``sampling.nicstats``: each
host's ``ethtool -S`` deltas and its interface's interrupts per CPU from the
start to the end of the point, counters as the driver names them):

- per interface and direction, how the queues shared the packets: each
  queue's count and the imbalance index of ``core.nicstats.imbalance``,
  flagged at :data:`core.nicstats.IMBALANCE`;
- every drop, pause and error counter that moved, by its driver name and
  what the meaning table says it is; the ``ring`` ones (no Rx buffer: the
  host's receive path) are the verdict's NIC-ring loss;
- where the interrupts landed: the CPU that took most of each queue's
  interrupts, and whether one CPU took (nearly) all of every queue's
  (``nic.irq``: every host's interface IRQs, read with its counters; runs
  from before them: the study server's ``irq.count``).

The counters span the point from its samplers' start to its last read, a
little more than the measured window; deltas are not prorated (a drop is a
drop), and the span is said with them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from ..core.nicstats import IMBALANCE, IMBALANCE_MIN_PACKETS, SAYS, classify, imbalance
from ..records import Sample

# one CPU that took this share of every queue's interrupts holds them all:
# irqbalance or a default affinity of one CPU; a few stray interrupts
# elsewhere (a migration, an affinity change mid-point) do not undo that
IRQ_HOLD = 0.9


@dataclass(frozen=True)
class QueueSpread:
    """How one direction of one interface spread its packets over its queues."""

    host: str
    ifname: str
    driver: str
    direction: str
    packets: Mapping[int, float]          # queue -> packets over the span
    index: float | None                   # core.nicstats.imbalance (None: under two queues)

    @property
    def uneven(self) -> bool:
        return self.index is not None and self.index >= IMBALANCE and sum(self.packets.values()) >= \
            IMBALANCE_MIN_PACKETS

    def line(self) -> str:
        total = sum(self.packets.values())
        busiest = max(self.packets, key=lambda q: self.packets[q])
        share = self.packets[busiest] / total if total else 0.0
        idx = f"{self.index:.2f}" if self.index is not None else "n/a (one queue)" if len(self.packets) < 2 \
            else "n/a (nothing carried)"
        flag = (f": uneven (at or over {IMBALANCE:g}); the busiest queue's core saturates first -- spread the "
                "flows (RSS hash, more flows, ethtool -X)") if self.uneven else ""
        return (f"{self.host} {self.ifname} ({self.driver}) {self.direction} queues: {total:.0f} packets over "
                f"{len(self.packets)} queues, queue {busiest} {share * 100:.0f} %, imbalance {idx}{flag}")


@dataclass(frozen=True)
class NicCount:
    """One drop, pause or error counter that moved."""

    host: str
    ifname: str
    driver: str
    stat: str                              # as the driver names it
    meaning: str                           # core.nicstats.MEANINGS
    value: float

    def line(self) -> str:
        return f"{self.host} {self.ifname} {self.stat} {self.value:.0f} ({self.meaning}: {SAYS[self.meaning]})"


@dataclass(frozen=True)
class IrqHold:
    """One CPU took nearly all of every queue's interrupts."""

    host: str
    cpu: str
    queues: int
    share: float                          # of all the queues' interrupts, on that CPU


@dataclass(frozen=True)
class NicFindings:
    """What the NIC's counters and interrupts say about a trial."""

    interfaces: tuple[str, ...] = ()                       # "host ifname (driver)" read at both ends
    spreads: tuple[QueueSpread, ...] = ()
    moved: tuple[NicCount, ...] = ()                       # drop/pause/error counters that moved
    missing: Mapping[str, str] = field(default_factory=dict)   # "host ifname" -> why not read
    irq_hold: IrqHold | None = None
    irq_note: str = ""                                     # where the interrupts landed, or why unknown

    def ring(self) -> dict[str, float]:
        """``"host ifname stat"`` -> count of the ring drops (the verdict's NIC-ring loss)."""
        return {f"{c.host} {c.ifname} {c.stat}": c.value for c in self.moved if c.meaning == "ring"}

    def lines(self) -> list[str]:
        """What a reader sees for the point (explain, the report's verdict)."""
        out: list[str] = []
        if self.interfaces:
            out.append("nic: counters read on " + ", ".join(self.interfaces))
        out += [f"nic: {s.line()}" for s in self.spreads]
        moved = [c for c in self.moved if c.meaning != "ring"]
        out += [f"nic: {c.line()}" for c in moved]
        if self.interfaces and not self.moved:
            out.append("nic: no drop, pause or error counter moved: none found")
        out += [f"nic: not read on {k}: {why}" for k, why in sorted(self.missing.items())]
        if self.irq_note:
            out.append(f"irq: {self.irq_note}")
        return out


def nic_findings(samples: Iterable[Sample], meta: Mapping[str, object]) -> NicFindings | None:
    """The NIC's findings of one trial; None when nothing was read or tried
    (a run from before nicbench read them)."""
    stat: dict[tuple[str, str, str], dict[str, float]] = defaultdict(dict)
    irq: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    nic_irq: dict[tuple[str, str], dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for s in samples:
        if s.metric == "nic.stat":
            k = (str(s.tag("host")), str(s.tag("ifname")), str(s.tag("driver")))
            name = str(s.tag("stat"))
            stat[k][name] = stat[k].get(name, 0.0) + s.value
        elif s.metric == "nic.irq":
            nic_irq[(str(s.tag("host")), str(s.tag("irq")))][str(s.tag("cpu"))] += s.value
        elif s.metric == "irq.count":
            irq[(str(s.tag("host")), str(s.tag("irq")))][str(s.tag("cpu"))] += s.value
    # every host's interface IRQs read with its counters; the study server's periodic
    # irq.count (the CPU sampler's) only for runs from before those were read
    irq = nic_irq or irq
    raw_missing = meta.get("nic_stats_missing")
    missing = {str(k): str(v) for k, v in raw_missing.items()} if isinstance(raw_missing, Mapping) else {}
    if not stat and not missing and not irq:
        return None
    spreads: list[QueueSpread] = []
    moved: list[NicCount] = []
    for (host, ifname, driver), counters in sorted(stat.items()):
        per: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
        for name, v in sorted(counters.items()):
            c = classify(None if driver == "unknown" else driver, name)
            if c is None:
                continue
            if c.meaning == "packets" and c.queue is not None:
                per[c.direction][c.queue] += v
            elif c.meaning in SAYS and v > 0:
                moved.append(NicCount(host, ifname, driver, name, c.meaning, v))
        for d, qs in sorted(per.items()):
            spreads.append(QueueSpread(host, ifname, driver, d, dict(sorted(qs.items())),
                                       imbalance(list(qs.values()))))
    hold, note = irq_placement(irq)
    return NicFindings(tuple(f"{h} {i} ({d})" for h, i, d in sorted(stat)), tuple(spreads), tuple(moved),
                       missing, hold, note)


def irq_placement(irq: Mapping[tuple[str, str], Mapping[str, float]]) -> tuple[IrqHold | None, str]:
    """Where each NIC queue's interrupts landed ((host, irq label) -> cpu ->
    count): one CPU holding at least :data:`IRQ_HOLD` of every queue's (two
    queues or more), or how they spread."""
    if not irq:
        return None, ("no NIC interrupts sampled: the interface has none (a veth, a lab) or they were not "
                      "found in its facts; none found")
    by_host: dict[str, dict[str, Mapping[str, float]]] = defaultdict(dict)
    for (host, label), per_cpu in irq.items():
        if sum(per_cpu.values()) > 0:
            by_host[host][label] = per_cpu
    notes: list[str] = []
    hold: IrqHold | None = None
    for host, queues in sorted(by_host.items()):
        cpus = {c for per in queues.values() for c in per}
        total = sum(sum(per.values()) for per in queues.values())
        on = {c: sum(per.get(c, 0.0) for per in queues.values()) for c in cpus}
        top = max(on, key=lambda c: on[c])
        each = min(per.get(top, 0.0) / sum(per.values()) for per in queues.values())
        if len(queues) >= 2 and each >= IRQ_HOLD:
            hold = IrqHold(host, top, len(queues), on[top] / total)
            notes.append(f"CPU {top} of {host} took {on[top] / total * 100:.0f} % of the interrupts of every one "
                         f"of its {len(queues)} NIC queues: one core serves the whole NIC")
        else:
            notes.append(f"{host}: {len(queues)} NIC queue interrupt(s) over {len(cpus)} CPU(s), CPU {top} the most "
                         f"({on[top] / total * 100:.0f} %)" + ("" if len(queues) >= 2 else
                                                            " (one queue: nothing to spread)"))
    if not by_host:
        return None, "the NIC's interrupts did not fire during the point; none found"
    return hold, "; ".join(notes)
