"""``dualpath-plan ratio`` and ``dualpath-plan trend``."""

from __future__ import annotations

import math
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from dualpath_plan.cli.common import JsonOpt, ProfilesOpt, SetOpt, load_registry, print_json, stdout
from dualpath_plan.errors import PlanInputError
from dualpath_plan.physics import model as phys
from dualpath_plan.physics.trend import trend
from dualpath_plan.physics.workload import workload_demand
from dualpath_plan.profiles.schemas import GpuProfile


def _parse_tokens(text: str, name: str) -> list[float]:
    """'16384,32768' or '16K,64K' -> token counts (K = 1024)."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        scale = 1.0
        if part[-1] in "kK":
            scale, part = 1024.0, part[:-1]
        try:
            value = float(part) * scale
        except ValueError:
            raise PlanInputError(
                f"expected token counts like 16384 or 16K, got {text!r}", field=name
            ) from None
        if not (math.isfinite(value) and value > 0):
            raise PlanInputError(f"expected token counts > 0, got {text!r}", field=name)
        out.append(value)
    if not out:
        raise PlanInputError("expected at least one token count", field=name)
    return out


def ratio(
    model: Annotated[str | None, typer.Option("--model", help="Model profile id.")] = None,
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload",
            help="Workload profile: its turns' mean ratio (needs --model or uses deepseek-v3.2).",
        ),
    ] = None,
    append: Annotated[float, typer.Option("--append", help="Appended tokens per turn.")] = 429,
    context: Annotated[
        str, typer.Option("--context", help="Cached context tokens, a comma list (K = 1024).")
    ] = "16K,32K,64K",
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Cache-compute ratio in GB/PFLOP (paper Table 1): KV bytes loaded for a turn over the
    FLOPs of prefilling its appended tokens (GB = 1e9 B, PFLOP = 1e15 FLOP)."""
    registry = load_registry(profiles, set_)
    if model is None and workload is None:
        raise PlanInputError("give --model (and optionally --workload)", field="--model")
    m = registry.model(model or "deepseek-v3.2")
    rows = []
    if workload is not None:
        w = registry.workload(workload)
        demand = workload_demand(m, w, registry.origins[("workload", w.id)])
        rows.append(
            {
                "model": m.id,
                "workload": w.id,
                "context_tokens": demand.mean(demand.context_tokens) - w.append_tokens,
                "append_tokens": w.append_tokens,
                "gb_per_pflop": demand.gb_per_pflop,
            }
        )
    else:
        if not (math.isfinite(append) and append > 0):
            raise PlanInputError(
                f"expected a number of tokens > 0, got {append!r}", field="--append"
            )
        ctx = np.array(_parse_tokens(context, "--context"))
        values = phys.cache_compute_ratio_gb_per_pflop(m, ctx, append)
        rows += [
            {
                "model": m.id,
                "context_tokens": float(c),
                "append_tokens": float(append),
                "gb_per_pflop": float(v),
            }
            for c, v in zip(ctx, values, strict=True)
        ]
    if as_json:
        print_json({"rows": rows})
        return
    table = Table(title=f"Cache-compute ratio, {m.name}")
    for col in ("context tokens", "append tokens", "GB/PFLOP"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(
            f"{r['context_tokens']:,.0f}", f"{r['append_tokens']:,.0f}", f"{r['gb_per_pflop']:.1f}"
        )
    stdout.print(table)
    stdout.print(
        f"KV bytes per token {phys.kv_bytes_per_token(m):,.0f} B "
        f"({m.kv_cache_dtype}{', indexer cache loaded' if m.indexer_cache_loaded else ''})"
    )


def _bar(x: float, width: int = 30) -> str:
    """A log-scale bar: one cell per factor of 2^(1/2) from 1/8x to 64x."""
    cells = round((math.log2(max(x, 1 / 8)) + 3) * 2)
    return "█" * max(1, min(cells, width))


def trend_cmd(
    dtype: Annotated[
        str,
        typer.Option(
            "--dtype", help="FLOPS dtype: bf16, fp8, fp4 or best (each GPU's lowest precision)."
        ),
    ] = "best",
    base: Annotated[
        str, typer.Option("--base", help="GPU the factors are relative to.")
    ] = "a100-sxm-80gb",
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Hardware trend per GPU (paper Figure 3 left): FLOPS, PCIe, HBM capacity and bandwidth,
    and I/O-to-compute, each relative to --base. The plot is drawn in the terminal (log bars)."""
    if dtype not in ("bf16", "fp8", "fp4", "best"):
        raise PlanInputError(f"expected bf16, fp8, fp4 or best, got {dtype!r}", field="--dtype")
    registry = load_registry(profiles, set_)
    gpus = [registry.gpu(i) for i in registry.ids("gpu")]
    base_gpu = registry.gpu(base)
    rows = trend([g for g in gpus if isinstance(g, GpuProfile)], base_gpu, dtype)  # type: ignore[arg-type]
    if as_json:
        print_json({"base": base, "dtype": dtype, "rows": [r.__dict__ for r in rows]})
        return
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
    stdout.print(table)
    stdout.print("\nFLOPS (█) and I/O-to-compute (░) relative to the base, log scale:")
    for r in rows:
        stdout.print(f"{r.gpu:>14} {_bar(r.flops_x):<30} {r.flops_x:6.1f}x")
        stdout.print(f"{'':>14} {'░' * len(_bar(r.io_to_compute_x)):<30} {r.io_to_compute_x:6.3f}x")
    stdout.print(
        "\nThe paper's 28.8x / 2x / 2.4x / 14.4x is a100-sxm-80gb BF16 vs b200 FP4 "
        "(mixed dtypes, --dtype best); like for like (--dtype bf16) FLOPS grow 7.2x and "
        "I/O-to-compute falls 3.6x."
    )


def register(app: typer.Typer) -> None:
    app.command("ratio")(ratio)
    app.command("trend")(trend_cmd)
