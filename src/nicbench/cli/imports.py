"""``nicbench import``: outputs a user ran by hand become a run like any other."""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from .. import __version__
from ..core.errors import InputError, NicbenchError
from ..core.units import UnitError, parse_size
from ..plan.matrix import point_key
from ..records import RawOutput, RunInfo, Sample, TrialRecord, TrialSpec, make_tags
from ..store.runs import RunWriter, new_run_id
from ..tools import iperf2, iperf3
from ..tools.base import FlowInterval
from .options import emit, json_option, refuse_unused, store_dir, store_option

DIR = {"fwd": "tx", "rev": "rx"}


def _samples(tid: str, host: str, proc: str, anchor: float | None, ivs: Sequence[FlowInterval]) -> list[Sample]:
    out = []
    for iv in ivs:
        t0 = iv.abs_start if iv.abs_start is not None else (anchor or 0.0) + iv.start
        tags = make_tags(host=host, proc=proc, direction=DIR[iv.flow], side=iv.side,
                         omitted=1 if iv.omitted else 0, streams=iv.streams)
        out.append(Sample(tid, "tcp.bytes", float(iv.bytes), "bytes", t0, t0 + iv.end - iv.start, tags))
        if iv.retransmits is not None:
            out.append(Sample(tid, "tcp.retransmits", float(iv.retransmits), "count", t0,
                              t0 + iv.end - iv.start, tags))
    return out


def import_files(tool: str, files: list[Path], *, store: Path, name: str, role: str | None,
                 io_size: int | None, connections: int | None, together: bool,
                 port: int | None = None) -> tuple[str, Path, int]:
    if not files:
        raise InputError("no files given", where="import", hint="nicbench import iperf3 out1.json out2.json")
    parsed: list[tuple[Path, dict[str, Any], float | None, Sequence[FlowInterval]]] = []
    for f in files:
        try:
            text = f.read_text(errors="replace")
        except OSError as e:
            raise InputError(f"cannot read: {e}", where=str(f)) from None
        try:
            if tool == "iperf3":
                rep = iperf3.parse(text)
                if rep.error:
                    raise InputError(f"the iperf3 run failed: {rep.error}", where=str(f),
                                     hint="import only successful runs")
                d = "bidir" if rep.bidir else "rx" if rep.reverse else "tx"
                params: dict[str, Any] = {"direction": d, "connections": connections or rep.num_streams or 1,
                          "io_size": io_size or rep.blksize, "engine": "iperf3"}
                parsed.append((f, params, float(rep.timesecs or 0), rep.intervals))
            else:
                if role not in ("client", "server"):
                    raise InputError("iperf2 CSV does not say which end wrote it", where=str(f),
                                     hint="pass --role client or --role server")
                rep2 = iperf2.parse(text, role=role, server_port=port)  # type: ignore[arg-type]
                flows = {iv.flow for iv in rep2.intervals}
                d = "bidir" if flows == {"fwd", "rev"} else "rx" if flows == {"rev"} else "tx"
                streams = max((iv.streams for iv in rep2.intervals), default=1)
                params = {"direction": d, "connections": connections or streams, "io_size": io_size,
                          "engine": "iperf2"}
                parsed.append((f, params, None, rep2.intervals))
        except NicbenchError as e:
            if isinstance(e, InputError):
                raise
            raise InputError(e.message, where=str(f), hint=e.hint) from None
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"not {tool} output nicbench understands ({type(e).__name__}: {e})",
                             where=str(f), hint="iperf3 files need -J; iperf2 files need -y C") from None
    run_id = new_run_id(name)
    info = RunInfo(run_id, name, "tcp", time.time(), "", "import", __version__,
                   {"imported_from": [str(f) for f in files], "engine": tool, "trim": 0.0})
    w = RunWriter.create(store, info)
    groups = [parsed] if together else [[p] for p in parsed]
    seen: dict[str, int] = {}
    for i, group in enumerate(groups):
        params = group[0][1]
        io = params["io_size"]
        point = point_key(params["direction"], int(params["connections"]), int(io)) if io \
            else f"{params['direction']}/c{params['connections']}"
        rep_n = seen.get(point, 0)
        seen[point] = rep_n + 1
        tid = f"t{i + 1:04d}"
        spec = TrialSpec(tid, i, "tcp", point, rep_n, params)
        samples: list[Sample] = []
        raws = []
        for f, _p, anchor, ivs in group:
            dest = w.raw_dir(tid) / f.name
            shutil.copyfile(f, dest)
            raws.append(RawOutput(tid, f.stem, role or "client", tool, "stdout", w.rel(dest)))
            # iperf3 stamps only whole seconds: files run together are taken as
            # started together rather than misaligned by up to a second
            samples += _samples(tid, f.stem, "0", 0.0 if together else anchor, ivs)
        ts = [s.t_start for s in samples] or [0.0]
        w.write_trial(TrialRecord(spec, "ok", min(ts), max(s.t_end for s in samples) if samples else 0.0,
                                  None, {"imported": [str(g[0]) for g in group]}), samples, raws)
    w.finish("done", ok=len(groups), failed=0)
    return run_id, w.run_dir, len(groups)


@click.command("import")
@click.argument("tool", type=click.Choice(["iperf3", "iperf2"]))
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@store_option
@click.option("--name", default="imported", show_default=True, help="Run name.")
@click.option("--role", type=click.Choice(["client", "server"]), default=None,
              help="iperf2: which end wrote the CSV (required for iperf2).")
@click.option("--io-size", default=None, help="Label points with this IO size (iperf2 CSV lacks it).")
@click.option("--connections", type=int, default=None, help="Label points with this connection count.")
@click.option("--together", is_flag=True, help="The files are parallel clients of one point.")
@click.option("--port", type=int, default=None, help="iperf2: the server port, when the CSV cannot tell.")
@json_option
@click.pass_context
def import_(ctx: click.Context, tool: str, files: tuple[Path, ...], store: Path | None, name: str,
            role: str | None, io_size: str | None, connections: int | None, together: bool,
            port: int | None) -> None:
    """Ingest iperf3 -J JSON or iperf2 -y C CSV files run by hand into a new run."""
    for opt in ("role", "port"):
        refuse_unused(ctx, opt, tool == "iperf2", "applies to iperf2 CSV only: iperf3's JSON says which end "
                      "wrote it and its port", "leave it out for iperf3")
    io = None
    if io_size is not None:
        try:
            io = parse_size(io_size)
        except UnitError as e:
            raise InputError(str(e), where="--io-size") from None
    run_id, run_dir, n = import_files(tool, list(files), store=store_dir(store), name=name, role=role,
                                      io_size=io, connections=connections, together=together, port=port)
    emit(ctx, {"run_id": run_id, "run_dir": str(run_dir), "trials": n},
          f"imported {n} trial(s) as run {run_id}\nnicbench report {run_id} renders it")
