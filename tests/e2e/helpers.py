from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def plan_text(name: str, lab: str, *, engine: str = "iperf3", clients: int = 2,
              directions=("tx",), io_sizes=("128K",), connections=(2,), duration: float = 2,
              omit: float = 1, extra: str = "", mtu: int = 1500, trim: float = 0.25,
              speed: str | None = None) -> str:
    hosts = '[hosts.srv]\nrole = "server"\n' + "".join(
        f'[hosts.c{i + 1}]\nrole = "client"\n' for i in range(clients))
    def q(xs):
        return "[" + ", ".join(f'"{x}"' if isinstance(x, str) else str(x) for x in xs) + "]"
    return f"""name = "{name}"
[lab]
name = "{lab}"
[link]
mtu = {mtu}
{f'speed = "{speed}"' if speed else ""}
{hosts}
[study]
engine = "{engine}"
directions = {q(directions)}
io_sizes = {q(io_sizes)}
connections = {q(connections)}
duration = {duration}
omit = {omit}
interval = 0.5
trim = {trim}
{extra}
"""


def namespaces(lab: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [ln.split()[0] for ln in out.splitlines() if ln.startswith(f"nb-{lab}-")]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is dead for our purposes
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def nicbench(*args, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "nicbench.cli.main", *map(str, args)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)

