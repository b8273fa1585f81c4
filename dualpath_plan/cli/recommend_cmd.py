"""``dualpath-plan recommend``: the P/D split of a budget to run, per mode, and why."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dualpath_plan.cli.by_simulation import (
    SIM_MODE,
    ByOpt,
    PlanSeedsOpt,
    TopSplitsOpt,
    by_simulation,
    recommend_by_simulation,
)
from dualpath_plan.cli.common import (
    JsonOpt,
    ProfilesOpt,
    RayOpt,
    SetOpt,
    WorkersOpt,
    command_line,
    load_registry,
    parse_pairs,
    print_json,
    refuse_overwrites,
    stdout,
)
from dualpath_plan.cli.options import scenario_options
from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import AtomicGroup
from dualpath_plan.outcomes.objectives import objective_of
from dualpath_plan.outcomes.plan_defaults import DEFAULT_PLAN_SEEDS, DEFAULT_TOP_SPLITS
from dualpath_plan.outcomes.recommend import OBJECTIVES, Budget, phase_plan, recommend
from dualpath_plan.reports.recommend import (
    recommend_markdown,
    recommend_payload,
    recommend_png_bytes,
    recommend_svg,
    render_recommend,
)
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec


@scenario_options(exclude=("prefill_nodes", "decode_nodes"))
def recommend_cmd(
    spec: ScenarioSpec,
    budget_nodes: Annotated[
        int | None,
        typer.Option(
            "--budget-nodes", help="Nodes to split between prefill and decode.", show_default=False
        ),
    ] = None,
    budget_gpus: Annotated[
        int | None, typer.Option("--budget-gpus", help="GPUs to spend.", show_default=False)
    ] = None,
    budget_cost: Annotated[
        float | None,
        typer.Option(
            "--budget-cost",
            help="Dollars an hour to spend on nodes, their store and power (the profiles' "
            "prices; --prefill-node-cost and --decode-node-cost override a node's).",
            show_default=False,
        ),
    ] = None,
    prefill_node_cost: Annotated[
        float | None,
        typer.Option(
            "--prefill-node-cost",
            help="A prefill node's $/h, with --budget-cost (default: its profile's price).",
            show_default=False,
        ),
    ] = None,
    decode_node_cost: Annotated[
        float | None,
        typer.Option(
            "--decode-node-cost",
            help="A decode node's $/h, with --budget-cost (default: its profile's price).",
            show_default=False,
        ),
    ] = None,
    objective: Annotated[
        str,
        typer.Option(
            "--objective",
            help="jct_s (minimized), aps, throughput_per_gpu or cost ($ per agent served "
            "online, the store and power included; minimized): the metric splits are ranked by.",
        ),
    ] = "jct_s",
    phase: Annotated[
        list[str] | None,
        typer.Option(
            "--phase",
            help="WORKLOAD:WEIGHT, repeatable: phases of a run (e.g. an RL run whose "
            "appended lengths change); a ratio per phase and the gain of re-balancing.",
            show_default=False,
        ),
    ] = None,
    markdown: Annotated[
        Path | None,
        typer.Option(
            "--markdown",
            help="Write a Markdown report that stands alone: the chart inline (SVG), the "
            "nodes' specs, the efficiencies in force, every split, the command line and the "
            "version.",
            show_default=False,
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Write the objective against the split, a line per mode (modes that coincide "
            "share one), each mode's recommended split marked, the bottleneck-free range shaded, "
            "what binds dualpath under the axis, a title and the inputs: FILE.svg (drawn without "
            "a plotting library) or FILE.png (needs matplotlib, the 'plot' extra).",
            show_default=False,
        ),
    ] = None,
    by: ByOpt = "analytical",
    seeds: PlanSeedsOpt = DEFAULT_PLAN_SEEDS,
    top_splits: TopSplitsOpt = DEFAULT_TOP_SPLITS,
    workers: WorkersOpt = None,
    ray: RayOpt = None,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Evaluate every P/D split of a budget for basic, even, dualpath and oracle under the SLOs,
    rank them by the objective, mark the bottleneck-free range, and recommend a split per mode
    with what binds on each side of it."""
    objective = objective_of(objective, OBJECTIVES)
    simulated = by_simulation(
        by, {"--seeds": seeds, "--top-splits": top_splits, "--workers": workers, "--ray": ray}
    )
    if plot is not None and plot.suffix.lower() not in (".svg", ".png"):
        raise PlanInputError(f"expected a .svg or .png file, got {plot.name!r}", field="--plot")
    for flag, price in (
        ("--prefill-node-cost", prefill_node_cost),
        ("--decode-node-cost", decode_node_cost),
    ):
        if price is not None and budget_cost is None:
            # A node count or a GPU count does not weigh nodes: the price was ignored.
            raise PlanInputError(
                "a node's cost weighs nodes against --budget-cost, not given "
                "(--budget-nodes and --budget-gpus count them)",
                field=flag,
            )
    budget = Budget(budget_nodes, budget_gpus, budget_cost, prefill_node_cost, decode_node_cost)
    budget.validate()
    cfg = spec.serving
    registry = load_registry(profiles, set_)
    sc = Scenario.from_spec(registry, spec)
    report = recommend(sc, budget, cfg, objective)  # type: ignore[arg-type]
    phases = None
    specs = parse_pairs(phase, "--phase", "WORKLOAD:WEIGHT", whole=False) if phase else []
    refuse_overwrites(
        {"--plot": plot, "--markdown": markdown},
        registry,
        # (an unknown phase workload is phase_plan's error, naming --phase)
        workloads=[
            sc.workload,
            *(registry.workload(w) for w, _ in specs if w in registry.ids("workload")),
        ],
    )
    if specs:
        phases = phase_plan(registry, spec, specs, budget, cfg, objective)  # type: ignore[arg-type]
    # The chart and the report: both written or neither.
    with AtomicGroup() as outputs:
        if plot is not None and plot.suffix.lower() == ".png":
            outputs.add(plot, recommend_png_bytes(report), field="--plot")
        elif plot is not None:
            outputs.add(plot, recommend_svg(report), field="--plot")
        if markdown is not None:
            outputs.add(
                markdown, recommend_markdown(report, phases, command_line()), field="--markdown"
            )
    sim = None
    if simulated:
        ranked = [
            (c.prefill_nodes, c.decode_nodes, o.aps)
            for c in report.candidates
            if (o := c.modes.get(SIM_MODE)) is not None
        ]
        sim = recommend_by_simulation(sc, ranked, cfg, seeds, top_splits, workers, ray)
    if as_json:
        payload = recommend_payload(report, phases)
        if sim is not None:
            from dualpath_plan.reports.sim_plans import recommend_sim_payload

            splits, found, total = sim
            payload["simulation"] = recommend_sim_payload(splits, found, top_splits, total)
        print_json(payload)
        return
    render_recommend(report, stdout, phases)
    if sim is not None:
        from dualpath_plan.reports.sim_plans import render_recommend_sim

        splits, found, total = sim
        render_recommend_sim(splits, found, top_splits, total, stdout, cfg)


def register(app: typer.Typer) -> None:
    app.command("recommend")(recommend_cmd)
