"""``nicbench setup``: build nbgen for this user, and say which traffic tools
this machine has for the studies."""

from __future__ import annotations

import subprocess

import click

from ..core.errors import PreflightError
from ..native import build as nb
from .options import emit, json_option

# what the studies run on their hosts (the lab: this machine), and the Debian/Ubuntu package of each
STUDY_TOOLS = {
    "tcp": [("iperf3", "iperf3"), ("iperf", "iperf")],
    "https": [("nginx", "nginx-light"), ("wrk", "wrk"), ("openssl", "openssl")],
    "storage": [("fio", "fio"), ("nbdkit", "nbdkit"), ("tgtd", "tgt"), ("iscsi-perf", "libiscsi-bin")],
    "packets": [("trafgen", "netsniff-ng")],
    "lab": [("ip", "iproute2"), ("ping", "iputils-ping"), ("ethtool", "ethtool"), ("sshd", "openssh-server")],
}


@click.command("setup")
@click.option("--check", "check_only", is_flag=True, help="Only check what the build needs; build nothing.")
@click.option("--force", is_flag=True, help="Build nbgen again even if this version is built.")
@json_option
@click.pass_context
def setup(ctx: click.Context, check_only: bool, force: bool) -> None:
    """Build nbgen (the packet study's XDP generator) for this user.

    Checks make, gcc, clang, bpftool and the libbpf, libelf, zlib and kernel
    headers first, naming the Debian/Ubuntu package of anything missing;
    builds into $NICBENCH_HOME (default ~/.local/share/nicbench), keyed by
    the sources' hash, so the packet study finds the build that matches this
    nicbench.  Also lists which studies' traffic tools this machine has.
    """
    tools = {study: [{"tool": t, "package": pkg, "path": nb.find_tool(t)} for t, pkg in ts]
             for study, ts in STUDY_TOOLS.items()}
    lacking = sorted({f"{t['package']}" for ts in tools.values() for t in ts if not t["path"]})
    if check_only:
        req = nb.check()
        emit(ctx, {"ok": req.ok, "tools": req.tools, "missing": [dict(zip(("what", "package"), m, strict=True))
                                                                  for m in req.missing],
                   "kernel": req.kernel, "warnings": req.warnings, "study_tools": tools},
             "\n".join([f"nbgen build: {'ready' if req.ok else req.message()}",
                        *(f"  {role:<8} {path}" for role, path in req.tools.items()),
                        *(f"warning: {w}" for w in req.warnings),
                        *_tools_lines(tools, lacking)]))
        if not req.ok:
            raise PreflightError(f"nbgen cannot be built: {req.message()}", where="nicbench setup",
                                 hint=req.install_hint())
        return
    path, req, now = nb.build(force=force)
    version = subprocess.run([path, "version"], capture_output=True, text=True, timeout=30).stdout.strip()
    emit(ctx, {"nbgen": path, "built_now": now, "version": version, "kernel": req.kernel,
               "warnings": req.warnings, "study_tools": tools},
         "\n".join([f"nbgen: {path} ({'built now' if now else 'already built for this nicbench'}; {version})",
                    *(f"warning: {w}" for w in req.warnings), *_tools_lines(tools, lacking)]))


def _tools_lines(tools: dict[str, list[dict[str, str | None]]], lacking: list[str]) -> list[str]:
    lines = ["traffic tools on this machine (what the lab runs; real hosts need their own):"]
    for study, ts in tools.items():
        lines.append(f"  {study:<8} " + ", ".join(f"{t['tool']} {'ok' if t['path'] else 'MISSING'}" for t in ts))
    if lacking:
        lines.append(f"  to install the missing ones on Debian/Ubuntu: sudo apt-get install {' '.join(lacking)}")
    return lines
