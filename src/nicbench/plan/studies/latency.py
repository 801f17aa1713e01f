"""``[study] kind = "latency"``: request/response round trips, idle and under load.

Every point is one engine's ping-pong between the study server and each probe
client, for one protocol and one message size, either on a quiet path
(``idle``) or while the study's load runs (``loaded``): throughput traffic
started behind the same barrier, ``lead`` seconds before the probes, so the
report can say what the throughput costs in latency (flent's RRUL idea).

Engines (measured in bench/latency_engines.md):

- ``sockperf`` (TCP and UDP), the primary: per-request samples; at a fixed
  rate its client *spins* between requests (the TSC), back to back
  (``rate = "max"``) it blocks in ``recv``;
- ``irtt`` (UDP), the second engine for UDP: isochronous, *sleeps* between
  requests (Go timers), so its round trips include waking the client;
- ``iperf2`` (TCP), iperf 2's ``--bounceback``, the second engine for TCP:
  sleeps between requests; no per-request samples, only its 100 us-bin
  histogram (percentiles are upper bounds) and exact mean/min/max.

A spinning and a sleeping engine answer different questions, so each is a
point of its own and the report never puts two engines in one comparison.
"""

from __future__ import annotations

import itertools
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from ...core.errors import InputError
from ...core.units import format_size
from ...tools import bounceback, irtt, sockperf
from ..base import PlanLike, Size, Strict, StudySchema

Engine = Literal["sockperf", "irtt", "iperf2"]
Protocol = Literal["udp", "tcp"]

# which protocols each engine measures
SERVES: dict[str, tuple[str, ...]] = {"sockperf": ("udp", "tcp"), "irtt": ("udp",), "iperf2": ("tcp",)}
# how each engine's client waits between requests at a fixed rate (the report says it)
WAITING = {"sockperf": "spins (busy-waits on the TSC)", "irtt": "sleeps (Go timer)",
           "iperf2": "sleeps (clock_nanosleep)"}
BACK_TO_BACK = "back to back (blocks in recv)"
LOADS = ("tcp",)                      # the study kinds whose traffic can be a load here
TAIL = 1.0                            # s the load runs on after the probes have exited
IRTT_WAIT = 0.5                       # s irtt waits for late replies after its last request


def probe_timing(engine: str, duration: int) -> tuple[float, float]:
    """(seconds from a probe's start to its first timed request, seconds its
    process runs), from what each engine does (see the engine modules)."""
    if engine == "sockperf":
        return sockperf.PRE_TEST + sockperf.WARMUP, sockperf.PRE_TEST + duration + 0.2
    if engine == "irtt":
        return 0.0, duration + IRTT_WAIT
    return 0.0, float(duration)


def point_key(protocol: str, engine: str, size: int, condition: str) -> str:
    return f"{protocol}/{engine}/m{format_size(size)}/{condition}"


def check_size(engine: str, protocol: str, size: int) -> None:
    """InputError (from the engine's module) when ``size`` is outside what it can send."""
    if engine == "sockperf":
        sockperf.check_message_size(size, protocol)  # type: ignore[arg-type]
    elif engine == "irtt":
        irtt.check_message_size(size)
    else:
        bounceback.check_message_size(size)


class TcpLoad(Strict):
    """The load of the ``loaded`` points: TCP throughput as the TCP study drives
    it (iperf3: engine clients on the study server, an engine server per port
    on each load client; ``tx`` = server -> clients), one point's worth."""

    kind: Literal["tcp"]
    engine: Literal["iperf3"] = "iperf3"
    direction: Literal["tx", "rx", "bidir"] = "tx"
    io_size: Size = 131072
    connections: int = Field(1, ge=1, le=4096)
    connections_per: Literal["total", "client"] = "total"
    clients: list[str] | None = Field(None, description="client hosts the load goes to (default: every client)")
    zerocopy: bool = False
    no_delay: bool = False
    window: Size | None = None
    congestion: str | None = Field(None, pattern=r"^[a-z0-9_]{1,16}$")
    streams_per_process: int | None = Field(None, ge=1, le=128)
    port_base: int = Field(5201, ge=1024, le=65000)
    lead: float = Field(1.0, ge=0.5, le=60, description="seconds the load runs before the probes' first timed "
                                                         "request (its ramp-up)")
    interval: float = Field(0.5, ge=0.1, le=10, description="the load engine's report interval, seconds")

    @field_validator("io_size")
    @classmethod
    def _io(cls, v: int) -> int:
        if not 1 <= v <= 1024 * 1024:
            raise ValueError(f"iperf3 takes blocks of 1 B .. 1M, not {v} bytes")
        return v


class LatencyStudy(StudySchema):
    """Request/response latency (issue 16), idle and under the study's load.

    Every probe client runs one engine client towards its own engine server
    on the study server (one port each, from ``port_base``); all probes of a
    point run at once, behind one barrier with the load.  ``rate``: requests
    per second of each probe, or ``"max"`` (back to back, each request sent
    when the previous answer came).  ``duration``: whole seconds each probe
    runs (sockperf times all but its first 0.4 s).
    """

    SWEPT = ("protocols", "engines", "message_sizes", "conditions")
    KIND = "latency"
    MAX_RATE: ClassVar[int] = 1_000_000
    kind: Literal["latency"]
    protocols: list[Protocol] = Field(default=["udp", "tcp"], min_length=1)
    engines: list[Engine] = Field(default=["sockperf"], min_length=1)
    message_sizes: list[Size] = Field(min_length=1, description="bytes of each request (and its answer)")
    conditions: list[Literal["idle", "loaded"]] | None = Field(
        None, min_length=1, description="default: idle and loaded with a load, idle without")
    rate: int | Literal["max"] = 1000
    duration: int = Field(3, ge=2, le=3600, description="whole seconds each probe runs")
    load: TcpLoad | None = None
    probe_clients: list[str] | None = Field(None, description="client hosts probed (default: every client)")
    sample_interval: float = Field(1.0, ge=0.1, le=10, description="CPU and counter sampling period during a "
                                                                  "point, seconds (bench/latency_overhead.py)")
    port_base: int = Field(11111, ge=1024, le=65000)

    @field_validator("load", mode="before")
    @classmethod
    def _load_kind(cls, v: object) -> object:
        if isinstance(v, dict) and v.get("kind") not in LOADS:
            kind = v.get("kind")
            raise ValueError(f"kind = {kind!r}: no study of that kind can be a load; loads are "
                             f"{', '.join(repr(k) for k in LOADS)} (the TCP study's traffic, iperf3)"
                             if kind is not None else "a load needs kind = \"tcp\"")
        return v

    @field_validator("rate", mode="before")
    @classmethod
    def _rate(cls, v: object) -> object:
        if v == "max" or (isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= cls.MAX_RATE):
            return v
        raise ValueError(f"{v!r} is not a rate: give requests per second per probe, a whole number "
                         f"1 .. {cls.MAX_RATE}, or \"max\" (back to back)")

    @model_validator(mode="after")
    def _consistent(self) -> LatencyStudy:
        for e in self.engines:
            if not set(SERVES[e]) & set(self.protocols):
                raise ValueError(f"study.engines: {e} measures {'/'.join(SERVES[e]).upper()} only; add "
                                 f"{' or '.join(repr(p) for p in SERVES[e])} to study.protocols or drop {e}")
        for p in self.protocols:
            if not any(p in SERVES[e] for e in self.engines):
                raise ValueError(f"study.protocols: no engine in study.engines measures {p.upper()} "
                                 f"(sockperf does both)")
        for engine, proto in self.pairs():
            for size in self.message_sizes:
                try:
                    check_size(engine, proto, size)
                except InputError as err:
                    raise ValueError(f"study.message_sizes: {err.message}") from None
        if "irtt" in self.engines and self.rate == "max":
            raise ValueError("study.rate = \"max\": irtt sends on a fixed interval only; give requests per "
                             "second (e.g. rate = 1000)")
        if "iperf2" in self.engines and self.rate != "max" and self.rate > bounceback.MAX_RATE:
            raise ValueError(f"study.rate = {self.rate}: iperf 2's --bounceback-period is 10 us at the "
                             f"shortest ({bounceback.MAX_RATE:g} requests/s)")
        if "loaded" in self.conditions_run() and self.load is None:
            raise ValueError("study.conditions: \"loaded\" points need a load: add [study.load] with "
                             "kind = \"tcp\" (the traffic the latency is measured under)")
        return self

    def pairs(self) -> list[tuple[str, str]]:
        """(engine, protocol) of every probe the study runs, protocol first."""
        return [(e, p) for p in self.protocols for e in self.engines if p in SERVES[e]]

    def conditions_run(self) -> list[str]:
        return list(self.conditions or (["idle", "loaded"] if self.load is not None else ["idle"]))

    def points(self) -> list[tuple[str, dict[str, Any]]]:
        """``udp/sockperf/m64/idle``: protocol x engine x message size x condition,
        idle and loaded of one probe next to each other (repeats then alternate)."""
        out = []
        for (engine, proto), size, cond in itertools.product(self.pairs(), self.message_sizes,
                                                             self.conditions_run()):
            out.append((point_key(proto, engine, size, cond),
                        {"protocol": proto, "engine": engine, "message_size": size, "condition": cond,
                         "rate": self.rate, "duration": self.duration,
                         "waiting": BACK_TO_BACK if self.rate == "max" else WAITING[engine]}))
        return out

    def measured_seconds(self) -> float:
        """The longest trial: a probe's whole run, and around a loaded one the load's lead and tail."""
        runs = [probe_timing(e, self.duration) for e in self.engines]
        if self.load is not None and "loaded" in self.conditions_run():
            return max(max(0.0, self.load.lead - pre) + run + TAIL for pre, run in runs)
        return max(run for _, run in runs)

    def check_plan(self, plan: PlanLike) -> None:
        clients = [n for n, h in plan.hosts.items() if h.role == "client"]
        for key, names in (("study.probe_clients", self.probe_clients),
                           ("study.load.clients", self.load.clients if self.load else None)):
            for c in names or []:
                if c not in clients:
                    raise ValueError(f"{key} names {c!r}, which is not a client host (clients: {', '.join(clients)})")
            if names is not None and len(set(names)) != len(names):
                raise ValueError(f"{key}: a host is named twice")
