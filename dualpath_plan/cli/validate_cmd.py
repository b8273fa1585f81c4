"""``dualpath-plan validate`` (the paper's claims) and ``dualpath-plan check`` (regressions)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from dualpath_plan.cli.common import JsonOpt, ProfilesOpt, SetOpt, load_registry, print_json, stdout
from dualpath_plan.errors import PlanInputError
from dualpath_plan.validation import load_cases, run_validation
from dualpath_plan.validation.check import junit_xml, load_baseline, run_check


def validate(
    cases: Annotated[
        list[Path] | None,
        typer.Option(
            "--cases", help="Extra directory of case files (repeatable).", show_default=False
        ),
    ] = None,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Run every validation case (one published claim of the DualPath paper each): claim,
    paper value, model value, error, pass/fail. Exit 1 if any fails; a known gap is reported,
    never counted as a pass, and fails the run if it starts passing."""
    registry = load_registry(profiles, set_)
    results = run_validation(registry, load_cases(cases))
    failed = [r for r in results if not r.ok]
    if as_json:
        print_json(
            {
                "cases": [
                    {
                        "id": r.case.id,
                        "claim": r.case.claim,
                        "source": r.case.source,
                        "paper": r.case.paper,
                        "model": r.model,
                        "error": r.error,
                        "tolerance": r.case.tolerance,
                        "pass": r.status == "pass",
                        "status": r.status,
                        "known_gap": r.case.known_gap or None,
                    }
                    for r in results
                ],
                "passed": sum(r.status == "pass" for r in results),
                "failed": len(failed),
                "gaps": sum(r.status == "gap" for r in results),
            }
        )
    else:
        table = Table(title="validation against arXiv 2602.21548")
        for col in ("case", "claim", "paper", "model", "error", "tol", "status"):
            table.add_column(
                col,
                justify="right" if col in ("paper", "model", "error", "tol") else "left",
                overflow="fold",
            )
        for r in results:
            style = {"pass": "green", "gap": "yellow"}.get(r.status, "red")
            table.add_row(
                r.case.id,
                r.case.claim,
                f"{r.case.paper:.4g}",
                f"{r.model:.4g}",
                f"{r.error:+.1%}",
                f"{r.case.tolerance:.0%}",
                f"[{style}]{r.status}[/{style}]",
            )
        stdout.print(table)
        stdout.print(
            f"{sum(r.status == 'pass' for r in results)} passed, {len(failed)} failed, "
            f"{sum(r.status == 'gap' for r in results)} known gaps"
        )
    if failed:
        raise typer.Exit(1)


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
    diffs, updated = run_check(data, registry)
    if junit is not None:
        try:
            junit.write_text(junit_xml(diffs), encoding="utf-8")
        except OSError as exc:
            raise PlanInputError(
                f"cannot write: {exc.strerror}", source=str(junit), field="--junit"
            ) from None
    if update:
        baseline.write_text(json.dumps(updated, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    regressions = [d for d in diffs if d.regressed]
    if as_json:
        print_json(
            {
                "metrics": len(diffs),
                "regressions": len(regressions),
                "updated": update,
                "changes": [
                    {
                        "scenario": d.scenario,
                        "metric": d.metric,
                        "baseline": d.baseline,
                        "value": d.value,
                        "rel_tol": d.rel_tol,
                        "change": d.change if math.isfinite(d.change) else None,
                    }
                    for d in (diffs if show_all else regressions)
                ],
            }
        )
    else:
        rows = diffs if show_all else ([] if update else regressions)
        if rows:
            table = Table(title=f"{'all metrics' if show_all else 'regressions'} vs {baseline}")
            for col in ("scenario", "metric", "baseline", "now", "change", "tolerance", ""):
                table.add_column(col)
            for d in rows:
                table.add_row(
                    d.scenario,
                    d.metric,
                    _num(d.baseline),
                    _num(d.value),
                    f"{d.change:+.3%}" if math.isfinite(d.change) else "new/gone",
                    f"{d.rel_tol:g}",
                    "[red]REGRESSION[/red]" if d.regressed else "ok",
                )
            stdout.print(table)
        stdout.print(
            f"{len(diffs)} metrics, {len(regressions)} beyond tolerance"
            + (" (baseline rewritten)" if update else "")
        )
    if regressions and not update:
        raise typer.Exit(1)


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.8g}"


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
    app.command("check")(check)
