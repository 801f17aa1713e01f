"""Turning flow intervals and whole-test totals of a traffic tool (iperf3,
iperf2) into a :class:`ParsedFile`: one place that decides sides, directions,
whole-test receiver samples and the notes that go with them.

Bytes and seconds throughout; a ``Total`` is what the tool reported for one
direction and side over the whole test.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..records import Sample, Tags, make_tags
from ..tools.base import FlowInterval, FlowRow
from .model import Kind, ParsedFile, Role, no_point, sample

_CONNECTED = re.compile(r"local \S+ port (\d{1,5}) connected (?:to|with) \S+ port (\d{1,5})")


@dataclass(frozen=True)
class Total:
    """One direction and side over the whole test: bytes over ``seconds``
    starting ``t0`` seconds after the test start; UDP figures when known."""

    bytes: float
    seconds: float
    t0: float = 0.0
    packets: float | None = None
    lost: float | None = None
    jitter_s: float | None = None
    out_of_order: float | None = None
    retransmits: float | None = None
    streams: int | None = None


def direction_of(flow: str, role: Role | None) -> str:
    """tx/rx from the file's own process: the engine client sends the fwd flow."""
    if role == "server":
        return "rx" if flow == "fwd" else "tx"
    return "tx" if flow == "fwd" else "rx"


def build(*, name: str, fmt: str, tool: str, version: str | None, role: Role | None, kind: Kind,
          params: Mapping[str, Any], intervals: Iterable[FlowInterval | FlowRow],
          totals: Mapping[tuple[str, str], Total], start: float | None, host: str,
          notes: Iterable[str] = (), dropped: Iterable[str] = (), hint: str,
          pairs: Iterable[tuple[int, int]] = (), tails: bool = False) -> ParsedFile:
    """Samples and totals of one traffic file; raises when no usable point is left.

    ``totals`` is keyed (direction, side) with direction from this file's process.
    Where a direction has a receiver total but no receiver intervals, one
    whole-test receiver sample carries it and the notes say so.  A total over
    0 s (iperf 2's server in ``-n`` mode prints 0.0-0.0) has no rate and is
    left out, said so in ``dropped``.  ``host``: the file's name (its base
    name tags the samples).  ``pairs``: the (port, port) of each
    connection the file names, so both ends' files of one test can be
    matched (``extra["pairs"]``, see :func:`connection_pairs`).
    ``tails``: hold the intervals to the tool's whole-test totals
    (:func:`_tails`) -- the text and CSV formats, whose last partial
    interval may be printed only in their total; iperf3's JSON reports its
    own, and its 100,000s of intervals are left the one pass they take.
    """
    notes = list(notes)
    ivs = list(intervals)
    base = start if start is not None else 0.0
    # the samples are tagged with the file's base name, the process label the
    # TCP and UDP studies give its first process (importers.adapt.label): a
    # long file's 100,000s of samples are then theirs as they are, not copied
    # to be retagged
    host = Path(host).name or host
    samples: list[Sample] = []
    tag_sets: dict[tuple[object, ...], Tags] = {}
    bytes_metric = f"{kind}.bytes"
    have_rcv_iv: set[str] = set()
    have_snd_iv: set[str] = set()
    # a long report has 100,000s of intervals: the loop reads each field once,
    # takes the direction of each flow once, and max(t0, t1) as its comparison
    fwd, rev = direction_of("fwd", role), direction_of("rev", role)
    add = samples.append
    v: float | None
    for iv in ivs:
        d = fwd if iv.flow == "fwd" else rev
        sd, streams, omitted, t0 = iv.side, iv.streams, iv.omitted, iv.abs_start
        if t0 is None:
            t0 = base + iv.start
        t1 = t0 + (iv.end - iv.start)
        key = (d, sd, streams.__class__, streams, omitted)
        iv_tags = tag_sets.get(key)
        if iv_tags is None:
            # once per tag set, not per interval: a long report's samples share a few
            iv_tags = tag_sets[key] = make_tags(host=host, proc="0", direction=d, side=sd,
                                                streams=streams, omitted=1 if omitted else 0)
        if not t1 > t0:
            t1 = t0
        add(Sample("", bytes_metric, float(iv.bytes), "bytes", t0, t1, iv_tags))
        v = iv.retransmits
        if v is not None:
            add(Sample("", "tcp.retransmits", float(v), "count", t0, t1, iv_tags))
        v = iv.packets
        if v is not None:
            add(Sample("", "udp.packets", float(v), "packets", t0, t1, iv_tags))
        v = iv.lost
        if v is not None:
            add(Sample("", "udp.lost", float(v), "packets", t0, t1, iv_tags))
        v = iv.jitter_s
        if v is not None:
            add(Sample("", "udp.jitter", float(v), "s", t0, t1, iv_tags))
        if not omitted:
            if sd == "receiver":
                have_rcv_iv.add(d)
            elif sd == "sender":
                have_snd_iv.add(d)
    flat: dict[str, float] = {}
    dropped = list(dropped)
    if tails:
        samples += _tails(ivs, totals, role, base, host, kind, params, notes)
    for (d, side), tot in sorted(totals.items()):
        if tot.seconds <= 0:
            dropped.append(f"{d} {side} total of {tot.bytes:.0f} bytes over {tot.seconds:g} s: no rate can be "
                           "taken from it")
            continue
        for what in ("bytes", "seconds", "packets", "lost", "jitter_s", "out_of_order", "retransmits"):
            v = getattr(tot, what)
            if v is not None:
                flat[f"{d}.{side}.{what}"] = float(v)
        if side == "receiver" and d not in have_rcv_iv:
            t0 = base + tot.t0
            tags = dict(host=host, proc="0", direction=d, side="receiver", whole=1,
                        streams=tot.streams if tot.streams is not None else params.get("streams"))
            samples.append(sample(f"{kind}.bytes", tot.bytes, "bytes", t0, t0 + tot.seconds, **tags))
            for metric, v, unit in (("udp.packets", tot.packets, "packets"), ("udp.lost", tot.lost, "packets"),
                                    ("udp.out_of_order", tot.out_of_order, "count"),
                                    ("udp.jitter", tot.jitter_s, "s")):
                if kind == "udp" and v is not None:
                    samples.append(sample(metric, v, unit, t0, t0 + tot.seconds, **tags))  # type: ignore[arg-type]
            notes.append(f"{d}: per-interval data is sender-side; the point uses the receiver's whole-test "
                         f"total ({tot.bytes:.0f} bytes over {tot.seconds:g} s) as one sample")
        if side == "sender" and d not in have_snd_iv:
            # a summary line alone (iperf 2 -y C without -i): the sender's whole test as one sample
            t0 = base + tot.t0
            samples.append(sample(f"{kind}.bytes", tot.bytes, "bytes", t0, t0 + tot.seconds, host=host, proc="0",
                                  direction=d, side="sender", whole=1,
                                  streams=tot.streams if tot.streams is not None else params.get("streams")))
            if tot.retransmits is not None:
                samples.append(sample("tcp.retransmits", tot.retransmits, "count", t0, t0 + tot.seconds, host=host,
                                      proc="0", direction=d, side="sender", whole=1))
    directions = {d for d, _ in totals} | {direction_of(iv.flow, role) for iv in ivs}
    for d in sorted(directions):
        if (d, "receiver") not in totals and d not in have_rcv_iv:
            notes.append(f"{d}: the file has no receiver figure; throughput is sender-side")
    moved = [v for k, v in flat.items() if k.endswith(".bytes")] + [iv.bytes for iv in ivs]
    if not moved:
        zero = [x for x in dropped if " over 0 s" in x]
        if zero:
            raise no_point(name, zero[0] + " (an iperf 2 server in -n mode reports its transfer as 0.0-0.0)",
                           "import the client's file of the same test, or run it with -t SECONDS instead of -n")
        raise no_point(name, "no intervals and no totals", hint)
    if not any(moved):
        raise no_point(name, "every byte count is 0 (nothing was transferred)",
                       "check the path and the server; a test that asked for traffic must move bytes")
    rcv = [v for k, v in flat.items() if k.endswith(".receiver.bytes")]
    snd = [v for k, v in flat.items() if k.endswith(".sender.bytes")]
    if rcv and not any(rcv) and any(snd):
        raise no_point(name, f"the receiver reported 0 bytes while the sender sent {sum(snd):.0f}",
                       "the receiver's report is missing or the transfer failed; rerun with a longer test (-t)")
    return ParsedFile(name=name, format=fmt, tool=tool, version=version, role=role, kind=kind,
                      params=dict(params), samples=samples, totals=flat, relative_time=start is None,
                      notes=tuple(notes), dropped=tuple(dropped), start=start,
                      extra={"pairs": sorted({tuple(sorted(x)) for x in pairs})})


# the tool's whole-test total and its intervals, as rates: closer than this they
# agree (text figures carry 3 significant digits: up to 0.5 % off each)
AGREE = 0.01
# seconds the whole-test total may run past the last interval before that
# stretch is its own (iperf 2 prints its last interval only when it is whole)
_TAIL_S = 0.005


def _tails(ivs: list[FlowInterval | FlowRow], totals: Mapping[tuple[str, str], Total], role: Role | None,
           base: float, host: str, kind: str, params: Mapping[str, Any], notes: list[str]) -> list[Sample]:
    """The tool's own whole-test total is the figure; its intervals are the
    timeline.  Where the total runs past the last interval (iperf 2's
    ``[SUM] 0.00-5.24`` after intervals to 5.00: its last, partial
    interval is printed only in the total), the bytes the total counts
    beyond the intervals are one more sample over that stretch (tagged
    ``tail``), so the point's bytes and span are the tool's own; where the
    two still disagree by more than :data:`AGREE`, a note says both."""
    if not totals or not ivs:
        return []
    acc: dict[tuple[str, str], list[float]] = {}
    for iv in ivs:
        if iv.omitted:
            continue
        d = direction_of(iv.flow, role)
        a = acc.get((d, iv.side))
        t1 = (iv.abs_start if iv.abs_start is not None else base + iv.start) + (iv.end - iv.start)
        if a is None:
            acc[(d, iv.side)] = [float(iv.bytes), iv.start, iv.end, t1, 1.0]
            continue
        a[0] += iv.bytes
        a[4] += 1
        if iv.start < a[1]:
            a[1] = iv.start
        if iv.end > a[2]:
            a[2], a[3] = iv.end, t1
    out: list[Sample] = []
    for (d, side), (nbytes, r0, r1, t1, n) in sorted(acc.items()):
        tot = totals.get((d, side))
        if tot is None or tot.seconds <= 0 or r1 <= r0 or abs(tot.t0 - r0) > 0.011:
            continue
        end = tot.t0 + tot.seconds
        extra = tot.bytes - nbytes
        if end > r1 + _TAIL_S and extra > -AGREE / 2 * tot.bytes:
            extra = max(extra, 0.0)         # rounded text: intervals may sum a little over the total
            out.append(sample(f"{kind}.bytes", extra, "bytes", t1, t1 + (end - r1), host=host, proc="0",
                              direction=d, side=side, tail=1,
                              streams=tot.streams if tot.streams is not None else params.get("streams")))
            left = (f"the {extra:.0f} bytes its {int(n)} intervals leave out are" if extra else
                    f"its {int(n)} intervals already hold its bytes (rounded text), and a 0-byte sample is")
            notes.append(f"{d} {side}: the tool's whole-test total ({tot.bytes:.0f} bytes over {tot.seconds:g} s) "
                         f"runs {end - r1:.3g} s past its last interval: {left} one more sample over "
                         f"{r1:g}-{end:g} s, so the figure is the tool's total")
            continue
        iv_rate, tot_rate = nbytes * 8 / (r1 - r0), tot.bytes * 8 / tot.seconds
        if abs(iv_rate - tot_rate) > AGREE * tot_rate:
            notes.append(f"{d} {side}: the tool's whole-test total says {tot_rate / 1e6:.6g} Mbit/s "
                         f"({tot.bytes:.0f} bytes over {tot.seconds:g} s), its {int(n)} intervals "
                         f"{iv_rate / 1e6:.6g} Mbit/s ({nbytes:.0f} bytes over {r1 - r0:g} s): "
                         f"{(iv_rate / tot_rate - 1) * 100:+.1f} %; the file's headline is the tool's total, the "
                         "intervals are the timeline")
    return out


def connection_pairs(text: str) -> list[tuple[int, int]]:
    """The two ports of every connection iperf's text names (``local A port P
    connected to|with B port Q``): the same set from both ends of a test."""
    return [(int(a), int(b)) for a, b in _CONNECTED.findall(text)]
