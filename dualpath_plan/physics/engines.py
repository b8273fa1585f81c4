"""Engines: a prefill GPU's batching, a decode group's roofline, and the load imbalance a
scheduler leaves across engines (docs/model.md sections 4 and 6). The per-link capacities of a
cluster are assembled from these in one place, ``scenario/assemble.py``."""

from __future__ import annotations

import functools
import math
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from dualpath_plan.errors import InfeasibleError
from dualpath_plan.formatting import plain
from dualpath_plan.frozen import record
from dualpath_plan.memo import KeyedMemo
from dualpath_plan.physics import model as phys
from dualpath_plan.physics.latency import (
    layer_floor_s,
    replicas,
    replicated_weight_bytes,
    weight_bytes_per_gpu,
)
from dualpath_plan.physics.links import NicRates, Num, PathOptions
from dualpath_plan.profiles.schemas import EngineProfile, GpuProfile, ModelProfile, NodeProfile

# Module note: the operator model is imported where an engine profile is used, so a node
# without one (the testbed's) never loads it: 10 ms of a cold start (bench/bench_cold.py).
if TYPE_CHECKING:
    from dualpath_plan.physics.operators import OperatorEngine

SchedulerPolicy = Literal["ideal", "round_robin", "queue_aware"]

# The paper's engine and scheduler thresholds (section 6, A.4), read by the analytical model
# (``PrefillEngine.pass_batch``) and the simulation alike: a forward pass computes at most 300 ms
# of attention per layer (the request that overflows it is chunked), and the queue-aware
# scheduler gives a GPU more work only while its waiting work is at most beta, the tokens it
# prefills in 5 s at its largest batch ("profiled in advance"); alpha, what a node reads in 3 s,
# sets its read category.
QUOTA_PER_LAYER_S = 0.300
BETA_COMPUTE_S = 5.0
ALPHA_READ_S = 3.0


@record
class Scheduler:
    """Load imbalance across engines, as a max/avg factor that derates a side's usable
    aggregate capacity (the busiest node saturates first).

    - ideal: 1 (the paper's bottleneck analysis assumes load-balanced scheduling).
    - round_robin: requests dealt blindly; with k requests in flight per engine and a
      coefficient of variation v of per-request load, the busiest of n engines carries about
      1 + v sqrt(2 ln n / k) times the mean (expected maximum of n near-normal sums, a Gumbel
      approximation).
    - queue_aware: a token- and read-queue-aware scheduler like the paper's (Algorithm 1) keeps
      every node within one request of the mean: 1 + 1/k. Its GPUs are fed from one global
      queue whenever their waiting work falls below beta, so at saturation none idles: across
      GPUs 1 (``gpu_imbalance``); what it costs is the batch a GPU is let wait for
      (``PrefillEngine.pass_batch``), not an imbalance. The simulation of the paper's scheduler
      keeps the prefill GPUs' busy time at 1.00 max/avg when compute binds.
    """

    policy: SchedulerPolicy = "ideal"
    requests_per_engine: float = 16.0
    load_cv: float = 0.5

    def imbalance(self, engines: Num, requests_each: float | None = None) -> Num:
        """Max/avg load over ``engines`` units (a number or an array of them) with
        ``requests_each`` requests in flight each (default requests_per_engine)."""
        n = np.asarray(engines, dtype=np.float64)
        if self.policy == "ideal":
            out = np.ones_like(n)
        else:
            k = max(self.requests_per_engine if requests_each is None else requests_each, 1e-9)
            if self.policy == "round_robin":
                spread = self.load_cv * np.sqrt(2.0 * np.log(np.maximum(n, 1.0)) / k)
            else:
                spread = np.full_like(n, 1.0 / k)
            out = np.where(n <= 1, 1.0, 1.0 + spread)
        return float(out) if out.ndim == 0 else out

    def gpu_imbalance(self, gpus: Num) -> Num:
        """Max/avg load over ``gpus`` prefill GPUs: ``imbalance``'s, but 1 for the queue-aware
        scheduler (its global queue feeds every GPU, class docstring)."""
        if self.policy == "queue_aware":
            ones = np.ones_like(np.asarray(gpus, dtype=np.float64))
            return float(ones) if ones.ndim == 0 else ones
        return self.imbalance(gpus)

    @property
    def admits_by_beta(self) -> bool:
        """Whether a GPU is given work only while its waiting work is under beta (the paper's
        scheduler, section 6): its passes then hold at most what beta lets wait."""
        return self.policy == "queue_aware"

    def describe(self) -> str:
        if self.policy == "ideal":
            return "ideal"
        if self.policy == "queue_aware":
            return f"queue_aware, {plain(self.requests_per_engine)} requests per engine"
        return (
            f"{self.policy}, {plain(self.requests_per_engine)} requests per engine, "
            f"load cv {plain(self.load_cv)}"
        )


@record
class Scheduling:
    """Which scheduler each mode runs: the paper's queue-aware one (Algorithm 1) for the modes
    that have it, ``baseline`` for the others (Basic's framework dealt requests blindly), or one
    ``policy`` for every mode when given (``--scheduler``)."""

    policy: SchedulerPolicy | None = None
    baseline: SchedulerPolicy = "round_robin"
    requests_per_engine: float = 16.0
    load_cv: float = 0.5

    def scheduler(self, role: Literal["baseline", "queue_aware"]) -> Scheduler:
        policy = self.policy or (self.baseline if role == "baseline" else "queue_aware")
        return Scheduler(policy, self.requests_per_engine, self.load_cv)


def gpu_weight_bytes(model: ModelProfile, node: NodeProfile, gpu: GpuProfile, nodes: Num) -> Num:
    """Weight bytes on each GPU of a side of ``nodes`` nodes, by its parallel layout
    (physics/latency.py: replicas, the replicated and the sharded part)."""
    if np.ndim(nodes) == 0:
        # One node count: kept by model, weights_key and count (all it reads), so that a
        # cluster's checks, sides and engines, and the clusters of the intervals' perturbed
        # scenarios (the same layout), place the weights once.
        return _WEIGHT_BYTES.get(
            (model,),
            (*weights_key(node, gpu), float(nodes)),
            lambda: _gpu_weight_bytes(model, node, gpu, nodes),
            _WEIGHT_BYTES_EACH,
        )
    return _gpu_weight_bytes(model, node, gpu, nodes)


def _gpu_weight_bytes(model: ModelProfile, node: NodeProfile, gpu: GpuProfile, nodes: Num) -> Num:
    g = np.asarray(nodes, dtype=np.float64) * node.gpus_per_node
    return weight_bytes_per_gpu(model, g / np.asarray(replicas(model, node, gpu, nodes)))


# gpu_weight_bytes of one node count by model (identity), then by weights_key and the count:
# a number each, at most 256 of them for each of 4 models.
_WEIGHT_BYTES: KeyedMemo[tuple[float, ...], Num] = KeyedMemo(4)
_WEIGHT_BYTES_EACH = 256


def weights_key(node: NodeProfile, gpu: GpuProfile) -> tuple[int, float]:
    """All that the weights' placement reads of a node and its GPU: the GPUs per node and
    each one's HBM. ``gpu_weight_bytes``, ``weights_fit`` and ``check_weights_fit`` are
    functions of the model, the node count and this (tests/test_recommend_sweep.py holds
    them to it with stand-ins that have nothing else), so what they give may be kept under
    it (sweep's reasons)."""
    return node.gpus_per_node, gpu.hbm_gbyte


def weights_fit(model: ModelProfile, node: NodeProfile, gpu: GpuProfile, nodes: Num) -> np.ndarray:
    """Whether each GPU's share of the weights fits in its HBM."""
    return np.asarray(gpu_weight_bytes(model, node, gpu, nodes)) < gpu.hbm_gbyte * 1e9


def check_weights_fit(
    model: ModelProfile, node: NodeProfile, gpu: GpuProfile, nodes: float, side: str
) -> float:
    """HBM left for KV on a group of ``nodes`` nodes after the weights (each GPU holding its
    layout's share: physics/latency.py); raises when they do not fit."""
    hbm = nodes * node.gpus_per_node * gpu.hbm_gbyte * 1e9
    per_gpu = float(gpu_weight_bytes(model, node, gpu, nodes))
    if per_gpu >= gpu.hbm_gbyte * 1e9:
        weights = phys.weight_bytes(model)
        rep = replicated_weight_bytes(model)
        held = (
            f"{per_gpu / 1e9:,.1f} GB per GPU: {rep / 1e9:,.1f} GB held by every GPU "
            "(data-parallel attention) and its share of the routed experts"
            if rep
            else f"{per_gpu / 1e9:,.1f} GB per GPU"
        )
        # What every GPU holds whatever the node count: more nodes cannot make room for it.
        nodes_help = rep < gpu.hbm_gbyte * 1e9
        fix = (
            f"add {side} nodes or choose a GPU with more HBM"
            if nodes_help
            else f"no number of nodes holds it (every GPU holds {rep / 1e9:,.4g} GB); choose "
            "a GPU with more HBM"
        )
        raise InfeasibleError(
            f"{model.id} weights ({weights / 1e9:,.0f} GB; {held}) do not fit in the {side} "
            f"group's HBM ({nodes:g} x {node.gpus_per_node} x {gpu.hbm_gbyte:g} GB = "
            f"{hbm / 1e9:,.4g} GB); {fix}",
            field=f"{side}_nodes" if nodes_help else "gpu",
        )
    return hbm - per_gpu * nodes * node.gpus_per_node


@record
class DecodeGroup:
    """A decode group's roofline: step time of b sequences at a context (docs/model.md)."""

    model: ModelProfile
    hbm_byte_s: Num  # group HBM bandwidth x decode_hbm_efficiency (an array over groups)
    peak_flop_s: Num  # group dense peak x prefill_mfu
    # Latency floor of a step of b sequences: floor_s + b x floor_per_sequence_s (per-layer
    # fixed costs and EP/TP communication, physics/latency.py).
    floor_s: Num
    floor_per_sequence_s: Num
    free_hbm_bytes: Num  # HBM left for KV after every replica's weights (< 0: no fit)
    context_tokens: float  # mean context a generated token attends to
    kv_bytes_per_sequence: float  # KV of one sequence at the end of its generation
    # Model replicas the group runs (physics/latency.py, replicas): each holds its weights and
    # a share of the batch, and steps on its own share of the bandwidth and compute.
    replicas: Num = 1.0
    gpus: Num = 1.0  # GPUs of the group
    replicated_bytes: float = 0.0  # weights every GPU holds and reads each step (EP + DP attn)
    # The operator model (physics/operators.py) where the node has an engine profile: a step
    # of b sequences is a replica's pass at b / (replicas x dp) sequences per attention-DP
    # rank (at least one: a partly filled replica's ranks step together); the roofline
    # fields above then only describe the group.
    operators: OperatorEngine | None = None

    @property
    def max_batch(self) -> int:
        return int(np.asarray(self.max_batch_array()).reshape(-1)[0])

    def max_batch_array(self) -> np.ndarray:
        """Sequences that fit: each replica holds a whole number of them."""
        r = np.asarray(self.replicas, dtype=np.float64)
        per_replica = np.floor(np.asarray(self.free_hbm_bytes) / r / self.kv_bytes_per_sequence)
        return np.maximum(per_replica, 0.0) * r

    def tokens_per_s_array(self) -> np.ndarray:
        """Tokens/s at the HBM-limited batch, per group (NaN where not one sequence fits)."""
        b = self.max_batch_array()
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = b / self.step_array_s(np.maximum(b, 1.0))
        return np.where(b >= 1, rate, np.nan)

    def step_array_s(self, batch: np.ndarray) -> np.ndarray:
        """max(HBM bytes / bandwidth, FLOPs / peak) + the latency floor, for an array of
        batches."""
        r = np.asarray(self.replicas, dtype=np.float64)
        if self.operators is not None:
            return self.operators.decode(self.batch_per_rank(batch), self.context_tokens).time_s
        # Each replica steps its share of the batch on its share of the group; within it, every
        # GPU reads the replicated weights in full and its share of the rest (the touched
        # experts, its sequences' KV).
        cost = _decode_step(self.model, np.asarray(batch) / r, self.context_tokens)
        rep = np.minimum(self.replicated_bytes, cost.weight_bytes - cost.routed_weight_bytes)
        hbm_s = (rep * np.asarray(self.gpus) + (cost.hbm_bytes - rep) * r) / self.hbm_byte_s
        return (
            np.maximum(hbm_s, cost.flops * r / self.peak_flop_s)
            + self.floor_s
            + batch * self.floor_per_sequence_s
        )

    def batch_per_rank(self, batch: Num) -> np.ndarray:
        """Sequences per attention-DP rank of a replica at a group batch (operator model)."""
        assert self.operators is not None
        r = np.asarray(self.replicas, dtype=np.float64)
        dp = np.asarray(self.operators.layout.dp, dtype=np.float64)
        return np.maximum(np.asarray(batch, dtype=np.float64) / (r * dp), 1.0)

    def floor_array_s(self, batch: np.ndarray) -> np.ndarray:
        """The latency floor of a step alone (no roofline), for an array of batches: with the
        operator model, its communication and fixed (norms, embedding) operators."""
        if self.operators is not None:
            cat = self.operators.decode(self.batch_per_rank(batch), self.context_tokens)
            parts = cat.by_category()
            return np.asarray(parts["communication"] + parts["fixed"])
        return np.asarray(self.floor_s + batch * self.floor_per_sequence_s)

    def entry(self, i: int) -> DecodeGroup:
        """Entry i of a group built over an array of node counts, as the group of that count
        alone (the same numbers: each field is computed elementwise). Every field that may
        be an array over groups is picked here."""

        def pick(v: Num) -> float:
            a = np.asarray(v, dtype=np.float64)
            return float(a) if a.ndim == 0 else float(a.reshape(-1)[i])

        if all(type(getattr(self, f)) is float for f in _PER_GROUP):
            return self  # a group of one node count: its own entry (and its step table)
        picked: dict[str, Any] = {f: pick(getattr(self, f)) for f in _PER_GROUP}
        if self.operators is not None:
            lay = self.operators.layout
            picked["operators"] = replace(
                self.operators, layout=replace(lay, dp=pick(lay.dp), ep=pick(lay.ep))
            )
        return replace(self, **picked)

    @property
    def step_table(self) -> tuple[np.ndarray, np.ndarray]:
        """Batches and their step times, tabulated (one group)."""
        return self._grid

    @functools.cached_property
    def _grid(self) -> tuple[np.ndarray, np.ndarray]:
        # Step time is smooth in the batch: tabulate it once (integers up to 4096, then a
        # geometric grid) and interpolate, instead of re-deriving it inside every bisection.
        top = max(self.max_batch, 1)
        grid = np.sort(
            np.concatenate(
                [np.arange(1.0, min(top, 4096) + 1.0), np.geomspace(min(top, 4096), top, 256)]
            )
        )
        # Each value once (np.unique's result without the numpy.ma import it costs, a start-up
        # of every command: see tests/test_cold_start.py).
        b = grid[np.concatenate(([True], grid[1:] != grid[:-1]))]
        t = self.step_array_s(b)
        # Read-only: a group of one node count is shared (decode_group keeps it).
        b.flags.writeable = t.flags.writeable = False
        return b, t

    def step_s(self, batch: float) -> float:
        b, t = self._grid
        if 1.0 <= batch <= b[-1]:
            return float(np.interp(batch, b, t))
        return float(self.step_array_s(np.asarray(float(batch)))[()])

    def little_batch(self, turns_per_s: float, generated_tokens: float) -> float:
        """Decode batch b with b = rate x generated x TPOT(b) (Little), at most max_batch."""
        b, t = self._grid
        ok = turns_per_s * generated_tokens * t <= b
        if not ok.any():
            return float(b[-1])
        k = int(np.argmax(ok))
        if k == 0:
            return max(float(turns_per_s * generated_tokens * t[0]), 0.0)
        # Linear crossing between grid points k-1 (not ok) and k (ok).
        f0 = turns_per_s * generated_tokens * t[k - 1] - b[k - 1]
        f1 = turns_per_s * generated_tokens * t[k] - b[k]
        return float(b[k - 1] + (b[k] - b[k - 1]) * f0 / (f0 - f1))


# The fields of a DecodeGroup that may be arrays over groups (``entry`` picks them).
_PER_GROUP = (
    "hbm_byte_s",
    "peak_flop_s",
    "floor_s",
    "floor_per_sequence_s",
    "free_hbm_bytes",
    "replicas",
    "gpus",
)


# decode_step's costs by model (identity) and then by batches and context (their values):
# the same few arrays of batches come back scenario after scenario of a sweep (a decode step
# at one sequence per replica, or at each group's HBM-limited batch), each a dozen array
# operations to cost. Arrays of at most 1,024 batches, 64 of them for each of 4 models: at
# most 8 MB of costs.
_STEP_COSTS: KeyedMemo[tuple[object, ...], phys.DecodeStepCost] = KeyedMemo(4)
_STEP_COSTS_EACH = 64
_STEP_COSTS_MAX_BATCHES = 1024


def _decode_step(model: ModelProfile, batch: np.ndarray, context: float) -> phys.DecodeStepCost:
    """``phys.decode_step(model, batch, context)``, kept for a small float64 array of
    batches: the cost is a function of the model and the values of the batches and context
    (its arrays read-only, shared by every caller that asks with the same values)."""
    b = np.asarray(batch)
    if b.dtype != np.float64 or b.size > _STEP_COSTS_MAX_BATCHES:
        return phys.decode_step(model, b, context)

    def compute() -> phys.DecodeStepCost:
        cost = phys.decode_step(model, b, context)
        for v in vars(cost).values():
            if isinstance(v, np.ndarray):
                v.flags.writeable = False
        return cost

    key = (float(context), b.shape, b.tobytes())
    return _STEP_COSTS.get((model,), key, compute, _STEP_COSTS_EACH)


# Decode groups of one node count by model, node and GPU (identity), then by the count, the
# turn and the efficiencies: a cluster asks for its group three times (paths.check_decode_fits,
# and the decode side of each scheduler), and each group builds its step table on first use.
_DECODE_GROUPS: KeyedMemo[tuple[float, float, float, bool], DecodeGroup] = KeyedMemo(64)
_DECODE_GROUPS_EACH = 64


def decode_group(
    model: ModelProfile,
    node: NodeProfile,
    gpu: GpuProfile,
    nodes: Num,
    context_tokens: float,
    generated_tokens: float,
    efficiencies: bool = True,
    engine: EngineProfile | None = None,
) -> DecodeGroup:
    """The decode group of ``nodes`` nodes (a number or an array); ``free_hbm_bytes`` < 0
    marks groups where the weights do not fit (callers that need an error call
    :func:`check_weights_fit` first). With an ``engine`` profile its steps are the operator
    model's (physics/operators.py). A group of one node count is kept (frozen, its step
    table read-only), and given again for the same objects and values; a group over an
    array of node counts is given again where its fields are the same (``_interned``)."""
    if np.ndim(nodes) != 0:
        return _interned(
            _decode_group(
                model, node, gpu, nodes, context_tokens, generated_tokens, efficiencies, engine
            )
        )
    return _DECODE_GROUPS.get(
        (model, node, gpu, engine),
        (float(nodes), float(context_tokens), float(generated_tokens), bool(efficiencies)),
        lambda: _decode_group(
            model, node, gpu, nodes, context_tokens, generated_tokens, efficiencies, engine
        ),
        _DECODE_GROUPS_EACH,
    )


# Decode groups over arrays of node counts by model (identity), then by their fields' values
# (``_interned``): at most 64 for each of 16 models.
_GROUPS_BY_VALUE: KeyedMemo[tuple[object, ...], DecodeGroup] = KeyedMemo(16)
_GROUPS_BY_VALUE_EACH = 64


def _interned(group: DecodeGroup) -> DecodeGroup:
    """The group kept for these field values, ``group`` the first time. A group is a frozen
    record whose steps read its fields alone, so one of the same fields (each by its type,
    shape and bits) is the same group: a sweep's combinations of profile values that the
    decode side does not read (a storage NIC's rate) build equal groups, and what is kept per
    group object (its step table, ``serving._group_steps``; its step of one) is then
    computed once. A group with the operator model (an engine object of its own) is its own."""
    if group.operators is not None:
        return group
    key = tuple(
        (type(v).__name__, a.dtype.str, a.shape, a.tobytes())
        for v, a in ((v, np.asarray(v)) for v in _group_values(group))
    )
    return _GROUPS_BY_VALUE.get((group.model,), key, lambda: group, _GROUPS_BY_VALUE_EACH)


def _group_values(group: DecodeGroup) -> tuple[Num, ...]:
    """Every field of a group but its model and operator model."""
    return tuple(
        getattr(group, f.name) for f in fields(group) if f.name not in ("model", "operators")
    )


def _decode_group(
    model: ModelProfile,
    node: NodeProfile,
    gpu: GpuProfile,
    nodes: Num,
    context_tokens: float,
    generated_tokens: float,
    efficiencies: bool,
    engine: EngineProfile | None = None,
) -> DecodeGroup:
    r = replicas(model, node, gpu, nodes)
    gpus_all = np.asarray(nodes, dtype=np.float64) * node.gpus_per_node
    free: Num = gpus_all * (
        gpu.hbm_gbyte * 1e9 - np.asarray(gpu_weight_bytes(model, node, gpu, nodes))
    )
    if np.ndim(free) == 0:
        free = float(free)
    gpus = np.asarray(nodes, dtype=np.float64) * node.gpus_per_node
    e = efficiencies
    tflops = gpu.dense_tflops(model.compute_dtype) or gpu.bf16_dense_tflops
    ctx = context_tokens + generated_tokens / 2.0
    scalar = np.ndim(nodes) == 0
    bw = gpus * gpu.hbm_tbyte_s * 1e12 * (node.decode_hbm_efficiency if e else 1)
    peak = gpus * tflops * 1e12 * (node.prefill_mfu if e else 1)
    # The floor is linear in the batch: its value at 0 and its slope.
    floor0 = layer_floor_s(model, node, gpu, gpus, 0.0, efficiencies=e)
    slope = np.asarray(layer_floor_s(model, node, gpu, gpus, 1.0, efficiencies=e)) - floor0
    operators = None
    if engine is not None:
        from dualpath_plan.physics.operators import (  # see the module note
            OperatorEngine,
            ScaleOut,
            replica_layout,
        )

        operators = OperatorEngine(
            model,
            gpu,
            engine if e else None,
            replica_layout(model, node.gpus_per_node, gpus / np.asarray(r)),
            ScaleOut.of(node, e),
        )
    return DecodeGroup(
        model=model,
        hbm_byte_s=float(bw) if scalar else bw,
        peak_flop_s=float(peak) if scalar else peak,
        floor_s=float(floor0) if scalar else np.asarray(floor0),
        floor_per_sequence_s=float(slope) if scalar else slope,
        free_hbm_bytes=free,
        replicas=r,
        gpus=float(gpus) if scalar else gpus,
        replicated_bytes=replicated_weight_bytes(model),
        operators=operators,
        context_tokens=ctx,
        kv_bytes_per_sequence=float(
            phys.kv_bytes_for_context(model, context_tokens + generated_tokens)
        ),
    )


@record
class PrefillEngine:
    """One prefill GPU's batching (paper Figure 3 right, docs/model.md section 6), per request
    (= per turn): a forward pass of b requests takes tau(b) = t0 + b u, t0 = h t1, u = t1 + s,
    t1 the compute of one request at the plateau, s the KV copy into HBM when it is serialized
    with compute (no layer-wise prefill). The batch is capped by the HBM left for KV."""

    # Numbers, or arrays over prefill node counts where the operator model times each
    # count's own layout (a sweep).
    t1_s: Num  # compute of one request at the plateau
    t0_s: Num  # fixed time per forward pass: h t1, at least the per-layer latency floor
    copy_s: float  # KV copy into HBM serialized with compute (no layer-wise prefill)
    batch_cap: Num  # most requests per forward pass (an array over prefill node counts)
    read_latency_s: float  # part of the KV read a request waits for before its prefill
    free_hbm_bytes: Num  # HBM per GPU left for the batch's KV
    kv_bytes_per_request: float  # what one request holds in HBM during its pass
    # GPUs one request's pass spans (a tensor-parallel replica's TP degree): a pass of one
    # request is 1 / request_gpus request per GPU, so its time is the replica's pass, not
    # request_gpus times it (the operator model; 1 for the one-MFU model's GPU engine).
    request_gpus: float = 1.0
    # What times the pass (the efficiencies line): the operator model's engine, or "".
    timed_by: str = ""
    # The engine's compute quota of a forward pass (QUOTA_PER_LAYER_S per layer; inf: none)
    # and, under a scheduler that admits by beta, beta's seconds (BETA_COMPUTE_S; 0: no such
    # scheduler): with the HBM cap they bound the batch a saturated GPU's pass holds.
    pass_quota_s: float = math.inf
    admission_s: float = 0.0
    # The batches and the rate below are computed once per engine (functools.cached_property:
    # the fields are frozen), as each assembly reads them several times over.

    @property
    def u_s(self) -> Num:
        return self.t1_s + self.copy_s

    @property
    def single_pass_s(self) -> Num:
        """A forward pass holding one request: its replica's pass."""
        return self.forward_s(1.0 / self.request_gpus)

    def forward_s(self, batch: float) -> Num:
        return self.t0_s + batch * self.u_s

    def one_cluster(self) -> PrefillEngine:
        """This engine of one cluster, its times as numbers (an engine built for one node
        count: size, simulate)."""
        # .item(): one value, of any shape (an engine of many clusters is an error here).
        t0, t1 = np.asarray(self.t0_s).item(), np.asarray(self.t1_s).item()
        return replace(self, t0_s=float(t0), t1_s=float(t1))

    @functools.cached_property
    def quota_batch(self) -> Num:
        """Requests per GPU a pass computes within the quota: (quota - t0) / u, at least one
        request of its replica (a pass starts with one, whole; the next is chunked)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            b = np.maximum(
                (self.pass_quota_s - np.asarray(self.t0_s)) / np.asarray(self.u_s),
                1.0 / self.request_gpus,
            )
        return float(b) if np.ndim(b) == 0 else b

    @functools.cached_property
    def admitted_batch(self) -> Num:
        """Requests per GPU the scheduler lets wait for a busy GPU (inf without admission):
        beta, the requests it prefills in ``admission_s`` at its largest batch b* (the HBM
        cap and the quota's, at least one request of its replica), S b* / (t0 + b* u). At
        saturation the next pass takes them all (the running pass is not counted: one request
        more may slip in, as a GPU under beta takes the next turn whole)."""
        if self.admission_s <= 0:
            return math.inf
        largest = np.maximum(
            np.minimum(np.asarray(self.batch_cap), self.quota_batch), 1.0 / self.request_gpus
        )
        b = self.admission_s * largest / (np.asarray(self.t0_s) + largest * np.asarray(self.u_s))
        # At least one request of its replica: a GPU under beta takes the next turn whole,
        # however long its pass (DeepSeek-V3 on DGX A100, 13 s a pass and 5.5 s a request,
        # gave 0.27 requests a pass where the simulation's passes hold one or more).
        b = np.maximum(b, 1.0 / self.request_gpus)
        return float(b) if np.ndim(b) == 0 else b

    @functools.cached_property
    def pass_batch(self) -> Num:
        """Requests per GPU in a saturated GPU's pass: the least of the HBM cap, the quota's
        and the admitted batch (docs/model.md section 4)."""
        b = np.minimum(
            np.minimum(np.asarray(self.batch_cap), self.quota_batch), self.admitted_batch
        )
        return float(b) if np.ndim(b) == 0 else b

    def batch_limit(self) -> str:
        """What sets ``pass_batch``: the HBM cap, the compute quota or the admission (beta);
        the first of them on a tie (one cluster, or each count's at the first)."""
        cap = float(np.ravel(np.asarray(self.batch_cap))[0])
        quota = float(np.ravel(np.asarray(self.quota_batch))[0])
        admitted = float(np.ravel(np.asarray(self.admitted_batch))[0])
        least = min(cap, quota, admitted)
        if cap <= least:
            return "HBM"
        return "compute quota" if quota <= least else "admission (beta)"

    @functools.cached_property
    def max_rate(self) -> Num:
        """Requests/s of one GPU at its pass batch (0 where not one request fits its HBM)."""
        cap = np.asarray(self.batch_cap)
        b = np.asarray(self.pass_batch)
        with np.errstate(divide="ignore", invalid="ignore"):  # 0 / 0 where none fits: 0 below
            rate = np.where(cap >= 1, b / (self.t0_s + b * self.u_s), 0.0)
        return float(rate) if rate.ndim == 0 else rate


def prefill_engine(
    model: ModelProfile,
    node: NodeProfile,
    gpu: GpuProfile,
    *,
    hit_bytes: float,
    prefill_flops: float,
    context_tokens: float,
    layerwise: bool,
    io_free: bool,
    nodes: Num,
    efficiencies: bool = True,
    engine: EngineProfile | None = None,
    append_tokens: float | None = None,
    pcie_link_limit: bool = True,
    admission_s: float = 0.0,
) -> PrefillEngine:
    """Batching parameters of one prefill GPU for a mean turn; ``nodes`` (prefill nodes, a
    number or an array) sets the weight shard and so the batch cap (< 1: not one request
    fits). With an ``engine`` profile the pass is the operator model's (``operator_pass``);
    ``append_tokens`` (the mean turn's) is then needed. ``admission_s``: beta's seconds
    where the scheduler admits by it (``Scheduler.admits_by_beta``), else 0."""
    e = efficiencies
    tflops = gpu.dense_tflops(model.compute_dtype) or gpu.bf16_dense_tflops
    peak = tflops * 1e12 * (node.prefill_mfu if e else 1.0)
    t1: Num = prefill_flops / peak
    request_gpus, timed_by = 1.0, ""
    if engine is not None:
        assert append_tokens is not None
        from dualpath_plan.physics.operators import (  # see the module note
            OperatorEngine,
            ScaleOut,
            replica_layout,
        )

        ops = OperatorEngine(
            model,
            gpu,
            engine if e else None,
            replica_layout(model, node.gpus_per_node, _replica_gpus(model, node, gpu, nodes)),
            ScaleOut.of(node, e),
        )
        t0_op, t1, request_gpus = operator_pass(ops, context_tokens, append_tokens)
        timed_by = ops.describe()
    # HBM per GPU left for KV: weights shard over the prefill group's GPUs (EP).
    reserve = node.prefill_hbm_reserve_gbyte if e else 0.0
    # Each GPU holds its layout's share of the weights (physics/latency.py).
    free = (gpu.hbm_gbyte - reserve) * 1e9 - np.asarray(gpu_weight_bytes(model, node, gpu, nodes))
    kv_request = float(phys.kv_bytes_for_context(model, context_tokens))
    per_request = kv_request / model.num_layers if layerwise else kv_request
    # The batch cap as an average (fractional) number of requests: batches of alternating
    # sizes average out, and it keeps the model smooth in its inputs.
    cap = np.maximum(free / per_request, 0.0)
    # The NIC rates the assembly's capacities use (physics/links.py NicRates): the KV
    # read through the storage NICs, its copy into HBM through a compute NIC's PCIe side.
    rates = NicRates.of(node, PathOptions(efficiencies=e, pcie_link_limit=pcie_link_limit))
    snic, loopback = rates.snic, rates.cnic_slot
    if io_free:
        copy, read = 0.0, 0.0
    elif layerwise:
        # Layer blocks stream into HBM while earlier layers compute (the copy is hidden), but
        # the store holds Full Blocks, every layer of 64 tokens (paper 4.1, A.5): a layer's KV
        # of all cached tokens is in the buffer only once every block has been read, so the
        # storage read precedes the first layer, whole (the simulation's order too).
        copy, read = 0.0, hit_bytes / snic
    else:
        copy, read = hit_bytes / loopback, hit_bytes / snic
    if engine is not None:
        t0 = t0_op
    else:
        h = node.prefill_batch_half_requests
        # A forward pass takes at least the per-layer latency floor (its EP transfers overlap
        # compute). Figure 3's h t1 is a measured fixed time that already contains the floor,
        # so the floor bounds it from below rather than adding to it: it binds only where t1
        # is small (small models, fast GPUs), where h t1 alone would promise free batch-1
        # passes.
        floor = float(
            layer_floor_s(
                model, node, gpu, node.gpus_per_node, 0.0, bandwidth=False, efficiencies=e
            )
        )
        t0 = max(h * t1, floor)
    scalar = np.ndim(cap) == 0
    return PrefillEngine(
        request_gpus=request_gpus,
        timed_by=timed_by,
        t1_s=t1,
        t0_s=t0,
        copy_s=copy,
        batch_cap=float(cap) if scalar else cap,
        read_latency_s=read,
        free_hbm_bytes=float(free) if scalar else free,
        kv_bytes_per_request=per_request,
        pass_quota_s=QUOTA_PER_LAYER_S * model.num_layers,
        admission_s=admission_s,
    )


# Requests per attention-DP rank at which the operator model's pass is taken as saturated:
# the pass of b requests is linear between b = 1 and b = this (tau(b) = t0 + b u), and
# extrapolated beyond it.
SATURATED_REQUESTS_PER_RANK = 16.0


def _replica_gpus(model: ModelProfile, node: NodeProfile, gpu: GpuProfile, nodes: Num) -> Num:
    """GPUs of one replica on a side of ``nodes`` nodes (elementwise for an array: each node
    count its own layout, so a sweep's point is the cluster size gives alone)."""
    n = np.asarray(nodes, dtype=np.float64)
    r = np.asarray(replicas(model, node, gpu, n), dtype=np.float64)
    out = np.maximum(n, 1.0) * node.gpus_per_node / r
    return float(out) if out.ndim == 0 else out


def operator_pass(
    ops: OperatorEngine, context_tokens: float, append_tokens: float
) -> tuple[Num, Num, float]:
    """(t0, t1, request_gpus) of a prefill GPU from the operator model: the replica's pass
    T(b) of b requests per attention-DP rank (each ``append_tokens`` after the rest of its
    ``context_tokens`` cached) as t0 + b T1 through b = 1 and SATURATED_REQUESTS_PER_RANK;
    per GPU (the PrefillEngine's unit: requests per GPU per pass) t1 = T1 x request_gpus,
    request_gpus = the GPUs of a rank (its TP degree), so that a pass of b requests per rank
    is t0 + (b / request_gpus) x t1 = T(b)."""
    shape = np.broadcast(np.asarray(ops.layout.dp), np.asarray(ops.layout.ep)).shape
    b = np.array([1.0, SATURATED_REQUESTS_PER_RANK]).reshape((2,) + (1,) * len(shape))
    t = np.asarray(ops.prefill(b, context_tokens, append_tokens).time_s)
    slope = np.maximum((t[1] - t[0]) / (b[1] - b[0]), 1e-12)
    t0 = np.maximum(t[0] - slope, 0.0)
    request_gpus = float(ops.layout.tp)
    if slope.ndim == 0:
        return float(t0), float(slope) * request_gpus, request_gpus
    return t0, slope * request_gpus, request_gpus
