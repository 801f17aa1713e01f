"""Preflight of many SSH hosts runs them side by side, each under its own
timeout: hosts that are down cost the whole preflight their timeout once,
not once per host.  A lab of 20 hosts in SSH mode (root); the full
16-64 host measurements are bench/ssh_scale.py's, outside the suite."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import time

import pytest
from helpers import lab_up, namespaces

from nicbench.hosts.ssh import SshTransport, close_all
from nicbench.hosts.sshcheck import preflight
from nicbench.lab import manager, sshd
from nicbench.lab.topology import make_spec

pytestmark = pytest.mark.lab

TOOLS = ("sshd",)
P = os.environ.get("NICBENCH_E2E_LAB_PREFIX", "e2e")
N, DEAD, TIMEOUT = 20, 4, 3.0


def test_dead_hosts_cost_preflight_their_timeout_once_not_per_host():
    name = f"{P}sc20"
    spec = make_spec(name, [("srv", "server")] + [(f"c{i}", "client") for i in range(1, N)], 1500)
    lab = lab_up(spec)
    try:
        targets = {h: dataclasses.replace(t, connect_timeout=TIMEOUT) for h, t in sshd.start(lab).items()}
        want = {h.name: {h.ifname: (h.ip, spec.mtu)} for h in spec.hosts}

        def run() -> tuple[float, dict, list[str]]:
            ts = {h: SshTransport(h, t, lab.tracker) for h, t in targets.items()}
            t0 = time.monotonic()
            try:
                checks, problems = preflight(ts, want)
            finally:
                close_all(ts)
            return time.monotonic() - t0, checks, problems

        healthy, checks, problems = run()
        assert problems == [] and len(checks) == N
        dead = [h.name for h in spec.hosts[-DEAD:]]
        for h in spec.hosts[-DEAD:]:
            subprocess.run(["ip", "-n", h.netns, "link", "set", h.ifname, "down"], check=True)
        took, checks, problems = run()
        # every live host checked, every dead one named (and nothing else)
        assert set(checks) == {h.name for h in spec.hosts} - set(dead)
        assert sorted(p.split(":")[0] for p in problems) == sorted(dead), problems
        # at most one timeout's worth beyond the healthy preflight (handled one by one, the dead hosts
        # alone would add DEAD x TIMEOUT = 12 s)
        assert took < healthy + TIMEOUT + 3, (took, healthy)
    finally:
        manager.down(name)
    assert namespaces(name) == []
