"""Numbers as a reader sees them, the same everywhere (HTML report, the run's
results table, compare): measured quantities to three significant figures
without dropping integer digits (9.41, 0.623, 12.3, 1183), counts as
integers (1198, never 1198.0), a dash for what is unknown.

Only what people read is rounded: the CSV and JSON exports keep full
precision in base units.
"""

from __future__ import annotations

import math

DASH = "—"


def num(x: object, digits: int = 3) -> str:
    """``x`` to ``digits`` significant figures, integer digits always kept."""
    if x is None or isinstance(x, bool):
        return DASH if x is None else str(x)
    if not isinstance(x, (int, float)):
        return str(x)
    v = float(x)
    if math.isnan(v) or math.isinf(v):
        return DASH if math.isnan(v) else str(v)
    if v == 0:
        return "0"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(v))))
    text = f"{v:.{decimals}f}"
    # 9.995 rounds up to 10.00: one decimal too many for three figures
    if decimals and len(text.lstrip("-").replace(".", "").lstrip("0")) > digits:
        text = f"{v:.{decimals - 1}f}"
    return text


def count(x: object) -> str:
    """A counter: a whole number, however it was stored."""
    if x is None or isinstance(x, bool):
        return DASH if x is None else str(x)
    if isinstance(x, (int, float)) and math.isfinite(float(x)):
        return str(int(round(float(x))))
    return str(x)


def whole(x: float | int | None) -> float | int | None:
    """A counter for the exports: an int when it is whole (1198, not 1198.0)."""
    if isinstance(x, float) and math.isfinite(x) and x.is_integer():
        return int(x)
    return x
