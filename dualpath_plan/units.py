"""Unit conversions. One convention everywhere: GB = 1e9 B, TB = 1e12 B, Gb = 1e9 bit,
TFLOPS = 1e12 FLOP/s, PFLOP = 1e15 FLOP (hardware-and-models.md, "Conventions"); the code
writes these powers of ten where it converts a field named in those units."""

from __future__ import annotations

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
