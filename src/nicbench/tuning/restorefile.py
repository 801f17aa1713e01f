"""Restore files: every prior value, written on the host before its first
change (temporary file, sync, rename), so a crash at any point is undone
by ``nicbench tune restore`` from the file alone."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from ..core.errors import StoreError, tail
from ..hosts.transport import LocalTransport, NetnsTransport, Transport, existing_namespaces
from .types import Target


def restore_dir() -> str:
    return os.environ.get("NICBENCH_RESTORE_DIR", "/var/lib/nicbench/restore")



def restore_path(restore_id: str) -> str:
    return f"{restore_dir()}/{restore_id}.json"


def in_force(targets: Sequence[Target], host_wide: bool) -> list[str]:
    """Restore files already present for these targets: tuning from an earlier
    'tune apply' a run must neither stack on nor undo."""
    ids = [t.restore_id for t in targets] + (["machine"] if host_wide else [])
    return [i for i in ids if os.path.exists(restore_path(i))]


def transport_doc(t: Transport) -> dict:
    if isinstance(t, NetnsTransport):
        return {"kind": "netns", "host": t.host, "netns": t.netns}
    return {"kind": getattr(t, "kind", "local"), "host": t.host}


def read_restore(t: Transport, restore_id: str) -> dict | None:
    r = t.run(["sh", "-c", '[ -e "$1" ] || exit 3; cat "$1"', "x", restore_path(restore_id)], timeout=15)
    if r.returncode == 3:
        return None
    if r.returncode != 0:
        raise StoreError(f"cannot read restore file: {tail(r.stderr)}", where=f"{t.host}:{restore_path(restore_id)}")
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError:
        raise StoreError("restore file is damaged", where=f"{t.host}:{restore_path(restore_id)}",
                         hint="restore the values it lists by hand, then delete it") from None


def write_restore(t: Transport, restore_id: str, doc: dict) -> None:
    """Durably: written to a temporary file, synced, renamed over the old one."""
    path = restore_path(restore_id)
    r = t.run(["sh", "-c", 'umask 077; mkdir -p "$(dirname "$1")" && cat > "$1.tmp" && sync "$1.tmp" && '
               'mv "$1.tmp" "$1" && sync "$(dirname "$1")"', "x", path], input=json.dumps(doc, indent=1),
              timeout=30)
    if r.returncode != 0:
        raise StoreError(f"cannot write restore file: {tail(r.stderr)}", where=f"{t.host}:{path}",
                         hint="nothing on this host was changed; hosts tuned before it are undone by "
                              "'nicbench tune restore'")


def remove_restore(t: Transport, restore_id: str) -> None:
    t.run(["rm", "-f", restore_path(restore_id)], timeout=15)


DAMAGED = {"damaged": True}


def pending(directory: str | None = None) -> list[tuple[str, dict]]:
    """Restore files left on this machine (lab hosts and the machine itself)."""
    d = directory or restore_dir()
    out: list[tuple[str, dict[str, Any]]] = []
    try:
        names = sorted(os.listdir(d))
    except OSError:
        return out
    for n in names:
        if n.endswith(".json"):
            try:
                with open(os.path.join(d, n)) as fh:
                    out.append((n[:-5], json.load(fh)))
            except (OSError, json.JSONDecodeError):
                out.append((n[:-5], DAMAGED))      # kept: it may be the only record of the priors
    return out


def transport_from(doc: dict, restore_id: str) -> Transport | None:
    """The transport a restore file was written for; None if its namespace is gone
    (a namespace's settings died with it)."""
    tr = doc.get("transport") or {}
    if tr.get("kind") == "netns":
        if tr.get("netns") not in existing_namespaces():
            return None
        return NetnsTransport(str(tr.get("host")), str(tr["netns"]))
    if tr.get("kind") == "local":
        return LocalTransport(str(tr.get("host") or restore_id))
    raise StoreError(f"restore file {restore_id} was written for a {tr.get('kind')!r} host, which this command "
                     "cannot reach", where=restore_path(restore_id), hint="restore it from where it was applied")


def forget(restore_id: str) -> None:
    try:
        os.remove(restore_path(restore_id))
    except OSError:
        pass
