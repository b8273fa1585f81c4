"""Regression gate: recompute recorded scenarios and compare every metric with its baseline.

A baseline is JSON: ``{"version": 1, "default_rel_tol": 1e-6, "scenarios": [{"id", "kind",
"inputs", "metrics": {"name": {"value", "rel_tol"}}}]}``. Kinds and their metrics are the
metric registry's (validation/metrics.py): ``size`` (every mode's throughput, JCT, APS, TTFT,
TPOT, decode-path share and binding links), ``ratio``, ``bounds``, ``paths`` (closed form and
LP), ``recommend`` (the recommended split per mode), ... A number regresses when
|new - old| > rel_tol x |old| (and 1e-12 absolute, for zeros); a label when it changes.
"""

from __future__ import annotations

import difflib
import math
import re
from pathlib import Path
from typing import Annotated, Any, Literal
from xml.etree import ElementTree as ET

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from dualpath_plan import plausible
from dualpath_plan.errors import PlanInputError, echoed_input
from dualpath_plan.files import MAX_BASELINE_BYTES, load_json, xml_text
from dualpath_plan.frozen import record
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.validation.metrics import LABEL_SUFFIX, Value, compute, parse_inputs


def compute_metrics(kind: str, inputs: Any, registry: Registry) -> dict[str, Value]:
    """A recorded scenario's metrics: the metric registry's, shared with ``validate``."""
    return compute(kind, inputs, registry)


@record
class MetricDiff:
    scenario: str
    metric: str
    baseline: Value | None  # None: new metric
    value: Value | None  # None: metric gone
    rel_tol: float

    @property
    def regressed(self) -> bool:
        if self.baseline is None or self.value is None:
            return True
        if isinstance(self.baseline, str) or isinstance(self.value, str):
            return self.baseline != self.value  # a label (binding links): equal or changed
        return abs(self.value - self.baseline) > self.rel_tol * abs(self.baseline) + 1e-12

    @property
    def direction(self) -> str:
        """How the metric moved: up, down, new, gone, relabelled (a label), or same."""
        if self.baseline is None:
            return "new"
        if self.value is None:
            return "gone"
        if isinstance(self.baseline, str) or isinstance(self.value, str):
            return "same" if self.baseline == self.value else "relabelled"
        if self.value == self.baseline:
            return "same"
        return "up" if self.value > self.baseline else "down"

    @property
    def change(self) -> float:
        if isinstance(self.baseline, str) or isinstance(self.value, str):
            return 0.0 if self.baseline == self.value else math.inf
        if self.baseline in (None, 0.0) or self.value is None:
            return math.inf if self.value != self.baseline else 0.0
        # Over |baseline|: the change has the direction's sign for a negative baseline too
        # (value / baseline - 1 said -100% beside "up" for a baseline of -1e308); divided
        # before subtracting, so that 1e308 against -1e308 does not overflow.
        return self.value / abs(self.baseline) - math.copysign(1.0, self.baseline)


def load_baseline(path: Path) -> dict[str, Any]:
    """A baseline file, read through :mod:`dualpath_plan.files` (regular UTF-8 file, size and
    nesting limits, no NaN or Infinity) and checked against :class:`_Baseline`: every number a
    JSON number (not a string or a boolean) and finite, every tolerance >= 0, every input of a
    scenario of the type it is used as, the inputs its kind needs present. Returns the data as
    read (``--update`` writes it back with new values)."""
    source = str(path)
    data = load_json(path, what="baseline file (JSON)", max_bytes=MAX_BASELINE_BYTES)
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), list):
        raise PlanInputError('expected {"scenarios": [...]}', source=source, field="scenarios")
    for k, s in enumerate(data["scenarios"]):
        if not isinstance(s, dict):
            raise PlanInputError(
                f"expected a scenario object, got {type(s).__name__}",
                source=source,
                field=f"scenarios[{k}]",
            )
        for key in ("id", "kind", "inputs"):
            if key not in s:
                raise PlanInputError(
                    f"scenario {k} has no '{key}'", source=source, field=f"scenarios[{k}].{key}"
                )
    try:
        baseline = _Baseline.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        msg = re.sub(r" or instance of \w+", "", err["msg"]).removeprefix("Value error, ")
        msg += echoed_input(err)
        raise PlanInputError(msg, source=source, field=loc.lstrip(".") or "(top level)") from None
    if not data["scenarios"]:
        # A gate with nothing in it passes whatever the model does.
        raise PlanInputError(
            "expected at least one scenario: an empty baseline checks nothing",
            source=source,
            field="scenarios",
        )
    for k, sc in enumerate(baseline.scenarios):
        # The inputs a kind takes are the metric registry's (the scenario spec's and its own).
        parse_inputs(sc.kind, sc.inputs, source=source, field_prefix=f"scenarios[{k}].")
        for name, metric in sc.metrics.items():
            # A label where a number belongs (or the reverse) is a wrong file, not a change.
            label = name.endswith(LABEL_SUFFIX)
            if metric.value is not None and isinstance(metric.value, str) != label:
                raise PlanInputError(
                    f"expected {'a label' if label else 'a number'}, got {metric.value!r}",
                    source=source,
                    field=f"scenarios[{k}].metrics.{name}.value",
                )
    return data


def scenario_workloads(data: dict[str, Any], registry: Registry) -> list[str]:
    """The known workload profiles a loaded baseline's scenarios run (their traces are inputs
    of the check; an unknown one is the scenario's own error when it runs)."""
    used = {parse_inputs(s["kind"], s["inputs"])[1].workload for s in data["scenarios"]}
    return sorted(w for w in used if w in registry.ids("workload"))


# Checks of a baseline's shape (load_baseline); the data itself stays plain JSON.
_Finite = Annotated[float, Strict(), Field(allow_inf_nan=False)]


def _plausible_tolerance(value: float) -> float:
    """A tolerance of 5 (percent typed for a share: 500%) passes every regression."""
    why = plausible.problem("baseline.rel_tol", value)
    if why is not None:
        raise ValueError(why)
    return value


_Tolerance = Annotated[
    float, Strict(), Field(ge=0, allow_inf_nan=False), AfterValidator(_plausible_tolerance)
]
_Id = Annotated[StrictStr, Field(max_length=200)]


class _Strict(BaseModel):
    """No unknown keys, no conversions, and no null: a key is given a value or left out."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @field_validator("*", mode="before")
    @classmethod
    def _not_null(cls, value: Any, info: ValidationInfo) -> Any:
        # ``"storage": null`` is the one null with a meaning: no storage-cluster limit.
        if value is None and info.field_name != "storage":
            raise ValueError("expected a value, got null (leave the key out instead)")
        return value


class _Metric(_Strict):
    value: _Finite | StrictStr | None = None  # a number, or a label (binding links)
    rel_tol: _Tolerance | None = None


class _Scenario(_Strict):
    id: StrictStr
    kind: _Id
    inputs: dict[str, Any]
    metrics: dict[str, _Metric] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _an_id(cls, value: str) -> str:
        # An empty id was taken: the report and the JUnit case named nothing.
        if not value.strip():
            raise ValueError("expected a scenario id, got an empty one")
        return value


class _Baseline(_Strict):
    version: Literal[1] | None = None  # the format this reader knows
    default_rel_tol: _Tolerance | None = None
    scenarios: list[_Scenario]

    @field_validator("scenarios")
    @classmethod
    def _ids_once(cls, scenarios: list[_Scenario]) -> list[_Scenario]:
        seen: set[str] = set()
        for s in scenarios:
            if s.id in seen:
                raise ValueError(f"scenario id {s.id!r} is recorded twice")
            seen.add(s.id)
        return scenarios


def run_check(
    data: dict[str, Any], registry: Registry, source: str | None = None, update: bool = False
) -> tuple[list[MetricDiff], dict[str, Any]]:
    """Diffs of every metric, and the baseline with the recomputed values (for --update).
    ``source``: the baseline's file, which errors in a scenario's inputs name. A recorded
    metric the scenario's kind does not give is bad input naming it, with the closest it gives
    (a typo read as a regression, exit 1, while validate said exit 2: found in a trial); with
    ``update`` it is dropped (the model no longer gives it)."""
    default_tol = float(data.get("default_rel_tol", 1e-6))
    diffs: list[MetricDiff] = []
    updated = {**data, "scenarios": []}
    for k, s in enumerate(data["scenarios"]):
        try:
            values = compute_metrics(s["kind"], s["inputs"], registry)
        except PlanInputError as exc:
            raise PlanInputError(
                f"scenario '{s['id']}': {exc.detail}", source=source, field=f"scenarios[{k}].inputs"
            ) from None
        recorded = s.get("metrics", {})
        for name in recorded if not update else ():
            if name not in values:
                close = difflib.get_close_matches(name, list(values), n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise PlanInputError(
                    f"scenario '{s['id']}' (kind {s['kind']!r}) gives no metric {name!r}{hint} "
                    "(--update records the metrics it gives)",
                    source=source,
                    field=f"scenarios[{k}].metrics.{name}",
                )
        new_metrics = {}
        for name in sorted(set(values) | set(recorded)):
            tol = float(recorded.get(name, {}).get("rel_tol", default_tol))
            old = recorded.get(name, {}).get("value")
            new = values.get(name)
            diffs.append(MetricDiff(s["id"], name, old, new, tol))
            if new is not None:
                new_metrics[name] = {"value": new, "rel_tol": tol}
        updated["scenarios"].append({**s, "metrics": new_metrics})
    return diffs, updated


def junit_xml(diffs: list[MetricDiff], updated: bool = False) -> str:
    """The diffs as a JUnit XML report, well-formed whatever the ids hold: characters XML does
    not allow (control characters, lone surrogates) are escaped by :func:`xml_text`. With
    ``updated`` (check --update: the gate passes, exit 0) a change is recorded, not failed: it
    is the case's system-out (it was a failure beside exit 0: found in a trial)."""
    suite = ET.Element(
        "testsuite",
        name="dualpath-plan check",
        tests=str(len(diffs)),
        failures="0" if updated else str(sum(d.regressed for d in diffs)),
    )
    for d in diffs:
        case = ET.SubElement(
            suite, "testcase", classname=xml_text(d.scenario), name=xml_text(d.metric)
        )
        if d.regressed:
            if updated:
                said = ET.SubElement(case, "system-out")
            else:
                said = ET.SubElement(case, "failure", message="metric changed beyond tolerance")
            said.text = ("recorded by --update: " if updated else "") + xml_text(
                f"new metric, now {d.value!r}"
                if d.baseline is None
                else f"baseline {d.baseline!r}, no longer given"
                if d.value is None
                else f"baseline {d.baseline!r}, now {d.value!r}, tolerance {d.rel_tol:g} relative"
            )
    return ET.tostring(suite, encoding="unicode") + "\n"
