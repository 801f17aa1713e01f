"""The one list of studies: each kind with its plan schema, its runner (the
execution side) and its view (the results side).

Only the front ends (``cli/``, ``api.py`` and the dashboard) import this
module: they are where the two sides of nicbench meet.  The session is
handed a runner factory, the report a view, and neither knows which study
it serves.  Adding a study = its schema in ``plan/studies/`` (listed in
``plan.studies.SCHEMAS``), its folder under ``studies/``, and one line below.

It sits beside ``api.py``, outside the ``studies`` package, because it is a
join, not a study: ``nicbench.studies.*`` is then exactly the study folders,
and the contract that they do not import each other names them by that
pattern (a new study needs no contract edit).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .core.errors import InputError
from .importers.adapt import StudyImport
from .plan.base import StudySchema
from .plan.studies import HttpsStudy, LatencyStudy, PacketStudy, StorageStudy, TcpStudy, UdpStudy
from .report.view import StudyView
from .studies.https.imported import HttpsImport
from .studies.https.view import HttpsView
from .studies.latency.imported import LatencyImport
from .studies.latency.view import LatencyView
from .studies.packets.imported import PacketImport
from .studies.packets.view import PacketView
from .studies.storage.imported import StorageImport
from .studies.storage.view import StorageView
from .studies.tcp.imported import TcpImport
from .studies.tcp.view import TcpView
from .studies.udp.imported import UdpImport
from .studies.udp.view import UdpView

if TYPE_CHECKING:
    from .hosts.base import Hosts
    from .plan.model import Plan
    from .run.study import RunnerFactory, StudyRunner


@dataclass(frozen=True)
class _Runner:
    """A study's runner factory, its module imported when a run makes one:
    the results side (import, report, runs, serve) never loads the execution
    side of six studies (about 0.3-0.5 s of every command's start-up)."""

    kind: str
    name: str

    def load(self) -> Any:
        return getattr(importlib.import_module(f"nicbench.studies.{self.kind}.runner"), self.name)

    def __call__(self, plan: Plan, hosts: Hosts) -> StudyRunner:
        runner: StudyRunner = self.load()(plan, hosts)
        return runner


@dataclass(frozen=True)
class Study:
    kind: str
    schema: type[StudySchema]
    runner: RunnerFactory
    view: StudyView
    # turns parsed tool outputs run elsewhere into this study's trials (``nicbench import``)
    importer: StudyImport | None = None


STUDIES: dict[str, Study] = {s.kind: s for s in (
    Study("tcp", TcpStudy, _Runner("tcp", "TcpRunner"), TcpView(), TcpImport()),
    Study("https", HttpsStudy, _Runner("https", "HttpsRunner"), HttpsView(), HttpsImport()),
    Study("storage", StorageStudy, _Runner("storage", "StorageRunner"), StorageView(), StorageImport()),
    Study("packets", PacketStudy, _Runner("packets", "PacketRunner"), PacketView(), PacketImport()),
    Study("udp", UdpStudy, _Runner("udp", "UdpRunner"), UdpView(), UdpImport()),
    Study("latency", LatencyStudy, _Runner("latency", "LatencyRunner"), LatencyView(), LatencyImport()),
)}

VIEWS: dict[str, StudyView] = {k: s.view for k, s in STUDIES.items()}


def study(kind: str) -> Study:
    try:
        return STUDIES[kind]
    except KeyError:
        raise InputError(f"no study of kind {kind!r}", where="study.kind",
                         hint=f"the studies are {', '.join(STUDIES)}") from None


def importer_for(kind: str) -> tuple[str, StudyImport] | None:
    """The study that imports parsed files of ``kind`` (tcp, udp, storage, http,
    packets, rr) and its adapter, or None when no study does."""
    for s in STUDIES.values():
        if s.importer is not None and kind in s.importer.kinds:
            return s.kind, s.importer
    return None
