"""Regression gate: recompute recorded scenarios and compare every metric with its baseline.

A baseline is JSON: ``{"version": 1, "default_rel_tol": 1e-6, "scenarios": [{"id", "kind",
"inputs", "metrics": {"name": {"value", "rel_tol"}}}]}``. Kinds and their metrics are the
metric registry's (validation/metrics.py): ``size`` (every mode's throughput, JCT, APS, TTFT,
TPOT, decode-path share and binding links), ``ratio``, ``bounds``, ``paths`` (closed form and
LP), ``recommend`` (the recommended split per mode), ... A number regresses when
|new - old| > rel_tol x |old| (and 1e-12 absolute, for zeros); a label when it changes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from dualpath_plan.errors import PlanInputError
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.validation.metrics import Value, compute


def compute_metrics(kind: str, inputs: Any, registry: Registry) -> dict[str, Value]:
    """A recorded scenario's metrics: the metric registry's, shared with ``validate``."""
    return compute(kind, inputs, registry)


@dataclass(frozen=True)
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
    def change(self) -> float:
        if isinstance(self.baseline, str) or isinstance(self.value, str):
            return 0.0 if self.baseline == self.value else math.inf
        if self.baseline in (None, 0.0) or self.value is None:
            return math.inf if self.value != self.baseline else 0.0
        return self.value / self.baseline - 1.0


def load_baseline(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PlanInputError("no such baseline file", source=str(path)) from None
    except json.JSONDecodeError as exc:
        raise PlanInputError(f"not JSON: {exc.msg} (line {exc.lineno})", source=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), list):
        raise PlanInputError('expected {"scenarios": [...]}', source=str(path), field="scenarios")
    for k, s in enumerate(data["scenarios"]):
        for key in ("id", "kind", "inputs"):
            if key not in s:
                raise PlanInputError(
                    f"scenario {k} has no '{key}'", source=str(path), field=f"scenarios[{k}].{key}"
                )
    return data


def run_check(data: dict[str, Any], registry: Registry) -> tuple[list[MetricDiff], dict[str, Any]]:
    """Diffs of every metric, and the baseline with the recomputed values (for --update)."""
    default_tol = float(data.get("default_rel_tol", 1e-6))
    diffs: list[MetricDiff] = []
    updated = {**data, "scenarios": []}
    for s in data["scenarios"]:
        try:
            values = compute_metrics(s["kind"], s["inputs"], registry)
        except PlanInputError as exc:
            raise PlanInputError(f"scenario '{s['id']}': {exc}", field="inputs") from None
        recorded = s.get("metrics", {})
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


def junit_xml(diffs: list[MetricDiff]) -> str:
    suite = ET.Element(
        "testsuite",
        name="dualpath-plan check",
        tests=str(len(diffs)),
        failures=str(sum(d.regressed for d in diffs)),
    )
    for d in diffs:
        case = ET.SubElement(suite, "testcase", classname=d.scenario, name=d.metric)
        if d.regressed:
            failure = ET.SubElement(case, "failure", message="metric changed beyond tolerance")
            failure.text = (
                f"baseline {d.baseline!r}, now {d.value!r}, tolerance {d.rel_tol:g} relative"
            )
    return ET.tostring(suite, encoding="unicode") + "\n"
