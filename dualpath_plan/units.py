"""Unit conversions. One convention everywhere: GB = 1e9 B, TB = 1e12 B, Gb = 1e9 bit,
TFLOPS = 1e12 FLOP/s, PFLOP = 1e15 FLOP (hardware-and-models.md, "Conventions")."""

from __future__ import annotations

BYTES_PER_GBYTE = 1e9
BYTES_PER_TBYTE = 1e12
BITS_PER_BYTE = 8.0
FLOP_PER_TFLOP = 1e12
FLOP_PER_PFLOP = 1e15


def gbit_s_to_byte_s(gbit_s: float) -> float:
    """Line rate in Gb/s to B/s (400 Gb/s = 50 GB/s, before protocol overhead)."""
    return gbit_s * 1e9 / BITS_PER_BYTE


def gbyte_s_to_byte_s(gbyte_s: float) -> float:
    return gbyte_s * BYTES_PER_GBYTE


def tbyte_s_to_byte_s(tbyte_s: float) -> float:
    return tbyte_s * BYTES_PER_TBYTE


def tflops_to_flop_s(tflops: float) -> float:
    return tflops * FLOP_PER_TFLOP
