"""Interface counters from /proc/net/dev (pure parser).

Byte counters cover each frame from the Ethernet header to the end of the
payload; the wire also carries FCS 4 + preamble/SFD 8 + inter-frame gap 12 =
24 bytes per frame that no counter sees (see ``core.linerate``).  On a
veth with GSO on, ``packets`` counts 64 KB super-packets, not frames.
"""

from __future__ import annotations

from dataclasses import dataclass

_RX = ("rx_bytes", "rx_packets", "rx_errs", "rx_drop", "rx_fifo", "rx_frame", "rx_compressed", "rx_multicast")
_TX = ("tx_bytes", "tx_packets", "tx_errs", "tx_drop", "tx_fifo", "tx_colls", "tx_carrier", "tx_compressed")


@dataclass(frozen=True)
class IfCounters:
    name: str
    values: dict[str, int]

    def __getitem__(self, key: str) -> int:
        return self.values[key]


def parse_net_dev(text: str) -> dict[str, IfCounters]:
    """Every interface's counters; tolerates the missing columns of old kernels."""
    out: dict[str, IfCounters] = {}
    for line in text.splitlines():
        if ":" not in line or "|" in line:
            continue
        name, _, rest = line.partition(":")
        nums = rest.split()
        try:
            vals = [int(x) for x in nums]
        except ValueError:
            continue
        if len(vals) >= 16:
            keys: tuple[str, ...] = _RX + _TX
        elif len(vals) % 2 == 0 and len(vals) >= 4:   # old kernels: fewer columns, same split
            keys = _RX[:len(vals) // 2] + _TX[:len(vals) // 2]
        else:
            continue                                  # a layout we cannot split safely
        out[name.strip()] = IfCounters(name.strip(), dict(zip(keys, vals, strict=False)))
    return out


def delta(a: int, b: int, bits: int = 64) -> int | None:
    """b - a for a counter that may wrap at 2**bits; None if it went backwards
    by more than a wrap explains (the interface was reset)."""
    d = b - a
    if d >= 0:
        return d
    wrapped = d + (1 << bits)
    return wrapped if 0 <= wrapped < (1 << (bits - 1)) else None
