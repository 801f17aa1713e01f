"""Units: one documented meaning for every size and rate string.

Sizes (IO size, socket buffers) are **binary**, as iperf's ``-l``/``-w`` and
fio's ``bs`` read them: ``"512"`` = 512 B, ``"4K"`` = ``"4k"`` = ``"4KiB"`` =
4096 B, ``"1M"`` = 1 MiB.  ``"8kB"``, ``"8KB"``, ``"1MB"`` are refused: SI
reads kB as 1000 bytes, JEDEC and many tools as 1024, and a silently wrong IO
size is a wrong result; the error says which spelling means which.
Rates are **decimal** bits per second, as link speeds are sold:
``"10G"`` = 10 * 10^9 bit/s.  Gbps in reports is 10^9 bit/s.
"""

from __future__ import annotations

import re

# K/M/G in either case, then optionally "iB" (binary, unambiguous); a bare
# number may end in "B".  "kB"/"MB" (a multiple then "B" without the "i") is
# ambiguous and refused below; a lowercase b means bits ("10 Gb" is a rate).
_SIZE_RE = re.compile(r"^\s*(\d+)\s*(?:([KMGkmg])(iB)?|B)?\s*$")
_AMBIGUOUS_RE = re.compile(r"^\s*(\d+)\s*([KMGkmg])B\s*$")
_SIZE_MULT = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


class UnitError(ValueError):
    """A value that does not parse; the message says what is allowed."""


def parse_size(value: str | int) -> int:
    """Bytes from ``512``, ``"512B"``, ``"4K"``, ``"4KiB"``, ``"1M"`` (binary multiples);
    ``"4kB"``/``"4KB"`` is refused as ambiguous, naming both readings."""
    if isinstance(value, bool):
        raise UnitError("a size must be a number of bytes or a string like '4K'")
    if isinstance(value, int):
        n = value
    else:
        amb = _AMBIGUOUS_RE.match(str(value))
        if amb:
            num, unit = int(amb.group(1)), amb.group(2).upper()
            si = num * 1000 ** (" KMG".index(unit))
            raise UnitError(
                f"{value!r} is ambiguous (kB/MB/GB mean 1000-multiples in SI, 1024-multiples in many tools): "
                f"write {num}{unit} or {num}{unit}iB for {num * _SIZE_MULT[unit]} bytes (binary, as iperf and fio "
                f"read sizes), or {si} for {si} bytes")
        m = _SIZE_RE.match(str(value))
        if not m:
            bits = " ('b' means bits; sizes are bytes)" if re.search(r"\db|[KMGkmg]b", str(value)) else ""
            raise UnitError(
                f"{value!r} is not a size{bits}; write bytes (512) or a binary multiple (4K, 64KiB, 1M)")
        n = int(m.group(1)) * _SIZE_MULT[(m.group(2) or "").upper()]
    if n <= 0:
        raise UnitError(f"size must be > 0 bytes, got {value!r}")
    return n


def format_size(n: int) -> str:
    """Shortest exact binary form: 512, 4K, 512K, 1M."""
    for suffix, mult in (("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if n % mult == 0:
            return f"{n // mult}{suffix}"
    return str(n)


def gbps(nbytes: float, seconds: float) -> float:
    """Decimal Gbit/s from bytes over seconds."""
    return nbytes * 8.0 / seconds / 1e9 if seconds > 0 else 0.0
