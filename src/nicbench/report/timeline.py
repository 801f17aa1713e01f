"""A point's timeline: what its samples show over time, drawn from the
archive alone (for runs made before this figure existed too).

Three panels on one time axis (seconds from the trial's first sample):
each client's receiver-side throughput per interval (the engine's own
intervals, summed per client host, so a point of 96 connections stays
readable), with the window the point's figure was summed on shaded; the
cores busy by state (user, system, softirq, irq), each host's CPUs stacked;
and retransmits and drops per interval.  Any study whose samples carry
these metrics gets the same figure.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..analysis.trials import TrialHead
from ..records import CPU_BUSY, Sample
from .figures import pyplot
from .view import RunView

STATE_COLOURS = {"user": "#4c72b0", "nice": "#64b5cd", "system": "#dd8452", "irq": "#8172b3",
                 "softirq": "#c44e52"}
COUNTS = {"tcp.retransmits": "retransmits (tool)", "net.tcp.retrans_segs": "retransmitted segments (kernel)",
          "if.drops": "interface drops"}


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


def throughput_series(samples: Iterable[Sample]) -> dict[str, list[tuple[float, float, float]]]:
    """Receiver-side bytes per (client host, direction): (start, end, bytes)
    spans, the omitted warm-up left out."""
    out: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for s in samples:
        if s.metric.endswith(".bytes") and not s.metric.startswith("if.") and s.tag("side") == "receiver" \
                and s.tag("omitted", "0") != "1" and s.t_end > s.t_start:
            out[f"{s.tag('host')} {s.tag('direction') or ''}".strip()].append((s.t_start, s.t_end, s.value))
    return out


def cpu_series(samples: Iterable[Sample]) -> dict[tuple[str, str], list[tuple[float, float, float]]]:
    """CPU-seconds per (host, busy state): (start, end, seconds) spans of every CPU."""
    out: dict[tuple[str, str], list[tuple[float, float, float]]] = defaultdict(list)
    for s in samples:
        if s.metric == "cpu.time" and s.tag("state") in CPU_BUSY and s.t_end > s.t_start:
            out[(s.tag("host") or "?", s.tag("state") or "?")].append((s.t_start, s.t_end, s.value))
    return out


def count_series(samples: Iterable[Sample]) -> dict[str, list[tuple[float, float, float]]]:
    """Retransmits and drops: (start, end, count) spans per counter, every host's."""
    out: dict[str, list[tuple[float, float, float]]] = defaultdict(list)
    for s in samples:
        if s.metric in COUNTS and s.t_end > s.t_start and s.tag("omitted", "0") != "1":
            out[COUNTS[s.metric]].append((s.t_start, s.t_end, s.value))
    return out


def draw(samples: Sequence[Sample], out: Path, stem: str, title: str,
         windows: Sequence[tuple[float, float]] = ()) -> Path | None:
    """The timeline of one trial's samples as ``stem``.png; None when they hold
    no throughput series to draw."""
    thr = throughput_series(samples)
    if not thr:
        return None
    cpu = cpu_series(samples)
    counts = count_series(samples)
    every = [sp for spans in thr.values() for sp in spans]
    t0, t1 = min(a for a, _, _ in every), max(b for _, b, _ in every)
    # the grid: the engine's own interval (the median span it reported; its last
    # one is often a stub), at least 50 ms
    width = max(0.05, sorted(b - a for a, b, _ in every)[len(every) // 2])
    n = max(1, round((t1 - t0) / width))
    edges = [i * width for i in range(n + 1)]
    panels = 1 + bool(cpu) + bool(counts)
    plt = pyplot()
    fig, axes = plt.subplots(panels, 1, figsize=(8.5, 1.9 * panels + 0.6), dpi=90, sharex=True, squeeze=False)
    ax = axes[0][0]
    for label, spans in sorted(thr.items()):
        ax.stairs([x * 8 / 1e9 for x in _binned(spans, t0, width, n)], edges, label=label, linewidth=1.2)
    for w0, w1 in windows:
        ax.axvspan(w0 - t0, w1 - t0, color="#999", alpha=0.15, lw=0)
    ax.set_ylabel("Gbit/s")
    ax.set_title(title + (" (shaded: the window its figure is summed on)" if windows else ""), fontsize=9)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ax.set_ylim(bottom=0)
    i = 1
    if cpu:
        cax = axes[i][0]
        i += 1
        hosts = sorted({h for h, _ in cpu})
        bottom = [0.0] * n
        for h in hosts:
            for state in CPU_BUSY:
                series = cpu.get((h, state))
                if not series:
                    continue
                top = [b + x for b, x in zip(bottom, _binned(series, t0, width, n), strict=True)]
                cax.stairs(top, edges, baseline=bottom, fill=True, alpha=0.85, color=STATE_COLOURS.get(state),
                           label=state + (f" ({h})" if len(hosts) > 1 else ""))
                bottom = top
        cax.set_ylabel("cores busy")
        cax.set_ylim(bottom=0)
        cax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    if counts:
        kax = axes[i][0]
        for label, spans in sorted(counts.items()):
            kax.stairs([x * width for x in _binned(spans, t0, width, n)], edges, label=label)
        kax.set_ylabel(f"per {width:.2g} s")
        kax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    axes[-1][0].set_xlabel("seconds from the trial's first interval")
    # fixed margins (legends to the right): tight_layout would draw the figure once more
    fig.subplots_adjust(left=0.08, right=0.72, top=0.93, bottom=0.25 / panels + 0.02, hspace=0.12)
    png = out / f"{stem}.png"
    fig.savefig(png)
    plt.close(fig)
    return png


def _windows(t: TrialHead) -> list[tuple[float, float]]:
    """The window(s) a trial's figure was summed on, where its study keeps them."""
    receiver = getattr(t, "receiver", None)
    if isinstance(receiver, dict) and receiver:
        return sorted({a.window for a in receiver.values()})
    w = getattr(t, "window", None)
    return [w] if isinstance(w, tuple) and len(w) == 2 else []


def timeline_stem(point: str) -> str:
    """The file name (less .png) of a point's timeline: the key made file-safe."""
    return "timeline-" + "".join(c if c.isalnum() or c in "-." else "_" for c in point)


def point_timelines(view: RunView, out: Path) -> dict[str, str]:
    """One timeline per point (its first ok repeat, else its first partial,
    else its first), into ``out``: point -> PNG file name."""
    chosen: dict[str, TrialHead] = {}
    rank = {"ok": 0, "partial": 1}
    for t in view.trials:
        have = chosen.get(t.point)
        if have is None or rank.get(t.status, 2) < rank.get(have.status, 2):
            chosen[t.point] = t
    files = {}
    for point, t in chosen.items():
        stem = timeline_stem(point)
        png = draw(view.samples.get(t.trial_id, []), out, stem,
                   f"{point}, repeat {t.repeat + 1} ({t.status})", _windows(t))
        if png is not None:
            files[point] = png.name
    return files
