"""``nicbench facts``: what a host is, as nicbench records it with every run."""

from __future__ import annotations

import json
import os

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..core.errors import InputError, LabError
from ..hosts.facts import collect, collect_raw
from ..hosts.transport import LocalTransport, Transport
from ..lab import manager
from ..records import HostFacts
from ..report.facts import facts_table
from .options import refuse_unused

DEFAULT_TOOLS = ("iperf3", "iperf", "ethtool")


def _local_interfaces() -> list[str]:
    try:
        names = sorted(n for n in os.listdir("/sys/class/net") if n != "lo")
    except OSError:
        return []
    return names[:8]


def _targets(hosts: tuple[str, ...], lab_name: str | None,
             ifnames: tuple[str, ...]) -> list[tuple[Transport, str, list[str]]]:
    """(transport, role, interfaces) for each HOST: ``local`` or a lab host."""

    out: list[tuple[Transport, str, list[str]]] = []
    lab = None
    for h in hosts:
        if h == "local":
            out.append((LocalTransport("local"), "local", list(ifnames) or _local_interfaces()))
            continue
        if lab is None:
            labs = manager.all_labs()
            name = lab_name or (labs[0] if len(labs) == 1 else None)
            if name is None:
                raise InputError(f"host {h!r}: which lab? " + (f"labs up: {', '.join(labs)}" if labs else
                                                               "no lab is up"),
                                 where="HOST", hint="give --lab NAME, or 'local' for this machine")
            lab = manager.load(name)
            if lab is None:
                raise LabError(f"no lab {name!r}", where="--lab", hint="nicbench lab status lists the labs")
        try:
            spec = lab.spec.host(h)
        except KeyError:
            raise InputError(f"lab {lab.spec.name} has no host {h!r} (hosts: "
                             f"{', '.join(x.name for x in lab.spec.hosts)})", where="HOST",
                             hint="'local' reads this machine") from None
        out.append((lab.transport(h), spec.role, list(ifnames) or ["eth0"]))
    return out


@click.command("facts")
@click.argument("hosts", nargs=-1, required=True)
@click.option("--lab", "lab_name", default=None, help="The lab the hosts belong to (default: the only one up).")
@click.option("--if", "ifnames", multiple=True, help="Interface to describe (repeatable; default: eth0 in a "
              "lab host, every interface but lo on 'local').")
@click.option("--tool", "tools", multiple=True, help=f"Tool whose version to record (repeatable; default: "
              f"{', '.join(DEFAULT_TOOLS)}).")
@click.option("--raw", is_flag=True, help="Print the raw collected text instead (what a run stores).")
@click.option("--json", "json_", is_flag=True, help="Machine-readable output on stdout.")
@click.pass_context
def facts_cmd(ctx: click.Context, hosts: tuple[str, ...], lab_name: str | None, ifnames: tuple[str, ...],
              tools: tuple[str, ...], raw: bool, json_: bool) -> None:
    """Print the facts of HOSTS ('local' = this machine, or lab host names).

    Kernel, distribution, CPU, NUMA, memory, each interface's driver, offloads,
    rings, channels, coalescing, NUMA node and IRQ affinity, the sysctls the
    seeds tune, irqbalance/tuned/governor, tool versions.  A fact that cannot
    be known says why.  With several hosts, facts that differ between hosts
    of the same role are marked.
    """
    refuse_unused(ctx, "lab_name", any(h != "local" for h in hosts), "names the lab of the hosts given; 'local' is "
                  "this machine itself", "leave --lab out, or name the lab's hosts")

    want_json = json_ or (ctx.obj or {}).get("json")
    collected: list[HostFacts] = []
    for t, role, ifs in _targets(hosts, lab_name, ifnames):
        if raw:
            click.echo(collect_raw(t, ifs, tools or DEFAULT_TOOLS), nl=False)
            continue
        collected.append(collect(t, role, ifs, tools or DEFAULT_TOOLS)[0])
    if raw:
        return
    rows = facts_table(collected)
    if want_json:
        click.echo(json.dumps({"hosts": [{"host": h.host, "role": h.role, "collected": h.collected,
                                          "facts": [{"key": f.key, "value": f.value, "unknown": f.unknown,
                                                     "source": f.source} for f in h.facts]} for h in collected],
                               "differ": [r["key"] for r in rows if r["differs"]]}, indent=1))
        return

    table = Table(show_lines=False, header_style="bold")
    table.add_column("fact", overflow="fold")
    for h in collected:
        table.add_column(f"{h.host} ({h.role})", overflow="fold")
    for r in rows:
        mark = "[bold yellow]≠ [/]" if r["differs"] else ""
        table.add_row(mark + r["key"], *(_styled(r["values"][h.host]) for h in collected))
    Console(width=max(100, 40 + 45 * len(collected))).print(table)
    if any(r["differs"] for r in rows):
        click.echo("≠: differs between hosts of the same role")


def _styled(text: str) -> str:
    return f"[dim]{escape(text)}[/]" if text.startswith("unknown: ") else escape(text)
