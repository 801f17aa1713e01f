"""Progress of a run on stderr: a live bar on a terminal; one line per
finished point otherwise (CI logs, nohup, a pipe), so a long run is never
silent until its end.

What a finished point's figure is comes from its study's view (the same
analysis the report runs), never from summing the tools' own rates."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ..analysis.trials import drift_lines
from ..hosts.sshconfig import summary_of
from ..records import Sample, TrialRecord, TrialSpec
from ..report.view import StudyView


def preflight_lines(meta: Mapping[str, Any]) -> list[str]:
    """One line per SSH host: its effective SSH settings (``ssh -G``), OS
    and measured clock offset, from the run's info."""
    out = []
    for host, m in (meta.get("ssh") or {}).items():
        st = m.get("settings")
        where = summary_of(st) if st else "ssh settings unknown"
        off, unc = m.get("clock_offset_s"), m.get("clock_uncertainty_s") or 0.0
        clock = f"clock {off * 1000:+.1f} ms +-{unc * 1000:.1f}" if off is not None else "clock not read"
        out.append(f"ssh {host}: {where}; {m.get('os') or 'OS unknown'}; {clock}")
    return out


class TerminalProgress:
    def __init__(self, view: StudyView, console: Console | None = None):
        self.view = view
        self.console = console or Console(stderr=True)
        self.enabled = self.console.is_terminal
        self._p: Progress | None = None
        self._task: TaskID | None = None
        self._meta: Mapping[str, Any] = {}
        self._total = 0
        self._done = 0

    def begin(self, run_id: str, total: int, meta: Mapping[str, Any]) -> None:
        self._meta = meta
        self._total = total
        if not self.enabled:
            self._line(f"run {run_id}: {total} points")
            return
        self._p = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                           TextColumn("{task.fields[last]}"), console=self.console, transient=False)
        self._p.start()
        self.console.print(f"run {run_id}: {total} points")
        for line in preflight_lines(meta):
            self.console.print(line, markup=False, highlight=False)
        self._task = self._p.add_task("starting", total=total, last="")

    def trial_start(self, spec: TrialSpec) -> None:
        if self._p is not None and self._task is not None:
            self._p.update(self._task, description=f"{spec.point} r{spec.repeat + 1}")

    def trial_end(self, rec: TrialRecord, samples: list[Sample]) -> None:
        self._done += 1
        # (on_tuning_drift = "fail": the point's error says it already)
        drift = drift_lines(rec.meta) if "tuning drifted" not in (rec.error or "") else ()
        drifted = f" -- WARNING: tuning drifted: {'; '.join(drift)}" if drift else ""
        if not self.enabled:
            again = f" (repeat {rec.spec.repeat + 1})" if rec.spec.repeat else ""
            what = (self.view.progress_line(rec, samples, self._meta) if rec.status == "ok"
                    else f"{rec.spec.point} {rec.status.upper()}: {rec.error}")
            self._line(f"[{self._done}/{self._total}] {what}{again}{drifted}")
            return
        if self._p is None or self._task is None:
            return
        if rec.status == "ok":
            last = "last: " + self.view.progress_line(rec, samples, self._meta) + (" (tuning drifted)" if drift else "")
        else:
            last = f"last: {rec.spec.point} {rec.status.upper()}"
            self.console.print(f"[red]{rec.spec.point}: {rec.error}[/red]")
        if drift:
            self.console.print(f"{rec.spec.point}: WARNING: tuning drifted during the point: {'; '.join(drift)}",
                               style="yellow", markup=False, highlight=False)
        self._p.update(self._task, advance=1, last=last)

    def _line(self, text: str) -> None:
        """One plain line, flushed at once (a log read while the run goes on)."""
        self.console.print(text, markup=False, highlight=False, soft_wrap=True)
        self.console.file.flush()

    def end(self) -> None:
        if self._p is not None:
            self._p.stop()
            self._p = None
