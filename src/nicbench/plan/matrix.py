"""Plan -> the ordered list of trials (matrix x repeats)."""

from __future__ import annotations

import itertools

from ..core.units import format_size
from ..records import TrialSpec
from .model import HttpsStudy, PacketStudy, Plan, StorageStudy


def point_key(direction: str, connections: int, io_size: int) -> str:
    return f"{direction}/c{connections}/io{format_size(io_size)}"


def trials(plan: Plan) -> list[TrialSpec]:
    """Every trial of the plan, in run order.

    ``interleaved`` runs the whole matrix once per repeat, so slow drift of the
    machine spreads over all points instead of biasing one; ``sequential``
    repeats each point back to back.
    """
    s = plan.study
    if isinstance(s, HttpsStudy):
        return _https_trials(s)
    if isinstance(s, StorageStudy):
        return _storage_trials(s)
    if isinstance(s, PacketStudy):
        return _packet_trials(s)
    matrix = list(itertools.product(s.directions, s.connections, s.io_sizes))
    out = []
    for i, (rep, (direction, conns, io)) in enumerate(_ordered(matrix, s.repeats, s.order)):  # type: ignore[misc]
        out.append(TrialSpec(
            trial_id=f"t{i + 1:04d}", index=i, study="tcp",
            point=point_key(direction, conns, io), repeat=rep,
            params={"direction": direction, "connections": conns, "io_size": io,
                    "engine": s.engine, "duration": s.duration, "omit": s.omit},
        ))
    return out


def _ordered(matrix: list, repeats: int, order: str) -> list[tuple[int, object]]:
    if order == "interleaved":
        return [(r, m) for r in range(repeats) for m in matrix]
    return [(r, m) for m in matrix for r in range(repeats)]


def _https_trials(s: HttpsStudy) -> list[TrialSpec]:
    """``https/c40`` and, for the baseline, ``http/c40``: scheme x connections
    (x threads, ``https/c40/t4``, when several thread counts are swept)."""
    matrix = list(itertools.product(s.schemes, s.connections, s.threads))
    tag = (lambda t: f"/t{t}") if len(s.threads) > 1 else (lambda t: "")
    return [TrialSpec(trial_id=f"t{i + 1:04d}", index=i, study="https", point=f"{scheme}/c{conns}{tag(threads)}",
                      repeat=rep,
                      params={"scheme": scheme, "connections": conns, "threads": threads, "duration": s.duration,
                              "file_size": s.file_size, "tls": ",".join(s.tls_versions) if scheme == "https" else None,
                              "direction": "tx", "engine": "wrk"})
            for i, (rep, (scheme, conns, threads)) in enumerate(_ordered(matrix, s.repeats, s.order))]  # type: ignore[misc]


def _storage_trials(s: StorageStudy) -> list[TrialSpec]:
    """``read/bs4K`` ... as seed 004's table: op x block size."""
    matrix = list(itertools.product(s.ops, s.block_sizes))
    return [TrialSpec(trial_id=f"t{i + 1:04d}", index=i, study="storage", point=f"{op}/bs{format_size(bs)}",
                      repeat=rep, params={"op": op, "block_size": bs, "iodepth": s.iodepth, "luns": s.luns,
                                          "duration": s.duration, "ramp": s.ramp, "pattern": s.pattern,
                                          "target": s.target, "engine": "fio"})
            for i, (rep, (op, bs)) in enumerate(_ordered(matrix, s.repeats, s.order))]  # type: ignore[misc]


def _packet_trials(s: PacketStudy) -> list[TrialSpec]:
    """``nbgen/ipv4/p1/t1/64B``: engine x IP version x ports x threads x frame size."""
    matrix = list(itertools.product(s.engines, s.ip_versions, s.ports, s.threads, s.frame_sizes))
    return [TrialSpec(trial_id=f"t{i + 1:04d}", index=i, study="packets",
                      point=f"{engine}/ipv{ip}/p{ports}/t{threads}/{size}B", repeat=rep,
                      params={"engine": engine, "ip": ip, "ports": ports, "threads": threads, "frame_size": size,
                              "duration": s.duration, "rate": s.rate, "direction": "tx"})
            for i, (rep, (engine, ip, ports, threads, size)) in enumerate(_ordered(matrix, s.repeats, s.order))]  # type: ignore[misc]
