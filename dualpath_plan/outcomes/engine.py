"""One engine at one shape (``dualpath-plan engine``): a replica's prefill pass or decode step
by the operator model (physics/operators.py), with the layout, the memory it needs and where
its calibration comes from. ``size`` and every other command time their passes and steps
with the same model (physics/engines.py: ``operator_pass``, ``DecodeGroup.operators``)."""

from __future__ import annotations

import math

import numpy as np

from dualpath_plan.errors import PlanInputError
from dualpath_plan.frozen import record
from dualpath_plan.physics.operators import (
    EngineTiming,
    Layout,
    OperatorEngine,
    ScaleOut,
    check_layout,
    default_layout,
    kv_bytes_per_gpu,
    weight_bytes_per_gpu,
)
from dualpath_plan.physics.workload import context_window_limit
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.profiles.schemas import EngineProfile, GpuProfile, ModelProfile, NodeProfile
from dualpath_plan.scenario.provenance import describe_engine


@record
class EngineQuery:
    """What ``engine`` is asked: a phase, requests per attention-DP rank, each request's
    prompt tokens and its new (prefill: computed; decode: generated) tokens, a layout (None:
    the default) and whether at the datasheet rates."""

    phase: str
    batch: float  # the CLI takes whole numbers; a mean batch (size's) may be fractional
    context_tokens: float
    new_tokens: float | None = None
    tp: int | None = None
    dp: int | None = None
    ep: int | None = None
    speed_of_light: bool = False


@record
class EngineResult:
    model: ModelProfile
    node: NodeProfile
    gpu: GpuProfile
    engine: EngineProfile | None
    query: EngineQuery
    layout: Layout
    new_tokens: float
    attended_tokens: float  # the context the pass is timed at (decode: prompt + new / 2)
    timing: EngineTiming
    weight_gbyte_per_gpu: float
    kv_gbyte_per_gpu: float
    efficiencies: str

    @property
    def time_s(self) -> float:
        return float(self.timing.time_s)

    @property
    def sequences(self) -> float:
        """Requests of the whole replica (batch x attention-DP ranks)."""
        return float(self.query.batch * float(np.max(self.layout.dp)))

    @property
    def tokens_per_s(self) -> float:
        """Tokens the replica computes (prefill) or generates (decode) per second."""
        per_request = self.new_tokens if self.query.phase == "prefill" else 1.0
        return self.sequences * per_request / self.time_s


def engine_at(
    registry: Registry,
    model_id: str,
    node_id: str,
    gpu_id: str | None,
    engine_id: str | None,
    q: EngineQuery,
) -> EngineResult:
    """Time one pass or step; a layout, batch or context the model or GPU cannot run is a
    PlanInputError naming the flag."""
    model = registry.model(model_id)
    node = registry.node(node_id)
    gpu = registry.gpu(gpu_id or node.gpu)
    eid = engine_id or node.engine
    engine = registry.engine(eid) if eid is not None else None
    base = default_layout(model, node.gpus_per_node)
    layout = Layout(
        tp=q.tp if q.tp is not None else base.tp,
        dp=q.dp if q.dp is not None else (base.dp if q.tp is None else 1),
        ep=q.ep if q.ep is not None else (base.ep if q.tp is None and q.dp is None else 1),
    )
    check_layout(model, layout, node.gpus_per_node)
    c = q.context_tokens
    if q.phase == "prefill":
        new = c if q.new_tokens is None else q.new_tokens
        if new > c:
            raise PlanInputError(
                f"{new:,.0f} new tokens exceed the {c:,.0f}-token prompt (--context counts "
                "the cached and the new tokens)",
                field="--new-tokens",
            )
        attended = c
        longest = c
    else:
        new = 1.0 if q.new_tokens is None else q.new_tokens
        attended = c + new / 2.0  # as a decode group's mean step (physics/engines.py)
        longest = c + new
    if model.context_window_tokens is not None and longest > model.context_window_tokens:
        raise PlanInputError(
            (
                f"{longest:,.0f} tokens exceed"
                if q.phase == "prefill"
                else f"{c:,.0f} prompt tokens and {longest - c:,.0f} generated "
                f"({longest:,.0f}) exceed"
            )
            + f" {context_window_limit(model)}",
            field="--context",
        )
    weights = weight_bytes_per_gpu(model, layout)
    kv = float(kv_bytes_per_gpu(model, layout, q.batch, longest))
    hbm = gpu.hbm_gbyte * 1e9
    if weights >= hbm:
        raise PlanInputError(
            f"{model.id}'s weights take {weights / 1e9:,.1f} GB per GPU under "
            f"{layout.describe()}, more than the {gpu.hbm_gbyte:g} GB of a {gpu.id}; shard "
            "them over more GPUs (--tp, --ep)",
            field="--tp",
        )
    if weights + kv > hbm:
        fit = math.floor((hbm - weights) / (kv / q.batch))
        if fit < 1:
            raise PlanInputError(
                f"not one request of {longest:,.0f} tokens fits: its KV takes "
                f"{kv / q.batch / 1e9:,.1f} GB per GPU beside {weights / 1e9:,.1f} GB of "
                f"weights on a {gpu.hbm_gbyte:g} GB {gpu.id}; shorten --context or spread "
                "the KV over more GPUs (--tp)",
                field="--context",
            )
        raise PlanInputError(
            f"batch {q.batch} at {longest:,.0f} tokens needs {kv / 1e9:,.1f} GB of KV per GPU "
            f"beside {weights / 1e9:,.1f} GB of weights, more than the {gpu.hbm_gbyte:g} GB of "
            f"a {gpu.id}; at most {fit:,} fit{'' if fit != 1 else 's'}",
            field="--batch",
        )
    curves = None if q.speed_of_light else engine
    ops = OperatorEngine(model, gpu, curves, layout, ScaleOut.of(node, not q.speed_of_light))
    timing = (
        ops.prefill(float(q.batch), c, new)
        if q.phase == "prefill"
        else ops.decode(float(q.batch), attended)
    )
    if q.speed_of_light:
        eff = (
            "efficiencies: speed of light (--speed-of-light): datasheet rates, no launch "
            "latency; every time a lower bound"
        )
    elif engine is None:
        eff = (
            f"efficiencies: node '{node.id}' has no engine profile: the operator model at "
            "the datasheet rates (a lower bound of every time; size and the other commands "
            "time this node with its own roofline calibration); --engine ID gives measured "
            "curves"
        )
    else:
        eff = "efficiencies: " + describe_engine(engine, gpu.id)
    return EngineResult(
        model=model,
        node=node,
        gpu=gpu,
        engine=engine,
        query=q,
        layout=layout,
        new_tokens=new,
        attended_tokens=attended,
        timing=timing,
        weight_gbyte_per_gpu=weights / 1e9,
        kv_gbyte_per_gpu=kv / 1e9,
        efficiencies=eff,
    )
