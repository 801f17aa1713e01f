"""setuptools hooks (the metadata is pyproject.toml's): the dashboard's
charting library is fetched from the npm registry, pinned and verified, before
the sdist or the wheel's package files are collected (scripts/webassets.py)."""

import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

sys.path.insert(0, str(Path(__file__).resolve().parent / "scripts"))
import webassets  # noqa: E402 - beside this file, in the repository and in the sdist


def _ensure() -> None:
    try:
        webassets.ensure()
    except webassets.Failed as e:
        raise SystemExit(f"nicbench: {e}") from None


class BuildPy(build_py):
    def run(self) -> None:
        _ensure()
        super().run()


class Sdist(sdist):
    def run(self) -> None:
        _ensure()
        super().run()


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
