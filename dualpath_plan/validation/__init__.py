"""Validation against the DualPath paper: one TOML file per published claim.

Each case names the claim, its source (section, figure, table), the paper's value, a relative
tolerance, what to compute (``kind``) and its inputs. A case the model is known not to
reproduce carries ``known_gap`` with the reason: it is reported as a gap (never as a pass), and
it fails the run if it starts passing, so the marker is removed when the model improves.
Adding a case is adding a file (here, or in a directory given with ``--cases``).
"""

from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    StrictStr,
    ValidationError,
    field_validator,
)

from dualpath_plan import plausible
from dualpath_plan.errors import PlanInputError, echoed_input
from dualpath_plan.files import MAX_CASE_BYTES, load_toml
from dualpath_plan.frozen import record
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.scenario.provenance import Efficiencies

CASES_DIR = Path(__file__).resolve().parent / "cases"


class Case(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)

    id: str
    claim: StrictStr
    source: StrictStr
    kind: StrictStr  # a kind of the metric registry (validation/metrics.py)
    # fitted: a point the shipped calibration was fitted to (or a function of such points
    # only); exact: a formula identity the model holds by construction; predicted: neither,
    # the accuracy a user can expect. Only predicted cases count in the accuracy summary.
    case_class: Literal["fitted", "exact", "predicted"] = Field(default="predicted", alias="class")
    metric: StrictStr  # which of its metrics the claim is about
    # The paper's value: positive (errors are relative to it) and within the range any
    # quantity of the model can take, so model / paper is finite.
    paper: float = Field(ge=1e-9, le=1e12, allow_inf_nan=False)
    # Relative, at most 100 (10,000%): beyond it a case checks nothing, and its % overflowed;
    # past 1 (100%) a percent typed for a share (plausible.py, ``validation.tolerance``).
    tolerance: float = Field(ge=0, le=100, allow_inf_nan=False)
    note: StrictStr = ""
    known_gap: StrictStr = ""
    inputs: dict[str, Any] = Field(default_factory=dict)
    _source: str = PrivateAttr(default="")  # the file it was read from

    @field_validator("tolerance", mode="before")
    @classmethod
    def _tolerance_plausible(cls, value: float) -> float:
        """A tolerance of 15 (percent typed for a share: 1,500%) passes every case."""
        why = plausible.problem("validation.tolerance", value)
        if why is not None:
            raise ValueError(why)
        return value

    @property
    def source_file(self) -> str:
        return self._source or f"case '{self.id}'"


@record
class CaseResult:
    case: Case
    model: float
    error: float  # relative: model / paper - 1

    @property
    def within(self) -> bool:
        return abs(self.error) <= self.case.tolerance + 1e-12

    @property
    def status(self) -> str:
        if self.case.known_gap:
            return "unexpected pass" if self.within else "gap"
        return "pass" if self.within else "FAIL"

    @property
    def ok(self) -> bool:
        """Does not fail the run: a pass, or a known gap that still misses."""
        return self.status in ("pass", "gap")


def load_cases(extra_dirs: list[Path] | None = None) -> list[Case]:
    """Every case file of the shipped directory and ``extra_dirs``, read through
    :mod:`dualpath_plan.files` (regular UTF-8 files, size and nesting limits, finite numbers)
    and checked: the case's keys and types (strict), a kind of the metric registry, and its
    inputs against that kind (the scenario's and the kind's own). Every failure names the file
    and the field."""
    from dualpath_plan.validation.metrics import parse_inputs

    cases: dict[str, Case] = {}
    for directory in [CASES_DIR, *(extra_dirs or [])]:
        if not directory.is_dir():
            why = "no such case directory"
            if directory.exists():
                why = "is a file; expected a directory of case files"
            raise PlanInputError(why, source=str(directory), field="--cases")
        files = sorted(directory.glob("*.toml"))
        if not files:
            # A directory given on purpose that adds nothing is a wrong path, not a pass.
            raise PlanInputError(
                "has no case files (*.toml)", source=str(directory), field="--cases"
            )
        for path in files:
            source = str(path)
            data = load_toml(path, what="case file (TOML)", max_bytes=MAX_CASE_BYTES)
            try:
                case = Case.model_validate({"id": path.stem, **data})
            except ValidationError as exc:
                err = exc.errors()[0]
                loc = ".".join(str(p) for p in err["loc"])
                msg = str(err["msg"]).removeprefix("Value error, ")  # our own checks' words
                msg += echoed_input(err)
                raise PlanInputError(msg, source=source, field=loc) from None
            # A paper value in the metric's unit (a TPOT in seconds, not 37.5 milliseconds),
            # where the metric's name says its unit.
            paper_key = plausible.metric_key(case.metric)
            slip = plausible.problem(paper_key, case.paper) if paper_key is not None else None
            if slip is not None:
                raise PlanInputError(slip, source=source, field="paper")
            parse_inputs(case.kind, case.inputs, source=source)
            case._source = source
            cases[path.stem] = case
    return list(cases.values())


def select_cases(cases: list[Case], patterns: list[str] | None) -> list[Case]:
    """The cases whose id matches one of ``patterns`` (shell-style: ``figure7-*``; an id is
    its file's name without ``.toml``), in their order; every case when none are given. A
    pattern that matches no case is an error naming it: a typo would otherwise run nothing
    and pass."""
    if not patterns:
        return cases
    for pattern in patterns:
        if not any(fnmatch.fnmatchcase(c.id, pattern) for c in cases):
            raise PlanInputError(
                f"{pattern!r} matches no case id (`dualpath-plan validate --json` lists them)",
                field="--only",
            )
    return [c for c in cases if any(fnmatch.fnmatchcase(c.id, p) for p in patterns)]


def evaluate_case(case: Case, registry: Registry) -> float:
    """The model's value for a case: its metric of its kind (validation/metrics.py)."""
    from dualpath_plan.validation.metrics import compute

    source = case.source_file
    try:
        values = compute(case.kind, case.inputs, registry, source=source)
    except PlanInputError as exc:
        if exc.source is not None:
            raise
        # An input the case names (a profile id, say) rather than a flag the user never gave:
        # the case file and its inputs, as check names a baseline's scenario.
        raise PlanInputError(exc.detail, source=source, field="inputs") from None
    if case.metric not in values:
        raise PlanInputError(
            f"kind {case.kind!r} has no metric {case.metric!r}; it has: {', '.join(values)}",
            source=source,
            field="metric",
        )
    value = values[case.metric]
    if isinstance(value, str):
        raise PlanInputError(
            f"metric {case.metric!r} is not a number", source=source, field="metric"
        )
    return value


@record
class Accuracy:
    """|error| over the predicted cases (known gaps included: they are predictions too)."""

    count: int
    median_abs_error: float
    max_abs_error: float

    @classmethod
    def of(cls, results: list[CaseResult]) -> Accuracy:
        errors = sorted(abs(r.error) for r in results if r.case.case_class == "predicted")
        if not errors:
            return cls(0, 0.0, 0.0)
        mid = len(errors) // 2
        median = errors[mid] if len(errors) % 2 else (errors[mid - 1] + errors[mid]) / 2
        return cls(len(errors), median, errors[-1])


def case_efficiencies(registry: Registry, cases: list[Case]) -> list[Efficiencies]:
    """The efficiencies in force in the cases that evaluate a cluster, each distinct set once
    (which node, calibrated or at the speed of light)."""
    from dualpath_plan.scenario import Scenario
    from dualpath_plan.validation.metrics import parse_inputs

    seen: dict[str, Efficiencies] = {}
    for case in cases:
        kind, spec, _ = parse_inputs(case.kind, case.inputs, source=case.source_file)
        if kind.cluster:
            e = Scenario.from_spec(registry, spec).efficiencies
            seen.setdefault(e.line(), e)
    return list(seen.values())


def run_validation(registry: Registry, cases: list[Case]) -> list[CaseResult]:
    """Every case's result, in the cases' order. The cases of ``--cases`` folders are evaluated
    first: a mistake in a case file of one's own (a metric its kind does not give, a profile
    id that does not exist) is reported at once, not after the shipped cases (a simulation
    among them) have run for seconds."""
    shipped = str(CASES_DIR.resolve())
    order = sorted(
        range(len(cases)),
        key=lambda i: str(Path(cases[i].source_file).resolve().parent) == shipped,
    )
    out: list[CaseResult | None] = [None] * len(cases)
    for i in order:
        case = cases[i]
        value = evaluate_case(case, registry)
        out[i] = CaseResult(case, value, value / case.paper - 1.0)
    return [r for r in out if r is not None]
