"""What the packet study's preflight decided, handed to every point and engine.

The hosts (one generator, one receiver), their port NICs and MACs, the
generator's CPUs and kernel, and where nbgen is on each host.  Port names
and addresses of the lab's back-to-back links come from ``lab.topology``
through :class:`~nicbench.hosts.spec.DirectLink`: one place knows them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...hosts.spec import DirectLink
from ...hosts.transport import Transport
from ...plan.studies.packets import PacketStudy


def port_ifname(i: int) -> str:
    """The lab's back-to-back port names (one place knows them: lab.topology)."""
    return DirectLink(i, "", "").ifname


def port_ips(i: int, ip: int) -> tuple[str, str]:
    """The frames' (source, destination) addresses on port ``i``: the lab's own."""
    return DirectLink(i, "", "").ips(ip)


@dataclass
class PacketContext:
    """What the packet study's preflight decided, for every point."""

    study: PacketStudy
    server: str                          # the generator
    receiver: str
    transports: dict[str, Transport]
    versions: dict[str, str]
    exe: str | None                      # nbgen
    macs: dict[tuple[str, int], str] = field(default_factory=dict)   # (host, port) -> MAC
    cpus: list[int] = field(default_factory=lambda: [0])   # the generator's online CPUs
    kernel: str = ""
    devs: dict[str, list[str]] = field(default_factory=dict)   # host -> its port NICs (lab: pk0, pk1, ...)
    exes: dict[str, str] = field(default_factory=dict)         # host -> nbgen there

    @staticmethod
    def dev_of(devs: dict[str, list[str]], host: str, i: int) -> str:
        """Port ``i``'s NIC on ``host``: the plan's (real hosts) or the lab's."""
        return devs[host][i] if host in devs else port_ifname(i)

    def dev(self, host: str, i: int) -> str:
        return self.dev_of(self.devs, host, i)
