"""The embedded lab's shape, as pure data: which namespaces, links, addresses.

One namespace per host, plus ``nb-<lab>-sw`` holding a Linux bridge that plays
the switch.  Each host has ``eth0``, one end of a veth pair whose other end
``p-<host>`` is a port of the bridge.  Addresses come from the lab subnet
(default 198.18.0.0/24, the RFC 2544 benchmarking range): server first.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

SWITCH = "sw"
HOST_IF = "eth0"


@dataclass(frozen=True)
class LabHost:
    name: str
    role: str
    netns: str
    ip: str          # without prefix
    prefix: int
    ifname: str = HOST_IF


@dataclass(frozen=True)
class LabSpec:
    name: str
    mtu: int
    hosts: tuple[LabHost, ...]

    @property
    def switch_ns(self) -> str:
        return netns_name(self.name, SWITCH)

    @property
    def namespaces(self) -> list[str]:
        return [self.switch_ns, *(h.netns for h in self.hosts)]

    def host(self, name: str) -> LabHost:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(name)

    def to_dict(self) -> dict:
        return {"name": self.name, "mtu": self.mtu,
                "hosts": [h.__dict__ for h in self.hosts]}

    @classmethod
    def from_dict(cls, d: dict) -> "LabSpec":
        return cls(d["name"], int(d["mtu"]), tuple(LabHost(**h) for h in d["hosts"]))


def netns_name(lab: str, host: str) -> str:
    return f"nb-{lab}-{host}"


def make_spec(name: str, hosts: list[tuple[str, str]], mtu: int,
              subnet: str = "198.18.0.0/24") -> LabSpec:
    """Assign namespaces and addresses; ``hosts`` is [(name, role)], servers first."""
    net = ipaddress.IPv4Network(subnet)
    ordered = sorted(hosts, key=lambda h: (h[1] != "server", hosts.index(h)))
    addrs = list(net.hosts())
    if len(ordered) > len(addrs):
        raise ValueError(f"subnet {subnet} is too small for {len(ordered)} hosts")
    return LabSpec(name, mtu, tuple(
        LabHost(n, role, netns_name(name, n), str(addrs[i]), net.prefixlen)
        for i, (n, role) in enumerate(ordered)))


def build_commands(spec: LabSpec) -> list[list[str]]:
    """The ``ip`` commands that build the lab, in order."""
    sw = spec.switch_ns
    mtu = str(spec.mtu)
    cmds = [["ip", "netns", "add", ns] for ns in spec.namespaces]
    cmds += [["ip", "-n", sw, "link", "add", "br0", "type", "bridge", "stp_state", "0"],
             ["ip", "-n", sw, "link", "set", "lo", "up"]]
    for h in spec.hosts:
        port = f"p-{h.name}"
        cmds += [
            ["ip", "link", "add", h.ifname, "netns", h.netns, "type", "veth",
             "peer", "name", port, "netns", sw],
            ["ip", "-n", sw, "link", "set", port, "mtu", mtu, "master", "br0", "up"],
            ["ip", "-n", h.netns, "link", "set", "lo", "up"],
            ["ip", "-n", h.netns, "link", "set", h.ifname, "mtu", mtu, "up"],
            ["ip", "-n", h.netns, "addr", "add", f"{h.ip}/{h.prefix}", "dev", h.ifname],
        ]
    cmds.append(["ip", "-n", sw, "link", "set", "br0", "mtu", mtu, "up"])
    return cmds
