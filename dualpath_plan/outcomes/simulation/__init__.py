"""A discrete-event simulation of the cluster ``size`` models: the reference its queueing
approximation is checked against (docs/model.md section 10).

The same scenario, the same assembly of capacities and the same engines as the analytical
model; what differs is that agents replay their turns one by one and every queue is simulated
instead of approximated. A turn:

1. starts (an agent's first turn at its arrival, a later one when the previous turn's tokens
   are out and the tool latency has passed) and is given a prefill GPU, a decode node and a
   read path by the scheduler (``schedulers.py``, a registry by name): ``queue_aware``, the
   paper's (section 6: PE by token load in read-queue categories with the alpha = 3 s of
   reads and beta = 5 s of compute thresholds, DE by free HBM and token load, the read on the
   side whose node has the shorter read queue), ``round_robin`` (engines in turn, the two
   paths in turn, blind to every queue) or ``least_loaded`` (each choice to the least-loaded
   unit, no thresholds);
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

The package: ``config`` (what to simulate), ``schedulers`` (the registry), ``state`` (the
cluster's state in typed objects), ``links`` (servers and link groups), ``kinds`` (turn
contents), ``engine`` (the event loop, a handler per event kind), ``stats`` (latency
histograms) and ``results`` (what a run measured). The event loop is a binary heap of (time,
sequence, kind, agent, data) tuples; processor sharing runs on virtual time (each server's
jobs finish in order of their virtual finish time, so an arrival or a departure is
O(log n)); a server's next completion is an event that a change of its job count supersedes.
Every agent has at most one turn in flight, so a turn's state is kept per agent: memory grows
with the agents, not the turns. Same seed, same events, same output.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from dualpath_plan.errors import PlanInputError
from dualpath_plan.frozen import record
from dualpath_plan.outcomes.read_choice import read_scenario
from dualpath_plan.outcomes.serving import Saturated, light_load, offline_jct_s, runnable
from dualpath_plan.outcomes.simulation.config import (
    MAX_SERIES_CELLS,
    MAX_SIM_AGENTS,
    MAX_TURNS,
    STABLE_SHARE,
    SimConfig,
)
from dualpath_plan.outcomes.simulation.engine import (
    Engine,
    ProgressHook,
    TurnRecord,
    TurnSink,
)
from dualpath_plan.outcomes.simulation.kinds import draw_turn_counts, replays
from dualpath_plan.outcomes.simulation.links import LinkGroup, link_groups
from dualpath_plan.outcomes.simulation.results import (
    ServerSeries,
    SimResult,
    SloVerdict,
    slo_verdict,
)
from dualpath_plan.outcomes.simulation.schedulers import (
    HIGH_TOKEN_MARGIN,
    SCHEDULERS,
    SIM_SCHEDULERS,
    Scheduler,
    SimScheduler,
)
from dualpath_plan.outcomes.simulation.stats import Distribution
from dualpath_plan.physics.engines import (
    ALPHA_READ_S,
    BETA_COMPUTE_S,
    QUOTA_PER_LAYER_S,
    Scheduling,
)
from dualpath_plan.physics.links import LINK_TABLE, LINKS
from dualpath_plan.physics.modes import MODE_TABLE
from dualpath_plan.scenario.bundle import Scenario

__all__ = [
    "ALPHA_READ_S",
    "BETA_COMPUTE_S",
    "HIGH_TOKEN_MARGIN",
    "MAX_SERIES_CELLS",
    "MAX_SIM_AGENTS",
    "MAX_TURNS",
    "QUOTA_PER_LAYER_S",
    "SCHEDULERS",
    "SIM_SCHEDULERS",
    "STABLE_SHARE",
    "Distribution",
    "ProgressHook",
    "Scheduler",
    "ServerSeries",
    "SimConfig",
    "SimResult",
    "SimScheduler",
    "SloVerdict",
    "TurnRecord",
    "TurnSink",
    "draw_turn_counts",
    "replays",
    "simulate",
    "slo_verdict",
]


def simulate(
    sc: Scenario,
    cfg: SimConfig = SimConfig(),
    progress: ProgressHook | None = None,
    turn_sink: TurnSink | None = None,
) -> SimResult:
    """Simulate ``sc`` in ``cfg.mode``; ``progress(done, total)`` is called now and then, and
    ``turn_sink`` with every turn as it completes (``--trace-out``)."""
    mode = MODE_TABLE[cfg.mode]
    # With a store of finite size, the share of the cache the analytical plan reads in this
    # mode (outcomes/read_choice.py): the simulated turns read and recompute as it does.
    sc = read_scenario(sc, cfg.mode)
    scheduler: SimScheduler = cfg.scheduler or (
        "queue_aware" if mode.scheduler == "queue_aware" else "round_robin"
    )
    links = _links(sc, cfg)
    rng = np.random.default_rng(cfg.seed)
    d = sc.turn_demand
    # The longest agent's lifetime at light load: its turns, each alone in the cluster.
    cycle = light_load(sc, links.sat)[1].item()
    life = d.trajectory_turns.longest * cycle
    duration_given = cfg.duration_s is not None
    if cfg.online and (cfg.duration_s is None or cfg.warmup_s is None):
        duration = cfg.duration_s if cfg.duration_s is not None else 4.0 * life
        warmup = cfg.warmup_s if cfg.warmup_s is not None else min(2.0 * life, duration / 2)
        cfg = replace(cfg, duration_s=duration, warmup_s=warmup)
    arrivals = _arrivals(sc, cfg, rng, duration_given)
    replayed, counts = _turn_counts(sc, arrivals.size, rng)
    # The time series holds, per window, a number per server, GPU and node: bound it before
    # running. The run lasts about the arrivals and a drain online, and offline the JCT the
    # analytical model gives (the throughput bound and the critical path).
    span = (
        cfg.duration + 2.0 * life
        if cfg.online
        else float(offline_jct_s(arrivals.size, links.t_max, cycle, d.trajectory_turns))
    )
    _check_series(sc, cfg, span)
    engine = Engine(
        sc, cfg, scheduler, links.sat.assembly, links.groups, counts, replayed, arrivals, life,
        progress, turn_sink,
    )  # fmt: skip
    return engine.run()


@record
class _Links:
    """The cluster's optimum the run uses (its assembly), its saturated rate and the link
    groups it simulates."""

    sat: Saturated
    t_max: float
    groups: list[LinkGroup]


def _links(sc: Scenario, cfg: SimConfig) -> _Links:
    """Capacities without the analytical scheduler imbalance: the simulation schedules itself.
    A cluster that cannot run in the mode is refused as size refuses it, for the same
    reason."""
    ideal = replace(sc, scheduling=Scheduling(policy="ideal"))
    sat, t_max = runnable(ideal, cfg.mode)
    asm, sol = sat.assembly, sat.solution
    util = {n: float(u) for n, u in zip(LINKS, np.asarray(sol.utilization), strict=True)}
    per_node = {**asm.pe.per_node, **asm.de.per_node}
    capacity = {k: float(np.asarray(v)) for k, v in per_node.items()}
    for link in LINK_TABLE:  # the storage cluster's links: one per cluster
        if link.side == "storage":
            capacity[link.name] = float(np.asarray(asm.links.capacity[link.name]))
    groups = link_groups(sc, cfg.mode, capacity, util, cfg.queued_utilization)
    return _Links(sat, t_max, groups)


def _arrivals(
    sc: Scenario, cfg: SimConfig, rng: np.random.Generator, duration_given: bool
) -> np.ndarray:
    """When each agent starts: Poisson arrivals over the duration online (the count first,
    then the times), all at 0 offline."""
    if not cfg.online:
        assert cfg.agents is not None
        return np.zeros(cfg.agents)
    assert cfg.aps is not None
    expected = cfg.aps * cfg.duration
    mean_turns = sc.turn_demand.trajectory_turns.mean
    if expected * mean_turns > MAX_TURNS:
        raise PlanInputError(
            f"{_about(expected * mean_turns)} turns (at most {MAX_TURNS:,}): shorten "
            "--duration or lower --aps",
            field="--duration" if duration_given else "--aps",
        )
    n_agents = int(rng.poisson(expected))
    return np.sort(rng.random(n_agents) * cfg.duration)


def _turn_counts(
    sc: Scenario, n_agents: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Each agent's trajectory (a trace's, drawn uniformly: the paper makes more agents than
    trajectories by sampling them, A.3) and turn count."""
    d = sc.turn_demand
    if replays(sc):
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
    return replayed, counts


def _check_series(sc: Scenario, cfg: SimConfig, span: float) -> None:
    """Refuse a run whose time series would hold more than MAX_SERIES_CELLS numbers."""
    P, D = sc.prefill_nodes, sc.decode_nodes
    nodes = P + D
    cells = (span / cfg.window_s + 1.0) * (2.0 * nodes + P * sc.prefill_node.gpus_per_node + 8)
    if not cells <= MAX_SERIES_CELLS:
        raise PlanInputError(
            f"the run lasts {_about(span, '.4g')} s: {_about(span / cfg.window_s, '.4g')} "
            f"windows of {cfg.window_s:g} s over {nodes:,} nodes is more time series than "
            f"{MAX_SERIES_CELLS:,} numbers; use a longer --window, fewer nodes or faster links",
            field="--window",
        )


def _about(x: float, spec: str = ".0f") -> str:
    """ "about N" in a message, or "more than 10^308" where N overflowed (no "inf")."""
    return f"about {x:,{spec}}" if math.isfinite(x) else "more than 10^308"
