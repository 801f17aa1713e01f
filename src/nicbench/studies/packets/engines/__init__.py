"""The packet study's engines, one file each, by the name plans give them.

Adding an engine: a file here with an object meeting
:class:`~.engine.Engine` (and its :class:`~.engine.Receiver`, or another
engine's), one line in :data:`ENGINES`, and its name in the study's schema
(``plan/studies/packets.py``).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import nbgen, pktgen, trafgen
from .engine import Engine

ENGINES: dict[str, Engine] = {
    "nbgen": nbgen.ENGINE,
    "trafgen": trafgen.ENGINE,
    "pkt-gen": pktgen.ENGINE,
}


def receivers(engines: Sequence[str]) -> list[str]:
    """The receivers a set of engines needs, by the engine whose tool each
    runs: pkt-gen's points count with pkt-gen rx (netmap on both ends), the
    others with nbgen's XDP counter."""
    used = {ENGINES[e].receiver.name for e in engines}
    return [name for name in ENGINES if name in used]
