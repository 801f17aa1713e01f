"""Build nbgen on demand, into a per-user directory, after checking (and
naming) what the build needs.

nbgen's sources ship inside the package (``native/nbgen``, read-only in a
site-packages); ``nicbench setup`` runs their Makefile with ``OUT`` set to
``<home>/nbgen/<hash>/``, where ``<home>`` is ``$NICBENCH_HOME``, else
``$XDG_DATA_HOME/nicbench``, else ``~/.local/share/nicbench``, and ``<hash>``
is that of the sources: a nicbench with changed sources never runs an old
build, and two nicbench versions on one machine keep their own.

What the build needs: make, a C compiler, clang (BPF target), bpftool, and
the headers of libbpf, libelf, zlib and the kernel's UAPI (asm/types.h for
the BPF target).  Each missing one is named with its Debian/Ubuntu package.
Running nbgen needs a kernel >= 5.18 (XDP live frames) and root.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import PreflightError, ToolError, tail

SOURCES = Path(__file__).with_name("nbgen")
SOURCE_FILES = ("Makefile", "nbgen.c", "nbgen.bpf.c")
MIN_KERNEL = (5, 18)
# tools looked for on PATH, then where Debian puts admin tools (bpftool is in /usr/sbin, often not on a user's PATH)
EXTRA_PATH = ("/usr/sbin", "/sbin", "/usr/local/sbin")
TOOLS = {"make": ("make", "make"), "cc": ("gcc", "gcc"), "clang": ("clang", "clang"),
         "bpftool": ("bpftool", "bpftool")}
# header -> Debian/Ubuntu package; asm/types.h is what the BPF target finds under /usr/include/<multiarch>
HEADERS = {"bpf/libbpf.h": "libbpf-dev", "libelf.h": "libelf-dev", "zlib.h": "zlib1g-dev",
           "asm/types.h": "linux-libc-dev", "stdio.h": "libc6-dev"}


def home() -> Path:
    """Where this user's nicbench keeps what it builds."""
    env = os.environ.get("NICBENCH_HOME")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "share") / "nicbench"


def source_hash() -> str:
    h = hashlib.sha256()
    for name in SOURCE_FILES:
        h.update(name.encode() + b"\0" + (SOURCES / name).read_bytes() + b"\0")
    return h.hexdigest()[:12]


def nbgen_path() -> Path:
    """Where ``nicbench setup`` puts this version's nbgen (it may not exist yet)."""
    return home() / "nbgen" / source_hash() / "nbgen"


def built() -> str | None:
    """This version's nbgen, if it was built and is executable."""
    p = nbgen_path()
    return str(p) if os.access(p, os.X_OK) else None


def find_tool(name: str) -> str | None:
    return shutil.which(name) or next((str(Path(d) / name) for d in EXTRA_PATH
                                       if os.access(Path(d) / name, os.X_OK)), None)


@dataclass
class Requirements:
    """What the build needs and what is missing, each with its package."""

    tools: dict[str, str] = field(default_factory=dict)          # role -> absolute path
    missing: list[tuple[str, str]] = field(default_factory=list)  # (what, Debian/Ubuntu package)
    kernel: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing

    def message(self) -> str:
        return "missing: " + ", ".join(f"{what} (package {pkg})" for what, pkg in self.missing)

    def install_hint(self) -> str:
        pkgs = " ".join(dict.fromkeys(pkg for _, pkg in self.missing))
        return f"on Debian/Ubuntu: sudo apt-get install {pkgs}; then nicbench setup again"


def kernel_version(release: str) -> tuple[int, int] | None:
    m = re.match(r"(\d+)\.(\d+)", release)
    return (int(m.group(1)), int(m.group(2))) if m else None


def check() -> Requirements:
    """Every requirement of the build at once (and the kernel nbgen will need)."""
    req = Requirements(kernel=platform.release())
    for role, (exe, pkg) in TOOLS.items():
        path = find_tool(exe)
        if path is None and role == "cc":
            path = find_tool("cc")
        if path is None:
            req.missing.append((exe, pkg))
        else:
            req.tools[role] = path
    cc = req.tools.get("cc")
    if cc is not None:
        req.missing += missing_headers(cc)
    kv = kernel_version(req.kernel)
    if kv is None or kv < MIN_KERNEL:
        req.warnings.append(f"this kernel ({req.kernel}) is older than {MIN_KERNEL[0]}.{MIN_KERNEL[1]}: nbgen builds, "
                            "but its XDP live frames need 5.18 or later to send")
    return req


def missing_headers(cc: str) -> list[tuple[str, str]]:
    """The headers the compiler cannot find (it says which, one at a time)."""
    multiarch = subprocess.run([cc, "-print-multiarch"], capture_output=True, text=True, timeout=30).stdout.strip()
    include = [f"-I/usr/include/{multiarch}"] if multiarch else []
    out: list[tuple[str, str]] = []
    for header, pkg in HEADERS.items():
        r = subprocess.run([cc, "-E", "-x", "c", *include, "-"], input=f"#include <{header}>\n",
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            out.append((f"<{header}>", pkg))
    return out


def build(force: bool = False) -> tuple[str, Requirements, bool]:
    """nbgen for this version of the sources: (path, requirements, whether it was built now).
    PreflightError naming every missing requirement; ToolError with make's words."""
    req = check()
    have = built()
    if have and not force:
        return have, req, False
    if not req.ok:
        raise PreflightError(f"nbgen cannot be built: {req.message()}", where="nicbench setup",
                             hint=req.install_hint())
    final = nbgen_path()
    final.parent.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final.parent.parent, prefix=".build-") as tmp:
        argv = [req.tools["make"], "-s", "-C", str(SOURCES), f"OUT={tmp}", f"CC={req.tools['cc']}",
                f"CLANG={req.tools['clang']}", f"BPFTOOL={req.tools['bpftool']}"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise ToolError(f"building nbgen failed: {tail(r.stderr or r.stdout, lines=4)}", where=" ".join(argv),
                            hint="the compiler's words above; nicbench setup --check lists the requirements")
        v = subprocess.run([f"{tmp}/nbgen", "version"], capture_output=True, text=True, timeout=30)
        if v.returncode != 0 or not v.stdout.startswith("nbgen "):
            raise ToolError(f"the nbgen just built does not run: {tail(v.stderr or v.stdout)}", where=f"{tmp}/nbgen",
                            hint="is libbpf1 installed (the runtime library)?")
        # replace atomically: a run using the old file keeps it
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(f"{tmp}/nbgen", final)
    return str(final), req, True
