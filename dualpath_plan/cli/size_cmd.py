"""``dualpath-plan size``: outcomes per mode for one cluster, or the smallest one for a target."""

from __future__ import annotations

from typing import Annotated

import typer

from dualpath_plan.cli.common import JsonOpt, ProfilesOpt, SetOpt, load_registry, print_json, stdout
from dualpath_plan.cli.options import scenario_options
from dualpath_plan.errors import PlanInputError
from dualpath_plan.outcomes.serving import evaluate
from dualpath_plan.outcomes.sizing import MAX_NODES, sizing_report
from dualpath_plan.outcomes.uncertainty import answer_intervals, mode_intervals
from dualpath_plan.reports import size as report
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec


@scenario_options()
def size(
    spec: ScenarioSpec,
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
        int,
        typer.Option(
            "--max-nodes", help=f"Largest cluster the search tries (at most {MAX_NODES:,})."
        ),
    ] = 1024,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Offline JCT, online agents/s under the SLOs, TTFT, TPOT, the binding links and the
    decode-path share for basic, even, dualpath and oracle, on the paper's default
    (DeepSeek-V3.2, 2P4D dualpath-hopper nodes, paper-64k, 2,048 agents); or, with --target-aps
    or --deadline, the smallest cluster per mode that meets the target."""
    if target_aps is not None and deadline is not None:
        raise PlanInputError("give --target-aps or --deadline, not both", field="--deadline")
    sc = Scenario.from_spec(load_registry(profiles, set_), spec)
    if target_aps is not None or deadline is not None:
        sizing = sizing_report(
            sc, spec, target_aps=target_aps, deadline_s=deadline, max_nodes=max_nodes
        )
        answers = {
            m: (s.prefill_nodes, s.decode_nodes, s.outcome)
            for m, s in sizing.modes.items()
            if s.outcome is not None
        }
        at = answer_intervals(sc, spec.serving, answers)
        if as_json:
            print_json(report.sizing_payload(sizing, at))
        else:
            report.render_sizing(sizing, stdout, at)
        return
    # Offline answers do not depend on the SLOs: an unmet SLO is reported per mode.
    result = evaluate(sc, spec.serving, strict=False)
    intervals = mode_intervals(sc, spec.serving, tuple(result.modes), result.modes)
    if as_json:
        print_json(report.size_payload(result, intervals))
    else:
        report.render_size(result, stdout, intervals)


def register(app: typer.Typer) -> None:
    app.command("size")(size)
