"""``[study] kind = "https"``: HTTPS bulk throughput with nginx and wrk (seed 001)."""

from __future__ import annotations

import itertools
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from ..base import PlanLike, Size, StudySchema, one_or_many


class HttpsStudy(StudySchema):
    """HTTPS bulk throughput with nginx and wrk (seed 001).

    nginx serves one payload file of ``file_size`` from the study server over
    TLS (and plain HTTP for the ``"http"`` baseline); wrk on every client host
    fetches it over keep-alive connections for ``duration`` seconds.
    ``connections`` counts all clients together (the seed: 10..100).
    """

    SWEPT = ("schemes", "connections", "tls_versions", "threads")
    KIND = "https"
    kind: Literal["https"]
    schemes: list[Literal["https", "http"]] = Field(default=["https"], min_length=1)
    connections: list[Annotated[int, Field(ge=1, le=10000)]] = Field(default_factory=lambda: [10], min_length=1)
    threads: list[Annotated[int, Field(ge=1, le=64)]] = Field(
        default_factory=lambda: [2],
        min_length=1,
        description="wrk threads per client, swept (capped at its connections)",
        json_schema_extra=one_or_many,
    )
    duration: int = Field(10, ge=1, le=3600, description="seconds each wrk runs (whole seconds)")
    file_size: Size = Field(64 * 1024 * 1024, description="the payload file (seed: 2G)")
    tls_versions: list[Literal["1.2", "1.3"]] = Field(default=["1.3"], min_length=1)
    ciphers: str = Field("HIGH:!aNULL:!MD5", pattern=r"^[A-Za-z0-9:!+@_.-]{1,200}$")
    ciphersuites: str | None = Field(None, pattern=r"^[A-Z0-9_:]{1,200}$")
    ktls: bool = Field(True, description="ask OpenSSL for kernel TLS (ssl_conf_command Options KTLS)")
    workers: Literal["auto"] | Annotated[int, Field(ge=1, le=256)] = "auto"
    error_budget: float = Field(0.01, ge=0, le=1, description="wrk socket errors (connect, read, write, timeout) "
                                                                "allowed per request before a point fails")
    https_port: int = Field(443, ge=1, le=65535)
    http_port: int = Field(80, ge=1, le=65535)

    @field_validator("threads", mode="before")
    @classmethod
    def _one_or_many(cls, v: object) -> object:
        return [v] if isinstance(v, int) else v

    @model_validator(mode="after")
    def _sizes(self) -> HttpsStudy:
        if self.file_size < 1024:
            raise ValueError("study.file_size: at least 1K, or every request is mostly headers")
        if self.https_port == self.http_port:
            raise ValueError("study.https_port and study.http_port must differ")
        return self

    @property
    def trim(self) -> float:
        """Nothing is trimmed: wrk reports one total per run (see the study's analysis)."""
        return 0.0

    def points(self) -> list[tuple[str, dict[str, Any]]]:
        """``https/c40`` and, for the baseline, ``http/c40``: scheme x connections
        (x threads, ``https/c40/t4``, when several thread counts are swept)."""
        many = len(self.threads) > 1
        return [
            (
                f"{scheme}/c{conns}{f'/t{threads}' if many else ''}",
                {
                    "scheme": scheme,
                    "connections": conns,
                    "threads": threads,
                    "duration": self.duration,
                    "file_size": self.file_size,
                    "tls": ",".join(self.tls_versions) if scheme == "https" else None,
                    "direction": "tx",
                    "engine": "wrk",
                },
            )
            for scheme, conns, threads in itertools.product(self.schemes, self.connections, self.threads)
        ]

    def measured_seconds(self) -> float:
        return float(self.duration)

    def check_plan(self, plan: PlanLike) -> None:
        n = len(plan.clients)
        few = [c for c in self.connections if c < n]
        if few:
            raise ValueError(
                f"study.connections = {few[0]} is fewer than the {n} clients: every client "
                "needs at least one connection"
            )
