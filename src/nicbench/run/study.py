"""One interface over the studies, so a session runs any of them the same way.

Each study knows its preflight, what it starts before the first point and
stops after the last (nginx for HTTPS; nothing for TCP), how to run one
trial, and what it adds to the run's meta.  The session owns everything
else: the lab, facts, tuning, the store, clean-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from ..plan.model import HttpsStudy, PacketStudy, Plan, StorageStudy
from ..records import RawOutput, Sample, TrialRecord, TrialSpec
from .common import RunContext


class StudyRun(Protocol):
    kind: str
    ctx: RunContext      # the session sets rel, pin, nic_irqs, tcp_timestamps on it
    warnings: list[str]
    tools: list[str]     # whose versions the host facts record

    def meta(self) -> dict: ...
    def start(self, raw_dir: Path) -> list[RawOutput]: ...
    def trial(self, spec: TrialSpec, raw_dir: Path) -> tuple[TrialRecord, list[Sample], list[RawOutput]]: ...
    def stop(self, raw_dir: Path) -> list[RawOutput]: ...


class TcpRun:
    kind = "tcp"

    def __init__(self, plan: Plan, lab) -> None:
        from .session import preflight
        self.plan = plan
        self.ctx, self.warnings = preflight(plan, lab)
        self.tools = ["iperf3" if plan.study.engine == "iperf3" else "iperf", "ethtool"]

    def meta(self) -> dict:
        c, s = self.ctx, self.plan.study
        return {"engine": s.engine, "engine_version": c.tool.version_str,
                "engine_features": sorted(c.tool.features), "skip_rx_copy_used": c.skip_rx_copy, "trim": s.trim}

    def start(self, raw_dir: Path) -> list[RawOutput]:
        return []

    def trial(self, spec, raw_dir):
        from .tcp import run_trial
        return run_trial(self.ctx, spec, raw_dir, self.plan.clients)

    def stop(self, raw_dir: Path) -> list[RawOutput]:
        return []


class _ServerRun:
    """A study with a server process of its own (nginx, the LUN targets): its
    module's preflight, start, run_trial and stop, looked up at call time."""

    module_name = ""
    kind = ""

    def __init__(self, plan: Plan, lab) -> None:
        import importlib
        self.module = importlib.import_module(f"nicbench.run.{self.module_name}")
        self.plan = plan
        self.ctx, self.warnings = self.module.preflight(plan, lab.transports(),
                                                        {h.name: h.ip for h in lab.spec.hosts})

    def start(self, raw_dir: Path) -> list[RawOutput]:
        return self.module.start(self.ctx, raw_dir)

    def trial(self, spec, raw_dir):
        return self.module.run_trial(self.ctx, spec, raw_dir)

    def stop(self, raw_dir: Path) -> list[RawOutput]:
        return self.module.stop(self.ctx, raw_dir)


class HttpsRun(_ServerRun):
    kind = module_name = "https"
    tools = ["nginx", "wrk", "openssl", "ethtool"]

    def meta(self) -> dict:
        s: HttpsStudy = self.plan.study  # type: ignore[assignment]
        return {"engine": "nginx + wrk", "engine_version": f"nginx {self.ctx.versions.get('nginx')}, "
                f"wrk {self.ctx.versions.get('wrk')}, OpenSSL {self.ctx.versions.get('openssl')}",
                "versions": self.ctx.versions, "ktls_requested": s.ktls, "ktls_kernel": self.ctx.ktls_kernel,
                "ktls_kernel_evidence": self.ctx.ktls_why,
                "tls_versions": s.tls_versions, "file_size": s.file_size, "trim": 0.0}


class StorageRun(_ServerRun):
    kind = module_name = "storage"

    @property
    def tools(self) -> list[str]:
        target = self.plan.study.target  # type: ignore[union-attr]
        return {"nbd": ["nbdkit", "fio"], "iscsi": ["tgtd"], "devices": ["fio"]}[target] + ["ethtool"]

    def meta(self) -> dict:
        s: StorageStudy = self.plan.study  # type: ignore[assignment]
        v = self.ctx.versions
        engine = {"nbd": ("nbdkit + fio", f"nbdkit {v.get('nbdkit')}, fio {v.get('fio')}"),
                  "iscsi": ("tgt + iscsi-perf", f"tgtd {v.get('tgtd')}, iscsi-perf {v.get('iscsi-perf')}"),
                  "devices": (f"fio ({s.engine})", f"fio {v.get('fio')}")}[s.target]
        return {"engine": engine[0], "engine_version": engine[1], "versions": v, "target": s.target,
                "lun_kind": s.lun_kind, "luns": s.luns, "lun_size": s.lun_size, "iodepth": s.iodepth,
                "pattern": s.pattern, "assignment": self.module.assignment(s.luns, self.plan.clients, s.devices),
                "transport": s.transport or ("nbd" if s.target == "devices" else s.target), "trim": 0.0}


class PacketRun(_ServerRun):
    kind = module_name = "packets"

    @property
    def tools(self) -> list[str]:
        return [e for e in self.plan.study.engines if e != "nbgen"] + ["ethtool"]  # type: ignore[union-attr]

    def meta(self) -> dict:
        s: PacketStudy = self.plan.study  # type: ignore[assignment]
        v = self.ctx.versions
        return {"engine": " + ".join(s.engines), "engine_version": ", ".join(f"{k} {x}" for k, x in v.items()),
                "versions": v, "engines": s.engines, "line_rate_bps": s.line_rate, "rate": s.rate,
                "xdp_mode": s.xdp_mode, "generator": self.ctx.server, "receiver": self.ctx.receiver,
                "generator_kernel": self.ctx.kernel, "trim": s.trim, "udp_port": s.udp_port,
                "search": s.search, "loss_threshold": s.loss_threshold,
                "shaping": "none: XDP transmit and trafgen's qdisc bypass go around tc; line_rate is nominal"}


def study_run(plan: Plan, lab) -> StudyRun:
    if isinstance(plan.study, HttpsStudy):
        return HttpsRun(plan, lab)
    if isinstance(plan.study, StorageStudy):
        return StorageRun(plan, lab)
    if isinstance(plan.study, PacketStudy):
        return PacketRun(plan, lab)
    return TcpRun(plan, lab)
