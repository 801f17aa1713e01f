"""The code checks run with the suite, so CI fails on a finding: ruff (the rule
set in pyproject.toml), mypy, and the import contracts of the one-way data flow."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.mark.parametrize("argv", [
    ["ruff", "check", "--no-cache", "src", "tests", "bench"],
    ["mypy"],
    ["lint-imports"],
], ids=["ruff", "mypy", "import-contracts"])
def test_code_check_is_clean(argv):
    r = subprocess.run([str(BIN / argv[0]), *argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]


def test_no_module_imports_itself_back():
    """No import circle between nicbench's modules (type-only imports included)."""
    import grimp

    g = grimp.build_graph("nicbench")
    cycles = [(a, b) for a in g.modules for b in g.find_modules_directly_imported_by(a)
              if g.find_shortest_chain(importer=b, imported=a) is not None]
    assert cycles == []
