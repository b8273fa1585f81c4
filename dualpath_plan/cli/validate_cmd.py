"""``dualpath-plan validate`` (the paper's claims) and ``dualpath-plan check`` (regressions)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from dualpath_plan.cli.common import JsonOpt, ProfilesOpt, SetOpt, load_registry, print_json, stdout
from dualpath_plan.cli.options import scenario_options
from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import AtomicGroup
from dualpath_plan.scenario.spec import ScenarioSpec
from dualpath_plan.validation import load_cases, run_validation
from dualpath_plan.validation.calibrate import (
    DEFAULT_FIT,
    Calibration,
    calibrate,
    load_points,
    overlay,
    profile_to_toml,
)
from dualpath_plan.validation.check import junit_xml, load_baseline, run_check


def validate(
    cases: Annotated[
        list[Path] | None,
        typer.Option(
            "--cases", help="Extra directory of case files (repeatable).", show_default=False
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
    elif markdown:
        lines = [
            "| case | claim | source | paper | model | error | tolerance | status |",
            "|---|---|---|---:|---:|---:|---:|---|",
        ]
        for r in results:
            lines.append(
                f"| {r.case.id} | {r.case.claim} | {r.case.source} | {r.case.paper:.4g} "
                f"| {r.model:.4g} | {r.error:+.1%} | {r.case.tolerance:.0%} | "
                f"{r.status}{' (' + r.case.known_gap + ')' if r.case.known_gap else ''} |"
            )
        lines.append("")
        lines.append(
            f"{sum(r.status == 'pass' for r in results)} passed, {len(failed)} failed, "
            f"{sum(r.status == 'gap' for r in results)} known gaps"
        )
        print("\n".join(lines))
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
    # The report and the updated baseline: both written or neither, each through a temporary
    # file renamed into place (a failure leaves the previous files as they were).
    with AtomicGroup() as outputs:
        if junit is not None:
            outputs.add(junit, junit_xml(diffs), field="--junit")
        if update:
            outputs.add(
                baseline, json.dumps(updated, indent=2, allow_nan=False) + "\n", field="--update"
            )
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
        if update:
            stdout.print(
                f"{len(diffs)} metrics recorded in {baseline} ({len(regressions)} new "
                "or changed beyond tolerance)"
            )
        else:
            stdout.print(f"{len(diffs)} metrics, {len(regressions)} beyond tolerance")
    if regressions and not update:
        raise typer.Exit(1)


def _num(v: float | str | None) -> str:
    return "-" if v is None else v if isinstance(v, str) else f"{v:.8g}"


# RMS log error above which calibrate suggests more starts: 5% per point on average.
POOR_FIT_RMS = 0.05


@scenario_options(
    groups=("profiles", "scheduling", "terms"), exclude=("prefill_node", "decode_node")
)
def calibrate_cmd(
    spec: ScenarioSpec,
    measured: Annotated[
        Path,
        typer.Argument(
            metavar="MEASURED.csv",
            help="Rows: metric, value, mode, prefill_nodes, decode_nodes[, agents].",
        ),
    ],
    fit: Annotated[
        str,
        typer.Option(
            "--fit",
            help="Comma list of fields to fit: node fields (FIELD or node.FIELD) and workload "
            "fields (workload.FIELD, e.g. workload.turns_spread).",
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
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Fit a node's named efficiency fields (and workload fields such as turns_spread) to
    measured points by least squares; report the fitted values, each point's residual and
    (with --holdout) the held-out error, and write the result as a profile overlay."""
    from dualpath_plan.scenario import Scenario

    registry = load_registry(profiles, set_)
    points = load_points(measured)
    sc = Scenario.from_spec(registry, spec)
    fields = tuple(f.strip() for f in fit.split(",") if f.strip())
    cal = calibrate(sc, points, fields, holdout, seed, starts)
    written: list[str] | None = None
    if out is not None:
        written = []
        # Every overlay (the node, and the workload) written or none.
        with AtomicGroup() as outputs:
            for fitted in overlay(cal, measured):
                target = out / fitted.KIND / f"{fitted.id}.toml"
                try:
                    target.parent.mkdir(parents=True, exist_ok=True)
                except (OSError, ValueError) as exc:
                    reason = exc.strerror if isinstance(exc, OSError) else str(exc)
                    raise PlanInputError(
                        f"cannot write: {reason}", source=str(target), field="--out"
                    ) from None
                outputs.add(target, profile_to_toml(fitted), field="--out")
                written.append(str(target))

    def rows(results):  # type: ignore[no-untyped-def]
        return [
            {
                "row": r.point.row,
                "metric": r.point.metric,
                "mode": r.point.mode,
                "prefill_nodes": r.point.prefill_nodes,
                "decode_nodes": r.point.decode_nodes,
                "measured": r.point.value,
                "model": r.model,
                "error": r.error,
            }
            for r in results
        ]

    train_rms = Calibration.rms(cal.train)
    held_rms = Calibration.rms(cal.holdout)
    if as_json:
        print_json(
            {
                "node": cal.node.id,
                "workload": cal.workload.id,
                "fitted": cal.fitted,
                "start": cal.start,
                "train": rows(cal.train),
                "holdout": rows(cal.holdout),
                "train_rms_log_error": train_rms,
                "holdout_rms_log_error": held_rms if cal.holdout else None,
                "overlay": written,
            }
        )
        return
    t = Table(title=f"fitted fields of node '{cal.node.id}', workload '{cal.workload.id}'")
    for col in ("field", "start", "fitted"):
        t.add_column(col)
    for f, v in cal.fitted.items():
        t.add_row(f, f"{cal.start[f]:.4g}", f"{v:.4g}")
    stdout.print(t)
    r = Table(title="points (model vs measured)")
    for col in ("row", "set", "metric", "mode", "P/D", "measured", "model", "error"):
        r.add_column(col)
    for name, results in (("fit", cal.train), ("held out", cal.holdout)):
        for x in results:
            r.add_row(
                str(x.point.row),
                name,
                x.point.metric,
                x.point.mode,
                f"{x.point.prefill_nodes}P{x.point.decode_nodes}D",
                f"{x.point.value:.4g}",
                f"{x.model:.4g}",
                f"{x.error:+.1%}",
            )
    stdout.print(r)
    stdout.print(
        f"RMS log error: fit {train_rms:.3g}"
        + (f", held out {held_rms:.3g}" if cal.holdout else "")
    )
    if train_rms > POOR_FIT_RMS and starts == 1:
        stdout.print(
            f"a poor fit (RMS log error above {POOR_FIT_RMS:g}): least squares is local; "
            "try --starts 8, or start nearer with --set"
        )
    if written:
        stdout.print(f"overlay written to {', '.join(written)}; use it with --profiles {out}")


def register(app: typer.Typer) -> None:
    app.command("validate")(validate)
    app.command("check")(check)
    app.command("calibrate")(calibrate_cmd)
