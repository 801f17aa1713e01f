"""TCP results run elsewhere (iperf3 JSON or text, iperf 2 CSV or text,
netperf TCP_STREAM) as the TCP study's trials.

Shape, as :mod:`.runner` records it: ``tcp.bytes`` (and ``tcp.retransmits``)
samples tagged host, proc, direction (tx = the engine client sent), side,
omitted, streams; params direction, connections (every process's streams),
io_size, engine, duration, omit; the point key of the plan schema
(``tx/c2/io128K``), or ``tx/c2`` when no file says its IO size and
``--io-size`` does not either.  Trial meta: ``sender_only`` (directions
whose figure is the senders', read by the analysis) and where each process
came from.  Trim 0: an imported file's intervals are used as they are, its
warm-up (``-O``) left out.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...importers.adapt import ImportedRun, ImportedTrial, ImportOptions, common
from ...importers.flows import flow_point
from ...importers.group import Group
from ...plan.studies.tcp import point_key


class TcpImport:
    """The TCP study's import adapter (``importers.adapt.StudyImport``)."""

    kinds = frozenset({"tcp"})

    def adapt(self, groups: Sequence[Group], options: ImportOptions) -> ImportedRun:
        trials = []
        for g in groups:
            fp = flow_point(g, "tcp")
            io = fp.io_size or options.io_size
            key = point_key(fp.direction, fp.connections, io) if io else f"{fp.direction}/c{fp.connections}"
            params = {"direction": fp.direction, "connections": fp.connections, "io_size": io,
                      "engine": fp.engine, "duration": fp.duration, "omit": fp.omit}
            meta = {"engine": fp.engine, "engine_version": fp.engine_version, "processes": fp.processes,
                    "sender_only": list(fp.sender_only)}
            basis = "; ".join(
                ([f"{', '.join(fp.sender_only)} sender-side (no receiver figure in the files)"] if fp.sender_only
                 else []) + ([f"{', '.join(fp.whole)} from the receiver's whole-test total, without intervals"]
                             if fp.whole else []))
            trials.append(ImportedTrial(key, params, fp.samples, meta, g.files, notes=fp.notes, basis=basis))
        engines = [t.params["engine"] for t in trials]
        return ImportedRun(tuple(trials), {
            "engine": common(engines) or ", ".join(sorted({str(e) for e in engines})),
            "engine_version": common(t.meta["engine_version"] for t in trials), "trim": 0.0})
