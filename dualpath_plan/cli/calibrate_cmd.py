"""``dualpath-plan calibrate``: fit a node's (and a workload's) fields to measured points."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from dualpath_plan.cli.app import say
from dualpath_plan.cli.common import JsonOpt, ProfilesOpt, SetOpt, load_registry, print_json, stdout
from dualpath_plan.cli.options import scenario_options
from dualpath_plan.errors import PlanInputError
from dualpath_plan.formatting import number
from dualpath_plan.reports import calibrate as report
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec
from dualpath_plan.validation.calibrate import (
    DEFAULT_FIT,
    PartialFitError,
    calibrate,
    load_points,
    write_overlays,
)


@scenario_options(
    groups=("profiles", "serving", "scheduling", "terms"),
    # A point gives its own agents; a measured APS keeps no headroom (max utilization 1).
    exclude=("prefill_node", "decode_node", "agents", "max_utilization", "slo_percentile"),
)
def calibrate_cmd(
    spec: ScenarioSpec,
    measured: Annotated[
        Path,
        typer.Argument(
            metavar="MEASURED.csv",
            help="Rows: metric, value, mode, prefill_nodes, decode_nodes[, agents][, rel_stderr] "
            "(rel_stderr: the value's relative standard error, which weights the fit).",
        ),
    ],
    fit: Annotated[
        str,
        typer.Option(
            "--fit",
            help="Comma list of fields to fit: node fields (FIELD or node.FIELD) and workload "
            "fields (workload.FIELD, e.g. workload.turns_spread).",
            # Shown with spaces after the commas: one unbroken word of 70 characters was cut
            # short by narrow terminals ("prefill_mfu,pref...").
            show_default=", ".join(DEFAULT_FIT),
        ),
    ] = ",".join(DEFAULT_FIT),
    holdout: Annotated[
        int,
        typer.Option(
            "--holdout", help="Leave K points out of the fit and report the error on them."
        ),
    ] = 0,
    seed: Annotated[
        int, typer.Option("--seed", help="Which points are held out, and the extra starts.")
    ] = 0,
    starts: Annotated[
        int,
        typer.Option(
            "--starts",
            help="Least-squares runs: from the profiles' values, then from random starts "
            "around them; the best fit wins (the search is local).",
        ),
    ] = 1,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write the fitted node (and workload, if one of its fields was fitted) as "
            "profile overlays in DIR (use with --profiles DIR).",
            show_default=False,
        ),
    ] = None,
    allow_partial: Annotated[
        bool,
        typer.Option(
            "--allow-partial",
            help="With --out: write the overlay even if a fitted field is not determined by "
            "the points or ended at a bound, labelled efficiency_source = 'fitted, partial' "
            "with each such field in [unconfirmed] (without it such a fit writes nothing and "
            "exits 1).",
        ),
    ] = False,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Fit a node's named efficiency fields (and workload fields such as turns_spread) to
    measured points by least squares; report the fitted values, each point's residual and
    (with --holdout) the held-out error, and write the result as a profile overlay."""
    if allow_partial and out is None:
        # It allows writing a partial overlay: with nothing to write it was dropped silently.
        raise PlanInputError(
            "allows writing a partial fit with --out DIR; without --out nothing is written",
            field="--allow-partial",
        )
    registry = load_registry(profiles, set_)
    points = load_points(measured)
    sc = Scenario.from_spec(registry, spec)
    fields = tuple(f.strip() for f in fit.split(",") if f.strip())
    err = Console(stderr=True)
    with err.status("fitting", spinner="dots") as status:  # shown on a terminal only

        def progress(start: int, evaluations: int, rms: float) -> None:
            status.update(
                f"fitting: start {start} of {starts}, {evaluations} evaluations, "
                f"RMS log error {number(rms)}"
            )

        cal = calibrate(sc, points, fields, holdout, seed, starts, progress, spec.serving)
    refused: PartialFitError | None = None
    written = None
    if out is not None:
        try:
            written = write_overlays(cal, measured, out, allow_partial=allow_partial)
        except PartialFitError as exc:
            refused = exc  # the fit is reported; the gate's exit follows it
    if as_json:
        print_json(report.calibrate_payload(cal, written))
    else:
        report.render_calibrate(cal, written, starts, str(out), stdout)
    if refused is not None:
        say(str(refused))
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("calibrate")(calibrate_cmd)
