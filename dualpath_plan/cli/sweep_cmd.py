"""``dualpath-plan sweep``: a grid over profile fields and P, D, agents."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

from dualpath_plan.cli.common import (
    JsonOpt,
    ProfilesOpt,
    RayOpt,
    SetOpt,
    WorkersOpt,
    load_registry,
    print_json,
    refuse_overwrites,
    stdout,
)
from dualpath_plan.cli.options import given_flags, scenario_options
from dualpath_plan.errors import PlanInputError, TaskFailedError
from dualpath_plan.formatting import count
from dualpath_plan.outcomes.objectives import objective_of
from dualpath_plan.outcomes.online import APS_LIMITS
from dualpath_plan.outcomes.sweep import (
    DEFAULT_MAX_LP_POINTS,
    DEFAULT_MAX_POINTS,
    MAX_GRID_POINTS,
    OBJECTIVES,
    Axis,
    check_grid,
    parse_axis,
    run_sweep,
    sweep_tasks,
)
from dualpath_plan.physics.modes import parse_modes
from dualpath_plan.reports import sweep as report
from dualpath_plan.reports.text_columns import FLOAT_DIGITS
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec


@scenario_options(groups=("profiles", "store", "cluster", "serving", "scheduling", "terms"))
def sweep(
    spec: ScenarioSpec,
    grid: Annotated[
        list[str],
        typer.Option(
            "--grid",
            help="NAME=VALUES, repeatable. NAME: P, D, agents or KIND.FIELD (a numeric "
            "profile field, e.g. node.snic_gbit_s). VALUES: a,b,c | LO:HI (inclusive integers) | "
            "LO:HI:Nlog | LO:HI:Nlin (N points, to 12 significant digits, each once; on P, D, "
            "agents and whole-number fields the nearest whole numbers within LO..HI). An axis "
            "of P, D or agents replaces -P, -D or --agents (not both).",
        ),
    ],
    mode: Annotated[
        str, typer.Option("--mode", help="Comma list of basic, even, dualpath, oracle, or 'all'.")
    ] = "dualpath",
    objective: Annotated[
        str,
        typer.Option(
            "--objective",
            help="What each mode's best points maximize: throughput_per_gpu, "
            "throughput_turns_per_s (the rate the agents run at), saturated_turns_per_s (the "
            "most the cluster sustains), aps (online agents/s under the SLOs; computes APS) "
            "or jct_s (minimized).",
        ),
    ] = "throughput_per_gpu",
    solver: Annotated[
        str,
        typer.Option(
            "--solver",
            help="closed (vectorized closed form) or lp (one LP per P/D pair, as a cross-check).",
        ),
    ] = "closed",
    chunk: Annotated[
        int,
        typer.Option(
            "--chunk",
            help="Points evaluated at once, 1 to 5,000,000 (bounds memory: about 150 bytes a "
            "point, in each worker).",
        ),
    ] = 200_000,
    top: Annotated[int, typer.Option("--top", help="Best points per mode in the summary.")] = 1,
    aps: Annotated[
        bool,
        typer.Option(
            "--aps",
            help="Also each point's online APS under --ttft-slo/--tpot-slo and the limit that "
            "set it (columns aps, aps_limit: " + ", ".join(APS_LIMITS) + "), as size "
            "computes them; once per P/D pair, but a bisection each: a sweep over many pairs "
            "runs several times slower, so it is off unless asked for (on with --objective aps).",
        ),
    ] = False,
    max_points: Annotated[
        int | None,
        typer.Option(
            "--max-points",
            help=f"Most points (grid x modes) to evaluate (default {DEFAULT_MAX_POINTS:,}; "
            f"{DEFAULT_MAX_LP_POINTS:,} with --solver lp; at most {MAX_GRID_POINTS:,}).",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help=f"Write every point to FILE.csv or FILE.jsonl; floats with {FLOAT_DIGITS} "
            f"significant digits (Python's '%.{FLOAT_DIGITS}g', '.0' added to a whole number).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
    workers: WorkersOpt = None,
    ray: RayOpt = None,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Evaluate a grid of scenarios with the vectorized closed form, in chunks, with a progress
    bar on stderr; print a summary (each mode's best point by the objective, the share of the
    grid each set of links binds, why infeasible points are) and, with --out, every point
    (an infeasible point's reason in the column 'reason'). A grid of more than one task (a
    chunk's points, at most 16 combinations of profile values) runs on --workers processes
    (default the machine's cores; with --out, this process unless --workers or --ray is
    given); with --ray, on a Ray cluster. The output does not depend on where it runs."""
    axes = [parse_axis(g) for g in grid]
    _refuse_axis_and_option(spec, axes)
    modes = parse_modes(mode)
    objective = objective_of(objective, OBJECTIVES)
    if solver not in ("closed", "lp"):
        raise PlanInputError(f"expected closed or lp, got {solver!r}", field="--solver")
    if top < 1:
        raise PlanInputError(f"expected at least 1, got {top}", field="--top")
    cfg = spec.serving
    registry = load_registry(profiles, set_)
    for a in axes:  # a profile axis and a --set of its field (as --grid P with -P)
        kind, _, name = a.name.partition(".")
        if name and name in registry.overrides.by_kind.get(kind, {}):
            raise PlanInputError(f"--grid {a.name} and --set {a.name} both set it; give one")
    total = check_grid(axes, len(modes), max_points, solver)
    # The scenario without the grid first: an error of --set or the profiles is theirs, not
    # that of the first grid value it would surface at.
    base = Scenario.from_spec(registry, spec)
    efficiencies = base.efficiencies
    extra = [a.name for a in axes if not a.is_vector]
    if base.store is not None:  # each point's share of the cache read (read_choice)
        extra.append("read_share")
    refuse_overwrites({"--out": out}, registry, workloads=[registry.workload(spec.workload)])
    err = Console(stderr=True)
    chunk = chunk if solver == "closed" else min(chunk, 1000)
    # Workers for a grid of more than one task, or on Ray where --ray asks (started here,
    # before the writer's thread and the progress bar's: a worker is a copy of this process);
    # run_sweep closes them. With --out, unless --workers or --ray asks for them, none: this
    # process already runs on two cores there (its writer's thread formats a chunk while the
    # next is evaluated), and its rows sent back from workers cost more than the workers
    # save on a machine of two (the profile sweep of bench/bench_sweep.py: 2.9 to 3.1 s in
    # this process, 3.7 to 4.0 s on two workers; docs/model.md section 10b).
    from dualpath_plan.outcomes.executor import InProcess, LocalPool, make_executor

    alone = out is not None and workers is None and ray is None
    one = (sweep_tasks(axes, spec, cfg, chunk) <= 1 or alone) and ray is None
    executor = make_executor(workers, ray)  # --workers checked whatever the grid
    if one and not isinstance(executor, InProcess):
        executor.close(cancel=False)  # (a pool not started yet: nothing to end)
        executor = InProcess()
    try:
        if isinstance(executor, LocalPool):
            try:
                executor.start()
            except (OSError, RuntimeError) as exc:  # no process to be had (a limit)
                executor.close(cancel=True)
                if workers is not None:
                    raise TaskFailedError(f"cannot start {workers} workers: {exc}") from None
                executor = InProcess()  # the default's: the same output, in one process
        # Just before the try whose finally closes it: the writer's temporary file exists.
        writer = report.PointWriter(out, extra) if out else None
    except BaseException:
        executor.close(cancel=True)
        raise
    try:
        with Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=err,
            transient=True,
            disable=not err.is_terminal,  # a bar, and its last line, on a terminal only
        ) as bar:
            task = bar.add_task("sweep", total=total)
            summary = run_sweep(
                registry,
                spec,
                axes,
                modes,
                cfg,
                objective=objective,
                chunk=chunk,
                top=top,
                on_chunk=writer.write if writer else None,
                progress=lambda n: bar.advance(task, n * len(modes)),
                solver=solver,
                max_points=max_points,
                aps=aps,
                executor=executor,
            )
    finally:
        if writer:
            writer.close()
    aps = aps or objective == "aps"
    if as_json:
        print_json(report.sweep_payload(summary, objective, out, aps, efficiencies, extra))
    else:
        agents_axis = any(a.name == "agents" for a in axes)
        inputs = (
            "" if agents_axis else f"offline JCT of {count(cfg.agents, 'agent')} started together; "
        ) + (
            f"online SLOs {', '.join(cfg.slo_parts)}, busiest "
            f"link at most {cfg.max_utilization:.0%}"
        )
        report.render_sweep(summary, objective, modes, extra, out, stdout, aps, inputs, agents_axis)
        stdout.print(report.efficiency_text(efficiencies, extra), highlight=False)


def _refuse_axis_and_option(spec: ScenarioSpec, axes: list[Axis]) -> None:
    """An axis of P, D or agents and its option both given are an error, as --grid and --set
    on one field are (the option was silently ignored)."""
    for a in axes:
        field = _AXIS_FIELDS.get(a.name)
        for flags in given_flags(spec, [field] if field else []):
            raise PlanInputError(
                f"--grid {a.name} and {flags} both set it; give one", field="--grid"
            )


# The spec field each vector axis replaces.
_AXIS_FIELDS = {"P": "prefill_nodes", "D": "decode_nodes", "agents": "agents"}


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep)
