"""The ``validate`` report: JSON payload, Markdown table and terminal rendering."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dualpath_plan.formatting import number, percent, plain
from dualpath_plan.reports.provenance import efficiency_payload
from dualpath_plan.scenario.provenance import Efficiencies
from dualpath_plan.validation import Accuracy, CaseResult

# The model's value beside the paper's: 4 significant digits, one more than a report's
# default, so that an error of a few tenths of a percent shows in the figures too.
MODEL_DIGITS = 4


def _summary(results: list[CaseResult]) -> str:
    passed = sum(r.status == "pass" for r in results)
    failed = sum(not r.ok for r in results)
    gaps = sum(r.status == "gap" for r in results)
    return f"{passed} passed, {failed} failed, {gaps} known gaps"


def _accuracy(results: list[CaseResult]) -> str:
    """The prediction-only summary, said first: fitted points and identities say nothing of
    the accuracy to expect."""
    a = Accuracy.of(results)
    fitted = sum(r.case.case_class == "fitted" for r in results)
    exact = sum(r.case.case_class == "exact" for r in results)
    return (
        f"predictions: {a.count} cases, median |error| {a.median_abs_error:.1%}, worst "
        f"{a.max_abs_error:.1%} (known gaps included; {fitted} fitted points and {exact} "
        "exact identities not counted)"
    )


def validate_payload(
    results: list[CaseResult], efficiencies: list[Efficiencies] | None = None
) -> dict[str, Any]:
    return {
        # The efficiencies in force in the cases that evaluate a cluster, each set once.
        "efficiencies": [efficiency_payload(e) for e in efficiencies or []],
        "cases": [
            {
                "id": r.case.id,
                "claim": r.case.claim,
                "source": r.case.source,
                "class": r.case.case_class,
                "kind": r.case.kind,
                "metric": r.case.metric,
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
        "predicted": {
            "count": Accuracy.of(results).count,
            "median_abs_error": Accuracy.of(results).median_abs_error,
            "max_abs_error": Accuracy.of(results).max_abs_error,
        },
        "passed": sum(r.status == "pass" for r in results),
        "failed": sum(not r.ok for r in results),
        "gaps": sum(r.status == "gap" for r in results),
    }


def validate_markdown(
    results: list[CaseResult], efficiencies: list[Efficiencies] | None = None
) -> str:
    lines = [
        _accuracy(results),
        *[f"\n{_in_cases(e)}" for e in efficiencies or []],
        "",
        "| case | class | claim | source | paper | model | error | tolerance | status |",
        "|---|---|---|---|---:|---:|---:|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.case.id} | {r.case.case_class} | {r.case.claim} | {r.case.source} "
            f"| {plain(r.case.paper)} "
            f"| {number(r.model, MODEL_DIGITS)} | {percent(r.error, 1, sign=True)} | "
            f"{percent(r.case.tolerance)} | "
            f"{r.status}{' (' + r.case.known_gap + ')' if r.case.known_gap else ''} |"
        )
    return "\n".join([*lines, "", _summary(results)])


def _in_cases(e: Efficiencies) -> str:
    """The efficiencies line, said of the cases that evaluate a cluster."""
    return e.line().replace("efficiencies:", "efficiencies in the cluster cases:", 1)


def render_validate(
    results: list[CaseResult], console: Console, efficiencies: list[Efficiencies] | None = None
) -> None:
    console.print(_accuracy(results))
    for e in efficiencies or []:
        console.print(escape(_in_cases(e)), highlight=False)
    table = Table(title="validation against arXiv 2602.21548")
    for col in ("case", "class", "claim", "paper", "model", "error", "tol", "status"):
        table.add_column(
            col,
            justify="right" if col in ("paper", "model", "error", "tol") else "left",
            overflow="fold",
        )
    for r in results:
        style = {"pass": "green", "gap": "yellow"}.get(r.status, "red")
        table.add_row(
            escape(r.case.id),
            r.case.case_class,
            escape(r.case.claim),
            plain(r.case.paper),
            number(r.model, MODEL_DIGITS),
            percent(r.error, 1, sign=True),
            percent(r.case.tolerance),
            f"[{style}]{r.status}[/{style}]",
        )
    console.print(table)
    console.print(_summary(results))
