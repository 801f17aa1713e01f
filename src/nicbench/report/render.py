"""The report's chrome, shared by every study's view: the page, the exports,
and the sentences that say what the link and the CPU figures were."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path
from typing import Any

import jinja2

from ..core.linerate import format_speed
from . import numbers
from .tables import table
from .view import RunView

EXPORT_SCHEMA = 1


def write_exports(view: RunView, out: Path, rows: list[dict[str, Any]], cols: list[str], units: dict[str, str],
                  trials: list[dict[str, Any]], csv_rows: list[dict[str, Any]] | None = None) -> tuple[Path, Path]:
    """points.csv (``cols`` of ``csv_rows``, default ``rows``) and points.json
    (versioned: every row and trial) of any study."""
    out.mkdir(parents=True, exist_ok=True)
    csv_path, json_path = out / "points.csv", out / "points.json"
    with open(csv_path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows if csv_rows is None else csv_rows)
    json_path.write_text(json.dumps({"schema": EXPORT_SCHEMA, "run_id": view.info.run_id, "name": view.info.name,
                                     "study": view.info.study, "units": units, "points": rows, "trials": trials},
                                    indent=1))
    return csv_path, json_path


def write_page(out: Path, template: Path, view: RunView, **context: Any) -> Path:
    """index.html from the study's ``template`` (a file beside its view) with
    what every study's page shows.  Templates format numbers with the ``num``
    and ``count`` filters (report/numbers.py) and draw point tables with
    ``tables.html.j2``'s macros from ``table(rows, cols)``."""
    loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(template.parent),
                                  jinja2.FileSystemLoader(Path(__file__).parent)])
    env = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["num"] = numbers.num
    env.filters["count"] = numbers.count
    env.globals["table"] = table
    index = out / "index.html"
    index.write_text(env.get_template(template.name).render(
        info=view.info, meta=view.meta, link=link_sentence(view),
        warnings=[*(view.info.meta.get("warnings") or []), *drift_warnings(view)],
        created=dt.datetime.fromtimestamp(view.info.created).isoformat(timespec="seconds"), **context))
    return index


def drift_warnings(view: RunView) -> list[str]:
    """A line per point that ran with the tuning drifted (on_tuning_drift =
    "flag": the point is kept, so its figure is what the changed setting
    gave): in every study's warnings, naming the point, its repeat and what moved."""
    return [f"tuning drifted during {t.point} (repeat {t.repeat + 1}, trial {t.trial_id}): "
            + "; ".join(t.tuning_drift) for t in view.trials
            if t.tuning_drift and "tuning drifted" not in (t.error or "")]   # "fail": its error says it


def link_sentence(view: RunView) -> str:
    """What the link was, and so what the ceiling column means."""
    link = view.link
    if link is None:
        return "Link: unknown (imported results): no line-rate ceiling."
    ts = {True: "on", False: "off", None: "unknown (assumed on)"}[link.timestamps]
    if not link.speed_bps and not link.client_speed_bps:
        return (f"Link: unshaped lab veth, MTU {link.mtu}, TCP timestamps {ts}: it has no line rate, so "
                "points carry no ceiling; give the plan [link] speed to shape it.")
    c = link.ceiling(None if link.speed_bps else 1)
    assert c is not None
    server = f"server link {format_speed(link.speed_bps)}bit/s" if link.speed_bps else "server link unshaped"
    clients = (f", each client link {format_speed(link.client_speed_bps)}bit/s (a point's ceiling uses the "
               "slower of the server link and its clients' links together)" if link.client_speed_bps else "")
    return (f"Link: {server}{clients}, MTU {link.mtu}, IPv{link.ip}, TCP timestamps {ts}: "
            f"ceiling {numbers.num(c.goodput_bps / 1e9)} Gbps of goodput per direction per "
            f"{format_speed(c.speed_bps)}bit/s "
            f"({c.payload_per_frame:.0f} payload bytes per {c.wire_per_frame:.0f} wire bytes = "
            f"{c.efficiency * 100:.2f} %); bidirectional points: twice that, an upper bound since each "
            "direction also carries the other's ACKs. Wire rate = counted bytes + 24 B per frame "
            "(FCS, preamble, inter-frame gap) over the same window.")


def cpu_sentence(view: RunView) -> str:
    cpu = view.info.meta.get("cpu")
    if not isinstance(cpu, dict):
        return "CPU: not sampled in this run."
    scope = ("one machine shared by all lab hosts, so it is the whole lab's cost"
             if cpu.get("shared_by") else "per host")
    mhz = (f"cycles per byte are estimated from the nominal {cpu['mhz']:.0f} MHz in /proc/cpuinfo "
           "(no hardware counters here)" if cpu.get("mhz") else "cycles per byte: unknown (no CPU frequency)")
    return (f"CPU: sampled from /proc/stat every 0.25 s over each point's window: {cpu.get('cpus')} CPUs, "
            f"{scope}. Cores busy = user + nice + system + irq + softirq; {mhz}. "
            f"{cpu.get('nic_irq_note') or ''}")



def pinned_tools(view: RunView) -> list[str]:
    """Where the tools could and did run, over all trials (one line per tool)."""
    seen: dict[str, tuple[str | None, set[Any]]] = {}
    for t in view.trials:
        for tool, where in t.tool_cpus.items():
            if isinstance(where, dict):
                allowed, s = seen.get(tool, (where.get("allowed"), set()))
                seen[tool] = (allowed, s | set(where.get("seen") or []))
    return [f"{tool}: allowed CPUs {a or '?'}, ran on {', '.join(map(str, sorted(s))) or '?'}"
            for tool, (a, s) in sorted(seen.items())]
