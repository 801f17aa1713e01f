#!/usr/bin/env python3
"""Where one ``nicbench import`` of a file spends its CPU, stage by stage, in
one process: start-up (the modules), reading and hashing, the text, the
parse (with its bounds check), grouping and the study's adapter, numbering
the trials, the whole preparation again with the study's analysis (as
``nicbench import`` does it), and the write.  CPU is user + system of this
process (resource.getrusage), wall beside it.

    PYTHONPATH=src .venv/bin/python bench/import_stages.py FILE STORE_DIR
"""

from __future__ import annotations

import resource
import sys
import time


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


_marks: list[tuple[str, float, float]] = []
_c0, _w0 = _cpu(), time.perf_counter()


def _mark(name: str) -> None:
    global _c0, _w0
    c, w = _cpu(), time.perf_counter()
    _marks.append((name, c - _c0, w - _w0))
    _c0, _w0 = c, w


def main() -> None:
    from nicbench.cli import imports as cli
    from nicbench.cli.options import store_location
    from nicbench.importers import parse_file, points
    from nicbench.importers.adapt import ImportOptions
    from nicbench.importers.group import group
    from nicbench.importers.write import records, write_run
    from nicbench.registry import importer_for
    from nicbench.store.archive import Archive
    _mark("start-up (modules)")
    with cli._no_cycle_collector():        # as the command runs
        [src] = cli._read([sys.argv[1]])
        _mark("read and hash")
        text = src.text
        _mark("decode the text")
        p = parse_file(text, src.given)
        _mark("parse (with bounds)")
        items = [(src, p, q) for q in points(p)]
        found = importer_for(p.kind)
        assert found is not None
        study, adapter = found
        imported = adapter.adapt(group([q for _, _, q in items]), ImportOptions())
        _mark("group and adapt")
        records(study, imported)
        _mark("number the trials")
        r = cli._prepare(p.kind, items, together=False, options=ImportOptions(), name="stages", several=False,
                         now=time.time(), forced=False)
        _mark("all of that again, with the study's analysis")
        with Archive.open(store_location(sys.argv[2])) as archive:
            write_run(archive, r.info, r.trials, r.files)
            _mark("write the run")
    for name, c, w in _marks:
        print(f"{c:6.2f} s CPU {w:6.2f} s wall  {name}")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
