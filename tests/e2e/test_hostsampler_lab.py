"""The host sampler inside a network namespace, under dash: it reads that
namespace's interfaces and protocol counters (as it would a real host's),
with the host's clock, and stops by itself."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import uuid

import pytest

from nicbench.sampling.hostrecords import clock_map, parse_reads, parse_stream, sampler_argv

pytestmark = pytest.mark.lab

NS = f"nbC-smp-{uuid.uuid4().hex[:6]}"          # this helper's prefix (nbC-) and subnet 10.203.0.0/24


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


@pytest.fixture
def netns():
    _ip("netns", "add", NS)
    try:
        _ip("-n", NS, "link", "set", "lo", "up")
        _ip("-n", NS, "link", "add", "smp0", "type", "veth", "peer", "name", "smp1")
        _ip("-n", NS, "addr", "add", "10.203.0.1/24", "dev", "smp0")
        _ip("-n", NS, "link", "set", "smp0", "up")
        yield NS
    finally:
        pids = subprocess.run(["ip", "netns", "pids", NS], capture_output=True, text=True).stdout.split()
        for p in pids:                      # deleting a namespace does not kill what runs in it
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(p), 9)
        subprocess.run(["ip", "netns", "del", NS], capture_output=True, timeout=10)


@pytest.mark.skipif(shutil.which("dash") is None, reason="dash is not installed")
def test_the_sampler_reads_its_namespace_under_dash(netns):
    argv = ["ip", "netns", "exec", netns, *sampler_argv(0.1, 1, ["cpu", "net", "snmp", "softirqs"], shell="dash")]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    out = p.stdout.read()  # type: ignore[union-attr]
    assert p.wait(timeout=10) == 0
    p.stdin.close()  # type: ignore[union-attr]
    s = parse_stream(out, netns)
    assert s.end == "deadline" and not s.problems
    reads = parse_reads(s)
    assert len(reads) >= 8
    # the namespace's own interfaces, not the machine's
    assert set(reads[0].net_dev or {}) == {"lo", "smp0", "smp1"}
    assert reads[0].proto and reads[0].proto["Tcp"]["CurrEstab"] == 0
    assert reads[0].cpu and "all" in reads[0].cpu             # /proc/stat is machine-wide, as on a real host
    assert clock_map(s, 0.0, 0.0).uncertainty < 0.01
