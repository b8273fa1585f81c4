"""The ``sweep`` report: every point to CSV or JSON Lines (through a temporary file), the
summary as JSON or a table."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path
from typing import IO, Any

import numpy as np
from rich.console import Console
from rich.table import Table

from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import AtomicWriter
from dualpath_plan.outcomes.sweep import SweepSummary, iter_rows

OUT_COLUMNS = (
    "point",
    "mode",
    "P",
    "D",
    "agents",
    "gpus",
    "throughput_turns_per_s",
    "throughput_per_gpu",
    "jct_s",
    "drain_s",
    "decode_path_fraction",
    "bottleneck",
    "feasible",
)


def _clean(v: object) -> object:
    """No NaN or inf in any output: infeasible points have empty (null) metrics."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, np.bool_):
        return bool(v)
    return v


class PointWriter:
    """Every point of a sweep, streamed to a temporary file beside ``path`` and renamed over it
    only when the sweep completes: a failed or interrupted sweep leaves the previous file as it
    was (a ``kill -9`` may leave a hidden ``.NAME.*.tmp`` beside it)."""

    def __init__(self, path: Path, extra: list[str]):
        suffix = path.suffix.lower()
        if suffix not in (".csv", ".jsonl", ".ndjson"):
            raise PlanInputError(
                f"expected a .csv or .jsonl file, got {path.name!r}", field="--out"
            )
        # An exception being handled already when the sweep starts is not the sweep's failure.
        self.outer = sys.exc_info()[1]
        self.file = AtomicWriter(path, newline="", field="--out")
        self.handle: IO[str] = self.file.handle
        self.jsonl = suffix != ".csv"
        self.columns = [*extra, *OUT_COLUMNS]
        self.csv = None if self.jsonl else csv.DictWriter(self.handle, fieldnames=self.columns)
        if self.csv:
            self.csv.writeheader()

    def write(self, rows: dict[str, np.ndarray]) -> None:
        for row in iter_rows(rows):
            clean = {c: _clean(row.get(c)) for c in self.columns}
            if self.csv:
                self.csv.writerow({k: ("" if v is None else v) for k, v in clean.items()})
            else:
                self.handle.write(json.dumps(clean, allow_nan=False) + "\n")

    def close(self) -> None:
        """Called from the sweep's ``finally``: put the file in place if the sweep completed,
        else (an exception on its way out, Ctrl-C included) drop it."""
        if sys.exc_info()[1] in (None, self.outer):
            self.file.commit()
        else:
            self.file.abort()


def _share(summary: SweepSummary) -> dict[str, float]:
    """Per set of binding links ("a + b" on a tie), its share of the feasible points."""
    if not summary.feasible:
        return {}
    ranked = sorted(summary.binding_counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return {k: v / summary.feasible for k, v in ranked}


def sweep_payload(summary: SweepSummary, objective: str, out: Path | None) -> dict[str, Any]:
    return {
        "points": summary.points,
        "feasible": summary.feasible,
        "bottleneck_share": _share(summary),
        "objective": objective,
        "best": [{k: _clean(v) for k, v in r.items()} for r in summary.best],
        "out": str(out) if out else None,
    }


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def render_sweep(
    summary: SweepSummary,
    objective: str,
    modes: tuple[str, ...],
    extra: list[str],
    out: Path | None,
    console: Console,
) -> None:
    console.print(
        f"[bold]{summary.points:,} points[/bold] ({summary.feasible:,} feasible), "
        f"modes {', '.join(modes)}"
    )
    share = _share(summary)
    if share:
        console.print("binding links: " + ", ".join(f"{k} {v:.0%}" for k, v in share.items()))
    table = Table(title=f"best {len(summary.best)} by {objective}")
    cols = [*extra, *(c for c in OUT_COLUMNS if c not in ("feasible", "point"))]
    for c in cols:
        table.add_column(c)
    for r in summary.best:
        table.add_row(*[_cell(r.get(c)) for c in cols])
    console.print(table)
    if out:
        console.print(f"every point written to {out}")
