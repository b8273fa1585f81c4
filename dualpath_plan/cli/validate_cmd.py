"""``dualpath-plan validate``: the paper's published claims, one case each."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dualpath_plan.cli.common import JsonOpt, ProfilesOpt, SetOpt, load_registry, print_json, stdout
from dualpath_plan.reports import validate as report
from dualpath_plan.validation import (
    case_efficiencies,
    load_cases,
    run_validation,
    select_cases,
)


def validate(
    cases: Annotated[
        list[Path] | None,
        typer.Option(
            "--cases", help="Extra directory of case files (repeatable).", show_default=False
        ),
    ] = None,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help="Run only the cases whose id (file name without .toml) matches this "
            "shell-style pattern, e.g. 'figure7-*' (repeatable). Every case file is still "
            "read and checked.",
            show_default=False,
        ),
    ] = None,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the table as Markdown.")
    ] = False,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Run every validation case (one published claim of the DualPath paper each): claim,
    paper value, model value, error, pass/fail. Exit 1 if any fails; a known gap is reported,
    never counted as a pass, and fails the run if it starts passing."""
    registry = load_registry(profiles, set_)
    loaded = select_cases(load_cases(cases), only)
    results = run_validation(registry, loaded)
    efficiencies = case_efficiencies(registry, loaded)
    if as_json:
        print_json(report.validate_payload(results, efficiencies))
    elif markdown:
        print(report.validate_markdown(results, efficiencies))
    else:
        report.render_validate(results, stdout, efficiencies)
    if any(not r.ok for r in results):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
