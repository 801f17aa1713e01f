"""The storage study's state while it runs, shared by its runner and its
iSCSI target (``tgt.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...hosts.transport import Process, Transport
from ...plan.studies.storage import StorageStudy
from ...records import RawOutput


@dataclass
class StorageContext:
    """The storage study's state: what preflight decided, and the targets while they run."""

    study: StorageStudy
    server: str
    clients: list[str]
    transports: dict[str, Transport]
    addresses: dict[str, str]
    versions: dict[str, str]
    targets: list[Process] = field(default_factory=list)
    raws: list[RawOutput] = field(default_factory=list)
    tgt_up: bool = False                 # our tgtd answered: its socket files are ours to remove
