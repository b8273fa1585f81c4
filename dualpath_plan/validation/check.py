"""Regression gate: recompute recorded scenarios and compare every metric with its baseline.

A baseline is JSON: ``{"version": 1, "default_rel_tol": 1e-6, "scenarios": [{"id", "kind",
"inputs", "metrics": {"name": {"value", "rel_tol"}}}]}``. Kinds: ``size`` (every mode's
throughput, JCT, APS, TTFT, TPOT, decode-path share), ``ratio``, ``bounds``, ``paths``
(closed form and LP), ``recommend`` (the recommended split per mode). A metric regresses when
|new - old| > rel_tol x |old| (and 1e-12 absolute, for zeros).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from xml.etree import ElementTree as ET

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    Strict,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import MAX_BASELINE_BYTES, load_json, xml_text
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
        if s["kind"] not in KINDS:
            raise PlanInputError(
                f"unknown scenario kind {s['kind']!r}; expected one of {', '.join(KINDS)}",
                source=source,
                field=f"scenarios[{k}].kind",
            )
    try:
        baseline = _Baseline.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        msg = re.sub(r" or instance of \w+", "", err["msg"])
        if err["type"] not in ("missing", "extra_forbidden") and "input" in err:
            msg += f" (got {err['input']!r})"
        raise PlanInputError(msg, source=source, field=loc.lstrip(".") or "(top level)") from None
    for k, s in enumerate(baseline.scenarios):
        needed = _KIND_INPUTS.get(s.kind, ())
        for key in needed:
            if getattr(s.inputs, key) is None:
                raise PlanInputError(
                    f"a '{s.kind}' scenario needs inputs {', '.join(needed)}",
                    source=source,
                    field=f"scenarios[{k}].inputs.{key}",
                )
    return data


# Checks of a baseline's shape (load_baseline); the data itself stays plain JSON.
_Count = Annotated[int, Strict(), Field(ge=1, le=1_000_000)]
_Finite = Annotated[float, Strict(), Field(allow_inf_nan=False)]
_Tolerance = Annotated[float, Strict(), Field(ge=0, allow_inf_nan=False)]
_Id = Annotated[StrictStr, Field(max_length=200)]
_KIND_INPUTS = {
    "ratio": ("model", "context_tokens", "append_tokens"),
    "recommend": ("budget_nodes",),
}


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


class _Inputs(_Strict):
    model: _Id | None = None
    workload: _Id | None = None
    node: _Id | None = None
    prefill_node: _Id | None = None
    decode_node: _Id | None = None
    gpu: _Id | None = None
    storage: _Id | None = None
    prefill_nodes: _Count | None = None
    decode_nodes: _Count | None = None
    agents: _Count | None = None
    budget_nodes: _Count | None = None
    objective: _Id | None = None
    paper_assumptions: StrictBool | None = None
    context_tokens: (
        Annotated[list[Annotated[float, Strict(), Field(ge=1, le=1e12)]], Field(max_length=1000)]
        | None
    ) = None
    append_tokens: Annotated[float, Strict(), Field(ge=1, le=1e12)] | None = None


class _Metric(_Strict):
    value: _Finite | None = None
    rel_tol: _Tolerance | None = None


class _Scenario(_Strict):
    id: StrictStr
    kind: Literal["size", "ratio", "bounds", "paths", "recommend"]
    inputs: _Inputs
    metrics: dict[str, _Metric] = Field(default_factory=dict)


class _Baseline(_Strict):
    version: StrictInt | None = None
    default_rel_tol: _Tolerance | None = None
    scenarios: list[_Scenario]


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
    """The diffs as a JUnit XML report, well-formed whatever the ids hold: characters XML does
    not allow (control characters, lone surrogates) are escaped by :func:`xml_text`."""
    suite = ET.Element(
        "testsuite",
        name="dualpath-plan check",
        tests=str(len(diffs)),
        failures=str(sum(d.regressed for d in diffs)),
    )
    for d in diffs:
        case = ET.SubElement(
            suite, "testcase", classname=xml_text(d.scenario), name=xml_text(d.metric)
        )
        if d.regressed:
            failure = ET.SubElement(case, "failure", message="metric changed beyond tolerance")
            failure.text = xml_text(
                f"baseline {d.baseline!r}, now {d.value!r}, tolerance {d.rel_tol:g} relative"
            )
    return ET.tostring(suite, encoding="unicode") + "\n"
