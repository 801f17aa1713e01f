"""Packet-rate results run elsewhere (netmap pkt-gen's console output,
trafgen's summary) as the packet study's trials.

Shape, as :mod:`.runner` records it: ``pkt.sent`` samples of the sending
ports (tagged host, port, side "sender", engine) and ``pkt.received`` of
the receiving ones (side "receiver"); trial meta ``tx`` and ``rx`` per port
with its count and span, ``generator`` and ``receiver`` (None when no file
of that side was given); params engine, ip, ports, threads, frame_size
(bytes with FCS), duration; the point key ``pkt-gen/ipv4/p1/t1/64B`` of the
plan schema.  Each file is on its tool's own clock: the files of one point
are taken as started together.  A point with only senders' files is
sender-side (what was sent), one with only receivers' files receiver-side;
the packet analysis and the report say which.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...importers.adapt import ImportedRun, ImportedTrial, ImportOptions, common, file_notes, labels, retag, shifted
from ...importers.group import Group
from ...importers.model import ParsedFile, sample
from ...records import Sample


def _samples(p: ParsedFile) -> tuple[list[Sample], list[str]]:
    """A file's counts from 0 on its own clock; pkt-gen's final Speed line
    alone (a rate, no count) becomes one second at that rate, tagged ``rate_only``."""
    if p.samples:
        t0 = min(s.t_start for s in p.samples)
        return [shifted(s, t0) for s in p.samples], []
    metric = "pkt.received" if p.params.get("direction") == "rx" else "pkt.sent"
    pps = p.totals["pps"]
    return [sample(metric, pps, "packets", 0.0, 1.0, rate_only=1)], \
        [f"{p.name}: only a rate ({pps:g} packets/s), no count or duration: stored as one second at that rate"]


class PacketImport:
    """The packet study's import adapter (``importers.adapt.StudyImport``)."""

    kinds = frozenset({"packets"})

    def adapt(self, groups: Sequence[Group], options: ImportOptions) -> ImportedRun:
        trials = []
        for g in groups:
            files = list(g.files)
            names = labels(files)
            engine = str(common(p.params.get("engine") for p in files) or "+".join(
                sorted({str(p.params.get("engine")) for p in files})))
            samples: list[Sample] = []
            sides: dict[str, dict[str, Any]] = {"tx": {}, "rx": {}}
            hosts: dict[str, list[str]] = {"tx": [], "rx": []}
            notes = file_notes(files)
            for i, p in enumerate(files):
                ss, extra = _samples(p)
                notes += extra
                d = "rx" if p.params.get("direction") == "rx" else "tx"
                port = str(p.params.get("port") or names[i])
                port = port if port not in sides[d] else f"{port}#{i + 1}"
                samples += [retag(s, host=names[i], port=port, side="sender" if d == "tx" else "receiver",
                                  engine=engine) for s in ss]
                span = [min(s.t_start for s in ss), max(s.t_end for s in ss)]
                n = sum(s.value for s in ss)
                sides[d][port] = {"sent": n, "span": span} if d == "tx" else {"packets": n, "span": span,
                                                                               "mode": "not recorded"}
                hosts[d].append(names[i])
            ports = max(len(sides["tx"]), len(sides["rx"]), 1)
            ip = int(common(p.params.get("ip") for p in files) or 4)
            # pkt-gen's threads per port; trafgen sends from one thread per CPU it was given
            threads = int(common(p.params.get("threads") or p.params.get("cpus") for p in files) or 1)
            size = common(p.params.get("frame_size") for p in files)
            key = f"{engine}/ipv{ip}/p{ports}/t{threads}" + (f"/{size}B" if size else "")
            duration = max((s.t_end - s.t_start for s in samples), default=0.0)
            if not size:
                notes.append("no frame size: the files do not say one")
            if not sides["rx"]:
                notes.append("no receiver's file: the point's figure is what was sent, not what arrived")
            elif not sides["tx"]:
                notes.append("no sender's file: the point's figure is what arrived; nothing says what was sent")
            params = {"engine": engine, "ip": ip, "ports": ports, "threads": threads, "frame_size": size,
                      "duration": duration, "rate": None, "direction": "tx"}
            meta = {"engine": engine, "generator": ", ".join(hosts["tx"]) or None,
                    "receiver": ", ".join(hosts["rx"]) or None, "tx": sides["tx"], "rx": sides["rx"]}
            basis = "sent, not received (no receiver's file)" if not sides["rx"] else ""
            trials.append(ImportedTrial(key, params, tuple(samples), meta, g.files, notes=tuple(notes), basis=basis))
        return ImportedRun(tuple(trials), {"trim": 0.0})
