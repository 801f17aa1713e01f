"""The dashboard's charting library, fetched from the npm registry at BUILD time.

``nicbench serve`` draws its charts with uPlot (https://github.com/leeoniya/uPlot,
MIT).  Nothing is fetched when the dashboard runs and nothing comes from a CDN:
this script packs one pinned version with ``npm pack`` into a temporary
directory, checks the tarball against the registry integrity pinned here
(sha512, as npm's lockfiles pin it), and copies the minified script, its CSS
and its licence into ``src/nicbench/web/static/vendor/`` (git-ignored), which
the wheel carries as package data.  ``scripts/install.sh`` runs it, and so do
setup.py's ``build_py`` and ``sdist`` (so ``python -m build`` puts the files in
the sdist and the wheel).  Idempotent: when the files are there with the
checksums of the stamp it wrote, it does nothing and needs no npm.

    python3 scripts/webassets.py [--check]
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE = "uplot"
VERSION = "1.6.32"
# `npm view uplot@1.6.32 dist.integrity`: the registry's sha512 of the tarball
INTEGRITY = "sha512-KIMVnG68zvu5XXUbC4LQEPnhwOxBuLyW1AHtpm6IKTXImkbLgkMy+jabjLgSLMasNuGGzQm/ep3tOkyTxpiQIw=="
# tarball member -> file in the static directory
FILES = {"package/dist/uPlot.iife.min.js": "uPlot.iife.min.js",
         "package/dist/uPlot.min.css": "uPlot.min.css",
         "package/LICENSE": "uPlot.LICENSE"}
DEST = Path(__file__).resolve().parents[1] / "src" / "nicbench" / "web" / "static" / "vendor"
STAMP = "VERSION.json"


class Failed(Exception):
    """One line for the user: what failed and what to do."""


def _sha256(p: Path) -> str:
    return hashlib.sha256(p.read_bytes()).hexdigest()


def current(dest: Path = DEST) -> bool:
    """The pinned version's files are in ``dest``, unchanged since they were copied."""
    try:
        stamp = json.loads((dest / STAMP).read_text())
    except (OSError, ValueError):
        return False
    if stamp.get("package") != PACKAGE or stamp.get("version") != VERSION or stamp.get("integrity") != INTEGRITY:
        return False
    files = stamp.get("files") or {}
    return set(files) == set(FILES.values()) and all(
        (dest / name).is_file() and _sha256(dest / name) == sha for name, sha in files.items())


def _pack(tmp: Path) -> Path:
    npm = shutil.which("npm")
    if npm is None:
        raise Failed("npm is not installed: it fetches the dashboard's charting library at build time "
                     "(hint: apt-get install npm, or scripts/install.sh)")
    try:
        p = subprocess.run([npm, "pack", f"{PACKAGE}@{VERSION}", "--json", "--ignore-scripts",
                            "--pack-destination", str(tmp)], capture_output=True, text=True, timeout=300, cwd=tmp)
    except subprocess.TimeoutExpired:
        raise Failed(f"npm pack {PACKAGE}@{VERSION} took over 300 s (hint: is the npm registry reachable?)") from None
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["no message"])[-1]
        raise Failed(f"npm pack {PACKAGE}@{VERSION} failed (exit {p.returncode}): {tail} "
                     "(hint: the npm registry must be reachable, or its cache hold the package)")
    tgz = tmp / f"{PACKAGE}-{VERSION}.tgz"
    if not tgz.is_file():
        raise Failed(f"npm pack {PACKAGE}@{VERSION} wrote no {tgz.name}")
    return tgz


def _verify(tgz: Path) -> None:
    got = "sha512-" + base64.b64encode(hashlib.sha512(tgz.read_bytes()).digest()).decode()
    if got != INTEGRITY:
        raise Failed(f"{tgz.name}: integrity {got} is not the pinned {INTEGRITY} "
                     "(hint: the registry served another file; do not ship it)")


def fetch(dest: Path = DEST) -> None:
    """Pack, verify and copy the pinned files into ``dest`` (replacing what is there)."""
    with tempfile.TemporaryDirectory(prefix="nicbench-webassets-") as t:
        tmp = Path(t)
        tgz = _pack(tmp)
        _verify(tgz)
        with tarfile.open(tgz) as tar:
            names = set(tar.getnames())
            missing = [m for m in FILES if m not in names]
            if missing:
                raise Failed(f"{tgz.name} lacks {', '.join(missing)}")
            # fixed member names, so nothing lands outside tmp; the "data" filter where this Python has it
            kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(tmp / "x", members=[tar.getmember(m) for m in FILES], **kw)
        dest.mkdir(parents=True, exist_ok=True)
        files = {}
        for member, name in FILES.items():
            shutil.copyfile(tmp / "x" / member, dest / name)
            files[name] = _sha256(dest / name)
        (dest / STAMP).write_text(json.dumps({"package": PACKAGE, "version": VERSION, "integrity": INTEGRITY,
                                              "files": files}, indent=1) + "\n")


def ensure(dest: Path = DEST) -> bool:
    """Fetch unless current; True when it fetched."""
    if current(dest):
        return False
    fetch(dest)
    return True


def main(argv: list[str]) -> int:
    try:
        if "--check" in argv:
            ok = current()
            print(f"{PACKAGE} {VERSION}: {'present' if ok else 'missing or changed'} in {DEST}")
            return 0 if ok else 1
        if ensure():
            print(f"nicbench: {PACKAGE} {VERSION} fetched and verified into {DEST}", file=sys.stderr)
        return 0
    except Failed as e:
        print(f"nicbench: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
