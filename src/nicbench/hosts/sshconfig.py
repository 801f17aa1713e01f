"""What ssh will do with a host: its destination checked, its effective
settings as ``ssh -G`` resolves them (pure parser + one bounded run).

``ssh -G`` evaluates the user's ``~/.ssh/config`` (Host and Match blocks,
ProxyJump, User, Port, IdentityFile) plus the options nicbench adds, and
prints the result without connecting -- the settings the real connection
will use, so preflight can show them.  (A ``Match exec`` block in the
user's config runs its command during that evaluation, as it would for the
connection itself.)
"""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import InputError, PreflightError, tail
from .ssh import SshTarget

# a destination ssh would read as an option, or that no shell or config
# could mean as one host name
_BAD_CHARS = set(" \t\r\n\0'\"`$;&|<>\\")


def ssh_destination_problem(dest: str) -> str | None:
    """Why ``dest`` cannot be an SSH destination, or None if it can.

    A destination starting with ``-`` would be taken by ssh as an option
    (``-oProxyCommand=...`` runs a command on this machine, ``-Jevil``
    routes through another host), so it is refused outright; so are
    whitespace, quotes and shell metacharacters, which no host name or
    ssh_config alias contains."""
    if not dest:
        return "it is empty"
    if dest.startswith("-"):
        return f"it starts with '-' ({dest[:40]!r}): ssh would read it as an option"
    bad = sorted(set(dest) & _BAD_CHARS)
    if bad:
        return f"it contains {', '.join(repr(c) for c in bad)}, which no host name or ssh alias has"
    user, _, host = dest.rpartition("@")
    if "@" in dest and (not host or not user or host.startswith("-")):
        return f"{dest!r} is not user@host"
    return None


def check_ssh_destination(dest: str, where: str) -> str:
    """``dest`` unchanged, or InputError naming ``where`` (the plan or
    inventory key it came from)."""
    why = ssh_destination_problem(dest)
    if why:
        raise InputError(f"not an SSH destination: {why}", where=where,
                         hint="give a host name, an address, user@host or an alias from ~/.ssh/config")
    return dest


@dataclass(frozen=True)
class SshSettings:
    """The effective settings of one destination (``ssh -G``)."""

    hostname: str
    user: str
    port: int
    identity_files: tuple[str, ...] = ()
    proxy_jump: str | None = None
    proxy_command: str | None = None
    connect_timeout: int | None = None          # s; None: the system's TCP timeout
    batch_mode: bool = False
    strict_host_key_checking: str = "ask"
    user_known_hosts: tuple[str, ...] = ()
    raw: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)

    def to_meta(self) -> dict[str, object]:
        """What a run keeps: HostName, User, Port, ProxyJump (or ProxyCommand), IdentityFile."""
        return {"hostname": self.hostname, "user": self.user, "port": self.port, "proxy_jump": self.proxy_jump,
                "proxy_command": self.proxy_command, "identity_files": list(self.identity_files)}

    def summary(self) -> str:
        """One line for preflight: ``user@hostname:port via JUMP, keys FILE``."""
        return summary_of(self.to_meta())


# what ssh -G lists when no IdentityFile is configured (OpenSSH 9.x)
DEFAULT_KEYS = frozenset(f"~/.ssh/id_{k}" for k in ("rsa", "ecdsa", "ecdsa_sk", "ed25519", "ed25519_sk", "xmss",
                                                      "dsa"))


def summary_of(m: Mapping[str, Any]) -> str:
    """:meth:`SshSettings.summary` of settings as a run keeps them (:meth:`SshSettings.to_meta`)."""
    via = f" via {m['proxy_jump']}" if m.get("proxy_jump") else (
        f" via ProxyCommand {m['proxy_command']!r}" if m.get("proxy_command") else "")
    files = list(m.get("identity_files") or [])
    keys = (", ssh's default keys" if len(files) > 1 and set(files) <= DEFAULT_KEYS
            else f", keys {', '.join(files)}" if files else "")
    return f"{m.get('user')}@{m.get('hostname')}:{m.get('port')}{via}{keys}"


def parse_ssh_g(text: str, dest: str = "?") -> SshSettings:
    """``ssh -G`` output (``key value`` lines, keys lowercase; repeated keys
    such as ``identityfile`` keep their order).  InputError when it lacks the
    host name, user or port (not ssh -G output)."""
    raw: dict[str, list[str]] = {}
    for line in text.splitlines():
        key, _, value = line.strip().partition(" ")
        if key:
            raw.setdefault(key.lower(), []).append(value.strip())

    def one(k: str) -> str | None:
        v = raw.get(k)
        return v[0] if v else None

    host, user, port = one("hostname"), one("user"), one("port")
    if not host or not user or not port or not port.isdigit():
        raise InputError("ssh -G printed no hostname, user and port", where=dest,
                         hint="is this OpenSSH's ssh?")
    pj, pc, ct = one("proxyjump"), one("proxycommand"), one("connecttimeout")
    return SshSettings(
        hostname=host, user=user, port=int(port),
        identity_files=tuple(raw.get("identityfile", [])),
        proxy_jump=pj if pj and pj != "none" else None,
        proxy_command=pc if pc and pc != "none" else None,
        connect_timeout=int(ct) if ct and ct.isdigit() else None,
        batch_mode=one("batchmode") == "yes",
        strict_host_key_checking=one("stricthostkeychecking") or "ask",
        user_known_hosts=tuple((one("userknownhostsfile") or "").split()),
        raw={k: tuple(v) for k, v in raw.items()},
    )


def ssh_g_argv(target: SshTarget) -> list[str]:
    """``ssh -G`` with every option the connection itself gets (config
    file, user, port, key, -o settings, extra arguments), ``--`` before the
    destination."""
    return [*target.ssh_argv("none"), "-G", "--", target.dest]


def resolve(target: SshTarget, host: str, timeout: float = 5.0) -> SshSettings:
    """The effective settings of ``target`` (``host`` names it in errors).
    A refused destination or config is a PreflightError with ssh's own
    message; ssh -G never connects, so ``timeout`` only bounds a stuck
    ``Match exec`` or ProxyCommand lookup in the user's config."""
    why = ssh_destination_problem(target.dest)
    if why:
        raise PreflightError(f"not an SSH destination: {why}", where=host)
    try:
        r = subprocess.run(ssh_g_argv(target), capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        raise PreflightError("ssh is not installed on this machine", where=host,
                             hint="install openssh-client") from None
    except subprocess.TimeoutExpired:
        raise PreflightError(f"ssh -G {target.dest} did not finish within {timeout:g}s", where=host,
                             hint="a 'Match exec' in your ssh config hangs?") from None
    if r.returncode != 0:
        raise PreflightError(f"ssh refuses the configuration for {target.dest}: {tail(r.stderr, 2)}", where=host,
                             hint="fix the line ssh names in your ssh config")
    try:
        return parse_ssh_g(r.stdout, target.dest)
    except InputError as e:
        raise PreflightError(e.message, where=host, hint=e.hint) from None
