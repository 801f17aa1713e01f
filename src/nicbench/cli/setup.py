"""``nicbench setup``: build nicbench's native tools (nbgen, nbperf) for this
user, and say which traffic tools this machine has for the studies."""

from __future__ import annotations

import subprocess

import click

from ..core.errors import NicbenchError, PreflightError
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
ROLE = {"nbgen": "the packet study's XDP generator", "nbperf": "the TCP and UDP studies' engine"}


@click.command("setup")
@click.option("--check", "check_only", is_flag=True, help="Only check what the builds need; build nothing.")
@click.option("--force", is_flag=True, help="Build again even if this version is built.")
@click.option("--only", type=click.Choice(nb.NAMES), default=None, help="Build (or check) only this tool.")
@json_option
@click.pass_context
def setup(ctx: click.Context, check_only: bool, force: bool, only: str | None) -> None:
    """Build nbgen (the packet study's XDP generator) and nbperf (the TCP and
    UDP studies' engine) for this user.

    Checks what each build needs first -- nbgen: make, gcc, clang, bpftool
    and the libbpf, libelf, zlib and kernel headers; nbperf: make, gcc, libc
    and kernel headers -- naming the Debian/Ubuntu package of anything
    missing; builds into $NICBENCH_HOME (default ~/.local/share/nicbench),
    keyed by the sources' hash, so the studies find the build that matches
    this nicbench.  A tool whose requirements are missing does not stop the
    other's build; the command fails naming it.  Also lists which studies'
    traffic tools this machine has.
    """
    names = [only] if only else list(nb.NAMES)
    tools = {study: [{"tool": t, "package": pkg, "path": nb.find_tool(t)} for t, pkg in ts]
             for study, ts in STUDY_TOOLS.items()}
    lacking = sorted({f"{t['package']}" for ts in tools.values() for t in ts if not t["path"]})
    if check_only:
        reqs = {n: nb.check(n) for n in names}
        emit(ctx, {"ok": all(r.ok for r in reqs.values()),
                   "builds": {n: {"ok": r.ok, "tools": r.tools,
                                  "missing": [dict(zip(("what", "package"), m, strict=True)) for m in r.missing],
                                  "warnings": r.warnings} for n, r in reqs.items()},
                   "kernel": next(iter(reqs.values())).kernel, "study_tools": tools},
             "\n".join([line for n, r in reqs.items() for line in _check_lines(n, r)]
                       + _tools_lines(tools, lacking)))
        bad = {n: r for n, r in reqs.items() if not r.ok}
        if bad:
            raise _cannot_build(bad)
        return
    done: dict[str, dict[str, object]] = {}
    failed: list[NicbenchError] = []
    for n in names:
        try:
            path, req, now = nb.build(force=force, name=n)
        except NicbenchError as e:      # the other tool still gets built; this one is named at the end
            failed.append(e)
            continue
        version = subprocess.run([path, "version"], capture_output=True, text=True, timeout=30).stdout.strip()
        done[n] = {"path": path, "built_now": now, "version": version, "warnings": req.warnings}
    emit(ctx, {**{n: d["path"] for n, d in done.items()}, "builds": done, "study_tools": tools,
               "failed": [e.one_line() for e in failed]},
         "\n".join([f"{n}: {d['path']} ({'built now' if d['built_now'] else 'already built for this nicbench'}; "
                    f"{d['version']})" for n, d in done.items()]
                   + [f"warning: {w}" for d in done.values() for w in d["warnings"]]  # type: ignore[attr-defined]
                   + _tools_lines(tools, lacking)))
    if len(failed) == 1:
        raise failed[0]
    if failed:
        raise PreflightError("; ".join(e.message for e in failed), where="nicbench setup",
                             hint="; ".join(dict.fromkeys(e.hint for e in failed if e.hint)))


def _check_lines(name: str, req: nb.Requirements) -> list[str]:
    return [f"{name} build ({ROLE[name]}): {'ready' if req.ok else req.message()}",
            *(f"  {role:<8} {path}" for role, path in req.tools.items()),
            *(f"warning: {w}" for w in req.warnings)]


def _cannot_build(bad: dict[str, nb.Requirements]) -> PreflightError:
    pkgs = " ".join(dict.fromkeys(pkg for r in bad.values() for _, pkg in r.missing))
    return PreflightError("; ".join(f"{n} cannot be built: {r.message()}" for n, r in bad.items()),
                          where="nicbench setup",
                          hint=f"on Debian/Ubuntu: sudo apt-get install {pkgs}; then nicbench setup again")


def _tools_lines(tools: dict[str, list[dict[str, str | None]]], lacking: list[str]) -> list[str]:
    lines = ["traffic tools on this machine (what the lab runs; real hosts need their own):"]
    for study, ts in tools.items():
        lines.append(f"  {study:<8} " + ", ".join(f"{t['tool']} {'ok' if t['path'] else 'MISSING'}" for t in ts))
    if lacking:
        lines.append(f"  to install the missing ones on Debian/Ubuntu: sudo apt-get install {' '.join(lacking)}")
    return lines
