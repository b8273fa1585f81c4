"""Outcomes: offline JCT, online APS under TTFT/TPOT SLOs, TTFT, TPOT, per mode.

The path model (physics/links.py, solvers/closed_form.py) gives the most turns/s a cluster
sustains. This layer adds the prefill batching, the decode batch and the queueing that turn a
capacity into latencies (docs/model.md section 6):

Prefill on one GPU (paper Figure 3 right): a forward pass of b requests takes
    tau(b) = t0 + b u,   t0 = h t1,   u = t1 + s,
with t1 = F / (peak x prefill_mfu) the compute of one request, h = prefill_batch_half_requests
and s the copy of its KV into HBM when that is not overlapped with compute (no layer-wise
prefill: the paper's Basic). The batch is capped by HBM: the whole KV of the batch without
layer-wise prefill, one layer's KV with it. Throughput per GPU is b / tau(b) = b / (t1 (b + h))
without the copy: 3x from b = 1 to 20 for h = 2.35.

Offline (N agents start together, paper 7.2): a closed system drained by its stragglers. While
n agents are running, each takes a turn every max(cycle_min, n / T_max) (the asymptotic bounds
of a closed system), with cycle_min = TTFT_min + generated x TPOT + tool latency, the
per-agent critical path. Agents progress together, so after k turns n = N S(k) are left, S the
survival function of turns per trajectory, and
    JCT = integral over k of max(cycle_min x P(any left), N S(k) / T_max),
P(any left) = 1 - (1 - S(k))^N (the expected longest of N trajectories). With every
trajectory of the mean length this is N x turns / min(T_max, N / cycle_min).

Online (Poisson agent arrivals, paper 7.3): turns arrive at lambda_t = APS x turns. Prefill
is a gated batch-service queue: a request waits for the running batch (mean residual tau/2)
and then its own batch, and the steady batch is b = lambda_g t0 / (1 - lambda_g u); near the
batch cap B it also waits for later batches (Kingman: W_B = rho/(1-rho) tau(B)/(2B), rho
against the capped rate B / tau(B)); so
    TTFT = R + 1.5 tau(b) + W_B + W_io,
R the part of the KV read not hidden behind compute, W_io the M/D/1 wait of the binding I/O
link (one node serves a turn's read), lambda_g the arrival rate at the busiest GPU. TPOT is
the decode step at the decode batch b_d = lambda_t x generated x TPOT (Little). APS is the
largest rate with TTFT <= SLO and TPOT <= SLO, found by bisection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from dualpath_plan.errors import InfeasibleError, PlanInputError
from dualpath_plan.physics import model as phys
from dualpath_plan.physics.cluster import (
    DecodeGroup,
    Scheduler,
    SchedulerPolicy,
    apply_storage_limits,
    check_weights_fit,
    decode_group,
    side_caps,
)
from dualpath_plan.physics.links import (
    COMPUTE_LINKS,
    LINKS,
    SIDE_FIELDS,
    Cluster,
    Demand,
    Num,
    SideCaps,
)
from dualpath_plan.physics.workload import TurnCounts
from dualpath_plan.plan import Scenario
from dualpath_plan.solvers.closed_form import Mode, Solution, solve
from dualpath_plan.units import gbit_s_to_byte_s

OutcomeMode = Literal[
    "basic", "basic_layerwise", "dualpath_unscheduled", "even", "dualpath", "oracle"
]
REPORT_MODES: tuple[OutcomeMode, ...] = ("basic", "even", "dualpath", "oracle")
ABLATION_MODES: tuple[OutcomeMode, ...] = (
    "basic",
    "basic_layerwise",
    "dualpath_unscheduled",
    "dualpath",
)


@dataclass(frozen=True)
class ModeSpec:
    path_mode: Mode
    layerwise: bool
    scheduled: bool  # the paper's token- and read-queue-aware scheduler, else the baseline


# The paper's Basic: PE reads only, no layer-wise prefill, the framework's own scheduler. The
# ablation (Figure 12 right) adds layer-wise prefill, then dual-path loading, then scheduling.
MODE_SPECS: dict[OutcomeMode, ModeSpec] = {
    "basic": ModeSpec("basic", layerwise=False, scheduled=False),
    "basic_layerwise": ModeSpec("basic", layerwise=True, scheduled=False),
    "dualpath_unscheduled": ModeSpec("dualpath", layerwise=True, scheduled=False),
    "even": ModeSpec("even", layerwise=True, scheduled=True),
    "dualpath": ModeSpec("dualpath", layerwise=True, scheduled=True),
    "oracle": ModeSpec("oracle", layerwise=True, scheduled=True),
}


@dataclass(frozen=True)
class ServingConfig:
    agents: int = 2048
    ttft_slo_s: float = 4.0  # paper 7.3
    tpot_slo_s: float = 0.050  # paper 7.3
    baseline_scheduler: SchedulerPolicy = "round_robin"
    requests_per_engine: float = 16.0
    load_cv: float = 0.5

    def validate(self) -> None:
        if not (isinstance(self.agents, int) and self.agents > 0):
            raise PlanInputError(
                f"expected a whole number of agents > 0, got {self.agents!r}", field="--agents"
            )
        for name, v in (("--ttft-slo", self.ttft_slo_s), ("--tpot-slo", self.tpot_slo_s)):
            if not (math.isfinite(v) and v > 0):
                raise PlanInputError(
                    f"expected a finite number of seconds > 0, got {v!r}", field=name
                )

    def scheduler(self, scheduled: bool) -> Scheduler:
        policy: SchedulerPolicy = "queue_aware" if scheduled else self.baseline_scheduler
        return Scheduler(policy, self.requests_per_engine, self.load_cv)


@dataclass(frozen=True)
class PrefillModel:
    """One prefill GPU's batching parameters for a mode (per request = per turn)."""

    t1_s: float  # compute of one request at the plateau
    t0_s: float  # fixed time per forward pass
    copy_s: float  # KV copy into HBM serialized with compute (no layer-wise prefill)
    batch_cap: Num  # most requests per forward pass (an array over prefill node counts)
    read_latency_s: float  # part of the KV read a request waits for before its prefill

    @property
    def u_s(self) -> float:
        return self.t1_s + self.copy_s

    def forward_s(self, batch: float) -> float:
        return self.t0_s + batch * self.u_s

    @property
    def max_rate(self) -> Num:
        """Requests/s of one GPU at its batch cap (0 where not one request fits)."""
        cap = np.asarray(self.batch_cap)
        rate = np.where(cap >= 1, cap / (self.t0_s + cap * self.u_s), 0.0)
        return float(rate) if rate.ndim == 0 else rate


@dataclass(frozen=True)
class ModeOutcome:
    mode: OutcomeMode
    throughput_turns_per_s: float  # saturated (offline) throughput
    jct_s: float  # offline, N agents
    drain_s: float  # of the JCT, time beyond N x turns / throughput: stragglers, critical path
    aps: float  # online agents/s under both SLOs (0 when no rate meets them)
    ttft_s: float  # offline TTFT at the operating point
    tpot_s: float  # offline TPOT at the operating point
    online_ttft_s: float  # at the APS
    online_tpot_s: float
    bottleneck: str
    decode_path_fraction: float
    utilization: dict[str, float]
    prefill_batch: float  # requests per forward pass per GPU offline
    decode_batch: float  # sequences decoding offline
    working_set_gbyte: float  # online KV working set at the APS (Little's law, paper 2.5)
    latency_bound: bool  # offline JCT set by the per-agent critical path, not throughput
    aps_limit: str  # what stops a higher APS: ttft, tpot, throughput, or unreachable


def _prefill_model(sc: Scenario, spec: ModeSpec, nodes: Num) -> PrefillModel:
    """Batching parameters of one prefill GPU; ``nodes`` (prefill nodes, a number or an array)
    sets the weight shard and so the batch cap (< 1: not one request fits)."""
    m, node, gpu = sc.model, sc.prefill_node, sc.prefill_gpu
    e = sc.options.efficiencies
    d = sc.turn_demand
    hit = d.mean(d.hit_bytes)
    flops = d.mean(d.prefill_flops)
    tflops = gpu.dense_tflops(m.compute_dtype) or gpu.bf16_dense_tflops
    peak = tflops * 1e12 * (node.prefill_mfu if e else 1.0)
    t1 = flops / peak
    # HBM per GPU left for KV: weights shard over the prefill group's GPUs (EP).
    free = (gpu.hbm_gbyte - node.prefill_hbm_reserve_gbyte) * 1e9 - phys.weight_bytes(m) / (
        nodes * node.gpus_per_node
    )
    kv_request = float(phys.kv_bytes_for_context(m, d.mean(d.context_tokens)))
    per_request = kv_request / m.num_layers if spec.layerwise else kv_request
    # The batch cap as an average (fractional) number of requests: batches of alternating
    # sizes average out, and it keeps the model smooth in its inputs.
    cap = np.maximum(np.asarray(free, dtype=np.float64) / per_request, 0.0)
    snic = node.snic_count * gbit_s_to_byte_s(node.snic_gbit_s) * (node.snic_efficiency if e else 1)
    loopback = min(
        gbit_s_to_byte_s(node.cnic_gbit_s) * (node.cnic_efficiency if e else 1),
        node.cnic_pcie_usable_gbyte_s * 1e9,
    )
    if spec.path_mode == "oracle":
        copy, read = 0.0, 0.0
    elif spec.layerwise:
        # Layer blocks stream in while earlier layers compute: only the first layer waits.
        copy, read = 0.0, hit / m.num_layers / snic
    else:
        copy, read = hit / loopback, hit / snic
    h = node.prefill_batch_half_requests
    return PrefillModel(
        t1_s=t1,
        t0_s=h * t1,
        copy_s=copy,
        batch_cap=float(cap) if cap.ndim == 0 else cap,  # type: ignore[arg-type]
        read_latency_s=read,
    )


@dataclass(frozen=True)
class Saturated:
    """The most turns/s a mode sustains (offline, saturated), over arrays of P and D."""

    solution: Solution
    prefill: PrefillModel
    cluster: Cluster  # what was solved: the same inputs give the LP (sweep --solver lp)
    demand: Demand
    tpot_light_s: np.ndarray  # TPOT of a single decoding sequence (the critical path's)
    decode: DecodeGroup  # over the distinct decode node counts (one cluster: that one)
    feasible: np.ndarray  # weights fit both sides, one request fits a prefill GPU, one sequence
    # fits the decode group


def saturated(
    sc: Scenario, mode: OutcomeMode, cfg: ServingConfig, prefill_nodes: Num, decode_nodes: Num
) -> Saturated:
    """The path model's optimum for the mode, with its prefill batching folded into the
    compute link: the effective prefill work per turn, in FLOPs at the node's achieved rate,
    is such that the compute link's capacity divided by it is the batch-capped request rate.
    Vectorized over ``prefill_nodes`` and ``decode_nodes`` (used by size, recommend, sweep)."""
    spec = MODE_SPECS[mode]
    P = np.asarray(prefill_nodes, dtype=np.float64)
    D = np.asarray(decode_nodes, dtype=np.float64)
    scheduler = cfg.scheduler(spec.scheduled)
    node, gpu = sc.prefill_node, sc.prefill_gpu
    d = sc.turn_demand
    # What depends on P alone or on D alone is computed once per distinct value (a grid has
    # few) and then indexed: the batch cap, the imbalance, the decode group.
    uP, iP = _distinct(P)
    uD, iD = _distinct(D)
    pm_u = _prefill_model(sc, spec, uP)
    pm = replace(pm_u, batch_cap=_take(pm_u.batch_cap, iP))
    rate = _take(pm_u.max_rate, iP)
    tflops = gpu.dense_tflops(sc.model.compute_dtype) or gpu.bf16_dense_tflops
    peak = tflops * 1e12 * (node.prefill_mfu if sc.options.efficiencies else 1.0)
    with np.errstate(divide="ignore"):
        work = np.where(rate > 0, peak / np.where(rate > 0, rate, 1.0), np.inf)
    demand = replace(sc.demand, prefill_flops=work)
    group = decode_group(
        sc.model,
        sc.decode_node,
        sc.decode_gpu,
        uD,
        d.mean(d.context_tokens),
        d.mean(d.generated_tokens),
        sc.options,
    )
    tokens = _take(group.tokens_per_s_array(), iD)
    tpot_light = _take(group.step_array_s(np.ones_like(uD)), iD)
    pe = _take_caps(side_caps(node, gpu, sc.model, sc.options, scheduler, uP), iP)
    de = _take_caps(
        side_caps(sc.decode_node, sc.decode_gpu, sc.model, sc.options, scheduler, uD), iD
    )
    pe, de, read, write = apply_storage_limits(pe, de, sc.storage, sc.options)
    weights = phys.weight_bytes(sc.model)
    fits_p = P * node.gpus_per_node * gpu.hbm_gbyte * 1e9 > weights
    feasible = (P >= 1) & (D >= 1) & fits_p & (rate > 0) & np.isfinite(tokens)
    cluster = Cluster(
        prefill_nodes=P,
        decode_nodes=D,
        pe=pe,
        de=de,
        decode_tokens_per_s=np.where(np.isfinite(tokens), tokens, 1.0),
        storage_read=np.float64(read),
        storage_write=np.float64(write),
    )
    return Saturated(
        solve(cluster, demand, spec.path_mode, sc.options),
        pm,
        cluster,
        demand,
        tpot_light,
        group,
        feasible,
    )


def offline_jct_s(agents: Num, t_max: Num, cycle_min: Num, counts: TurnCounts) -> Num:
    """Offline JCT of N agents started together (docs/model.md section 6): over the turn
    index k, turns take max(cycle_min x P(any left), N S(k) / T_max) each, P(any left) =
    1 - (1 - S)^N. Exact: a sum over the steps of S, and the integral over its linear ramp in
    closed form. Vectorized over agents, t_max and cycle_min."""
    n = np.asarray(agents, dtype=np.float64)
    t = np.asarray(t_max, dtype=np.float64)
    c = np.asarray(cycle_min, dtype=np.float64)
    r = n / t  # seconds per turn while all N run
    total = np.zeros(np.broadcast(n, t, c).shape)
    for length, share in zip(counts.length, counts.surviving, strict=True):
        any_left = -np.expm1(n * np.log1p(-share)) if share < 1.0 else 1.0
        total += length * np.maximum(c * any_left, r * share)
    if counts.ramp_turns > 0:
        top = float(counts.surviving[-1]) if counts.surviving.size else 1.0
        total += counts.ramp_turns / top * _ramp_integral(n, r, c, top)
    return float(total) if total.ndim == 0 else total


def offline_drain_s(jct_s: Num, agents: Num, t_max: Num, counts: TurnCounts) -> Num:
    """The part of an offline JCT beyond the throughput bound N x mean turns / T_max: the time
    the cluster runs below saturation (stragglers, and the critical path of too few agents)."""
    return np.maximum(jct_s - np.asarray(agents) * counts.mean / t_max, 0.0)


def _ramp_integral(n: np.ndarray, r: np.ndarray, c: np.ndarray, top: float) -> np.ndarray:
    """The integral over S from 0 to ``top`` of max(g, h), g = c (1 - (1 - S)^n) (concave,
    the critical path while any agent is left) and h = r S (the throughput bound). g starts
    above h iff c n > r; a concave g then crosses h at most once, at the S where g = h,
    found by Newton's method from the right (monotone for a concave difference)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):

        def g_integral(x: np.ndarray) -> np.ndarray:  # integral of g from 0 to x
            return c * (x + np.expm1((n + 1) * np.log1p(-x)) / (n + 1))

        top_arr = np.full(np.broadcast(n, r, c).shape, top)
        g_top = -c * np.expm1(n * np.log1p(-top))
        below_throughout = c * n <= r
        above_throughout = ~below_throughout & (g_top >= r * top)
        # Crossing: start where h = c (or at the top), right of the root, where g - h < 0.
        shape = top_arr.shape
        flat = np.array(np.minimum(top_arr, c / r), dtype=np.float64).reshape(-1)  # a copy
        nf, rf, cf = (np.broadcast_to(a, shape).reshape(-1) for a in (n, r, c))
        active = np.flatnonzero(~below_throughout & ~above_throughout)
        for _ in range(_NEWTON_MAX_STEPS):  # on the points not yet converged only
            if active.size == 0:
                break
            xa, na, ra, ca = flat[active], nf[active], rf[active], cf[active]
            gone = np.exp(na * np.log1p(-xa))  # (1 - x)^n: no agent left
            phi = ca * (1.0 - gone) - ra * xa
            slope = ca * na * gone / (1.0 - xa) - ra
            step = np.where(slope < 0, phi / slope, 0.0)
            flat[active] = np.clip(xa - step, 0.0, top)
            active = active[np.abs(step) > 1e-13 + 1e-12 * flat[active]]
        x = flat.reshape(shape)
        crossing = g_integral(x) + r * (top * top - x * x) / 2
        return np.where(
            below_throughout,
            r * top * top / 2,
            np.where(above_throughout, g_integral(top_arr), crossing),
        )


# Newton steps for the crossing in _ramp_integral, at most: from the right of the root of a
# concave difference the iterates fall monotonically; from c / r they land within (1 - S)^N of
# it in one step where many agents are left, and converge quadratically. Where c N only just
# exceeds r the root is near 0 and the first steps merely halve the distance (about 40 steps
# for 1e-12), hence the loop stops once every step is below 1e-12 of x.
_NEWTON_MAX_STEPS = 100


def _distinct(values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """(distinct values, index back) for an array; a number is its own distinct value. Node
    counts are small whole numbers: those are mapped by counting, without a sort."""
    if values.ndim == 0:
        return values, None
    if values.size and values.min() >= 0 and values.max() < 1e6:
        ints = values.astype(np.int64)
        if np.array_equal(ints, values):
            present = np.flatnonzero(np.bincount(ints.ravel()))
            lookup = np.zeros(int(present[-1]) + 1, dtype=np.int64)
            lookup[present] = np.arange(present.size)
            return present.astype(np.float64), lookup[ints]
    u, inverse = np.unique(values, return_inverse=True)
    return u, inverse.reshape(values.shape)


def _take(values: Num, index: np.ndarray | None) -> np.ndarray:
    a = np.asarray(values)
    return a if index is None or a.ndim == 0 else a[index]


def _take_caps(caps: SideCaps, index: np.ndarray | None) -> SideCaps:
    return SideCaps(**{f: _take(getattr(caps, f), index) for f in SIDE_FIELDS})


def evaluate_mode(sc: Scenario, mode: OutcomeMode, cfg: ServingConfig) -> ModeOutcome:
    spec = MODE_SPECS[mode]
    P, D = sc.prefill_nodes, sc.decode_nodes
    if P < 1 or D < 1:
        raise InfeasibleError(
            f"a P/D cluster needs at least one node per side, got {P}P{D}D",
            field="prefill_nodes" if P < 1 else "decode_nodes",
        )
    # Weights first: the clearest reason a cluster is too small.
    check_weights_fit(sc.model, sc.prefill_node, sc.prefill_gpu, P, "prefill")
    check_weights_fit(sc.model, sc.decode_node, sc.decode_gpu, D, "decode")
    sat = saturated(sc, mode, cfg, P, D)
    pm = sat.prefill
    cap = float(np.asarray(pm.batch_cap))  # one cluster: a number
    if not bool(sat.feasible):
        per = float(
            phys.kv_bytes_for_context(sc.model, sc.turn_demand.mean(sc.turn_demand.context_tokens))
        )
        raise InfeasibleError(
            f"a prefill GPU cannot hold one request's KV ({per / 1e9:.2f} GB) beside its share "
            f"of the weights and the {sc.prefill_node.prefill_hbm_reserve_gbyte:g} GB reserve",
            field="prefill_nodes",
        )
    scheduler = cfg.scheduler(spec.scheduled)
    imbalance = float(scheduler.imbalance(P * sc.prefill_node.gpus_per_node))  # busiest GPU
    sol = sat.solution
    t_max = float(sol.throughput_turns_per_s)
    if not (math.isfinite(t_max) and t_max > 0):
        raise InfeasibleError(
            f"{mode}: the cluster sustains no turns ({sol.bottleneck_name()} has no capacity "
            "left for this workload)",
            field="cluster",
        )
    d = sc.turn_demand
    gen = d.mean(d.generated_tokens)
    group = sat.decode  # one cluster: the group of its D decode nodes
    counts = d.trajectory_turns
    turns = counts.mean
    tool = sc.workload.tool_latency_s
    # Offline: the closed system while all N agents run (the operating point), then drained.
    ttft_min = pm.read_latency_s + pm.forward_s(1.0)
    cycle_min = ttft_min + gen * group.step_s(1.0) + tool
    x = min(t_max, cfg.agents / cycle_min)
    b_dec = group.little_batch(x, gen)
    tpot = group.step_s(max(b_dec, 1.0))
    cycle = cfg.agents / x
    ttft = max(cycle - gen * tpot - tool, ttft_min)
    jct = float(offline_jct_s(cfg.agents, t_max, cycle_min, counts))
    util = np.asarray(sol.utilization)
    # I/O side of the online queue: the most utilized I/O link sets W_io.
    io = [i for i, n in enumerate(LINKS) if n not in COMPUTE_LINKS]
    io_util = float(util[io].max()) if spec.path_mode != "oracle" else 0.0
    io_link = LINKS[io[int(np.argmax(util[io]))]]
    t_io = t_max / io_util if io_util > 0 else math.inf
    io_nodes = P if io_link.startswith("pe_") else (D if io_link.startswith("de_") else 1)
    gpus = P * sc.prefill_node.gpus_per_node

    def online(aps: float) -> tuple[float, float, float]:
        lam = aps * turns
        lam_g = lam / gpus * imbalance
        if lam >= t_max or lam_g * pm.u_s >= 1.0:
            return math.inf, math.inf, 0.0
        batch = lam_g * pm.t0_s / (1.0 - lam_g * pm.u_s)
        if batch > cap:
            return math.inf, math.inf, 0.0
        # Near the batch cap B, requests also wait for later batches: Kingman's heavy-traffic
        # wait for batches of B Poisson arrivals (c_a^2 = 1/B) served in a fixed tau(B)
        # (c_s^2 = 0), rho against the capped rate B / tau(B). Negligible when B is large
        # (layer-wise prefill), it keeps TTFT finite only below the capped capacity.
        rho_cap = lam_g * pm.forward_s(cap) / cap
        if rho_cap >= 1.0:
            return math.inf, math.inf, 0.0
        wait_batches = rho_cap / (1.0 - rho_cap) * pm.forward_s(cap) / (2.0 * cap)
        wait_io = 0.0
        if math.isfinite(t_io):
            rho = lam / t_io
            mu = t_io / io_nodes
            wait_io = rho / (2.0 * mu * (1.0 - rho))
        ttft_on = pm.read_latency_s + 1.5 * pm.forward_s(batch) + wait_batches + wait_io
        b_d = group.little_batch(lam, gen)
        return ttft_on, group.step_s(max(b_d, 1.0)), b_d

    low_ttft, low_tpot, _ = online(1e-9 / turns)
    reachable = low_ttft <= cfg.ttft_slo_s and low_tpot <= cfg.tpot_slo_s
    lo, hi = 0.0, t_max / turns if reachable else 0.0
    for _ in range(60 if reachable else 0):
        mid = (lo + hi) / 2
        t_on, p_on, _ = online(mid)
        if t_on <= cfg.ttft_slo_s and p_on <= cfg.tpot_slo_s:
            lo = mid
        else:
            hi = mid
    aps = lo
    t_on, p_on, _ = online(aps)
    t_hi, p_hi, _ = online(min(aps * 1.0001 + 1e-12, t_max / turns))
    limit = (
        "throughput"
        if not math.isfinite(t_hi)
        else (
            "ttft" if t_hi > cfg.ttft_slo_s else "tpot" if p_hi > cfg.tpot_slo_s else "throughput"
        )
    )
    if not reachable:
        limit = "unreachable"
        t_on, p_on = low_ttft, low_tpot
    agent_time = turns * (t_on + gen * p_on + tool)
    total = sc.workload.total_tokens or (d.mean(d.context_tokens) + gen)
    working_set = aps * agent_time * total / 2.0 * phys.kv_bytes_per_token(sc.model)
    return ModeOutcome(
        mode=mode,
        throughput_turns_per_s=t_max,
        jct_s=jct,
        drain_s=float(offline_drain_s(jct, cfg.agents, t_max, counts)),
        aps=aps,
        ttft_s=ttft,
        tpot_s=tpot,
        online_ttft_s=t_on,
        online_tpot_s=p_on,
        bottleneck=sol.bottleneck_name(),
        decode_path_fraction=float(sol.decode_path_fraction),
        utilization={n: float(util[i]) for i, n in enumerate(LINKS)},
        prefill_batch=min(cap, x / gpus * pm.t0_s / max(1e-12, 1 - x / gpus * pm.u_s))
        if x / gpus * pm.u_s < 1
        else cap,
        decode_batch=b_dec,
        working_set_gbyte=working_set / 1e9,
        latency_bound=cfg.agents / cycle_min < t_max,
        aps_limit=limit,
    )


@dataclass(frozen=True)
class SizeReport:
    scenario: Scenario
    config: ServingConfig
    gb_per_pflop: float
    modes: dict[OutcomeMode, ModeOutcome]

    @property
    def speedup_jct(self) -> float:
        return self.modes["basic"].jct_s / self.modes["dualpath"].jct_s

    @property
    def speedup_aps(self) -> float:
        b = self.modes["basic"].aps
        return self.modes["dualpath"].aps / b if b > 0 else math.inf

    @property
    def oracle_gap(self) -> float:
        """How much longer dualpath's JCT is than oracle's (0 = reaches oracle)."""
        return self.modes["dualpath"].jct_s / self.modes["oracle"].jct_s - 1.0


def evaluate(
    sc: Scenario,
    cfg: ServingConfig = ServingConfig(),
    modes: tuple[OutcomeMode, ...] = REPORT_MODES,
    strict: bool = True,
) -> SizeReport:
    """All modes of a scenario. ``strict``: an SLO that no arrival rate meets in some mode is
    an error (the CLI's exit 2), not an APS of 0."""
    cfg.validate()
    out = {m: evaluate_mode(sc, m, cfg) for m in modes}
    if strict:
        for m, o in out.items():
            if o.aps_limit == "unreachable":
                which = "TTFT" if o.online_ttft_s > cfg.ttft_slo_s else "TPOT"
                field = "--ttft-slo" if which == "TTFT" else "--tpot-slo"
                raise InfeasibleError(
                    f"no arrival rate meets the SLOs in mode {m}: even one agent sees TTFT "
                    f"{o.online_ttft_s:.2f} s (SLO {cfg.ttft_slo_s:g} s) and TPOT "
                    f"{o.online_tpot_s * 1e3:.1f} ms (SLO {cfg.tpot_slo_s * 1e3:g} ms)",
                    field=field,
                )
    return SizeReport(sc, cfg, sc.turn_demand.gb_per_pflop, out)
