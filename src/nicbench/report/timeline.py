"""A point's timeline: what its samples show over time, drawn from the
archive alone (for runs made before this figure existed too).

Panels on one time axis (seconds from the trial's first sample): the
study's own series first -- by default each client's receiver-side
throughput per interval (the engine's own intervals, summed per client
host, so a point of 96 connections stays readable), with the window the
point's figure was summed on shaded; a study gives its own (:class:`Panel`:
HTTPS the server's interface, storage fio's IOPS, packets the Mpps sent and
received, latency each probe's round trips) --; then the cores busy by state
(user, system, softirq, irq), each host's CPUs stacked; and retransmits,
drops and errors per interval.  A series the archive does not hold for the
trial is said under the figure (and beside it in the page), never left out
silently.
"""

from __future__ import annotations

import math
import textwrap
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..analysis.trials import TrialHead
from ..records import CPU_BUSY, Sample
from .figures import plain_log_axis, pyplot
from .view import RunView

STATE_COLOURS = {"user": "#4c72b0", "nice": "#64b5cd", "system": "#dd8452", "irq": "#8172b3",
                 "softirq": "#c44e52"}
COUNTS = {"tcp.retransmits": "retransmits (tool)", "net.tcp.retrans_segs": "retransmitted segments (kernel)",
          "if.drops": "interface drops", "if.errors": "interface errors"}

Spans = list[tuple[float, float, float]]


@dataclass(frozen=True)
class Panel:
    """One panel of a timeline: ``series`` (label -> (start, end, value)
    spans) on the shared grid.  ``how``: ``rate`` spreads each span's value
    pro rata over the bins it covers, per second, times ``scale`` (bytes ->
    Gbit/s: 8e-9); ``mean`` and ``max`` take a value held over its span (a
    round trip's mean or maximum), time-weighted or the largest in each bin,
    times ``scale``; a bin no span covers is a gap."""

    ylabel: str
    series: Mapping[str, Spans]
    how: str = "rate"
    scale: float = 1.0
    log: bool = False
    styles: Mapping[str, str] = field(default_factory=dict)    # label -> line style ("--": a second kind)
    hows: Mapping[str, str] = field(default_factory=dict)      # label -> its own ``how``


@dataclass(frozen=True)
class Timelines:
    """Every point's timeline: point -> PNG file name, and point -> what
    its figure could not draw from the archive (and why a point has none)."""

    files: dict[str, str]
    notes: dict[str, list[str]]


PanelsOf = Callable[[Sequence[Sample], TrialHead], tuple[list[Panel], list[str]]]


def _binned(spans: Iterable[tuple[float, float, float]], t0: float, width: float, n: int) -> list[float]:
    """Each span's value spread pro rata over ``n`` bins of ``width`` s from
    ``t0``, as a rate per second: spans of several processes or hosts, read at
    their own times, add up on one grid."""
    acc = [0.0] * n
    for a, b, v in spans:
        if b <= a:
            continue
        i = max(0, int((a - t0) // width))
        while i < n and t0 + i * width < b:
            lo, hi = max(a, t0 + i * width), min(b, t0 + (i + 1) * width)
            if hi > lo:
                acc[i] += v * (hi - lo) / (b - a)
            i += 1
    return [x / width for x in acc]


def _levels(spans: Iterable[tuple[float, float, float]], t0: float, width: float, n: int,
            how: str) -> list[float]:
    """A value held over each span, per bin: the time-weighted mean of the
    spans overlapping it (``mean``) or the largest (``max``); NaN where none does."""
    acc, wt = [0.0] * n, [0.0] * n
    top = [-math.inf] * n
    for a, b, v in spans:
        i = max(0, int((a - t0) // width))
        while i < n and t0 + i * width < b:
            lo, hi = max(a, t0 + i * width), min(b, t0 + (i + 1) * width)
            if hi > lo:
                acc[i] += v * (hi - lo)
                wt[i] += hi - lo
                top[i] = max(top[i], v)
            i += 1
    if how == "max":
        return [x if x > -math.inf else math.nan for x in top]
    return [acc[i] / wt[i] if wt[i] > 0 else math.nan for i in range(n)]


def throughput_series(samples: Iterable[Sample]) -> dict[str, list[tuple[float, float, float]]]:
    """Receiver-side bytes per (client host, direction): (start, end, bytes)
    spans, the omitted warm-up left out."""
    out: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for s in samples:
        if s.metric.endswith(".bytes") and not s.metric.startswith("if.") and s.tag("side") == "receiver" \
                and s.tag("omitted", "0") != "1" and s.t_end > s.t_start:
            out[f"{s.tag('host')} {s.tag('direction') or ''}".strip()].append((s.t_start, s.t_end, s.value))
    return out


def throughput_panel(samples: Iterable[Sample], ylabel: str = "Gbit/s") -> Panel:
    """The default first panel: each client's receiver-side throughput."""
    return Panel(ylabel, throughput_series(samples), "rate", 8 / 1e9)


def series_of(samples: Iterable[Sample], metric: str, label: Callable[[Sample], str | None]) -> dict[str, Spans]:
    """(start, end, value) spans of ``metric``, per label (None: left out),
    the omitted warm-up left out."""
    out: dict[str, Spans] = defaultdict(list)
    for s in samples:
        if s.metric == metric and s.t_end > s.t_start and s.tag("omitted", "0") != "1":
            k = label(s)
            if k is not None:
                out[k].append((s.t_start, s.t_end, s.value))
    return dict(out)


def busiest_host(samples: Iterable[Sample], metric: str = "if.bytes") -> str | None:
    """The host whose test interfaces sent the most (``metric``, tx): the
    server of a study whose clients only ask."""
    sent: dict[str, float] = defaultdict(float)
    for s in samples:
        if s.metric == metric and s.tag("direction") == "tx":
            sent[s.tag("host") or "?"] += s.value
    return max(sent, key=lambda h: sent[h]) if sent else None


def interface_series(samples: Iterable[Sample], host: str | None, metric: str = "if.bytes") -> dict[str, Spans]:
    """``host``'s test interfaces per interval each way (``metric``: bytes or
    frames), labelled "host tx (interface)": what stands in where the engine
    reports no intervals."""
    return series_of(samples, metric, lambda s: f"{s.tag('host')} {s.tag('direction')} (interface)"
                     if s.tag("host") == host else None)


def cpu_series(samples: Iterable[Sample]) -> dict[tuple[str, str], list[tuple[float, float, float]]]:
    """CPU-seconds per (host, busy state): (start, end, seconds) spans of every CPU."""
    out: dict[tuple[str, str], list[tuple[float, float, float]]] = defaultdict(list)
    for s in samples:
        if s.metric == "cpu.time" and s.tag("state") in CPU_BUSY and s.t_end > s.t_start:
            out[(s.tag("host") or "?", s.tag("state") or "?")].append((s.t_start, s.t_end, s.value))
    return out


def count_series(samples: Iterable[Sample]) -> dict[str, list[tuple[float, float, float]]]:
    """Retransmits, drops and errors: (start, end, count) spans per counter, every host's."""
    out: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for s in samples:
        if s.metric in COUNTS and s.t_end > s.t_start and s.tag("omitted", "0") != "1":
            out[COUNTS[s.metric]].append((s.t_start, s.t_end, s.value))
    return out


def _legend(ax: object) -> None:
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Grid:
    """A trial's timeline as numbers on one time grid: ``n`` bins of
    ``width`` s from ``t0`` (absolute); the study's own panels with their
    lines scaled (label -> value per bin, NaN a gap), the cores busy per
    (host, state) in stacking order, the counters per bin, the windows the
    figure was summed on (seconds from ``t0``) and what could not be drawn.
    What :func:`draw` plots and the dashboard's interactive timeline shows."""

    t0: float
    width: float
    n: int
    panels: list[tuple[Panel, dict[str, list[float]]]]
    cpu: list[tuple[str, str, list[float]]]
    counts: dict[str, list[float]]
    windows: list[tuple[float, float]]
    notes: list[str]

    @property
    def edges(self) -> list[float]:
        return [i * self.width for i in range(self.n + 1)]


def grid_of(samples: Sequence[Sample], windows: Sequence[tuple[float, float]] = (),
            panels: Sequence[Panel] | None = None, notes: Sequence[str] = ()) -> tuple[Grid | None, list[str]]:
    """The grid of one trial's samples, and what it could not draw from them;
    no grid when the samples hold no series at all."""
    mine = [p for p in (panels if panels is not None else [throughput_panel(samples)]) if p.series]
    notes = list(notes)
    cpu = cpu_series(samples)
    counts = count_series(samples)
    if not cpu:
        notes.append("the cores busy: no CPU reads of this trial in the archive")
    if not counts:
        notes.append("retransmits, drops and errors: no counters of this trial in the archive")
    if panels is None and not mine:
        notes.insert(0, "each client's throughput: no receiver intervals of this trial in the archive")
    # the grid: the study's own interval (the median span of its first series; its last
    # one is often a stub) where it reports several per series, else the CPU reads', at least 50 ms
    first = [sp for p in mine[:1] for spans in p.series.values() for sp in spans]
    several = bool(mine) and len(first) >= 3 * len(mine[0].series)
    grid = (first if several else []) or [sp for spans in cpu.values() for sp in spans] \
        or [sp for spans in counts.values() for sp in spans] or first
    if not grid:
        return None, notes
    every = grid + [sp for p in mine[1:] for spans in p.series.values() for sp in spans]
    t0, t1 = min(a for a, _, _ in every), max(b for _, b, _ in every)
    width = max(0.05, sorted(b - a for a, b, _ in grid)[len(grid) // 2])
    n = max(1, round((t1 - t0) / width))
    lanes: list[tuple[Panel, dict[str, list[float]]]] = []
    for p in mine:
        lines = {}
        for label, spans in sorted(p.series.items()):
            how = p.hows.get(label, p.how)
            ys = _binned(spans, t0, width, n) if how == "rate" else _levels(spans, t0, width, n, how)
            lines[label] = [y * p.scale for y in ys]
        lanes.append((p, lines))
    hosts = sorted({h for h, _ in cpu})
    cores = [(h, state, _binned(cpu[(h, state)], t0, width, n)) for h in hosts for state in CPU_BUSY
             if cpu.get((h, state))]
    per_bin = {label: [x * width for x in _binned(spans, t0, width, n)] for label, spans in sorted(counts.items())}
    return Grid(t0, width, n, lanes, cores, per_bin, [(a - t0, b - t0) for a, b in windows], notes), notes


def draw(samples: Sequence[Sample], out: Path, stem: str, title: str,
         windows: Sequence[tuple[float, float]] = (), panels: Sequence[Panel] | None = None,
         notes: Sequence[str] = ()) -> tuple[Path | None, list[str]]:
    """The timeline of one trial's samples as ``stem``.png, and what it
    could not draw from them (said under the figure too); no figure when
    the samples hold no series at all."""
    g, notes = grid_of(samples, windows, panels, notes)
    if g is None:
        return None, notes
    edges = g.edges
    rows = len(g.panels) + bool(g.cpu) + bool(g.counts)
    said = [line for x in notes for line in textwrap.wrap("not drawn: " + x, 150, subsequent_indent="    ")]
    height = 1.9 * rows + 0.6 + 0.14 * len(said)
    plt = pyplot()
    fig, axes = plt.subplots(rows, 1, figsize=(8.5, height), dpi=90, sharex=True, squeeze=False)
    for i, (p, lines) in enumerate(g.panels):
        ax = axes[i][0]
        for label, ys in lines.items():
            ax.stairs(ys, edges, label=label, linewidth=1.2, linestyle=p.styles.get(label, "-"))
        ax.set_ylabel(p.ylabel)
        if p.log:
            plain_log_axis(ax)
        else:
            ax.set_ylim(bottom=0)
        _legend(ax)
    for w0, w1 in g.windows if g.panels else ():
        axes[0][0].axvspan(w0, w1, color="#999", alpha=0.15, lw=0)
    axes[0][0].set_title(title + (" (shaded: the window its figure is summed on)" if g.windows and g.panels else ""),
                         fontsize=9)
    i = len(g.panels)
    if g.cpu:
        cax = axes[i][0]
        i += 1
        several = len({h for h, _, _ in g.cpu}) > 1
        bottom = [0.0] * g.n
        for h, state, cores in g.cpu:
            top = [b + x for b, x in zip(bottom, cores, strict=True)]
            cax.stairs(top, edges, baseline=bottom, fill=True, alpha=0.85, color=STATE_COLOURS.get(state),
                       label=state + (f" ({h})" if several else ""))
            bottom = top
        cax.set_ylabel("cores busy")
        cax.set_ylim(bottom=0)
        _legend(cax)
    if g.counts:
        kax = axes[i][0]
        for label, ys in g.counts.items():
            kax.stairs(ys, edges, label=label)
        kax.set_ylabel(f"per {g.width:.2g} s")
        _legend(kax)
    axes[-1][0].set_xlabel("seconds from the trial's first interval")
    if said:
        fig.text(0.01, 0.01, "\n".join(said), fontsize=7, color="#555", va="bottom")
    # fixed margins (legends to the right): tight_layout would draw the figure once more
    fig.subplots_adjust(left=0.1, right=0.72, top=1 - 0.3 / height, bottom=(0.55 + 0.14 * len(said)) / height,
                        hspace=0.12)
    png = out / f"{stem}.png"
    fig.savefig(png)
    plt.close(fig)
    return png, notes


def _windows(t: TrialHead) -> list[tuple[float, float]]:
    """The window(s) a trial's figure was summed on, where its study keeps them."""
    receiver = getattr(t, "receiver", None)
    if isinstance(receiver, dict) and receiver:
        return sorted({a.window for a in receiver.values()})
    directions = getattr(t, "directions", None)
    if isinstance(directions, dict) and directions:
        return sorted({r.received.window for r in directions.values() if hasattr(r, "received")})
    w = getattr(t, "window", None)
    return [w] if isinstance(w, tuple) and len(w) == 2 else []


def timeline_stem(point: str) -> str:
    """The file name (less .png) of a point's timeline: the key made file-safe."""
    return "timeline-" + "".join(c if c.isalnum() or c in "-." else "_" for c in point)


def shown_trials(view: RunView) -> dict[str, TrialHead]:
    """The trial each point's timeline shows: its first ok repeat, else its first partial, else its first."""
    chosen: dict[str, TrialHead] = {}
    rank = {"ok": 0, "partial": 1}
    for t in view.trials:
        have = chosen.get(t.point)
        if have is None or rank.get(t.status, 2) < rank.get(have.status, 2):
            chosen[t.point] = t
    return chosen


def point_grid(view: RunView, point: str, panels: PanelsOf | None = None) -> tuple[TrialHead, Grid | None, list[str]]:
    """One point's timeline as numbers (the trial :func:`timelines` draws);
    KeyError when the run has no such point."""
    t = shown_trials(view)[point]
    samples = view.samples.get(t.trial_id, [])
    mine, lacks = panels(samples, t) if panels is not None else (None, [])
    g, said = grid_of(samples, _windows(t), mine, lacks)
    return t, g, said


def timelines(view: RunView, out: Path, panels: PanelsOf | None = None) -> Timelines:
    """One timeline per point (its first ok repeat, else its first partial,
    else its first), into ``out``; ``panels``: the study's own first panels
    of a trial and what the archive lacks for them (default: each client's
    throughput)."""
    chosen = shown_trials(view)
    files: dict[str, str] = {}
    notes: dict[str, list[str]] = {}
    for point, t in chosen.items():
        samples = view.samples.get(t.trial_id, [])
        mine, lacks = panels(samples, t) if panels is not None else (None, [])
        png, said = draw(samples, out, timeline_stem(point), f"{point}, repeat {t.repeat + 1} ({t.status})",
                         _windows(t), mine, lacks)
        if png is not None:
            files[point] = png.name
        else:
            said = ["no timeline: the archive holds no series of this trial over time"] + said
        if said:
            notes[point] = said
    return Timelines(files, notes)


def point_timelines(view: RunView, out: Path, panels: PanelsOf | None = None) -> dict[str, str]:
    """:func:`timelines`' files: point -> PNG file name."""
    return timelines(view, out, panels).files
