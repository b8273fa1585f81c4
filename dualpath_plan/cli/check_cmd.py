"""``dualpath-plan check``: a regression gate over recorded scenarios."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from dualpath_plan.cli.common import (
    JsonOpt,
    ProfilesOpt,
    SetOpt,
    load_registry,
    print_json,
    refuse_overwrites,
    stdout,
)
from dualpath_plan.files import AtomicGroup
from dualpath_plan.reports import check as report
from dualpath_plan.validation.check import (
    junit_xml,
    load_baseline,
    run_check,
    scenario_workloads,
)


def check(
    baseline: Annotated[Path, typer.Argument(metavar="BASELINE.json")],
    update: Annotated[
        bool,
        typer.Option(
            "--update", help="Rewrite the baseline with the current values (tolerances kept)."
        ),
    ] = False,
    junit: Annotated[
        Path | None,
        typer.Option("--junit", help="Also write a JUnit XML report.", show_default=False),
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="List every metric, not only changes.")
    ] = False,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Recompute the scenarios recorded in a baseline and compare every metric with its
    recorded value under its tolerance. Exit 0 clean, 1 regression, 2 usage error."""
    registry = load_registry(profiles, set_)
    data = load_baseline(baseline)
    refuse_overwrites(
        {"--junit": junit},
        registry,
        workloads=[registry.workload(w) for w in scenario_workloads(data, registry)],
        inputs=[baseline],
    )
    diffs, updated = run_check(data, registry, str(baseline), update=update)
    # The report and the updated baseline: both written or neither, each through a temporary
    # file renamed into place (a failure leaves the previous files as they were).
    with AtomicGroup() as outputs:
        if junit is not None:
            outputs.add(junit, junit_xml(diffs, updated=update), field="--junit")
        if update:
            text = json.dumps(updated, indent=2, allow_nan=False) + "\n"
            outputs.add(baseline, text, field="--update")
    if as_json:
        print_json(report.check_payload(diffs, update, show_all))
    else:
        report.render_check(diffs, baseline, update, show_all, stdout)
    if any(d.regressed for d in diffs) and not update:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("check")(check)
