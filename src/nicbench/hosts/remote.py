"""Real hosts over SSH, as the Hosts protocol.

The studies ask their hosts for transports, names, roles and test
addresses; the embedded lab answers from its namespaces, this from the
plan (or its Ansible inventory): each host's SSH destination, test NIC and
test address.  No link is shaped: ``link.speed`` is the NICs' speed, for
the ceiling.  The local ssh clients are tracked like lab processes, so an
interrupted run kills them, and the remote watchdogs end what they ran.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .spec import HostSpec, HostsSpec
from .ssh import SshTarget, SshTransport, close_all, connected
from .sshcheck import HostCheck, preflight
from .tracker import ProcessTracker, state_root
from .transport import Transport


def _state() -> Path:
    """Where the ssh clients are tracked: the state directory as root, else
    the user's own (a run on real hosts needs no root here)."""
    if os.environ.get("NICBENCH_STATE_DIR") or os.geteuid() == 0:
        return state_root() / "labs"
    return Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "nicbench"


def ssh_targets(plan: Any) -> dict[str, SshTarget]:
    """How to reach each host of a plan on real hosts (its ssh destination,
    user, port, key, extra arguments, sudo)."""
    return {n: SshTarget(dest=str(h.ssh), user=h.user, port=h.port, identity=h.identity, args=tuple(h.ssh_args),
                         sudo=h.sudo) for n, h in plan.hosts.items()}


class RemoteHosts:
    kind = "ssh"
    shared_machine = False

    def __init__(self, plan: Any):
        order = sorted(plan.hosts.items(), key=lambda kv: kv[1].role != "server")
        hosts = tuple(HostSpec(n, h.role, "", str(h.test_ip), ipaddress.ip_address(h.test_ip).max_prefixlen,
                               h.interface or "eth0") for n, h in order)
        self.spec = HostsSpec(plan.name, plan.link.mtu, hosts, plan.link.speed, None)
        self.tracker = ProcessTracker(_state() / f"ssh-{plan.name}.pids")
        self._t = {n: SshTransport(n, t, self.tracker) for n, t in ssh_targets(plan).items()}
        self._checks: dict[str, HostCheck] = {}

    @property
    def checks(self) -> Mapping[str, HostCheck]:
        return self._checks

    def transport(self, host: str) -> Transport:
        return self._t[host]

    def transports(self) -> dict[str, Transport]:
        return dict(self._t)

    def restore_id(self, host: str) -> str:
        return f"ssh-{host}"

    def connect(self, max_offset: float,
                before_check: Callable[[dict[str, Transport]], None] | None = None) -> list[str]:
        """Connect and check every host (in parallel); the problems, all of
        them.  ``before_check`` (the run's host leases) runs once every host
        is connected, before any is checked (a host one cannot reach is then
        left to the check, which names it with the others' problems)."""
        want: dict[str, dict[str, tuple[str | None, int | None]]] = {
            h.name: {h.ifname: (h.ip, self.spec.mtu)} for h in self.spec.hosts}
        if before_check is not None and connected(self._t):
            before_check(dict(self._t))
        self._checks, problems = preflight(self._t, want, max_offset=max_offset)
        return problems

    def close(self) -> None:
        close_all(self._t)
        self.tracker.kill_all()
        self.tracker.clear()
