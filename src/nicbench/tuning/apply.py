"""Apply a tuning profile (after an audit, every prior value saved first) and
restore it (every prior value written back and read back; the restore file
goes only when all came back)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ..core.errors import InputError, NicbenchError, ToolError
from ..hosts.transport import LocalTransport, Transport
from . import freebsd, knobs
from .audit import audit
from .profile import Profile
from .restorefile import read_restore, remove_restore, restore_path, transport_doc, write_restore
from .types import Row, Target, TuningPlan


@dataclass(frozen=True)
class _Group:
    transport: Transport
    restore_id: str
    rows: list[Row]


def _groups(plan: TuningPlan, targets: Sequence[Target], machine: Transport) -> list[_Group]:
    """Changes grouped by where they are made: each host, and the machine."""
    by_host = {t.host: t for t in targets}
    groups: dict[str, _Group] = {}
    for r in plan.rows:
        if r.status != "differs":
            continue
        if r.host == "machine" and r.host not in by_host:
            g = groups.setdefault("machine", _Group(machine, "machine", []))
        else:
            t = by_host[r.host]
            g = groups.setdefault(t.host, _Group(t.transport, t.restore_id, []))
        g.rows.append(r)
    return list(groups.values())


def apply(profile: Profile, targets: Sequence[Target], *, machine: Transport | None = None,
          host_wide: bool = False, step: Callable[[], None] | None = None) -> TuningPlan:
    """Audit, then change what differs, host by host; returns the audit with
    each changed row's outcome.  ``step`` runs after every change (a test
    hook: a hidden CLI flag pauses there so a kill between changes can be tested)."""
    if profile.audit_only:
        raise InputError("this profile only audits", where="tuning profile",
                         hint="use 'nicbench tune audit', or a profile without audit_only")
    freebsd.refuse_apply(targets, profile)
    machine = machine or LocalTransport("machine")
    plan = audit(profile, targets, machine=machine, host_wide=host_wide)
    outcome: dict[tuple[str, str], Row] = {}
    for g in _groups(plan, targets, machine):
        doc = read_restore(g.transport, g.restore_id) or {
            "version": 1, "created": time.time(), "transport": transport_doc(g.transport), "items": {}}
        for r in g.rows:
            item = doc["items"].setdefault(r.key, {"prior": r.current, "setting": r.setting})
            item["applied"] = r.wanted          # what nicbench leaves: the restore puts back only that
        write_restore(g.transport, g.restore_id, doc)          # before the first change
        # tuned and services first: a tuned profile rewrites sysctls and governors itself
        for r in sorted(g.rows, key=lambda r: 0 if r.key == "tuned" or r.key.startswith("service:") else 1):
            try:
                knobs.write(g.transport, r.key, str(r.wanted))
                back = knobs.read(g.transport, r.key)
                ok = knobs.same(r.key, back, r.wanted)
                outcome[(r.host, r.key)] = replace(r, current=back, status="applied" if ok else "failed",
                                                   note=r.note if ok else f"reads back {back!r}")
            except NicbenchError as e:
                outcome[(r.host, r.key)] = replace(r, status="failed", note=e.message)
            if step is not None:
                step()
        # read everything back once more: a later change (tuned, a driver reset by
        # ethtool -L) may have undone an earlier one
        for r in g.rows:
            done = outcome.get((r.host, r.key))
            if done is not None and done.status == "applied":
                now = knobs.read(g.transport, r.key)
                if not knobs.same(r.key, now, r.wanted):
                    outcome[(r.host, r.key)] = replace(done, current=now, status="failed",
                                                       note=f"changed again by a later setting: reads {now!r}")
    plan.rows = [outcome.get((r.host, r.key), r) for r in plan.rows]
    return plan


def restore(t: Transport, restore_id: str) -> list[Row]:
    """Put back what the restore file lists; delete it only if all came back."""
    doc = read_restore(t, restore_id)
    if doc is None:
        return []
    rows, failed = [], []
    # a queue's own settings before the channel counts: restoring a count
    # removes the queues an apply added, and with them what was set on them
    items = sorted(doc.get("items", {}).items(), key=lambda kv: 0 if kv[0].startswith(("rps:", "rfs:")) else 1)
    for key, item in items:
        prior = item.get("prior")
        setting = item.get("setting", key)
        try:
            now = knobs.read(t, key)
            gone = _vanished(t, key, setting, now)
            if gone:
                rows.append(Row(t.host, setting, key, None, prior, "gone", gone))
                continue
            mine = item.get("applied")
            if (mine is not None and prior is not None and not knobs.same(key, now, mine)
                    and not knobs.same(key, now, prior)):
                rows.append(Row(t.host, setting, key, now, prior, "left",
                                f"changed by someone else since nicbench set it to {mine!r} (before nicbench: "
                                f"{prior!r}): left as it is, not overwritten"))
                continue
            if prior is not None and not knobs.same(key, now, prior):
                knobs.write(t, key, str(prior))
            back = knobs.read(t, key)
            ok = prior is None or knobs.same(key, back, prior)
            rows.append(Row(t.host, setting, key, back, prior, "restored" if ok else "failed",
                            "" if ok else f"reads back {back!r}"))
            if not ok:
                failed.append(key)
        except NicbenchError as e:
            rows.append(Row(t.host, setting, key, None, prior, "failed", e.message))
            failed.append(key)
    if failed:
        raise ToolError(f"could not restore {', '.join(failed)}", where=t.host,
                        hint=f"the restore file {restore_path(restore_id)} is kept; fix and run "
                             "'nicbench tune restore' again")
    remove_restore(t, restore_id)
    return rows


def _vanished(t: Transport, key: str, setting: str, now: str | None) -> str | None:
    """Why a setting cannot be restored because what it was set on is gone
    (an IRQ renumbered after a reboot or driver reload, an interface
    removed, a CPU offlined), or None."""
    if now is None:
        return "no longer on this host (its device, CPU or interface is gone): nothing to restore"
    m = re.match(r"irq (\d+) \((.+)\)$", setting)
    if key.startswith("irq:") and m:
        try:
            line = next((ln for ln in t.read_text("/proc/interrupts").splitlines()
                         if ln.split(":", 1)[0].strip() == m.group(1)), "")
        except OSError:
            line = ""
        if m.group(2) not in line.split():
            return f"IRQ {m.group(1)} is no longer {m.group(2)} (renumbered after a reboot or reload): left alone"
    return None


def restore_targets(targets: Sequence[Target], host_wide: bool) -> list[str]:
    """Restore every target (and the machine, if host-wide settings were
    applied); what was left alone because someone else changed it since."""
    groups = [(t.transport, t.restore_id) for t in targets]
    if host_wide:
        groups.append((LocalTransport("machine"), "machine"))
    errors: list[str] = []
    left: list[str] = []
    for tr, rid in groups:
        try:
            left += [f"{r.host} {r.setting}: {r.note}" for r in restore(tr, rid) if r.status == "left"]
        except NicbenchError as e:
            errors.append(e.one_line())
    if errors:
        raise ToolError("tuning not fully restored: " + "; ".join(errors), where="tuning",
                       hint="run 'nicbench tune restore' (the restore files are kept)")
    return left
