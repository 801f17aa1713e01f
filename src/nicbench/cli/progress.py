"""Live progress on the terminal (rich), silent when stderr is not a TTY.

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

from ..records import Sample, TrialRecord, TrialSpec
from ..report.view import StudyView


class TerminalProgress:
    def __init__(self, view: StudyView, console: Console | None = None):
        self.view = view
        self.console = console or Console(stderr=True)
        self.enabled = self.console.is_terminal
        self._p: Progress | None = None
        self._task: TaskID | None = None
        self._meta: Mapping[str, Any] = {}

    def begin(self, run_id: str, total: int, meta: Mapping[str, Any]) -> None:
        self._meta = meta
        if not self.enabled:
            return
        self._p = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                           TextColumn("{task.fields[last]}"), console=self.console, transient=False)
        self._p.start()
        self.console.print(f"run {run_id}: {total} points")
        self._task = self._p.add_task("starting", total=total, last="")

    def trial_start(self, spec: TrialSpec) -> None:
        if self._p is not None and self._task is not None:
            self._p.update(self._task, description=f"{spec.point} r{spec.repeat + 1}")

    def trial_end(self, rec: TrialRecord, samples: list[Sample]) -> None:
        if self._p is None or self._task is None:
            return
        if rec.status == "ok":
            last = "last: " + self.view.progress_line(rec, samples, self._meta)
        else:
            last = f"last: {rec.spec.point} {rec.status.upper()}"
            self.console.print(f"[red]{rec.spec.point}: {rec.error}[/red]")
        self._p.update(self._task, advance=1, last=last)

    def end(self) -> None:
        if self._p is not None:
            self._p.stop()
            self._p = None
