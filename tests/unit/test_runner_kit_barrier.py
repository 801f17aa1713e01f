"""The start barrier with stages, and readiness of a server below a launcher,
on the fake transport."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from nicbench.core.errors import ToolError
from nicbench.hosts.fake import FakeTransport, Script
from nicbench.run.iperf import wait_ready
from nicbench.run.kit import release_staggered, release_together


def spawn(t: FakeTransport, tmp: Path, name: str, gated: bool = True):
    return t.spawn([name], stdout=tmp / f"{name}.out", stderr=tmp / f"{name}.err", gated=gated)


def test_stages_share_one_barrier_and_start_at_their_offsets(tmp_path):
    t = FakeTransport("h", lambda argv: Script(hang=True))
    load = [spawn(t, tmp_path, f"load{i}") for i in range(2)]
    probes = [spawn(t, tmp_path, f"probe{i}") for i in range(2)]
    at = release_staggered([(0.3, probes), (0.0, load)], "clients", "h")
    # every process existed before the first release (one barrier), each stage at its offset
    assert max(p.spawned_at for p in load + probes) <= min(p.released_at for p in load + probes)
    assert all(p.released_at is not None for p in load + probes)
    assert at[1] <= at[0] and at[0] - at[1] == pytest.approx(0.3, abs=0.05)
    assert min(p.released_at for p in probes) - max(p.released_at for p in load) == pytest.approx(0.3, abs=0.05)
    # one stage is the plain barrier
    more = [spawn(t, tmp_path, f"x{i}") for i in range(2)]
    t0 = time.time()
    assert release_together(more, "x", "h") == pytest.approx(t0, abs=0.05)


def test_a_process_dead_before_the_barrier_releases_no_stage(tmp_path):
    t = FakeTransport("h", lambda argv: Script(stderr="boom", returncode=1) if argv == ["bad"] else Script(hang=True))
    good = spawn(t, tmp_path, "good")
    bad = t.spawn(["bad"], stdout=tmp_path / "b.out", stderr=tmp_path / "b.err", gated=False)
    bad.is_ready = lambda: False          # type: ignore[method-assign]  # never reached its gate
    with pytest.raises(ToolError, match="died before the start barrier"):
        release_staggered([(0.0, [good]), (1.0, [bad])], "clients", "h")
    assert good.released_at is None


@pytest.mark.parametrize("script, proto", [
    (Script(hang=True, launcher=True, listen=11111), "tcp"),
    (Script(hang=True, launcher=True, udp_bound=11111), "udp"),
])
def test_a_server_below_its_launcher_is_ready_once_the_tool_holds_the_socket(tmp_path, script, proto):
    t = FakeTransport("srv", lambda argv: script)
    proc = spawn(t, tmp_path, "timeout", gated=False)
    wait_ready(t, proc, 11111, time.monotonic() + 1, proto, wrapped=True)
    # without ``wrapped`` the launcher itself holds no socket: not ready
    with pytest.raises(ToolError, match="not listening after"):
        wait_ready(t, proc, 11111, time.monotonic() + 0.05, proto)
