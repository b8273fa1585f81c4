"""The ``workload import`` report: the trace's summary as JSON and as a table."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dualpath_plan.formatting import duration, number
from dualpath_plan.outcomes.workload_import import ImportResult
from dualpath_plan.physics.traces import GroupStats


def import_payload(result: ImportResult) -> dict[str, Any]:
    s = result.summary
    return {
        "format": s.format,
        "files": list(s.sources),
        "block_size": s.block_size,
        **asdict(s.all),
        "turns_per_session": {
            "mean": s.turns_mean,
            "p50": s.turns_p50,
            "p90": s.turns_p90,
            "max": s.turns_max,
        },
        "longest_request_tokens": s.longest_request_tokens,
        "arrival_rate_per_s": s.arrival_rate_per_s,
        "arrival_cv": s.arrival_cv,
        "span_s": s.span_s,
        "main_agents": asdict(s.main) if s.main else None,
        "subagents": asdict(s.subagents) if s.subagents else None,
        "notes": list(s.notes),
        "workload": result.profile.id,
        "written": list(result.written),
    }


def _group_row(name: str, g: GroupStats) -> tuple[str, ...]:
    return (
        name,
        f"{g.requests:,}",
        f"{g.sessions:,}",
        f"{g.hit_rate:.1%}",
        f"{g.mean_context_tokens:,.0f}",
        f"{g.mean_append_tokens:,.0f}",
        f"{g.mean_generated_tokens:,.0f}",
    )


def render_import(result: ImportResult, console: Console) -> None:
    s = result.summary
    files = ", ".join(s.sources[:3]) + (
        f" and {len(s.sources) - 3} more" if len(s.sources) > 3 else ""
    )
    block = f", {s.block_size}-token hash blocks" if s.block_size else ""
    console.print(escape(f"{s.format} trace {files}{block}"))
    table = Table()
    for col in ("", "requests", "sessions", "hit rate", "context", "appended", "generated"):
        table.add_column(col, justify="left" if not col else "right")
    table.add_row(*_group_row("all", s.all))
    if s.main is not None and s.subagents is not None:
        table.add_row(*_group_row("main agents", s.main))
        table.add_row(*_group_row("sub-agents", s.subagents))
    console.print(table)
    console.print(
        f"turns per session: mean {number(s.turns_mean)}, p50 {s.turns_p50:,.0f}, "
        f"p90 {s.turns_p90:,.0f}, max {s.turns_max:,}"
    )
    console.print(
        "context: the cached (hit) tokens a turn re-reads; appended = input - hit; "
        "generated = output (means per request)"
    )
    if s.arrival_rate_per_s is not None and s.arrival_cv is not None:
        console.print(
            f"arrivals: {number(s.arrival_rate_per_s, 4)} requests/s over "
            f"{duration(s.span_s if s.span_s is not None else math.nan)}, "
            f"gaps' coefficient of variation {number(s.arrival_cv)} "
            "(1 = Poisson)"
        )
    else:
        console.print(
            escape(f"arrivals: not derived ({s.no_rate_because}); the profile keeps arrival_cv 1.0")
        )
    for note in s.notes:
        console.print(escape(f"note: {note}"))
    if result.written:
        console.print(escape(f"wrote {', '.join(result.written)} (workload '{result.profile.id}')"))
    else:
        console.print("nothing written (give --out DIR for the profile and the normalized trace)")
