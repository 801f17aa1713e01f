from __future__ import annotations

import os
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).parent.parent


def fixture_text(*parts: str) -> str:
    return FIXTURES.joinpath(*parts).read_text()


def run_cli(capsys, *args: object) -> tuple[int, str, str]:
    """``nicbench ARGS`` in this process: (exit code, stdout, stderr)."""
    from nicbench.cli.main import main
    with pytest.raises(SystemExit) as e:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return int(e.value.code or 0), out, err


def import_json(capsys, store: Path, *args: object) -> dict:
    """``nicbench import --json --store STORE ARGS``, which must succeed: its JSON."""
    import json
    code, out, err = run_cli(capsys, "import", "--json", "--store", store, *args)
    assert code == 0, err
    return json.loads(out)


@pytest.fixture(autouse=True, scope="session")
def _own_data_dir(tmp_path_factory):
    """The default archive is the user's (XDG data dir): tests never read or
    write the real one.  Tests that need a store give --store or their own
    XDG_DATA_HOME; the rest get a throwaway data dir for the session."""
    from nicbench.native.build import home
    saved = {k: os.environ.get(k) for k in ("XDG_DATA_HOME", "NICBENCH_HOME")}
    # what 'nicbench setup' built (nbgen) stays where the set-up command put it
    os.environ["NICBENCH_HOME"] = str(home())
    os.environ["XDG_DATA_HOME"] = str(tmp_path_factory.mktemp("xdg-data"))
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="end-to-end lab tests need root (CI runs as root)")
    for item in items:
        if "lab" in item.keywords:
            item.add_marker(skip)


def _tool_pids(names) -> set[int]:
    """Live (not zombie) processes whose name (comm) is one of ``names``."""
    import subprocess
    out: set[int] = set()
    for n in names:
        r = subprocess.run(["pgrep", "-x", n], capture_output=True, text=True)
        for pid in map(int, r.stdout.split()):
            try:
                if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                    out.add(pid)
            except OSError:
                pass
    return out


@pytest.fixture(autouse=True)
def nothing_left_running(request):
    """A test module that names its tools in ``TOOLS`` gets every test checked
    for processes of those tools it started and left alive (killed ones are
    reaped asynchronously: up to 3 s are allowed)."""
    import time
    names = tuple(getattr(request.module, "TOOLS", ()))
    before = _tool_pids(names) if names else set()
    yield
    if not names:
        return
    deadline = time.monotonic() + 3.0
    while (left := _tool_pids(names) - before) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert left == set(), f"left running: {sorted(left)}"


@pytest.fixture(scope="session")
def pg_server():
    """A throwaway PostgreSQL 15 (tests/pgserver.py), for the whole session."""
    from pgserver import start_server
    if os.geteuid() != 0:
        pytest.skip("the throwaway PostgreSQL is started as the postgres user: needs root (CI runs as root)")
    srv = start_server()
    yield srv
    srv.remove()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request, tmp_path):
    """The same archive test against SQLite (a file in tmp_path) and a fresh
    database on the throwaway PostgreSQL."""
    if request.param == "sqlite":
        yield str(tmp_path / "archive.sqlite")
        return
    srv = request.getfixturevalue("pg_server")
    name = srv.create_db()
    os.environ["NICBENCH_RUNS"] = str(tmp_path / "runs")
    try:
        yield srv.url(name)
    finally:
        os.environ.pop("NICBENCH_RUNS", None)
        srv.drop_db(name)
