"""Regression gate: recompute recorded scenarios and compare every metric with its baseline.

A baseline is JSON: ``{"version": 1, "default_rel_tol": 1e-6, "scenarios": [{"id", "kind",
"inputs", "metrics": {"name": {"value", "rel_tol"}}}]}``. Kinds: ``size`` (every mode's
throughput, JCT, APS, TTFT, TPOT, decode-path share), ``ratio``, ``bounds``, ``paths``
(closed form and LP), ``recommend`` (the recommended split per mode). A metric regresses when
|new - old| > rel_tol x |old| (and 1e-12 absolute, for zeros).
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

KINDS = ("size", "ratio", "bounds", "paths", "recommend")
SIZE_METRICS = (
    "throughput_turns_per_s",
    "jct_s",
    "drain_s",
    "aps",
    "ttft_s",
    "tpot_s",
    "decode_path_fraction",
)


def compute_metrics(kind: str, inputs: dict[str, Any], registry: Registry) -> dict[str, float]:
    from dualpath_plan.plan import Scenario

    scenario_keys = (
        "model",
        "workload",
        "node",
        "prefill_node",
        "decode_node",
        "gpu",
        "storage",
        "prefill_nodes",
        "decode_nodes",
    )
    sc_inputs = {k: inputs[k] for k in scenario_keys if k in inputs}
    if kind == "size":
        from dualpath_plan.outcomes.serving import ServingConfig, evaluate

        cfg = ServingConfig(agents=int(inputs.get("agents", 2048)))
        size = evaluate(Scenario.from_ids(registry, **sc_inputs), cfg)
        out = {
            f"{m}.{k}": float(getattr(o, k)) for m, o in size.modes.items() for k in SIZE_METRICS
        }
        out["speedup.jct"] = size.speedup_jct
        out["speedup.aps"] = size.speedup_aps
        return out
    if kind == "ratio":
        from dualpath_plan.physics.model import cache_compute_ratio_gb_per_pflop

        profile = registry.model(inputs["model"])
        return {
            f"gb_per_pflop.{int(c)}": float(
                cache_compute_ratio_gb_per_pflop(profile, c, inputs["append_tokens"])
            )
            for c in inputs["context_tokens"]
        }
    if kind == "bounds":
        from dataclasses import replace

        from dualpath_plan.physics.links import PathOptions

        sc = Scenario.from_ids(registry, **sc_inputs)
        if inputs.get("paper_assumptions"):
            sc = replace(sc, options=PathOptions.paper())
        b = sc.bounds()
        return {"pd_min": float(b.pd_min), "pd_max": float(b.pd_max)}
    if kind == "paths":
        result = Scenario.from_ids(registry, **sc_inputs).solve()
        out = {}
        for mode, sol in result.closed_form.items():
            out[f"{mode}.throughput_turns_per_s"] = float(sol.throughput_turns_per_s)
            out[f"{mode}.decode_path_fraction"] = float(sol.decode_path_fraction)
            out[f"{mode}.lp_throughput_turns_per_s"] = result.lp[mode].throughput_turns_per_s
        return out
    if kind == "recommend":
        from dualpath_plan.outcomes.recommend import Budget, recommend
        from dualpath_plan.outcomes.serving import ServingConfig

        rec = recommend(
            Scenario.from_ids(registry, **sc_inputs),
            Budget(nodes=int(inputs["budget_nodes"])),
            ServingConfig(agents=int(inputs.get("agents", 2048))),
            inputs.get("objective", "jct"),
        )
        return {
            f"{m}.prefill_nodes": float(r.candidate.prefill_nodes)
            for m, r in rec.recommended.items()
        }
    raise PlanInputError(
        f"unknown scenario kind {kind!r}; expected one of {', '.join(KINDS)}", field="kind"
    )


@dataclass(frozen=True)
class MetricDiff:
    scenario: str
    metric: str
    baseline: float | None  # None: new metric
    value: float | None  # None: metric gone
    rel_tol: float

    @property
    def regressed(self) -> bool:
        if self.baseline is None or self.value is None:
            return True
        return abs(self.value - self.baseline) > self.rel_tol * abs(self.baseline) + 1e-12

    @property
    def change(self) -> float:
        if self.baseline in (None, 0.0) or self.value is None:
            return math.inf if self.value != self.baseline else 0.0
        return self.value / self.baseline - 1.0  # type: ignore[operator]


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
