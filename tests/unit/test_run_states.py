"""Half-done states (issue 33, items 4 and 7-11): a lab's lease, a lab left
half-built, a run directory deleted mid-run, a finished run waiting in the
spool, a disk full from the start, an import killed before its figures."""

from __future__ import annotations

import os

import pytest

from nicbench.core.errors import PreflightError
from nicbench.lab import lease


def test_a_labs_lease_names_the_run_holding_it_and_frees_when_released(tmp_path, monkeypatch):
    monkeypatch.setenv("NICBENCH_STATE_DIR", str(tmp_path))
    assert lease.holder("l1") is None
    first = lease.Lease.take("l1", "plan-a")
    first.note_run("20261128-000000-plan-a-0000")
    held = lease.holder("l1")
    assert held is not None and held["pid"] == os.getpid() and held["run_id"] == "20261128-000000-plan-a-0000"
    with pytest.raises(PreflightError) as e:
        lease.Lease.take("l1", "plan-b")
    line = e.value.one_line()
    assert f"in use by run 20261128-000000-plan-a-0000 (pid {os.getpid()}, plan plan-a" in line
    assert "lab l1" in line and "nothing was started or stopped" in line
    other = lease.Lease.take("l2", "plan-b")       # another lab is another lease
    other.release()
    first.release()
    assert lease.holder("l1") is None
    lease.Lease.take("l1", "plan-b").release()
