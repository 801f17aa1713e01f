"""Was kernel TLS used?  Decided from /proc/net/tls_stat, never from the configuration.

OpenSSL asked for kTLS (``ssl_conf_command Options KTLS``) tries
``setsockopt(TCP_ULP, "tls")`` and silently falls back to userspace TLS when
the kernel says no; nginx logs nothing.  The per-namespace counters of the
kernel's TLS module are the only evidence: sessions opened with host crypto
(``TlsTxSw``) or with the NIC's (``TlsTxDevice``) during the point.
"""

from __future__ import annotations


def parse_tls_stat(text: str) -> dict[str, int]:
    """``{"TlsTxSw": 12, ...}`` from the kernel's ``name<TAB>value`` lines."""
    out = {}
    for line in text.splitlines():
        f = line.split()
        if len(f) == 2 and f[1].isdigit():
            out[f[0]] = int(f[1])
    return out


def verdict(scheme: str, before: dict[str, int] | None, after: dict[str, int] | None, *,
            kernel_has_tls: bool = False, why: str = "") -> str:
    """One sentence from the evidence.  ``before``/``after`` are None when
    /proc/net/tls_stat could not be read; whether that means "no TLS in this
    kernel" or "unknown" is decided by ``kernel_has_tls`` (checked at preflight)."""
    if scheme != "https":
        return "n/a (plain HTTP)"
    if before is None or after is None:
        if kernel_has_tls:
            return "unknown (the TLS counters could not be read during the point)"
        return f"not in use (kernel has no TLS: {why or '/proc/net/tls_stat is absent'})"

    def delta(k: str) -> int:
        return max(0, after.get(k, 0) - before.get(k, 0))
    dev, sw = delta("TlsTxDevice"), delta("TlsTxSw")
    if dev and sw:
        return f"mixed: NIC offload for {dev} sessions, software kTLS for {sw}"
    if dev:
        return f"NIC offload ({dev} TX sessions with device crypto)"
    if sw:
        return f"software kTLS ({sw} TX sessions with kernel crypto)"
    return "not in use (the kernel has TLS, but no session used it: OpenSSL fell back to userspace TLS)"
