"""README.md and docs/: every relative link leads to a file that exists (and to
a heading that exists, when it names one), the README opens with the two
set-up commands CI and newcomers run, and no page reads like a diary."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SETUP = "\n".join([
    "```sh",
    "bash scripts/demo.sh   # as root: installs what it needs, runs seed 000's TCP study on the embedded lab, "
    "prints the report path",
    "bash scripts/test.sh   # as root: installs what it needs, runs the whole test suite (CI runs exactly this)",
    "```", ""])
# [text](target): the target up to the first space or ')' (a title may follow)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)[^)]*\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def prose(text: str) -> str:
    """The page without its fenced code blocks (a link in code is code)."""
    return FENCE.sub("", text)


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to '-'."""
    out = set()
    for m in re.finditer(r"^#{1,6}\s+(.*?)\s*$", prose(page.read_text()), re.M):
        out.add(re.sub(r"[^\w\- ]", "", m[1].strip().lower()).replace(" ", "-"))
    return out


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text())) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def test_there_are_pages_and_links() -> None:
    assert len(PAGES) > 10
    assert len(relative_links(ROOT / "README.md")) >= 12          # the studies table and the documentation index


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.is_file():
            broken.append(f"{target}: no file {dest}")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{target}: no heading '{anchor}' in {dest.name}")
    assert not broken, f"{page.name}: " + "; ".join(broken)


def test_every_docs_page_is_in_the_readme_index() -> None:
    linked = {Path(t.partition("#")[0]).name for t in relative_links(ROOT / "README.md")}
    missing = [p.name for p in PAGES[1:] if p.name not in linked]
    assert not missing, f"docs pages the README does not link: {missing}"


def test_readme_starts_with_the_two_set_up_commands() -> None:
    assert (ROOT / "README.md").read_text().startswith(SETUP)


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_no_diary_language(page: Path) -> None:
    diary = re.compile(r"earlier run|an earlier replay|this session|first session|first attempt|LAB-NOTES|"
                       r"\.\./shared/", re.I)
    hits = [m[0] for m in diary.finditer(page.read_text())]
    assert not hits, f"{page.name}: {hits}"


# `test_x.py` or `tests/e2e/test_x.py`, optionally `::test_name`; a bare `test_name` after it in the
# same paragraph or bullet is a test of that file ("[`test_x.py`: `test_a`, `test_b`]")
CITED_FILE = re.compile(r"^(?:tests/(?:unit|e2e)/)?(test_\w+\.py)(?:::(test_\w+))?$")
CITED_TEST = re.compile(r"^test_\w+$")
TEST_FILES = {p.name: p for d in ("unit", "e2e") for p in (ROOT / "tests" / d).glob("test_*.py")}


def cited_tests(page: Path) -> list[tuple[str, str | None]]:
    """(file name, test name or None) for every test a page cites, in order."""
    out: list[tuple[str, str | None]] = []
    for block in re.split(r"\n\s*\n|\n(?=\s*- )", prose(page.read_text())):
        current: str | None = None
        for span in re.findall(r"`([^`\n]+)`", block):
            if m := CITED_FILE.match(span):
                current = m[1]
                out.append((m[1], m[2]))
            elif current and CITED_TEST.match(span):
                out.append((current, span))
    return out


def test_the_promises_cite_tests() -> None:
    readme = ROOT / "README.md"
    promises = readme.read_text().split("## What nicbench promises", 1)[1].split("\n## ", 1)[0]
    assert promises.count("`test_") >= 30 and len(cited_tests(readme)) >= 30


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_cited_test_exists(page: Path) -> None:
    missing = []
    for name, test in cited_tests(page):
        if name not in TEST_FILES:
            missing.append(f"{name}: no such file in tests/unit or tests/e2e")
        elif test and not re.search(rf"^(?:async )?def {test}\(", TEST_FILES[name].read_text(), re.M):
            missing.append(f"{name}::{test}: no such test")
    assert not missing, f"{page.name}: " + "; ".join(missing)
