"""What the packet study's runner asks of an engine.

An :class:`Engine` is the generator of a point (nbgen, trafgen, pkt-gen):
what it needs of the hosts, one port's argv, how its processes are sampled,
and its own counts of what it sent.  Its :class:`Receiver` is what counts
its frames at the other end, started before the generator and stopped after
it: nbgen's XDP counter for nbgen and trafgen, pkt-gen rx for pkt-gen.  The
point's sequence around them (raw files, the guard, samplers, the start
barrier, the wait, the drain, the record) is the runner's, written once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ....hosts.transport import Process, Transport
from ....plan.studies.packets import PacketStudy
from ....records import Sample, Tags
from ....run.point import Point
from ..context import PacketContext

# one hint for the study's Linux engines: either may be the one a host lacks
INSTALL = ("run 'nicbench setup' (it builds nbgen, naming any compiler or library it lacks); trafgen: "
           "apt-get install netsniff-ng")
# capability bits (linux/capability.h)
CAPS = {"CAP_NET_ADMIN": 12, "CAP_NET_RAW": 13, "CAP_SYS_ADMIN": 21, "CAP_PERFMON": 38, "CAP_BPF": 39}

Ports = list[tuple[int, Process]]        # (port index, its process)


def lacking(mask: int | None, need: tuple[str, ...]) -> list[str]:
    """The capabilities of ``need`` that the effective mask ``mask`` lacks
    (CAP_SYS_ADMIN stands in for CAP_BPF/CAP_PERFMON on kernels before 5.8);
    none when the mask is unknown."""
    if mask is None:
        return []
    has = {n for n, bit in CAPS.items() if mask >> bit & 1}
    if "CAP_SYS_ADMIN" in has:
        has |= {"CAP_BPF", "CAP_PERFMON"}
    return [n for n in need if n not in has]


@dataclass
class Found:
    """What the preflight found of the engines so far."""

    versions: dict[str, str] = field(default_factory=dict)   # engine -> version (pkt-gen: its path)
    exe: str | None = None                                   # this nicbench's nbgen build
    exes: dict[str, str] = field(default_factory=dict)       # host -> nbgen there


@dataclass(frozen=True)
class TxPort:
    """One port's generator as a point asks for it.  ``rate`` is frames/s for
    the port (None: as fast as the engine goes); ``pin`` one CPU per thread;
    ``frame_size`` bytes with the FCS."""

    dev: str
    frames: list[bytes]          # nicbench's frames, one per thread
    duration: float
    pin: list[int]
    rate: float | None
    frame_size: int
    conf: str = "{conf}"         # a config file's place in argv until it is written on the host
    exe: str = ""                # nbgen on the generator
    # what an engine building its own frames takes instead (the same addresses)
    ip: int = 4
    src_ip: str = ""
    dst_ip: str = ""
    src_mac: str = ""
    dst_mac: str = ""
    dport: int = 9
    ncpus: int = 1               # the generator's CPUs


class Receiver(Protocol):
    """What counts a point's frames on the receiver's ports."""

    name: str          # the engine whose tool it runs: that engine's checks run on the receiver host
    label: str         # its processes' role among the point's CPU samples
    stop_signal: int   # after the drain: how it is told to print its last counts and end

    def check_port(self, host: str, dev: str, info: dict[str, Any], threads: int) -> tuple[list[str], list[str]]:
        """Problems and warnings of one receiver port (``info`` as ``ip -j link`` shows it)."""
        ...

    def start(self, pt: Point, ctx: PacketContext, ports: int, threads: int) -> Ports:
        """Every port's receiver started through ``pt`` and counting; a ToolError in the tool's words."""
        ...

    def received(self, trial_id: str, host: str, dev: str, pr: Process, tags: Tags,
                 meta: dict[str, Any]) -> list[Sample]:
        """Its counts as ``pkt.received`` samples; its totals into ``meta["rx"][dev]``."""
        ...


class Engine(Protocol):
    """A point's generator."""

    name: str            # as plans name it
    tool: str | None     # the host tool whose version the facts record (None: nicbench's own)
    caps: tuple[str, ...]    # the Linux capabilities it needs
    receiver: Receiver
    own_frames: bool     # sends nicbench's frames byte for byte (recorded in meta), not frames of its own
    forks: bool          # forks one sender per CPU, sampled as its children
    link_wait_s: float   # waits this long for the link before its first frame

    def locate(self, found: Found) -> list[str]:
        """Once, before any host: what this machine must provide (nbgen's build)."""
        ...

    def check(self, host: str, t: Transport, found: Found) -> list[str]:
        """The engine on ``host``: runnable, its version into ``found``; may raise PreflightError."""
        ...

    def check_generator(self, study: PacketStudy, host: str, kernel: str, ncpus: int) -> list[str]:
        """What the plan asks that the generator ``host`` cannot give this engine."""
        ...

    def generator(self, tx: TxPort) -> tuple[list[str], str | None, list[int]]:
        """One port's argv, its config file's text (None: none) and the CPUs its threads run on."""
        ...

    def sent(self, trial_id: str, host: str, dev: str, pr: Process, tags: Tags,
             meta: dict[str, Any]) -> list[Sample]:
        """Its own counts as ``pkt.sent`` samples; its totals into ``meta["tx"][dev]``."""
        ...
