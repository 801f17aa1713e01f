"""``nicbench recover``: what a nicbench killed with ``kill -9`` (or a power
loss) left behind, and, on request, putting it right.

A killed run cannot clean up after itself.  What it can leave:
- its run, still marked running in the archive (shown as aborted, since its
  process is gone): marked aborted, its finished points kept -- unless the
  run went on into its local spool (PostgreSQL went away) and finished
  there: then it waits for ``nicbench archive sync``, and is left alone;
- an import or ``archive add`` written half (invisible): removed, with its
  temporary directory;
- tuning in force (restore files in the restore directory): restored with
  ``tuning.apply.restore``, as ``nicbench tune restore`` does;
- a finished run (a run, an import) with no point figures, its process
  killed between making it visible and summarising it: summarised, as
  ``nicbench archive summarise`` does;
- a lab it built: removed with ``lab.manager.down``, also one it was
  still building (it has no run yet: found by the lab's owner record);
- its host leases, still recorded as held in the archive: released there
  (the locks on the hosts themselves ended with its process: see
  ``hosts.lease``);
Without ``--yes`` it only says what it found and what it would do.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from ..core.errors import NicbenchError, StoreError, ToolError
from ..lab import manager
from ..registry import VIEWS
from ..report.catalogue import summarise
from ..store.archive import Archive, RunRow, loads
from ..store.transfer import spooled
from ..store.writer import SPOOL
from ..tuning.apply import restore
from ..tuning.lock import TuningLock
from ..tuning.restorefile import DAMAGED, forget, pending, restore_dir, transport_from
from .options import emit, json_option, open_archive, quoted, store_option


@dataclass
class Leftovers:
    """What killed nicbench processes left, as found (nothing changed yet)."""

    runs: list[RunRow] = field(default_factory=list)          # visible runs whose process is gone
    halves: list[RunRow] = field(default_factory=list)        # invisible (half-imported) runs
    stray_dirs: list[Path] = field(default_factory=list)      # temporary run directories with no run
    tuning: list[str] = field(default_factory=list)           # restore ids pending, a killed run applied tuning
    labs: list[tuple[str, str]] = field(default_factory=list)  # (lab, run id that built it)
    dead_labs: list[tuple[str, str]] = field(default_factory=list)  # (lab, why): half-built by a run now gone
    other_tuning: list[str] = field(default_factory=list)     # pending, but no killed run applied tuning
    unsummarised: list[RunRow] = field(default_factory=list)  # finished, no point figures, process gone
    spooled: list[tuple[RunRow, RunRow]] = field(default_factory=list)  # (archive's row, spool's): finished there
    leases: dict[str, list[str]] = field(default_factory=dict)  # run id -> hosts: leases recorded held, process gone

    def __bool__(self) -> bool:
        return bool(self.runs or self.halves or self.stray_dirs or self.tuning or self.labs or self.dead_labs
                    or self.unsummarised or self.leases)

    def items(self) -> list[tuple[str, str]]:
        """(what was found, what cleaning it does)."""
        out = [(f"run {r.run_id} (pid {r.pid}) was killed after {r.trials_done} of {r.trials_total or '?'} "
                "points", "marked aborted; its finished points are kept") for r in self.runs]
        out += [(f"{r.source} {r.run_id} was killed half-way (it is not shown)", "removed") for r in self.halves]
        out += [(f"{r.source} {r.run_id} ({r.stored_status}, {r.trials_done} points) has no point figures: its "
                 f"process (pid {r.pid}) ended before writing them", "summarised (as 'nicbench archive summarise' "
                 "does)") for r in self.unsummarised]
        out += [(f"temporary run directory {d} belongs to no run", "removed") for d in self.stray_dirs]
        out += [(f"tuning is still in force ({rid}, restore file in {restore_dir()})", "restored")
                for rid in self.tuning]
        out += [(f"lab {lab} built by run {run} is still up", "removed") for lab, run in self.labs]
        out += [(f"lab {lab} {why}", "removed") for lab, why in self.dead_labs]
        out += [(f"run {run}'s leases on host{'s' if len(hosts) > 1 else ''} {', '.join(hosts)} are still recorded "
                 "as held (the locks on the hosts ended with its process)", "released in the archive")
                for run, hosts in self.leases.items()]
        return out

    def lines(self, done: bool) -> list[str]:
        out = [f"{what}: {how}" if done else f"{what} ({how} by 'nicbench recover --yes')"
               for what, how in self.items()]
        out += [f"run {a.run_id} finished ({s.status}, {s.trials_done} of {s.trials_total or '?'} points) into "
                f"its local spool {Path(a.run_dir) / SPOOL} while the archive was unreachable: it is waiting for "
                "'nicbench archive sync', left alone" for a, s in self.spooled]
        if self.other_tuning:
            out.append(f"tuning in force that no killed run applied ({', '.join(self.other_tuning)}): left alone "
                       "('nicbench tune restore' puts it back)")
        return out


def _meta(archive: Archive, row: RunRow) -> dict[str, Any]:
    got = archive.db.one("SELECT info_meta FROM runs WHERE rid = ?", (row.rid,))
    meta = loads(got[0] if got else None, {})
    return meta if isinstance(meta, dict) else {}


def _applied_tuning(archive: Archive, row: RunRow) -> bool:
    tuning = _meta(archive, row).get("tuning")
    return isinstance(tuning, dict) and bool(tuning.get("applied"))


def _built_lab(archive: Archive, row: RunRow) -> str | None:
    meta = _meta(archive, row)
    lab = meta.get("lab")
    if not isinstance(lab, dict) or meta.get("lab_reused") or meta.get("host_transport") not in (None, "netns", "ssh"):
        return None
    name = lab.get("name")
    return name if isinstance(name, str) else None


def inspect(archive: Archive) -> Leftovers:
    """What is left, without changing anything."""
    left = Leftovers()
    for r in archive.stale_runs():
        got = spooled(Path(r.run_dir), r.run_id) if archive.loc.kind == "postgresql" else None
        if got is not None and got.stored_status != "running":
            left.spooled.append((r, got))     # not killed: it finished, into the spool
            continue
        (left.runs if r.visible else left.halves).append(r)
    # a finished run's figures are written after it is made visible: a process killed in
    # between leaves none (an interrupted or failed run gets none by design: not listed)
    for run_id in archive.unsummarised():
        row = archive.row(run_id)
        if row.stored_status.startswith("done") and row.process_gone():
            left.unsummarised.append(row)
    known = {r[0] for r in archive.db.query("SELECT run_id FROM runs")}
    root = archive.runs_root
    if root.is_dir():
        left.stray_dirs = [d for d in sorted(root.glob(".tmp-*"))
                           if d.is_dir() and d.name[5:] not in known]
    restore_ids = [rid for rid, _doc in pending()]
    if any(_applied_tuning(archive, r) for r in left.runs):
        left.tuning = restore_ids
    else:
        left.other_tuning = restore_ids
    for lease in archive.held_leases():
        row = archive.row(lease.run_id, include_hidden=True)
        if row.status != "running":       # its process is gone (on another controller: cannot be told)
            left.leases.setdefault(lease.run_id, []).append(lease.host)
    left.dead_labs = dead_labs()
    up = set(manager.all_labs()) - {lab for lab, _ in left.dead_labs}
    for r in left.runs:
        lab = _built_lab(archive, r)
        if lab and lab in up:
            left.labs.append((lab, r.run_id))
    return left


def dead_labs() -> list[tuple[str, str]]:
    """Labs a killed run left half-built: it never had a run in any archive to be found by."""
    out = []
    for lab in manager.all_labs():
        why = manager.left_by_dead_run(lab)
        if why is not None:
            out.append((lab, why))
    return out


def clean(archive: Archive | None, left: Leftovers) -> list[str]:
    """Put right what ``left`` names; the problems that remain (empty: none)."""
    errors: list[str] = []
    if archive is not None:
        for r in left.runs:
            archive.set_status(r.run_id, "aborted", f"process {r.pid} gone (found by nicbench recover)")
        for run_id in left.leases:
            archive.release_leases(run_id)
        for r in left.halves:
            archive.delete_run(r.run_id)
            shutil.rmtree(Path(r.run_dir).with_name(f".tmp-{r.run_id}"), ignore_errors=True)
        for r in left.unsummarised:
            try:
                summarise(archive, r.run_id, VIEWS)
            except NicbenchError as e:
                errors.append(f"{r.run_id}: {e.one_line().removeprefix('nicbench: ')}")
    for d in left.stray_dirs:
        shutil.rmtree(d, ignore_errors=True)
    if left.tuning:
        lock = TuningLock().acquire("nicbench recover")
        try:
            for rid, doc in pending():
                if rid not in left.tuning:
                    continue
                if doc is DAMAGED:
                    errors.append(f"{rid}: the restore file in {restore_dir()} is damaged; it is kept")
                    continue
                try:
                    t = transport_from(doc, rid)
                    if t is None:
                        forget(rid)       # its namespace is gone, and its settings with it
                        continue
                    restore(t, rid)
                except NicbenchError as e:
                    errors.append(e.one_line().removeprefix("nicbench: "))
        finally:
            lock.release()
    for lab in [lab for lab, _ in left.labs + left.dead_labs]:
        try:
            manager.down(lab)
        except NicbenchError as e:
            errors.append(e.one_line().removeprefix("nicbench: "))
    return errors


@click.command("recover")
@store_option
@click.option("--yes", is_flag=True, help="Do it: mark, remove and restore what is listed.")
@json_option
@click.pass_context
def recover(ctx: click.Context, store: str | None, yes: bool) -> None:
    """Find what a killed nicbench left (runs still marked running, half
    imports, tuning in force, a lab it built) and, with --yes, clean it up."""
    try:
        archive = open_archive(store)
    except StoreError as e:
        if e.message != "no archive here yet":
            raise
        archive = None
    left = inspect(archive) if archive is not None else Leftovers(other_tuning=[rid for rid, _ in pending()],
                                                                 dead_labs=dead_labs())
    lines = left.lines(done=yes)
    data: dict[str, Any] = {"found": lines, "cleaned": False, "errors": []}
    if not left:
        emit(ctx, data, "\n".join(["nothing left behind by a killed nicbench", *lines]))
        return
    if not yes:
        again = quoted("nicbench", "recover", "--yes", *(("--store", store) if store else ()))
        emit(ctx, data, "\n".join([*lines, f"{again} does this"]))
        return
    try:
        errors = clean(archive, left)
    finally:
        if archive is not None:
            archive.close()
    data.update(cleaned=True, errors=errors)
    emit(ctx, data, "\n".join(lines + [f"problem: {e}" for e in errors] + (["done"] if not errors else [])))
    if errors:
        raise ToolError("; ".join(errors), where="recover", hint="fix what is named and run 'nicbench recover --yes' "
                                                                "again")

