"""Build nicbench's native tools on demand, into a per-user directory, after
checking (and naming) what each build needs.

Their sources ship inside the package (``native/nbgen``, ``native/nbperf``,
read-only in a site-packages); ``nicbench setup`` runs each Makefile with
``OUT`` set to ``<home>/<tool>/<hash>/``, where ``<home>`` is
``$NICBENCH_HOME``, else ``$XDG_DATA_HOME/nicbench``, else
``~/.local/share/nicbench``, and ``<hash>`` is that of the tool's sources: a
nicbench with changed sources never runs an old build, and two nicbench
versions on one machine keep their own.

What nbgen's build needs: make, a C compiler, clang (BPF target), bpftool,
and the headers of libbpf, libelf, zlib and the kernel's UAPI (asm/types.h
for the BPF target); running it needs a kernel >= 5.18 (XDP live frames) and
root.  nbperf's: make, a C compiler, libc's headers (pthreads included) and
the kernel's UAPI headers (linux/tcp.h, linux/errqueue.h).  Each missing one
is named with its Debian/Ubuntu package.
"""

from __future__ import annotations

import functools
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

SOURCE_FILES = ("Makefile", "nbgen.c", "nbgen.bpf.c")
NBPERF_FILES = ("Makefile", "nbperf.h", "main.c", "client.c", "server.c", "worker.c", "client_worker.c",
                "server_worker.c", "tcp.c", "udp.c", "report.c", "wire.c", "util.c")
MIN_KERNEL = (5, 18)
# tools looked for on PATH, then where Debian puts admin tools (bpftool is in /usr/sbin, often not on a user's PATH)
EXTRA_PATH = ("/usr/sbin", "/sbin", "/usr/local/sbin")
TOOLS = {"make": ("make", "make"), "cc": ("gcc", "gcc"), "clang": ("clang", "clang"),
         "bpftool": ("bpftool", "bpftool")}
# header -> Debian/Ubuntu package; asm/types.h is what the BPF target finds under /usr/include/<multiarch>
HEADERS = {"bpf/libbpf.h": "libbpf-dev", "libelf.h": "libelf-dev", "zlib.h": "zlib1g-dev",
           "asm/types.h": "linux-libc-dev", "stdio.h": "libc6-dev"}
NBPERF_TOOLS = {"make": ("make", "make"), "cc": ("gcc", "gcc")}
NBPERF_HEADERS = {"stdio.h": "libc6-dev", "pthread.h": "libc6-dev", "sys/epoll.h": "libc6-dev",
                  "linux/tcp.h": "linux-libc-dev", "linux/errqueue.h": "linux-libc-dev"}


@dataclass(frozen=True)
class Native:
    """One native tool: its sources (a folder of this package), what its build
    needs (role -> (program, package); header -> package), the make variables
    naming the programs (variable -> role), and what the built binary says
    first when asked ``version``."""

    name: str
    files: tuple[str, ...]
    tools: dict[str, tuple[str, str]]
    headers: dict[str, str]
    make_vars: dict[str, str]
    runtime_hint: str
    needs_kernel: tuple[int, int] | None = None

    @property
    def sources(self) -> Path:
        return Path(__file__).with_name(self.name)


NBGEN = Native("nbgen", SOURCE_FILES, TOOLS, HEADERS, {"CC": "cc", "CLANG": "clang", "BPFTOOL": "bpftool"},
               "is libbpf1 installed (the runtime library)?", MIN_KERNEL)
NBPERF = Native("nbperf", NBPERF_FILES, NBPERF_TOOLS, NBPERF_HEADERS, {"CC": "cc"},
                "does this machine's libc match its headers?")
NAMES = ("nbgen", "nbperf")


def native(name: str) -> Native:
    """The tool by name (looked up when called, so tests may replace one)."""
    return {"nbgen": NBGEN, "nbperf": NBPERF}[name]


def home() -> Path:
    """Where this user's nicbench keeps what it builds."""
    env = os.environ.get("NICBENCH_HOME")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "share") / "nicbench"


@functools.cache
def source_hash(name: str = "nbgen") -> str:
    n = native(name)
    h = hashlib.sha256()
    for f in n.files:
        h.update(f.encode() + b"\0" + (n.sources / f).read_bytes() + b"\0")
    return h.hexdigest()[:12]


def tool_path(name: str) -> Path:
    """Where ``nicbench setup`` puts this version's ``name`` (it may not exist yet)."""
    return home() / name / source_hash(name) / name


def nbgen_path() -> Path:
    return tool_path("nbgen")


def built(name: str = "nbgen") -> str | None:
    """This version's ``name``, if it was built and is executable."""
    p = tool_path(name)
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


def check(name: str = "nbgen") -> Requirements:
    """Every requirement of ``name``'s build at once (and the kernel it will need)."""
    n = native(name)
    req = Requirements(kernel=platform.release())
    for role, (exe, pkg) in n.tools.items():
        path = find_tool(exe)
        if path is None and role == "cc":
            path = find_tool("cc")
        if path is None:
            req.missing.append((exe, pkg))
        else:
            req.tools[role] = path
    cc = req.tools.get("cc")
    if cc is not None:
        req.missing += missing_headers(cc, n.headers)
    kv = kernel_version(req.kernel)
    if n.needs_kernel and (kv is None or kv < n.needs_kernel):
        req.warnings.append(f"this kernel ({req.kernel}) is older than {n.needs_kernel[0]}.{n.needs_kernel[1]}: "
                            f"{name} builds, but its XDP live frames need 5.18 or later to send")
    return req


def missing_headers(cc: str, headers: dict[str, str] | None = None) -> list[tuple[str, str]]:
    """The headers the compiler cannot find (it says which, one at a time)."""
    multiarch = subprocess.run([cc, "-print-multiarch"], capture_output=True, text=True, timeout=30).stdout.strip()
    include = [f"-I/usr/include/{multiarch}"] if multiarch else []
    out: list[tuple[str, str]] = []
    for header, pkg in (HEADERS if headers is None else headers).items():
        r = subprocess.run([cc, "-E", "-x", "c", *include, "-"], input=f"#include <{header}>\n",
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            out.append((f"<{header}>", pkg))
    return out


def build(force: bool = False, name: str = "nbgen") -> tuple[str, Requirements, bool]:
    """``name`` for this version of its sources: (path, requirements, whether it
    was built now).  PreflightError naming every missing requirement;
    ToolError with make's words."""
    n = native(name)
    req = check(name)
    have = built(name)
    if have and not force:
        return have, req, False
    if not req.ok:
        raise PreflightError(f"{name} cannot be built: {req.message()}", where="nicbench setup",
                             hint=req.install_hint())
    final = tool_path(name)
    final.parent.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=final.parent.parent, prefix=".build-") as tmp:
        argv = [req.tools["make"], "-s", "-C", str(n.sources), f"OUT={tmp}",
                *(f"{var}={req.tools[role]}" for var, role in n.make_vars.items())]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise ToolError(f"building {name} failed: {tail(r.stderr or r.stdout, lines=4)}", where=" ".join(argv),
                            hint="the compiler's words above; nicbench setup --check lists the requirements")
        v = subprocess.run([f"{tmp}/{name}", "version"], capture_output=True, text=True, timeout=30)
        if v.returncode != 0 or not v.stdout.startswith(f"{name} "):
            raise ToolError(f"the {name} just built does not run: {tail(v.stderr or v.stdout)}",
                            where=f"{tmp}/{name}", hint=n.runtime_hint)
        # replace atomically: a run using the old file keeps it
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(f"{tmp}/{name}", final)
    return str(final), req, True
