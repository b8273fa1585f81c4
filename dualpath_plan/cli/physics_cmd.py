"""``dualpath-plan ratio`` and ``dualpath-plan trend``."""

from __future__ import annotations

import math
from typing import Annotated

import numpy as np
import typer

from dualpath_plan.cli.common import (
    JsonOpt,
    ProfilesOpt,
    SetOpt,
    load_registry,
    parse_token_counts,
    print_json,
    stdout,
)
from dualpath_plan.errors import PlanInputError
from dualpath_plan.formatting import plain
from dualpath_plan.physics import model as phys
from dualpath_plan.physics.trend import trend
from dualpath_plan.physics.workload import context_window_limit, workload_demand
from dualpath_plan.profiles.schemas import MAX_MAGNITUDE, GpuProfile
from dualpath_plan.reports import physics as report
from dualpath_plan.scenario.spec import DEFAULT_SPEC

# The paper's Table 1 turn: 429 appended tokens over 16K, 32K and 64K of cached context.
DEFAULT_APPEND = 429.0
DEFAULT_CONTEXT = "16K,32K,64K"


def ratio(
    model: Annotated[
        str | None,
        typer.Option("--model", help="Model profile id (--model or --workload is required)."),
    ] = None,
    workload: Annotated[
        str | None,
        typer.Option(
            "--workload",
            help="Workload profile: its turns' mean ratio (with --model, else "
            f"{DEFAULT_SPEC.model}).",
        ),
    ] = None,
    append: Annotated[
        float | None,
        typer.Option(
            "--append",
            help=f"Appended tokens per turn (default {plain(DEFAULT_APPEND)}; not with "
            "--workload).",
            show_default=False,
        ),
    ] = None,
    context: Annotated[
        str | None,
        typer.Option(
            "--context",
            help=f"Cached context tokens, a comma list, K = 1024 (default {DEFAULT_CONTEXT}; "
            "not with --workload).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Cache-compute ratio in GB/PFLOP (paper Table 1): KV bytes loaded for a turn over the
    FLOPs of prefilling its appended tokens (GB = 1e9 B, PFLOP = 1e15 FLOP)."""
    registry = load_registry(profiles, set_)
    if model is None and workload is None:
        # (--workload alone runs, on the default model: the message said --model was needed)
        raise PlanInputError(
            f"give --model, --workload or both (--workload alone: on {DEFAULT_SPEC.model})",
            field="--model",
        )
    m = registry.model(model or DEFAULT_SPEC.model)
    rows = []
    if workload is not None and (append is not None or context is not None):
        # The workload's turns set both: a --context or --append beside it was ignored.
        raise PlanInputError(
            "--workload gives its turns' context and appended tokens; give either --workload "
            "or --context/--append",
            field="--context" if context is not None else "--append",
        )
    if workload is not None:
        w = registry.workload(workload)
        demand = workload_demand(m, w, registry.origins[("workload", w.id)])
        rows.append(
            {
                "model": m.id,
                "workload": w.id,
                "context_tokens": demand.mean(demand.context_tokens)
                - demand.mean(demand.append_tokens),
                "append_tokens": demand.mean(demand.append_tokens),
                "gb_per_pflop": demand.gb_per_pflop,
            }
        )
    else:
        append = DEFAULT_APPEND if append is None else append
        context = DEFAULT_CONTEXT if context is None else context
        if not (math.isfinite(append) and 1 <= append <= MAX_MAGNITUDE):
            raise PlanInputError(
                f"expected a number of tokens from 1 to {MAX_MAGNITUDE:g}, got {append!r}",
                field="--append",
            )
        ctx = np.array(parse_token_counts(context, "--context"))
        # A turn's prompt (its cached context and its appended tokens) within the model's
        # window, as size requires of a workload.
        longest = float(ctx.max()) + append if ctx.size else 0.0
        if m.context_window_tokens is not None and longest > m.context_window_tokens:
            raise PlanInputError(
                f"context {float(ctx.max()):,.0f} + appended {append:,.0f} tokens exceeds "
                f"{context_window_limit(m)}",
                field="--context",
            )
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
    else:
        report.render_ratio(m, rows, stdout)


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
    if base not in registry.ids("gpu"):
        raise PlanInputError(
            f"unknown gpu profile {base!r}; known: {', '.join(registry.ids('gpu'))}",
            field="--base",
        )
    base_gpu = registry.gpu(base)
    rows = trend([g for g in gpus if isinstance(g, GpuProfile)], base_gpu, dtype)  # type: ignore[arg-type]
    if as_json:
        print_json({"base": base, "dtype": dtype, "rows": [r.__dict__ for r in rows]})
    else:
        report.render_trend(rows, base, dtype, stdout)


def register(app: typer.Typer) -> None:
    app.command("ratio")(ratio)
    app.command("trend")(trend_cmd)
