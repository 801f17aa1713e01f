"""The plan: a declarative TOML description of hosts, link and study.

Validated by pydantic with unknown keys forbidden, so a typo is an error, never
a silently ignored setting.  Units follow :mod:`nicbench.core.units`: sizes are
binary (``"4K"`` = 4096 B), durations are seconds.  Each study's own schema is
in ``plan/studies/<kind>.py``.
"""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import Field, PrivateAttr, field_validator, model_validator

from ..core.linerate import ModelError, check_mtu
from ..hosts.sshconfig import ssh_destination_problem
from ..tuning.profile import Profile, shipped
from .base import HOST_NAME, LAB_NAME, Speed, Strict
from .studies import Study


class Host(Strict):
    """A host taking part.  In the embedded lab it becomes a network namespace;
    with ``ssh`` it is a real machine reached over SSH (then every host is)."""

    role: Literal["server", "client"]
    ssh: str | None = Field(None, min_length=1, max_length=255, pattern=r"^[A-Za-z0-9@._:%\[\]-]+$",
                            description="where to log in: an alias from ~/.ssh/config, a name or an address, "
                                        "optionally user@")
    user: str | None = Field(None, pattern=r"^[a-z_][a-z0-9_.-]{0,31}$")
    port: int | None = Field(None, ge=1, le=65535)
    identity: str | None = None
    ssh_args: list[str] = Field(default_factory=list, description="extra ssh arguments (an inventory's "
                                                                  "ansible_ssh_common_args)")
    sudo: bool = Field(False, description="run the tools through sudo -n")
    interface: str | None = Field(None, pattern=r"^[A-Za-z0-9_.:@-]{1,15}$", description="the test NIC (ssh hosts)")
    test_ip: str | None = Field(None, description="the address the study's traffic uses (ssh hosts)")

    @field_validator("ssh", mode="before")
    @classmethod
    def _destination(cls, v: object) -> object:
        why = ssh_destination_problem(v) if isinstance(v, str) else None
        if why:
            raise ValueError(f"not an SSH destination: {why} (extra ssh options go in ssh_args, which runs what "
                             "it says)")
        return v

    @field_validator("test_ip")
    @classmethod
    def _ip(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                ipaddress.ip_address(v)
            except ValueError:
                raise ValueError(f"{v!r} is not an IP address") from None
        return v


class Link(Strict):
    """The test network's link settings (applied to every lab veth).

    ``speed`` shapes the server's link (both directions) to a line rate, e.g.
    ``"10G"`` (decimal bit/s); ``client_speed`` shapes every client's link too.
    Without a speed the lab's veths run as fast as the CPU allows and results
    carry no line-rate ceiling.
    """

    mtu: int = Field(1500, description="IP MTU in bytes (IPv4: 576..9216)")
    speed: Speed | None = None
    client_speed: Speed | None = None

    @field_validator("mtu")
    @classmethod
    def _mtu(cls, v: int) -> int:
        try:
            check_mtu(v, 4)
        except ModelError as e:
            raise ValueError(str(e)) from None
        return v

    @field_validator("speed", "client_speed")
    @classmethod
    def _shapeable(cls, v: float | None) -> float | None:
        if v is not None and v < 1e6:
            raise ValueError("the lab shapes links from 1M (1 Mbit/s) up; a slower tbf rate is not meaningful")
        return v


class Lab(Strict):
    """Embedded-lab settings.  Namespaces are named ``nb-<name>-<host>``."""

    name: str = Field("lab", pattern=LAB_NAME)
    subnet: str = Field("198.18.0.0/24", description="RFC 2544 benchmarking range by default")
    transport: Literal["netns", "ssh"] = Field(
        "netns", description="how nicbench reaches the lab hosts: into their namespaces, or over SSH to an sshd "
                             "each host runs (the whole SSH path, tested on one machine)")
    max_clock_offset: float = Field(0.05, gt=0, le=10, description="ssh: the largest clock offset between this "
                                                                   "machine and a host that preflight accepts, s")

    @field_validator("subnet")
    @classmethod
    def _subnet(cls, v: str) -> str:
        try:
            net = ipaddress.IPv4Network(v, strict=True)
        except ValueError as e:
            raise ValueError(f"not an IPv4 network: {e}") from None
        if net.prefixlen > 28:
            raise ValueError("needs room for the hosts: use a /28 or larger")
        return v


# a Linux bridge takes at most 1024 ports (BR_MAX_PORTS in net/bridge/br_private.h)
BRIDGE_PORTS = 1024


def lab_capacity(subnet: str) -> int:
    """How many hosts a lab on ``subnet`` holds: its host addresses less the
    last one, which the switch takes in the SSH mode, and at most a bridge's ports."""
    return min(BRIDGE_PORTS, ipaddress.IPv4Network(subnet).num_addresses - 3)


class Output(Strict):
    dir: str = "nicbench-runs"


class Plan(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
    description: str = ""
    lab: Lab = Field(default_factory=Lab)
    link: Link = Field(default_factory=Link)
    hosts: dict[Annotated[str, Field(pattern=HOST_NAME)], Host]
    study: Study
    output: Output = Field(default_factory=Output)
    tuning: str | None = Field(None, description="a tuning profile applied before the first point, "
                                                 "restored after the last")
    on_tuning_drift: Literal["fail", "flag"] = Field(
        "fail", description="a setting of the applied profile that someone else changes during the run: fail the "
                            "point it is found after, or flag it (a warning with the point)")
    profiles: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_-]{0,40}$")], Profile] = Field(default_factory=dict)
    inventory: str | None = Field(None, description="an Ansible inventory (INI or YAML) the hosts come from, "
                                                    "relative to the plan")

    # what loading the plan noticed and let pass (ignored inventory variables):
    # not part of the plan's data, said with the run
    _warnings: list[str] = PrivateAttr(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        return self._warnings

    @property
    def remote(self) -> bool:
        """Real hosts over SSH (no lab is built)."""
        return any(h.ssh for h in self.hosts.values())

    @model_validator(mode="after")
    def _roles(self) -> Plan:
        servers = [n for n, h in self.hosts.items() if h.role == "server"]
        clients = [n for n, h in self.hosts.items() if h.role == "client"]
        if len(servers) != 1:
            raise ValueError(f"exactly one host needs role = \"server\", found {len(servers)}")
        if not clients:
            raise ValueError("at least one host needs role = \"client\"")
        if "machine" in self.hosts:
            raise ValueError("'machine' names the lab's own machine in facts and tuning: pick another host name")
        if self.tuning is not None and self.tuning not in self.profiles and self.tuning not in shipped():
            raise ValueError(f"tuning = {self.tuning!r} is neither a shipped profile ({', '.join(shipped())}) "
                             "nor defined under [profiles]")
        if self.remote:
            missing = [n for n, h in self.hosts.items() if not h.ssh or not h.test_ip]
            if missing:
                raise ValueError(f"hosts reached over SSH each need ssh and test_ip; {', '.join(missing)} lack(s) "
                                 "them (or take them from an inventory: nicbench_test_ip)")
            if self.link.client_speed:
                raise ValueError("link.client_speed shapes lab links; real hosts are not shaped: give their NIC "
                                 "speed as link.speed (the ceiling)")
        else:
            room = lab_capacity(self.lab.subnet)
            if len(self.hosts) > room:
                raise ValueError(f"the lab subnet {self.lab.subnet} holds {room} hosts (its addresses less the one "
                                 f"the switch keeps for the SSH mode), the plan has {len(self.hosts)}: give "
                                 "[lab] subnet a shorter prefix")
        for c in self.study.clients or []:
            if c not in self.hosts:
                raise ValueError(f"study.clients names host {c!r}, which is not in [hosts] "
                                 f"(defined: {', '.join(self.hosts)})")
            if self.hosts[c].role != "client":
                raise ValueError(f"study.clients names {c!r}, whose role is {self.hosts[c].role!r}")
        self.study.check_plan(self)
        return self

    @property
    def server(self) -> str:
        return next(n for n, h in self.hosts.items() if h.role == "server")

    @property
    def clients(self) -> list[str]:
        if self.study.clients:
            return list(self.study.clients)
        return [n for n, h in self.hosts.items() if h.role == "client"]
