"""Was kernel TLS used on a FreeBSD server?  From ``sysctl kern.ipc.tls``.

FreeBSD's kTLS (sys/kern/uipc_ktls.c) counts the sessions set up
(``kern.ipc.tls.stats.offload_total``) and keeps gauges of the sessions
active in each mode (``kern.ipc.tls.{sw,ifnet,toe}.{cbc,gcm,chacha20}``):
software crypto in the kernel, NIC offload (ifnet), or TOE.  The gauges are
read before the point and while it runs (a session is gone once its
connection closes), and :func:`factparse_freebsd.ktls_evidence` decides.
Tested with fakes answering the sysctl names of uipc_ktls.c only: no
recorded output of a FreeBSD host using kTLS was found, and no FreeBSD host
has run it.
"""

from __future__ import annotations

import threading

from ...core.errors import NicbenchError
from ...hosts.factparse_freebsd import KtlsEvidence, ktls_evidence, parse_sysctl
from ...hosts.transport import Transport

_MODE = {"ifnet": "NIC offload (ifnet kTLS)", "sw": "software kTLS (kernel crypto)", "toe": "TOE offload"}


def kernel_tls(t: Transport) -> tuple[bool, str]:
    """Does this FreeBSD kernel offer kTLS, and is it enabled?"""
    try:
        r = t.run(["sysctl", "-n", "kern.ipc.tls.enable"], timeout=10)
    except NicbenchError as e:
        return False, e.message
    if r.returncode != 0:
        return False, "kern.ipc.tls.enable is absent: a kernel without 'options KERN_TLS'"
    on = r.stdout.strip() == "1"
    return on, f"kern.ipc.tls.enable = {r.stdout.strip()}" + ("" if on else " (sysctl kern.ipc.tls.enable=1 turns "
                                                                           "it on)")


def read(t: Transport) -> dict[str, str] | None:
    """``sysctl kern.ipc.tls`` as name -> value; None when it cannot be read."""
    try:
        r = t.run(["sysctl", "kern.ipc.tls"], timeout=10)
    except NicbenchError:
        return None
    return parse_sysctl(r.stdout) if r.returncode == 0 else None


class TlsDuringPoint:
    """The gauges before the point and ``at`` seconds into it (a thread, so
    the point's own waiting is not held up)."""

    def __init__(self, t: Transport):
        self.t = t
        self.before = read(t)
        self.during: dict[str, str] | None = None
        self._timer: threading.Timer | None = None

    def read_in(self, seconds: float) -> None:
        self._timer = threading.Timer(max(0.0, seconds), self._read)
        self._timer.daemon = True
        self._timer.start()

    def _read(self) -> None:
        self.during = read(self.t)

    def evidence(self) -> KtlsEvidence:
        if self._timer is not None:
            self._timer.join(timeout=15)
        return ktls_evidence(self.before or {}, self.during or {})


def verdict(scheme: str, ev: KtlsEvidence, *, kernel_has_tls: bool, why: str) -> str:
    """One sentence, as the Linux verdict (``tools.ktls.verdict``) words it."""
    if scheme != "https":
        return "n/a (plain HTTP)"
    if not kernel_has_tls:
        return f"not in use (kernel kTLS off: {why})"
    if ev.mode == "none":
        return f"not in use (the kernel has kTLS, but no session used it: {ev.detail})"
    if ev.mode == "unknown":
        return f"unknown ({ev.detail})"
    return f"{_MODE.get(ev.mode, ev.mode)}: {ev.detail}"
