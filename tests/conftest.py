from __future__ import annotations

import os
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
ROOT = Path(__file__).parent.parent


def fixture_text(*parts: str) -> str:
    return FIXTURES.joinpath(*parts).read_text()


def pytest_collection_modifyitems(config, items):
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="end-to-end lab tests need root (CI runs as root)")
    for item in items:
        if "lab" in item.keywords:
            item.add_marker(skip)
