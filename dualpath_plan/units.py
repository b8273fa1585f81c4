"""Unit conversions. One convention everywhere: GB = 1e9 B, TB = 1e12 B, Gb = 1e9 bit,
TFLOPS = 1e12 FLOP/s, PFLOP = 1e15 FLOP (hardware-and-models.md, "Conventions"); the code
writes these powers of ten where it converts a field named in those units."""

from __future__ import annotations

import re

BITS_PER_BYTE = 8.0


def gbit_s_to_byte_s(gbit_s: float) -> float:
    """Line rate in Gb/s to B/s (400 Gb/s = 50 GB/s, before protocol overhead)."""
    return gbit_s * 1e9 / BITS_PER_BYTE


def shares(weights: list[float]) -> list[float]:
    """Positive finite weights as shares of their sum (phases, workload classes). Weights whose
    sum overflows (1e308 each) are first taken relative to the largest: their shares, not 0."""
    total = sum(weights)
    if total == float("inf"):
        top = max(weights)
        weights = [w / top for w in weights]
        total = sum(weights)
    return [w / total for w in weights]


# Decimal and binary byte units of a capacity typed with its unit (``--tiers ssd:2TB``,
# ``--storage-capacity 500TB``): one table for every flag that takes bytes.
BYTE_UNITS = {
    "B": 1.0,
    "KB": 1e3,
    "MB": 1e6,
    "GB": 1e9,
    "TB": 1e12,
    "PB": 1e15,
    "KIB": 2.0**10,
    "MIB": 2.0**20,
    "GIB": 2.0**30,
    "TIB": 2.0**40,
    "PIB": 2.0**50,
}
# The least size a capacity flag takes (--storage-capacity, --tiers): a byte (less is a slip, and
# was planned as an empty store).
MIN_BYTES = 1.0
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]+)\s*")


def parse_bytes(text: str) -> float | None:
    """``500TB``, ``1.5 PiB``, ``64GB``: bytes (the unit required, case-insensitive: a bare
    number says nothing of its unit), or None when ``text`` is not such a size."""
    match = _SIZE.fullmatch(text)
    if match is None or match.group(2).upper() not in BYTE_UNITS:
        return None
    return float(match.group(1)) * BYTE_UNITS[match.group(2).upper()]
