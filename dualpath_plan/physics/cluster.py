"""From profiles to a :class:`Cluster`: per-node link capacities, decode capacity, imbalance.

Capacities (per node, per direction, bytes/s), with ``PathOptions.efficiencies``:
- SNIC: snic_count x snic_gbit_s / 8 x snic_efficiency (each direction; NICs are full duplex).
- DRAM: dram_gbyte_s x dram_efficiency, reads + writes together (the paper's eq. 8 counts
  both against M).
- CNIC PCIe side: cnic_count x min(cnic line rate x cnic_efficiency, CNIC PCIe link x
  pcie_efficiency) x (1 - cnic_collective_share). The paper caps each direction at B, the NIC
  rate (dualpath-paper.md 2.4); a NIC in a slower slot is capped by its PCIe link instead.
- CNIC network side: cnic_count x line rate x cnic_efficiency x (1 - cnic_collective_share):
  InfiniBand VL arbitration gives model collectives priority, KV gets the residual (paper 2.6).
- GPU PCIe: gpus_per_node x usable PCIe per direction x pcie_efficiency.
- Prefill compute: gpus_per_node x dense TFLOPS at the model's compute dtype x prefill_mfu.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dualpath_plan.errors import InfeasibleError
from dualpath_plan.physics import model as phys
from dualpath_plan.physics.links import Cluster, Demand, Num, PathOptions, SideCaps
from dualpath_plan.physics.workload import TurnDemand
from dualpath_plan.profiles.schemas import GpuProfile, ModelProfile, NodeProfile, StorageProfile
from dualpath_plan.units import gbit_s_to_byte_s

SchedulerPolicy = Literal["ideal", "round_robin", "queue_aware"]


@dataclass(frozen=True)
class Scheduler:
    """Load imbalance across engines, as a max/avg factor that derates a side's usable
    aggregate capacity (the busiest node saturates first).

    - ideal: 1 (the paper's bottleneck analysis assumes load-balanced scheduling).
    - round_robin: requests dealt blindly; with k requests in flight per engine and a
      coefficient of variation v of per-request load, the busiest of n engines carries about
      1 + v sqrt(2 ln n / k) times the mean (expected maximum of n near-normal sums, a Gumbel
      approximation).
    - queue_aware: a token- and read-queue-aware scheduler like the paper's (Algorithm 1) keeps
      every engine within one request of the mean: 1 + 1/k.
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


def side_caps(
    node: NodeProfile,
    gpu: GpuProfile,
    model: ModelProfile,
    options: PathOptions,
    scheduler: Scheduler | None = None,
    nodes: Num = 1.0,
) -> SideCaps:
    """One node's capacities. With a ``scheduler``, the busiest of ``nodes`` nodes sets the
    usable share: node-wide links (SNIC, DRAM) are imbalanced across nodes, each carrying
    gpus_per_node engines' requests; per-GPU links (CNICs, GPU PCIe, compute) across GPUs."""
    e = options.efficiencies
    snic = node.snic_count * gbit_s_to_byte_s(node.snic_gbit_s) * (node.snic_efficiency if e else 1)
    line = gbit_s_to_byte_s(node.cnic_gbit_s) * (node.cnic_efficiency if e else 1)
    pcie_nic = node.cnic_pcie_usable_gbyte_s * 1e9 * (node.pcie_efficiency if e else 1)
    per_cnic_pcie = min(line, pcie_nic) if options.pcie_link_limit else line
    residual = 1.0 - (node.cnic_collective_share if options.collectives else 0.0)
    cnic_pcie = node.cnic_count * per_cnic_pcie * residual
    cnic_net = node.cnic_count * line * residual
    gpu_pcie = (
        (node.gpus_per_node * gpu.pcie_usable_gbyte_s * 1e9 * (node.pcie_efficiency if e else 1))
        if options.gpu_pcie
        else math.inf
    )
    dram = node.dram_gbyte_s * 1e9 * (node.dram_efficiency if e else 1)
    tflops = gpu.dense_tflops(model.compute_dtype) or gpu.bf16_dense_tflops
    compute = node.gpus_per_node * tflops * 1e12 * (node.prefill_mfu if e else 1)
    sched = scheduler or Scheduler()
    per_node = 1.0 / sched.imbalance(nodes, sched.requests_per_engine * node.gpus_per_node)
    per_gpu = 1.0 / sched.imbalance(nodes * node.gpus_per_node)
    f = np.float64
    return SideCaps(
        snic_read=f(snic * per_node),
        snic_write=f(snic * per_node),
        dram=f(dram * per_node),
        cnic_pcie_read=f(cnic_pcie * per_gpu),
        cnic_pcie_write=f(cnic_pcie * per_gpu),
        cnic_net_send=f(cnic_net * per_gpu),
        cnic_net_recv=f(cnic_net * per_gpu),
        gpu_pcie_h2d=f(gpu_pcie * per_gpu),
        gpu_pcie_d2h=f(gpu_pcie * per_gpu),
        compute=f(compute * per_gpu),
    )


@dataclass(frozen=True)
class DecodeCapacity:
    tokens_per_s: float
    batch: float  # sequences decoded together across the decode group
    tpot_s: float  # time per output token at that batch
    kv_bytes_per_sequence: float


def check_weights_fit(
    model: ModelProfile, node: NodeProfile, gpu: GpuProfile, nodes: float, side: str
) -> float:
    """HBM left for KV on a group of ``nodes`` nodes after the weights (sharded over the group's
    GPUs, as EP does); raises when the weights do not fit."""
    hbm = nodes * node.gpus_per_node * gpu.hbm_gbyte * 1e9
    weights = phys.weight_bytes(model)
    if weights >= hbm:
        raise InfeasibleError(
            f"{model.id} weights ({weights / 1e9:,.0f} GB) do not fit in the {side} group's HBM "
            f"({nodes:g} x {node.gpus_per_node} x {gpu.hbm_gbyte:g} GB = {hbm / 1e9:,.0f} GB); "
            f"add {side} nodes or choose a GPU with more HBM",
            field=f"{side}_nodes",
        )
    return hbm - weights


@dataclass(frozen=True)
class DecodeGroup:
    """A decode group's roofline: step time of b sequences at a context (docs/model.md)."""

    model: ModelProfile
    hbm_byte_s: Num  # group HBM bandwidth x decode_hbm_efficiency (an array over groups)
    peak_flop_s: Num  # group dense peak x prefill_mfu
    overhead_s: float  # decode_step_overhead_s
    free_hbm_bytes: Num  # HBM left for KV after the weights (< 0: they do not fit)
    context_tokens: float  # mean context a generated token attends to
    kv_bytes_per_sequence: float  # KV of one sequence at the end of its generation

    @property
    def max_batch(self) -> int:
        return max(math.floor(float(self.free_hbm_bytes) / self.kv_bytes_per_sequence), 0)

    def max_batch_array(self) -> np.ndarray:
        return np.maximum(
            np.floor(np.asarray(self.free_hbm_bytes) / self.kv_bytes_per_sequence), 0.0
        )

    def tokens_per_s_array(self) -> np.ndarray:
        """Tokens/s at the HBM-limited batch, per group (NaN where not one sequence fits)."""
        b = self.max_batch_array()
        with np.errstate(divide="ignore", invalid="ignore"):
            rate = b / self.step_array_s(np.maximum(b, 1.0))
        return np.where(b >= 1, rate, np.nan)

    def step_array_s(self, batch: np.ndarray) -> np.ndarray:
        """max(HBM bytes / bandwidth, FLOPs / peak) + fixed overhead, for an array of batches."""
        cost = phys.decode_step(self.model, batch, self.context_tokens)
        return (
            np.maximum(cost.hbm_bytes / self.hbm_byte_s, cost.flops / self.peak_flop_s)
            + self.overhead_s
        )

    @functools.cached_property
    def _grid(self) -> tuple[np.ndarray, np.ndarray]:
        # Step time is smooth in the batch: tabulate it once (integers up to 4096, then a
        # geometric grid) and interpolate, instead of re-deriving it inside every bisection.
        top = max(self.max_batch, 1)
        b = np.unique(
            np.concatenate(
                [np.arange(1.0, min(top, 4096) + 1.0), np.geomspace(min(top, 4096), top, 256)]
            )
        )
        return b, self.step_array_s(b)

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

    def batch_for_tpot(self, tpot_s: float) -> float:
        """Largest batch (<= max_batch) whose step meets ``tpot_s`` (0 if even one does not)."""
        if self.step_s(1) > tpot_s:
            return 0.0
        lo, hi = 1.0, float(self.max_batch)
        if self.step_s(hi) <= tpot_s:
            return hi
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.step_s(mid) <= tpot_s else (lo, mid)
        return lo


def decode_group(
    model: ModelProfile,
    node: NodeProfile,
    gpu: GpuProfile,
    nodes: Num,
    context_tokens: float,
    generated_tokens: float,
    options: PathOptions,
) -> DecodeGroup:
    """The decode group of ``nodes`` nodes (a number: weights must fit, else an error; an
    array: ``free_hbm_bytes`` < 0 marks groups where they do not)."""
    if np.ndim(nodes) == 0:
        free: Num = check_weights_fit(model, node, gpu, float(nodes), "decode")
    else:
        free = np.asarray(nodes) * node.gpus_per_node * gpu.hbm_gbyte * 1e9 - phys.weight_bytes(
            model
        )
    gpus = np.asarray(nodes, dtype=np.float64) * node.gpus_per_node
    e = options.efficiencies
    tflops = gpu.dense_tflops(model.compute_dtype) or gpu.bf16_dense_tflops
    ctx = context_tokens + generated_tokens / 2.0
    scalar = np.ndim(nodes) == 0
    bw = gpus * gpu.hbm_tbyte_s * 1e12 * (node.decode_hbm_efficiency if e else 1)
    peak = gpus * tflops * 1e12 * (node.prefill_mfu if e else 1)
    return DecodeGroup(
        model=model,
        hbm_byte_s=float(bw) if scalar else bw,
        peak_flop_s=float(peak) if scalar else peak,
        overhead_s=node.decode_step_overhead_s if e else 0.0,
        free_hbm_bytes=free,
        context_tokens=ctx,
        kv_bytes_per_sequence=float(
            phys.kv_bytes_for_context(model, context_tokens + generated_tokens)
        ),
    )


def decode_capacity(
    model: ModelProfile,
    node: NodeProfile,
    gpu: GpuProfile,
    nodes: float,
    context_tokens: float,
    generated_tokens: float,
    options: PathOptions,
    tpot_slo_s: float | None = None,
) -> DecodeCapacity:
    """Decode tokens/s of a group of ``nodes`` decode nodes (roofline, docs/model.md): the
    batch is the most sequences whose KV (at the end of generation) fits beside the weights,
    reduced until the step meets ``tpot_slo_s`` when one is given."""
    group = decode_group(model, node, gpu, nodes, context_tokens, generated_tokens, options)
    if group.max_batch < 1:
        raise InfeasibleError(
            f"one sequence's KV ({group.kv_bytes_per_sequence / 1e9:.1f} GB) does not fit "
            "beside the weights in the decode group's HBM",
            field="decode_nodes",
        )
    batch = float(group.max_batch)
    if tpot_slo_s is not None:
        batch = group.batch_for_tpot(tpot_slo_s)
        if batch < 1:
            raise InfeasibleError(
                f"even one sequence decodes at {group.step_s(1) * 1e3:.1f} ms per token, over "
                f"the TPOT SLO of {tpot_slo_s * 1e3:g} ms",
                field="tpot_slo",
            )
    tpot = group.step_s(batch)
    return DecodeCapacity(batch / tpot, batch, tpot, group.kv_bytes_per_sequence)


def demand_means(d: TurnDemand) -> Demand:
    """The mix's mean turn (every load is linear in the demand, so means are exact for one
    common split)."""
    f = np.float64
    return Demand(
        hit_bytes=f(d.mean(d.hit_bytes)),
        miss_bytes=f(d.mean(d.miss_bytes)),
        generated_kv_bytes=f(d.mean(d.generated_kv_bytes)),
        append_writeback_bytes=f(d.mean(d.append_writeback_bytes)),
        prefill_flops=f(d.mean(d.prefill_flops)),
        generated_tokens=f(d.mean(d.generated_tokens)),
    )


def build_cluster(
    *,
    model: ModelProfile,
    demand: TurnDemand,
    prefill_node: NodeProfile,
    prefill_gpu: GpuProfile,
    decode_node: NodeProfile,
    decode_gpu: GpuProfile,
    prefill_nodes: int,
    decode_nodes: int,
    storage: StorageProfile | None = None,
    options: PathOptions = PathOptions(),
    scheduler: Scheduler = Scheduler(),
    tpot_slo_s: float | None = None,
) -> tuple[Cluster, DecodeCapacity]:
    for name, n in (("prefill_nodes", prefill_nodes), ("decode_nodes", decode_nodes)):
        if not (isinstance(n, int | float) and math.isfinite(n) and n >= 1):
            raise InfeasibleError(
                f"a P/D cluster needs at least one node per side, got {n!r}", field=name
            )
    check_weights_fit(model, prefill_node, prefill_gpu, prefill_nodes, "prefill")
    dec = decode_capacity(
        model,
        decode_node,
        decode_gpu,
        decode_nodes,
        demand.mean(demand.context_tokens),
        demand.mean(demand.generated_tokens),
        options,
        tpot_slo_s,
    )
    pe = side_caps(
        prefill_node,
        prefill_gpu,
        model,
        options,
        scheduler,
        prefill_nodes,
    )
    de = side_caps(
        decode_node,
        decode_gpu,
        model,
        options,
        scheduler,
        decode_nodes,
    )
    pe, de, read, write = apply_storage_limits(pe, de, storage, options)
    cluster = Cluster(
        prefill_nodes=np.float64(prefill_nodes),
        decode_nodes=np.float64(decode_nodes),
        pe=pe,
        de=de,
        decode_tokens_per_s=np.float64(dec.tokens_per_s),
        storage_read=np.float64(read),
        storage_write=np.float64(write),
    )
    return cluster, dec


def apply_storage_limits(
    pe: SideCaps, de: SideCaps, storage: StorageProfile | None, options: PathOptions
) -> tuple[SideCaps, SideCaps, float, float]:
    """The storage cluster's aggregate read/write limits (inf: none), and no client reading
    more than max_client_read_gbyte_s whatever its SNICs."""
    if storage is None or not options.storage_limit:
        return pe, de, math.inf, math.inf
    cap = storage.max_client_read_gbyte_s * 1e9
    return (
        _cap_snic(pe, cap),
        _cap_snic(de, cap),
        storage.aggregate_read_gbyte_s * 1e9,
        storage.aggregate_write_gbyte_s * 1e9,
    )


def _cap_snic(s: SideCaps, cap: float) -> SideCaps:
    from dataclasses import replace

    return replace(s, snic_read=np.minimum(s.snic_read, cap))
