"""A run, read back from the store alone, as the rows a report shows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.points import LinkInfo, PointStats, TrialResult, point_stats, trial_result
from ..core.units import format_size
from ..records import HostFacts, RunInfo
from ..store.runs import RunReader

EXPORT_SCHEMA = 1


@dataclass(frozen=True)
class RunView:
    run_dir: Path
    info: RunInfo
    meta: dict[str, Any]
    trials: list[TrialResult]
    points: list[PointStats]
    link: LinkInfo | None = None
    facts: tuple[HostFacts, ...] = ()
    https_trials: tuple = ()                 # HTTPS studies: HttpsTrial / HttpsPoint instead of the TCP ones
    https_points: tuple = ()
    storage_trials: tuple = ()               # storage studies: StorageTrial / StoragePoint
    storage_points: tuple = ()
    packet_trials: tuple = ()                # packet studies: PacketTrial / PacketPoint
    packet_points: tuple = ()

    @property
    def failures(self) -> list[TrialResult]:
        return [t for t in self.trials if t.status != "ok"]


def load_run(run_dir: Path) -> RunView:
    r = RunReader(run_dir)
    try:
        info = r.info()
        meta = r.meta()
        trim = float(info.meta.get("trim", 0.0))  # type: ignore[arg-type]
        link = LinkInfo.from_meta(info.meta)
        samples = r.samples()
        by_trial: dict[str, list] = {}
        for s in samples:
            by_trial.setdefault(s.trial_id, []).append(s)
        facts = tuple(r.facts())
        if info.study == "https":
            from ..analysis.https import https_points, https_trial
            hts = tuple(https_trial(t, by_trial.get(t.spec.trial_id, []), link) for t in r.trials())
            clients = info.meta.get("clients")
            pts = tuple(https_points(hts, link, len(clients) if isinstance(clients, list) else None))
            return RunView(run_dir, info, meta, [], [], link, facts, hts, pts)
        if info.study == "storage":
            from ..analysis.storage import storage_points, storage_trial
            sts = tuple(storage_trial(t, by_trial.get(t.spec.trial_id, [])) for t in r.trials())
            clients = info.meta.get("clients")
            sps = tuple(storage_points(sts, link, str(info.meta.get("transport") or info.meta.get("target") or "nbd"),
                                       len(clients) if isinstance(clients, list) else None))
            return RunView(run_dir, info, meta, [], [], link, facts, storage_trials=sts, storage_points=sps)
        if info.study == "packets":
            from ..analysis.packets import packet_points, packet_trial
            pts_ = tuple(packet_trial(t, by_trial.get(t.spec.trial_id, []), trim) for t in r.trials())
            lr = info.meta.get("line_rate_bps")
            return RunView(run_dir, info, meta, [], [], link, facts, packet_trials=pts_,
                           packet_points=tuple(packet_points(pts_, float(lr) if lr else None)))
        results = [trial_result(t, by_trial.get(t.spec.trial_id, []), trim, link) for t in r.trials()]
    finally:
        r.close()
    cpu = info.meta.get("cpu") or {}
    mhz = cpu.get("mhz") if isinstance(cpu, dict) else None
    return RunView(run_dir, info, meta, results, point_stats(results, link, mhz), link, facts)


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(x, nd)


def table_rows(view: RunView) -> list[dict[str, Any]]:
    """One row per point: the table of the report and of the CSV/JSON exports."""
    rows = []
    for p in view.points:
        io = p.params.get("io_size")
        rows.append({
            "point": p.point,
            "direction": p.params.get("direction"),
            "connections": p.params.get("connections"),
            "io_size": io,
            "io": format_size(int(io)) if isinstance(io, int) else io,
            "engine": p.params.get("engine"),
            "repeats_ok": p.n_ok,
            "repeats_failed": p.n_failed,
            "gbps_median": _r(p.median),
            "gbps_min": _r(p.low),
            "gbps_max": _r(p.high),
            "gbps_stdev": _r(p.stdev),
            "tx_gbps": _r(p.by_direction.get("tx")),
            "rx_gbps": _r(p.by_direction.get("rx")),
            "sender_gbps": _r(p.sender_median),
            "per_host_gbps": {h: _r(g) for h, g in p.per_host.items()},
            "max_start_skew_ms": _r(p.max_skew_s * 1000 if p.max_skew_s is not None else None),
            "ceiling_gbps": _r(p.ceiling_gbps),
            "pct_of_ceiling": _r(p.of_ceiling * 100 if p.of_ceiling is not None else None, 1),
            "above_ceiling": p.above_ceiling,
            "max_pct_of_ceiling": _r(p.max_of_ceiling * 100 if p.max_of_ceiling is not None else None, 1),
            "wire_above_link": p.wire_above_link,
            "cores_busy": _r(p.cores_busy, 2),
            "cpu_pct_of_machine": _r(p.cpu_percent, 1),
            "gbps_per_core": _r(p.gbps_per_core),
            "cpu_s_per_gb": _r(p.cpu_s_per_gb, 3),
            "cycles_per_byte_est": _r(p.cycles_per_byte, 2),
            "busiest_cpu": p.busiest_cpu,
            "cpu_warnings": list(p.cpu_warnings),
            "wire_gbps": _r(p.wire_gbps),
            "wire_pct_of_link": _r(p.wire_gbps / p.link_gbps * 100 if p.wire_gbps and p.link_gbps else None, 1),
            "retransmits": p.retransmits,
            "stack_retrans": _r(p.stack_retrans, 0),
            "drops": _r(p.drops, 0),
            "net_rx_softirq_per_s": _r(p.net_rx_per_s, 0),
            "net_rx_by_cpu": p.net_rx_by_cpu,
            "nic_irq_per_s": _r(p.nic_irq_per_s, 0),
            "net_warnings": list(p.net_warnings),
            "errors": list(p.errors),
        })
    return rows


def facts_section(view: RunView) -> dict[str, Any]:
    """The report's host-facts tables and one note per fact that differs
    between hosts of the same role."""
    from ..hosts.factparse import differences, facts_table

    hosts = list(view.facts)
    notes = []
    for role, keys in differences(hosts).items():
        members = [h for h in hosts if h.role == role]
        for k in keys:
            vals = ", ".join(f"{h.host}={h.get(k).display() if h.get(k) else 'absent'}" for h in members)
            notes.append(f"{role} hosts differ in {k}: {vals}")
    return {"hosts": [{"host": h.host, "role": h.role} for h in hosts],
            "summary": facts_table(hosts, summary=True), "all": facts_table(hosts), "notes": notes}


def https_rows(view: RunView) -> list[dict[str, Any]]:
    """One row per HTTPS point: the seed 001 table and the exports."""
    return [{"point": p.point, "scheme": p.scheme, "connections": p.connections, "threads": p.threads,
             "repeats_ok": p.n_ok,
             "repeats_failed": p.n_failed, "app_gbps": _r(p.app_gbps), "app_min": _r(p.app_min),
             "app_max": _r(p.app_max), "wire_gbps": _r(p.wire_gbps), "ceiling_gbps": _r(p.ceiling_gbps),
             "pct_of_ceiling": _r(p.of_ceiling * 100 if p.of_ceiling else None, 1),
             "cpu_pct_of_machine": _r(p.cpu_pct, 1), "cores_busy": _r(p.cores_busy, 2),
             "nginx_cores": _r(p.nginx_cores, 2), "wrk_cores": _r(p.wrk_cores, 2),
             "gbps_per_core": _r(p.gbps_per_core), "requests": p.requests, "socket_errors": p.socket_errors,
             "bad_status": p.bad_status, "ktls": "; ".join(p.ktls), "errors": list(p.errors),
             "warnings": list(p.warnings)} for p in view.https_points]


def storage_rows(view: RunView) -> list[dict[str, Any]]:
    """One row per storage point (op x block size): seed 004's table and the exports."""
    return [{"point": p.point, "op": p.op, "block_size": p.block_size, "bs": format_size(p.block_size),
             "repeats_ok": p.n_ok, "repeats_failed": p.n_failed, "mb_s": _r(p.mb_s, 1), "iops": _r(p.iops, 0),
             "ceiling_mb_s": _r(p.ceiling_mb_s, 1), "pct_of_ceiling": _r(p.of_ceiling * 100 if p.of_ceiling else None, 1),
             "above_ceiling": p.above_ceiling,
             "cpu_pct_of_machine": _r(p.cpu_pct, 1), "cores_busy": _r(p.cores_busy, 2),
             "max_start_skew_ms": _r(p.max_skew_s * 1000 if p.max_skew_s is not None else None),
             "errors": list(p.errors), "warnings": list(p.warnings)} for p in view.storage_points]


def packet_rows(view: RunView) -> list[dict[str, Any]]:
    """One row per packet point: Mpps received and sent, loss, Gbps, ceiling, CPU."""
    return [{"point": p.point, "engine": p.engine, "ip": p.ip, "ports": p.ports, "threads": p.threads,
             "frame_size": p.frame_size, "repeats_ok": p.n_ok, "repeats_failed": p.n_failed,
             "rx_mpps": _r(p.rx_mpps), "rx_min": _r(p.rx_min), "rx_max": _r(p.rx_max), "tx_mpps": _r(p.tx_mpps),
             "loss_pct": _r(p.loss * 100 if p.loss is not None else None, 3),
             "gbps_l2": _r(p.gbps_l2), "gbps_l1": _r(p.gbps_l1), "ceiling_mpps": _r(p.ceiling_mpps),
             "pct_of_ceiling": _r(p.of_ceiling * 100 if p.of_ceiling is not None else None, 1),
             "above_ceiling": p.above_ceiling,
             "cores_busy": _r(p.cores_busy, 2), "cpu_pct_of_machine": _r(p.cpu_pct, 1),
             "engine_cores": _r(p.engine_cores, 2), "mpps_per_core": _r(p.mpps_per_core),
             "if_tx_mpps": _r(p.if_tx_mpps), "if_rx_mpps": _r(p.if_rx_mpps), "tx_drops_mpps": _r(p.tx_drops_mpps, 4), "xdp_mode": ", ".join(p.xdp_modes),
             "ndr_steps": p.ndr_steps, "errors": list(p.errors), "warnings": list(p.warnings)} for p in view.packet_points]


def point_values(view: RunView) -> tuple[str, dict[str, list[float]]]:
    """The figure a comparison is about, one value per ok repeat of each point."""
    values: dict[str, list[float]] = {}
    if view.https_trials:
        metric, pairs = "application Gbps", [(t.point, t.app_gbps) for t in view.https_trials if t.status == "ok"]
    elif view.packet_trials:
        metric, pairs = "Mpps received", [(t.point, t.rx_pps / 1e6 if t.rx_pps else None)
                                          for t in view.packet_trials if t.status == "ok"]
    elif view.storage_trials:
        metric, pairs = "MB/s (10^6 B/s)", [(t.point, t.mb_s) for t in view.storage_trials if t.status == "ok"]
    else:
        metric, pairs = "Gbps (receiver payload)", [(t.point, t.gbps) for t in view.trials if t.status == "ok"]
    for point, v in pairs:
        if v is not None:
            values.setdefault(point, []).append(float(v))
    return metric, values


def fact_changes(a: RunView, b: RunView) -> list[tuple[str, str, str, str]]:
    """(host, fact, value in A, value in B) for hosts both runs recorded, identity facts left out."""
    from ..hosts.factparse import IDENTITY
    out = []
    hb = {h.host: h for h in b.facts}
    for h in a.facts:
        other = hb.get(h.host)
        if other is None:
            continue
        keys = list(dict.fromkeys([f.key for f in h.facts] + [f.key for f in other.facts]))
        for k in keys:
            if IDENTITY.match(k):
                continue
            fa, fb = h.get(k), other.get(k)
            va, vb = (fa.display() if fa else "absent"), (fb.display() if fb else "absent")
            if va != vb:
                out.append((h.host, k, va, vb))
    return out
