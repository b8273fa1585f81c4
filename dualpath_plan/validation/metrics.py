"""The metric registry: what a ``kind`` of scenario computes, by metric name. ``validate``
(one published claim per case: a kind, a metric and inputs) and ``check`` (recorded scenarios:
a kind, inputs and every metric) both read it, so a metric exists once.

A kind's inputs are the :class:`ScenarioSpec` fields it uses plus its own (``extra``), all
validated strictly: an unknown or mistyped input is an error naming the file and the field.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from dualpath_plan.errors import PlanInputError, echoed_input
from dualpath_plan.frozen import record
from dualpath_plan.physics.modes import MODE_TABLE, MODES, REPORT_MODES, ModeName, mode
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.scenario.spec import ScenarioSpec

Value = float | str  # a number, or a label such as a set of binding links
# Metrics whose value is a label, not a number: their names end with this.
LABEL_SUFFIX = ".binding"
SIZE_METRICS = (
    "throughput_turns_per_s",
    "saturated_turns_per_s",
    "jct_s",
    "drain_s",
    "aps",
    "binding_utilization",
    "ttft_s",
    "ttft_span_s",
    "tpot_s",
    "decode_path_fraction",
)


class _Extra(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ModesInput(_Extra):
    modes: tuple[str, ...] = Field(default=REPORT_MODES, min_length=1, max_length=20)

    @field_validator("modes")
    @classmethod
    def _known(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for name in v:
            if name not in MODE_TABLE:
                raise ValueError(f"unknown mode {name!r}; expected one of {', '.join(MODES)}")
        return v


class SimulateInput(ModesInput):
    modes: tuple[str, ...] = Field(default=("dualpath",), min_length=1, max_length=6)
    schedulers: tuple[Literal["queue_aware", "round_robin"], ...] = Field(
        default=("queue_aware",), min_length=1, max_length=2
    )
    seed: int = Field(default=0, ge=0, le=2**31)


class OrderingInput(ModesInput):
    modes: tuple[str, ...] = Field(min_length=2, max_length=20)


# A ratio's token counts: at least one token (an append of 0 has no FLOPs: an infinite
# ratio), at most 1e12 (the profiles' bound on any quantity), at most 1,000 contexts at once.
Tokens = Annotated[float, Field(ge=1, le=1e12, allow_inf_nan=False)]


class RatioInput(_Extra):
    context_tokens: tuple[Tokens, ...] = Field(min_length=1, max_length=1000)
    append_tokens: Tokens


class TrendInput(_Extra):
    base: str
    gpu: str
    # A dtype the GPU profiles know, or the lowest precision each GPU has.
    dtype: Literal["bf16", "fp8", "fp4", "best"] = "best"


class RecommendInput(_Extra):
    budget_nodes: int = Field(ge=2, le=4096)
    objective: str = "jct_s"


class NoInput(_Extra):
    pass


@record
class MetricKind:
    name: str
    extra: type[_Extra]
    compute: Callable[[Registry, ScenarioSpec, Any], dict[str, Value]]
    doc: str
    cluster: bool = False  # evaluates a cluster of nodes (their efficiencies apply)


def _modes(names: tuple[str, ...]) -> tuple[ModeName, ...]:
    return tuple(mode(n, "modes").name for n in names)


def _size(registry: Registry, spec: ScenarioSpec, extra: ModesInput) -> dict[str, Value]:
    from dualpath_plan.outcomes.serving import evaluate
    from dualpath_plan.scenario import Scenario

    modes = _modes(extra.modes)
    size = evaluate(Scenario.from_spec(registry, spec), spec.serving, modes)
    out: dict[str, Value] = {
        f"{m}.{k}": float(getattr(o, k)) for m, o in size.modes.items() for k in SIZE_METRICS
    }
    out |= {f"{m}{LABEL_SUFFIX}": o.bottleneck for m, o in size.modes.items()}
    if "basic" in modes and "dualpath" in modes:
        out["speedup.jct"] = size.speedup_jct
        if math.isfinite(size.speedup_aps):  # none where basic serves no agents
            out["speedup.aps"] = size.speedup_aps
    return out


# What a simulation reports as metrics (``MODE.SCHEDULER.NAME``).
SIMULATE_METRICS = (
    "throughput_turns_per_s",
    "jct_s",
    "snic_max_over_avg",
    "prefill_max_over_avg",
    "decode_path_fraction",
)


def _simulate(registry: Registry, spec: ScenarioSpec, extra: SimulateInput) -> dict[str, Value]:
    """The discrete-event simulation, offline (``agents`` started together), per mode and
    scheduler: its throughput, JCT and the balance of storage reads and prefill GPUs."""
    from dualpath_plan.outcomes.simulation import SimConfig, simulate
    from dualpath_plan.scenario import Scenario

    sc = Scenario.from_spec(registry, spec)
    out: dict[str, Value] = {}
    for m in _modes(extra.modes):
        for s in extra.schedulers:
            r = simulate(sc, SimConfig(mode=m, agents=spec.agents, scheduler=s, seed=extra.seed))
            for k in SIMULATE_METRICS:
                out[f"{m}.{s}.{k}"] = float(getattr(r, k))
    return out


def _ordering(registry: Registry, spec: ScenarioSpec, extra: OrderingInput) -> dict[str, Value]:
    """1 when the modes' JCTs fall strictly in the given order (the ablation), else 0."""
    from dualpath_plan.outcomes.serving import evaluate_mode
    from dualpath_plan.scenario import Scenario

    sc = Scenario.from_spec(registry, spec)
    jct = [evaluate_mode(sc, m, spec.serving).jct_s for m in _modes(extra.modes)]
    return {"holds": 1.0 if all(a > b for a, b in itertools.pairwise(jct)) else 0.0}


def _ratio(registry: Registry, spec: ScenarioSpec, extra: RatioInput) -> dict[str, Value]:
    from dualpath_plan.physics.model import cache_compute_ratio_gb_per_pflop

    m = registry.model(spec.model)
    return {
        f"gb_per_pflop.{int(c)}": float(cache_compute_ratio_gb_per_pflop(m, c, extra.append_tokens))
        for c in extra.context_tokens
    }


def _workload_ratio(registry: Registry, spec: ScenarioSpec, extra: NoInput) -> dict[str, Value]:
    from dualpath_plan.scenario import Scenario

    return {"gb_per_pflop": Scenario.from_spec(registry, spec).turn_demand.gb_per_pflop}


def _trend(registry: Registry, spec: ScenarioSpec, extra: TrendInput) -> dict[str, Value]:
    from dualpath_plan.physics.trend import trend

    gpus = [registry.gpu(g) for g in registry.ids("gpu")]
    rows = {r.gpu: r for r in trend(gpus, registry.gpu(extra.base), extra.dtype)}  # type: ignore[arg-type]
    if extra.gpu not in rows:
        raise PlanInputError(f"unknown gpu {extra.gpu!r}", field="gpu")
    row = rows[extra.gpu]
    return {
        "flops_x": row.flops_x,
        "pcie_x": row.pcie_x,
        "hbm_capacity_x": row.hbm_capacity_x,
        "io_fall": 1.0 / row.io_to_compute_x,
    }


def _bounds(registry: Registry, spec: ScenarioSpec, extra: NoInput) -> dict[str, Value]:
    from dualpath_plan.outcomes.paths import bottleneck_free_range
    from dualpath_plan.scenario import Scenario

    b = bottleneck_free_range(Scenario.from_spec(registry, spec))
    return {"pd_min": float(b.pd_min), "pd_max": float(b.pd_max)}


def _paths(registry: Registry, spec: ScenarioSpec, extra: ModesInput) -> dict[str, Value]:
    from dualpath_plan.outcomes.paths import explain_paths
    from dualpath_plan.scenario import Scenario

    sc = Scenario.from_spec(registry, spec)
    out: dict[str, Value] = {}
    for m in _modes(extra.modes):
        r = explain_paths(sc, m)
        out[f"{m}.saturated_turns_per_s"] = r.saturated_turns_per_s
        out[f"{m}.decode_path_fraction"] = r.decode_path_fraction
        out[f"{m}.lp_saturated_turns_per_s"] = r.lp.throughput_turns_per_s
        out[f"{m}{LABEL_SUFFIX}"] = " + ".join(r.binding)
    return out


def _recommend(registry: Registry, spec: ScenarioSpec, extra: RecommendInput) -> dict[str, Value]:
    from dualpath_plan.outcomes.recommend import Budget, recommend
    from dualpath_plan.scenario import Scenario

    rec = recommend(
        Scenario.from_spec(registry, spec),
        Budget(nodes=extra.budget_nodes),
        spec.serving,
        extra.objective,  # type: ignore[arg-type]
    )
    return {
        f"{m}.prefill_nodes": float(r.candidate.prefill_nodes) for m, r in rec.recommended.items()
    }


def _storage_ceiling(registry: Registry, spec: ScenarioSpec, extra: NoInput) -> dict[str, Value]:
    """dualpath / basic throughput when only the nodes' storage reads limit: (P+D)/P."""
    from dualpath_plan.physics.links import Demand, turn_load_columns
    from dualpath_plan.scenario.assemble import LinkSet
    from dualpath_plan.solvers.closed_form import solve

    P, D = float(spec.prefill_nodes), float(spec.decode_nodes)
    load = turn_load_columns(Demand(*(np.float64(v) for v in (1.3e9, 0.0, 0.0, 0.0, 6e13, 176.0))))
    capacity = {k: np.float64(math.inf) for k in load}
    capacity |= {"pe_snic_read": np.float64(50e9 * P), "de_snic_read": np.float64(50e9 * D)}
    t = {
        split: float(solve(LinkSet(load, capacity, split)).throughput_turns_per_s)  # type: ignore[arg-type]
        for split in ("pe_only", "optimal")
    }
    return {"ratio": t["optimal"] / t["pe_only"]}


# cluster=True: the kind evaluates a cluster of nodes, so their efficiencies apply.
KINDS: dict[str, MetricKind] = {
    k.name: k
    for k in (
        MetricKind("size", ModesInput, _size, "every mode's outcomes and the speedups", True),
        MetricKind("paths", ModesInput, _paths, "closed form and LP throughput, split", True),
        MetricKind("bounds", NoInput, _bounds, "the bottleneck-free P/D range", True),
        MetricKind("recommend", RecommendInput, _recommend, "the split per mode", True),
        MetricKind("ordering", OrderingInput, _ordering, "JCTs in an order of modes", True),
        MetricKind(
            "simulate", SimulateInput, _simulate, "the discrete-event simulation, offline", True
        ),
        MetricKind("ratio", RatioInput, _ratio, "cache-compute ratio at given contexts"),
        MetricKind("workload_ratio", NoInput, _workload_ratio, "a workload's mean ratio"),
        MetricKind("trend", TrendInput, _trend, "a GPU's factors against a base GPU"),
        MetricKind("storage_ceiling", NoInput, _storage_ceiling, "the (P+D)/P ceiling"),
    )
}


def parse_inputs(
    kind: str, inputs: Any, *, source: str | None = None, field_prefix: str = ""
) -> tuple[MetricKind, ScenarioSpec, _Extra]:
    """A kind's inputs checked strictly: the spec's fields and the kind's own, nothing else.
    Errors name ``field_prefix`` + the field (``scenarios[2].inputs.agents``)."""
    if kind not in KINDS:
        raise PlanInputError(
            f"unknown kind {kind!r}; expected one of {', '.join(KINDS)}",
            source=source,
            field=f"{field_prefix}kind",
        )
    if not isinstance(inputs, dict):
        raise PlanInputError(
            "expected a table of inputs", source=source, field=f"{field_prefix}inputs"
        )
    k = KINDS[kind]
    own = set(k.extra.model_fields)
    values = {n: tuple(v) if isinstance(v, list) else v for n, v in inputs.items()}
    spec = ScenarioSpec.build(
        {n: v for n, v in values.items() if n not in own},
        source=source or "inputs",
        field_prefix=f"{field_prefix}inputs.",
    )
    try:
        extra = k.extra.model_validate({n: v for n, v in values.items() if n in own})
    except ValidationError as exc:
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err["loc"]) or "inputs"
        msg = err["msg"]
        msg += echoed_input(err)
        raise PlanInputError(msg, source=source, field=f"{field_prefix}inputs.{field}") from None
    return k, spec, extra


def compute(
    kind: str, inputs: Any, registry: Registry, *, source: str | None = None
) -> dict[str, Value]:
    """Every metric of a kind for ``inputs`` (a dict: spec fields and the kind's own)."""
    k, spec, extra = parse_inputs(kind, inputs, source=source)
    return k.compute(registry, spec, extra)


__all__ = ["KINDS", "SIZE_METRICS", "MetricKind", "Value", "compute", "parse_inputs"]
