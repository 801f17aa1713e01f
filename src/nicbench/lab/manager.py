"""Build, inspect and remove the embedded lab (side effects live here).

The state file ``<state>/labs/<name>.json`` is written *before* the first
namespace is created, so a crash at any point leaves enough behind for
``nicbench lab down`` to finish the job.  Teardown kills processes first
(deleting a namespace does not kill what runs inside it), then deletes the
namespaces.  A failed build is rolled back, so no half-built lab remains.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import LabError, PreflightError, tail
from ..hosts.lease import lease_dir
from ..hosts.sshcheck import HostCheck
from ..hosts.tracker import ProcessTracker, state_root
from ..hosts.transport import NetnsTransport, Transport, existing_namespaces
from .lease import holder
from .owner import Ownership, record
from .sshkeys import remove as remove_ssh
from .topology import LabSpec, build_commands, topology_problems

_NS_RE = re.compile(r"^nb-([a-z0-9]{1,8})-([a-z][a-z0-9]{0,7})$")


def state_dir() -> Path:
    return state_root() / "labs"


def _ip(args: list[str], timeout: float = 15.0) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise PreflightError("the 'ip' command (iproute2) is missing",
                             hint="apt-get install iproute2, or run the set-up command in README.md") from None


def require_root() -> None:
    if os.geteuid() != 0:
        raise PreflightError("the embedded lab needs root (network namespaces, veth, bridge)",
                             hint="run as root, e.g. sudo nicbench ...")


@dataclass
class Lab:
    """A lab that exists: its spec, transports to its hosts, its process
    tracker (the Hosts protocol of ``hosts.base``)."""

    spec: LabSpec
    tracker: ProcessTracker
    kind = "netns"
    shared_machine = True

    @property
    def checks(self) -> Mapping[str, HostCheck]:
        return {}

    def transport(self, host: str) -> Transport:
        h = self.spec.host(host)
        return NetnsTransport(host, h.netns, self.tracker)

    def transports(self) -> dict[str, Transport]:
        return {h.name: self.transport(h.name) for h in self.spec.hosts}

    def restore_id(self, host: str) -> str:
        return restore_id(self.spec.name, host)

    def close(self) -> None:
        """Kill every process this lab's runs started (the lab itself stays: see :func:`down`)."""
        self.tracker.kill_all()


def restore_id(lab: str, host: str) -> str:
    """A lab host's tuning restore file: named after lab and host."""
    return f"lab-{lab}-{host}"


def _paths(name: str) -> tuple[Path, Path]:
    d = state_dir()
    return d / f"{name}.json", d / f"{name}.pids"


def load(name: str) -> Lab | None:
    spec_path, pids = _paths(name)
    try:
        spec = LabSpec.from_dict(json.loads(spec_path.read_text()))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError) as e:
        raise LabError(f"lab state file is damaged: {e}", where=str(spec_path),
                       hint=f"nicbench lab down {name} removes it") from None
    return Lab(spec, ProcessTracker(pids))


def up(spec: LabSpec, purpose: str = "lab up") -> Lab:
    """Create the lab; on any failure remove what was made and raise LabError.
    The state file records who built it and for what (``lab.owner``)."""
    require_root()
    present = set(existing_namespaces())
    clash = [ns for ns in spec.namespaces if ns in present]
    if clash or load(spec.name) is not None:
        raise LabError(f"lab {spec.name!r} already exists ({', '.join(clash) or 'state file'})",
                       where=f"lab {spec.name}",
                       hint=f"reuse it, or remove it with: nicbench lab down {spec.name}")
    spec_path, pids = _paths(spec.name)
    spec_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = spec_path.with_suffix(".tmp")
    tmp.write_text(json.dumps({**spec.to_dict(), "owner": record(purpose)}, indent=1))
    os.replace(tmp, spec_path)        # atomic: a crash never leaves half a state file
    lab = Lab(spec, ProcessTracker(pids))
    try:
        for cmd in build_commands(spec):
            r = _ip(cmd)
            if r.returncode != 0:
                raise LabError(f"{' '.join(cmd)} failed: {tail(r.stderr)}", where=f"lab {spec.name}",
                               hint="is this kernel built with veth and bridge support?")
        # A bridge in its own namespace still passes frames to iptables when
        # br_netfilter is loaded; turn that off where the knob exists.
        for knob in ("bridge-nf-call-iptables", "bridge-nf-call-ip6tables", "bridge-nf-call-arptables"):
            _ip(["ip", "netns", "exec", spec.switch_ns, "sysctl", "-qw", f"net.bridge.{knob}=0"])
    except BaseException:
        down(spec.name)
        raise
    return lab


def _kill_ns_pids(ns: str) -> None:
    r = _ip(["ip", "netns", "pids", ns])
    for tok in r.stdout.split():
        if tok.isdigit():
            try:
                os.kill(int(tok), signal.SIGKILL)
            except ProcessLookupError:
                pass


def down(name: str) -> list[str]:
    """Remove lab ``name`` and everything it left (processes, namespaces, state).

    Safe to call on a lab that is half built, already gone, or left by a crash.
    Returns the namespaces deleted.
    """
    require_root()
    if not re.fullmatch(r"[a-z0-9]{1,8}", name):
        raise LabError(f"{name!r} is not a lab name", where="lab down",
                       hint="lab names are 1-8 lower-case letters or digits; nicbench lab status lists them")
    try:
        lab = load(name) if _paths(name)[0].exists() else None
    except LabError:
        lab = None    # damaged state: fall back to namespace names and the pid file
    tracker = lab.tracker if lab else ProcessTracker(_paths(name)[1])
    tracker.kill_all()
    mine = set(lab.spec.namespaces) if lab else set()
    for ns in existing_namespaces():
        m = _NS_RE.match(ns)
        if m and m.group(1) == name:
            mine.add(ns)
    present = set(existing_namespaces())
    removed = []
    for ns in sorted(mine & present):
        _kill_ns_pids(ns)
    for ns in sorted(mine & present):
        for _attempt in range(3):
            r = _ip(["ip", "netns", "del", ns])
            if r.returncode == 0:
                removed.append(ns)
                break
            time.sleep(0.1)
        else:
            raise LabError(f"cannot delete namespace {ns}: {tail(r.stderr)}", where=f"lab {name}")
    tracker.clear()
    for ns in sorted(mine):      # the hosts' lease files (their holders died with the namespaces' processes)
        shutil.rmtree(lease_dir(ns), ignore_errors=True)
    remove_ssh(name)             # the SSH mode's keys and configs, if any
    _paths(name)[0].unlink(missing_ok=True)
    return removed


def ownership(name: str) -> Ownership:
    """Who built lab ``name`` (None as owner when its state file does not say)."""
    try:
        owner = json.loads(_paths(name)[0].read_text()).get("owner")
    except (OSError, ValueError, AttributeError):
        owner = None
    return Ownership(name, owner if isinstance(owner, dict) else None)


def all_labs() -> list[str]:
    """Names of labs known by state file or by namespace name."""
    names = {p.stem for p in state_dir().glob("*.json")} if state_dir().exists() else set()
    for ns in existing_namespaces():
        m = _NS_RE.match(ns)
        if m:
            names.add(m.group(1))
    return sorted(names)


def _json(args: list[str]) -> list[dict[str, Any]]:
    r = _ip(args)
    try:
        got = json.loads(r.stdout) if r.returncode == 0 and r.stdout.strip() else []
    except ValueError:
        return []
    return got if isinstance(got, list) else []


def _tbf_bps(ns: str, dev: str) -> float | None:
    """The rate of the root tbf on ``dev``, bit/s (tc's JSON says bytes/s), or None."""
    for q in _json(["tc", "-n", ns, "-j", "qdisc", "show", "dev", dev]):
        if q.get("kind") == "tbf" and q.get("root"):
            return float(q.get("options", {}).get("rate", 0)) * 8
    return None


def live_topology(spec: LabSpec, present: set[str]) -> dict[str, dict[str, Any]]:
    """What each host's links look like now (see :func:`topology.topology_problems`)."""
    out: dict[str, dict[str, Any]] = {}
    for h in spec.hosts:
        if h.netns not in present:
            continue
        info = (_json(["ip", "-n", h.netns, "-j", "addr", "show", "dev", h.ifname]) or [{}])[0]
        out[h.name] = {
            "mtu": info.get("mtu"), "up": "UP" in info.get("flags", []),
            "addrs": [f"{a.get('local')}/{a.get('prefixlen')}" for a in info.get("addr_info", [])
                      if a.get("family") == "inet"],
            "tbf_bps": _tbf_bps(h.netns, h.ifname),
            "port_tbf_bps": _tbf_bps(spec.switch_ns, f"p-{h.name}") if spec.switch_ns in present else None,
            "direct": {d.ifname: (_json(["ip", "-n", h.netns, "-j", "link", "show", "dev", d.ifname]) or [{}])[0]
                       .get("mtu") for d in spec.direct if h.name in (d.a, d.b)}}
        if spec.switch_ns in present:      # the other end of its veth
            out[h.name]["port_mtu"] = _link_mtu(spec.switch_ns, f"p-{h.name}")
    return out


def _link_mtu(ns: str, dev: str) -> int | None:
    """The MTU of ``dev`` in namespace ``ns``; None if it is not there."""
    return (_json(["ip", "-n", ns, "-j", "link", "show", "dev", dev]) or [{}])[0].get("mtu")


def live_bridge(spec: LabSpec, present: set[str]) -> dict[str, Any] | None:
    """The switch's bridge as it is now (``mtu``), or None when its namespace is gone."""
    return {"mtu": _link_mtu(spec.switch_ns, "br0")} if spec.switch_ns in present else None


def status(name: str) -> dict:
    """What exists of lab ``name``: namespaces, links and tracked live processes."""
    lab = load(name)
    present = set(existing_namespaces())
    stray = sorted(ns for ns in present if (m := _NS_RE.match(ns)) and m.group(1) == name)
    out: dict = {"name": name, "state_file": lab is not None, "namespaces": stray, "hosts": [],
                 "processes": [], "owner": ownership(name).owner}
    if lab:
        out["mtu"] = lab.spec.mtu
        live = live_topology(lab.spec, present)
        for h in lab.spec.hosts:
            got = live.get(h.name, {})
            out["hosts"].append({"name": h.name, "role": h.role, "netns": h.netns, "ip": h.ip,
                                 "present": h.netns in present, "link_up": bool(got.get("up")),
                                 "mtu": got.get("mtu"), "switch_port_mtu": got.get("port_mtu")})
        out["processes"] = [{"host": host, "pid": pid} for host, pid in lab.tracker.alive()]
        missing = [ns for ns in lab.spec.namespaces if ns not in present]
        out["problems"] = [f"namespace {ns} is gone" for ns in missing if ns == lab.spec.switch_ns] \
            + topology_problems(lab.spec, live, live_bridge(lab.spec, present))
        out["healthy"] = not out["problems"]
    else:
        out["healthy"] = False
        out["problems"] = ["no state file: not a lab nicbench knows (nicbench lab down NAME removes its remains)"]
    return out


def left_by_dead_run(name: str) -> str | None:
    """Why lab ``name`` is a leftover nobody will finish, or None: a run built
    it (a ``lab up`` lab is the user's), that run's process is gone (a
    ``kill -9`` mid-build), no run holds it now (its lease), and it is not
    whole (a lab kept whole with ``--keep-lab`` stays reusable)."""
    if os.geteuid() != 0:
        return None          # its namespaces cannot be read, nor removed
    o = ownership(name)
    owner = o.owner or {}
    held = holder(name)
    if owner.get("purpose") != "run" or owner.get("pid") == os.getpid() or o.in_use \
            or (held is not None and held.get("pid") != os.getpid()):     # this run's own lease is no other run
        return None
    problems = status(name)["problems"]
    if not problems:
        return None
    return f"half-built by a run whose process {owner.get('pid')} is gone ({'; '.join(problems)})"
