"""``dualpath-plan size``: outcomes per mode for one cluster, or the smallest one for a target."""

from __future__ import annotations

from typing import Annotated

import typer

from dualpath_plan.cli.common import (
    DecodeNodeOpt,
    DOpt,
    GpuOpt,
    JsonOpt,
    ModelOpt,
    NodeOpt,
    POpt,
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
from dualpath_plan.outcomes.serving import REPORT_MODES, ServingConfig, evaluate
from dualpath_plan.outcomes.sizing import SizingResult, smallest_cluster
from dualpath_plan.plan import DEFAULTS, Scenario
from dualpath_plan.reports.size_report import (
    render_size,
    render_sizing,
    size_payload,
    sizing_payload,
)

DEFAULT_AGENTS = 2048


def size(
    model: ModelOpt = DEFAULTS["model"],  # type: ignore[assignment]
    workload: WorkloadOpt = DEFAULTS["workload"],  # type: ignore[assignment]
    node: NodeOpt = DEFAULTS["node"],  # type: ignore[assignment]
    prefill_node: PrefillNodeOpt = None,
    decode_node: DecodeNodeOpt = None,
    gpu: GpuOpt = None,
    storage: StorageOpt = DEFAULTS["storage"],  # type: ignore[assignment]
    prefill_nodes: POpt = DEFAULTS["prefill_nodes"],  # type: ignore[assignment]
    decode_nodes: DOpt = DEFAULTS["decode_nodes"],  # type: ignore[assignment]
    agents: Annotated[
        int, typer.Option("--agents", help="Agents started together (offline JCT).")
    ] = DEFAULT_AGENTS,
    ttft_slo: Annotated[float, typer.Option("--ttft-slo", help="TTFT SLO, seconds.")] = 4.0,
    tpot_slo: Annotated[float, typer.Option("--tpot-slo", help="TPOT SLO, seconds.")] = 0.050,
    target_aps: Annotated[
        float | None,
        typer.Option(
            "--target-aps",
            help="Find the smallest cluster serving this many agents/s under the SLOs, per mode.",
            show_default=False,
        ),
    ] = None,
    deadline: Annotated[
        float | None,
        typer.Option(
            "--deadline",
            help="Find the smallest cluster finishing --agents agents within this "
            "many seconds, per mode.",
            show_default=False,
        ),
    ] = None,
    max_nodes: Annotated[
        int, typer.Option("--max-nodes", help="Largest cluster the search tries.")
    ] = 1024,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Offline JCT, online agents/s under the SLOs, TTFT, TPOT, bottleneck and decode-path share
    for basic, even, dualpath and oracle, on the paper's default (DeepSeek-V3.2, 2P4D
    dualpath-hopper nodes, paper-64k, 2,048 agents); or, with --target-aps or --deadline, the
    smallest cluster that meets the target."""
    for name, v in (("-P/--prefill-nodes", prefill_nodes), ("-D/--decode-nodes", decode_nodes)):
        if v < 1:
            raise PlanInputError(
                f"a P/D cluster needs at least one node per side, got {v}", field=name
            )
    if max_nodes < 2:
        raise PlanInputError(f"expected at least 2, got {max_nodes}", field="--max-nodes")
    cfg = ServingConfig(agents=agents, ttft_slo_s=ttft_slo, tpot_slo_s=tpot_slo)
    cfg.validate()
    registry = load_registry(profiles, set_)
    sc = Scenario.from_ids(
        registry,
        model=model,
        workload=workload,
        node=node,
        prefill_node=prefill_node,
        decode_node=decode_node,
        gpu=gpu,
        storage=storage_id(storage),
        prefill_nodes=prefill_nodes,
        decode_nodes=decode_nodes,
    )
    if target_aps is not None or deadline is not None:
        if target_aps is not None and deadline is not None:
            raise PlanInputError("give --target-aps or --deadline, not both", field="--deadline")
        results: dict[str, SizingResult] = {
            m: smallest_cluster(
                sc, m, cfg, target_aps=target_aps, deadline_s=deadline, max_nodes=max_nodes
            )
            for m in REPORT_MODES
        }
        target: dict[str, float] = (
            {"aps": target_aps}
            if target_aps is not None
            else {"deadline_s": deadline or 0.0, "agents": float(agents)}
        )
        if as_json:
            print_json(sizing_payload(results, target))
            return
        what = (
            f"{target_aps:g} agents/s under TTFT {ttft_slo:g} s, TPOT {tpot_slo * 1e3:g} ms"
            if target_aps is not None
            else f"{agents:,} agents within {deadline:g} s"
        )
        render_sizing(results, what, stdout)
        return
    report = evaluate(sc, cfg)
    if as_json:
        print_json(size_payload(report))
        return
    render_size(report, stdout)


def register(app: typer.Typer) -> None:
    app.command("size")(size)
