"""``dualpath-plan recommend``: the P/D split of a budget to run, per mode, and why."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dualpath_plan.cli.common import (
    DecodeNodeOpt,
    GpuOpt,
    JsonOpt,
    ModelOpt,
    NodeOpt,
    PrefillNodeOpt,
    ProfilesOpt,
    SetOpt,
    StorageOpt,
    WorkloadOpt,
    load_registry,
    print_json,
    stdout,
    storage_id,
)
from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import AtomicGroup
from dualpath_plan.outcomes.recommend import OBJECTIVES, Budget, phase_plan, recommend
from dualpath_plan.outcomes.serving import ServingConfig
from dualpath_plan.plan import DEFAULTS, Scenario
from dualpath_plan.reports.recommend_report import (
    recommend_markdown,
    recommend_payload,
    recommend_png_bytes,
    recommend_svg,
    render_recommend,
)


def recommend_cmd(
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
            help="Money to spend, with --prefill-node-cost/--decode-node-cost (for "
            "mixed hardware).",
            show_default=False,
        ),
    ] = None,
    prefill_node_cost: Annotated[float, typer.Option("--prefill-node-cost")] = 1.0,
    decode_node_cost: Annotated[float, typer.Option("--decode-node-cost")] = 1.0,
    objective: Annotated[
        str, typer.Option("--objective", help="jct, aps or throughput-per-gpu.")
    ] = "jct",
    model: ModelOpt = DEFAULTS["model"],  # type: ignore[assignment]
    workload: WorkloadOpt = DEFAULTS["workload"],  # type: ignore[assignment]
    node: NodeOpt = DEFAULTS["node"],  # type: ignore[assignment]
    prefill_node: PrefillNodeOpt = None,
    decode_node: DecodeNodeOpt = None,
    gpu: GpuOpt = None,
    storage: StorageOpt = DEFAULTS["storage"],  # type: ignore[assignment]
    agents: Annotated[int, typer.Option("--agents", help="Agents (offline JCT).")] = 2048,
    ttft_slo: Annotated[float, typer.Option("--ttft-slo", help="TTFT SLO, seconds.")] = 4.0,
    tpot_slo: Annotated[float, typer.Option("--tpot-slo", help="TPOT SLO, seconds.")] = 0.050,
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
            "--markdown", help="Write a self-contained Markdown report.", show_default=False
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            help="Write the objective against the split per mode, bottleneck regions shaded: "
            "FILE.svg (drawn without a plotting library) or FILE.png (needs matplotlib, the 'plot' "
            "extra).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Evaluate every P/D split of a budget for basic, even, dualpath and oracle under the SLOs,
    rank them by the objective, mark the bottleneck-free range, and recommend a split per mode
    with what binds on each side of it."""
    if objective not in OBJECTIVES:
        raise PlanInputError(
            f"expected one of {', '.join(OBJECTIVES)}, got {objective!r}", field="--objective"
        )
    if plot is not None and plot.suffix.lower() not in (".svg", ".png"):
        raise PlanInputError(f"expected a .svg or .png file, got {plot.name!r}", field="--plot")
    budget = Budget(budget_nodes, budget_gpus, budget_cost, prefill_node_cost, decode_node_cost)
    budget.validate()
    cfg = ServingConfig(agents=agents, ttft_slo_s=ttft_slo, tpot_slo_s=tpot_slo)
    registry = load_registry(profiles, set_)
    base = dict(
        model=model,
        workload=workload,
        node=node,
        prefill_node=prefill_node,
        decode_node=decode_node,
        gpu=gpu,
        storage=storage_id(storage),
    )
    sc = Scenario.from_ids(registry, **base)  # type: ignore[arg-type]
    report = recommend(sc, budget, cfg, objective)  # type: ignore[arg-type]
    phases = None
    if phase:
        specs = []
        for spec in phase:
            wid, _, weight = spec.partition(":")
            try:
                w = float(weight) if weight else 1.0
            except ValueError:
                raise PlanInputError(
                    f"expected WORKLOAD:WEIGHT, got {spec!r}", field="--phase"
                ) from None
            if not (w > 0 and w < float("inf")):
                raise PlanInputError(f"a phase weight must be > 0, got {spec!r}", field="--phase")
            specs.append((wid, w))
        phases = phase_plan(registry, base, specs, budget, cfg, objective)  # type: ignore[arg-type]
    # The chart and the report: both written or neither.
    with AtomicGroup() as outputs:
        if plot is not None and plot.suffix.lower() == ".png":
            outputs.add(plot, recommend_png_bytes(report), field="--plot")
        elif plot is not None:
            outputs.add(plot, recommend_svg(report), field="--plot")
        if markdown is not None:
            rel = str(plot) if plot is not None else None
            if plot is not None and plot.parent == markdown.parent:
                rel = plot.name
            outputs.add(markdown, recommend_markdown(report, phases, rel), field="--markdown")
    if as_json:
        print_json(recommend_payload(report, phases))
        return
    render_recommend(report, stdout, phases)


def register(app: typer.Typer) -> None:
    app.command("recommend")(recommend_cmd)
