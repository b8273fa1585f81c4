"""``dualpath-plan sweep``: a grid over profile fields and P, D, agents."""

from __future__ import annotations

import csv
import json
import math
import sys
from pathlib import Path
from typing import IO, Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn
from rich.table import Table

from dualpath_plan.cli.common import JsonOpt, ProfilesOpt, SetOpt, load_registry, print_json, stdout
from dualpath_plan.cli.options import scenario_options
from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import AtomicWriter
from dualpath_plan.outcomes.sweep import grid_size, iter_rows, parse_axis, run_sweep
from dualpath_plan.physics.modes import parse_modes
from dualpath_plan.scenario.spec import ScenarioSpec

OBJECTIVES = ("throughput_per_gpu", "throughput_turns_per_s", "jct_s")
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


class _Writer:
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


@scenario_options()
def sweep(
    spec: ScenarioSpec,
    grid: Annotated[
        list[str],
        typer.Option(
            "--grid",
            help="NAME=VALUES, repeatable. NAME: P, D, agents or KIND.FIELD (a numeric "
            "profile field, e.g. node.snic_gbit_s). VALUES: a,b,c | A:B (inclusive integers) | "
            "A:B:Nlog | A:B:Nlin (N points).",
        ),
    ],
    mode: Annotated[
        str, typer.Option("--mode", help="Comma list of basic, even, dualpath, oracle, or 'all'.")
    ] = "dualpath",
    objective: Annotated[
        str,
        typer.Option(
            "--objective",
            help="What the best points maximize: "
            "throughput_per_gpu, throughput_turns_per_s, or "
            "jct_s (minimized).",
        ),
    ] = "throughput_per_gpu",
    solver: Annotated[
        str,
        typer.Option(
            "--solver",
            help="closed (vectorized closed form) or lp (one LP per point, as a cross-check).",
        ),
    ] = "closed",
    chunk: Annotated[
        int, typer.Option("--chunk", help="Points evaluated at once (bounds memory).")
    ] = 200_000,
    top: Annotated[int, typer.Option("--top", help="Best points in the summary.")] = 10,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Write every point to FILE.csv or FILE.jsonl.", show_default=False
        ),
    ] = None,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Evaluate a grid of scenarios with the vectorized closed form, in chunks, with a progress
    bar on stderr; print a summary (the best points, the share of the grid each resource binds)
    and, with --out, every point."""
    axes = [parse_axis(g) for g in grid]
    modes = parse_modes(mode)
    if objective not in OBJECTIVES:
        raise PlanInputError(
            f"expected one of {', '.join(OBJECTIVES)}, got {objective!r}", field="--objective"
        )
    if solver not in ("closed", "lp"):
        raise PlanInputError(f"expected closed or lp, got {solver!r}", field="--solver")
    if top < 1:
        raise PlanInputError(f"expected at least 1, got {top}", field="--top")
    cfg = spec.serving
    registry = load_registry(profiles, set_)
    total = grid_size(axes) * len(modes)
    extra = [a.name for a in axes if not a.is_vector]
    writer = _Writer(out, extra) if out else None
    err = Console(stderr=True)
    try:
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
            disable=as_json and not err.is_terminal,
        ) as bar:
            task = bar.add_task("sweep", total=total)
            summary = run_sweep(
                registry,
                spec,
                axes,
                modes,
                cfg,
                objective=objective,
                chunk=chunk if solver == "closed" else min(chunk, 1000),
                top=top,
                on_chunk=writer.write if writer else None,
                progress=lambda n: bar.advance(task, n * len(modes)),
                solver=solver,
            )
    finally:
        if writer:
            writer.close()
    share = (
        {
            k: v / summary.feasible
            for k, v in sorted(summary.binding_counts.items(), key=lambda kv: (-kv[1], kv[0]))
        }
        if summary.feasible
        else {}
    )
    payload: dict[str, Any] = {
        "points": summary.points,
        "feasible": summary.feasible,
        "bottleneck_share": share,  # per set of binding links ("a + b" on a tie)
        "objective": objective,
        "best": [{k: _clean(v) for k, v in r.items()} for r in summary.best],
        "out": str(out) if out else None,
    }
    if as_json:
        print_json(payload)
        return
    stdout.print(
        f"[bold]{summary.points:,} points[/bold] ({summary.feasible:,} feasible), "
        f"modes {', '.join(modes)}"
    )
    if share:
        stdout.print("binding links: " + ", ".join(f"{k} {v:.0%}" for k, v in share.items()))
    table = Table(title=f"best {len(summary.best)} by {objective}")
    cols = [*extra, *(c for c in OUT_COLUMNS if c not in ("feasible", "point"))]
    for c in cols:
        table.add_column(c)
    for r in summary.best:
        table.add_row(*[_cell(r.get(c)) for c in cols])
    stdout.print(table)
    if out:
        stdout.print(f"every point written to {out}")


def _cell(v: object) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return "" if v is None else str(v)


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep)
