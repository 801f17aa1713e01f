"""The hosts of a run as pure data: names, roles, test addresses and NICs,
the link's MTU and speeds, and any back-to-back cables between hosts.

The embedded lab (``lab/``) adds its namespaces to this shape; real hosts
reached over SSH are described by it as they are.  It is stored with every
run (``RunInfo.meta["lab"]``), so the results side knows what carried the
traffic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

HOST_IF = "eth0"


@dataclass(frozen=True)
class HostSpec:
    name: str
    role: str
    netns: str       # the lab's namespace; "" for a real host
    ip: str          # the test address, without prefix
    prefix: int
    ifname: str = HOST_IF


@dataclass(frozen=True)
class DirectLink:
    """A back-to-back link between two hosts, outside the switch (the packet
    study's ports, as the seed's generator and receiver are cabled).  In the
    lab both ends are veths named ``pk<index>``; ``queues`` TX/RX queues on
    each end let one generator thread per queue run on its own CPU."""

    index: int
    a: str               # host names: a = generator, b = receiver
    b: str
    queues: int = 1

    @property
    def ifname(self) -> str:
        return f"pk{self.index}"

    def ips(self, ip: int) -> tuple[str, str]:
        """(a, b) addresses: 198.19.<index>.1/.2 (RFC 2544's range) or
        2001:2:0:<index>::1/::2 (RFC 5180's IPv6 benchmarking range)."""
        if ip == 6:
            return f"2001:2:0:{self.index:x}::1", f"2001:2:0:{self.index:x}::2"
        return f"198.19.{self.index}.1", f"198.19.{self.index}.2"


@dataclass(frozen=True)
class HostsSpec:
    """Every host of a run and the link between them.  ``speed_bps`` is the
    server link's line rate (shaped in the lab; the NICs' speed on real
    hosts), ``client_speed_bps`` each client link's."""

    name: str
    mtu: int
    hosts: tuple[HostSpec, ...]
    speed_bps: float | None = None
    client_speed_bps: float | None = None
    direct: tuple[DirectLink, ...] = ()

    @property
    def shaped(self) -> bool:
        """Are the links shaped to their speed here (only the lab shapes)?"""
        return False

    def host(self, name: str) -> HostSpec:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def ifnames(self, host: str) -> list[str]:
        """The host's test interface, then its back-to-back ports."""
        return [self.host(host).ifname] + [d.ifname for d in self.direct if host in (d.a, d.b)]

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "mtu": self.mtu, "speed_bps": self.speed_bps,
                "client_speed_bps": self.client_speed_bps,
                "hosts": [h.__dict__ for h in self.hosts], "direct": [d.__dict__ for d in self.direct]}
