"""``dualpath-plan size``: outcomes per mode for one cluster, or the smallest one for a target."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer

from dualpath_plan import plausible
from dualpath_plan.cli.by_simulation import (
    SIM_MODE,
    ByOpt,
    PlanSeedsOpt,
    TopSplitsOpt,
    by_simulation,
    size_by_simulation,
)
from dualpath_plan.cli.common import (
    JsonOpt,
    ProfilesOpt,
    RayOpt,
    SetOpt,
    WorkersOpt,
    load_registry,
    print_json,
    refuse_input,
    stdout,
)
from dualpath_plan.cli.options import given_flags, scenario_options
from dualpath_plan.errors import PlanInputError
from dualpath_plan.outcomes.plan_defaults import DEFAULT_PLAN_SEEDS, DEFAULT_TOP_SPLITS
from dualpath_plan.outcomes.uncertainty import answer_intervals, evaluate_with_intervals
from dualpath_plan.profiles.schemas import MAX_MAGNITUDE
from dualpath_plan.reports import size as report
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import (
    DEFAULT_MAX_NODES,
    MAX_NODES,
    ScenarioSpec,
    check_max_nodes,
)

if TYPE_CHECKING:
    from dualpath_plan.outcomes.sim_plans import SimSizing
    from dualpath_plan.outcomes.sizing import SizingReport
    from dualpath_plan.profiles.registry import Registry

# The search (--target-aps, --deadline) and the model at a rate (--aps, --aps-curve) are
# imported where they run: a plain `size` does not pay for their modules at start-up.

# Rates of one --aps-curve at most: a chart or a table of more says nothing more, and the
# model at a rate is vectorized, so this many take milliseconds.
MAX_CURVE_POINTS = 10_000


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
    aps: Annotated[
        float | None,
        typer.Option(
            "--aps",
            help="Per mode at this arrival rate (agents/s, > 0) on the given cluster: TTFT, TPOT, "
            "one agent's JCT (all its turns), the KV working set and the busiest link's "
            "utilization, or why the rate is beyond the mode's capacity.",
            show_default=False,
        ),
    ] = None,
    aps_curve: Annotated[
        str | None,
        typer.Option(
            "--aps-curve",
            help="LO:HI:N: the same at N rates from LO to HI agents/s (0 <= LO < HI, 2 <= N <= "
            f"{MAX_CURVE_POINTS:,}, evenly spaced): TTFT and TPOT per mode against the rate; "
            "with --out FILE.csv every number, or FILE.svg a chart of TTFT per mode with the "
            "TTFT SLO.",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="With --aps-curve: write FILE.csv (a row per rate and mode) or FILE.svg (TTFT "
            "against the rate per mode, the TTFT SLO drawn), through a temporary file renamed "
            "into place.",
            show_default=False,
        ),
    ] = None,
    max_nodes: Annotated[
        int | None,
        typer.Option(
            "--max-nodes",
            help=f"Largest cluster the search of --target-aps or --deadline tries (default "
            f"{DEFAULT_MAX_NODES:,}, at most {MAX_NODES:,}).",
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
    """Offline JCT, online agents/s under the SLOs, TTFT, TPOT, the binding links and the
    decode-path share for basic, even, dualpath and oracle, on the paper's default
    (DeepSeek-V3.2, 2P4D dualpath-hopper nodes, paper-64k, 2,048 agents); or, with --target-aps
    or --deadline, the smallest cluster per mode that meets the target (exit 1 where no mode
    does within --max-nodes); or, with --aps or --aps-curve, the online model of this cluster
    at given arrival rates."""
    searching = target_aps is not None or deadline is not None
    simulated = by_simulation(
        by, {"--seeds": seeds, "--top-splits": top_splits, "--workers": workers, "--ray": ray}
    )
    if simulated and target_aps is None:
        raise PlanInputError("size plans by simulation with --target-aps only", field="--by")
    search = "--target-aps" if target_aps is not None else "--deadline"
    if not searching and max_nodes is not None:
        raise PlanInputError("bounds the search of --target-aps or --deadline", field="--max-nodes")
    for flags in given_flags(spec, ("prefill_nodes", "decode_nodes")) if searching else ():
        # The search chooses the cluster: a given one was ignored.
        raise PlanInputError(
            f"{search} searches for the cluster; {flags} gives one: give one of them", field=flags
        )
    max_nodes = DEFAULT_MAX_NODES if max_nodes is None else max_nodes
    check_max_nodes(max_nodes)
    if target_aps is not None and deadline is not None:
        raise PlanInputError("give --target-aps or --deadline, not both", field="--deadline")
    given = [f for f, v in (("--aps", aps), ("--aps-curve", aps_curve)) if v is not None]
    if len(given) == 2:
        raise PlanInputError("give --aps or --aps-curve, not both", field="--aps-curve")
    if given and (target_aps is not None or deadline is not None):
        other = "--target-aps" if target_aps is not None else "--deadline"
        raise PlanInputError(
            f"sizes the given cluster at a rate; {other} searches for a cluster: give one",
            field=given[0],
        )
    if out is not None and aps_curve is None:
        raise PlanInputError("is written by --aps-curve only", field="--out")
    rates = _rates(aps, aps_curve)  # bad values fail before any profile is read
    if out is not None and out.suffix.lower() not in (".csv", ".svg"):
        raise PlanInputError(f"expected a .csv or .svg file, got {out.name!r}", field="--out")
    registry = load_registry(profiles, set_)
    sc = Scenario.from_spec(registry, spec)
    if rates is not None:
        _at_rates(sc, registry, spec, rates, curve=aps_curve is not None, out=out, as_json=as_json)
        return
    if target_aps is not None or deadline is not None:
        from dualpath_plan.outcomes.sizing import sizing_report

        sizing = sizing_report(
            sc, spec, target_aps=target_aps, deadline_s=deadline, max_nodes=max_nodes
        )
        answers = {
            m: (s.prefill_nodes, s.decode_nodes, s.outcome)
            for m, s in sizing.modes.items()
            if s.outcome is not None
        }
        at = answer_intervals(sc, spec.serving, answers)
        sim = None
        if simulated and target_aps is not None:
            sim = _by_simulation(sc, sizing, target_aps, max_nodes, spec, seeds, top_splits,
                                 workers, ray)  # fmt: skip
        if as_json:
            payload = report.sizing_payload(sizing, at)
            if sim is not None:
                from dualpath_plan.reports.sim_plans import sizing_sim_payload

                payload["simulation"] = sizing_sim_payload(sim)
            print_json(payload)
        else:
            report.render_sizing(sizing, stdout, at)
            if sim is not None:
                from dualpath_plan.reports.sim_plans import render_sizing_sim

                render_sizing_sim(sim, stdout, spec.serving, SIM_MODE)
        if sim is not None and sim.answer is None:
            raise typer.Exit(1)  # not reached by simulation: as an unreached target
        if not any(s.reached for s in sizing.modes.values()):
            # No mode reaches the target within --max-nodes: the report says why per mode,
            # and the exit says it to a script, as check's 1 says a regression.
            raise typer.Exit(1)
        return
    # Offline answers do not depend on the SLOs: an unmet SLO is reported per mode.
    result, intervals = evaluate_with_intervals(sc, spec.serving)
    if as_json:
        print_json(report.size_payload(result, intervals))
    else:
        report.render_size(result, stdout, intervals)


def _by_simulation(
    sc: Scenario,
    sizing: SizingReport,
    target_aps: float,
    max_nodes: int,
    spec: ScenarioSpec,
    seeds: int,
    top: int,
    workers: int | None,
    ray: str | None,
) -> SimSizing:
    """--by simulation: from the analytical dualpath answer's node count (max_nodes where
    the analytical model does not reach the target)."""
    got = sizing.modes.get(SIM_MODE)
    start = got.nodes if got is not None and got.reached else max_nodes
    return size_by_simulation(
        sc, target_aps, start, max_nodes, spec.serving, seeds, top, workers, ray
    )


def _rates(aps: float | None, curve: str | None) -> np.ndarray | None:
    """The arrival rates of --aps or --aps-curve LO:HI:N (None: neither given)."""
    if aps is not None:
        if not (math.isfinite(aps) and 0 < aps <= MAX_MAGNITUDE):
            raise PlanInputError(
                f"expected agents/s > 0 and at most {MAX_MAGNITUDE:g}, got {aps!r}", field="--aps"
            )
        _plausible_rate(aps, "--aps")
        return np.array([aps])
    if curve is None:
        return None
    parts = curve.split(":")
    bad = PlanInputError(
        f"expected LO:HI:N, agents/s 0 <= LO < HI <= {MAX_MAGNITUDE:g} and 2 <= N <= "
        f"{MAX_CURVE_POINTS:,} points, got {curve!r}",
        field="--aps-curve",
    )
    if len(parts) != 3:
        raise bad
    try:
        start, stop, count = float(parts[0]), float(parts[1]), int(parts[2])
    except ValueError:
        raise bad from None
    if not (0 <= start < stop <= MAX_MAGNITUDE and 2 <= count <= MAX_CURVE_POINTS):
        raise bad  # NaN fails the comparisons too
    for rate in (start, stop):
        if rate > 0:  # a curve may start at 0 agents/s
            _plausible_rate(rate, "--aps-curve")
    return np.linspace(start, stop, count)


def _plausible_rate(rate: float, flag: str) -> None:
    """A rate of agents any cluster has (plausible.py's "aps"): 5e-324 printed APS 0 rows."""
    why = plausible.problem("aps", rate)
    if why is not None:
        raise PlanInputError(why, field=flag)


def _at_rates(
    sc: Scenario,
    registry: Registry,
    spec: ScenarioSpec,
    rates: np.ndarray,
    *,
    curve: bool,
    out: Path | None,
    as_json: bool,
) -> None:
    from dualpath_plan.files import atomic_write
    from dualpath_plan.outcomes.at_rate import rate_report
    from dualpath_plan.reports import at_rate

    result = rate_report(sc, spec.serving, rates)
    if out is not None:
        refuse_input(out, sc, registry)
        data = (
            at_rate.curve_svg(result) if out.suffix.lower() == ".svg" else at_rate.curve_csv(result)
        )
        atomic_write(out, data, field="--out")
    if as_json:
        print_json(
            at_rate.curve_payload(result, str(out) if out else None)
            if curve
            else at_rate.rate_payload(result)
        )
    elif curve:
        at_rate.render_curve(result, stdout, str(out) if out else None)
    else:
        at_rate.render_rate(result, stdout)


def register(app: typer.Typer) -> None:
    app.command("size")(size)
