"""A discrete-event simulation of the cluster ``size`` models: the reference its queueing
approximation is checked against (docs/model.md section 10).

The same scenario, the same assembly of capacities and the same engines as the analytical
model; what differs is that agents replay their turns one by one and every queue is simulated
instead of approximated. A turn:

1. starts (an agent's first turn at its arrival, a later one when the previous turn's tokens
   are out and the tool latency has passed) and is given a prefill GPU, a decode node and a
   read path by the scheduler: ``paper`` (section 6: PE by token load in read-queue
   categories with the alpha = 3 s of reads and beta = 5 s of compute thresholds, DE by free
   HBM and token load, the read on the side whose node has the shorter read queue) or
   ``round_robin`` (engines in turn, the path by a running split, blind to every queue);
2. reads its hit KV from storage into its reading node's DRAM buffer (phase A: the node's
   storage-read links and the storage cluster, bandwidth shared fairly among the reads in
   flight);
3. waits on its prefill GPU for a forward pass: FIFO batches capped by the HBM the batch's KV
   needs (one layer's with layer-wise prefill) and by the compute quota (section 6, 300 ms of
   attention per layer), the request that overflows the quota chunked; a pass of requests
   with compute u_i takes t0 + sum u_i (the engine of ``size``);
4. meanwhile moves the rest of its KV (phase B: H2D, P -> D, the decode buffer's H2D) over
   the links it crosses; its prefill ends when both its pass and phase B are done (TTFT);
5. decodes on its decode node's group: every sequence advances one token per step of the
   group's decode step time at the group's batch (the step table of ``size``); a node holds
   at most its share of the HBM-limited batch, later sequences wait;
6. writes its new KV back (phase C, off the critical path).

Links: every I/O link of the assembly is a processor-sharing server per node (the storage
aggregate one per cluster) whose capacity is the assembly's per-node capacity without the
scheduler imbalance (the simulation has its own scheduler). Links whose load at the
analytical optimum is below ``queued_utilization`` of their capacity cannot bind; a transfer
crosses them in its size over the capacity, without an event (a documented speed-up whose
error is at most that utilization's queueing delay on a transfer far shorter than a turn).
A turn's bytes on each link are the link table's (physics/links.py) for its path.

Turn contents: a profile's turns grow an agent's context linearly (cached tokens of turn k of
n: 2 x mean x (k + 1/2) / n, so the mean is the profile's and the longest context is twice
it, as an agent's context grows by its appended and generated tokens); a trace's turns are
drawn from its rows by weight. Turn counts per agent are drawn from the workload's
distribution (``TurnCounts``).

The event loop is a binary heap of (time, sequence, kind, a, b) tuples; processor sharing
runs on virtual time (each server's jobs finish in order of their virtual finish time, so an
arrival or a departure is O(log n)); a server's next completion is an event that a change of
its job count supersedes. Same seed, same events, same output.
"""

from __future__ import annotations

import heapq
import math
import time as wallclock
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from dualpath_plan.errors import InfeasibleError, PlanInputError
from dualpath_plan.outcomes.paths import check_feasible
from dualpath_plan.physics import model as phys
from dualpath_plan.physics.engines import Scheduling
from dualpath_plan.physics.links import LINK_TABLE, LINKS, Demand, turn_load_columns
from dualpath_plan.physics.modes import MODE_TABLE, ModeName
from dualpath_plan.physics.workload import TurnCounts
from dualpath_plan.scenario.assemble import assemble
from dualpath_plan.scenario.bundle import Scenario
from dualpath_plan.solvers.closed_form import solve

SimScheduler = Literal["paper", "round_robin"]
SIM_SCHEDULERS: tuple[str, ...] = ("paper", "round_robin")

# The paper's scheduler thresholds (section 6, A.4): alpha = the tokens a node reads in 3 s,
# beta = the tokens one GPU prefills in 5 s; the compute quota of a forward pass, 300 ms of
# attention per layer; the DE high-token margin 1.05.
ALPHA_READ_S = 3.0
BETA_COMPUTE_S = 5.0
QUOTA_PER_LAYER_S = 0.300
HIGH_TOKEN_MARGIN = 1.05

# Online, a run is stable when the turns that start after the warm-up are at least this share
# of those the arrivals offer (APS x mean turns x the measured span): an unstable queue lets
# agents start ever fewer turns.
STABLE_SHARE = 0.9

# Event kinds.
_TURN, _SERVER, _FORWARD, _DELAY, _AGENT, _WINDOW = range(6)
# Phases of a turn that wait on links.
_READ, _MOVE, _WRITE = range(3)


@dataclass(frozen=True)
class SimConfig:
    """What to simulate: ``agents`` started together (offline) or Poisson arrivals at ``aps``
    agents/s for ``duration_s`` (online, statistics from turns that start after ``warmup_s``)."""

    mode: ModeName = "dualpath"
    agents: int | None = 2048
    aps: float | None = None
    # Online: arrivals over this long (default four lifetimes of the longest agent at light
    # load) and turns measured after the warm-up (default two such lifetimes: the rate of
    # turns is steady only once the first agents' longest trajectories could end, and under
    # load a lifetime stretches).
    duration_s: float | None = None
    warmup_s: float | None = None
    seed: int = 0
    scheduler: SimScheduler | None = None  # default: the mode's (paper or round robin)
    window_s: float = 10.0
    queued_utilization: float = 0.25
    prefill_quota_s: float | None = None  # a forward pass at most; default 300 ms x layers
    max_events: int = 500_000_000
    keep_turns: bool = False  # every turn's record (--trace-out); otherwise only statistics

    def __post_init__(self) -> None:
        if (self.agents is None) == (self.aps is None):
            raise PlanInputError(
                "give --agents (offline) or --aps (online), not both", field="--aps"
            )
        if self.agents is not None and not 1 <= self.agents <= 10_000_000:
            raise PlanInputError(f"expected 1 to 10,000,000, got {self.agents}", field="--agents")
        if self.aps is not None and not (math.isfinite(self.aps) and self.aps > 0):
            raise PlanInputError(f"expected a number > 0, got {self.aps!r}", field="--aps")
        if self.duration_s is not None and not (
            math.isfinite(self.duration_s) and 0 < self.duration_s <= 1e7
        ):
            raise PlanInputError(
                f"expected 0 < seconds <= 1e7, got {self.duration_s!r}", field="--duration"
            )
        if self.warmup_s is not None and not (
            0 <= self.warmup_s < (math.inf if self.duration_s is None else self.duration_s)
        ):
            raise PlanInputError(
                f"expected 0 <= warm-up < --duration ({self.duration_s} s), got {self.warmup_s!r}",
                field="--warmup",
            )
        if not (math.isfinite(self.window_s) and self.window_s > 0):
            raise PlanInputError(f"expected seconds > 0, got {self.window_s!r}", field="--window")
        if not 0.0 <= self.queued_utilization <= 1.0:
            raise PlanInputError(
                f"expected 0 to 1, got {self.queued_utilization!r}", field="--queued-utilization"
            )
        if self.scheduler is not None and self.scheduler not in SIM_SCHEDULERS:
            raise PlanInputError(
                f"unknown scheduler {self.scheduler!r}; expected one of "
                f"{', '.join(SIM_SCHEDULERS)}",
                field="--scheduler",
            )
        if self.prefill_quota_s is not None and not (
            math.isfinite(self.prefill_quota_s) and self.prefill_quota_s > 0
        ):
            raise PlanInputError(
                f"expected seconds > 0, got {self.prefill_quota_s!r}", field="--prefill-quota"
            )

    @property
    def online(self) -> bool:
        return self.aps is not None

    @property
    def duration(self) -> float:
        assert self.duration_s is not None, "simulate() sets the default duration"
        return self.duration_s

    @property
    def warmup(self) -> float:
        assert self.warmup_s is not None, "simulate() sets the default warm-up"
        return self.warmup_s


@dataclass(frozen=True)
class Distribution:
    """Mean and percentiles of a latency over the turns measured."""

    mean: float
    p50: float
    p90: float
    p99: float
    count: int

    @classmethod
    def of(cls, values: np.ndarray) -> Distribution:
        if values.size == 0:
            return cls(math.nan, math.nan, math.nan, math.nan, 0)
        p50, p90, p99 = np.percentile(values, [50, 90, 99])
        return cls(float(values.mean()), float(p50), float(p90), float(p99), int(values.size))


@dataclass(frozen=True)
class ServerSeries:
    """One simulated link kind: its name, how many servers (nodes), the capacity of each, and
    its utilization per window (busy time over window time, averaged over its servers)."""

    name: str
    servers: int
    capacity: float  # per server, in the link's unit per second
    queued: bool  # simulated with processor sharing (else a fixed crossing time)
    utilization: np.ndarray  # per window
    mean_utilization: float  # over the measured span


@dataclass(frozen=True)
class TurnLog:
    """Every turn's record, in turn order (agent by agent): when it started, its latencies,
    where it ran and which side read its KV (NaN latencies: not finished by the end)."""

    agent: np.ndarray
    turn: np.ndarray  # index within the agent's trajectory
    start_s: np.ndarray
    ttft_s: np.ndarray
    tpot_s: np.ndarray
    done_s: np.ndarray
    prefill_gpu: np.ndarray
    decode_node: np.ndarray
    read_on_decode: np.ndarray  # bool
    hit_gbyte: np.ndarray
    prompt_tokens: np.ndarray


@dataclass(frozen=True)
class SimResult:
    """What a simulation measured. Offline: the JCT of all agents and the throughput while the
    cluster is saturated (from 10% to 50% of all turns done); online: the throughput over the
    measured span. Latencies over the measured turns."""

    config: SimConfig
    scheduler: SimScheduler
    mode: ModeName
    turns: int
    agents: int
    events: int
    wall_s: float
    sim_time_s: float
    throughput_turns_per_s: float
    throughput_span_s: tuple[float, float]
    jct_s: float  # offline: all agents done; online: mean JCT of the agents measured
    agent_jct_s: Distribution  # per agent, of the agents that started after the warm-up
    ttft_s: Distribution
    tpot_s: Distribution
    decode_path_fraction: float  # of the hit bytes read on the decode side
    snic_max_over_avg: float  # mean over windows of max/avg storage reads across nodes
    prefill_max_over_avg: float  # the same over prefill GPUs' busy time
    window_s: float
    window_end_s: np.ndarray
    turns_done: np.ndarray  # per window
    in_flight: np.ndarray  # turns in the cluster at each window's end
    working_set_gbyte: np.ndarray  # KV of the live agents' contexts at each window's end
    snic_bytes: np.ndarray  # [window, node]: storage reads per node (P nodes, then D)
    servers: tuple[ServerSeries, ...]
    unfinished: int  # online: agents still running at the end
    stable: bool  # online: the measured turn rate kept up with the offered one
    offered_turns_per_s: float  # online: APS x mean turns per agent
    turn_log: TurnLog | None = None


class _Server:
    """Processor sharing on virtual time: ``v`` advances at rate(n) while n jobs run; a job of
    size s that starts at v0 finishes when v reaches v0 + s."""

    __slots__ = ("busy", "cap", "index", "jobs", "n", "rates", "served", "t", "v", "version")

    def __init__(self, index: int, cap: float, rates: list[float] | None = None) -> None:
        self.index = index
        self.cap = cap  # units/s of the whole server (bandwidth); unused with rates
        self.rates = rates  # per job count: progress per second of each job (decode)
        self.v = 0.0
        self.t = 0.0
        self.n = 0
        self.jobs: list[tuple[float, int, int]] = []  # (finish v, sequence, owner)
        self.version = 0
        self.busy = 0.0  # time with at least one job
        self.served = 0.0  # units served (bandwidth servers)

    def rate(self) -> float:
        if self.rates is not None:
            r = self.rates
            return r[self.n] if self.n < len(r) else r[-1]
        return self.cap / self.n

    def advance(self, now: float) -> None:
        dt = now - self.t
        if self.n and dt > 0:
            self.v += dt * self.rate()
            self.busy += dt
            if self.rates is None:
                self.served += dt * self.cap
        self.t = now


@dataclass
class _Node:
    """Per node of a side: its read server and the servers of phase B and C links."""

    read: int  # server index of its storage reads
    read_queue: float = 0.0  # bytes assigned to read and not yet read
    read_rate: float = 0.0


@dataclass(frozen=True)
class _LinkGroup:
    """Links of one side and phase with the same per-turn coefficients, simulated as one
    server per node (the least capacity of them): e.g. the SNIC and the storage client limit
    both carry a node's reads."""

    name: str
    side: str  # pe, de or storage
    phase: int
    coef: tuple[float, ...]  # per demand field, load per turn at x = 0
    dcoef: tuple[float, ...]  # per demand field, load per turn per unit x
    capacity: float  # per node
    queued: bool


_FIELDS = ("hit_bytes", "miss_bytes", "generated_kv_bytes", "append_writeback_bytes")


def _link_groups(
    sc: Scenario, mode: ModeName, capacity: dict[str, float], util: dict[str, float], th: float
) -> list[_LinkGroup]:
    """The mode's I/O links as per-turn linear loads in the demand fields, grouped by side,
    phase and coefficients; phase A = the storage reads, C = the write-back, B = the rest."""
    m = MODE_TABLE[mode]
    if m.io_free:
        return []
    unit: dict[str, tuple[list[float], list[float]]] = {k.name: ([], []) for k in LINK_TABLE}
    for f in _FIELDS:
        fields = {
            g: np.float64(1.0 if g == f else 0.0)
            for g in (*_FIELDS, "prefill_flops", "generated_tokens")
        }
        cols = turn_load_columns(Demand(**fields), sc.options)
        for name, (a, b) in cols.items():
            unit[name][0].append(float(a))
            unit[name][1].append(float(b))
    groups: dict[tuple[str, int, tuple[float, ...], tuple[float, ...]], _LinkGroup] = {}
    for link in LINK_TABLE:
        if not link.io:
            continue
        coef, dcoef = tuple(unit[link.name][0]), tuple(unit[link.name][1])
        if not any(coef) and not any(dcoef):
            continue
        cap = float(capacity[link.name])
        if not math.isfinite(cap):
            continue
        reads = link.reads_storage or link.name == "storage_read"
        writes = coef[0] == 0 and coef[1] == 0 and dcoef[0] == 0 and dcoef[1] == 0
        phase = _READ if reads else _WRITE if writes else _MOVE
        key = (link.side, phase, coef, dcoef)
        queued = reads or util.get(link.name, 0.0) >= th
        old = groups.get(key)
        if old is None:
            groups[key] = _LinkGroup(link.name, link.side, phase, coef, dcoef, cap, queued)
        else:
            groups[key] = replace(
                old,
                name=f"{old.name}+{link.name}",
                capacity=min(old.capacity, cap),
                queued=old.queued or queued,
            )
    return list(groups.values())


@dataclass(frozen=True)
class _Turns:
    """Every turn's contents, drawn up front (the loop only reads them)."""

    cached: np.ndarray  # tokens
    append: np.ndarray
    generated: np.ndarray
    fields: np.ndarray  # [turn, field]: the demand fields of _FIELDS, bytes
    flops: np.ndarray
    kv_prompt: np.ndarray  # bytes of the prompt's KV
    agent_turns: np.ndarray  # turns per agent
    first: np.ndarray  # first turn index of each agent


def draw_turn_counts(counts: TurnCounts, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` agents' turn counts from the workload's distribution, each at least 1."""
    u = rng.random(n)
    ends = np.cumsum(counts.length)
    s = np.asarray(counts.surviving, dtype=np.float64)
    top = float(s[-1]) if s.size else 1.0
    # S(k) is a step function with S = s[j] on segment j, then a linear ramp from top to 0.
    # Turns > k with probability S(k): the count is the end of the last segment with s >= u,
    # or inside the ramp where S(k) = u.
    if counts.ramp_turns > 0:
        base = float(ends[-1]) if ends.size else 0.0
        ramp = base + counts.ramp_turns * (1.0 - u / top)
    else:
        ramp = np.zeros(n)
    j = np.searchsorted(-s, -u, side="right") - 1  # last segment with s[j] >= u
    steps = np.where(j >= 0, ends[np.maximum(j, 0)] if ends.size else 0.0, 0.0)
    out = np.where((u < top) & (counts.ramp_turns > 0), ramp, steps)
    return np.maximum(np.ceil(out - 1e-9), 1).astype(np.int64)


def _draw_turns(sc: Scenario, agents: int, rng: np.random.Generator) -> _Turns:
    d = sc.turn_demand
    counts = draw_turn_counts(d.trajectory_turns, agents, rng)
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    total = int(counts.sum())
    rows = d.weight.size
    model = sc.model
    if sc.workload.trace_file is None and rows == 1:
        # An agent's context grows over its turns: turn k of n caches 2 x mean x (k + 1/2)/n.
        k = np.arange(total) - np.repeat(first, counts)
        n = np.repeat(counts, counts)
        cached_mean = float(d.context_tokens[0] - d.append_tokens[0])
        cached = 2.0 * cached_mean * (k + 0.5) / n
        append = np.full(total, float(d.append_tokens[0]))
        generated = np.full(total, float(d.generated_tokens[0]))
    else:
        pick = rng.choice(rows, size=total, p=d.weight / d.weight.sum())
        append = np.asarray(d.append_tokens)[pick]
        cached = np.asarray(d.context_tokens)[pick] - append
        generated = np.asarray(d.generated_tokens)[pick]
    if sc.workload.is_abstract:
        per_token = float(sc.workload.kv_bytes_per_token or 0.0)
        hit = cached * per_token
        flops = hit / 1e9 / float(sc.workload.gb_per_pflop or 1.0) * 1e15
        miss = append * per_token
        gen_kv = generated * per_token
        kv_prompt = (cached + append) * per_token
    else:
        hit = np.asarray(phys.kv_bytes_for_context(model, cached))
        flops = np.asarray(phys.prefill_flops(model, cached, append))
        miss = np.asarray(phys.kv_bytes_new_tokens(model, append))
        gen_kv = np.asarray(phys.kv_bytes_new_tokens(model, generated))
        kv_prompt = np.asarray(phys.kv_bytes_for_context(model, cached + append))
    fields = np.stack([hit, miss, gen_kv, miss], axis=1)
    return _Turns(cached, append, generated, fields, flops, kv_prompt, counts, first)


ProgressHook = Callable[[float, float], None]


def simulate(
    sc: Scenario, cfg: SimConfig = SimConfig(), progress: ProgressHook | None = None
) -> SimResult:
    """Simulate ``sc`` in ``cfg.mode``; ``progress(done, total)`` is called now and then."""
    check_feasible(sc)
    mode = MODE_TABLE[cfg.mode]
    scheduler: SimScheduler = cfg.scheduler or (
        "paper" if mode.scheduler == "queue_aware" else "round_robin"
    )
    # Capacities without the analytical scheduler imbalance: the simulation schedules itself.
    ideal = replace(sc, scheduling=Scheduling(policy="ideal"))
    P, D = sc.prefill_nodes, sc.decode_nodes
    asm = assemble(ideal, cfg.mode, P, D)
    if not bool(np.all(asm.feasible)):
        raise InfeasibleError(
            f"in {cfg.mode}, a prefill GPU cannot hold one request's KV (see size)",
            field="prefill_nodes",
        )
    sol = solve(asm.links)
    t_max = float(sol.throughput_turns_per_s)
    if not (math.isfinite(t_max) and t_max > 0):
        raise InfeasibleError(f"{cfg.mode}: the cluster sustains no turns", field="cluster")
    util = {n: float(u) for n, u in zip(LINKS, np.asarray(sol.utilization), strict=True)}
    per_node = {**asm.pe.per_node, **asm.de.per_node}
    capacity = {k: float(np.asarray(v)) for k, v in per_node.items()}
    capacity["storage_read"] = float(np.asarray(asm.links.capacity["storage_read"]))
    capacity["storage_write"] = float(np.asarray(asm.links.capacity["storage_write"]))
    groups = _link_groups(sc, cfg.mode, capacity, util, cfg.queued_utilization)
    pm = asm.pe.prefill
    group = asm.de.decode
    assert pm is not None and group is not None

    rng = np.random.default_rng(cfg.seed)
    d = sc.turn_demand
    mean_turns = d.trajectory_turns.mean
    if cfg.online and (cfg.duration_s is None or cfg.warmup_s is None):
        # The longest agent's lifetime at light load: its turns, each a lone prefill and
        # decode, and the tool latency.
        cycle = (
            pm.read_latency_s
            + pm.forward_s(1.0)
            + d.mean(d.generated_tokens) * group.step_s(1.0)
            + sc.workload.tool_latency_s
        )
        life = d.trajectory_turns.longest * cycle
        duration = cfg.duration_s if cfg.duration_s is not None else 4.0 * life
        warmup = cfg.warmup_s if cfg.warmup_s is not None else min(2.0 * life, duration / 2)
        cfg = replace(cfg, duration_s=duration, warmup_s=warmup)
    if cfg.online:
        assert cfg.aps is not None
        # Poisson arrivals over the duration: the count first, then the times.
        expected = cfg.aps * cfg.duration
        n_agents = int(rng.poisson(expected))
        arrivals = np.sort(rng.random(n_agents) * cfg.duration)
        if n_agents * mean_turns > 50_000_000:
            raise PlanInputError(
                f"about {n_agents * mean_turns:,.0f} turns: shorten --duration or lower --aps",
                field="--duration",
            )
    else:
        assert cfg.agents is not None
        n_agents = cfg.agents
        arrivals = np.zeros(n_agents)
    turns = _draw_turns(sc, max(n_agents, 1), rng)
    if n_agents == 0:
        turns = replace(turns, agent_turns=turns.agent_turns[:0], first=turns.first[:0])

    engine = _Engine(sc, cfg, scheduler, asm, sol, groups, turns, arrivals, t_max, progress)
    return engine.run()


class _Engine:
    """The event loop's state (one run)."""

    def __init__(
        self,
        sc: Scenario,
        cfg: SimConfig,
        scheduler: SimScheduler,
        asm,  # type: ignore[no-untyped-def]
        sol,  # type: ignore[no-untyped-def]
        groups: list[_LinkGroup],
        turns: _Turns,
        arrivals: np.ndarray,
        t_max: float,
        progress: ProgressHook | None,
    ) -> None:
        self.sc, self.cfg, self.scheduler = sc, cfg, scheduler
        self.mode = MODE_TABLE[cfg.mode]
        self.turns, self.arrivals, self.t_max = turns, arrivals, t_max
        self.progress = progress
        P, D = sc.prefill_nodes, sc.decode_nodes
        g_pn = sc.prefill_node.gpus_per_node
        self.P, self.D, self.gpus = P, D, P * g_pn
        self.gpu_node = [i // g_pn for i in range(self.gpus)]
        pm = asm.pe.prefill
        dg = asm.de.decode
        self.pm, self.dg = pm, dg
        # Servers: index 0.. in one list; per group and node.
        self.servers: list[_Server] = []
        self.groups = groups
        self.group_servers: list[list[int]] = []  # [group][node] server index
        for gr in groups:
            count = P if gr.side == "pe" else D if gr.side == "de" else 1
            ids = []
            for _ in range(count if gr.queued else 0):
                ids.append(len(self.servers))
                self.servers.append(_Server(len(self.servers), gr.capacity))
            self.group_servers.append(ids)
        # Decode: one server for the group; progress per second of each sequence = 1 / step(n).
        top = max(int(dg.max_batch), 1)
        steps = np.asarray(dg.step_array_s(np.arange(1, top + 1, dtype=np.float64)))
        self.decode_rates = [1.0 / float(steps[0])] + [1.0 / float(s) for s in steps]
        self.decode_server = len(self.servers)
        self.servers.append(_Server(self.decode_server, 0.0, self.decode_rates))
        self.decode_slots = max(top // D, 1)  # sequences per decode node
        # Reads: per node (P then D) its read server, rate and queue.
        read_groups = [
            i for i, gr in enumerate(groups) if gr.phase == _READ and gr.side in ("pe", "de")
        ]
        self.read_server = [-1] * (P + D)
        self.read_rate = [math.inf] * (P + D)
        for i in read_groups:
            gr = groups[i]
            base = 0 if gr.side == "pe" else P
            for node, s in enumerate(self.group_servers[i]):
                if gr.capacity < self.read_rate[base + node]:
                    self.read_server[base + node] = s
                    self.read_rate[base + node] = gr.capacity
        self.read_queue = [0.0] * (P + D)  # bytes assigned and not yet read
        self.read_bytes = [0.0] * (P + D)  # bytes read (done) per node, cumulative
        # Prefill: per GPU; compute of a turn u = flops / peak (+ the serialized copy).
        peak = (
            float(np.sum(sc.turn_demand.prefill_flops * sc.turn_demand.weight)) / pm.t1_s
            if pm.t1_s > 0
            else math.inf
        )
        mean_hit = float(np.sum(sc.turn_demand.hit_bytes * sc.turn_demand.weight))
        copy_per_byte = pm.copy_s / mean_hit if mean_hit > 0 else 0.0
        self.u = turns.flops / peak + turns.fields[:, 0] * copy_per_byte
        layers = sc.model.num_layers if self.mode.layerwise else 1
        self.kv_pass = turns.kv_prompt / layers  # HBM a turn holds during its pass
        self.hbm_free = float(np.asarray(pm.free_hbm_bytes))
        self.t0 = pm.t0_s
        self.quota = (
            cfg.prefill_quota_s
            if cfg.prefill_quota_s is not None
            else QUOTA_PER_LAYER_S * sc.model.num_layers
        )
        self.prompt_tokens = turns.cached + turns.append
        mean_prompt = float(np.mean(self.prompt_tokens)) if self.prompt_tokens.size else 0.0
        b = max(min(float(np.asarray(pm.batch_cap)), (self.quota - self.t0) / pm.u_s), 1.0)
        gpu_tokens_s = b / (self.t0 + b * pm.u_s) * mean_prompt
        self.beta = BETA_COMPUTE_S * gpu_tokens_s
        self.alpha = [ALPHA_READ_S * r for r in self.read_rate]  # bytes, per node
        self.offered = (
            (cfg.aps or 0.0) * sc.turn_demand.trajectory_turns.mean if cfg.online else 0.0
        )
        # The even mode's share of reads on the DE side (the sides' read capacity).
        self.split = float(np.asarray(asm.links.even_share))

    # The loop itself is in run(): locals for speed.
    def run(self) -> SimResult:  # one event loop, kept in one place for speed
        cfg, turns = self.cfg, self.turns
        P, D, G = self.P, self.D, self.gpus
        heap: list[tuple[float, int, int, int, int]] = []
        push, pop = heapq.heappush, heapq.heappop
        seq = 0
        servers = self.servers
        groups = self.groups
        group_servers = self.group_servers
        fields = turns.fields
        dual = self.mode.split != "pe_only" and not self.mode.io_free
        io_free = self.mode.io_free
        rng = np.random.default_rng(cfg.seed + 1)
        even_draws = (
            rng.random(int(turns.agent_turns.sum()) + 1) if self.mode.split == "even" else None
        )

        n_turns_total = int(turns.agent_turns.sum())
        # Per turn state (indexed by turn id = agent's first + k).
        pe_gpu = np.zeros(n_turns_total, dtype=np.int32).tolist()
        de_node = np.zeros(n_turns_total, dtype=np.int32).tolist()
        on_de = [False] * n_turns_total
        pending = [0] * n_turns_total  # jobs left in the current phase
        t_start = [0.0] * n_turns_total
        t_started = [False] * n_turns_total
        t_prefilled = [0.0] * n_turns_total
        remaining_u = self.u.tolist()
        kv_pass = self.kv_pass.tolist()
        prompt = self.prompt_tokens.tolist()
        gen = turns.generated.tolist()
        hit = fields[:, 0].tolist()
        field_rows = fields.tolist()
        kv_prompt = turns.kv_prompt.tolist()
        agent_of = np.repeat(np.arange(turns.agent_turns.size), turns.agent_turns).tolist()
        agent_first = turns.first.tolist()
        agent_n = turns.agent_turns.tolist()
        agent_start = self.arrivals.tolist()
        tool = self.sc.workload.tool_latency_s

        # Prefill GPUs.
        gpu_tokens = [0.0] * G
        gpu_ready: list[deque[int]] = [deque() for _ in range(G)]
        gpu_busy = [False] * G
        gpu_batch: list[list[int]] = [[] for _ in range(G)]
        gpu_busy_time = [0.0] * G
        gpu_node = self.gpu_node
        waiting: deque[int] = deque()  # the global FIFO (every PE overloaded)
        g_pn = G // P
        node_min_tok = [0.0] * P  # per prefill node: its least-loaded GPU's tokens, and which
        node_min_gpu = [n * g_pn for n in range(P)]

        def refresh_node(node: int) -> None:
            first = node * g_pn
            best = first
            for g in range(first + 1, first + g_pn):
                if gpu_tokens[g] < gpu_tokens[best]:
                    best = g
            node_min_gpu[node] = best
            node_min_tok[node] = gpu_tokens[best]

        # Decode nodes.
        de_seq = [0] * D
        de_tokens = [0.0] * D
        de_token_sum = 0.0
        de_active = [0] * D
        de_queue: list[deque[int]] = [deque() for _ in range(D)]
        slots = self.decode_slots
        # Stats.
        ttft = np.full(n_turns_total, np.nan)
        tpot = np.full(n_turns_total, np.nan)
        done_time = np.full(n_turns_total, np.nan)
        agent_end = np.full(len(agent_n), np.nan)
        de_read = 0.0
        all_read = 0.0
        rr_pe = 0
        rr_de = 0
        rr_path = 0
        live_kv = 0.0
        in_flight = 0
        windows: list[tuple[float, int, int, float, list[float], list[float], list[float]]] = []
        done_count = 0
        events = 0
        now = 0.0
        t0, quota, hbm_free = self.t0, self.quota, self.hbm_free
        alpha, beta, read_rate = self.alpha, self.beta, self.read_rate
        read_queue, read_bytes = self.read_queue, self.read_bytes
        agents_alive = 0
        window_turns = 0
        measured_starts = 0
        warmup = cfg.warmup if cfg.online else 0.0
        duration = cfg.duration if cfg.online else math.inf

        def schedule(s: _Server) -> None:
            nonlocal seq
            s.version += 1
            if s.n:
                fin = s.jobs[0][0]
                dt = (fin - s.v) / s.rate()
                seq += 1
                push(heap, (now + (dt if dt > 0 else 0.0), seq, _SERVER, s.index, s.version))

        def add_job(index: int, size: float, owner: int) -> None:
            nonlocal seq
            s = servers[index]
            s.advance(now)
            seq += 1
            heapq.heappush(s.jobs, (s.v + size, seq, owner))
            s.n += 1
            schedule(s)

        # Per phase: the queued link groups (their servers per node, coefficients for x = 0
        # and x = 1) and the fixed crossing time of the others, per unit of each demand field.
        queued_of: list[list[tuple[str, list[int], tuple[float, ...], tuple[float, ...]]]] = [
            [] for _ in range(3)
        ]
        fixed_of: list[list[tuple[tuple[float, ...], tuple[float, ...]]]] = [[] for _ in range(3)]
        for gi, gr in enumerate(groups):
            c0 = gr.coef
            c1 = tuple(a + b for a, b in zip(gr.coef, gr.dcoef, strict=True))
            if gr.queued:
                queued_of[gr.phase].append((gr.side, group_servers[gi], c0, c1))
            else:
                cap = gr.capacity
                fixed_of[gr.phase].append((tuple(c / cap for c in c0), tuple(c / cap for c in c1)))

        def start_phase(t: int, phase: int, delay_extra: float) -> int:
            """Start a turn's jobs of one phase; returns how many it waits for."""
            nonlocal seq
            de = on_de[t]
            h, mi, ga, aw = field_rows[t]
            count = 0
            for side, ids, c0, c1 in queued_of[phase]:
                c = c1 if de else c0
                load = c[0] * h + c[1] * mi + c[2] * ga + c[3] * aw
                if load <= 0.0:
                    continue
                if side == "pe":
                    idx = ids[gpu_node[pe_gpu[t]]]
                elif side == "de":
                    idx = ids[de_node[t]]
                else:
                    idx = ids[0]
                add_job(idx, load, t * 4 + phase)
                count += 1
            if phase != _WRITE:
                delay = delay_extra
                for f0, f1 in fixed_of[phase]:
                    f = f1 if de else f0
                    dt = f[0] * h + f[1] * mi + f[2] * ga + f[3] * aw
                    if dt > delay:
                        delay = dt
                if delay > 0:
                    seq += 1
                    push(heap, (now + delay, seq, _DELAY, t, phase))
                    count += 1
            return count

        def assign(t: int) -> bool:
            """Pick the turn's prefill GPU, decode node and read path; False: every PE is
            overloaded (the turn waits in the global queue)."""
            nonlocal rr_pe, rr_de, rr_path, de_read, all_read, de_token_sum
            tok = prompt[t]
            h = hit[t]
            if self.scheduler == "paper":
                # PE (Algorithm 1): per node, its GPU with the fewest unfinished tokens; the
                # node's read queue puts it in the low- or high-read category.
                best_low, best_high = -1, -1
                low_tok, high_tok = math.inf, math.inf
                for node in range(P):
                    gt = node_min_tok[node]
                    if gt > beta:
                        continue
                    if read_queue[node] <= alpha[node]:
                        if gt < low_tok:
                            best_low, low_tok = node, gt
                    elif gt < high_tok:
                        best_high, high_tok = node, gt
                node = best_low if best_low >= 0 else best_high
                if node < 0:
                    return False
                g = node_min_gpu[node]
                # DE: the nodes with room, not high-token, fewest sequences; else the high-token
                # one with the fewest tokens (section 6, phase 2 on one group).
                z = HIGH_TOKEN_MARGIN * (tok + de_token_sum) / D
                pick, pick_seq = -1, 1 << 60
                alt, alt_tok = -1, math.inf
                for e in range(D):
                    if de_seq[e] >= slots:
                        continue
                    te = de_tokens[e]
                    if te + tok <= z:
                        if de_seq[e] < pick_seq:
                            pick, pick_seq = e, de_seq[e]
                    elif te < alt_tok:
                        alt, alt_tok = e, te
                e = pick if pick >= 0 else alt
                if e < 0:
                    e = min(range(D), key=de_tokens.__getitem__)
            else:
                g = rr_pe % G
                rr_pe += 1
                e = rr_de % D
                rr_de += 1
            pe_gpu[t], de_node[t] = g, e
            gpu_tokens[g] += tok
            refresh_node(gpu_node[g])
            de_seq[e] += 1
            de_tokens[e] += tok
            de_token_sum += tok
            side_de = False
            if dual and h > 0:
                if self.mode.split == "even":
                    assert even_draws is not None
                    side_de = bool(even_draws[t] < self.split)
                elif self.scheduler == "paper":
                    pn, dn = gpu_node[g], P + e
                    side_de = read_queue[dn] / read_rate[dn] < read_queue[pn] / read_rate[pn]
                else:
                    # Blind: the two paths in turn (the paper's round-robin baseline, Figure
                    # 13: with P < D a PE node reads more than its share).
                    side_de = rr_path % 2 == 1
                    rr_path += 1
            on_de[t] = side_de
            all_read += h
            if side_de:
                de_read += h
            return True

        def begin_read(t: int) -> None:
            node = (P + de_node[t]) if on_de[t] else gpu_node[pe_gpu[t]]
            read_queue[node] += hit[t]
            n = 0 if io_free else start_phase(t, _READ, 0.0)
            pending[t] = n
            if n == 0:
                read_done(t)

        def read_done(t: int) -> None:
            node = (P + de_node[t]) if on_de[t] else gpu_node[pe_gpu[t]]
            read_queue[node] -= hit[t]
            read_bytes[node] += hit[t]
            g = pe_gpu[t]
            gpu_ready[g].append(t)
            if not gpu_busy[g]:
                start_pass(g)

        def start_pass(g: int) -> None:
            nonlocal seq
            ready = gpu_ready[g]
            if not ready:
                return
            batch: list[int] = []
            used_hbm = 0.0
            span = t0
            while ready:
                t = ready[0]
                u = remaining_u[t]
                if batch and used_hbm + kv_pass[t] > hbm_free:
                    break
                if span + u > quota and batch:
                    part = quota - span
                    if part <= 0:
                        break
                    # Chunked prefill: this pass computes part of the turn, the rest waits at
                    # the head of the queue for the next one.
                    remaining_u[t] = u - part
                    span += part
                    if pending[t] >= 0 and t_prefilled[t] == 0.0:
                        _begin_move(t)
                    break
                ready.popleft()
                batch.append(t)
                used_hbm += kv_pass[t]
                span += u
                remaining_u[t] = 0.0
                if t_prefilled[t] == 0.0:
                    _begin_move(t)
            gpu_busy[g] = True
            gpu_batch[g] = batch
            gpu_busy_time[g] += span
            seq += 1
            push(heap, (now + span, seq, _FORWARD, g, 0))

        def _begin_move(t: int) -> None:
            # Phase B starts with the turn's first pass; the pass itself is one more wait.
            t_prefilled[t] = -1.0  # marks phase B started
            n = 0 if io_free else start_phase(t, _MOVE, 0.0)
            pending[t] = n + 1

        def move_part_done(t: int) -> None:
            pending[t] -= 1
            if pending[t] == 0:
                prefilled(t)

        def prefilled(t: int) -> None:
            t_prefilled[t] = now
            ttft[t] = now - t_start[t]
            e = de_node[t]
            if de_active[e] < slots:
                start_decode(t)
            else:
                de_queue[e].append(t)

        def start_decode(t: int) -> None:
            de_active[de_node[t]] += 1
            add_job(self.decode_server, gen[t] if gen[t] > 0 else 1e-9, t * 4 + 3)

        def decoded(t: int) -> None:
            nonlocal done_count, in_flight, window_turns, live_kv, agents_alive, de_token_sum
            e = de_node[t]
            de_active[e] -= 1
            de_seq[e] -= 1
            de_tokens[e] -= prompt[t]
            de_token_sum -= prompt[t]
            if de_queue[e]:
                start_decode(de_queue[e].popleft())
            g = gen[t]
            tpot[t] = (now - t_prefilled[t]) / g if g > 0 else 0.0
            done_time[t] = now
            done_count += 1
            window_turns += 1
            in_flight -= 1
            if not io_free:
                pending[t] = start_phase(t, _WRITE, 0.0)
            a = agent_of[t]
            live_kv -= kv_prompt[t]
            if t + 1 < agent_first[a] + agent_n[a]:
                next_turn(t + 1, now + tool)
            else:
                agent_end[a] = now
                agents_alive -= 1

        def next_turn(t: int, at: float) -> None:
            nonlocal seq
            seq += 1
            push(heap, (at, seq, _TURN, t, 0))

        def start_turn(t: int) -> None:
            nonlocal in_flight, live_kv, measured_starts
            t_start[t] = now
            t_started[t] = True
            if warmup <= now <= duration:
                measured_starts += 1
            in_flight += 1
            live_kv += kv_prompt[t]
            if assign(t):
                begin_read(t)
            else:
                waiting.append(t)

        def retry_waiting() -> None:
            while waiting:
                t = waiting[0]
                if not assign(t):
                    return
                waiting.popleft()
                begin_read(t)

        # Agents: offline all at 0; online at their arrival times.
        for a, at in enumerate(agent_start):
            seq += 1
            push(heap, (at, seq, _AGENT, a, 0))
        window = cfg.window_s
        seq += 1
        push(heap, (window, seq, _WINDOW, 0, 0))
        horizon = cfg.duration if cfg.online else math.inf
        last_busy = [0.0] * len(servers)
        last_gpu = [0.0] * G
        last_read = [0.0] * (P + D)
        wall0 = wallclock.perf_counter()
        next_report = wall0 + 0.25
        total_turns = n_turns_total
        stable = True
        while heap:
            now, _, kind, a, b = pop(heap)
            if now > horizon:
                # Online, arrivals are over: a queue that kept up drains (every measured agent
                # finishes), one that did not stops here.
                horizon = math.inf
                offered = self.offered * (cfg.duration - cfg.warmup)
                stable = measured_starts >= STABLE_SHARE * offered
                if not stable:
                    now = cfg.duration
                    break
            events += 1
            if kind == _SERVER:
                s = servers[a]
                if b != s.version:
                    continue
                s.advance(now)
                jobs = s.jobs
                limit = s.v + 1e-9 * (abs(s.v) + 1.0)
                finished = []
                while jobs and jobs[0][0] <= limit:
                    finished.append(heapq.heappop(jobs)[2])
                    s.n -= 1
                schedule(s)
                for owner in finished:
                    t, phase = divmod(owner, 4)
                    if phase == 3:
                        decoded(t)
                    elif phase == _READ:
                        pending[t] -= 1
                        if pending[t] == 0:
                            read_done(t)
                    elif phase == _MOVE:
                        move_part_done(t)
                    # _WRITE: nothing waits on it
            elif kind == _FORWARD:
                g = a
                gpu_busy[g] = False
                for t in gpu_batch[g]:
                    gpu_tokens[g] -= prompt[t]
                    move_part_done(t)
                refresh_node(gpu_node[g])
                gpu_batch[g] = []
                start_pass(g)
                if waiting:
                    retry_waiting()
            elif kind == _DELAY:
                t = a
                if b == _READ:
                    pending[t] -= 1
                    if pending[t] == 0:
                        read_done(t)
                else:
                    move_part_done(t)
            elif kind == _TURN:
                start_turn(a)
            elif kind == _AGENT:
                agents_alive += 1
                start_turn(agent_first[a])
            else:  # _WINDOW
                for s in servers:
                    s.advance(now)
                busy = [s.busy - last_busy[i] for i, s in enumerate(servers)]
                last_busy = [s.busy for s in servers]
                gb = [min(gpu_busy_time[g] - last_gpu[g], window) for g in range(G)]
                last_gpu = list(gpu_busy_time)
                rb = [read_bytes[n] - last_read[n] for n in range(P + D)]
                last_read = list(read_bytes)
                windows.append((now, window_turns, in_flight, live_kv, busy, gb, rb))
                window_turns = 0
                if agents_alive > 0 or (cfg.online and now < cfg.duration):
                    seq += 1
                    push(heap, (now + window, seq, _WINDOW, 0, 0))
            if events & 4095 == 0:
                if progress := self.progress:
                    w = wallclock.perf_counter()
                    if w >= next_report:
                        next_report = w + 0.25
                        progress(done_count, total_turns)
                if events > cfg.max_events:
                    raise PlanInputError(
                        f"more than {cfg.max_events:,} events: shorten the run", field="--duration"
                    )
        self.t_start = np.asarray(t_start)
        self.t_started = np.asarray(t_started)
        return self._result(
            _Outcome(
                ttft=ttft,
                tpot=tpot,
                done=done_time,
                agent_end=agent_end,
                windows=windows,
                events=events,
                wall_s=wallclock.perf_counter() - wall0,
                end_s=now,
                de_read=de_read,
                all_read=all_read,
                stable=stable,
                pe_gpu=np.asarray(pe_gpu),
                de_node=np.asarray(de_node),
                on_de=np.asarray(on_de),
            )
        )

    def _result(self, o: _Outcome) -> SimResult:
        cfg, turns = self.cfg, self.turns
        done = np.isfinite(o.done)
        started = self.t_started
        if cfg.online:
            lo, hi = cfg.warmup, cfg.duration
            # Turns that start in the measured span, agents that arrive in it.
            measured = started & (self.t_start >= lo) & (self.t_start <= hi)
            finished = measured & done
            throughput = int(np.count_nonzero(finished)) / (hi - lo)
            span = (lo, hi)
            agents_in = (self.arrivals >= lo) & (self.arrivals <= hi) & np.isfinite(o.agent_end)
            jct_agents = (o.agent_end - self.arrivals)[agents_in]
            jct = float(jct_agents.mean()) if jct_agents.size else math.nan
            unfinished = int(np.count_nonzero(~np.isfinite(o.agent_end)))
        else:
            # Offline: the throughput while the cluster is saturated, from 10% to 50% of all
            # turns done (most agents still run; the drain after is the stragglers').
            order = np.sort(o.done[done])
            n = order.size
            lo_i, hi_i = n // 10, max(n // 2, n // 10 + 1)
            if n >= 20 and order[hi_i] > order[lo_i]:
                span = (float(order[lo_i]), float(order[hi_i]))
                throughput = (hi_i - lo_i) / (span[1] - span[0])
            else:
                span = (0.0, float(order[-1]) if n else 0.0)
                throughput = n / span[1] if span[1] > 0 else 0.0
            finished = done
            jct = float(np.max(o.agent_end)) if o.agent_end.size else 0.0
            jct_agents = o.agent_end - self.arrivals
            unfinished = 0
        window = cfg.window_s
        w = o.windows
        w_end = np.array([x[0] for x in w], dtype=np.float64)
        busy = np.array([x[4] for x in w], dtype=np.float64).reshape(len(w), len(self.servers))
        gpu = np.array([x[5] for x in w], dtype=np.float64).reshape(len(w), self.gpus)
        reads = np.array([x[6] for x in w], dtype=np.float64).reshape(len(w), self.P + self.D)
        # Windows wholly inside the measured span.
        in_span = (w_end - window >= span[0]) & (w_end <= span[1])
        if not in_span.any():
            in_span = np.ones(w_end.size, dtype=bool)

        def mean_in_span(u: np.ndarray) -> float:
            return float(u[in_span].mean()) if u.size else math.nan

        series: list[ServerSeries] = []
        for gi, gr in enumerate(self.groups):
            ids = self.group_servers[gi]
            if ids:
                u = busy[:, ids].mean(axis=1) / window
                series.append(
                    ServerSeries(gr.name, len(ids), gr.capacity, True, u, mean_in_span(u))
                )
            else:
                # Not simulated as a queue: its utilization is its load over its capacity.
                series.append(ServerSeries(gr.name, 0, gr.capacity, False, np.zeros(0), math.nan))
        gu = np.minimum(gpu / window, 1.0).mean(axis=1)
        series.append(ServerSeries("pe_prefill", self.gpus, math.nan, True, gu, mean_in_span(gu)))
        log = None
        if cfg.keep_turns:
            agent = np.repeat(np.arange(turns.agent_turns.size), turns.agent_turns)
            log = TurnLog(
                agent=agent,
                turn=np.arange(agent.size) - np.repeat(turns.first, turns.agent_turns),
                start_s=np.where(started, self.t_start, np.nan),
                ttft_s=o.ttft,
                tpot_s=o.tpot,
                done_s=o.done,
                prefill_gpu=o.pe_gpu,
                decode_node=o.de_node,
                read_on_decode=o.on_de,
                hit_gbyte=turns.fields[:, 0] / 1e9,
                prompt_tokens=turns.cached + turns.append,
            )
        return SimResult(
            config=cfg,
            scheduler=self.scheduler,
            mode=cfg.mode,
            turns=int(np.count_nonzero(done)),
            agents=int(self.arrivals.size),
            events=o.events,
            wall_s=o.wall_s,
            sim_time_s=float(o.end_s),
            throughput_turns_per_s=float(throughput),
            throughput_span_s=(float(span[0]), float(span[1])),
            jct_s=jct,
            agent_jct_s=Distribution.of(jct_agents[np.isfinite(jct_agents)]),
            ttft_s=Distribution.of(o.ttft[finished & np.isfinite(o.ttft)]),
            tpot_s=Distribution.of(o.tpot[finished & np.isfinite(o.tpot)]),
            decode_path_fraction=o.de_read / o.all_read if o.all_read > 0 else 0.0,
            snic_max_over_avg=_max_over_avg(reads[in_span]),
            prefill_max_over_avg=_max_over_avg(gpu[in_span]),
            window_s=window,
            window_end_s=w_end,
            turns_done=np.array([x[1] for x in w], dtype=np.int64),
            in_flight=np.array([x[2] for x in w], dtype=np.int64),
            working_set_gbyte=np.array([x[3] for x in w], dtype=np.float64) / 1e9,
            snic_bytes=reads,
            servers=tuple(series),
            unfinished=unfinished,
            stable=o.stable,
            offered_turns_per_s=self.offered,
            turn_log=log,
        )


@dataclass(frozen=True)
class _Outcome:
    """What the event loop leaves for the statistics."""

    ttft: np.ndarray
    tpot: np.ndarray
    done: np.ndarray
    agent_end: np.ndarray
    windows: list[tuple[float, int, int, float, list[float], list[float], list[float]]]
    events: int
    wall_s: float
    end_s: float
    de_read: float
    all_read: float
    stable: bool
    pe_gpu: np.ndarray
    de_node: np.ndarray
    on_de: np.ndarray


def _max_over_avg(per_window: np.ndarray) -> float:
    """Mean over windows of the busiest unit's amount over the units' mean (windows with
    nothing moved are left out)."""
    if per_window.size == 0:
        return math.nan
    mean = per_window.mean(axis=1)
    ok = mean > 0
    if not ok.any():
        return math.nan
    return float((per_window[ok].max(axis=1) / mean[ok]).mean())
