"""Latency floors: what a decode step or a prefill forward pass pays per layer beyond the
roofline, and the parallel layout they and the weights' placement follow (docs/model.md
section 6).

The parallel layout follows the model (``replicas``): a MoE model runs expert parallelism over
all GPUs of a side with data-parallel attention (DeepSeek's serving layout, the paper's
testbed), one replica whose routed experts are sharded over its GPUs while every GPU holds
(and each decode step reads) the rest of the weights (``replicated_weight_bytes``), and whose
MoE layers each pay a dispatch and a combine and no layer an all-reduce; a dense model runs
tensor parallelism within a node, a replica per node (one across the side if its weights do
not fit in a node), two all-reduces per layer. Every layer pays ``layer_fixed_s`` (kernel
launches, latency-bound small kernels, synchronisation).

- EP dispatch + combine of one MoE layer (DeepEP's low-latency kernels): ``ep_latency_s`` plus
  the routed tokens' bytes, each token sent to its top-k experts (dispatch at the compute
  dtype, FP8 with one FP32 scale per 128 values; combine in BF16), the share routed to other
  nodes over the GPU's CNIC share and the rest over NVLink, in parallel, at
  ``ep_link_efficiency`` of the rates. Fitted to DeepEP's published table (bench/fit_ep.py).
- TP all-reduce (ring): ``tp_allreduce_latency_s`` + 2 (n - 1) / n x bytes / NVLink rate, the
  bytes being the replica's tokens x hidden x 2 (BF16 activations); NCCL's own cost model.

Comm is added to the roofline rather than overlapped with it: an upper bound on the step when
two micro-batches overlap (DeepSeek's decode does), exact when they do not.
"""

from __future__ import annotations

import numpy as np

from dualpath_plan.physics import model as phys
from dualpath_plan.physics.links import NicRates, Num, PathOptions
from dualpath_plan.profiles.schemas import GpuProfile, ModelProfile, NodeProfile

# BF16 activations: combine and TP all-reduce payloads.
ACTIVATION_BYTES = 2.0
# FP8 dispatch carries one FP32 scale per 128 values (DeepEP, DeepGEMM's 1x128 blocks).
FP8_DISPATCH_BYTES = 1.0 + 4.0 / 128.0
# Dense models: two all-reduces per layer (after attention and after the MLP).
TP_ALLREDUCES_PER_LAYER = 2


def uses_expert_parallelism(model: ModelProfile) -> bool:
    return model.num_moe_layers > 0


def replicated_weight_bytes(model: ModelProfile) -> float:
    """Weight bytes every GPU of a replica holds (and a decode step reads on each): with
    expert parallelism and data-parallel attention, all but the routed experts (attention,
    dense layers, shared experts, router, embeddings); with tensor parallelism, none."""
    if not uses_expert_parallelism(model):
        return 0.0
    return phys.weight_bytes(model) - phys.routed_expert_bytes(model)


def weight_bytes_per_gpu(model: ModelProfile, gpus_per_replica: Num) -> Num:
    """HBM a GPU gives to weights: the replicated part and its share of the rest."""
    rep = replicated_weight_bytes(model)
    out = rep + (phys.weight_bytes(model) - rep) / np.asarray(gpus_per_replica, dtype=np.float64)
    return float(out) if np.ndim(out) == 0 else out


def replicas(model: ModelProfile, node: NodeProfile, gpu: GpuProfile, nodes: Num) -> Num:
    """Model replicas on a side of ``nodes`` nodes: one across every GPU of the side for a MoE
    model (expert parallelism); for a dense model one per node (tensor parallelism within the
    node) when its weights fit in a node's HBM, else one across the side."""
    n = np.asarray(nodes, dtype=np.float64)
    per_node = not uses_expert_parallelism(model) and phys.weight_bytes(model) < (
        node.gpus_per_node * gpu.hbm_gbyte * 1e9
    )
    out = np.maximum(n, 1.0) if per_node else np.ones_like(n)
    return float(out) if out.ndim == 0 else out


def _dispatch_bytes(model: ModelProfile) -> float:
    return FP8_DISPATCH_BYTES if model.compute_dtype in ("fp8", "fp4") else ACTIVATION_BYTES


def network_byte_s_per_gpu(node: NodeProfile, efficiencies: bool = True) -> float:
    """Each GPU's share of its node's compute NICs for expert-parallel and tensor-parallel
    traffic to other nodes, at ``ep_link_efficiency`` of the line rate (DeepEP's measured
    share, bench/fit_ep.py; 1 at the speed of light)."""
    return NicRates.of(node, PathOptions(efficiencies=efficiencies)).network_per_gpu


def layer_floor_s(
    model: ModelProfile,
    node: NodeProfile,
    gpu: GpuProfile,
    gpus: Num,
    tokens: Num,
    *,
    bandwidth: bool = True,
    efficiencies: bool = True,
) -> Num:
    """Fixed time per step (or forward pass) of ``tokens`` tokens over ``gpus`` GPUs of one
    side (numbers or arrays that broadcast): every layer's ``layer_fixed_s`` plus the EP or TP
    communication. ``bandwidth=False`` keeps the latencies only (a prefill pass overlaps its
    EP transfers with compute, DeepEP's normal kernels). 0 without efficiencies (speed of
    light)."""
    g = np.asarray(gpus, dtype=np.float64)
    t = np.asarray(tokens, dtype=np.float64)
    if not efficiencies:
        zero = np.zeros(np.broadcast(g, t).shape)
        return float(zero) if zero.ndim == 0 else zero
    n = float(node.gpus_per_node)
    # Within a node: NVLink per direction, or PCIe on GPUs without it.
    intra = gpu.nvlink_bidir_gbyte_s / 2.0 if gpu.nvlink_bidir_gbyte_s else gpu.pcie_usable_gbyte_s
    nvlink = intra * 1e9 * node.ep_link_efficiency
    fixed = model.num_layers * node.layer_fixed_s
    if uses_expert_parallelism(model):
        per_gpu = t / np.maximum(g, 1.0)
        payload = (
            per_gpu
            * model.num_experts_per_token
            * model.hidden_size
            * (_dispatch_bytes(model) + ACTIVATION_BYTES)
        )
        off_node = np.clip(1.0 - n / np.maximum(g, 1.0), 0.0, 1.0)
        cnic = network_byte_s_per_gpu(node)
        with np.errstate(divide="ignore", invalid="ignore"):
            on_node_s = np.where(off_node < 1.0, payload * (1.0 - off_node) / nvlink, 0.0)
        moving = np.maximum(payload * off_node / cnic, on_node_s) if bandwidth else 0.0
        out: Num = fixed + model.num_moe_layers * (node.ep_latency_s + moving)
    else:
        # Tokens per replica: one replica per node when the weights fit in one (replicas()),
        # else the whole side is one replica.
        per_node = phys.weight_bytes(model) < node.gpus_per_node * gpu.hbm_gbyte * 1e9
        replica_tokens = t / np.maximum(g / n, 1.0) if per_node else t
        nbytes = replica_tokens * model.hidden_size * ACTIVATION_BYTES
        ring = 2.0 * (n - 1.0) / n * nbytes / nvlink if n > 1 else 0.0
        allreduce = (node.tp_allreduce_latency_s + (ring if bandwidth else 0.0)) if n > 1 else 0.0
        out = fixed + model.num_layers * TP_ALLREDUCES_PER_LAYER * np.asarray(allreduce) + 0.0 * g
    result = np.asarray(out, dtype=np.float64)
    return float(result) if result.ndim == 0 else result
