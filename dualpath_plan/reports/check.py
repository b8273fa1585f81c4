"""The ``check`` report: JSON payload and terminal rendering of every metric's change."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dualpath_plan.formatting import count, number, percent, trimmed_column
from dualpath_plan.validation.check import MetricDiff


def check_payload(diffs: list[MetricDiff], updated: bool, show_all: bool) -> dict[str, Any]:
    regressions = [d for d in diffs if d.regressed]
    return {
        "metrics": len(diffs),
        "regressions": len(regressions),
        "updated": updated,
        "changes": [
            {
                "scenario": d.scenario,
                "metric": d.metric,
                "baseline": d.baseline,
                "value": d.value,
                "rel_tol": d.rel_tol,
                "change": d.change if math.isfinite(d.change) else None,
                "direction": d.direction,
            }
            for d in (diffs if show_all else regressions)
        ],
    }


def _pair(baseline: float | str | None, now: float | str | None) -> list[str]:
    """A metric's recorded value and its value now, 8 significant digits (a change within a
    tolerance shows) and one precision for the two; "-" where there is none."""
    nums = [v for v in (baseline, now) if isinstance(v, int | float)]
    texts = iter(trimmed_column([float(v) for v in nums], 8))
    return ["-" if v is None else v if isinstance(v, str) else next(texts) for v in (baseline, now)]


def render_check(
    diffs: list[MetricDiff], baseline: Path, updated: bool, show_all: bool, console: Console
) -> None:
    regressions = [d for d in diffs if d.regressed]
    rows = diffs if show_all else ([] if updated else regressions)
    if rows:
        what = "all metrics" if show_all else "changed beyond tolerance"
        table = Table(title=escape(f"{what} vs {baseline}"))
        for col in ("scenario", "metric", "baseline", "now", "change", "tolerance", ""):
            table.add_column(col)
        for d in rows:
            table.add_row(
                escape(d.scenario),
                escape(d.metric),
                *map(escape, _pair(d.baseline, d.value)),
                percent(d.change, 3, sign=True) if math.isfinite(d.change) else "new/gone",
                number(d.rel_tol),
                f"[red]changed ({d.direction})[/red]" if d.regressed else "ok",
            )
        console.print(table)
    if updated:
        console.print(
            escape(f"{count(len(diffs), 'metric')} recorded in {baseline} ({len(regressions)} new ")
            + "or changed beyond tolerance)"
        )
    else:
        console.print(f"{count(len(diffs), 'metric')}, {len(regressions)} beyond tolerance")
        if regressions and all(d.baseline is None for d in regressions):
            # Nothing of these was ever recorded: a baseline to record, not a regression.
            console.print(
                escape(
                    f"none of these metrics is recorded in {baseline}: `dualpath-plan check "
                    f"{baseline} --update` records them"
                )
            )
