"""Every figure an import stores stays what it was (issue 33 item 6: the
import was made faster; results are sacred).

Real fixture files (the iperf3 JSON and text, iperf 2 and netperf files the
traffic path reads, both ends of one test imported together, and a long
report made from a real one, as bench/import_scale.py makes it) are
imported with ``nicbench import``, and everything the archive then holds of
them -- every sample to the last bit, every trial, point, per-point figure,
raw file row, label, and the run's summary and meta, with only what names
the moment or the machine left out -- is compared with what the import
stored before the speed work (main at ce0bf82), kept as digests in
``tests/fixtures/import/stored_figures.json``.

A change that is meant to change what an import stores (a format fix)
regenerates that file and says so in its commit::

    PYTHONPATH=src .venv/bin/python tests/unit/test_import_figures_kept.py
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "fixtures" / "import" / "stored_figures.json"

sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "unit"))

# one import each (paths relative to the repository, as a user would name them)
SINGLE = sorted(
    [str(p.relative_to(ROOT)) for p in (ROOT / "tests/fixtures/iperf3/3.12").glob("*.json")]
    + [str(p.relative_to(ROOT)) for d in ("iperf3", "iperf3-text", "iperf2", "iperf2-text", "netperf")
       for p in (ROOT / "tests/fixtures/import" / d).rglob("*") if p.is_file()])
# files imported together: both ends of one test, and two clients of one point
TOGETHER = [
    ("tests/fixtures/import/iperf3/local/client_tx_p2_noserver.json",
     "tests/fixtures/import/iperf3/local/server_tx_p2.json"),
    ("tests/fixtures/import/iperf2/local/client_dual.csv", "tests/fixtures/import/iperf2/local/server_dual.csv"),
    ("tests/fixtures/iperf3/3.12/tx_p2.json", "tests/fixtures/iperf3/3.12/rx_p2.json"),
]
# iperf 2 CSV files that do not say which end wrote them
ROLE = [("client", "tests/fixtures/import/iperf2/ext/iperf2_syno4862.csv"),
        ("client", "tests/fixtures/import/iperf2/local/client_dual.csv"),
        ("server", "tests/fixtures/import/iperf2/local/server_dual.csv")]
LONG = (300, 2000)      # intervals of the long reports made from tx_p2.json

# what names the moment, the machine or the archive's own numbering, not the measurement
_VOLATILE = {"run_id", "created", "finished", "heartbeat", "run_dir", "machine", "boot_id", "pid", "pid_start",
             "rid", "path"}


def _clean(v: object) -> object:
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items() if k not in _VOLATILE}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def _cell(v: object) -> object:
    if isinstance(v, float):
        return float.hex(v)          # to the last bit
    if isinstance(v, str) and v[:1] in "{[":
        try:
            return _clean(json.loads(v))
        except ValueError:
            return v
    return v


def stored(store: Path) -> dict[str, object]:
    """What the archive at ``store`` holds, per table: a digest of its rows
    (every column but the volatile ones, floats as hex) and their count."""
    from nicbench.store.archive import Archive
    from nicbench.store.location import parse_store

    out: dict[str, object] = {}
    with Archive.open(parse_store(str(store))) as a:
        for table in ("runs", "trials", "samples", "points", "point_values", "raw_outputs", "labels"):
            cols = [r[1] for r in a.db.query(f"PRAGMA table_info({table})") if r[1] not in _VOLATILE]
            rows = a.db.query(f"SELECT {', '.join(cols)} FROM {table} ORDER BY {', '.join(cols)}")
            text = json.dumps([[_cell(v) for v in r] for r in rows], sort_keys=True)
            out[table] = {"rows": len(rows), "sha256": hashlib.sha256(text.encode()).hexdigest()}
        heads = a.db.query("SELECT headline_metric, headline_value, headline_point FROM runs ORDER BY name")
        out["headline"] = [[m, v, p] for m, v, p in heads]      # readable beside the digests
    return out


def cases() -> dict[str, list[str]]:
    """Each case's name and the files it imports (from the repository)."""
    out = {f: [f] for f in SINGLE}
    out.update({" + ".join(fs): list(fs) for fs in TOGETHER})
    out.update({f"--role {r} {f}": ["--role", r, f] for r, f in ROLE})
    return out


def long_file(n: int, where: Path) -> str:
    """The long report of ``n`` intervals, written into ``where`` (the current
    directory then: its name is stored), by its name there."""
    from test_import_scale import long_report

    (where / f"long{n}.json").write_text(long_report(n))
    return f"long{n}.json"


def import_case(files: list[str], store: Path, run: Callable[..., tuple[int, str, str]]) -> dict[str, object]:
    code, out, err = run("import", "--json", "--store", store, *files)
    if code != 0:
        return {"refused": code, "error": err.strip().replace(str(ROOT) + "/", "")}
    return stored(store)


@pytest.fixture(scope="module")
def golden() -> dict[str, object]:
    return json.loads(GOLDEN.read_text())


def test_the_golden_file_covers_every_case(golden):
    assert set(golden) == set(cases()) | {f"long report of {n} intervals" for n in LONG}
    # most cases import (their rows are compared), and what they stored is there
    kept = [v for v in golden.values() if "refused" not in v]
    # (a netperf RR table is one summary: a point and no samples)
    assert len(kept) > 30 and all(v["runs"]["rows"] == 1 and v["points"]["rows"] > 0 for v in kept)
    assert sum(v["samples"]["rows"] > 0 for v in kept) > 30


@pytest.mark.parametrize("name", sorted(cases()))
def test_an_import_stores_what_it_stored_before(name, golden, tmp_path, capsys, monkeypatch):
    from conftest import run_cli
    monkeypatch.chdir(ROOT)
    got = import_case(cases()[name], tmp_path / "store", lambda *a: run_cli(capsys, *a))
    assert got == golden[name]


@pytest.mark.parametrize("n", LONG)
def test_a_long_import_stores_what_it_stored_before(n, golden, tmp_path, capsys, monkeypatch):
    from conftest import run_cli
    monkeypatch.chdir(tmp_path)
    got = import_case([long_file(n, tmp_path)], tmp_path / "store", lambda *a: run_cli(capsys, *a))
    assert "refused" not in got and got["samples"]["rows"] > 2 * n      # type: ignore[index]
    assert got == golden[f"long report of {n} intervals"]


def _regenerate() -> None:
    import os
    import tempfile
    from contextlib import redirect_stderr, redirect_stdout
    from io import StringIO

    from nicbench.cli.main import main

    def run(*args: object) -> tuple[int, str, str]:
        out, err = StringIO(), StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            try:
                main([str(a) for a in args])
                code = 0
            except SystemExit as e:
                code = int(e.code or 0)
        return code, out.getvalue(), err.getvalue()

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["XDG_DATA_HOME"] = tmp
        result = {}
        os.chdir(ROOT)
        for i, (name, files) in enumerate(sorted(cases().items())):
            result[name] = import_case(files, Path(tmp) / f"store{i}", run)
        os.chdir(tmp)
        for n in LONG:
            result[f"long report of {n} intervals"] = import_case([long_file(n, Path(tmp))],
                                                                  Path(tmp) / f"long-store{n}", run)
        os.chdir(ROOT)
    GOLDEN.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print(f"{GOLDEN.relative_to(ROOT)}: {len(result)} cases, "
          f"{sum('refused' in v for v in result.values())} refused")


if __name__ == "__main__":
    _regenerate()
