"""Model physics: KV-cache bytes, parameter counts, prefill and decode cost.

All functions take a :class:`ModelProfile` and NumPy arrays (or scalars) of token counts and
broadcast. Each formula names its source; "H&M" is ../shared/reference/hardware-and-models.md
and "paper" is ../shared/reference/dualpath-paper.md. docs/model.md lists them all.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dualpath_plan.frozen import record
from dualpath_plan.memo import IdentityMemo
from dualpath_plan.profiles.schemas import ModelProfile

FloatArray = NDArray[np.float64]

# Bytes per element of a cache or weight dtype.
KV_ELEMENT_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0}
WEIGHT_BYTES = {"bf16": 2.0, "fp8": 1.0, "fp4": 0.5}
# FP8 caches keep one FP32 scale per 128 values (FlashMLA README; V3.2 model.py k_scale_cache).
FP8_SCALE_GROUP = 128
FP32_BYTES = 4.0


def _arr(x: ArrayLike) -> FloatArray:
    return np.asarray(x, dtype=np.float64)


# --- KV cache ------------------------------------------------------------------------------


def kv_bytes_per_token_layer(m: ModelProfile) -> float:
    """Main-attention KV bytes of one token in one layer.

    GQA/MHA: 2 (K and V) x kv_heads x head_dim x element bytes (H&M D.2).
    MLA: one latent of kv_lora_rank plus a RoPE key of qk_rope_head_dim (H&M D.2); in FlashMLA's
    "FP8 with scale" layout the latent is FP8 with one FP32 scale per 128 values and the RoPE
    part stays BF16: 512 + 16 + 128 = 656 B for V3.2 (FlashMLA README).
    """
    if m.attention == "gqa":
        assert m.num_kv_heads is not None and m.head_dim is not None
        return 2.0 * m.num_kv_heads * m.head_dim * KV_ELEMENT_BYTES[m.kv_cache_dtype]
    assert m.kv_lora_rank is not None and m.qk_rope_head_dim is not None
    if m.kv_cache_dtype == "fp8_flashmla":
        scales = math.ceil(m.kv_lora_rank / FP8_SCALE_GROUP) * FP32_BYTES
        return m.kv_lora_rank * 1.0 + scales + m.qk_rope_head_dim * 2.0
    return (m.kv_lora_rank + m.qk_rope_head_dim) * KV_ELEMENT_BYTES[m.kv_cache_dtype]


def indexer_bytes_per_token_layer(m: ModelProfile) -> float:
    """DSA lightning-indexer key cache of one token in one layer: an FP8 (e4m3) key of
    dsa_index_head_dim plus one FP32 scale per 128 (V3.2 model.py: 128 + 4 = 132 B)."""
    if not m.has_dsa:
        return 0.0
    assert m.dsa_index_head_dim is not None
    return (
        m.dsa_index_head_dim * 1.0 + math.ceil(m.dsa_index_head_dim / FP8_SCALE_GROUP) * FP32_BYTES
    )


def full_attention_layers(m: ModelProfile) -> int:
    return m.num_layers - m.sliding_window_layers


def kv_bytes_per_token(m: ModelProfile) -> float:
    """KV bytes per token of a long context, as stored and loaded (all full-attention layers,
    plus the indexer cache when ``indexer_cache_loaded``). Sliding-window layers add a constant
    per sequence, not per token; :func:`kv_bytes_for_context` counts them."""
    per_layer = kv_bytes_per_token_layer(m)
    out = full_attention_layers(m) * per_layer
    if m.indexer_cache_loaded:
        out += m.num_layers * indexer_bytes_per_token_layer(m)
    return out


def kv_bytes_for_context(m: ModelProfile, context_tokens: ArrayLike) -> FloatArray:
    """Bytes of KV a prefix of ``context_tokens`` needs in HBM (and so loads from storage):
    full layers keep every token, sliding-window layers only the last window
    (hf-mem #60, AIConfigurator PR #1201: per-token KV is not linear for SWA)."""
    c = _arr(context_tokens)
    per_layer = kv_bytes_per_token_layer(m)
    out = full_attention_layers(m) * per_layer * c
    if m.sliding_window_layers:
        assert m.sliding_window_tokens is not None
        out = out + m.sliding_window_layers * per_layer * np.minimum(c, m.sliding_window_tokens)
    if m.indexer_cache_loaded:
        out = out + m.num_layers * indexer_bytes_per_token_layer(m) * c
    return out


def kv_bytes_new_tokens(m: ModelProfile, tokens: ArrayLike) -> FloatArray:
    """KV bytes that ``tokens`` freshly computed tokens add (every layer holds them when they
    are written; the indexer cache only when it is persisted)."""
    t = _arr(tokens)
    per_token = m.num_layers * kv_bytes_per_token_layer(m)
    if m.indexer_cache_loaded:
        per_token += m.num_layers * indexer_bytes_per_token_layer(m)
    return per_token * t


# --- parameters ----------------------------------------------------------------------------


@record
class ParamCounts:
    """Parameter counts derived from the architecture (norms and biases neglected)."""

    attention: float  # all layers
    indexer: float  # DSA indexer projections, all layers
    dense_ffn: float  # dense layers' FFN
    routed_experts_total: float
    routed_experts_active: float  # per token
    shared_experts: float
    router: float
    embedding: float
    lm_head: float

    @property
    def active_matmul(self) -> float:
        """Weights a token multiplies through in the layers (no embedding, no lm_head): the N
        of FLOPs ~ 2N per token (Kaplan et al. 2020, C_forward ~ 2N)."""
        return (
            self.attention
            + self.indexer
            + self.dense_ffn
            + self.routed_experts_active
            + self.shared_experts
            + self.router
        )

    @property
    def active(self) -> float:
        """Active parameters as model cards count them: the layers' active weights plus the
        output head (the input embedding is a lookup)."""
        return self.active_matmul + self.lm_head

    @property
    def total(self) -> float:
        return (
            self.attention
            + self.indexer
            + self.dense_ffn
            + self.routed_experts_total
            + self.shared_experts
            + self.router
            + self.embedding
            + self.lm_head
        )


def attention_params_per_layer(m: ModelProfile) -> float:
    h, n = m.hidden_size, m.num_attention_heads
    if m.attention == "gqa":
        assert m.head_dim is not None and m.num_kv_heads is not None
        # Q, K, V and O projections.
        return h * n * m.head_dim + 2.0 * h * m.num_kv_heads * m.head_dim + n * m.head_dim * h
    assert m.qk_nope_head_dim and m.qk_rope_head_dim and m.v_head_dim and m.kv_lora_rank
    qk = m.qk_nope_head_dim + m.qk_rope_head_dim
    # DeepSeek-V3 MLA: q (optionally low rank), kv_a (latent + rope key), kv_b, o.
    q = (h * m.q_lora_rank + m.q_lora_rank * n * qk) if m.q_lora_rank else h * n * qk
    kv_a = h * (m.kv_lora_rank + m.qk_rope_head_dim)
    kv_b = m.kv_lora_rank * n * (m.qk_nope_head_dim + m.v_head_dim)
    o = n * m.v_head_dim * h
    return float(q + kv_a + kv_b + o)


def indexer_params_per_layer(m: ModelProfile) -> float:
    """V3.2 Indexer: wq_b (from the q latent, or hidden when q is not low rank), wk, and the
    per-head weights projection (V3.2 model.py, class Indexer)."""
    if not m.has_dsa:
        return 0.0
    assert m.dsa_index_heads is not None and m.dsa_index_head_dim is not None
    q_in = m.q_lora_rank or m.hidden_size
    return float(
        q_in * m.dsa_index_heads * m.dsa_index_head_dim
        + m.hidden_size * m.dsa_index_head_dim
        + m.hidden_size * m.dsa_index_heads
    )


# Parameter counts by model profile: the assembly asks for them a dozen times per cluster
# (weights, shards, decode step), a sweep once per combination of values.
_PARAM_COUNTS: IdentityMemo[ParamCounts] = IdentityMemo(64)


def param_counts(m: ModelProfile) -> ParamCounts:
    return _PARAM_COUNTS.get((m,), lambda: _param_counts(m))


def _param_counts(m: ModelProfile) -> ParamCounts:
    h = m.hidden_size
    swiglu = 3.0  # gate, up and down projections
    expert = swiglu * h * (m.moe_intermediate_size or 0)
    moe_layers = m.num_moe_layers
    embedding = float(m.vocab_size * h)
    return ParamCounts(
        attention=m.num_layers * attention_params_per_layer(m),
        indexer=m.num_layers * indexer_params_per_layer(m),
        dense_ffn=m.num_dense_layers * swiglu * h * (m.intermediate_size or 0),
        routed_experts_total=moe_layers * m.num_routed_experts * expert,
        routed_experts_active=moe_layers * m.num_experts_per_token * expert,
        shared_experts=moe_layers * m.num_shared_experts * expert,
        router=moe_layers * h * m.num_routed_experts,
        embedding=embedding,
        lm_head=0.0 if m.tie_word_embeddings else embedding,
    )


def weight_bytes(m: ModelProfile) -> float:
    """Bytes of all weights: experts at expert_weight_dtype, the rest at weight_dtype."""
    p = param_counts(m)
    dense_b = WEIGHT_BYTES[m.weight_dtype]
    expert_b = WEIGHT_BYTES[m.expert_weight_dtype or m.weight_dtype]
    experts = p.routed_experts_total + p.shared_experts
    return (p.total - experts) * dense_b + experts * expert_b


def routed_expert_bytes(m: ModelProfile) -> float:
    """Bytes of the routed experts (expert_weight_dtype): what expert parallelism shards."""
    return (
        param_counts(m).routed_experts_total * WEIGHT_BYTES[m.expert_weight_dtype or m.weight_dtype]
    )


# --- attention spans -----------------------------------------------------------------------


def causal_pairs(cached: ArrayLike, append: ArrayLike) -> FloatArray:
    """(query, key) pairs when ``append`` tokens attend causally to ``cached`` ones and to each
    other: sum over t = c+1..c+a of t = a*c + a(a+1)/2 (H&M D.3)."""
    c, a = _arr(cached), _arr(append)
    return a * c + a * (a + 1.0) / 2.0


def capped_pairs(cached: ArrayLike, append: ArrayLike, cap: float) -> FloatArray:
    """Sum over t = c+1..c+a of min(t, cap): keys seen by each query when at most ``cap`` are
    attended (a sliding window, or DSA's top-k)."""
    c, a = _arr(cached), _arr(append)
    lo = c + 1.0
    hi = c + a
    n_below = np.clip(np.minimum(hi, cap) - lo + 1.0, 0.0, None)
    below = n_below * (2.0 * lo + n_below - 1.0) / 2.0
    return below + (a - n_below) * cap


def attention_flops_per_pair_layer(m: ModelProfile) -> float:
    """FLOPs of one (query, key) pair in one layer.

    GQA/MHA: QK^T and PV, 2 FLOPs per MAC: 4 x heads x head_dim (H&M D.3, Kaplan's term).
    MLA in absorbed (MQA) mode, as FlashMLA and DSA run it: scores over the 576-wide latent +
    rope key and values over the 512 latent, per head: 2 n_h (r + d_rope) + 2 n_h r
    = 278,528 for V3 (H&M D.3; FlashMLA README head_dim_k 576, head_dim_v 512).
    """
    n = m.num_attention_heads
    if m.attention == "gqa":
        assert m.head_dim is not None
        return 4.0 * n * m.head_dim
    assert m.kv_lora_rank is not None and m.qk_rope_head_dim is not None
    return 2.0 * n * (m.kv_lora_rank + m.qk_rope_head_dim) + 2.0 * n * m.kv_lora_rank


def indexer_flops_per_key_layer(m: ModelProfile) -> float:
    """DSA lightning indexer: 2 x index_heads x index_head_dim FLOPs per (query, key) over all
    keys (H&M D.3: 16,384 per key per layer for V3.2)."""
    if not m.has_dsa:
        return 0.0
    assert m.dsa_index_heads is not None and m.dsa_index_head_dim is not None
    return 2.0 * m.dsa_index_heads * m.dsa_index_head_dim


def attention_flops(m: ModelProfile, cached: ArrayLike, append: ArrayLike) -> FloatArray:
    """Attention FLOPs of ``append`` new tokens after ``cached`` ones, all layers."""
    pair = attention_flops_per_pair_layer(m)
    full = full_attention_layers(m)
    if m.has_dsa:
        assert m.dsa_topk_tokens is not None
        main = capped_pairs(cached, append, m.dsa_topk_tokens)
        index = causal_pairs(cached, append) * indexer_flops_per_key_layer(m)
        return m.num_layers * (pair * main + index)
    out = full * pair * causal_pairs(cached, append)
    if m.sliding_window_layers:
        assert m.sliding_window_tokens is not None
        out = out + m.sliding_window_layers * pair * capped_pairs(
            cached, append, m.sliding_window_tokens
        )
    return out


# --- prefill and decode --------------------------------------------------------------------


def prefill_flops(m: ModelProfile, cached: ArrayLike, append: ArrayLike) -> FloatArray:
    """FLOPs to prefill ``append`` tokens after ``cached`` ones: 2 x active layer weights per
    token (Kaplan), the attention term, and one row of output logits (the first generated
    token). Absorbed MLA folds kv_b into the query and output side, which the weight term
    already counts."""
    p = param_counts(m)
    a = _arr(append)
    weights = 2.0 * p.active_matmul * a + 2.0 * p.lm_head * (a > 0)
    return weights + attention_flops(m, cached, append)


@record
class DecodeStepCost:
    """One decode step of ``batch`` sequences at ``context`` tokens on one model replica."""

    weight_bytes: FloatArray  # HBM bytes of weights read in the step
    kv_bytes: FloatArray  # HBM bytes of KV read in the step (all sequences)
    flops: FloatArray  # FLOPs of the step (all sequences)
    routed_weight_bytes: FloatArray  # of weight_bytes: the routed experts the batch touches

    @property
    def hbm_bytes(self) -> FloatArray:
        return self.weight_bytes + self.kv_bytes


def expected_experts_touched(m: ModelProfile, batch: ArrayLike) -> FloatArray:
    """Routed experts of one MoE layer that a step of ``batch`` tokens touches, with uniform
    routing: E x (1 - (1 - k/E)^b)."""
    b = _arr(batch)
    if not m.num_routed_experts:
        return np.zeros_like(b)
    e, k = float(m.num_routed_experts), float(m.num_experts_per_token)
    return e * (1.0 - (1.0 - k / e) ** b)


def decode_kv_bytes_per_token(m: ModelProfile, context: ArrayLike) -> FloatArray:
    """HBM bytes of KV one generated token reads at ``context``: all cached keys, or DSA's
    top-k latents plus the indexer keys over the whole context."""
    c = _arr(context)
    per_layer = kv_bytes_per_token_layer(m)
    if m.has_dsa:
        assert m.dsa_topk_tokens is not None
        return m.num_layers * (
            per_layer * np.minimum(c, m.dsa_topk_tokens) + indexer_bytes_per_token_layer(m) * c
        )
    return kv_bytes_for_context(m, c)


def decode_step(m: ModelProfile, batch: ArrayLike, context: ArrayLike) -> DecodeStepCost:
    """HBM bytes and FLOPs of a decode step (roofline inputs; issue 3 and docs/model.md).

    Weights: the non-expert weights once, plus every routed expert the batch touches
    (:func:`expected_experts_touched`). KV: each sequence reads its own cache.
    FLOPs: per sequence 2 x active weights + lm_head row + attention of one query.
    """
    b = _arr(batch)
    c = _arr(context)
    p = param_counts(m)
    dense_b = WEIGHT_BYTES[m.weight_dtype]
    expert_b = WEIGHT_BYTES[m.expert_weight_dtype or m.weight_dtype]
    expert_params = 3.0 * m.hidden_size * (m.moe_intermediate_size or 0)
    non_expert = p.attention + p.indexer + p.dense_ffn + p.router + p.lm_head
    touched = expected_experts_touched(m, b) * m.num_moe_layers * expert_params
    weight = non_expert * dense_b + (p.shared_experts + touched) * expert_b
    kv = b * decode_kv_bytes_per_token(m, c)
    per_seq = 2.0 * p.active + attention_flops(m, c, 1.0)
    shape = np.broadcast(b, c).shape
    return DecodeStepCost(
        weight_bytes=np.broadcast_to(weight, shape).copy(),
        kv_bytes=kv,
        flops=b * per_seq,
        routed_weight_bytes=np.broadcast_to(touched * expert_b, shape).copy(),
    )


def cache_compute_ratio_gb_per_pflop(
    m: ModelProfile, context_tokens: ArrayLike, append_tokens: ArrayLike
) -> FloatArray:
    """The paper's cache-compute ratio (paper 2.1): KV bytes loaded for a turn over the FLOPs of
    prefilling its appended tokens, in GB (1e9 B) per PFLOP (1e15 FLOP)."""
    loaded = kv_bytes_for_context(m, context_tokens)
    flops = prefill_flops(m, context_tokens, append_tokens)
    return (loaded / 1e9) / (flops / 1e15)
