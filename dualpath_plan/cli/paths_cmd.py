"""``dualpath-plan bounds`` and ``dualpath-plan paths``."""

from __future__ import annotations

from typing import Annotated

import typer

from dualpath_plan.cli.common import (
    JsonOpt,
    ProfilesOpt,
    SetOpt,
    load_registry,
    parse_pairs,
    print_json,
    stdout,
)
from dualpath_plan.cli.options import given_flags, scenario_options
from dualpath_plan.errors import PlanInputError
from dualpath_plan.outcomes.paths import bottleneck_free_range, explain_mixed, explain_paths
from dualpath_plan.physics.modes import mode as mode_named
from dualpath_plan.reports import paths as report
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec


@scenario_options(groups=("profiles", "scheduling", "terms"))
def bounds(
    spec: ScenarioSpec,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Bottleneck-free P/D range (paper eq. (1)-(9)): the P/D node ratios at which no NIC, PCIe
    or DRAM link is over capacity while every node's storage reads are saturated and shared
    evenly, with the capacities every solver uses (the scheduler's imbalance included: the
    paper's eq. (9) is --paper-assumptions --scheduler ideal). Without --paper-assumptions the
    extended terms apply and the report says how much they move each bound."""
    registry = load_registry(profiles, set_)
    sc = Scenario.from_spec(registry, spec)
    paper = Scenario.from_spec(registry, spec.with_(paper_assumptions=True, paper_terms=()))
    result = report.BoundsView(
        sc, bottleneck_free_range(sc), bottleneck_free_range(paper), spec.paper_assumptions
    )
    if as_json:
        print_json(report.bounds_payload(result))
    else:
        report.render_bounds(result, stdout)


# No serving options: the paths are the saturated optimum, whatever the agents and SLOs.
@scenario_options(groups=("profiles", "cluster", "scheduling", "terms"))
def paths(
    spec: ScenarioSpec,
    mode: Annotated[
        str, typer.Option("--mode", help="basic, even, dualpath, oracle (or an ablation mode).")
    ] = "dualpath",
    prefill_group: Annotated[
        list[str] | None,
        typer.Option(
            "--prefill-group",
            help="NODE:COUNT, repeatable: mixed prefill groups (LP), in place of --prefill-node "
            "and -P (and --node, with the other side's groups; COUNT 1 when left out).",
            show_default=False,
        ),
    ] = None,
    decode_group: Annotated[
        list[str] | None,
        typer.Option(
            "--decode-group",
            help="NODE:COUNT, repeatable: mixed decode groups (LP), in place of --decode-node "
            "and -D (and --node, with the other side's groups; COUNT 1 when left out).",
            show_default=False,
        ),
    ] = None,
    work_class: Annotated[
        list[str] | None,
        typer.Option(
            "--class",
            help="WORKLOAD:WEIGHT, repeatable: workload classes with their share of turns "
            "(LP); they replace --workload.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Both read paths of one configuration: every link's load, capacity and utilization at the
    optimum of the chosen mode, what derates each capacity, the binding links, and what more
    capacity of them would buy (LP duals). With --prefill-group, --decode-group or --class,
    the same by linear program for mixed hardware and several workload classes."""
    name = mode_named(mode).name
    registry = load_registry(profiles, set_)
    sc = Scenario.from_spec(registry, spec)
    if prefill_group or decode_group or work_class:
        # The groups and classes replace these options: one given with them said nothing.
        # (--node still gives the side that has no group.)
        both = ("node",) if prefill_group and decode_group else ()
        replaced = {
            "--prefill-group": (prefill_group, (*both, "prefill_node", "prefill_nodes")),
            "--decode-group": (decode_group, (*both, "decode_node", "decode_nodes")),
            "--class": (work_class, ("workload",)),
        }
        for flag, (values, fields) in replaced.items():
            for other in given_flags(spec, fields) if values else ():
                raise PlanInputError(f"{flag} replaces {other}; give one", field=flag)
        mixed = explain_mixed(
            registry,
            sc,
            name,
            [
                (n, int(c))
                for n, c in parse_pairs(prefill_group, "--prefill-group", "NODE:COUNT", True)
            ],
            [
                (n, int(c))
                for n, c in parse_pairs(decode_group, "--decode-group", "NODE:COUNT", True)
            ],
            parse_pairs(work_class, "--class", "WORKLOAD:WEIGHT", False),
            gpu=spec.gpu,
        )
        if as_json:
            print_json(report.mixed_payload(mixed))
        else:
            report.render_mixed(mixed, stdout)
        return
    result = explain_paths(sc, name)
    if as_json:
        print_json(report.paths_payload(result))
    else:
        report.render_paths(result, stdout)


def register(app: typer.Typer) -> None:
    app.command("bounds")(bounds)
    app.command("paths")(paths)
