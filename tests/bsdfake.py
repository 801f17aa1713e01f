"""A fake FreeBSD host for tests: ``sh -c SCRIPT`` runs the real nicbench
script under dash with shims first on PATH (each printing a recorded FreeBSD
output) and /boot/ under a test directory."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from nicbench.hosts.fake import FakeTransport
from nicbench.hosts.transport import CommandResult


def shims(d: Path, scripts: dict[str, str]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for name, body in scripts.items():
        (d / name).write_text("#!/bin/sh\n" + body)
        (d / name).chmod(0o755)
    return d


class BsdHost(FakeTransport):
    """A fake FreeBSD host: ``sh -c SCRIPT`` runs the script under dash with
    the shims first on PATH and /boot/ under ``root``; streamed commands
    (the host sampler) likewise."""

    def __init__(self, host: str, shim_dir: Path, root: Path):
        super().__init__(host, os="FreeBSD", samples_on_host=True)
        self.shim_dir, self.root = shim_dir, root

    def _local(self, argv: Sequence[str]) -> list[str]:
        if list(argv[:2]) != ["sh", "-c"]:
            return list(argv)                   # a plain command: found on the shims' PATH first
        script = (argv[2].replace('PATH="/usr/local/sbin:', f'PATH="{self.shim_dir}:/usr/local/sbin:')
                  .replace("PATH=/usr/local/sbin:", f"PATH={self.shim_dir}:/usr/local/sbin:")
                  .replace("/boot/", f"{self.root}/boot/"))
        return ["dash", "-c", script, *argv[3:]]

    def _env(self) -> dict[str, str]:
        return dict(os.environ, PATH=f"{self.shim_dir}:{os.environ['PATH']}")

    def run(self, argv, *, timeout=30.0, input=None):  # type: ignore[override]
        self.commands.append(list(argv))
        r = subprocess.run(self._local(argv), capture_output=True, text=True, timeout=timeout, input=input,
                           env=self._env())
        return CommandResult(self.host, tuple(argv), r.returncode, r.stdout, r.stderr, 0.0)

    def stream(self, argv):  # type: ignore[override]
        self.commands.append(list(argv))
        return subprocess.Popen(self._local(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=self._env(), start_new_session=True)
