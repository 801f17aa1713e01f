"""``[study] kind = "tcp"``: multi-client TCP throughput (seeds 000 and 002)."""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from ...core.units import format_size
from ..base import Size, StudySchema, trim_problem

NBPERF_MAX_IO = 4 << 20       # native/nbperf's limit per send/recv call, bytes


def point_key(direction: str, connections: int, io_size: int) -> str:
    return f"{direction}/c{connections}/io{format_size(io_size)}"


class TcpStudy(StudySchema):
    """Multi-client TCP throughput (seeds 000 and 002).

    The server host runs the engine's *client* processes towards an engine
    server on every client host (as both seeds do), so ``tx`` is server ->
    clients, ``rx`` is clients -> server (``-R``), ``bidir`` both at once.
    """

    SWEPT = ("directions", "io_sizes", "connections")
    KIND = "tcp"
    kind: Literal["tcp"] = "tcp"
    engine: Literal["iperf3", "iperf2", "nbperf"] = "iperf3"
    directions: list[Literal["tx", "rx", "bidir"]] = Field(default=["tx"], min_length=1)
    io_sizes: list[Size] = Field(default_factory=lambda: [131072], min_length=1)
    connections: list[Annotated[int, Field(ge=1, le=4096)]] = Field(default_factory=lambda: [1], min_length=1)
    connections_per: Literal["total", "client"] = "total"
    duration: float = Field(10.0, gt=0, le=3600, description="measured seconds asked of the engine")
    omit: float = Field(2.0, ge=0, le=600, description="warm-up seconds run before the measured part")
    interval: float = Field(1.0, ge=0.1, le=60, description="engine report interval, seconds")
    trim: float = Field(0.5, ge=0, description="seconds cut from both ends of the shared window")
    zerocopy: bool = False
    no_delay: bool = False
    skip_rx_copy: bool | Literal["auto"] = False
    window: Size | None = None
    congestion: str | None = Field(None, pattern=r"^[a-z0-9_]{1,16}$")
    streams_per_process: int | None = Field(None, ge=1, le=128)
    port_base: int = Field(5201, ge=1024, le=65000)

    @model_validator(mode="after")
    def _engine_features(self) -> TcpStudy:
        if self.engine == "iperf2" and (self.zerocopy or self.skip_rx_copy is True):
            raise ValueError("iperf2 has no zerocopy/skip_rx_copy: set them false or use engine = \"iperf3\"")
        if self.engine == "iperf3":
            big = [n for n in self.io_sizes if n > 1024 * 1024]
            if big:
                raise ValueError(f"study.io_sizes: iperf3 takes blocks up to 1M, not {big[0]} bytes")
            for key in ("duration", "omit"):
                v = getattr(self, key)
                if v != int(v):
                    raise ValueError(f"study.{key} = {v}: iperf3 takes whole seconds for -t and -O")
        if self.engine == "nbperf":
            big = [n for n in self.io_sizes if n > NBPERF_MAX_IO]
            if big:
                raise ValueError(f"study.io_sizes: nbperf takes IO sizes up to 4M, not {big[0]} bytes")
        if self.duration <= 2 * self.trim:
            raise ValueError(trim_problem(self.duration, self.trim, "trim" in self.model_fields_set))
        return self

    def points(self) -> list[tuple[str, dict[str, Any]]]:
        return [(point_key(d, c, io), {"direction": d, "connections": c, "io_size": io, "engine": self.engine,
                                       "duration": self.duration, "omit": self.omit})
                for d, c, io in itertools.product(self.directions, self.connections, self.io_sizes)]

    def measured_seconds(self) -> float:
        return self.omit + self.duration
