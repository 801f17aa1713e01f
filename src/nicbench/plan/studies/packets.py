"""``[study] kind = "packets"``: packet rate, generator and receiver back to back (seed 003)."""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from ...tools.frames import min_frame
from ..base import PlanLike, Speed, StudySchema, one_or_many, trim_problem

# live frames: a page less XDP headroom, skb_shared_info and the page head (measured: 3409 B is EINVAL), + FCS
NBGEN_MAX_FRAME = 3408 + 4
# pkt-gen builds each frame in one netmap buffer (dev.netmap.buf_size, 2048 by default) unless told -F
PKTGEN_MAX_FRAME = 2048 + 4


class PacketStudy(StudySchema):
    """Packet rate (seed 003): a generator and a receiver, back to back.

    The study server is the generator (the host under test, as in the seed:
    pkt-gen transmits); the receiver is the study's one client.  ``ports``
    back-to-back links join them (the seed: single and dual port), each
    driven by its own generator process with ``threads`` threads (= queues).
    Frame sizes count from the destination MAC to the FCS (RFC 2544).  The
    receiver counts the test flow with an XDP program and drops it.

    ``line_rate`` is each port's nominal speed, for the ceiling: the lab does
    not shape these links -- XDP transmit and trafgen's qdisc bypass both go
    around tc, so a rate here is the generator's ``rate``, never a qdisc's.
    """

    SWEPT = ("engines", "frame_sizes", "ports", "threads", "ip_versions")
    KIND = "packets"
    kind: Literal["packets"]
    clients: list[str] | None = Field(None, description="the receiver host (default: the one client)")
    engines: list[Literal["nbgen", "trafgen", "pkt-gen"]] = Field(
        default=["nbgen"], min_length=1, json_schema_extra=one_or_many,
        description="nbgen (XDP), trafgen (AF_PACKET), pkt-gen (netmap: FreeBSD, or Linux with /dev/netmap; its "
                    "points count with pkt-gen rx on the receiver)")
    frame_sizes: list[Annotated[int, Field(ge=1, le=9234)]] = Field(
        default_factory=lambda: [64], min_length=1, description="bytes with FCS (64 .. MTU + 18)",
        json_schema_extra=one_or_many)
    ports: list[Annotated[int, Field(ge=1, le=4)]] = Field(default_factory=lambda: [1], min_length=1,
                                                           json_schema_extra=one_or_many)
    threads: list[Annotated[int, Field(ge=1, le=64)]] = Field(
        default_factory=lambda: [1], min_length=1, description="generator threads (queues) per port",
        json_schema_extra=one_or_many)
    ip_versions: list[Literal[4, 6]] = Field(default=[4], min_length=1, json_schema_extra=one_or_many)
    duration: float = Field(5.0, gt=0, le=3600, description="seconds each generator sends")
    trim: float = Field(0.5, ge=0, description="seconds cut from both ends of the measured window")
    rate: float | None = Field(None, gt=0, description="frames/s per port (rate-limited mode); none: as fast as "
                                                       "the engine can")
    line_rate: Speed = Field(10e9, description="each port's nominal speed, for the ceiling (e.g. \"40G\")")
    search: Literal["none", "ndr"] = Field("none", description="ndr: bisect for the highest rate whose loss "
                                                              "is at most loss_threshold")
    loss_threshold: float = Field(0.001, ge=0, lt=1, description="ndr: the loss allowed, a fraction (0.001 = 0.1 %)")
    search_steps: int = Field(6, ge=1, le=20, description="ndr: bisection steps after the unpaced one")
    xdp_mode: Literal["auto", "native", "generic"] = Field(
        "auto", description="receiver's XDP attach: auto tries native, falls back to generic and says so")
    interfaces: dict[str, list[Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:@-]{1,15}$")]]] | None = Field(
        None, description="real hosts: each host's port NICs, in port order, e.g. { gen = [\"ens1f0\", "
                          "\"ens1f1\"], sink = [\"ens2f0\", \"ens2f1\"] } (the lab names its own pk0, pk1, ...)")
    udp_port: int = Field(9, ge=1, le=65535)

    @field_validator("threads", "ports", "frame_sizes", "engines", "ip_versions", mode="before")
    @classmethod
    def _one_or_many(cls, v: object) -> object:
        return [v] if isinstance(v, (int, str)) else v

    @model_validator(mode="after")
    def _sizes(self) -> PacketStudy:
        for ip in self.ip_versions:
            small = [f for f in self.frame_sizes if f < min_frame(ip)]
            if small:
                raise ValueError(f"study.frame_sizes: {small[0]} is below the {min_frame(ip)}-byte minimum "
                                 f"(an Ethernet frame is at least 64 bytes with its FCS"
                                 f"{'; Ethernet + IPv6 + UDP headers + FCS take 66' if ip == 6 else ''})")
        if "nbgen" in self.engines:
            big = [f for f in self.frame_sizes if f > NBGEN_MAX_FRAME]
            if big:
                raise ValueError(f"study.frame_sizes: {big[0]} bytes does not fit nbgen's live frames (one page: "
                                 f"at most {NBGEN_MAX_FRAME} with the FCS); use engines = [\"trafgen\"] for jumbo "
                                 "frames")
        if "pkt-gen" in self.engines:
            big = [f for f in self.frame_sizes if f > PKTGEN_MAX_FRAME]
            if big:
                raise ValueError(f"study.frame_sizes: {big[0]} bytes does not fit one netmap buffer (2048 bytes "
                                 f"by default, so at most {PKTGEN_MAX_FRAME} with the FCS): pkt-gen sends each "
                                 "frame from one slot")
        if self.duration <= 2 * self.trim:
            raise ValueError(trim_problem(self.duration, self.trim, "trim" in self.model_fields_set))
        if self.search == "ndr" and self.rate:
            raise ValueError("study.rate: the no-drop-rate search chooses the rate itself; leave rate out")
        return self

    def points(self) -> list[tuple[str, dict[str, Any]]]:
        """``nbgen/ipv4/p1/t1/64B``: engine x IP version x ports x threads x frame size."""
        return [(f"{engine}/ipv{ip}/p{ports}/t{threads}/{size}B",
                 {"engine": engine, "ip": ip, "ports": ports, "threads": threads, "frame_size": size,
                  "duration": self.duration, "rate": self.rate, "direction": "tx"})
                for engine, ip, ports, threads, size in itertools.product(
                    self.engines, self.ip_versions, self.ports, self.threads, self.frame_sizes)]

    def measured_seconds(self) -> float:
        return self.duration

    def back_to_back(self, plan: PlanLike) -> tuple[int, int] | None:
        return max(self.ports), max(self.threads)

    def check_plan(self, plan: PlanLike) -> None:
        clients = [n for n, h in plan.hosts.items() if h.role == "client"]
        rx = self.clients or clients
        if plan.remote:
            need = max(self.ports)
            for h in (plan.server, *rx[:1]):
                got = (self.interfaces or {}).get(h, [])
                if len(got) < need:
                    raise ValueError(f"study.interfaces.{h}: a packets study on real hosts names each host's port "
                                     f"NICs in order; {h} needs {need} (ports = {self.ports}), has {len(got)}")
        elif self.interfaces:
            raise ValueError("study.interfaces is for real hosts: the lab names its back-to-back ports pk0, pk1, ...")
        if len(rx) != 1:
            raise ValueError(f"a packets study has one receiver: name it in study.clients (clients here: "
                             f"{', '.join(rx)})")
        frame_max = plan.link.mtu + 18
        big = [f for f in self.frame_sizes if f > frame_max]
        if big:
            raise ValueError(f"study.frame_sizes: {big[0]} bytes is above the MTU ({plan.link.mtu} + 18 "
                             f"header and FCS = {frame_max}): raise link.mtu for jumbo frames")
        if plan.link.speed or plan.link.client_speed:
            raise ValueError("link.speed shapes TCP links with tbf, which XDP and trafgen's qdisc bypass go "
                             "around: give the ports' nominal speed as study.line_rate, and a generator "
                             "rate as study.rate")
