"""Sample interface counters on a host during a point, at a fixed interval.

Runs in a thread beside the point; every read is one file read through the
host's Transport (``/proc/PID/net/dev`` of a process in the host's network
namespace: no process is spawned per sample).  Produces deltas as Samples.
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from ..hosts.transport import Transport
from ..records import Sample, make_tags
from .netdev import delta, parse_net_dev

# interface counters seen from the study server: tx = server sends = study "tx"
DIRECTION = {"tx": "tx", "rx": "rx"}


class CounterSampler:
    def __init__(self, transport: Transport, pids: Callable[[], list[int]], *, host: str, ifname: str,
                 trial_id: str, interval: float):
        """``pids``: processes living in the host's network namespace (any one will do)."""
        self.t, self.pids, self.host, self.ifname = transport, pids, host, ifname
        self.trial_id, self.interval = trial_id, interval
        self.reads: list[tuple[float, dict[str, int]]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"counters-{host}", daemon=True)

    def read(self) -> None:
        """One read, stamped at its midpoint.  Through a process of the host's
        namespace when one lives (a file read), else through the transport
        (``cat`` inside the namespace: the last read, after the tools exit)."""
        text = None
        t0 = time.time()
        for pid in self.pids():
            try:
                text = self.t.read_text(f"/proc/{pid}/net/dev")
                break
            except OSError:
                continue      # that process has exited: try the next
        if text is None:
            t0 = time.time()
            try:
                text = self.t.read_text("/proc/net/dev")
            except OSError:
                return
        ts = (t0 + time.time()) / 2
        c = parse_net_dev(text).get(self.ifname)
        if c is not None:
            with self._lock:
                self.reads.append((ts, c.values))

    def _loop(self) -> None:
        nxt = time.monotonic()
        while not self._stop.is_set():
            try:
                self.read()
            except Exception:  # noqa: BLE001 - a sampler error must not kill the thread
                pass
            nxt += self.interval
            self._stop.wait(max(0.0, nxt - time.monotonic()))

    def start(self) -> "CounterSampler":
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.samples()

    def samples(self) -> list[Sample]:
        with self._lock:
            reads = sorted(self.reads, key=lambda r: r[0])
        out = []
        for (t0, a), (t1, b) in zip(reads, reads[1:]):
            if t1 <= t0:
                continue
            for d in ("tx", "rx"):
                for what, unit in (("bytes", "bytes"), ("packets", "packets")):
                    v = delta(a.get(f"{d}_{what}", 0), b.get(f"{d}_{what}", 0))
                    if v is None:
                        continue
                    out.append(Sample(self.trial_id, f"if.{what}", float(v), unit, t0, t1,  # type: ignore[arg-type]
                                      make_tags(host=self.host, ifname=self.ifname, direction=DIRECTION[d])))
        return out
