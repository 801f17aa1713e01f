"""Where the lab's SSH mode keeps its keys, known_hosts and configs: removed with the lab."""

from __future__ import annotations

import os
import shutil
from pathlib import Path


def ssh_dir(lab: str) -> Path:
    return Path(os.environ.get("NICBENCH_SSH_DIR", "/var/lib/nicbench/lab-ssh")) / lab


def remove(lab: str) -> None:
    shutil.rmtree(ssh_dir(lab), ignore_errors=True)
