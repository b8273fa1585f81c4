"""``--by simulation`` of ``size --target-aps`` and ``recommend``: their options and the runs
(outcomes/sim_plans.py), kept apart from the analytical commands they extend."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from dualpath_plan.cli.common import task_progress
from dualpath_plan.errors import PlanInputError
from dualpath_plan.outcomes.plan_defaults import DEFAULT_PLAN_SEEDS, DEFAULT_TOP_SPLITS
from dualpath_plan.physics.modes import ModeName

if TYPE_CHECKING:
    from dualpath_plan.outcomes.sim_plans import SimSizing
    from dualpath_plan.scenario import Scenario
    from dualpath_plan.scenario.spec import ServingConfig

# The simulator, the executor and the plans (outcomes/simulation, executor.py, sim_plans.py)
# are imported where a plan by simulation runs: a plain size or recommend loads this module
# for its options and does not need them (a sixth of a cold size's wall time).
# (SciPy, for the intervals, is imported where an interval is computed: a plain size or
# recommend loads this module and does not need it.)

# The mode planned by simulation: DualPath's, the tool's subject (the analytical report still
# gives every mode).
SIM_MODE: ModeName = "dualpath"

ByOpt = Annotated[
    str,
    typer.Option(
        "--by",
        help="analytical (the queueing model) or simulation: also plan dualpath by "
        "discrete-event simulation (--seeds per rate, the analytical model's top "
        "--top-splits splits), beside the analytical answer.",
    ),
]
PlanSeedsOpt = Annotated[
    int,
    typer.Option(
        "--seeds", help="With --by simulation: seeds per simulated rate (seeds 0 to N - 1)."
    ),
]
TopSplitsOpt = Annotated[
    int,
    typer.Option(
        "--top-splits",
        help="With --by simulation: the splits simulated, the analytical model's best by APS.",
    ),
]


def by_simulation(
    by: str,
    flags: dict[str, Any],
) -> bool:
    """--by's value checked; the simulation's own flags refused without it (ignored else)."""
    if by not in ("analytical", "simulation"):
        raise PlanInputError(f"expected analytical or simulation, got {by!r}", field="--by")
    if by == "analytical":
        defaults = {"--seeds": DEFAULT_PLAN_SEEDS, "--top-splits": DEFAULT_TOP_SPLITS}
        for flag, value in flags.items():
            if value is not None and value != defaults.get(flag):
                raise PlanInputError("is --by simulation's", field=flag)
        return False
    if not 1 <= flags["--seeds"] <= 100:
        raise PlanInputError(f"expected 1 to 100 seeds, got {flags['--seeds']}", field="--seeds")
    if not 1 <= flags["--top-splits"] <= 64:
        raise PlanInputError(
            f"expected 1 to 64 splits, got {flags['--top-splits']}", field="--top-splits"
        )
    return True


def recommend_by_simulation(
    sc: Scenario,
    ranked: list[tuple[int, int, float]],
    slo: ServingConfig,
    seeds: int,
    top: int,
    workers: int | None,
    ray: str | None,
) -> tuple[list[tuple[int, int]], list[Any], int]:
    """The APS search on the ``top`` splits of ``ranked`` ((P, D, analytical APS), every
    split the budget allows), all at once on the executor."""
    from dualpath_plan.outcomes.executor import make_executor
    from dualpath_plan.outcomes.sim_plans import search_splits
    from dualpath_plan.outcomes.simulation import SimConfig

    order = sorted(ranked, key=lambda t: (-t[2], t[0]))[:top]
    splits = [(p, d) for p, d, _ in order]
    executor = make_executor(workers, ray)
    base = SimConfig(mode=SIM_MODE, agents=None, aps=1.0)
    with task_progress("simulations") as hook:
        found = search_splits(sc, splits, base, slo, executor, seeds, progress=hook)
    return splits, found, len(ranked)


def size_by_simulation(
    sc: Scenario,
    target_aps: float,
    start_nodes: int,
    max_nodes: int,
    slo: ServingConfig,
    seeds: int,
    top: int,
    workers: int | None,
    ray: str | None,
) -> SimSizing:
    """``size --target-aps X --by simulation``: from the analytical answer's node count."""
    from dualpath_plan.outcomes.executor import make_executor, run_searches
    from dualpath_plan.outcomes.sim_plans import describe_task, run_task, smallest_by_simulation
    from dualpath_plan.outcomes.simulation import SimConfig

    executor = make_executor(workers, ray)
    base = SimConfig(mode=SIM_MODE, agents=None, aps=target_aps)
    search = smallest_by_simulation(sc, target_aps, start_nodes, max_nodes, base, slo, seeds, top)
    with task_progress("simulations") as hook:
        (found,) = run_searches(executor, run_task, [search], describe_task, hook)
    return found  # type: ignore[no-any-return]
