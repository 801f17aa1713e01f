"""``[study] kind = "storage"``: block I/O over the network (seed 004)."""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ...core.units import format_size
from ..base import PlanLike, Size, StudySchema


class StorageStudy(StudySchema):
    """Block I/O over the network (seed 004): one target exporting LUNs, the
    client hosts as initiators, fio through the engine that fits the target.

    In the lab the target is nbdkit (``lun_kind`` memory or null, one export
    per LUN); LUNs are split evenly over the initiators (the seed: 48 LUNs, 4
    initiators x 12).  MB/s are 10^6 bytes per second, as the seed reports.
    """

    SWEPT = ("ops", "block_sizes")
    KIND = "storage"
    kind: Literal["storage"]
    clients: list[str] | None = Field(None, description="initiator hosts (default: all clients)")
    target: Literal["nbd", "iscsi", "devices"] = "nbd"
    devices: dict[str, list[Annotated[str, Field(pattern=r"^/dev/[A-Za-z0-9/_.-]+$")]]] | None = Field(
        None, description='target = "devices": block devices per initiator (LUNs the host already sees)')
    engine: Literal["libaio", "io_uring"] = Field("libaio", description='fio engine for target = "devices"')
    transport: Literal["nbd", "iscsi", "nvme-tcp", "fcoe"] | None = Field(
        None, description='target = "devices": what carries them, for the line-rate ceiling')
    destructive: bool = Field(False, description="allow writes to existing block devices (their data is lost)")
    lun_kind: Literal["memory", "null"] = "memory"
    luns: int = Field(4, ge=1, le=256)
    lun_size: Size = Field(256 * 1024 * 1024)
    ops: list[Literal["read", "write", "readwrite"]] = Field(default=["read"], min_length=1)
    block_sizes: list[Size] = Field(default_factory=lambda: [4096], min_length=1)
    pattern: Literal["sequential", "random"] = "sequential"
    iodepth: int = Field(16, ge=1, le=1024)
    numjobs: int = Field(1, ge=1, le=64)
    duration: int = Field(5, ge=1, le=3600, description="measured seconds (fio runtime, whole seconds)")
    ramp: int = Field(1, ge=0, le=600, description="seconds of I/O before measuring (fio ramp_time)")
    port_base: int = Field(10809, ge=1024, le=65000, description="NBD: the first LUN's port")
    iscsi_port: int = Field(3260, ge=1, le=65535, description="iSCSI: the portal's port")

    @model_validator(mode="before")
    @classmethod
    def _luns_from_devices(cls, data: object) -> object:
        """With existing devices, the LUN count is theirs."""
        if isinstance(data, dict) and isinstance(data.get("devices"), dict) and "luns" not in data:
            data = {**data, "luns": sum(len(v) for v in data["devices"].values() if isinstance(v, list)) or 1}
        return data

    @model_validator(mode="after")
    def _sizes(self) -> StorageStudy:
        for bs in self.block_sizes:
            if bs < 512 or bs % 512:
                raise ValueError(f"study.block_sizes: {bs} is not a multiple of 512 bytes (direct I/O)")
            if bs > self.lun_size:
                raise ValueError(f"study.block_sizes: {bs} is larger than a LUN ({self.lun_size} bytes)")
        if self.transport is not None and self.target != "devices":
            raise ValueError(f'study.transport is only for target = "devices" ({self.target} is its own transport)')
        if self.target == "devices":
            if self.transport is None:
                raise ValueError('study.transport: say what carries the devices ("iscsi", "nvme-tcp", "fcoe", '
                                 '"nbd"), for the line-rate ceiling')
            for h, devs in (self.devices or {}).items():
                if len(set(devs)) != len(devs):
                    raise ValueError(f"study.devices.{h}: a device is listed twice")
            if self.devices and self.luns != sum(len(v) for v in self.devices.values()):
                raise ValueError(f"study.luns = {self.luns}, but study.devices lists "
                                 f"{sum(len(v) for v in self.devices.values())}: leave luns out")
            if not self.devices:
                raise ValueError('study.devices: target = "devices" needs the block devices per initiator, '
                                 'e.g. devices = { i1 = ["/dev/sdb"] }')
            if any(op != "read" for op in self.ops) and not self.destructive:
                raise ValueError("study.ops: writing to existing block devices destroys their data: "
                                 "set destructive = true if that is meant")
        elif self.devices:
            raise ValueError('study.devices is only for target = "devices"')
        if self.target == "iscsi":
            if any(op != "read" for op in self.ops):
                raise ValueError("study.ops: the lab's iSCSI initiator (iscsi-perf) only reads; "
                                 "use target = \"nbd\" for writes")
            if self.lun_kind != "null":
                raise ValueError("study.lun_kind: the lab's iSCSI LUNs are tgt null LUNs: set lun_kind = \"null\"")
            if self.numjobs != 1:
                raise ValueError("study.numjobs: iscsi-perf runs one stream per LUN: leave numjobs = 1")
            if self.timeout_margin < 8:
                raise ValueError("study.timeout_margin: iscsi-perf needs >= 8 s to be interrupted, drain and log out")
        return self

    @property
    def trim(self) -> float:
        """fio's ramp_time does the warm-up; nothing more is trimmed."""
        return 0.0

    def points(self) -> list[tuple[str, dict[str, Any]]]:
        """``read/bs4K`` ... as seed 004's table: op x block size."""
        return [(f"{op}/bs{format_size(bs)}", {"op": op, "block_size": bs, "iodepth": self.iodepth, "luns": self.luns,
                                               "duration": self.duration, "ramp": self.ramp, "pattern": self.pattern,
                                               "target": self.target, "engine": "fio"})
                for op, bs in itertools.product(self.ops, self.block_sizes)]

    def measured_seconds(self) -> float:
        return float(self.ramp + self.duration)

    def check_plan(self, plan: PlanLike) -> None:
        clients = [n for n, h in plan.hosts.items() if h.role == "client"]
        if self.devices:
            for h in self.devices:
                if h not in plan.hosts or plan.hosts[h].role != "client":
                    raise ValueError(f"study.devices names {h!r}, which is not a client host")
            used = set(self.clients or clients)
            if set(self.devices) != used:
                raise ValueError(f"study.devices must list every initiator ({', '.join(sorted(used))}) and only "
                                 f"them; it lists {', '.join(sorted(self.devices))}")
        else:
            n = len(self.clients or clients)
            if self.luns < n:
                raise ValueError(f"study.luns = {self.luns} is fewer than the {n} initiators: every "
                                 "initiator needs at least one LUN")
