"""Damaged variants of a real tool output, for parsers that must raise only
nicbench's own errors, in bounded time (issue 21): truncation at (sampled)
offsets, bit flips, NaN/Infinity/1e308 in place of numbers, duplicate keys,
10k-deep nesting and 2 MB lines."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

BAD_NUMBERS = ("NaN", "Infinity", "-Infinity", "1e308", "-1e308", "-nan", "nan", "1e999", "-1", "\"x\"", "null")


def replace_numbers(text: str, bad: str, rng: random.Random) -> str:
    nums = list(re.finditer(r"(?<![\w.])\d+(?:\.\d+)?", text))
    out = text
    for m in sorted(rng.sample(nums, min(5, len(nums))), key=lambda m: -m.start()):
        out = out[:m.start()] + bad + out[m.end():]
    return out


def variants(text: str, rng: random.Random, cuts: int = 150, flips: int = 60) -> Iterator[str]:
    n = len(text)
    step = max(1, n // cuts)
    for cut in range(0, n, step):
        yield text[:cut]
    b = bytearray(text.encode())
    for _ in range(flips if b else 0):
        c = bytearray(b)
        i = rng.randrange(len(c))
        c[i] ^= 1 << rng.randrange(8)
        yield c.decode("utf-8", "replace")
    for bad in BAD_NUMBERS:
        yield replace_numbers(text, bad, rng)
    yield text.replace("{", '{"start": {}, "start": 1, ', 3)
    yield "{" * 10_000 + "}" * 10_000
    yield "[" * 10_000 + "]" * 10_000
    yield '{"start": ' * 10_000
    yield "x" * 2_000_000
    yield text + "\n" + "1" * 2_000_000
