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
