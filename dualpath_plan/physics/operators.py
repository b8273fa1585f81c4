"""The operator model: a prefill pass or a decode step of one model replica as the sum, over
the model's layers, of its operators' times (docs/model.md section 6b).

Each operator is timed on one GPU of the replica at the shape the parallel layout gives it
(``Layout``: tensor parallel ``tp``, attention data parallel ``dp``, expert parallel ``ep``)
as a roofline with a measured, shape-dependent efficiency (``OperatorCurve``):

    t = launch + max(F / (P e_c s(x)), B / (W e_m))

F the operator's FLOPs, B its HBM bytes, P the GPU's dense peak at the operator's dtype, W
its HBM bandwidth, and s(x) the share of the GPU the shape keeps busy. The curves come from
an engine profile (a framework's kernels measured on a GPU, bench/fit_engine.py); without one
(``curves=None``) every operator runs at its datasheet roofline with no launch cost, the
speed of light. The structure follows AIConfigurator's and GenZ's operator graphs
(reference/peer-tools.md): per layer the attention projections, the attention core, the
dense FFN or the MoE block (router, shared experts, routed experts), the norms and
activations, and the layout's communication (two TP all-reduces per layer; an EP dispatch
and combine per MoE layer with attention data parallelism); per pass the embedding, and the
LM head over the last token of each request.

Everything broadcasts over arrays of batch, context and new tokens.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from dualpath_plan.errors import PlanInputError
from dualpath_plan.formatting import plain
from dualpath_plan.frozen import record
from dualpath_plan.physics import model as phys
from dualpath_plan.physics.latency import network_byte_s_per_gpu
from dualpath_plan.profiles.schemas import (
    EngineProfile,
    GpuProfile,
    ModelProfile,
    NodeProfile,
    OperatorCurve,
)

# Operator categories of a breakdown, in report order.
CATEGORIES: tuple[str, ...] = ("gemm", "attention", "moe", "communication", "fixed")
# What bounds an operator: its compute at the curve's efficiency, its HBM bytes, or the
# launch latency (the fixed part is more than half its time).
BOUNDS: tuple[str, ...] = ("flops", "hbm", "latency")
# BF16 activations (norm inputs, all-reduce and combine payloads).
ACTIVATION_BYTES = 2.0
# GEMM output tiles are 128 x 128 (CUTLASS / DeepGEMM Hopper and Blackwell defaults).
TILE = 128.0


@record
class Layout:
    """A replica's parallel layout: ``tp`` GPUs share each attention and dense layer
    (tensor parallel), ``dp`` such groups run attention on their own requests (attention
    data parallel), and the MoE layers' experts are split over ``ep`` GPUs (expert
    parallel), each holding 1/moe_tp of every local expert's width. A replica has tp x dp
    GPUs; ep divides them. ``dp`` and ``ep`` may be arrays (a side's GPUs over a sweep of
    node counts: a MoE replica spans the side)."""

    tp: int = 1
    dp: float | np.ndarray = 1
    ep: float | np.ndarray = 1

    @property
    def gpus(self) -> float | np.ndarray:
        return self.tp * self.dp

    @property
    def moe_tp(self) -> float | np.ndarray:
        return self.gpus / self.ep

    def describe(self) -> str:
        parts = [f"TP{self.tp}"]
        dp, ep = float(np.max(self.dp)), float(np.max(self.ep))
        if dp > 1:
            parts.append(f"DP{plain(dp)} attention")
        if ep > 1:
            parts.append(f"EP{plain(ep)}")
        if self.moe_tp_scalar > 1 and ep > 1:
            parts.append(f"MoE TP{plain(self.moe_tp_scalar)}")
        return " ".join(parts)

    @property
    def moe_tp_scalar(self) -> float:
        return float(np.max(self.moe_tp))


# The grouped-GEMM curve of each expert weight dtype.
MOE_CURVES = {"bf16": "moe_bf16", "fp8": "moe_fp8", "fp4": "moe_fp4"}


def moe_compute_dtype(expert_dtype: str, compute_dtype: str) -> str:
    """The tensor-core rate of an expert GEMM: the wider of its weights' and the model's
    compute dtype (MXFP4 experts of a BF16 model are weight-only, w4a16, as SGLang serves
    gpt-oss; FP8 experts of an FP8 model run at FP8)."""
    order = ("fp4", "fp8", "bf16")
    return max(expert_dtype, compute_dtype, key=order.index)


def moe_tiles(
    local_experts: ArrayLike, tokens_per_expert: ArrayLike, expert_inter: ArrayLike
) -> np.ndarray:
    """Output tiles (128 x 128) of one rank's gate-up GEMM over its local experts: what keeps
    the GPU's SMs busy (a rank of one narrow expert leaves most idle)."""
    return (
        np.asarray(local_experts, dtype=np.float64)
        * np.ceil(np.asarray(tokens_per_expert, dtype=np.float64) / TILE)
        * np.ceil(2.0 * np.asarray(expert_inter, dtype=np.float64) / TILE)
    )


def moe_slot_bytes(
    tokens: ArrayLike, top_k: float, hidden: float, expert_inter: ArrayLike
) -> np.ndarray:
    """The routed slots' activation rows of one MoE layer: every token x top-k slot reads and
    writes its hidden row (dispatch in, combine out) and its expert-width rows (gate-up out,
    activation in and out, down in), BF16: (2 hidden + 6 width) x 2 bytes a slot."""
    t = np.asarray(tokens, dtype=np.float64)
    return t * top_k * (2.0 * hidden + 6.0 * np.asarray(expert_inter, dtype=np.float64)) * 2.0


@record
class _PowerLaw:
    """Per-expert routing weights x ~ x^-alpha on [lo, hi]: [1, 0.8 T] for T tokens of top-k
    over E experts, [0.01, 2] when T k <= E (AIConfigurator's collector, power_law_logits_v3,
    the routing its MoE tables were measured under). Each expert's load is round(c x), c = T k
    / (E mean): the slots per unit of weight."""

    a: np.ndarray
    lo: np.ndarray
    hi: np.ndarray

    @classmethod
    def of(cls, tokens: np.ndarray, top_k: float, experts: float, alpha: float) -> _PowerLaw:
        a = 1.0 + 1e-9 if alpha == 1.0 else alpha
        big = tokens * top_k > experts
        lo = np.where(big, 1.0, 0.01)
        hi = np.where(big, np.maximum(0.8 * tokens, 1.0 + 1e-6), 2.0)
        return cls(np.full_like(lo, a), lo, hi)

    def _g(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(x ** (1.0 - self.a), dtype=np.float64)

    def quantile(self, q: float) -> np.ndarray:
        g_lo, g_hi = self._g(self.lo), self._g(self.hi)
        return np.asarray(((g_hi - g_lo) * q + g_lo) ** (1.0 / (1.0 - self.a)))

    def survival(self, x: np.ndarray) -> np.ndarray:
        """P(weight >= x)."""
        xc = np.clip(x, self.lo, self.hi)
        return np.asarray((self._g(xc) - self._g(self.hi)) / (self._g(self.lo) - self._g(self.hi)))

    def mean(self) -> np.ndarray:
        a, lo, hi = self.a, self.lo, self.hi
        z = (self._g(hi) - self._g(lo)) / (1.0 - a)
        with np.errstate(divide="ignore", invalid="ignore"):
            m = np.where(
                np.abs(a - 2.0) < 1e-9,
                np.log(hi / lo) / z,
                (hi ** (2.0 - a) - lo ** (2.0 - a)) / (2.0 - a) / z,
            )
        return np.asarray(m)


def hottest_rank_load(
    tokens: ArrayLike, top_k: float, experts: float, ep: ArrayLike, alpha: float | None
) -> np.ndarray:
    """The most loaded expert-parallel rank's routed tokens over the mean rank's (>= 1).

    Per-expert loads follow ``_PowerLaw`` (exponent ``alpha``). The hottest expert takes the
    expected maximum of E draws, the p = E / (E + 1) quantile, at most every token (E / k
    times the mean, at least the mean); its rank's other E / ep - 1 experts take the mean of
    the rest: load = (r + (E / ep - 1) (E - r) / (E - 1)) / (E / ep), r = x_max / mean (1
    for one rank of every expert, r for ranks of one). None: balanced routing, 1."""
    t = np.asarray(tokens, dtype=np.float64)
    if alpha is None:
        return np.ones_like(t)
    law = _PowerLaw.of(t, top_k, experts, alpha)
    x_max = law.quantile(experts / (experts + 1.0))
    # The hottest expert carries at least the mean (the quantile can fall below it for a few
    # experts under a heavy tail) and at most every token.
    ratio = np.clip(x_max / law.mean(), 1.0, max(experts / top_k, 1.0))
    local = experts / np.asarray(ep, dtype=np.float64)
    others = (experts - ratio) / max(experts - 1.0, 1.0)  # the other experts' mean load
    return np.asarray((ratio + (local - 1.0) * others) / local)


# Rounded loads are summed exactly up to this many tokens an expert (beyond it the top-up of
# the rounding, below, is negligible).
_ROUND_TERMS = 64


def touched_experts(
    tokens: ArrayLike, top_k: float, experts: float, ep: ArrayLike, alpha: float | None
) -> np.ndarray:
    """Experts with at least one routed token on the most loaded expert-parallel rank: the
    experts whose weights a step reads.

    Balanced (``alpha`` None): every slot picks an expert uniformly, E / ep (1 - (1 - k /
    E)^T). Skewed (``_PowerLaw``): an expert is touched when round(c x) >= 1, P(x >= 1 / (2
    c)); the collector then tops the rounded sum up to T k one slot an expert, so at least
    T k - E E[round(c x)] experts are; the hottest rank, which carries ``hottest_rank_load``
    times the mean, touches about sqrt of that ratio more than the mean rank (an
    approximation held to a Monte Carlo of the collector in tests/test_operators.py); never
    more than its experts or its slots."""
    t = np.asarray(tokens, dtype=np.float64)
    e_p = np.asarray(ep, dtype=np.float64)
    local = experts / e_p
    if alpha is None:
        return np.asarray(local * (1.0 - (1.0 - top_k / experts) ** t))
    law = _PowerLaw.of(t, top_k, experts, alpha)
    with np.errstate(divide="ignore", invalid="ignore"):
        c = np.where(t > 0, t * top_k / (experts * law.mean()), 0.0)
        nonzero = experts * np.where(t > 0, law.survival(0.5 / c), 0.0)
        j = np.arange(1, _ROUND_TERMS + 1, dtype=np.float64).reshape((-1,) + (1,) * t.ndim)
        rounded = experts * np.where(t > 0, law.survival((j - 0.5) / c), 0.0).sum(axis=0)
    short = np.where(c * law.hi <= _ROUND_TERMS, t * top_k - rounded, 0.0)
    nonzero = np.maximum(nonzero, np.clip(short, 0.0, experts))
    hot = hottest_rank_load(t, top_k, experts, e_p, alpha)
    rank_slots = hot * t * top_k / e_p
    return np.asarray(np.minimum(np.minimum(nonzero / e_p * np.sqrt(hot), local), rank_slots))


def default_layout(model: ModelProfile, gpus: int) -> Layout:
    """The layout a replica on ``gpus`` GPUs runs by default, as physics/latency.py places
    the weights: a MoE model data-parallel attention with every expert sharded over the GPUs
    (DeepSeek's serving layout, the paper's testbed); a dense model tensor parallel."""
    if model.num_moe_layers > 0:
        return Layout(tp=1, dp=gpus, ep=gpus)
    return Layout(tp=gpus, dp=1, ep=1)


def check_layout(model: ModelProfile, layout: Layout, gpus_per_node: int | None = None) -> None:
    """Refuse a layout the model cannot run: a TP degree that does not divide the heads, an EP
    degree that does not divide the replica's GPUs or the experts (a layout of whole
    numbers, as the engine command takes it)."""
    dp, ep = int(layout.dp), int(layout.ep)  # type: ignore[arg-type]
    for name, v in (("--tp", layout.tp), ("--dp", dp), ("--ep", ep)):
        if v < 1:
            raise PlanInputError(f"{name} {v}: a parallel degree is at least 1", field=name)
    if model.num_attention_heads % layout.tp:
        raise PlanInputError(
            f"--tp {layout.tp} does not divide {model.id}'s {model.num_attention_heads} "
            "attention heads",
            field="--tp",
        )
    gpus = layout.tp * dp
    if gpus % ep:
        raise PlanInputError(
            f"--ep {ep} does not divide the replica's {gpus} GPUs (tp x dp)", field="--ep"
        )
    if ep > 1 and model.num_moe_layers == 0:
        raise PlanInputError(f"--ep {ep}: {model.id} has no experts", field="--ep")
    if model.num_routed_experts and model.num_routed_experts % ep:
        raise PlanInputError(
            f"--ep {ep} does not divide {model.id}'s {model.num_routed_experts} experts",
            field="--ep",
        )
    if gpus_per_node is not None and layout.tp > gpus_per_node:
        raise PlanInputError(
            f"--tp {layout.tp} spans more than a node's {gpus_per_node} GPUs (NVLink)",
            field="--tp",
        )


@record
class OperatorTime:
    """One operator of a pass or step: its category, time per replica pass (all layers),
    and the bound it hits (an array each where the inputs are)."""

    name: str
    category: str
    time_s: np.ndarray
    bound: np.ndarray  # index into BOUNDS


@record
class EngineTiming:
    """A prefill pass or decode step of one replica, operator by operator."""

    operators: tuple[OperatorTime, ...]
    layout: Layout
    calibrated: bool  # False: speed of light (no engine profile or --speed-of-light)
    notes: tuple[str, ...] = field(default=())

    @property
    def time_s(self) -> np.ndarray:
        # Operators broadcast against each other (a layout over node counts shapes some).
        return np.asarray(functools.reduce(np.add, (o.time_s for o in self.operators)))

    def by_category(self) -> dict[str, np.ndarray]:
        out = {c: np.zeros_like(self.time_s) for c in CATEGORIES}
        for o in self.operators:
            out[o.category] = out[o.category] + o.time_s
        return out


_SPEED_OF_LIGHT = OperatorCurve(launch_s=0.0, compute_efficiency=1.0, memory_efficiency=1.0)


@record
class ScaleOut:
    """What joins the nodes a replica spans: GPUs share NVLink within a node of
    ``gpus_per_node``; between nodes each GPU moves its bytes through its share of the
    node's compute NICs, ``network_byte_s`` (physics/latency.network_byte_s_per_gpu)."""

    gpus_per_node: int
    network_byte_s: float

    @classmethod
    def of(cls, node: NodeProfile, efficiencies: bool = True) -> ScaleOut:
        """A node's NVLink domain and each GPU's network rate (its calibrated share, or the
        line rate at the speed of light)."""
        return cls(node.gpus_per_node, network_byte_s_per_gpu(node, efficiencies))


@record
class _Context:
    """What every operator reads: the model, the GPU's peaks, the curves, the layout."""

    model: ModelProfile
    gpu: GpuProfile
    curves: EngineProfile | None
    layout: Layout
    link_byte_s: float  # NVLink per direction (PCIe without it), B/s
    scale_out: ScaleOut | None = None  # None: the replica within one NVLink domain

    def curve(self, name: str) -> OperatorCurve:
        if self.curves is None:
            return _SPEED_OF_LIGHT
        c = getattr(self.curves, name)
        if c is None:  # e.g. gemm_fp4 on a GPU measured without it: the FP8 curve
            return self.curves.moe_fp8 if name.startswith("moe") else self.curves.gemm_fp8
        return c  # type: ignore[no-any-return]

    def peak(self, dtype: str) -> float:
        tflops = self.gpu.dense_tflops(dtype) or self.gpu.bf16_dense_tflops  # type: ignore[arg-type]
        return tflops * 1e12

    @property
    def hbm(self) -> float:
        return self.gpu.hbm_tbyte_s * 1e12


def _op(
    ctx: _Context,
    name: str,
    category: str,
    curve_name: str,
    count: float,
    flops: ArrayLike,
    nbytes: ArrayLike,
    size: ArrayLike,
    dtype: str = "bf16",
    tiles: ArrayLike | None = None,
    launches: float = 1.0,
    slot_bytes: ArrayLike | None = None,
    factors: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> OperatorTime:
    """``count`` instances (layers) of an operator of ``flops`` and ``nbytes`` at saturation
    variable ``size``: the roofline with the curve's efficiencies, plus its launch latency
    (``launches`` kernels each) and, for a grouped MoE GEMM, its routed-slot traffic
    (``slot_bytes`` times the curve's ``slot_traffic`` at the HBM rate; 0 at the speed of
    light); ``factors`` the curve's measured (compute, memory) efficiency factors at this
    shape and its launch_s there (OperatorCurve.shape_factors)."""
    c = ctx.curve(curve_name)
    f = np.asarray(flops, dtype=np.float64)
    b = np.asarray(nbytes, dtype=np.float64)
    s = c.saturation(size, tiles) if ctx.curves is not None else 1.0
    fc, fm, launch = (
        factors if factors is not None and ctx.curves is not None else (1.0, 1.0, c.launch_s)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        compute = np.where(f > 0, f / (ctx.peak(dtype) * c.compute_efficiency * fc * s), 0.0)
    memory = b / (ctx.hbm * c.memory_efficiency * fm)
    fixed = np.asarray(launch * launches, dtype=np.float64)
    if slot_bytes is not None and c.slot_traffic > 0:
        fixed = fixed + c.slot_traffic * np.asarray(slot_bytes, dtype=np.float64) / ctx.hbm
    roof = np.maximum(compute, memory)
    total = count * (fixed + roof)
    bound = np.where(fixed > roof, 2, np.where(compute >= memory, 0, 1))
    shape = np.broadcast(total, bound).shape
    return OperatorTime(
        name, category, np.broadcast_to(total, shape).copy(), np.broadcast_to(bound, shape)
    )


def _gemm(
    ctx: _Context, name: str, count: float, m: ArrayLike, n: float, k: float, dtype: str
) -> OperatorTime:
    """A GEMM of m tokens x (k -> n): weights at ``dtype`` (bf16 activations in and out)."""
    mm = np.asarray(m, dtype=np.float64)
    wbytes = phys.WEIGHT_BYTES[dtype]
    act = 1.0 if dtype != "bf16" else ACTIVATION_BYTES
    flops = 2.0 * mm * n * k
    nbytes = n * k * wbytes + mm * k * act + mm * n * ACTIVATION_BYTES
    tiles = np.ceil(mm / TILE) * math.ceil(n / TILE)
    curve = {"bf16": "gemm_bf16", "fp8": "gemm_fp8", "fp4": "gemm_fp4"}[dtype]
    return _op(ctx, name, "gemm", curve, count, flops, nbytes, mm, dtype, tiles)


def _allreduce(
    ctx: _Context, name: str, count: float, nbytes: ArrayLike, gpus: int
) -> OperatorTime:
    """A ring all-reduce of ``nbytes`` over ``gpus`` GPUs: 2 (n - 1) / n of the bytes cross
    each GPU's link (NCCL's cost model); a latency per call. A ring over more GPUs than a
    node holds runs at its slowest hop, the network."""
    c = ctx.curve("allreduce")
    moved = 2.0 * (gpus - 1) / gpus * np.asarray(nbytes, dtype=np.float64)
    if ctx.scale_out is not None and gpus > ctx.scale_out.gpus_per_node:
        t = moved / ctx.scale_out.network_byte_s
    else:
        t = moved / (ctx.link_byte_s * c.memory_efficiency)
    total = count * (c.launch_s + t)
    bound = np.where(c.launch_s > t, 2, 1)
    return OperatorTime(name, "communication", np.asarray(total), np.asarray(bound))


def _elementwise(ctx: _Context, name: str, count: float, nbytes: ArrayLike) -> OperatorTime:
    return _op(ctx, name, "fixed", "elementwise", count, 0.0, nbytes, 1.0)


def time_pass(
    model: ModelProfile,
    gpu: GpuProfile,
    curves: EngineProfile | None,
    layout: Layout,
    *,
    batch: ArrayLike,
    context: ArrayLike,
    new_tokens: ArrayLike,
    scale_out: ScaleOut | None = None,
) -> EngineTiming:
    """One forward pass of a replica: ``batch`` requests per attention-DP rank, each adding
    ``new_tokens`` tokens after ``context - new_tokens`` cached ones (prefill: the append;
    decode: 1). ``context`` counts every token a request's new ones attend to, its new
    ones included. ``scale_out``: the nodes' network where a replica spans several (None:
    one NVLink domain)."""
    m = model
    L = layout
    b = np.asarray(batch, dtype=np.float64)
    c = np.asarray(context, dtype=np.float64)
    n = np.asarray(new_tokens, dtype=np.float64)
    cached = np.maximum(c - n, 0.0)
    intra = gpu.nvlink_bidir_gbyte_s / 2.0 if gpu.nvlink_bidir_gbyte_s else gpu.pcie_usable_gbyte_s
    ctx = _Context(m, gpu, curves, L, intra * 1e9, scale_out)
    decode = bool(np.all(n <= 1.0))
    tokens = b * n  # tokens of one attention-DP rank (all GPUs of its TP group see them)
    h = float(m.hidden_size)
    layers = float(m.num_layers)
    dense_layers = float(m.num_dense_layers)
    moe_layers = float(m.num_moe_layers)
    wdt = m.weight_dtype
    heads = m.num_attention_heads / L.tp
    ops: list[OperatorTime] = []
    notes: list[str] = []
    if curves is not None and wdt == "fp4" and curves.gemm_fp4 is None:
        notes.append(f"no FP4 GEMM curve on {curves.gpu}: FP4 GEMMs timed at the FP8 curve")
    if curves is not None and m.expert_weight_dtype == "fp4" and curves.moe_fp4 is None:
        notes.append(f"no FP4 MoE curve on {curves.gpu}: FP4 experts timed at the FP8 curve")

    # Norms before attention and FFN, and the residual adds: read and write the hidden state.
    ops.append(_elementwise(ctx, "norms", 2.0 * layers, tokens * h * ACTIVATION_BYTES * 2.0))
    # Attention: projections and the core.
    if m.attention == "gqa":
        assert m.head_dim is not None and m.num_kv_heads is not None
        hd = float(m.head_dim)
        kv_heads = max(m.num_kv_heads / L.tp, 1.0)
        kv_el = phys.KV_ELEMENT_BYTES[m.kv_cache_dtype]
        ops.append(_gemm(ctx, "qkv_proj", layers, tokens, (heads + 2 * kv_heads) * hd, h, wdt))
        ops.append(_gemm(ctx, "o_proj", layers, tokens, h, heads * hd, wdt))
        full = float(phys.full_attention_layers(m))
        swa = float(m.sliding_window_layers)
        pairs_full = phys.causal_pairs(cached, n)
        pairs_swa = (
            phys.capped_pairs(cached, n, float(m.sliding_window_tokens))
            if swa and m.sliding_window_tokens
            else pairs_full
        )
        span_swa = np.minimum(c, float(m.sliding_window_tokens or 0) or c)
        for count, pairs, span, label in (
            (full, pairs_full, c, "attention"),
            (swa, pairs_swa, span_swa, "attention_window"),
        ):
            if count == 0:
                continue
            flops = 4.0 * heads * hd * b * pairs
            kv_bytes = b * span * 2.0 * kv_heads * hd * kv_el
            if decode:
                ops.append(
                    _op(ctx, label, "attention", "attention_decode", count, flops, kv_bytes, span)
                )
            else:
                q_bytes = tokens * heads * hd * ACTIVATION_BYTES * 2.0
                ops.append(
                    _op(
                        ctx,
                        label,
                        "attention",
                        "attention_prefill",
                        count,
                        flops,
                        kv_bytes + q_bytes,
                        pairs / n,
                    )
                )
    else:
        assert m.kv_lora_rank and m.qk_rope_head_dim and m.qk_nope_head_dim and m.v_head_dim
        r, rope, nope, v = (
            float(m.kv_lora_rank),
            float(m.qk_rope_head_dim),
            float(m.qk_nope_head_dim),
            float(m.v_head_dim),
        )
        q_lora = float(m.q_lora_rank)
        # The down projections of queries and the latent (fused, as SGLang and vLLM run them).
        ops.append(_gemm(ctx, "q_kv_a_proj", layers, tokens, (q_lora or 0.0) + r + rope, h, wdt))
        q_in = q_lora or h
        ops.append(_gemm(ctx, "q_b_proj", layers, tokens, heads * (nope + rope), q_in, wdt))
        ops.append(_elementwise(ctx, "q_kv_norm", layers, tokens * (q_lora + r) * 4.0))
        if decode or m.has_dsa:
            # Absorbed: queries into the latent space, attention over the latent cache, the
            # output back out of it (two batched GEMMs over the heads). Decode always; prefill
            # too under DeepSeek's sparse attention, which runs MLA in its MQA (absorbed) mode
            # over the top-k keys (DeepSeek-V3.2's report, section 2.1): no expansion of the
            # cached prefix.
            ops.append(_gemm(ctx, "mla_absorb_q", layers, tokens, heads * r, nope, "bf16"))
            ops.append(_gemm(ctx, "mla_absorb_o", layers, tokens, heads * v, r, "bf16"))
            pairs = (
                phys.capped_pairs(cached, n, float(m.dsa_topk_tokens or 0))
                if m.has_dsa
                else phys.causal_pairs(cached, n)
            )
            flops = b * pairs * heads * (2.0 * (r + rope) + 2.0 * r)
            per_token = phys.kv_bytes_per_token_layer(m)
            # A step reads its top-k latents (all of them without DSA); a pass's queries
            # together read the whole cache.
            span = np.minimum(c, float(m.dsa_topk_tokens or 0)) if m.has_dsa and decode else c
            ops.append(
                _op(
                    ctx,
                    "attention",
                    "attention",
                    "mla_decode",
                    layers,
                    flops,
                    b * span * per_token,
                    b * pairs / n,
                )
            )
        else:
            # Non-absorbed prefill: the cached latents are expanded to per-head keys and
            # values (kv_b over the whole context), then attention at head dims nope + rope
            # and v.
            ops.append(_gemm(ctx, "kv_b_proj", layers, b * c, heads * (nope + v), r, wdt))
            pairs = (
                phys.capped_pairs(cached, n, float(m.dsa_topk_tokens or 0))
                if m.has_dsa
                else phys.causal_pairs(cached, n)
            )
            flops = b * pairs * heads * (2.0 * (nope + rope) + 2.0 * v)
            nbytes = b * c * heads * (nope + rope + v) * ACTIVATION_BYTES
            ops.append(
                _op(ctx, "attention", "attention", "mla_prefill", layers, flops, nbytes, pairs / n)
            )
        ops.append(_gemm(ctx, "o_proj", layers, tokens, h, heads * v, wdt))
    if m.has_dsa:
        assert m.dsa_index_heads is not None and m.dsa_index_head_dim is not None
        pairs_all = phys.causal_pairs(cached, n)
        flops = b * pairs_all * phys.indexer_flops_per_key_layer(m)
        nbytes = b * c * phys.indexer_bytes_per_token_layer(m)
        if decode:  # a read of every request's index keys, as MLA decode reads its latents
            ops.append(
                _op(ctx, "dsa_indexer", "attention", "mla_decode", layers, flops, nbytes, b * c)
            )
        else:
            # The indexer's logits are an FP8 GEMM, the new tokens' queries (n x index heads
            # rows) against the cached index keys (DeepSeek-V3.2-Exp report, section 2.1: "a
            # small number of heads and can be implemented in FP8"): the FP8 GEMM curve.
            rows = b * n * float(m.dsa_index_heads)
            tiles = np.ceil(n * float(m.dsa_index_heads) / TILE) * np.ceil(c / TILE) * b
            ops.append(
                _op(
                    ctx,
                    "dsa_indexer",
                    "attention",
                    "gemm_fp8",
                    layers,
                    flops,
                    nbytes,
                    rows,
                    "fp8",
                    tiles,
                )
            )
    if L.tp > 1:
        ops.append(
            _allreduce(ctx, "tp_allreduce", 2.0 * layers, tokens * h * ACTIVATION_BYTES, L.tp)
        )
    # Dense FFN layers (SwiGLU), tensor parallel.
    if dense_layers:
        inter = float(m.intermediate_size or 0) / L.tp
        ops.append(_gemm(ctx, "ffn_gate_up", dense_layers, tokens, 2.0 * inter, h, wdt))
        ops.append(_elementwise(ctx, "ffn_act", dense_layers, tokens * inter * 3.0 * 2.0))
        ops.append(_gemm(ctx, "ffn_down", dense_layers, tokens, h, inter, wdt))
    if moe_layers:
        e_total = float(m.num_routed_experts)
        k = float(m.num_experts_per_token)
        ops.append(_gemm(ctx, "router", moe_layers, tokens, e_total, h, "bf16"))
        if m.num_shared_experts:
            shared = float(m.moe_intermediate_size or 0) * m.num_shared_experts / L.tp
            edt = m.expert_weight_dtype or wdt
            ops.append(_gemm(ctx, "shared_gate_up", moe_layers, tokens, 2.0 * shared, h, edt))
            ops.append(_gemm(ctx, "shared_down", moe_layers, tokens, h, shared, edt))
        # Routed experts: the EP group's tokens (every attention-DP rank's) reach the experts;
        # each GPU holds ep-th of them at moe_tp-th of their width.
        dp, ep = np.asarray(L.dp, dtype=np.float64), np.asarray(L.ep, dtype=np.float64)
        moe_tp = np.asarray(L.moe_tp, dtype=np.float64)
        group_tokens = tokens * dp
        local_experts = e_total / ep
        expert_inter = float(m.moe_intermediate_size or 0) / moe_tp
        edt = m.expert_weight_dtype or wdt
        # The most loaded rank sets the layer's pace (balanced at the speed of light).
        skew = m.expert_load_alpha if curves is not None else None
        hot = hottest_rank_load(group_tokens, k, e_total, ep, skew)
        touched = touched_experts(group_tokens, k, e_total, ep, m.expert_load_alpha)
        if curves is None:
            # Skewed routing reads fewer experts than balanced routing at a small batch: the
            # speed of light reads the fewer of the two (a lower bound of either, INV-68).
            touched = np.minimum(touched, touched_experts(group_tokens, k, e_total, ep, None))
        per_expert = group_tokens * k / e_total * hot
        flops = 2.0 * group_tokens * k / ep * hot * 3.0 * h * expert_inter
        nbytes = touched * 3.0 * h * expert_inter * phys.WEIGHT_BYTES[edt]
        tiles = moe_tiles(local_experts, per_expert, expert_inter)
        curve = MOE_CURVES[edt]
        factors = ctx.curve(curve).shape_factors(h, expert_inter, local_experts, e_total, k)
        ops.append(
            _op(
                ctx,
                "routed_experts",
                "moe",
                curve,
                moe_layers,
                flops,
                nbytes,
                per_expert,
                moe_compute_dtype(edt, m.compute_dtype),
                tiles,
                slot_bytes=moe_slot_bytes(group_tokens, k, h, expert_inter),
                factors=factors,
            )
        )
        if L.tp == 1 and np.any(dp > 1):
            # Attention data parallel: each rank's tokens go to their top-k experts' GPUs and
            # come back (dispatch and combine), two transfers of k x hidden per token. The
            # share held on the rank's node crosses NVLink (priced as a two-GPU all-reduce of
            # its bytes), the share on other nodes its network, concurrently (DeepEP forwards
            # both at once; physics/latency.layer_floor_s prices them alike).
            payload = tokens * k * h * ACTIVATION_BYTES
            local = ep if ctx.scale_out is None else np.minimum(ep, ctx.scale_out.gpus_per_node)
            comm = _allreduce(
                ctx, "ep_dispatch_combine", 2.0 * moe_layers, payload * (local - 1.0) / ep, 2
            )
            time_s, bound = comm.time_s, comm.bound
            if ctx.scale_out is not None:
                remote = 2.0 * moe_layers * payload * (ep - local) / ep
                remote_s = remote / ctx.scale_out.network_byte_s
                bound = np.where(remote_s > time_s, 1, bound)
                time_s = np.maximum(time_s, remote_s)
            ops.append(OperatorTime(comm.name, comm.category, np.where(dp > 1, time_s, 0.0), bound))
    # Embedding lookup and the LM head over each request's last token.
    ops.append(_elementwise(ctx, "embedding", 1.0, tokens * h * ACTIVATION_BYTES * 2.0))
    vocab = float(m.vocab_size) / L.tp
    ops.append(_gemm(ctx, "lm_head", 1.0, b, vocab, h, "bf16"))
    return EngineTiming(tuple(ops), L, curves is not None, tuple(notes))


def node_layout(model: ModelProfile, node: NodeProfile) -> Layout:
    """The default layout of a replica on one node."""
    return default_layout(model, node.gpus_per_node)


def replica_layout(model: ModelProfile, gpus_per_node: int, replica_gpus: ArrayLike) -> Layout:
    """The layout of a side's replicas of ``replica_gpus`` GPUs each (physics/latency.py,
    replicas): a MoE model data-parallel attention with its experts over every GPU of the
    replica, a dense model tensor parallel within a node (over the replica when one spans
    nodes: its weights do not fit in one)."""
    g = np.asarray(replica_gpus, dtype=np.float64)
    if model.num_moe_layers > 0:
        return Layout(tp=1, dp=g if g.ndim else float(g), ep=g if g.ndim else float(g))
    tp = int(np.max(g)) if np.all(g == np.max(g)) else gpus_per_node
    return Layout(tp=max(tp, 1), dp=1.0, ep=1.0)


@dataclass(frozen=True, eq=False)
class OperatorEngine:
    """A side's passes by the operator model: the model, the GPU, the engine profile's curves
    (None: speed of light) and the replicas' layout. Batches are requests per attention-DP
    rank. Compared and hashed by identity (its profiles are not hashable), as the memos
    that keep a group key it."""

    model: ModelProfile
    gpu: GpuProfile
    curves: EngineProfile | None
    layout: Layout
    scale_out: ScaleOut | None = None

    def decode(self, batch_per_rank: ArrayLike, context: float) -> EngineTiming:
        """A decode step: a pass of one new token per request."""
        return self.prefill(batch_per_rank, context, 1.0)

    def prefill(self, batch_per_rank: ArrayLike, context: float, new_tokens: float) -> EngineTiming:
        return time_pass(
            self.model,
            self.gpu,
            self.curves,
            self.layout,
            batch=batch_per_rank,
            context=context,
            new_tokens=new_tokens,
            scale_out=self.scale_out,
        )

    def describe(self) -> str:
        """What times the passes, for the efficiencies line."""
        if self.curves is None:
            return f"operator model at the datasheet rates ({self.layout.describe()})"
        transfer = (
            f", measured on {self.curves.gpu}, run on {self.gpu.id}"
            if self.curves.gpu != self.gpu.id
            else ""
        )
        return (
            f"operator model, engine '{self.curves.id}' ({self.curves.framework} "
            f"{self.curves.framework_version}{transfer}; {self.layout.describe()})"
        )


def weight_bytes_per_gpu(model: ModelProfile, layout: Layout) -> float:
    """Weight bytes one GPU of a replica holds: the routed experts over all the replica's
    GPUs (ep x moe_tp of them), everything else over the TP group (attention-DP ranks each
    hold their own copy)."""
    routed = phys.routed_expert_bytes(model)
    rest = phys.weight_bytes(model) - routed
    return float(rest / layout.tp + routed / float(np.max(layout.gpus)))


def kv_bytes_per_gpu(
    model: ModelProfile, layout: Layout, batch: ArrayLike, context: ArrayLike
) -> np.ndarray:
    """KV bytes one GPU holds for ``batch`` requests per attention-DP rank at ``context``
    tokens: GQA caches split over the TP group by KV head (at least one head each), MLA's
    latent kept whole on every GPU of the group."""
    per_request = phys.kv_bytes_for_context(model, context)
    if model.attention == "gqa":
        assert model.num_kv_heads is not None
        per_request = per_request / min(layout.tp, model.num_kv_heads)
    return np.asarray(batch, dtype=np.float64) * per_request
