"""UDP results run elsewhere (iperf3 ``-u`` JSON or text, iperf 2 ``-u``
CSV or text) as the UDP study's trials.

Shape, as :mod:`.runner` records it: ``udp.bytes``, ``udp.packets``,
``udp.lost``, ``udp.jitter`` (seconds) and ``udp.out_of_order`` samples
tagged host, proc, direction (tx = the engine client sent), side, omitted,
streams; params direction, clients (the engine processes: one per client
host in the study), streams (per client), rate and rate_bps (offered per
client, bit/s; ``unknown`` when no file says it), datagram_size (bytes),
engine, duration, omit; the point key of the plan schema
(``tx/c1/s1/50M/1400B``); meta ``layout`` (one entry per process, so the
analysis checks every process has receiver data).  Trim 0: an imported
file's intervals are used as they are, its warm-up (``-O``) left out.

The receiver's counts are a UDP point's truth (what arrived, what was lost):
a point with only the senders' figures is refused, never shown as a sent
rate with no loss figure.  No counters, no CPU: the loss cannot be split by
where it happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...core.errors import InputError
from ...importers.adapt import ImportedRun, ImportedTrial, ImportOptions, common
from ...importers.flows import FlowPoint, flow_point
from ...importers.group import Group
from ...importers.model import ParsedFile
from ...plan.studies.udp import point_key, rate_key

UNKNOWN_RATE = "unknown"
# formats whose byte and datagram totals are exact (not rounded text): their
# datagram size can be taken from received bytes / datagrams that arrived
_EXACT = ("iperf3-json", "iperf2-csv")


class UdpImport:
    """The UDP study's import adapter (``importers.adapt.StudyImport``)."""

    kinds = frozenset({"udp"})

    def adapt(self, groups: Sequence[Group], options: ImportOptions) -> ImportedRun:
        trials = [self._trial(g, options) for g in groups]
        engines = [t.params["engine"] for t in trials]
        return ImportedRun(tuple(trials), {
            "engine": common(engines) or ", ".join(sorted({str(e) for e in engines})),
            "engine_version": common(t.meta["engine_version"] for t in trials), "trim": 0.0, "search": False})

    def _trial(self, g: Group, options: ImportOptions) -> ImportedTrial:
        files = list(g.files)
        fp = flow_point(g, "udp")
        names = ", ".join(p.name for p in files)
        if fp.sender_only:
            raise InputError(f"{', '.join(fp.sender_only)}: only the sender's figures (what was sent, not what "
                             "arrived or was lost): a UDP point needs the receiver's report", where=names,
                             hint="iperf3: run the client with -J --get-server-output (or import the server's -J "
                                  "output with it); iperf 2: import the server's -y C output, or a client's text "
                                  "with its Server Report")
        size, how = _datagram_size(fp, files, options)
        clients = len(fp.processes)
        streams = max(1, fp.connections // clients)
        target = common(p.params.get("target_bitrate") for p in files)
        rate_bps = float(target) * streams if target else None      # iperf3's -b is per stream
        rate: float | str = rate_bps if rate_bps else UNKNOWN_RATE
        params: dict[str, Any] = {
            "direction": fp.direction, "clients": clients, "streams": streams, "rate": rate_key(rate),
            "rate_bps": rate_bps,
            "datagram_size": size, "engine": fp.engine, "duration": fp.duration, "omit": fp.omit, "search": False}
        layout = [{"client": label, "port": n, "streams": streams} for n, label in enumerate(fp.processes)]
        meta = {"engine": fp.engine, "engine_version": fp.engine_version, "processes": fp.processes,
                "layout": layout, "datagram_size_from": how}
        notes = list(fp.notes)
        if how != "file":
            notes.append(f"datagram size {size} B {how}")
        basis = (f"{', '.join(fp.whole)} from the receiver's whole-test total, without intervals"
                 if fp.whole else "")
        return ImportedTrial(point_key(fp.direction, clients, streams, rate, size), params, fp.samples, meta,
                             g.files, notes=tuple(notes), basis=basis)


def _datagram_size(fp: FlowPoint, files: Sequence[ParsedFile], options: ImportOptions) -> tuple[int, str]:
    """(bytes, how it was known): the files' own word (iperf3's blksize, iperf
    2's banner), else the exact receiver totals (bytes / datagrams that
    arrived), else ``--io-size``; an InputError when none says it."""
    if fp.io_size:
        return fp.io_size, "file"
    sizes = set()
    for p in files:
        if p.format not in _EXACT:
            continue
        for d in ("tx", "rx"):
            got, n, lost = (p.totals.get(f"{d}.receiver.{k}") for k in ("bytes", "packets", "lost"))
            if got and n is not None and n - (lost or 0) > 0:
                per = got / (n - (lost or 0))
                if abs(per - round(per)) < 1e-6 * per:
                    sizes.add(round(per))
    if len(sizes) == 1:
        return sizes.pop(), "from the receiver's totals (bytes / datagrams that arrived)"
    if options.io_size:
        return options.io_size, "as --io-size gave it"
    raise InputError("the datagram size is not in the file(s), and their totals cannot tell it exactly",
                     where=", ".join(p.name for p in files),
                     hint="give it with --io-size BYTES (the sender's -l; iperf 2's UDP default is 1470)")
