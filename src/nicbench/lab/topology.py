"""The embedded lab's shape, as pure data: which namespaces, links, addresses.

One namespace per host, plus ``nb-<lab>-sw`` holding a Linux bridge that plays
the switch.  Each host has ``eth0``, one end of a veth pair whose other end
``p-<host>`` is a port of the bridge.  Addresses come from the lab subnet
(default 198.18.0.0/24, the RFC 2544 benchmarking range): server first.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any

from ..hosts.spec import HOST_IF, DirectLink, HostsSpec
from ..hosts.spec import HostSpec as LabHost

__all__ = ["HOST_IF", "DirectLink", "LabHost", "LabSpec", "build_commands", "make_spec", "netns_name",
           "shaping_commands", "tbf_burst", "tbf_rate", "topology_problems"]

SWITCH = "sw"


@dataclass(frozen=True)
class LabSpec(HostsSpec):
    """The lab's hosts are namespaces of this machine, joined by a bridge in
    a namespace of its own; links are shaped when a speed is given."""

    @property
    def shaped(self) -> bool:
        return bool(self.speed_bps or self.client_speed_bps)

    @property
    def switch_ns(self) -> str:
        return netns_name(self.name, SWITCH)

    @property
    def namespaces(self) -> list[str]:
        return [self.switch_ns, *(h.netns for h in self.hosts)]

    @classmethod
    def from_dict(cls, d: dict) -> LabSpec:
        return cls(d["name"], int(d["mtu"]), tuple(LabHost(**h) for h in d["hosts"]),
                   d.get("speed_bps"), d.get("client_speed_bps"),
                   tuple(DirectLink(**x) for x in d.get("direct", [])))


def netns_name(lab: str, host: str) -> str:
    return f"nb-{lab}-{host}"


def make_spec(name: str, hosts: list[tuple[str, str]], mtu: int,
              subnet: str = "198.18.0.0/24", speed_bps: float | None = None,
              client_speed_bps: float | None = None, direct: tuple[DirectLink, ...] = ()) -> LabSpec:
    """Assign namespaces and addresses; ``hosts`` is [(name, role)], servers first."""
    net = ipaddress.IPv4Network(subnet)
    ordered = sorted(hosts, key=lambda h: (h[1] != "server", hosts.index(h)))
    addrs = list(net.hosts())[:-1]          # the last one is the switch's own (the SSH mode's controller)
    if len(ordered) > len(addrs):
        raise ValueError(f"subnet {subnet} is too small for {len(ordered)} hosts")
    return LabSpec(name, mtu, tuple(
        LabHost(n, role, netns_name(name, n), str(addrs[i]), net.prefixlen)
        for i, (n, role) in enumerate(ordered)), speed_bps, client_speed_bps, direct)


# What this kernel's tbf charges per frame, measured on the lab's veths (see
# docs/measurement.md, "Shaped lab links"): skb->len, i.e. the frame from the Ethernet header
# to the end of the payload -- neither the FCS nor preamble and inter-frame
# gap, and tbf's own ``overhead``/``mpu`` options did not change that (nor did
# a stab size table make it exact: it overshot by 6 %).  So the rate given to
# tbf is scaled by (MTU + 14) / (MTU + 38) to make full frames take exactly
# the wire time of the configured speed.  Every point then verifies the
# delivered wire rate from the interface counters.
TBF_CHARGED = 14
WIRE_EXTRA = 4 + 8 + 12          # FCS + preamble/SFD + inter-frame gap


def tbf_rate(speed_bps: float, mtu: int) -> int:
    return int(round(speed_bps * (mtu + TBF_CHARGED) / (mtu + TBF_CHARGED + WIRE_EXTRA)))


def tbf_burst(speed_bps: float, mtu: int) -> int:
    """At least 1 ms of rate: a smaller bucket loses tokens to timer slack and
    undershoots (measured: 0.57-0.93 of the rate with 4-16 KB at 1-2 Gbit)."""
    return max(int(speed_bps / 8 / 1000), 4 * (mtu + TBF_CHARGED + WIRE_EXTRA))


def shaping_commands(spec: LabSpec) -> list[list[str]]:
    """GSO/TSO off on every lab port (so qdiscs see wire frames, not 64 KB
    super-packets), then a tbf on each shaped link, one per direction: the
    host's eth0 egress and its switch port's egress."""
    if not spec.shaped:
        return []
    sw = spec.switch_ns
    cmds = []
    for h in spec.hosts:
        cmds.append(["ip", "netns", "exec", h.netns, "ethtool", "-K", h.ifname, "tso", "off", "gso", "off"])
        cmds.append(["ip", "netns", "exec", sw, "ethtool", "-K", f"p-{h.name}", "tso", "off", "gso", "off"])
    for h in spec.hosts:
        speed = spec.speed_bps if h.role == "server" else spec.client_speed_bps
        if not speed:
            continue
        rate, burst = tbf_rate(speed, spec.mtu), tbf_burst(speed, spec.mtu)
        for ns, dev in ((h.netns, h.ifname), (sw, f"p-{h.name}")):
            cmds.append(["tc", "-n", ns, "qdisc", "replace", "dev", dev, "root", "tbf",
                         "rate", f"{rate}bit", "burst", str(burst), "latency", "10ms"])
    return cmds


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
    for d in spec.direct:
        na, nb = spec.host(d.a).netns, spec.host(d.b).netns
        q = str(d.queues)
        cmds.append(["ip", "link", "add", d.ifname, "netns", na, "numtxqueues", q, "numrxqueues", q, "type", "veth",
                     "peer", "name", d.ifname, "netns", nb, "numtxqueues", q, "numrxqueues", q])
        for ns, ip4, ip6 in ((na, d.ips(4)[0], d.ips(6)[0]), (nb, d.ips(4)[1], d.ips(6)[1])):
            cmds += [["ip", "-n", ns, "link", "set", d.ifname, "mtu", mtu, "up"],
                     ["ip", "-n", ns, "addr", "add", f"{ip4}/24", "dev", d.ifname],
                     ["ip", "-n", ns, "addr", "add", f"{ip6}/64", "dev", d.ifname, "nodad"]]
    return cmds + shaping_commands(spec)


def topology_problems(spec: LabSpec, live: dict[str, dict[str, Any]],
                      bridge: dict[str, Any] | None = None) -> list[str]:
    """How the live lab departs from ``spec`` (pure).  ``live[host]`` holds its
    test interface's ``mtu``, ``addrs`` ("ip/prefix"), ``up``, the tbf rate on
    it and on its switch port in bit/s (``tbf_bps``, ``port_tbf_bps``; None: no
    tbf), its back-to-back ports' MTUs (``direct``: ifname -> mtu; each host
    reads its own end) and, when the switch was read, its switch port's MTU
    (``port_mtu``; None: the port is gone).  ``bridge``: the switch's bridge
    (``mtu``; None: not read).  Every MTU on the path counts: a switch port
    set lower than the hosts' drops their full-size frames without a word,
    and a point then stalls."""
    out: list[str] = []
    if bridge is not None and bridge.get("mtu") != spec.mtu:
        out.append(f"switch: br0 in {spec.switch_ns} " + ("is gone" if bridge.get("mtu") is None else
                                                            f"has MTU {bridge['mtu']}, the plan wants {spec.mtu}"))
    for h in spec.hosts:
        got = live.get(h.name)
        if got is None:
            out.append(f"{h.name}: its namespace {h.netns} is gone")
            continue
        if got.get("mtu") != spec.mtu:
            out.append(f"{h.name}: {h.ifname} has MTU {got.get('mtu')}, the plan wants {spec.mtu}")
        if "port_mtu" in got and got["port_mtu"] != spec.mtu:
            out.append(f"{h.name}: its switch port p-{h.name} (in {spec.switch_ns}) "
                       + ("is gone" if got["port_mtu"] is None else
                          f"has MTU {got['port_mtu']}, the plan wants {spec.mtu}"))
        if f"{h.ip}/{h.prefix}" not in got.get("addrs", []):
            out.append(f"{h.name}: {h.ifname} does not have {h.ip}/{h.prefix} "
                       f"(it has {', '.join(got.get('addrs', [])) or 'no address'})")
        if not got.get("up"):
            out.append(f"{h.name}: {h.ifname} is down")
        speed = spec.speed_bps if h.role == "server" else spec.client_speed_bps
        want = tbf_rate(speed, spec.mtu) if speed else None
        for where, rate in ((h.ifname, got.get("tbf_bps")), (f"switch port p-{h.name}", got.get("port_tbf_bps"))):
            if want is None and rate is not None:
                out.append(f"{h.name}: {where} is shaped to {rate / 1e6:.0f} Mbit/s, the plan shapes nothing there")
            elif want is not None and (rate is None or abs(rate - want) > 0.001 * want):
                out.append(f"{h.name}: {where} is " + ("not shaped" if rate is None else
                                                       f"shaped to {rate / 1e6:.0f} Mbit/s")
                           + f", the plan wants a tbf of {want / 1e6:.0f} Mbit/s")
        for d in spec.direct:
            if h.name in (d.a, d.b):
                mtu = got.get("direct", {}).get(d.ifname)
                if mtu is None:
                    out.append(f"{h.name}: its back-to-back port {d.ifname} is gone")
                elif mtu != spec.mtu:
                    out.append(f"{h.name}: {d.ifname} has MTU {mtu}, the plan wants {spec.mtu}")
    return out
