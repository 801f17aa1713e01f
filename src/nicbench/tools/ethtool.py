"""ethtool's text output (pure parsers), shared by host facts and tuning.

ethtool has no machine-readable output in Debian 12's 6.1 (``--json`` covers
only a few commands), so these read its stable ``key: value`` layout.
"""

from __future__ import annotations

import re


def colon_lines(text: str) -> dict[str, str]:
    """``key: value`` lines (``ethtool -i``, ``-c``)."""
    out = {}
    for line in text.splitlines():
        k, sep, v = line.partition(":")
        if sep:
            out[k.strip()] = v.strip()
    return out


def blocks(text: str) -> tuple[dict[str, str], dict[str, str]]:
    """(pre-set maximums, current settings) of ``ethtool -g`` / ``-l``."""
    mx: dict[str, str] = {}
    cur: dict[str, str] = {}
    target = None
    for line in text.splitlines():
        if line.startswith("Pre-set maximums"):
            target = mx
        elif line.startswith("Current hardware settings"):
            target = cur
        elif target is not None:
            k, sep, v = line.partition(":")
            if sep:
                target[k.strip()] = v.strip()
    return mx, cur


def features(text: str) -> dict[str, str]:
    """Top-level features of ``ethtool -k`` (``on``, ``off [fixed]``);
    indented sub-features are left out."""
    out = {}
    for line in text.splitlines():
        if not line or line[0].isspace() or line.startswith("Features for"):
            continue
        k, sep, v = line.partition(":")
        if sep and v.strip():
            out[k.strip()] = v.strip()
    return out


def adaptive(text: str) -> dict[str, str]:
    """``Adaptive RX: on  TX: off`` of ``ethtool -c``."""
    m = re.search(r"Adaptive RX:\s*(\S+)\s+TX:\s*(\S+)", text)
    return {"rx": m.group(1), "tx": m.group(2)} if m else {}


# -K short names -> the names -k prints
OFFLOAD_NAMES = {
    "gro": "generic-receive-offload", "gso": "generic-segmentation-offload",
    "tso": "tcp-segmentation-offload", "lro": "large-receive-offload", "sg": "scatter-gather",
    "rx": "rx-checksumming", "tx": "tx-checksumming", "rxhash": "receive-hashing",
    "ntuple": "ntuple-filters", "rx-gro-list": "rx-gro-list", "rx-udp-gro-forwarding": "rx-udp-gro-forwarding",
}
# -G/-L parameter -> the row name -g/-l print
BLOCK_ROWS = {"rx": "RX", "tx": "TX", "rx-jumbo": "RX Jumbo", "rx-mini": "RX Mini", "other": "Other",
              "combined": "Combined"}


def stats(text: str) -> dict[str, int]:
    """``ethtool -S IF``: counter name -> value, names as the driver prints
    them (bnxt's per-ring ``[0]: rx_discards`` keeps its ring prefix; the
    value is after the last colon).  A name printed twice (some drivers do)
    keeps both, the second as ``NAME#2``.  Blank lines and the
    ``NIC statistics:`` heading are skipped; any other line that is not
    ``name: integer`` is a ValueError naming it (output not understood),
    and so is an output with no counter at all."""
    out: dict[str, int] = {}
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s == "NIC statistics:":
            continue
        name, sep, value = s.rpartition(":")
        name, value = name.strip(), value.strip()
        if not sep or not name or not re.fullmatch(r"\d+", value):
            raise ValueError(f"ethtool -S line {n} is not 'name: count': {s[:80]!r}")
        key, k = name, 1
        while key in out:
            k += 1
            key = f"{name}#{k}"
        out[key] = int(value)
    if not out:
        raise ValueError("ethtool -S printed no counters")
    return out
