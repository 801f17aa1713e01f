"""The hosts a plan runs on: an embedded lab (built for the run, or reused),
the lab's SSH mode, or real machines over SSH; and the run's leases on them
(the lab's, and one on every host: ``hosts.lease``), taken here before any
study preflight and released at the run's end."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..core.errors import LabError, PreflightError
from ..hosts.base import Hosts
from ..hosts.lease import HostLeases, take_all
from ..hosts.remote import RemoteHosts
from ..hosts.spec import DirectLink
from ..hosts.transport import Transport
from ..lab import manager
from ..lab.lease import Lease
from ..lab.sshd import ssh_lab
from ..lab.topology import LabSpec, make_spec
from ..plan.model import Plan
from .preflight import os_problems


def lab_spec(plan: Plan) -> LabSpec:
    """The lab a plan asks for: its hosts on the switch, and the back-to-back
    ports its study needs (the packet study's generator to its receiver)."""
    direct: tuple[DirectLink, ...] = ()
    b2b = plan.study.back_to_back(plan)
    if b2b is not None:
        ports, queues = b2b
        direct = tuple(DirectLink(i, plan.server, plan.clients[0], queues) for i in range(ports))
    return make_spec(plan.lab.name, [(n, h.role) for n, h in plan.hosts.items()],
                     plan.link.mtu, plan.lab.subnet, plan.link.speed, plan.link.client_speed, direct)


def acquire_lab(spec: LabSpec, notes: list[str] | None = None) -> tuple[manager.Lab, bool]:
    """An existing matching lab (reused, not ours to remove) or a new one.
    A lab half-built by a run killed mid-build is removed and built afresh
    (said in ``notes``): nobody else will ever finish or remove it.  The
    caller holds the lab's lease, so no live run is using it."""
    existing = manager.load(spec.name)
    left = manager.left_by_dead_run(spec.name) if existing is not None else None
    if left is not None:
        manager.down(spec.name)
        existing = None
        if notes is not None:
            notes.append(f"lab {spec.name} was {left}: removed and built afresh")
    if existing is None:
        return manager.up(spec, purpose="run"), True
    if existing.spec != spec:
        raise LabError(f"lab {spec.name!r} exists but was built for other hosts or another link "
                       f"(MTU {existing.spec.mtu}, hosts {', '.join(h.name for h in existing.spec.hosts)})",
                       where=f"lab {spec.name}",
                       hint=f"nicbench lab down {spec.name}, or give the plan another [lab] name")
    # what it was built as is not enough: what it is now must match too
    problems = manager.status(spec.name)["problems"]
    if problems:
        raise LabError(f"lab {spec.name!r} no longer matches this plan: " + "; ".join(problems),
                       where=f"lab {spec.name}",
                       hint=f"nicbench lab down {spec.name} (a run then builds it afresh)")
    return existing, False


@dataclass
class OpenedHosts:
    """The hosts of a run, and what to do with them at its end."""

    hosts: Hosts
    lab: manager.Lab | None = None      # the embedded lab under them, if any
    owned: bool = False                 # this run built the lab: it removes it
    lease: Lease | None = None          # the lab is this run's until the lease is released
    notes: list[str] = field(default_factory=list)      # what the user should hear of (a lab replaced)
    host_leases: HostLeases | None = None   # every host is this run's until they are released

    def note_run(self, run_id: str) -> None:
        """The run's id, for the message another run using the same lab or host gets."""
        if self.lease is not None:
            self.lease.note_run(run_id)
        if self.host_leases is not None:
            self.host_leases.note_run(run_id)

    def release_hosts(self) -> None:
        """Release every host lease (before the sessions close: over SSH a
        lease's holder rides the host's connection)."""
        if self.host_leases is not None:
            self.host_leases.release()

    def close(self, keep_lab: bool = False) -> None:
        """End every session and process of the run; remove a lab it built."""
        try:
            self.release_hosts()
            self.hosts.close()
        finally:
            self.remove_lab(keep_lab)

    def remove_lab(self, keep_lab: bool = False) -> None:
        """Remove the lab if this run built it (and was not asked to keep it);
        then the lab is free for another run."""
        try:
            self.release_hosts()
            if self.lab is not None and self.owned and not keep_lab:
                manager.down(self.lab.spec.name)
        finally:
            if self.lease is not None:
                self.lease.release()


def open_hosts(plan: Plan, wait: float | None = None) -> OpenedHosts:
    """Connect real hosts (SSH preflight of every host at once), or build or
    reuse the plan's lab (with its sshds in SSH mode); and lease every host.
    A lab or host another run holds refuses the run at once, naming it; with
    ``wait`` (seconds) the run queues until they are free.  The caller closes it.

    Over SSH the leases are taken as soon as every host is connected, before
    the SSH preflight looks at them: a host in use by another run would show
    that run's processes as leftovers, and after a wait the check is of the
    host as this run gets it."""
    deadline = None if wait is None else time.monotonic() + wait

    def left() -> float | None:
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    leases: list[HostLeases] = []

    def lease_hosts(transports: dict[str, Transport]) -> None:
        leases.append(take_all({h: transports[h] for h in plan.hosts}, plan.name, wait=left(), asked=wait))

    if plan.remote:
        remote = RemoteHosts(plan)         # no root needed here: the hosts are reached as the plan says
        try:
            problems = remote.connect(plan.lab.max_clock_offset, before_check=lease_hosts)
            problems += os_problems(plan, {h: c.os for h, c in remote.checks.items()})
            if problems:
                raise PreflightError("; ".join(problems), where="ssh to the hosts",
                                     hint="fix every item listed, then run again")
        except BaseException:
            for held in leases:
                held.release()
            remote.close()
            raise
        return _leased(OpenedHosts(remote, host_leases=leases[0] if leases else None), plan, left(), wait)
    manager.require_root()
    spec = lab_spec(plan)
    # before the lab is looked at, built or touched: a second run on a lab in
    # use is refused here, and its clean-up has nothing of the first run's to stop
    lease = Lease.take(spec.name, plan.name, wait=wait)
    notes: list[str] = []
    try:
        lab, owned = acquire_lab(spec, notes)
    except BaseException:
        lease.release()
        raise
    opened = OpenedHosts(lab, lab, owned, lease, notes)
    if plan.lab.transport == "ssh":
        try:
            opened.hosts = ssh_lab(lab, max_offset=plan.lab.max_clock_offset, before_check=lease_hosts)
            opened.host_leases = leases[0] if leases else None
        except BaseException:
            for held in leases:
                held.release()
            opened.close()
            raise
    return _leased(opened, plan, left(), wait)


def _leased(opened: OpenedHosts, plan: Plan, wait: float | None, asked: float | None) -> OpenedHosts:
    """``opened`` with a lease on every host of the plan (unless it has them),
    through each host's own transport (a namespace's, or its SSH session);
    closed if refused."""
    if opened.host_leases is not None:
        return opened
    try:
        opened.host_leases = take_all({h: opened.hosts.transport(h) for h in plan.hosts}, plan.name, wait=wait,
                                      asked=asked)
    except BaseException:
        opened.close()
        raise
    return opened
