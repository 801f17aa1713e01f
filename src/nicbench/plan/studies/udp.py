"""``[study] kind = "udp"``: UDP throughput and loss (seed 002's UDP patterns)."""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from ...core.linerate import UDP_MAX_PAYLOAD, ModelError, format_speed, parse_speed
from ..base import PlanLike, Size, StudySchema, as_field

# iperf3 and iperf 2 write a sequence number and a send time into every
# datagram and count loss and jitter from them: iperf3 refuses less ("block
# size invalid (minimum = 16 bytes)"), iperf 2 reads garbage (negative loss)
ENGINE_HEADER = 16
# nbperf's datagram header is longer: magic, sequence number, send time, session (native/nbperf)
NBPERF_HEADER = 32
UNLIMITED, SEARCH = "unlimited", "max"


def parse_rate(value: object) -> float | str:
    """An offered rate: bit/s with a decimal prefix, as link speeds are
    written (``"500M"``); ``"unlimited"``: the sender goes as fast as it can;
    ``"max"``: the maximum-rate search finds it."""
    if isinstance(value, str) and value.strip().lower() in (UNLIMITED, SEARCH):
        return value.strip().lower()
    try:
        return parse_speed(value)  # type: ignore[arg-type]
    except ModelError as e:
        raise ModelError(str(e).replace("speed ", "rate ", 1).replace("link speeds are", "rates are")
                         .replace("is not a link speed", "is not a rate")
                         + ", or \"unlimited\", or \"max\" (the maximum-rate search)") from None


Rate = Annotated[float | str, as_field(parse_rate, (ModelError,))]


def rate_key(rate: float | str) -> str:
    """``500M``, ``unlimited``, or ``max`` for the maximum-rate search."""
    return rate if isinstance(rate, str) else format_speed(float(rate))


def point_key(direction: str, clients: int | None, streams: int, rate: float | str, size: int) -> str:
    """``tx/c2/s4/500M/1472B``: direction, clients (left out: all of the
    plan's), streams per client, offered rate per client (``max``: searched),
    UDP payload bytes per datagram."""
    c = f"/c{clients}" if clients else ""
    return f"{direction}{c}/s{streams}/{rate_key(rate)}/{size}B"


class UdpStudy(StudySchema):
    """UDP throughput and loss between the server and its clients.

    The engine processes sit as in the TCP study: the study server runs the
    engine's clients, each client host its engine servers, so ``tx`` is
    server -> clients, ``rx`` clients -> server (``-R``), ``bidir`` both.
    ``datagram_sizes`` are UDP payload bytes (the engine's ``-l``): 1472 fills
    one packet at MTU 1500, larger ones travel as IP fragments.  ``rates`` are
    offered per client host and direction, split evenly over its streams
    (``-b`` paces each stream); ``"unlimited"`` sends as fast as the sender
    can; ``"max"`` searches for the highest rate whose loss stays at or below
    ``loss_threshold`` (RFC 2544 throughput: the study's headline).  The
    receiver's counts are the truth.
    """

    SWEPT = ("directions", "datagram_sizes", "rates", "streams", "client_counts")
    KIND = "udp"
    kind: Literal["udp"]
    engine: Literal["iperf3", "iperf2", "nbperf"] = "iperf3"
    directions: list[Literal["tx", "rx", "bidir"]] = Field(default=["tx"], min_length=1)
    datagram_sizes: list[Size] = Field(default_factory=lambda: [1472], min_length=1,
                                       description="UDP payload bytes per datagram (the engine's -l)")
    rates: list[Rate] = Field(min_length=1, description="offered bit/s per client and direction, e.g. "
                                                        "[\"100M\", \"1G\", \"unlimited\", \"max\"] (max: searched)")
    streams: list[Annotated[int, Field(ge=1, le=1024)]] = Field(default_factory=lambda: [1], min_length=1,
                                                                description="streams per client")
    client_counts: list[Annotated[int, Field(ge=1, le=12)]] | None = Field(
        None, min_length=1, description="how many of the clients take part (the first n); default: all")
    duration: float = Field(5.0, gt=0, le=3600, description="measured seconds asked of the engine")
    omit: float = Field(1.0, ge=0, le=600, description="warm-up seconds run before the measured part")
    interval: float = Field(0.5, ge=0.1, le=60, description="engine report interval, seconds")
    trim: float = Field(0.25, ge=0, description="seconds cut from both ends of the shared window")
    window: Size | None = Field(None, description="socket buffer asked of both ends (-w); the kernel caps it at "
                                                  "net.core.rmem_max / wmem_max")
    loss_threshold: float = Field(0.001, ge=0, lt=1, description="rate \"max\": the loss allowed, a fraction "
                                                                 "(0.001 = 0.1 %)")
    search_steps: int = Field(8, ge=1, le=20, description="rate \"max\": bisection steps after the unpaced one")
    search_resolution: float = Field(0.01, ge=0, lt=1, description="rate \"max\": stop once the rates "
                                                                   "bracketing the answer are this close (a fraction)")
    port_base: int = Field(5201, ge=1024, le=65000)

    @field_validator("datagram_sizes")
    @classmethod
    def _sizes(cls, v: list[int]) -> list[int]:
        for n in v:
            if n < ENGINE_HEADER:
                raise ValueError(f"{n} bytes is below {ENGINE_HEADER}, the header iperf3 and iperf 2 write into "
                                 "every datagram (sequence number and send time: loss and jitter are counted "
                                 "from it)")
            if n > UDP_MAX_PAYLOAD[4]:
                raise ValueError(f"{n} bytes is above {UDP_MAX_PAYLOAD[4]}, the most UDP payload one IPv4 "
                                 "datagram carries (65535 - 20 IP - 8 UDP header)")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> UdpStudy:
        if self.engine == "iperf3":
            for key in ("duration", "omit"):
                v = getattr(self, key)
                if v != int(v):
                    raise ValueError(f"study.{key} = {v}: iperf3 takes whole seconds for -t and -O")
        if self.engine == "nbperf":
            small = [n for n in self.datagram_sizes if n < NBPERF_HEADER]
            if small:
                raise ValueError(f"study.datagram_sizes: {small[0]} bytes is below {NBPERF_HEADER}, the header nbperf "
                                 "writes into every datagram (magic, sequence number, send time, session)")
        if self.duration <= 2 * self.trim:
            raise ValueError(f"study.duration {self.duration}s leaves nothing after trimming {self.trim}s at both "
                             "ends")
        return self

    def points(self) -> list[tuple[str, dict[str, Any]]]:
        """Direction x clients x streams x rate x datagram size (clients None: all of the plan's)."""
        rates = list(self.rates)
        counts: list[int | None] = list(self.client_counts) if self.client_counts else [None]
        out = []
        for d, c, st, r, size in itertools.product(self.directions, counts, self.streams, rates,
                                                   self.datagram_sizes):
            out.append((point_key(d, c, st, r, size),
                        {"direction": d, "clients": c, "streams": st, "rate": rate_key(r),
                         "rate_bps": r if isinstance(r, float) else None, "datagram_size": size,
                         "engine": self.engine, "duration": self.duration, "omit": self.omit,
                         "search": r == SEARCH}))
        return out

    def measured_seconds(self) -> float:
        """On average over the rates: a search runs up to 1 + search_steps measurements."""
        steps = [1 + self.search_steps if r == SEARCH else 1 for r in self.rates]
        return (self.omit + self.duration) * sum(steps) / len(steps)

    def check_plan(self, plan: PlanLike) -> None:
        clients = self.clients or [n for n, h in plan.hosts.items() if h.role == "client"]
        big = [n for n in self.client_counts or [] if n > len(clients)]
        if big:
            raise ValueError(f"study.client_counts: {big[0]} clients asked, the plan has {len(clients)} "
                             f"({', '.join(clients)})")
