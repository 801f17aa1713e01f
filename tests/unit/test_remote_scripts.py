"""Every script nicbench sends to a host runs under the host's ``sh``: on
Debian that is dash, on FreeBSD its own ash-derived sh.  Each one is
checked as POSIX sh by ``dash -n``, ``posh -n`` and ``shellcheck -s sh``
(its warnings and errors; its style notes, such as unquoted ``$i`` where
the value is an interface name checked beforehand, are not counted).

(The start gate, ``transport._GATE``, is a bash script by design -- it needs
``$EPOCHREALTIME`` and ``read -t`` with fractions -- and runs as ``bash -c``;
preflight checks every host has bash >= 5.)
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from nicbench.hosts import facts, facts_freebsd, ssh, sshcheck
from nicbench.lab import sshd
from nicbench.sampling import sampler
from nicbench.sampling.hostrecords import script as hostsampler_script
from nicbench.studies.packets import runner as packets
from nicbench.tuning import audit, freebsd, knobs

SCRIPTS = {
    "ssh command shell": ssh._SHELL,
    "ssh process wrapper": ssh._WRAPPER,
    "ssh preflight check": sshcheck._CHECK,
    "facts (Linux)": facts.script(["eth0", "ens1f0.100"], ["iperf3", "nginx"]),
    "facts (FreeBSD)": facts_freebsd.script(["ix0", "cxl1"], [("iperf3", ("iperf3", "--version"))]),
    "tuning: sysctl states (Linux)": audit._STATES,
    "tuning: write a file": knobs._WRITE,
    "tuning: audit (FreeBSD)": freebsd._READ,
    "host sampler": hostsampler_script(),
    "lab sshd wrapper": sshd._SSHD_WRAP,
    "packets: netmap and pkt-gen check": packets._NETMAP,
}
CHECKERS = {"dash": ["dash", "-n"], "posh": ["posh", "-n"],
            "shellcheck": ["shellcheck", "-s", "sh", "-S", "warning", "-"]}


@pytest.mark.parametrize("checker", list(CHECKERS))
@pytest.mark.parametrize("name", list(SCRIPTS))
def test_every_remote_script_is_posix_sh(name: str, checker: str, tmp_path: Path):
    if shutil.which(checker) is None:
        pytest.skip(f"{checker} is not installed (apt-get install {checker})")
    argv = CHECKERS[checker]
    text = SCRIPTS[name]
    if checker == "shellcheck":
        r = subprocess.run(argv, input="#!/bin/sh\n" + text, capture_output=True, text=True, timeout=60)
    else:
        f = tmp_path / "s.sh"
        f.write_text(text)
        r = subprocess.run([*argv, str(f)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"{name}: {r.stdout}{r.stderr}"


def test_the_sampler_fallback_read_is_posix_sh_too():
    """The one inline snippet the network sampler runs through a namespace."""
    import inspect
    src = inspect.getsource(sampler.NetSampler._read_files)
    assert '"sh", "-c", "for f in dev snmp netstat' in src


def test_the_preflight_check_names_a_leftover_wrapper_and_not_itself():
    """The leftover scan, run here for real: a process whose command line
    says nicbench-wrap is named with its PID; the check itself (whose script
    holds the pattern) is not."""
    left = subprocess.Popen(["sh", "-c", "sleep 30", "nicbench-wrap"])
    try:
        check = subprocess.Popen(["sh", "-c", sshcheck._CHECK, "nicbench-check"], stdout=subprocess.PIPE, text=True)
        out, _ = check.communicate(timeout=60)
        pids = {int(line.split()[1]) for line in out.splitlines() if line.startswith("left ")}
        assert left.pid in pids and check.pid not in pids, out
    finally:
        left.kill()
        left.wait()
