"""The ``ratio`` and ``trend`` reports: terminal rendering (their JSON is the rows as they are)."""

from __future__ import annotations

import math
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dualpath_plan.physics import model as phys
from dualpath_plan.physics.trend import TrendRow
from dualpath_plan.profiles.schemas import ModelProfile


def render_ratio(m: ModelProfile, rows: list[dict[str, Any]], console: Console) -> None:
    table = Table(title=escape(f"Cache-compute ratio, {m.name}"))
    for col in ("context tokens", "append tokens", "GB/PFLOP"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            f"{r['context_tokens']:,.0f}", f"{r['append_tokens']:,.0f}", f"{r['gb_per_pflop']:.1f}"
        )
    console.print(table)
    console.print(
        f"KV bytes per token {phys.kv_bytes_per_token(m):,.0f} B "
        f"({m.kv_cache_dtype}{', indexer cache loaded' if m.indexer_cache_loaded else ''})"
    )


def _bar(x: float, width: int = 30) -> str:
    """A log-scale bar: one cell per factor of 2^(1/2) from 1/8x to 64x."""
    cells = round((math.log2(max(x, 1 / 8)) + 3) * 2)
    return "█" * max(1, min(cells, width))


def render_trend(rows: list[TrendRow], base: str, dtype: str, console: Console) -> None:
    table = Table(title=f"Hardware trend vs {base} (dense {dtype} FLOPS, raw PCIe per direction)")
    for col in (
        "gpu",
        "year",
        "dtype",
        "TFLOPS",
        "FLOPS x",
        "PCIe x",
        "HBM GB x",
        "HBM BW x",
        "I/O:FLOP falls",
    ):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            r.gpu,
            str(r.release_year),
            r.dtype,
            f"{r.dense_tflops:,.0f}",
            f"{r.flops_x:.1f}",
            f"{r.pcie_x:.1f}",
            f"{r.hbm_capacity_x:.2f}",
            f"{r.hbm_bandwidth_x:.1f}",
            f"{1 / r.io_to_compute_x:.1f}x",
        )
    console.print(table)
    console.print("\nFLOPS (█) and I/O-to-compute (░) relative to the base, log scale:")
    for r in rows:
        console.print(f"{r.gpu:>14} {_bar(r.flops_x):<30} {r.flops_x:6.1f}x")
        console.print(
            f"{'':>14} {'░' * len(_bar(r.io_to_compute_x)):<30} {r.io_to_compute_x:6.3f}x"
        )
    console.print(
        "\nThe paper's 28.8x / 2x / 2.4x / 14.4x is a100-sxm-80gb BF16 vs b200 FP4 "
        "(mixed dtypes, --dtype best); like for like (--dtype bf16) FLOPS grow 7.2x and "
        "I/O-to-compute falls 3.6x."
    )
