"""Plans by simulation (docs/model.md section 10b): a run repeated over seeds with a 95%
confidence interval per metric, the highest APS whose SLOs hold in the simulation (a bisection
bracketed by the analytical model), and the smallest cluster or the best split of a budget by
it. Every simulation is a task of ``outcomes/executor.py``: seeded by its own inputs, so the
answers are the same on one worker, many, or a Ray cluster.

The APS search (Vidur-Search bisects the request rate per configuration by simulation; here
the analytical model brackets it so that few simulations run): the analytical APS with the
headroom cap (``ModeOutcome.aps``) is the bracket's low end, the APS under the SLOs alone
(``slo_aps``) its high end. Both ends are simulated first (one batch); a low end the simulation
misses moves the bracket down, a high end it meets moves it up (by 2 tolerances, then 4, 8
and 16: ``_widen_step``), at most ``MAX_WIDEN`` times each way; then the bracket is bisected
until its width is at most ``tolerance`` of its high end. A rate "holds" when every seed's run
is stable and the mean over the seeds of each SLO's statistic (the mean, or the percentile
``--slo-percentile`` names) is within its SLO, and it is below the simulation's own saturated
rate: where the high end holds, an offline run per seed (eight times the closed system's knee in
agents: ``_saturating_agents``) measures it before any rate above the bracket is tried, since a
run of finite length can meet the SLOs a few percent above it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from dualpath_plan.errors import MAX_SEED, InfeasibleError, PlanInputError
from dualpath_plan.formatting import plain
from dualpath_plan.frozen import record
from dualpath_plan.outcomes.executor import Executor, Search, run_searches
from dualpath_plan.outcomes.plan_defaults import DEFAULT_PLAN_SEEDS, DEFAULT_TOP_SPLITS
from dualpath_plan.outcomes.serving import ModeCore, closed_cycle, mode_core, mode_outcome
from dualpath_plan.outcomes.simulation import (
    MAX_SIM_AGENTS,
    MAX_TURNS,
    SimConfig,
    SimResult,
    simulate,
    slo_verdict,
)
from dualpath_plan.physics.modes import ModeName
from dualpath_plan.scenario.bundle import Scenario
from dualpath_plan.scenario.spec import ServingConfig

# The confidence of every interval across seeds (Student t on the seeds' values).
CONFIDENCE = 0.95
# The APS search stops when its bracket is at most this share of its high end.
DEFAULT_TOLERANCE = 0.02
# Times the bracket moves down (or up) where the simulation disagrees with the analytical one.
MAX_WIDEN = 4
# size --target-aps --by simulation tries at most this many node counts above the analytical
# answer (and goes below it while the simulation still meets the target).
MAX_EXTRA_NODES = 4


@record
class SimTask:
    """One simulation: the cluster (its node counts in the scenario) and the run."""

    scenario: Scenario
    config: SimConfig

    def describe(self) -> str:
        c, sc = self.config, self.scenario
        load = f"--aps {plain(c.aps)}" if c.aps is not None else f"--agents {c.agents}"
        return (
            f"simulate -P {sc.prefill_nodes} -D {sc.decode_nodes} --mode {c.mode} {load} "
            f"--seed {c.seed}"
        )


def run_task(task: SimTask) -> SimResult:
    """A task's simulation (module level: pickled to the workers)."""
    return simulate(task.scenario, task.config)


def describe_task(task: SimTask) -> str:
    return task.describe()


@record
class MeanCI:
    """A metric over seeds: its mean and the half-width of its 95% confidence interval
    (Student t with n - 1 degrees of freedom; NaN with one seed)."""

    mean: float
    half_width: float
    n: int

    @property
    def low(self) -> float:
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        return self.mean + self.half_width


def mean_ci(values: Sequence[float]) -> MeanCI:
    """The mean of ``values`` (one per seed) and its 95% interval: t_{0.975, n-1} s / sqrt(n),
    s the sample standard deviation. NaN values (a seed that measured nothing) are left out."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=np.float64)
    if v.size == 0:
        return MeanCI(math.nan, math.nan, 0)
    if v.size == 1:
        return MeanCI(float(v[0]), math.nan, 1)
    from scipy import stats  # here: size and recommend import this module at start-up

    t = float(stats.t.ppf(0.5 + CONFIDENCE / 2.0, v.size - 1))
    return MeanCI(float(v.mean()), t * float(v.std(ddof=1)) / math.sqrt(v.size), int(v.size))


def seed_configs(cfg: SimConfig, seeds: int) -> list[SimConfig]:
    """``seeds`` runs of ``cfg`` with seeds cfg.seed .. cfg.seed + seeds - 1."""
    if isinstance(seeds, bool) or not 1 <= seeds <= 1000:
        raise PlanInputError(f"expected 1 to 1,000 seeds, got {seeds!r}", field="--seeds")
    if cfg.seed + seeds - 1 > MAX_SEED:
        raise PlanInputError(
            f"seeds {cfg.seed} to {cfg.seed + seeds - 1} pass {MAX_SEED:,}: a lower --seed",
            field="--seeds",
        )
    return [replace(cfg, seed=cfg.seed + i) for i in range(seeds)]


def run_seeds(
    sc: Scenario,
    cfg: SimConfig,
    seeds: int,
    executor: Executor,
    progress: Callable[[int, int], None] | None = None,
) -> list[SimResult]:
    """``simulate --seeds N``: the N runs, in seed order."""
    tasks = [SimTask(sc, c) for c in seed_configs(cfg, seeds)]

    def one() -> Search:
        return (yield tasks)

    return list(run_searches(executor, run_task, [one()], describe_task, progress)[0])


@record
class RatePoint:
    """A simulated rate of an APS search: the mean over seeds of the SLOs' statistics, their
    intervals, each seed's status, and whether the rate holds."""

    aps: float
    ttft_s: MeanCI
    tpot_s: MeanCI
    statuses: tuple[str, ...]
    holds: bool
    # At or above the simulation's own saturated rate (``ApsSearch.simulated_capacity_aps``):
    # it does not hold whatever its runs gave (a run of finite length falls behind an overload
    # of a few percent too slowly to show it).
    above_capacity: bool = False


@record
class ApsSearch:
    """The simulation-backed APS of one cluster in one mode, and how it was found."""

    mode: ModeName
    prefill_nodes: int
    decode_nodes: int
    analytical_aps: float  # with the headroom cap: the bracket's low end
    analytical_slo_aps: float  # under the SLOs alone: its high end
    aps: float  # the highest simulated rate that holds (0: none down to the widened bracket)
    bracket: tuple[float, float]  # the last: holds at its low end, not at its high end
    tolerance: float
    seeds: int
    points: tuple[RatePoint, ...]  # in the order simulated
    widened: str  # "", "down" or "up": where the simulation disagreed with the analytical one
    reason: str = ""  # where aps is 0: why
    # The simulation's own saturated rate (agents/s: its offline throughput over the mean
    # turns), measured where the analytical high end held; None where not measured.
    simulated_capacity_aps: float | None = None

    @property
    def simulations(self) -> int:
        return (len(self.points) + (self.simulated_capacity_aps is not None)) * self.seeds

    @property
    def inside_bracket(self) -> bool:
        """The simulated APS within the analytical bracket [aps, slo_aps] (its tolerance)."""
        lo, hi = self.analytical_aps, self.analytical_slo_aps
        return lo * (1 - self.tolerance) <= self.aps <= hi * (1 + self.tolerance)


def _point(aps: float, results: Sequence[SimResult], slo: ServingConfig) -> RatePoint:
    verdicts = [slo_verdict(r, slo) for r in results]
    for r, v in zip(results, verdicts, strict=True):
        if r.status == "too_short" or (v.met is None and r.status != "unstable"):
            raise PlanInputError(
                f"the run at {plain(aps)} agents/s is {v.why}: a longer --duration and --warmup "
                "(or leave both out)",
                field="--duration",
            )
    ttft = mean_ci([v.ttft_s for v in verdicts])
    tpot = mean_ci([v.tpot_s for v in verdicts])
    stable = all(r.status == "stable" for r in results)
    holds = stable and ttft.mean <= slo.ttft_slo_s and tpot.mean <= slo.tpot_slo_s
    return RatePoint(aps, ttft, tpot, tuple(r.status for r in results), holds)


def aps_search(
    sc: Scenario,
    base: SimConfig,
    slo: ServingConfig,
    seeds: int = DEFAULT_PLAN_SEEDS,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Search:
    """The search as a generator of task batches (``run_searches`` drives it); ``base``: the
    run's mode, scheduler, duration and first seed (its rate is the search's)."""
    check_tolerance(tolerance)
    mode = base.mode
    core = mode_core(sc, mode, slo)
    o = mode_outcome(sc, mode, slo, core)
    a_lo, a_hi = o.aps, o.slo_aps
    points: list[RatePoint] = []

    capacity: float | None = None

    def done(aps: float, bracket: tuple[float, float], widened: str, reason: str = "") -> ApsSearch:
        return ApsSearch(
            mode, sc.prefill_nodes, sc.decode_nodes, a_lo, a_hi, aps, bracket, tolerance,
            seeds, tuple(points), widened, reason, capacity,
        )  # fmt: skip

    if not a_hi > 0:
        return done(0.0, (0.0, 0.0), "", "the analytical model finds no rate within the SLOs")

    def batch(rates: Sequence[float]) -> list[SimTask]:
        return [
            SimTask(sc, c)
            for x in rates
            for c in seed_configs(replace(base, aps=x, agents=None), seeds)
        ]

    def read(rates: Sequence[float], results: list[SimResult]) -> list[RatePoint]:
        got = [
            _capped(_point(x, results[i * seeds : (i + 1) * seeds], slo), capacity)
            for i, x in enumerate(rates)
        ]
        points.extend(got)
        return got

    lo = a_lo if a_lo > 0 else a_hi / 2.0
    hi = max(a_hi, lo)
    if hi <= lo * (1 + 1e-9):
        hi = lo * (1 + tolerance)
    ends = [lo, hi]
    p_lo, p_hi = read(ends, (yield batch(ends)))
    agents = _saturating_agents(sc, core) if p_hi.holds else None
    if agents is not None:
        # The analytical high end holds: before a rate above it is tried, the simulation's
        # own saturated rate, from an offline run per seed of agents enough to saturate the
        # cluster. No queue is stable above it, whatever a run of finite length shows: 5P3D
        # on the README default held 4% above it, its TPOT over the seeds 12 to 85 ms.
        offline = replace(base, aps=None, agents=agents, duration_s=None, warmup_s=None)
        runs = yield [SimTask(sc, c) for c in seed_configs(offline, seeds)]
        turns = sc.turn_demand.trajectory_turns.mean
        capacity = float(np.mean([r.throughput_turns_per_s for r in runs])) / turns
        points[:] = [_capped(p, capacity) for p in points]
        p_lo, p_hi = points
    widened = ""
    if not p_lo.holds:
        widened, hi = "down", lo
        for k in range(MAX_WIDEN):
            lo = hi * max(0.5, 1.0 - _widen_step(tolerance, k))
            (p,) = read([lo], (yield batch([lo])))
            if p.holds:
                break
            hi = lo
        else:
            return done(0.0, (0.0, lo), widened, f"no rate down to {plain(lo)} agents/s holds")
    elif p_hi.holds:
        widened = "up"
        for k in range(MAX_WIDEN):
            lo, hi = hi, hi * (1.0 + _widen_step(tolerance, k))
            if capacity is not None and hi >= capacity:
                hi = capacity  # a rate at the simulation's saturated rate does not hold
                break
            (p,) = read([hi], (yield batch([hi])))
            if not p.holds:
                break
        else:
            return done(hi, (hi, math.inf), widened, "still holding where the widening stopped")
    while hi - lo > tolerance * hi:
        mid = (lo + hi) / 2.0
        (p,) = read([mid], (yield batch([mid])))
        lo, hi = (mid, hi) if p.holds else (lo, mid)
    return done(lo, (lo, hi), widened)


# The offline run that measures the simulation's saturated rate holds this many times the
# agents at the closed system's knee N*, where the asymptotic bounds meet. A closed system's
# throughput reaches its bound from below as the agents pass N* (the knee rounds off): DS 27B
# on 1P2D (N* = 290) ran at 90% of it at 2 N*, 97.5% at 2.8 N*, 100.5% at 4 N* and 8 N*
# (two seeds each, 2026-12-07); twice that margin.
SATURATING_KNEES = 8.0


def _saturating_agents(sc: Scenario, core: ModeCore) -> int | None:
    """Agents that keep the cluster saturated offline: ``SATURATING_KNEES`` times the knee
    N* = T c(N*) (T the saturated throughput, c(n) the load-dependent cycle of n agents,
    ``serving.closed_cycle``), found by iterating N = T c(N) from the light-load cycle (c
    rises with n, so the iteration rises to the knee). None where that is more agents or
    turns than a simulation takes (``MAX_SIM_AGENTS``, ``MAX_TURNS``): the rate is then not
    measured and bounds nothing, as before it was."""
    at = closed_cycle(sc, core.sat)
    knee = 1.0
    for _ in range(50):
        nxt = core.t_max * float(np.asarray(at(knee)).reshape(-1)[0])
        if not math.isfinite(nxt) or abs(nxt - knee) <= 1e-9 * nxt:
            knee = nxt
            break
        knee = nxt
    agents = math.ceil(SATURATING_KNEES * knee)
    turns = sc.turn_demand.trajectory_turns.mean
    if not (math.isfinite(knee) and 1 <= agents <= MAX_SIM_AGENTS and agents * turns <= MAX_TURNS):
        return None
    return agents


def _capped(p: RatePoint, capacity: float | None) -> RatePoint:
    """``p``, not holding where its rate is at or above ``capacity`` (None: not measured)."""
    if capacity is None or p.aps < capacity:
        return p
    return replace(p, holds=False, above_capacity=True)


def _widen_step(tolerance: float, k: int) -> float:
    """The k-th move of a bracket end the simulation disagrees with, as a share of the end:
    2 tolerances, doubling (4%, 8%, 16%, 32% at 2%), so that a small disagreement costs one
    simulated rate and a bisection step (the README default's 3P5D and 5P3D, 2% off), and a
    large one few more."""
    return 2.0 * tolerance * 2.0**k


def check_tolerance(tolerance: float) -> None:
    if not (math.isfinite(tolerance) and 0.001 <= tolerance <= 0.5):
        raise PlanInputError(
            f"expected a relative tolerance from 0.001 to 0.5, got {tolerance!r}",
            field="--tolerance",
        )


def search_aps(
    sc: Scenario,
    base: SimConfig,
    slo: ServingConfig,
    executor: Executor,
    seeds: int = DEFAULT_PLAN_SEEDS,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: Callable[[int, int], None] | None = None,
) -> ApsSearch:
    """``simulate --aps-search``: ``aps_search`` run on ``executor``."""
    search = aps_search(sc, base, slo, seeds, tolerance)
    return run_searches(executor, run_task, [search], describe_task, progress)[0]  # type: ignore[no-any-return]


def search_splits(
    sc: Scenario,
    splits: Sequence[tuple[int, int]],
    base: SimConfig,
    slo: ServingConfig,
    executor: Executor,
    seeds: int = DEFAULT_PLAN_SEEDS,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: Callable[[int, int], None] | None = None,
) -> list[ApsSearch | str]:
    """The APS search of every split (``recommend --by simulation``), all advancing at once on
    ``executor``; a split the cluster cannot run gives its reason instead."""
    check_tolerance(tolerance)
    searches: list[Search] = []
    slots: list[int] = []
    out: list[ApsSearch | str] = []
    for i, (p, d) in enumerate(splits):
        trial = replace(sc, prefill_nodes=p, decode_nodes=d)
        try:
            mode_core(trial, base.mode, slo)
        except InfeasibleError as exc:
            out.append(exc.detail)
            continue
        out.append("")
        slots.append(i)
        searches.append(aps_search(trial, base, slo, seeds, tolerance))
    answers = run_searches(executor, run_task, searches, describe_task, progress)
    for i, a in zip(slots, answers, strict=True):
        out[i] = a
    return out


@record
class SplitTrial:
    """A split simulated at the target rate (``size --target-aps --by simulation``)."""

    prefill_nodes: int
    decode_nodes: int
    analytical_aps: float
    point: RatePoint


@record
class SimSizing:
    """The smallest cluster whose simulation holds the SLOs at the target APS: its split (None:
    none within the node counts tried), and every split tried, in order."""

    target_aps: float
    analytical_nodes: int  # the analytical answer's node count, where the search started
    answer: SplitTrial | None
    trials: tuple[SplitTrial, ...]
    top_splits: int
    seeds: int
    reason: str = ""


def _ranked_splits(
    sc: Scenario, n: int, mode: ModeName, slo: ServingConfig, top: int
) -> list[tuple[int, int, float]]:
    """The splits of n nodes by the analytical APS (highest first; fewer prefill nodes among
    equals), the top ``top`` that run in the mode."""
    ranked = []
    for p in range(1, n):
        trial = replace(sc, prefill_nodes=p, decode_nodes=n - p)
        try:
            core = mode_core(trial, mode, slo)
        except InfeasibleError:
            continue
        ranked.append((p, n - p, core.aps))
    ranked.sort(key=lambda t: (-t[2], t[0]))
    return ranked[:top]


def smallest_by_simulation(
    sc: Scenario,
    target_aps: float,
    start_nodes: int,
    max_nodes: int,
    base: SimConfig,
    slo: ServingConfig,
    seeds: int = DEFAULT_PLAN_SEEDS,
    top: int = DEFAULT_TOP_SPLITS,
) -> Search:
    """From the analytical answer's node count: its ``top`` splits (by the analytical APS)
    simulated at the target, one batch per node count; up while none holds (at most
    MAX_EXTRA_NODES more), down while one does. The answer: at the fewest nodes that hold, the
    split with the lowest mean TTFT statistic among those that hold."""
    trials: list[SplitTrial] = []
    run = replace(base, aps=target_aps, agents=None)

    def at(n: int) -> Search:
        ranked = _ranked_splits(sc, n, base.mode, slo, top)
        tasks = [
            SimTask(replace(sc, prefill_nodes=p, decode_nodes=d), c)
            for p, d, _ in ranked
            for c in seed_configs(run, seeds)
        ]
        results = yield tasks
        got = [
            SplitTrial(p, d, a, _point(target_aps, results[i * seeds : (i + 1) * seeds], slo))
            for i, (p, d, a) in enumerate(ranked)
        ]
        trials.extend(got)
        held = [t for t in got if t.point.holds]
        return min(held, key=lambda t: (t.point.ttft_s.mean, t.prefill_nodes)) if held else None

    def result(answer: SplitTrial | None, n0: int, reason: str = "") -> SimSizing:
        return SimSizing(target_aps, n0, answer, tuple(trials), top, seeds, reason)

    n = max(2, start_nodes)
    best = yield from at(n)
    if best is None:
        for n in range(start_nodes + 1, min(start_nodes + MAX_EXTRA_NODES, max_nodes) + 1):
            best = yield from at(n)
            if best is not None:
                return result(best, start_nodes)
        return result(
            None,
            start_nodes,
            f"no split of {start_nodes} to {n} nodes holds the SLOs at "
            f"{plain(target_aps)} agents/s in the simulation",
        )
    while n > 2:
        smaller = yield from at(n - 1)
        if smaller is None:
            break
        best, n = smaller, n - 1
    return result(best, start_nodes)
