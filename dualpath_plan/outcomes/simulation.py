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
   ``round_robin`` (engines in turn, the two paths in turn, blind to every queue);
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

Turn contents: a profile's turns are its mean turn (what the analytical model assumes), or
with ``context_growth`` an agent's context grows linearly (cached tokens of turn k of n:
2 x mean x (k + 1/2) / n); a trace's agents each replay one of its trajectories (drawn
uniformly), turn by turn in the trace's order (a trace without trajectories: rows drawn by
weight). A profile's turn counts per agent are drawn from its distribution (``TurnCounts``).

The event loop is a binary heap of (time, sequence, kind, agent, data) tuples; processor
sharing runs on virtual time (each server's jobs finish in order of their virtual finish
time, so an arrival or a departure is O(log n)); a server's next completion is an event that a
change of its job count supersedes. Every agent has at most one turn in flight, so a turn's
state is kept per agent: memory grows with the agents, not the turns. Same seed, same events,
same output.
"""

from __future__ import annotations

import heapq
import math
import random
import time as wallclock
from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from dualpath_plan import plausible
from dualpath_plan.errors import PlanInputError, check_seed
from dualpath_plan.outcomes.serving import light_load, offline_jct_s, runnable
from dualpath_plan.physics import model as phys
from dualpath_plan.physics.engines import Scheduling
from dualpath_plan.physics.links import LINK_TABLE, LINKS, Demand, turn_load_columns
from dualpath_plan.physics.modes import MODE_TABLE, ModeName
from dualpath_plan.physics.workload import TurnCounts, TurnDemand, TurnMix, turn_demand
from dualpath_plan.scenario.assemble import Assembly
from dualpath_plan.scenario.bundle import Scenario

# The paper's scheduler (section 6) is queue-aware: the name the analytical model gives it.
SimScheduler = Literal["queue_aware", "round_robin"]
SIM_SCHEDULERS: tuple[str, ...] = ("queue_aware", "round_robin")

# The paper's scheduler thresholds (section 6, A.4): alpha = what a node reads in 3 s (bytes here),
# beta = the tokens one GPU prefills in 5 s; the compute quota of a forward pass, 300 ms of
# attention per layer; the DE high-token margin 1.05.
ALPHA_READ_S = 3.0
BETA_COMPUTE_S = 5.0
QUOTA_PER_LAYER_S = 0.300
HIGH_TOKEN_MARGIN = 1.05

# Online, a run is stable when the turns that start after the warm-up are at least this share
# of those the arrivals offer (APS x mean turns x the measured span), or short of it by no more
# than three standard deviations of the arrivals' own variation: an unstable queue lets agents
# start ever fewer turns.
STABLE_SHARE = 0.9

# A window of the time series: its end, its length, turns done in it, turns in flight at its
# end, the KV working set's time average over it, per server its busy time, per GPU its busy
# time, per node its storage reads (bytes) in it, and the working set's peak in it.
_Window = tuple[float, float, int, int, float, list[float], list[float], list[float], float]

# Event kinds.
_TURN, _SERVER, _FORWARD, _DELAY, _AGENT, _WINDOW = range(6)
# Phases of a turn that wait on links.
# A job's owner is agent x 4 + phase (3: decode). A write-back (phase C) may finish after its
# agent's next turn started: nothing may ever wait on it.
_READ, _MOVE, _WRITE = range(3)


# Agents of an offline simulation, at most: each keeps about 330 bytes of state for the whole
# run, so 4,000,000 peaked at 1.34 GB RSS (workload.turns=5, the first 3 million events) and
# the former bound of 10,000,000 passed 3.15 GB; this stays under 2 GB.
MAX_SIM_AGENTS = 4_000_000


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
    scheduler: SimScheduler | None = None  # default: the mode's (queue_aware or round robin)
    window_s: float = 10.0
    queued_utilization: float = 0.25
    prefill_quota_s: float | None = None  # a forward pass at most; default 300 ms x layers
    # The paper's PE choice orders engines by their "assigned, unfinished" tokens and skips
    # those over beta (section 6). The order here counts every unfinished turn; the overload
    # test only those waiting for a pass (reading or ready), so that a running pass does not
    # stop an engine from queueing its next one. True counts the running pass in the test
    # too: passes then stay near half of beta's 5 s of work and a compute-bound cluster loses
    # about 13% of its throughput (docs/model.md section 10).
    beta_counts_running_pass: bool = False
    # A profile's turns all the mean turn (as the analytical model), or an agent's context
    # growing over its turns (turn k of n caches 2 x mean x (k + 1/2) / n).
    context_growth: bool = False
    max_events: int = 500_000_000

    def __post_init__(self) -> None:
        if (self.agents is None) == (self.aps is None):
            raise PlanInputError(
                "give --agents (offline) or --aps (online), not both", field="--aps"
            )
        if self.agents is not None and not 1 <= self.agents <= MAX_SIM_AGENTS:
            raise PlanInputError(
                f"expected 1 to {MAX_SIM_AGENTS:,} agents (each holds about 330 bytes of state "
                f"for the whole run), got {self.agents:,}",
                field="--agents",
            )
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
            limit = "" if self.duration_s is None else f" < --duration ({self.duration_s:g} s)"
            raise PlanInputError(
                f"expected 0 <= seconds{limit}, got {self.warmup_s!r}", field="--warmup"
            )
        check_seed(self.seed)
        if not (math.isfinite(self.window_s) and self.window_s > 0):
            raise PlanInputError(f"expected seconds > 0, got {self.window_s!r}", field="--window")
        # Within the bounds above, what a run plausibly asks (a unit slip named):
        # --duration 3600000 (milliseconds typed for an hour) simulated 42 days.
        for key, value, flag in (
            ("aps", self.aps, "--aps"),
            ("simulate.duration_s", self.duration_s, "--duration"),
            ("simulate.warmup_s", self.warmup_s, "--warmup"),
            ("simulate.window_s", self.window_s, "--window"),
        ):
            why = plausible.problem(key, value) if value is not None else None
            if why is not None:
                raise PlanInputError(why, field=flag)
        if not 0.0 <= self.queued_utilization <= 1.0:
            raise PlanInputError(
                f"expected 0 to 1, got {self.queued_utilization!r}", field="--queued-utilization"
            )
        if self.scheduler == "paper":
            raise PlanInputError(
                "'paper' is now spelled 'queue_aware' (the paper's scheduler, as size names it)",
                field="--scheduler",
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
    whole_run: bool  # offline: too few turns for the 10%-50% span, the throughput is the run's
    jct_s: float  # offline: all agents done; online: mean JCT of the agents measured
    agent_jct_s: Distribution  # per agent, of the agents that started after the warm-up
    ttft_s: Distribution
    tpot_s: Distribution
    decode_path_fraction: float  # of the hit bytes read on the decode side
    reads: bool  # any KV read at all (none in the oracle)
    snic_max_over_avg: float  # mean over windows of max/avg storage reads across nodes
    prefill_max_over_avg: float  # the same over prefill GPUs' busy time
    window_s: float
    window_end_s: np.ndarray
    window_length_s: np.ndarray  # the last window may be shorter: the run ends in it
    turns_done: np.ndarray  # per window
    in_flight: np.ndarray  # turns in the cluster at each window's end
    # KV of the live agents' contexts (an agent's from its first turn to its last, tool
    # calls included: Little's law's agents in the system), each window's time average
    working_set_gbyte: np.ndarray
    # Over the measured span online (the whole run offline): the time average and the peak
    # (neither depends on --window beyond where the span's windows begin and end).
    working_set_mean_gbyte: float
    working_set_max_gbyte: float
    snic_bytes: np.ndarray  # [window, node]: storage reads per node (P nodes, then D)
    servers: tuple[ServerSeries, ...]
    unfinished: int  # online: agents still running at the end
    stable: bool  # online: the measured turn rate kept up with the offered one
    # Online: "stable", "unstable" (the turns fell behind the arrivals), "too_short" (the
    # measured span or the warm-up shorter than one lifetime of the longest agent at light
    # load: no steady state to measure) or "no_arrivals"; offline: "offline".
    status: str
    lifetime_s: float  # the longest agent's lifetime at light load
    decode_wait_s: Distribution  # prefilled to decoding (a node's decode slots all taken)
    decode_batch_mean: float  # sequences decoding, time-averaged over the run
    decode_batch_max: int  # the group's HBM-limited batch
    agents_measured: int  # online: agents arriving in the measured span (of them, agent_jct_s
    # counts those that finished); offline: every agent
    offered_turns_per_s: float  # online: APS x mean turns per agent


class _Server:
    """Processor sharing on virtual time: ``v`` advances at rate(n) while n jobs run; a job of
    size s that starts at v0 finishes when v reaches v0 + s."""

    __slots__ = (
        "area",
        "busy",
        "cap",
        "index",
        "jobs",
        "n",
        "rates",
        "t",
        "v",
        "version",
    )

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
        self.area = 0.0  # jobs x time (the time-averaged job count over a span: area / span)

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
            self.area += dt * self.n
        self.t = now


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
    whether they carry storage reads (phase A) and coefficients; the others carry phase B
    (hit and miss bytes) and phase C (the write-back's bytes)."""
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
        # A node's storage reads, or the storage cluster's (its outward direction).
        reads = link.reads_storage or (link.side == "storage" and link.direction == "out")
        # Not a read: its hit and miss bytes move in phase B, its write-back bytes in phase C,
        # on the same servers (the engine splits the coefficients).
        phase = _READ if reads else _MOVE
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
class _Kinds:
    """The distinct contents a turn can have, and how a turn finds its own. A profile's turn
    k of an agent with n turns is kind ``offset[n] + k`` (its context grows over the agent's
    turns); a trace's turn is a row drawn by weight (``cumulative``). Memory is per kind, not
    per turn."""

    hit: list[float]  # bytes: the demand fields of _FIELDS
    miss: list[float]
    gen_kv: list[float]
    writeback: list[float]
    u: list[float]  # prefill compute of the turn (s), with the serialized copy
    kv_pass: list[float]  # HBM the turn holds during its pass
    prompt: list[float]  # tokens
    generated: list[float]
    kv_prompt: list[float]  # bytes of the prompt's KV (the working set)
    offset: dict[int, int] | None
    cumulative: list[float] | None
    # A trace with trajectories: each trajectory's rows in turn order (an agent replays one).
    replay: list[list[int]] | None = None


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
    # Whole turns with the drawn mean kept: up with the probability of the fraction (rounding
    # up always would add half a turn per agent).
    whole = np.floor(out + rng.random(n))
    return np.maximum(whole, 1).astype(np.int64)


def _turn_kinds(
    sc: Scenario,
    counts: np.ndarray,
    peak: float,
    copy_per_byte: float,
    layers: int,
    growth: bool,
) -> _Kinds:
    """Every kind of turn the run can see, from the workload's own demand (physics/workload.py):
    its bytes per demand field (the link table's options apply in its coefficients), its
    prefill compute u = F / peak (+ the copy serialized with compute), what it holds in HBM
    during its pass (one of ``layers`` layers), and how a turn finds its kind."""
    d = sc.turn_demand
    rows = d.weight.size
    offset: dict[int, int] | None = None
    cumulative: list[float] | None = None
    replay: list[list[int]] | None = None
    profile = sc.workload.trace_file is None and rows == 1
    if profile and not growth:
        offset = {int(n): 0 for n in counts}  # every turn the profile's mean turn
    elif profile:
        # An agent's context grows over its turns: turn k of n caches 2 x mean x (k + 1/2)/n.
        offset, start, parts = {}, 0, []
        cached_mean = float(d.context_tokens[0] - d.append_tokens[0])
        for n in sorted({int(n) for n in counts}):
            offset[n] = start
            start += n
            parts.append(2.0 * cached_mean * (np.arange(n) + 0.5) / n)
        cached = np.concatenate(parts) if parts else np.zeros(0)
        d = _grown(sc, cached)
    elif replays(sc):
        order = np.argsort(d.trajectory, kind="stable")  # rows by trajectory, in order
        ends = np.cumsum(np.bincount(d.trajectory))
        replay = [part.tolist() for part in np.split(order, ends[:-1])]
    else:
        cumulative = np.cumsum(d.weight / d.weight.sum()).tolist()
    size = np.broadcast(d.hit_bytes, d.context_tokens, d.weight).size

    def col(v: np.ndarray) -> np.ndarray:
        return np.broadcast_to(np.asarray(v, dtype=np.float64), (size,))

    hit, flops, context = col(d.hit_bytes), col(d.prefill_flops), col(d.context_tokens)
    if sc.workload.is_abstract:
        kv_prompt = context * float(sc.workload.kv_bytes_per_token or 0.0)
    else:
        kv_prompt = col(phys.kv_bytes_for_context(sc.model, context))
    return _Kinds(
        hit=hit.tolist(),
        miss=col(d.miss_bytes).tolist(),
        gen_kv=col(d.generated_kv_bytes).tolist(),
        writeback=col(d.append_writeback_bytes).tolist(),
        u=(flops / peak + hit * copy_per_byte).tolist(),
        kv_pass=(kv_prompt / layers).tolist(),
        prompt=context.tolist(),
        generated=col(d.generated_tokens).tolist(),
        kv_prompt=kv_prompt.tolist(),
        offset=offset,
        cumulative=cumulative,
        replay=replay,
    )


def _grown(sc: Scenario, cached: np.ndarray) -> TurnDemand:
    """The profile's turn with ``cached`` tokens each (its appended and generated tokens): a
    model's demand by the physics of ``turn_demand``, an abstract workload's scaled with the
    context (its hit bytes and FLOPs are proportional to it by definition)."""
    d = sc.turn_demand
    k = cached.size
    append = np.full(k, float(d.append_tokens[0]))
    generated = np.full(k, float(d.generated_tokens[0]))
    if not sc.workload.is_abstract:
        mix = TurnMix(cached, append, generated, np.full(k, 1.0 / max(k, 1)), d.trajectory_turns)
        return turn_demand(sc.model, mix)
    scale = cached / float(d.context_tokens[0] - d.append_tokens[0])
    return replace(
        d,
        hit_bytes=d.hit_bytes[0] * scale,
        prefill_flops=d.prefill_flops[0] * scale,
        context_tokens=cached + append,
        miss_bytes=np.full(k, float(d.miss_bytes[0])),
        generated_kv_bytes=np.full(k, float(d.generated_kv_bytes[0])),
        append_writeback_bytes=np.full(k, float(d.append_writeback_bytes[0])),
        generated_tokens=generated,
        append_tokens=append,
        weight=np.full(k, 1.0 / max(k, 1)),
    )


def replays(sc: Scenario) -> bool:
    """Whether the workload is a trace whose trajectories the agents replay turn by turn."""
    d = sc.turn_demand
    return d.trajectory.size > 0 and d.trajectory.size == d.weight.size


class _Histogram:
    """Latencies on log-spaced bins (2,000 per decade from 1 us to 1e7 s: percentiles to 0.12%
    of the value), the mean exact: memory bounded however many turns a run has."""

    PER_DECADE = 2000
    LOW = -6.0  # log10 of the first bin's lower edge
    BINS = 13 * PER_DECADE

    __slots__ = ("count", "counts", "total", "zeros")

    def __init__(self) -> None:
        self.counts = [0] * self.BINS
        self.total = 0.0
        self.count = 0
        self.zeros = 0  # values of 0 (a turn generating no tokens has no TPOT to speak of)

    def add(self, v: float) -> None:
        self.count += 1
        self.total += v
        if v <= 0.0:
            self.zeros += 1
            return
        i = int((math.log10(v) - self.LOW) * self.PER_DECADE)
        self.counts[min(max(i, 0), self.BINS - 1)] += 1

    def distribution(self) -> Distribution:
        if self.count == 0:
            return Distribution(math.nan, math.nan, math.nan, math.nan, 0)
        counts = np.asarray(self.counts, dtype=np.float64)
        cum = self.zeros + np.cumsum(counts)
        edges = 10.0 ** (self.LOW + np.arange(self.BINS + 1) / self.PER_DECADE)

        def q(share: float) -> float:
            rank = share * self.count
            if rank <= self.zeros:
                return 0.0
            i = int(np.searchsorted(cum, rank, side="left"))
            i = min(i, self.BINS - 1)
            below = cum[i - 1] if i > 0 else self.zeros
            inside = (rank - below) / counts[i] if counts[i] > 0 else 0.5
            # Geometric interpolation within the bin.
            return float(edges[i] * (edges[i + 1] / edges[i]) ** inside)

        return Distribution(self.total / self.count, q(0.5), q(0.9), q(0.99), self.count)


# A completed turn, as ``turn_sink`` receives it: agent, turn index, start, TTFT, TPOT, end,
# prefill GPU, decode node, read on the decode side, hit bytes, prompt tokens.
TurnRecord = tuple[int, int, float, float, float, float, int, int, bool, float, float]
TurnSink = Callable[[TurnRecord], None]
ProgressHook = Callable[[int, int], None]


def simulate(
    sc: Scenario,
    cfg: SimConfig = SimConfig(),
    progress: ProgressHook | None = None,
    turn_sink: TurnSink | None = None,
) -> SimResult:
    """Simulate ``sc`` in ``cfg.mode``; ``progress(done, total)`` is called now and then, and
    ``turn_sink`` with every turn as it completes (``--trace-out``)."""
    mode = MODE_TABLE[cfg.mode]
    scheduler: SimScheduler = cfg.scheduler or (
        "queue_aware" if mode.scheduler == "queue_aware" else "round_robin"
    )
    # Capacities without the analytical scheduler imbalance: the simulation schedules itself.
    # A cluster that cannot run in the mode is refused as size refuses it, for the same reason.
    ideal = replace(sc, scheduling=Scheduling(policy="ideal"))
    P, D = sc.prefill_nodes, sc.decode_nodes
    sat, t_max = runnable(ideal, cfg.mode)
    asm, sol = sat.assembly, sat.solution
    util = {n: float(u) for n, u in zip(LINKS, np.asarray(sol.utilization), strict=True)}
    per_node = {**asm.pe.per_node, **asm.de.per_node}
    capacity = {k: float(np.asarray(v)) for k, v in per_node.items()}
    for link in LINK_TABLE:  # the storage cluster's links: one per cluster
        if link.side == "storage":
            capacity[link.name] = float(np.asarray(asm.links.capacity[link.name]))
    groups = _link_groups(sc, cfg.mode, capacity, util, cfg.queued_utilization)
    rng = np.random.default_rng(cfg.seed)
    d = sc.turn_demand
    mean_turns = d.trajectory_turns.mean
    # The longest agent's lifetime at light load: its turns, each alone in the cluster.
    cycle = light_load(sc, asm)[1].item()
    life = d.trajectory_turns.longest * cycle
    duration_given = cfg.duration_s is not None
    if cfg.online and (cfg.duration_s is None or cfg.warmup_s is None):
        duration = cfg.duration_s if cfg.duration_s is not None else 4.0 * life
        warmup = cfg.warmup_s if cfg.warmup_s is not None else min(2.0 * life, duration / 2)
        cfg = replace(cfg, duration_s=duration, warmup_s=warmup)
    if cfg.online:
        assert cfg.aps is not None
        # Poisson arrivals over the duration: the count first, then the times.
        expected = cfg.aps * cfg.duration
        if expected * mean_turns > MAX_TURNS:
            raise PlanInputError(
                f"{_about(expected * mean_turns)} turns (at most {MAX_TURNS:,}): shorten "
                "--duration or lower --aps",
                field="--duration" if duration_given else "--aps",
            )
        n_agents = int(rng.poisson(expected))
        arrivals = np.sort(rng.random(n_agents) * cfg.duration)
    else:
        assert cfg.agents is not None
        n_agents = cfg.agents
        arrivals = np.zeros(n_agents)
    if replays(sc):
        # A trace: each agent replays one of its trajectories, drawn uniformly (the paper
        # makes more agents than trajectories by sampling them, A.3).
        lengths = np.bincount(d.trajectory)
        replayed = rng.integers(lengths.size, size=n_agents)
        counts = lengths[replayed].astype(np.int64)
    else:
        replayed = np.zeros(n_agents, dtype=np.int64)
        counts = draw_turn_counts(d.trajectory_turns, n_agents, rng)
    if int(counts.sum()) > MAX_TURNS:
        raise PlanInputError(
            f"{int(counts.sum()):,} turns (at most {MAX_TURNS:,}): fewer agents",
            field="--agents",
        )
    # The time series holds, per window, a number per server, GPU and node: bound it before
    # running. The run lasts about the arrivals and a drain online, and offline the JCT the
    # analytical model gives (the throughput bound and the critical path).
    span = (
        cfg.duration + 2.0 * life
        if cfg.online
        else float(offline_jct_s(n_agents, t_max, cycle, d.trajectory_turns))
    )
    nodes = P + D
    cells = (span / cfg.window_s + 1.0) * (2.0 * nodes + P * sc.prefill_node.gpus_per_node + 8)
    if not cells <= MAX_SERIES_CELLS:
        raise PlanInputError(
            f"the run lasts {_about(span, '.4g')} s: {_about(span / cfg.window_s, '.4g')} "
            f"windows of {cfg.window_s:g} s over {nodes:,} nodes is more time series than "
            f"{MAX_SERIES_CELLS:,} numbers; use a longer --window, fewer nodes or faster links",
            field="--window",
        )
    engine = _Engine(
        sc, cfg, scheduler, asm, groups, counts, replayed, arrivals, life, progress, turn_sink
    )
    return engine.run()


def _about(x: float, spec: str = ".0f") -> str:
    """ "about N" in a message, or "more than 10^308" where N overflowed (no "inf")."""
    return f"about {x:,{spec}}" if math.isfinite(x) else "more than 10^308"


# The most numbers the per-window time series may hold (windows x (servers + GPUs + nodes)):
# about 160 MB.
MAX_SERIES_CELLS = 20_000_000

# The most turns one run simulates (about 80 bytes of state per agent and a few per turn, but
# hours of wall time beyond this).
MAX_TURNS = 100_000_000


class _Engine:
    """The event loop's state (one run). Every agent has at most one turn in flight, so the
    state of a turn in flight is kept per agent: memory grows with the agents and the kinds of
    turns, not with the turns simulated."""

    def __init__(
        self,
        sc: Scenario,
        cfg: SimConfig,
        scheduler: SimScheduler,
        asm: Assembly,
        groups: list[_LinkGroup],
        counts: np.ndarray,
        replayed: np.ndarray,
        arrivals: np.ndarray,
        lifetime_s: float,
        progress: ProgressHook | None,
        turn_sink: TurnSink | None,
    ) -> None:
        self.sc, self.cfg, self.scheduler = sc, cfg, scheduler
        self.mode = MODE_TABLE[cfg.mode]
        self.counts, self.replayed, self.arrivals = counts, replayed, arrivals
        self.lifetime_s = lifetime_s  # the longest agent's at light load
        self.progress, self.turn_sink = progress, turn_sink
        P, D = sc.prefill_nodes, sc.decode_nodes
        g_pn = sc.prefill_node.gpus_per_node
        self.P, self.D, self.gpus = P, D, P * g_pn
        pm, dg = asm.pe.prefill, asm.de.decode
        assert pm is not None and dg is not None
        # Servers: one list; per link group, one per node of its side (none if not queued).
        self.servers: list[_Server] = []
        self.groups = groups
        self.group_servers: list[list[int]] = []
        for gr in groups:
            count = P if gr.side == "pe" else D if gr.side == "de" else 1
            ids = []
            for _ in range(count if gr.queued else 0):
                ids.append(len(self.servers))
                self.servers.append(_Server(len(self.servers), gr.capacity))
            self.group_servers.append(ids)
        # Decode: one server for the group; each sequence advances 1 / step(n) tokens per s.
        top = max(int(dg.max_batch), 1)
        # The step table covers every batch the run can reach: each agent has at most one turn
        # in flight, so no more sequences decode at once than there are agents (a table as
        # large as the HBM's batch took gigabytes where a GPU was given a huge HBM).
        self.decode_batch_max = top
        reach = min(top, max(int(arrivals.size), 1))
        steps = np.asarray(dg.step_array_s(np.arange(1, reach + 1, dtype=np.float64)))
        # Indexed by the sequences decoding (entry 0 stands in for none: never read).
        self.decode_rates = [1.0 / float(steps[0])] + [1.0 / float(x) for x in steps]
        self.decode_server = len(self.servers)
        self.servers.append(_Server(self.decode_server, 0.0, self.decode_rates))
        self.decode_slots = max(top // D, 1)  # sequences per decode node
        # Each node's storage reads (P nodes, then D): the rate of its read link group, and
        # its server (each of its jobs is the bytes of one read on that node; a side's read
        # links carry the same bytes, so they are one group: the SNIC and the storage's
        # per-client limit).
        self.read_rate = [math.inf] * (P + D)
        self.read_server: list[int | None] = [None] * (P + D)
        for gr, ids in zip(groups, self.group_servers, strict=True):
            if gr.phase == _READ and gr.side in ("pe", "de"):
                base = 0 if gr.side == "pe" else P
                for node in range(P if gr.side == "pe" else D):
                    self.read_rate[base + node] = min(self.read_rate[base + node], gr.capacity)
                    if ids and self.read_server[base + node] is None:
                        self.read_server[base + node] = ids[node]
        # Prefill compute of a turn: its FLOPs at the engine's peak (t1 of the mean turn), and
        # without layer-wise prefill the KV copy serialized with it (copy_s of the mean turn).
        w = sc.turn_demand.weight
        mean_flops = float(np.sum(sc.turn_demand.prefill_flops * w))
        mean_hit = float(np.sum(sc.turn_demand.hit_bytes * w))
        t1 = float(np.asarray(pm.t1_s))  # one cluster: numbers
        peak = mean_flops / t1 if t1 > 0 else math.inf
        copy_per_byte = pm.copy_s / mean_hit if mean_hit > 0 else 0.0
        layers = sc.model.num_layers if self.mode.layerwise else 1
        self.kinds = _turn_kinds(sc, counts, peak, copy_per_byte, layers, cfg.context_growth)
        self.hbm_free = float(np.asarray(pm.free_hbm_bytes))
        self.t0 = float(np.asarray(pm.t0_s))
        self.quota = (
            cfg.prefill_quota_s
            if cfg.prefill_quota_s is not None
            else QUOTA_PER_LAYER_S * sc.model.num_layers
        )
        # beta: the tokens one GPU prefills in 5 s at its largest batch; alpha: the bytes a
        # node reads in 3 s (both "profiled in advance", paper A.4).
        mean_prompt = float(np.sum(sc.turn_demand.context_tokens * w))
        b = max(min(float(np.asarray(pm.batch_cap)), (self.quota - self.t0) / pm.u_s), 1.0)
        self.beta = BETA_COMPUTE_S * b / (self.t0 + b * pm.u_s) * mean_prompt
        self.alpha = [ALPHA_READ_S * r for r in self.read_rate]
        self.offered = (cfg.aps or 0.0) * sc.turn_demand.trajectory_turns.mean
        self.turns_squared_mean = (
            float(np.mean(counts.astype(np.float64) ** 2)) if counts.size else 0.0
        )
        # The even mode's share of reads on the DE side (the sides' read capacity).
        self.split = float(np.asarray(asm.links.even_share))

    def run(self) -> SimResult:
        """The event loop (one function, its state in locals: the hot path)."""
        cfg, kinds = self.cfg, self.kinds
        P, D, G = self.P, self.D, self.gpus
        g_pn = G // P
        heap: list[tuple[float, int, int, int, int]] = []
        push, pop = heapq.heappush, heapq.heappop
        seq = 0
        servers = self.servers
        dual = self.mode.split != "pe_only" and not self.mode.io_free
        even = self.mode.split == "even"
        paper = self.scheduler == "queue_aware"
        io_free = self.mode.io_free
        beta_waiting = not cfg.beta_counts_running_pass
        draws = random.Random(cfg.seed + 1)  # the even split's and a trace's turn draws
        k_hit, k_miss, k_gen_kv, k_wb = kinds.hit, kinds.miss, kinds.gen_kv, kinds.writeback
        k_u, k_pass, k_prompt, k_gen = kinds.u, kinds.kv_pass, kinds.prompt, kinds.generated
        k_kv = kinds.kv_prompt
        offset, cumulative, replay = kinds.offset, kinds.cumulative, kinds.replay
        agent_trajectory = self.replayed.tolist()
        growth = cfg.context_growth
        n_agents = self.arrivals.size
        total_turns = int(self.counts.sum())
        agent_n = self.counts.tolist()
        agent_start = self.arrivals.tolist()
        tool = self.sc.workload.tool_latency_s
        sink = self.turn_sink
        # The turn each agent has in flight: its index, kind and state.
        turn_k = [0] * n_agents
        kind = [0] * n_agents
        pe_gpu = [0] * n_agents
        de_node = [0] * n_agents
        on_de = [False] * n_agents
        pending = [0] * n_agents  # jobs left in the current phase
        t_start = [0.0] * n_agents
        t_prefilled = [0.0] * n_agents
        moving = [False] * n_agents  # phase B started (with the turn's first pass)
        remaining_u = [0.0] * n_agents  # compute left (chunked prefill)
        agent_end = [math.nan] * n_agents
        # Prefill GPUs and the global FIFO of turns no PE can take.
        gpu_tokens = [0.0] * G  # unfinished: assigned, prefill not done (the load order)
        gpu_waiting = [0.0] * G  # of those, not yet in a pass (the overload test, beta)
        # How many turns each count holds: a count back at 0 is reset to exactly 0, so the
        # rounding residue of adding and removing tokens never breaks a tie.
        gpu_count = [0] * G
        gpu_wait_count = [0] * G
        gpu_ready: list[deque[int]] = [deque() for _ in range(G)]
        gpu_busy = [False] * G
        gpu_batch: list[list[int]] = [[] for _ in range(G)]
        gpu_busy_time = [0.0] * G  # passes ended, cumulative
        pass_start = [0.0] * G  # of the running pass
        gpu_node = [g // g_pn for g in range(G)]
        waiting: deque[int] = deque()
        beta_freed = False
        node_min_tok = [0.0] * P  # per prefill node: its least-loaded GPU's tokens, and which
        node_min_gpu = [n * g_pn for n in range(P)]
        # Decode nodes.
        de_seq = [0] * D
        de_tokens = [0.0] * D
        de_token_sum = 0.0
        de_seq_total = 0
        de_active = [0] * D
        de_queue: list[deque[int]] = [deque() for _ in range(D)]
        slots = self.decode_slots
        # Reads per node (P, then D): bytes assigned and not yet read, bytes read.
        read_queue = [0.0] * (P + D)
        read_count = [0] * (P + D)
        read_rate, alpha, beta = self.read_rate, self.alpha, self.beta
        t0, quota, hbm_free = self.t0, self.quota, self.hbm_free
        # Statistics.
        ttft_hist, tpot_hist, wait_hist = _Histogram(), _Histogram(), _Histogram()
        warmup = cfg.warmup if cfg.online else 0.0
        duration = cfg.duration if cfg.online else math.inf
        tenth, half = total_turns // 10, max(total_turns // 2, total_turns // 10 + 1)
        span_lo = span_hi = math.nan
        measured_starts = 0
        measured_done = 0
        de_read = all_read = 0.0
        rr_pe = rr_de = rr_path = 0
        live_kv = 0.0  # the live agents' contexts: each agent's latest turn's prompt KV
        held = [0.0] * n_agents  # what each agent holds of it
        kv_area = 0.0  # live_kv integrated over the window so far (byte-seconds)
        kv_since = 0.0  # when live_kv last changed or the window began
        kv_peak = 0.0  # its largest value in the window (hold keeps it >= live_kv)
        in_flight = 0
        agents_alive = 0
        done_count = 0
        window_turns = 0
        windows: list[_Window] = []
        events = 0
        now = 0.0

        # Per phase: the queued link groups (side, servers per node, coefficients at x = 0
        # and x = 1) and the others' crossing time per unit of each demand field.
        queued_of: list[list[tuple[str, list[int], tuple[float, ...], tuple[float, ...]]]] = [
            [] for _ in range(3)
        ]
        fixed_of: list[list[tuple[tuple[float, ...], tuple[float, ...]]]] = [[] for _ in range(3)]
        # Which demand fields each phase moves on a link that is not a read: B the hit and
        # miss bytes, C the write-back's (generated and appended KV).
        moved = {
            _READ: (1.0, 1.0, 1.0, 1.0),
            _MOVE: (1.0, 1.0, 0.0, 0.0),
            _WRITE: (0.0, 0.0, 1.0, 1.0),
        }
        for gi, gr in enumerate(self.groups):
            full0 = gr.coef
            full1 = tuple(a + b for a, b in zip(gr.coef, gr.dcoef, strict=True))
            for phase in (_READ,) if gr.phase == _READ else (_MOVE, _WRITE):
                keep = moved[phase]
                c0 = tuple(c * k for c, k in zip(full0, keep, strict=True))
                c1 = tuple(c * k for c, k in zip(full1, keep, strict=True))
                if not any(c0) and not any(c1):
                    continue
                if gr.queued:
                    queued_of[phase].append((gr.side, self.group_servers[gi], c0, c1))
                else:
                    cap = gr.capacity
                    fixed_of[phase].append((tuple(c / cap for c in c0), tuple(c / cap for c in c1)))

        def schedule(s: _Server) -> None:
            nonlocal seq
            s.version += 1
            if s.n:
                dt = (s.jobs[0][0] - s.v) / s.rate()
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

        def start_phase(a: int, phase: int) -> int:
            """Start the jobs of one phase of agent a's turn; how many it waits for."""
            nonlocal seq
            de = on_de[a]
            i = kind[a]
            h, mi, ga, aw = k_hit[i], k_miss[i], k_gen_kv[i], k_wb[i]
            count = 0
            for side, ids, c0, c1 in queued_of[phase]:
                c = c1 if de else c0
                load = c[0] * h + c[1] * mi + c[2] * ga + c[3] * aw
                if load <= 0.0:
                    continue
                if side == "pe":
                    idx = ids[gpu_node[pe_gpu[a]]]
                elif side == "de":
                    idx = ids[de_node[a]]
                else:
                    idx = ids[0]
                add_job(idx, load, a * 4 + phase)
                count += 1
            if phase != _WRITE:
                delay = 0.0
                for f0, f1 in fixed_of[phase]:
                    f = f1 if de else f0
                    dt = f[0] * h + f[1] * mi + f[2] * ga + f[3] * aw
                    if dt > delay:
                        delay = dt
                if delay > 0:
                    seq += 1
                    push(heap, (now + delay, seq, _DELAY, a, phase))
                    count += 1
            return count

        def refresh_node(node: int) -> None:
            # The node's GPU with the fewest unfinished tokens among those not overloaded
            # (inf: every GPU of the node is).
            best, best_tok = node * g_pn, math.inf
            for g in range(node * g_pn, node * g_pn + g_pn):
                if (gpu_waiting[g] if beta_waiting else gpu_tokens[g]) > beta:
                    continue
                if gpu_tokens[g] < best_tok:
                    best, best_tok = g, gpu_tokens[g]
            node_min_gpu[node] = best
            node_min_tok[node] = best_tok

        def assign(a: int) -> bool:
            """Agent a's turn gets its prefill GPU, decode node and read path; False: every
            PE is overloaded (the turn waits in the global queue)."""
            nonlocal rr_pe, rr_de, rr_path, de_read, all_read, de_token_sum, de_seq_total
            i = kind[a]
            tok = k_prompt[i]
            h = k_hit[i]
            if paper:
                # PE (Algorithm 1): per node, its GPU with the fewest unfinished tokens; the
                # node's read queue puts it in the low- or high-read category.
                best_low = best_high = -1
                low_tok = high_tok = math.inf
                for node in range(P):
                    gt = node_min_tok[node]
                    if gt == math.inf:
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
                # DE: the nodes with room, not high-token, fewest sequences; else the
                # high-token one with the fewest tokens (section 6, phase 2 on one group).
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
            pe_gpu[a], de_node[a] = g, e
            gpu_tokens[g] += tok
            gpu_waiting[g] += tok
            gpu_count[g] += 1
            gpu_wait_count[g] += 1
            refresh_node(gpu_node[g])
            de_seq[e] += 1
            de_seq_total += 1
            de_tokens[e] += tok
            de_token_sum += tok
            side_de = False
            if dual and h > 0:
                if even:
                    side_de = draws.random() < self.split
                elif paper:
                    # The side whose node has the shorter read queue (in seconds of reads).
                    pn, dn = gpu_node[g], P + e
                    side_de = read_queue[dn] / read_rate[dn] < read_queue[pn] / read_rate[pn]
                else:
                    # Blind: the two paths in turn (the paper's round-robin baseline, Figure
                    # 13: with P < D a PE node reads more than its share).
                    side_de = rr_path % 2 == 1
                    rr_path += 1
            on_de[a] = side_de
            all_read += h
            if side_de:
                de_read += h
            return True

        def begin_read(a: int) -> None:
            if io_free:  # the oracle reads nothing
                read_done(a)
                return
            node = (P + de_node[a]) if on_de[a] else gpu_node[pe_gpu[a]]
            read_queue[node] += k_hit[kind[a]]
            read_count[node] += 1
            n = start_phase(a, _READ)
            pending[a] = n
            if n == 0:
                read_done(a)

        def read_done(a: int) -> None:
            if not io_free:
                node = (P + de_node[a]) if on_de[a] else gpu_node[pe_gpu[a]]
                h = k_hit[kind[a]]
                read_queue[node] -= h
                read_count[node] -= 1
                if read_count[node] == 0:
                    read_queue[node] = 0.0  # no rounding residue to break the next tie
            g = pe_gpu[a]
            gpu_ready[g].append(a)
            if not gpu_busy[g]:
                start_pass(g)

        def begin_move(a: int) -> None:
            # Phase B starts with the turn's first pass; the pass itself is one more wait.
            moving[a] = True
            pending[a] = (0 if io_free else start_phase(a, _MOVE)) + 1

        def start_pass(g: int) -> None:
            nonlocal seq, beta_freed
            ready = gpu_ready[g]
            if not ready:
                return
            batch: list[int] = []
            used_hbm = 0.0
            span = t0
            while ready:
                a = ready[0]
                u = remaining_u[a]
                need = k_pass[kind[a]]
                if batch and used_hbm + need > hbm_free:
                    break
                if batch and span + u > quota:
                    part = quota - span
                    if part <= 0:
                        break
                    # Chunked prefill: this pass computes part of the turn, the rest waits at
                    # the head of the queue for the next one.
                    remaining_u[a] = u - part
                    span += part
                    if not moving[a]:
                        begin_move(a)
                    break
                ready.popleft()
                batch.append(a)
                used_hbm += need
                span += u
                remaining_u[a] = 0.0
                gpu_waiting[g] -= k_prompt[kind[a]]
                gpu_wait_count[g] -= 1
                if gpu_wait_count[g] == 0:
                    gpu_waiting[g] = 0.0
                beta_freed = True  # the global queue may fit under beta now
                if not moving[a]:
                    begin_move(a)
            refresh_node(gpu_node[g])
            gpu_busy[g] = True
            gpu_batch[g] = batch
            pass_start[g] = now
            seq += 1
            push(heap, (now + span, seq, _FORWARD, g, 0))

        def move_part_done(a: int) -> None:
            pending[a] -= 1
            if pending[a] == 0:
                t_prefilled[a] = now
                e = de_node[a]
                if de_active[e] < slots:
                    start_decode(a)
                else:
                    de_queue[e].append(a)

        def start_decode(a: int) -> None:
            if warmup <= t_start[a] <= duration:
                wait_hist.add(now - t_prefilled[a])
            de_active[de_node[a]] += 1
            gen = k_gen[kind[a]]
            add_job(self.decode_server, gen if gen > 0 else 1e-9, a * 4 + 3)

        def decoded(a: int) -> None:
            nonlocal done_count, in_flight, window_turns, live_kv, agents_alive, de_token_sum
            nonlocal de_seq_total
            nonlocal span_lo, span_hi, measured_done
            i = kind[a]
            e = de_node[a]
            de_active[e] -= 1
            de_seq[e] -= 1
            de_tokens[e] -= k_prompt[i]
            de_token_sum -= k_prompt[i]
            de_seq_total -= 1
            if de_seq[e] == 0:
                de_tokens[e] = 0.0
            if de_seq_total == 0:
                de_token_sum = 0.0
            if de_queue[e]:
                start_decode(de_queue[e].popleft())
            gen = k_gen[i]
            ttft = t_prefilled[a] - t_start[a]
            tpot = (now - t_prefilled[a]) / gen if gen > 0 else 0.0
            if warmup <= t_start[a] <= duration:
                ttft_hist.add(ttft)
                tpot_hist.add(tpot)
                measured_done += 1
            done_count += 1
            if done_count == tenth:
                span_lo = now
            if done_count == half:
                span_hi = now
            window_turns += 1
            in_flight -= 1
            if sink is not None:
                sink(
                    (a, turn_k[a], t_start[a], ttft, tpot, now, pe_gpu[a], e, on_de[a],
                     k_hit[i], k_prompt[i])
                )  # fmt: skip
            if not io_free:
                start_phase(a, _WRITE)
            if turn_k[a] + 1 < agent_n[a]:
                nonlocal seq
                turn_k[a] += 1
                seq += 1
                push(heap, (now + tool, seq, _TURN, a, 0))
            else:
                agent_end[a] = now
                agents_alive -= 1
                hold(a, 0.0)  # the agent is done: its context leaves the working set

        def hold(a: int, kv: float) -> None:
            """Agent ``a`` now holds ``kv`` bytes of context (its turn's prompt; 0 when done):
            the working set's time integral and peak follow."""
            nonlocal live_kv, kv_area, kv_since, kv_peak
            kv_area += live_kv * (now - kv_since)
            kv_since = now
            live_kv += kv - held[a]
            held[a] = kv
            kv_peak = max(kv_peak, live_kv)

        def start_turn(a: int) -> None:
            nonlocal in_flight, measured_starts
            k = turn_k[a]
            if offset is not None:
                kind[a] = offset[agent_n[a]] + (k if growth else 0)
            elif replay is not None:
                kind[a] = replay[agent_trajectory[a]][k]
            else:
                assert cumulative is not None
                kind[a] = min(bisect_right(cumulative, draws.random()), len(cumulative) - 1)
            i = kind[a]
            t_start[a] = now
            moving[a] = False
            remaining_u[a] = k_u[i]
            if warmup <= now <= duration:
                measured_starts += 1
            in_flight += 1
            hold(a, k_kv[i])
            if assign(a):
                begin_read(a)
            else:
                waiting.append(a)

        def retry_waiting() -> None:
            while waiting:
                a = waiting[0]
                if not assign(a):
                    return
                waiting.popleft()
                begin_read(a)

        last_busy = [0.0] * len(servers)
        last_gpu = [0.0] * G
        last_window = 0.0
        read_server = self.read_server

        def record_window(at: float) -> None:
            """The window ending at ``at``: its length, turns done, turns in flight, the KV
            working set, each server's busy time, each GPU's and each node's reads in it."""
            nonlocal last_busy, last_gpu, window_turns, last_window, kv_area, kv_since, kv_peak
            for srv in servers:
                srv.advance(at)
            busy = [srv.busy - last_busy[j] for j, srv in enumerate(servers)]
            last_busy = [srv.busy for srv in servers]
            # Busy time up to now: passes ended and the running one so far.
            cum = [
                gpu_busy_time[g] + (at - pass_start[g] if gpu_busy[g] else 0.0) for g in range(G)
            ]
            gb = [cum[g] - last_gpu[g] for g in range(G)]
            last_gpu = cum
            # The bytes each node's SNIC moved in the window, as they moved (not when each read
            # ended, which put a long read's bytes in one window): a processor-sharing server
            # moves its capacity whenever it holds a job, so capacity x busy time.
            rb = [0.0 if j is None else servers[j].cap * busy[j] for j in read_server]
            # The working set's time average over the window (a snapshot at its end depended on
            # the window: the last one, at the run's end, was always empty).
            kv_area += live_kv * (at - kv_since)
            length = at - last_window
            kv_mean = kv_area / length if length > 0 else live_kv
            windows.append((at, length, window_turns, in_flight, kv_mean, busy, gb, rb, kv_peak))
            kv_area, kv_since, kv_peak = 0.0, at, live_kv
            last_window = at
            window_turns = 0

        for a, at in enumerate(agent_start):
            seq += 1
            push(heap, (at, seq, _AGENT, a, 0))
        window = cfg.window_s
        seq += 1
        push(heap, (window, seq, _WINDOW, 0, 0))
        horizon = duration
        last_event = 0.0
        wall0 = wallclock.perf_counter()
        next_report = wall0 + 0.25
        stable = True
        while heap:
            now, _, what, a, b = pop(heap)
            if now > horizon:
                # Online, the arrivals are over: a queue that kept up drains (every measured
                # agent finishes), one that did not stops here.
                horizon = math.inf
                offered = self.offered * (duration - warmup)
                # The arrivals' own variation: a compound Poisson count of turns (agents at
                # APS x span, each its turns), standard deviation sqrt(APS x span x E[n^2]).
                spread = math.sqrt((cfg.aps or 0.0) * (duration - warmup) * self.turns_squared_mean)
                stable = measured_starts >= min(STABLE_SHARE * offered, offered - 3.0 * spread)
                if not stable:
                    now = duration
                    break
            events += 1
            if what != _WINDOW:
                last_event = now
            if what == _SERVER:
                s = servers[a]
                if b != s.version:
                    continue  # superseded by a later change of its job count
                s.advance(now)
                jobs = s.jobs
                # Done: within rounding of the virtual time, or of the event's own time (a
                # job a few bytes short whose completion is less than half a step of ``now``
                # away would otherwise fire again at the same instant, for ever).
                limit = s.v + max(1e-9 * (abs(s.v) + 1.0), 4.0 * math.ulp(now) * s.rate())
                finished = []
                while jobs and jobs[0][0] <= limit:
                    finished.append(heapq.heappop(jobs)[2])
                    s.n -= 1
                schedule(s)
                for owner in finished:
                    agent, phase = divmod(owner, 4)
                    if phase == 3:
                        decoded(agent)
                    elif phase == _READ:
                        pending[agent] -= 1
                        if pending[agent] == 0:
                            read_done(agent)
                    elif phase == _MOVE:
                        move_part_done(agent)
                    # _WRITE: nothing waits on the write-back
            elif what == _FORWARD:
                gpu_busy[a] = False
                gpu_busy_time[a] += now - pass_start[a]
                for agent in gpu_batch[a]:
                    gpu_tokens[a] -= k_prompt[kind[agent]]
                    gpu_count[a] -= 1
                    move_part_done(agent)
                if gpu_count[a] == 0:
                    gpu_tokens[a] = 0.0
                gpu_batch[a] = []
                beta_freed = True  # (beta_counts_running_pass tests these tokens)
                refresh_node(gpu_node[a])
                start_pass(a)
            elif what == _DELAY:
                if b == _READ:
                    pending[a] -= 1
                    if pending[a] == 0:
                        read_done(a)
                else:
                    move_part_done(a)
            elif what == _TURN:
                start_turn(a)
            elif what == _AGENT:
                agents_alive += 1
                start_turn(a)
            else:  # _WINDOW
                if agents_alive == 0 and not (cfg.online and now < duration):
                    continue  # past the last turn: the run's own end closes the last window
                record_window(now)
                if agents_alive > 0 or (cfg.online and now < duration):
                    seq += 1
                    push(heap, (now + window, seq, _WINDOW, 0, 0))
            if beta_freed:
                # A pass took turns off some GPU's waiting tokens (at a pass's end or when an
                # idle GPU started one on a read just done): the global queue may go now.
                beta_freed = False
                if waiting:
                    retry_waiting()
            if events & 4095 == 0:
                if self.progress is not None:
                    w = wallclock.perf_counter()
                    if w >= next_report:
                        next_report = w + 0.25
                        self.progress(done_count, total_turns)
                if events > cfg.max_events:
                    raise PlanInputError(
                        f"more than {cfg.max_events:,} events: shorten the run", field="--duration"
                    )
        # The run ends at its last event (not at a window boundary); the window it ends in is
        # recorded for the part it covers.
        now = min(now, last_event) if stable else now
        if not windows or windows[-1][0] < now:
            record_window(now)
        return self._result(
            _Outcome(
                ttft=ttft_hist.distribution(),
                tpot=tpot_hist.distribution(),
                decode_wait=wait_hist.distribution(),
                measured_done=measured_done,
                span=(span_lo, span_hi),
                done=done_count,
                agent_end=np.asarray(agent_end, dtype=np.float64),
                windows=windows,
                events=events,
                wall_s=wallclock.perf_counter() - wall0,
                end_s=now,
                de_read=de_read,
                all_read=all_read if not io_free else 0.0,
                stable=stable,
            )
        )

    def _result(self, o: _Outcome) -> SimResult:
        cfg = self.cfg
        if cfg.online:
            lo, hi = cfg.warmup, cfg.duration
            span = (lo, hi)
            throughput = o.measured_done / (hi - lo)
            agents_in = (self.arrivals >= lo) & (self.arrivals <= hi) & np.isfinite(o.agent_end)
            jct_agents = (o.agent_end - self.arrivals)[agents_in]
            jct = float(jct_agents.mean()) if jct_agents.size else math.nan
            unfinished = int(np.count_nonzero(~np.isfinite(o.agent_end)))
            measured_agents = int(np.count_nonzero((self.arrivals >= lo) & (self.arrivals <= hi)))
            saturated_span = False
            life = self.lifetime_s
            if self.arrivals.size == 0:
                status = "no_arrivals"
            elif lo < life or hi - lo < life:
                status = "too_short"
            else:
                status = "stable" if o.stable else "unstable"
        else:
            # Offline: the throughput while the cluster is saturated, from 10% to 50% of all
            # turns done (most agents still run; the drain after is the stragglers').
            total = int(self.counts.sum())
            lo_i, hi_i = total // 10, max(total // 2, total // 10 + 1)
            saturated_span = total >= 20 and o.span[1] > o.span[0]
            if saturated_span:
                span = o.span
                throughput = (hi_i - lo_i) / (span[1] - span[0])
            else:  # too few turns for a span: the whole run
                span = (0.0, o.end_s)
                throughput = o.done / o.end_s if o.end_s > 0 else 0.0
            jct = float(np.max(o.agent_end)) if o.agent_end.size else 0.0
            jct_agents = o.agent_end - self.arrivals
            unfinished = 0
            measured_agents = int(self.arrivals.size)
            status = "offline"
        window = cfg.window_s
        w = o.windows
        w_end = np.array([x[0] for x in w], dtype=np.float64)
        w_len = np.array([x[1] for x in w], dtype=np.float64)
        per = np.where(w_len > 0, w_len, 1.0)[:, None]  # a window's share of its own length
        busy = np.array([x[5] for x in w], dtype=np.float64).reshape(len(w), len(self.servers))
        gpu = np.array([x[6] for x in w], dtype=np.float64).reshape(len(w), self.gpus)
        reads = np.array([x[7] for x in w], dtype=np.float64).reshape(len(w), self.P + self.D)
        # Windows wholly inside the measured span (all of them where none is).
        in_span = (w_end - w_len >= span[0] - 1e-9) & (w_end <= span[1] + 1e-9) & (w_len > 0)
        if not in_span.any():
            in_span = w_len > 0

        def mean_in_span(u: np.ndarray) -> float:
            return float(u[in_span].mean()) if u.size else math.nan

        series: list[ServerSeries] = []
        for gi, gr in enumerate(self.groups):
            ids = self.group_servers[gi]
            if ids:
                u = (busy[:, ids] / per).mean(axis=1)
                series.append(
                    ServerSeries(gr.name, len(ids), gr.capacity, True, u, mean_in_span(u))
                )
            else:
                series.append(ServerSeries(gr.name, 0, gr.capacity, False, np.zeros(0), math.nan))
        gu = np.minimum(gpu / per, 1.0).mean(axis=1)  # rounding: never above 1
        ws = np.array([x[4] for x in w], dtype=np.float64) / 1e9
        ws_peak = np.array([x[8] for x in w], dtype=np.float64) / 1e9
        kept = in_span if cfg.online else w_len > 0
        if not kept.any():  # a run of no time: its one window's values
            kept = np.ones(len(w), dtype=bool)
        weights = w_len[kept] if w_len[kept].sum() > 0 else np.ones(int(kept.sum()))
        series.append(ServerSeries("prefill GPUs", self.gpus, math.nan, True, gu, mean_in_span(gu)))
        return SimResult(
            config=cfg,
            scheduler=self.scheduler,
            mode=cfg.mode,
            turns=o.done,
            agents=int(self.arrivals.size),
            events=o.events,
            wall_s=o.wall_s,
            sim_time_s=float(o.end_s),
            throughput_turns_per_s=float(throughput),
            throughput_span_s=(float(span[0]), float(span[1])),
            whole_run=not cfg.online and not saturated_span,
            jct_s=jct,
            agent_jct_s=Distribution.of(jct_agents[np.isfinite(jct_agents)]),
            ttft_s=o.ttft,
            tpot_s=o.tpot,
            decode_path_fraction=o.de_read / o.all_read if o.all_read > 0 else 0.0,
            reads=o.all_read > 0 and not self.mode.io_free,
            snic_max_over_avg=_max_over_avg(reads[in_span]),
            prefill_max_over_avg=_max_over_avg(gpu[in_span]),
            window_s=window,
            window_end_s=w_end,
            window_length_s=w_len,
            turns_done=np.array([x[2] for x in w], dtype=np.int64),
            in_flight=np.array([x[3] for x in w], dtype=np.int64),
            working_set_gbyte=ws,
            working_set_mean_gbyte=float(np.average(ws[kept], weights=weights)) if w else 0.0,
            working_set_max_gbyte=float(ws_peak[kept].max()) if w else 0.0,
            snic_bytes=reads,
            servers=tuple(series),
            unfinished=unfinished,
            stable=o.stable,
            offered_turns_per_s=self.offered if cfg.online else 0.0,
            status=status,
            lifetime_s=self.lifetime_s,
            decode_wait_s=o.decode_wait,
            decode_batch_mean=(
                self.servers[self.decode_server].area / o.end_s if o.end_s > 0 else 0.0
            ),
            decode_batch_max=self.decode_batch_max,
            agents_measured=measured_agents,
        )


@dataclass(frozen=True)
class _Outcome:
    """What the event loop leaves for the statistics."""

    ttft: Distribution
    tpot: Distribution
    decode_wait: Distribution
    measured_done: int
    span: tuple[float, float]  # offline: when 10% and 50% of the turns were done
    done: int
    agent_end: np.ndarray
    windows: list[_Window]
    events: int
    wall_s: float
    end_s: float
    de_read: float
    all_read: float
    stable: bool


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
