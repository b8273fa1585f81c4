"""The ``engine`` report: one pass or step, operator by operator."""

from __future__ import annotations

from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dualpath_plan.formatting import plain
from dualpath_plan.outcomes.engine import EngineResult
from dualpath_plan.physics.operators import BOUNDS, CATEGORIES


def _ms(seconds: float) -> str:
    ms = seconds * 1e3
    if ms >= 100:
        return f"{ms:,.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    return f"{ms:.3f}" if ms < 1 else f"{ms:.2f}"


def _headline(r: EngineResult) -> str:
    q = r.query
    t = r.time_s
    # No measured curves in force: a lower bound, not a prediction (the efficiencies line
    # says why); size on such a node uses the node's own roofline calibration.
    bound = "at least " if r.engine is None or q.speed_of_light else ""
    replica = f"{r.sequences:,.0f} request{'s' if r.sequences != 1 else ''} per replica"
    if q.phase == "prefill":
        cached = q.context_tokens - r.new_tokens
        return (
            f"prefill pass {bound}{t * 1e3:,.1f} ms: batch {q.batch} per attention-DP rank "
            f"({replica}), "
            f"{r.new_tokens:,.0f} new tokens each after {cached:,.0f} cached; "
            f"{r.tokens_per_s:,.0f} tokens/s per replica. A request's TTFT is this pass "
            "(its KV read and queueing aside)."
        )
    return (
        f"decode step {bound}{t * 1e3:,.2f} ms = TPOT: batch {q.batch} per attention-DP rank "
        f"({replica}) attending {r.attended_tokens:,.0f} tokens each; "
        f"{r.tokens_per_s:,.0f} tokens/s per replica"
    )


def render_engine(r: EngineResult, console: Console) -> None:
    gpus = float(np.max(r.layout.gpus))
    console.print(
        escape(
            f"{r.model.id} on {r.node.id} ({r.gpu.id}), {r.query.phase}, "
            f"{r.layout.describe()} ({plain(gpus)} GPU{'s' if gpus != 1 else ''} per replica)"
        )
    )
    console.print(escape(_headline(r)))
    table = Table()
    for col, justify in (
        ("operator", "left"),
        ("category", "left"),
        ("ms", "right"),
        ("share", "right"),
        ("bound", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    total = r.time_s
    for o in sorted(r.timing.operators, key=lambda o: -float(o.time_s)):
        t = float(o.time_s)
        table.add_row(o.name, o.category, _ms(t), f"{t / total:.0%}", BOUNDS[int(o.bound)])
    console.print(table)
    parts = r.timing.by_category()
    console.print(
        "by category: "
        + ", ".join(f"{c} {_ms(float(parts[c]))} ms" for c in CATEGORIES if float(parts[c]) > 0)
    )
    console.print(
        f"memory per GPU: weights {r.weight_gbyte_per_gpu:,.1f} GB, KV "
        f"{r.kv_gbyte_per_gpu:,.2f} GB of {plain(r.gpu.hbm_gbyte)} GB"
    )
    console.print(
        "bound: flops (FLOPs at the curve's efficiency for the shape), hbm (bytes at its "
        "memory efficiency), latency (the launch cost is more than the roofline)"
    )
    for note in r.timing.notes:
        console.print(escape(note))
    console.print(escape(r.efficiencies))


def engine_json(r: EngineResult) -> dict[str, Any]:
    q = r.query
    parts = r.timing.by_category()
    out: dict[str, Any] = {
        "model": r.model.id,
        "node": r.node.id,
        "gpu": r.gpu.id,
        "engine": r.engine.id if r.engine is not None else None,
        "speed_of_light": q.speed_of_light,
        "phase": q.phase,
        "layout": {
            "tp": r.layout.tp,
            "dp": float(np.max(r.layout.dp)),
            "ep": float(np.max(r.layout.ep)),
            "moe_tp": r.layout.moe_tp_scalar,
            "gpus": float(np.max(r.layout.gpus)),
        },
        "batch_per_rank": q.batch,
        "requests_per_replica": r.sequences,
        "context_tokens": q.context_tokens,
        "new_tokens": r.new_tokens,
        "attended_tokens": r.attended_tokens,
        "time_s": r.time_s,
        "tokens_per_s": r.tokens_per_s,
        "operators": [
            {
                "name": o.name,
                "category": o.category,
                "time_s": float(o.time_s),
                "bound": BOUNDS[int(o.bound)],
            }
            for o in r.timing.operators
        ],
        "categories_s": {c: float(parts[c]) for c in CATEGORIES},
        "weight_gbyte_per_gpu": r.weight_gbyte_per_gpu,
        "kv_gbyte_per_gpu": r.kv_gbyte_per_gpu,
        "efficiencies": r.efficiencies,
        "notes": list(r.timing.notes),
    }
    if q.phase == "decode":
        out["tpot_s"] = r.time_s
    return out
