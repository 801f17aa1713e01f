"""Write a run's report: HTML page, figures, CSV and JSON exports."""

from __future__ import annotations

import csv
import datetime as dt
import json
from pathlib import Path
from typing import Any

import jinja2

from .build import EXPORT_SCHEMA, RunView, facts_section, table_rows
from .figures import cpu_figures, throughput_figures

_CSV_COLS = ["point", "direction", "connections", "io_size", "io", "engine", "repeats_ok",
             "repeats_failed", "gbps_median", "gbps_min", "gbps_max", "gbps_stdev", "tx_gbps",
             "rx_gbps", "sender_gbps", "ceiling_gbps", "pct_of_ceiling", "max_pct_of_ceiling", "above_ceiling",
             "wire_gbps", "wire_pct_of_link", "wire_above_link", "cores_busy", "cpu_pct_of_machine",
             "gbps_per_core", "cpu_s_per_gb", "cycles_per_byte_est", "busiest_cpu", "max_start_skew_ms", "retransmits",
             "stack_retrans", "drops", "net_rx_softirq_per_s", "net_rx_by_cpu", "nic_irq_per_s"]


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


def write_page(out: Path, template: str, view: RunView, **context: Any) -> Path:
    """index.html from ``template`` with what every study's page shows."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("nicbench.report", "templates"),
                             autoescape=True, undefined=jinja2.StrictUndefined)
    index = out / "index.html"
    index.write_text(env.get_template(template).render(
        info=view.info, meta=view.meta, link=link_sentence(view), warnings=view.info.meta.get("warnings") or [],
        created=dt.datetime.fromtimestamp(view.info.created).isoformat(timespec="seconds"), **context))
    return index


def export(view: RunView, rows: list[dict[str, Any]], out: Path) -> tuple[Path, Path]:
    flat = [{**r, "per_host_gbps": ";".join(f"{h}={g}" for h, g in r["per_host_gbps"].items())} for r in rows]
    return write_exports(
        view, out, rows, _CSV_COLS + ["per_host_gbps"],
        {"gbps": "10^9 bit/s, receiver-side payload", "io_size": "bytes"},
        [{"trial_id": t.trial_id, "point": t.point, "repeat": t.repeat, "status": t.status, "error": t.error,
          "gbps": t.gbps, "window_s": {d: a.seconds for d, a in t.receiver.items()},
          "start_skew_s": t.start_skew_s, "overhead_s": t.overhead_s, "tool_cpus": dict(t.tool_cpus)}
         for t in view.trials], csv_rows=flat)


def link_sentence(view: RunView) -> str:
    """What the link was, and so what the ceiling column means."""
    from ..analysis.linerate import format_speed
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
            f"ceiling {c.goodput_bps / 1e9:.3f} Gbps of goodput per direction per {format_speed(c.speed_bps)}bit/s "
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
    seen: dict[str, tuple[str | None, set]] = {}
    for t in view.trials or view.https_trials or view.storage_trials or view.packet_trials:
        for tool, where in t.tool_cpus.items():
            if isinstance(where, dict):
                allowed, s = seen.get(tool, (where.get("allowed"), set()))
                seen[tool] = (allowed, s | set(where.get("seen") or []))
    return [f"{tool}: allowed CPUs {a or '?'}, ran on {', '.join(map(str, sorted(s))) or '?'}"
            for tool, (a, s) in sorted(seen.items())]


def render_https(view: RunView, out: Path) -> Path:
    """Seed 001's report: application vs wire Gbps and CPU vs connections, the table, kTLS evidence."""
    from .build import https_rows
    from .figures import https_figures
    rows = https_rows(view)
    figs = https_figures(rows, out, view.info.name)
    cols = ["point", "scheme", "connections", "threads", "repeats_ok", "repeats_failed", "app_gbps", "app_min", "app_max",
            "wire_gbps", "ceiling_gbps", "pct_of_ceiling", "cpu_pct_of_machine", "cores_busy", "nginx_cores",
            "wrk_cores", "gbps_per_core", "requests", "socket_errors", "bad_status", "ktls"]
    write_exports(view, out, rows, cols,
                  {"app_gbps": "10^9 bit/s read by wrk (bodies + headers)", "wire_gbps": "10^9 bit/s on the wire"},
                  [{"trial_id": t.trial_id, "point": t.point, "repeat": t.repeat, "status": t.status,
                    "error": t.error, "app_gbps": t.app_gbps, "wire_gbps": t.wire_gbps, "ktls": t.ktls,
                    "wrk": dict(t.wrk)} for t in view.https_trials])
    return write_page(out, "https.html.j2", view, rows=rows, figures=[p.name for p in figs],
                      failures=[t for t in view.https_trials if t.status != "ok"], csv="points.csv",
                      pinned=pinned_tools(view),
                      json="points.json", ktls=sorted({t.ktls for t in view.https_trials
                                                       if t.ktls and t.ktls != "n/a (plain HTTP)"}))


def render_storage(view: RunView, out: Path) -> Path:
    """Seed 004's report: the op x block size table of MB/s, IOPS and CPU %, figures, line-rate block size."""
    from ..analysis.storage import line_rate_from
    from ..core.units import format_size
    from .build import storage_rows
    from .figures import storage_figures
    rows = storage_rows(view)
    figs = storage_figures(rows, out, view.info.name)
    cols = ["point", "op", "block_size", "bs", "repeats_ok", "repeats_failed", "mb_s", "iops", "ceiling_mb_s",
            "pct_of_ceiling", "above_ceiling", "cpu_pct_of_machine", "cores_busy", "max_start_skew_ms"]
    write_exports(view, out, rows, cols,
                  {"mb_s": "10^6 bytes/s, all initiators", "iops": "I/Os per second, all initiators"},
                  [{"trial_id": t.trial_id, "point": t.point, "repeat": t.repeat, "status": t.status,
                    "error": t.error, "mb_s": t.mb_s, "iops": t.iops,
                    "per_initiator_mb_s": dict(t.per_initiator_mb_s), "start_skew_s": t.start_skew_s}
                   for t in view.storage_trials])
    sizes = sorted({r["block_size"] for r in rows})
    ops = [o for o in ("read", "write", "readwrite") if any(r["op"] == o for r in rows)]
    table = [{"bs": format_size(bs), **{op: next((r for r in rows if r["op"] == op and r["block_size"] == bs), None)
                                        for op in ops}} for bs in sizes]
    reached = {op: (format_size(v) if v else None) for op, v in line_rate_from(view.storage_points).items()}
    return write_page(out, "storage.html.j2", view, rows=rows, table=table, ops=ops, reached=reached,
                      figures=[p.name for p in figs], failures=[t for t in view.storage_trials if t.status != "ok"],
                      cpu=cpu_sentence(view), pinned=pinned_tools(view))


def render_packets(view: RunView, out: Path) -> Path:
    """Seed 003's report: Mpps vs frame size against line rate, the single/dual-port table, CPU."""
    from ..analysis.linerate import format_speed
    from ..analysis.packets import port_table
    from .build import packet_rows
    from .figures import packet_figures
    rows = packet_rows(view)
    lr = view.info.meta.get("line_rate_bps")
    figs = packet_figures(rows, out, view.info.name, format_speed(float(lr)) if lr else None)
    cols = ["point", "engine", "ip", "ports", "threads", "frame_size", "repeats_ok", "repeats_failed", "rx_mpps",
            "rx_min", "rx_max", "tx_mpps", "loss_pct", "gbps_l2", "gbps_l1", "ceiling_mpps", "pct_of_ceiling",
            "cores_busy", "cpu_pct_of_machine", "engine_cores", "mpps_per_core", "if_tx_mpps", "if_rx_mpps", "tx_drops_mpps",
            "xdp_mode", "ndr_steps"]
    write_exports(view, out, rows, cols,
                  {"rx_mpps": "10^6 frames/s counted by the receiver's XDP program", "tx_mpps": "10^6 frames/s sent",
                   "gbps_l2": "10^9 bit/s of frames with FCS", "gbps_l1": "10^9 bit/s on the wire (+20 B/frame)",
                   "frame_size": "bytes, destination MAC to FCS"},
                  [{"trial_id": t.trial_id, "point": t.point, "repeat": t.repeat, "status": t.status, "error": t.error,
                    "rx_pps": t.rx_pps, "tx_pps": t.tx_pps, "loss": t.loss, "per_port_rx_pps": dict(t.per_port_rx_pps),
                    "window": t.window, "ndr": t.ndr} for t in view.packet_trials])
    table = port_table(view.packet_points)
    ports = sorted({p.ports for p in view.packet_points})
    gen = str(view.info.meta.get("generator"))
    others = [f"{h.host}: kernel pktgen {h.get(k).display() if h.get(k) else 'not recorded'}" if k == "packet.pktgen"
              else f"netmap {h.get(k).display() if h.get(k) else 'not recorded'}"
              for h in view.facts if h.host == gen for k in ("packet.pktgen", "packet.netmap")]
    return write_page(out, "packets.html.j2", view, rows=rows, table=table, ports=ports,
                      line_rate=format_speed(float(lr)) if lr else None, figures=[p.name for p in figs],
                      failures=[t for t in view.packet_trials if t.status != "ok"], cpu=cpu_sentence(view),
                      facts=facts_section(view), pinned=pinned_tools(view), others="; ".join(others))


def render(view: RunView, out: Path | None = None) -> Path:
    """Render the report into ``out`` (default ``<run>/report``); returns index.html."""
    out = out or view.run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    if view.info.study == "https":
        return render_https(view, out)
    if view.info.study == "storage":
        return render_storage(view, out)
    if view.info.study == "packets":
        return render_packets(view, out)
    rows = table_rows(view)
    lab = view.info.meta.get("lab") or {}
    mtu = lab.get("mtu") if isinstance(lab, dict) else None
    from ..analysis.linerate import format_speed
    speed = format_speed(view.link.speed_bps) if view.link and view.link.speed_bps else None
    figs = throughput_figures(rows, out, view.info.name, mtu, speed)
    figs += cpu_figures(rows, out, view.info.name)
    csv_path, json_path = export(view, rows, out)
    above = [r for r in rows if r["above_ceiling"]]
    over_link = [r for r in rows if r["wire_above_link"]]
    return write_page(out, "report.html.j2", view, rows=rows, figures=[p.name for p in figs],
                      failures=view.failures, csv=csv_path.name, json=json_path.name, above=above,
                      over_link=over_link, cpu=cpu_sentence(view), facts=facts_section(view),
                      tuning=view.info.meta.get("tuning"), pinned=pinned_tools(view),
                      has_cpu=any(r["cores_busy"] is not None for r in rows))
