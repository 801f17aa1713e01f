"""``nicbench import``: outputs run by hand or by other harnesses become runs
like any other -- one per study their files belong to -- read by the
study's own analysis and report, and comparable with lab runs.

The front end of :mod:`nicbench.importers` (parse, group, write) and the
studies' import adapters (through the registry).  Before anything is
written, every trial is analysed in memory by its study: a file that yields
no valid point is an error, and the store is left untouched.
"""

from __future__ import annotations

import gc
import re
import shutil
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..core.errors import InputError
from ..core.units import UnitError, parse_size
from ..importers import HINTS, ParsedFile, parse_file, points
from ..importers.adapt import ImportedRun, ImportOptions
from ..importers.detect import FORMATS, TOOLS
from ..importers.group import group
from ..importers.headline import details, headline
from ..importers.write import SourceFile, provenance, read_source, records, write_run
from ..records import RunInfo, Sample, TrialRecord
from ..registry import STUDIES, VIEWS, importer_for
from ..report.catalogue import summarise
from ..report.view import RunView, StoredRun
from ..store.archive import Archive
from ..store.names import check_name, new_run_id
from .options import emit, json_option, quoted, store_location, store_option

# inputs from this size on are a "large import": parsing and writing them takes
# seconds (a 200 MB iperf3 report: its JSON alone), so each stage is said on a terminal
LARGE = 10_000_000       # bytes


class _Stages:
    """Which stage a large import is in, on stderr when it is a terminal
    (never in a pipe or a log: ``--json`` and scripts read clean streams)."""

    def __init__(self, sources: Sequence[SourceFile]) -> None:
        size = sum(s.size for s in sources)
        self.on = size >= LARGE and _tty()
        self.t0 = time.monotonic()
        self.what = f"{len(sources)} file(s), {size / 1e6:.0f} MB"

    def __call__(self, stage: str) -> None:
        if self.on:
            click.echo(f"nicbench import ({self.what}): {stage} ({time.monotonic() - self.t0:.1f} s)", err=True)


def _tty() -> bool:
    return sys.stderr.isatty()


@contextmanager
def _no_cycle_collector() -> Iterator[None]:
    """The import without Python's cycle collector.

    A 200 MB iperf3 report is millions of objects (its JSON tree, then
    hundreds of thousands of intervals and samples), all alive until the
    import ends, and none in a reference cycle: each full collection walked
    them all again, about a fifth of the import's CPU time (5 of 22 s).
    Memory is unchanged (nothing it would collect is made); the collector
    is on again after, if it was before."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@dataclass(frozen=True)
class _Run:
    """One study's import, made and checked, not yet written."""

    study: str
    info: RunInfo
    imported: ImportedRun
    trials: list[tuple[TrialRecord, list[Sample]]]
    files: dict[str, list[tuple[ParsedFile, SourceFile]]]      # trial id -> its files
    figures: list[dict[str, Any]]
    analysed: RunView      # the study's analysis of these trials: stored as the run's decisions once written


def _force(args: list[str], as_: str | None) -> tuple[str | None, list[str]]:
    """``--as``, or the old positional tool name (``nicbench import iperf3 FILE``)
    when the first argument names a tool and is not a file."""
    if args and (args[0] in TOOLS or args[0] in FORMATS) and not Path(args[0]).exists():
        if as_ and as_ != args[0]:
            raise InputError(f"the tool is given twice: {args[0]!r} and --as {as_!r}", where="import",
                             hint="give it once, with --as")
        return args[0], args[1:]
    if len(args) > 1 and not Path(args[0]).exists() and re.fullmatch(r"[A-Za-z][A-Za-z0-9_+-]*", args[0]) \
            and any(Path(a).exists() for a in args[1:]):
        # a word before existing files is a tool's name (the old form), not a missing file
        raise InputError(f"unknown tool {args[0]!r}: nicbench imports {', '.join(sorted(TOOLS))}",
                         where="import", hint=f"name one of those tools (or --as a format: {', '.join(FORMATS)}), "
                                              "or leave the tool out and let nicbench detect each file's format")
    if as_ is not None and as_ not in TOOLS and as_ not in FORMATS:
        raise InputError(f"unknown format {as_!r}", where="--as",
                         hint=f"a tool ({', '.join(sorted(TOOLS))}) or a format ({', '.join(FORMATS)})")
    return as_, args


def _read(args: Sequence[str]) -> list[SourceFile]:
    if not args:
        raise InputError("no files given", where="import", hint="nicbench import FILE... (nicbench import --help)")
    seen: dict[Path, str] = {}
    for a in args:
        p = Path(a).expanduser().absolute()
        if p in seen:
            raise InputError(f"given twice (also as {seen[p]})", where=a, hint="give each file once")
        seen[p] = a
    sources = [read_source(a) for a in args]
    digests: dict[str, str] = {}
    for s in sources:
        if s.sha256 in digests:
            raise InputError(f"same content as {digests[s.sha256]}: one measurement imported twice would count "
                             "twice", where=s.given, hint="give each measurement once")
        digests[s.sha256] = s.given
    return sources


def _check(study: str, info: RunInfo, trials: list[tuple[TrialRecord, list[Sample]]],
           files: dict[str, list[tuple[ParsedFile, SourceFile]]]) -> tuple[list[dict[str, Any]], RunView]:
    """The study's own analysis of the trials, before anything is written: a
    trial it rejects is an error naming its files; returns each point's
    figure, and the analysed run (what the archive's summary stores)."""
    view = STUDIES[study].view
    stored = StoredRun(Path(info.run_id), info, {}, [r for r, _ in trials], {r.spec.trial_id: s for r, s in trials},
                       ())
    analysed = view.analyse(stored)
    judged = {r.spec.trial_id: r.status for r, _ in trials}
    for t in analysed.trials:
        if t.status == "failed" and judged.get(t.trial_id) == "failed":
            continue        # failed by its adapter for what the file says (wrk's non-2xx): kept, figures visible
        if t.status not in ("ok", "partial"):
            fs = files.get(t.trial_id, [])
            fmt = fs[0][0].format if fs else ""
            raise InputError(f"no valid {study} point ({t.point}): {t.error or 'rejected by the analysis'}",
                             where=", ".join(dict.fromkeys(src.given for _, src in fs)) or study,
                             hint=f"the {study} study rejects it as it would a lab run's point; "
                                  f"{HINTS.get(fmt, 'check the files')}")
    rv = RunView(stored.run_dir, info, {}, analysed.trials, analysed.points, stored.link, (), stored.samples)
    cv = view.compare_values(rv)[0]       # the headline figure
    out = []
    for point, vals in cv.values.items():
        out.append({"point": point, "metric": cv.metric, "value": statistics.median(vals), "repeats": len(vals)})
    return out, rv


def _prepare(kind: str, items: list[tuple[SourceFile, ParsedFile, ParsedFile]], *, together: bool,
             options: ImportOptions, name: str, several: bool, now: float, forced: bool) -> _Run:
    """One study's run of the files of ``kind`` (each file with its parsed
    whole and one of its points), made and checked by the study's analysis."""
    found = importer_for(kind)
    if found is None:
        raise InputError(f"no study imports {kind} results",
                         where=", ".join(dict.fromkeys(src.given for src, _, _ in items)),
                         hint="import the other files on their own")
    study, adapter = found
    imported = adapter.adapt(group([q for _, _, q in items], together), options)
    trials = records(study, imported)
    src_of = {id(q): (src, p) for src, p, q in items}
    files = {rec.spec.trial_id: [(q, src_of[id(q)][0]) for q in t.files]
             for (rec, _), t in zip(trials, imported.trials, strict=True)}
    points_of: dict[str, list[str]] = defaultdict(list)
    for (rec, _), t in zip(trials, imported.trials, strict=True):
        for q in t.files:
            points_of[src_of[id(q)][0].given].append(rec.spec.point)
    seen: set[str] = set()
    prov = []
    for src, p, _ in items:
        if src.given not in seen:
            seen.add(src.given)
            prov.append(provenance(src, p, forced, list(dict.fromkeys(points_of[src.given]))))
    warnings = [f"{t.point}: {n}" for t in imported.trials for n in t.notes]
    run_name = f"{name}-{study}" if several else name
    info = RunInfo(new_run_id(run_name, now), run_name, study, now, "", "import", __version__,
                   {**imported.meta, "imported": prov, "warnings": list(dict.fromkeys(warnings))})
    return _Run(study, info, imported, trials, files, *_check(study, info, trials, files))


@click.command("import")
@click.argument("files", nargs=-1, metavar="FILE...")
@click.option("--as", "as_", default=None, metavar="FORMAT",
              help="Read every file as this tool or format instead of detecting it: "
                   f"{', '.join(sorted(TOOLS))}, or {', '.join(FORMATS)}.")
@click.option("--role", type=click.Choice(["client", "server"]), default=None,
              help="Which end wrote the files, for outputs that do not say (iperf 2 CSV).")
@click.option("--together", is_flag=True, help="All files are one point, run in parallel.")
@click.option("--io-size", default=None, metavar="SIZE",
              help="IO (or block) size of points whose files do not say it, e.g. 128K (netperf *_RR: the "
                   "request and response size).")
@click.option("--protocol", type=click.Choice(["tcp", "udp"]), default=None,
              help="Protocol of request/response files that do not say it (sockperf's --full-log).")
@click.option("--name", default="imported", show_default=True,
              help="Run name: letters, digits, '.', '_', '-' (at most 64).")
@store_option
@json_option
@click.pass_context
def import_(ctx: click.Context, files: tuple[str, ...], as_: str | None, role: str | None, together: bool,
            io_size: str | None, protocol: str | None, name: str, store: str | None) -> None:
    """Turn outputs of iperf3, iperf 2, fio, wrk/wrk2, netmap pkt-gen, trafgen,
    netperf, sockperf, irtt, NTttcp and nuttcp, run by hand or by other harnesses, into runs with the same
    report as nicbench's own, comparable with them (nicbench compare).

    Each file's format is detected and said (--as forces one; the old form
    'nicbench import iperf3 FILE...' still works).  iperf3 -J or text, iperf
    2 -y C or text, fio JSON, wrk text, pkt-gen and trafgen console output,
    netperf output.

    \b
    Grouping: files of one point run in parallel (several clients, several
    ports, both ends of one test) are imported together as one point; files
    of different points or repeats are told apart from what they contain --
    direction, streams, IO size, and their clocks (files of the same point
    that did not overlap in time are repeats).  Files without a clock (text
    outputs) of the same point are taken as run together.  --together forces
    every file into one point.

    Files of different kinds (TCP, UDP, storage, HTTP, packets,
    request/response) become one run per study.  Nothing is written unless
    every file yields a valid point.  netperf TCP_RR/UDP_RR results go to
    the latency study: they need netperf's latency selectors (-- -o
    ...,P50_LATENCY,P90_LATENCY,P99_LATENCY,MAX_LATENCY) and their request
    size (-o REQUEST_SIZE,RESPONSE_SIZE, or --io-size).  sockperf ping-pong
    and under-load (its client output, or its --full-log with --protocol)
    and irtt JSON go there too, as the study's own probes would.
    """
    check_name(name)
    with _no_cycle_collector():
        _import(ctx, files, as_, role, together, io_size, protocol, name, store)


def _import(ctx: click.Context, files: tuple[str, ...], as_: str | None, role: str | None, together: bool,
            io_size: str | None, protocol: str | None, name: str, store: str | None) -> None:
    force, args = _force(list(files), as_)
    size = None
    if io_size is not None:
        try:
            size = parse_size(io_size)
        except UnitError as e:
            raise InputError(str(e), where="--io-size") from None
    options = ImportOptions(io_size=size, protocol=protocol)
    sources = _read(args)
    stage = _Stages(sources)
    parsed = []
    for src in sources:
        stage(f"parsing {src.given}")
        parsed.append((src, parse_file(src.text, src.given, force=force, role=role)))  # type: ignore[arg-type]
    by_kind: dict[str, list[tuple[SourceFile, ParsedFile, ParsedFile]]] = defaultdict(list)
    for src, p in parsed:
        for q in points(p):
            by_kind[q.kind].append((src, p, q))
    now = time.time()
    stage("making and checking the points (the study's analysis)")
    runs = [_prepare(kind, items, together=together, options=options, name=name, several=len(by_kind) > 1,
                     now=now, forced=force is not None) for kind, items in by_kind.items()]
    written: list[Path] = []
    with Archive.open(store_location(store)) as archive:
        try:
            for r in runs:
                stage(f"writing run {r.info.run_id} ({sum(len(x) for _, x in r.trials)} samples)")
                written.append(write_run(archive, r.info, r.trials, r.files))
        except BaseException:
            # all or nothing: a later run failing to write takes the earlier ones back
            # (a kill -9 here leaves only hidden rows: 'nicbench recover' clears them)
            for r, d in zip(runs, written, strict=False):
                archive.delete_run(r.info.run_id)
                shutil.rmtree(d, ignore_errors=True)
            raise
        stage("storing the per-point figures")
        for r in runs:
            # the per-point figures trends and the dashboard read, from the analysis
            # the run was checked with (the records and samples just written)
            summarise(archive, r.info.run_id, VIEWS, r.analysed)
        stage("done")
    emit(ctx, _json(parsed, runs, written, force), _text(parsed, runs, force, store))


def _file_line(src: SourceFile, p: ParsedFile, forced: bool, study: str | None) -> tuple[str, list[dict[str, Any]]]:
    heads: list[dict[str, Any]] = []
    for q in points(p):
        lb, v, unit = headline(q)
        heads.append({"label": lb, "value": v, "unit": unit,
                      "details": [{"label": a, "value": b, "unit": c} for a, b, c in details(q)]})
    how = "as asked" if forced else "detected"
    figs = "; ".join(f"{_scaled(h['value'], h['unit'])} ({h['label']})" for h in heads)
    return (f"{src.given}: {p.format} ({how}), {p.tool} {p.version or '(version not in the file)'}, "
            f"{p.role or 'role not in the file'} -> {study} study; the file says {figs}"), heads


def _scaled(v: float, unit: str) -> str:
    """A figure with a decimal prefix: 17.0305 Gbit/s, 132.492 MB/s, 909.093 kpps, 18.034 us."""
    if unit == "s":
        return f"{v * 1e3:.6g} ms" if v >= 1e-3 else f"{v * 1e6:.6g} us"
    for k, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= k and unit in ("bit/s", "B/s", "pps"):
            return f"{v / k:.6g} {prefix}{unit if unit != 'B/s' else 'B/s'}"
    return f"{v:.6g} {unit}"


def _study_of(p: ParsedFile, runs: Sequence[_Run]) -> _Run:
    return next(r for r in runs if any(f["name"] == p.name for f in r.info.meta["imported"]))


def _text(parsed: list[tuple[SourceFile, ParsedFile]], runs: list[_Run], force: str | None,
          store: str | None) -> str:
    lines = [_file_line(src, p, force is not None, _study_of(p, runs).study)[0] for src, p in parsed]
    if len(runs) > 1:
        lines.append(f"the files hold {len(runs)} kinds of results: one run each "
                     f"({', '.join(r.study for r in runs)})")
    for r in runs:
        n_pts = len({rec.spec.point for rec, _ in r.trials})
        lines.append(f"run {r.info.run_id}: {r.study} study, {n_pts} point(s), {len(r.trials)} trial(s)")
        basis = {t.point: t.basis for t in r.imported.trials if t.basis}
        for f in r.figures:
            rep = f"{f['repeats']} repeats, median" if f["repeats"] > 1 else "1 repeat"
            b = basis.get(f["point"].removesuffix(" (sent)"))
            # a figure not taken as the study's runner takes it: its unit, then how it was taken
            metric = f["metric"].split(" (")[0].removesuffix(" sent").removesuffix(" received") if b else f["metric"]
            lines.append(f"  {f['point']}: {metric} {f['value']:.6g} ({rep})" + (f" -- {b}" if b else ""))
        for f in _failed(r):
            lines.append(f"  {f['point']}: failed -- {f['error']}"
                         + (f" ({f['requests_per_s']:.6g} requests/s over {f['seconds']:g} s)"
                            if f.get("requests_per_s") and f.get("seconds") else ""))
        for w in r.info.meta["warnings"]:
            lines.append(f"  note: {w}")
        again = quoted("nicbench", "report", r.info.run_id, *(("--store", store) if store else ()))
        lines.append(f"  {again} renders it")
    return "\n".join(lines)


def _failed(r: _Run) -> list[dict[str, Any]]:
    """The trials imported as failed (their adapter's judgement of what the file
    says, e.g. wrk's non-2xx answers): why, and what was counted all the same."""
    out = []
    for t in r.analysed.trials:
        if t.status != "failed":
            continue
        d: dict[str, Any] = {"point": t.point, "trial_id": t.trial_id, "error": t.error}
        for k in ("requests_per_s", "seconds", "requests", "socket_errors", "bad_status"):
            v = getattr(t, k, None)
            if v is not None:
                d[k] = v
        out.append(d)
    return out


def _json(parsed: list[tuple[SourceFile, ParsedFile]], runs: list[_Run], written: list[Path],
          force: str | None) -> dict[str, Any]:
    files = []
    for src, p in parsed:
        r = _study_of(p, runs)
        _, heads = _file_line(src, p, force is not None, r.study)
        files.append({"name": src.given, "format": p.format, "format_forced": force is not None, "tool": p.tool,
                      "version": p.version, "role": p.role, "kind": p.kind, "study": r.study,
                      "run_id": r.info.run_id, "headline": heads, "notes": list(p.notes),
                      "dropped": list(p.dropped)})
    out: dict[str, Any] = {
        "files": files,
        "runs": [{"run_id": r.info.run_id, "run_dir": str(d), "study": r.study, "trials": len(r.trials),
                  "points": r.figures, "failed": _failed(r), "notes": r.info.meta["warnings"],
                  "basis": {t.point: t.basis for t in r.imported.trials if t.basis}}
                 for r, d in zip(runs, written, strict=True)],
        "run_ids": [r.info.run_id for r in runs]}
    if len(runs) == 1:
        out["run_id"], out["run_dir"] = runs[0].info.run_id, str(written[0])
    return out
