"""Live progress on the terminal (rich), silent when stderr is not a TTY."""

from __future__ import annotations


from rich.console import Console
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                           TimeElapsedColumn, TimeRemainingColumn)

from ..analysis.aggregate import NoSharedWindow, aggregate, directions_in
from ..records import Sample, TrialRecord, TrialSpec


class TerminalProgress:
    def __init__(self, trim: float, console: Console | None = None):
        self.trim = trim
        self.console = console or Console(stderr=True)
        self.enabled = self.console.is_terminal
        self._p: Progress | None = None
        self._task = None
        self._last = ""

    def begin(self, run_id: str, total: int) -> None:
        if not self.enabled:
            return
        self._p = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                           TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
                           TextColumn("{task.fields[last]}"), console=self.console, transient=False)
        self._p.start()
        self.console.print(f"run {run_id}: {total} points")
        self._task = self._p.add_task("starting", total=total, last="")

    def trial_start(self, spec: TrialSpec) -> None:
        if self._p is not None:
            self._p.update(self._task, description=f"{spec.point} r{spec.repeat + 1}")

    def trial_end(self, rec: TrialRecord, samples: list[Sample]) -> None:
        if self._p is None:
            return
        # the figure the report will show, from the study's own analysis (summing
        # per-client rates over different windows overstates them)
        study = rec.spec.study
        if rec.status == "ok" and study == "https":
            from ..analysis.https import https_trial
            h = https_trial(rec, samples, None)
            self._last = (f"last: {rec.spec.point} {h.app_gbps:.2f} Gbps (application)" if h.app_gbps is not None
                          else f"last: {rec.spec.point} {h.error}")
        elif rec.status == "ok" and study == "packets":
            from ..analysis.packets import packet_trial
            t = packet_trial(rec, samples, self.trim)
            self._last = (f"last: {rec.spec.point} {t.rx_pps / 1e6:.3f} Mpps received" if t.rx_pps
                          else f"last: {rec.spec.point} {t.error}")
        elif rec.status == "ok" and study == "storage":
            from ..analysis.storage import storage_trial
            st = storage_trial(rec, samples)
            self._last = (f"last: {rec.spec.point} {st.mb_s:.0f} MB/s" if st.mb_s is not None
                          else f"last: {rec.spec.point} {st.error}")
        elif rec.status == "ok":
            try:
                g = sum(aggregate(samples, direction=d, trim=self.trim).gbps for d in directions_in(samples))
                self._last = f"last: {rec.spec.point} {g:.2f} Gbps"
            except NoSharedWindow as e:
                self._last = f"last: {rec.spec.point} no window ({e})"
        else:
            self._last = f"last: {rec.spec.point} {rec.status.upper()}"
            self.console.print(f"[red]{rec.spec.point}: {rec.error}[/red]")
        self._p.update(self._task, advance=1, last=self._last)

    def end(self) -> None:
        if self._p is not None:
            self._p.stop()
            self._p = None

