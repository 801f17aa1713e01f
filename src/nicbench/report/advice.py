"""A stored run read back as the recommendation's input
(analysis/recommend.py): each point's verdict with the figures its sizing
rules need, the hosts' settings from the run's facts, the plan's study
options from the plan text the run kept.  Everything comes from the
archive, so a run made before verdicts existed is judged as it would be now.
"""

from __future__ import annotations

import statistics
import tomllib
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from ..analysis.counters import Counters
from ..analysis.cpu import CpuUsage
from ..analysis.recommend import HostInput, PointInput, RunInput
from ..records import HostFacts, Sample
from .view import RunView

# the counters that locate a loss (analysis/counters.py names them so)
LOSS_COUNTERS = ("if.drops.", "udp.rcvbuf_errors", "udp.sndbuf_errors")


def _study_options(plan_text: str) -> dict[str, Any]:
    """The plan's [study] table as written (the results side does not load plans)."""
    try:
        study = tomllib.loads(plan_text or "").get("study")
    except tomllib.TOMLDecodeError:
        return {}
    return dict(study) if isinstance(study, dict) else {}


def _host(h: HostFacts) -> HostInput:
    sysctls = {f.key[len("sysctl."):]: (None if f.value is None else str(f.value))
               for f in h.facts if f.key.startswith("sysctl.")}
    drivers = {f.key.split(".")[1]: f.value for f in h.facts
               if f.key.startswith("if.") and f.key.endswith(".driver") and f.key.count(".") == 2}
    ifname, driver = next(iter(sorted(drivers.items())), (None, None))
    mtu = h.value(f"if.{ifname}.max_mtu") if ifname else None
    return HostInput(h.host, h.role, sysctls, str(driver) if driver else None, ifname,
                     mtu if isinstance(mtu, int) and not isinstance(mtu, bool) else None)


def _rtt(samples: Sequence[Sample]) -> list[float]:
    return [s.value for s in samples if s.metric == "tcp.rtt" and s.tag("side") == "sender"
            and s.tag("omitted", "0") != "1" and s.value > 0]


def _per_direction(row: Mapping[str, Any], params: Mapping[str, Any]) -> float | None:
    ceiling = row.get("ceiling_bps")
    if not isinstance(ceiling, (int, float)):
        g = row.get("ceiling_gbps")
        ceiling = g * 1e9 if isinstance(g, (int, float)) else None
    if ceiling is None:
        return None
    return float(ceiling) / (2 if params.get("direction") == "bidir" else 1)


def run_input(view: RunView, rows: Sequence[Mapping[str, Any]]) -> RunInput:
    """The recommendation's input from a run's view and its study's rows."""
    by_point: dict[str, list[Any]] = defaultdict(list)
    for t in view.trials:
        if t.status in ("ok", "partial"):
            by_point[t.point].append(t)
    row_of = {str(r.get("point")): r for r in rows}
    points = []
    for p in view.points:
        v = getattr(p, "verdict", None)
        trials = by_point.get(p.point, [])
        params = dict(trials[0].params) if trials else dict(getattr(p, "params", {}) or {})
        rtts = [x for t in trials for x in _rtt(view.samples.get(t.trial_id, []))]
        drops: dict[str, float] = {}
        for t in trials:
            c = getattr(t, "counters", None)
            if isinstance(c, Counters):
                for host, m in c.per_host.items():
                    for k, n in m.items():
                        if k.startswith(LOSS_COUNTERS) and n > 0:
                            drops[f"{host} {k}"] = max(drops.get(f"{host} {k}", 0.0), n)
        cpus = [c for t in trials if isinstance(c := getattr(t, "cpu", None), CpuUsage)]
        worst = max(cpus, key=lambda c: c.busiest, default=None)
        points.append(PointInput(
            p.point, params, v.limit if v is not None else None, tuple(v.evidence) if v is not None else (),
            v.leading if v is not None else None, v.second if v is not None else None,
            statistics.median(rtts) if rtts else None, _per_direction(row_of.get(p.point, {}), params), drops,
            worst.busiest_state if worst else None, worst.host if worst else None,
            max(worst.tools.values(), default=0.0) if worst else None))
    meta = view.info.meta
    cpu = meta.get("cpu")
    version = meta.get("engine_version")
    return RunInput(view.info.run_id, view.info.study, points, [_host(h) for h in view.facts],
                    _study_options(view.info.plan_text), str(version) if version else None,
                    view.link.mtu if view.link else None,
                    isinstance(cpu, dict) and cpu.get("scope") == "machine", str(meta.get("server") or "") or None)
