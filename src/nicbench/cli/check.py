"""``nicbench check PLAN``: validate a plan and say what it would run."""

from __future__ import annotations

from pathlib import Path

import click

from ..core.errors import NicbenchError
from ..hosts.remote import ssh_targets
from ..hosts.sshconfig import SshSettings, resolve
from ..hosts.transport import each_host
from ..plan.matrix import trials
from ..plan.model import Plan
from .options import emit, json_option, read_plan


@click.command("check")
@click.argument("plan", type=click.Path(path_type=Path))
@json_option
@click.pass_context
def check(ctx: click.Context, plan: Path) -> None:
    """Validate PLAN and list the points it would run, without running anything.

    For real hosts, each host's SSH settings as ssh itself resolves them
    (``ssh -G``: HostName, User, Port, ProxyJump, IdentityFile); nothing is
    connected to."""
    p, _ = read_plan(plan)
    ts = trials(p)
    secs = len(ts) * p.study.measured_seconds()
    points = [key for key, _params in p.study.points()]
    data: dict = {"plan": p.name, "trials": len(ts), "measured_seconds": secs, "points": points,
                  "repeats": p.study.repeats, "study": p.study.kind, "hosts": where(p)}
    lines = [f"{p.name}: valid; {p.study.kind} study on {where(p)}",
             f"{len(points)} point(s) x {p.study.repeats} repeat(s) = {len(ts)} trials, "
             f"at least {secs:g} s of traffic ({p.study.order} order):",
             *(f"  {k}" for k in points)]
    if p.remote:
        got = each_host(lambda kv: resolve(kv[1], kv[0]), {n: (n, t) for n, t in ssh_targets(p).items()})
        data["ssh"] = {}
        for host, res in got.items():
            if isinstance(res, SshSettings):
                data["ssh"][host] = res.to_meta()
                lines.append(f"ssh {host}: {res.summary()}")
            elif isinstance(res, NicbenchError):
                data["ssh"][host] = {"problem": res.message}
                lines.append(f"ssh {host}: {res.message}")
            else:
                raise res
    emit(ctx, data, "\n".join(lines))


def where(p: Plan) -> str:
    """Which hosts, and how they are reached: the embedded lab or real hosts over SSH."""
    clients = ", ".join(p.clients)
    if p.remote:
        return f"real hosts over SSH: server {p.server} ({p.hosts[p.server].ssh}), clients {clients}"
    return f"the embedded lab {p.lab.name!r}: server {p.server}, clients {clients}"
