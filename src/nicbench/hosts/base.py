"""The Hosts protocol: where a run's hosts come from.

Three providers implement it: the embedded lab (``lab.manager.Lab``: network
namespaces of this machine), the lab's SSH mode (``lab.sshd.SshLab``: the same
namespaces, each reached over SSH through its own sshd) and real machines
(``hosts.remote.RemoteHosts``).  A study and the session see only this: the
hosts' shape, a transport per host, and how to end them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from .spec import HostsSpec
from .sshcheck import HostCheck
from .transport import Transport


class Hosts(Protocol):
    @property
    def kind(self) -> str:
        """"netns", "lab-ssh" or "ssh"."""
        ...

    @property
    def spec(self) -> HostsSpec: ...

    @property
    def shared_machine(self) -> bool:
        """Every host is a namespace of this one machine: CPU is the machine's,
        and host-wide settings (governor, IRQs, services) are the machine's."""
        ...

    @property
    def checks(self) -> Mapping[str, HostCheck]:
        """What the SSH preflight learned of each host (empty without SSH)."""
        ...

    def transport(self, host: str) -> Transport: ...

    def transports(self) -> dict[str, Transport]: ...

    def restore_id(self, host: str) -> str:
        """The name of the host's tuning restore file (one place knows it:
        ``nicbench tune restore`` finds it by the same name)."""
        ...

    def close(self) -> None:
        """End every session and process this provider started (not the lab itself)."""
        ...
