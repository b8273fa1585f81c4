"""The online model at a given arrival rate: TTFT, TPOT, one agent's JCT, the KV working set
and the busiest link's utilization of one cluster in one mode, vectorized over the rates
(docs/model.md section 6, "At a given rate").

Nothing here is a formula of its own: the cluster is the one assembly and its closed-form
optimum (``serving.runnable``, which refuses a cluster for the reasons ``size`` gives), the
latencies are the online queue's (``online_queue(...).at``), the agent's time and the working
set are ``serving.agent_time_s`` and ``serving.kv_working_set_gbyte``, the definitions
``evaluate_mode`` uses at the APS. So at ``size``'s APS these are ``size``'s numbers.

A rate whose turns reach the saturated throughput, or at which the queue is unstable, is
beyond capacity: its TTFT, TPOT, agent JCT and working set are inf here (a report says
"beyond capacity" and gives the reason, JSON gives null), its utilization stays the finite
turn rate over the saturated one.
"""

from __future__ import annotations

import math
from dataclasses import field

import numpy as np

from dualpath_plan.errors import InfeasibleError
from dualpath_plan.frozen import record
from dualpath_plan.outcomes.online import online_queue
from dualpath_plan.outcomes.read_choice import read_scenario
from dualpath_plan.outcomes.serving import agent_time_s, kv_working_set_gbyte, runnable
from dualpath_plan.physics.modes import REPORT_MODES, ModeName
from dualpath_plan.scenario.bundle import Scenario
from dualpath_plan.scenario.spec import ServingConfig, SloPercentiles


@record
class RatePoints:
    """One cluster in one mode at each arrival rate of ``aps`` (1-D arrays of one length)."""

    mode: ModeName
    aps: np.ndarray  # agents/s
    ttft_s: np.ndarray  # inf where beyond
    tpot_s: np.ndarray  # inf where beyond
    agent_jct_s: np.ndarray  # turns x (TTFT + generated x TPOT + tool latency); inf where beyond
    kv_working_set_gbyte: np.ndarray  # Little's law (paper 2.5); inf where beyond
    utilization: np.ndarray  # the busiest link's: turns/s over the saturated turns/s
    beyond: np.ndarray  # bool: at or over the saturated throughput, or the queue unstable
    turns: float  # mean turns per agent
    saturated_turns_per_s: float  # the mode's saturated throughput
    # With a store of finite size: the share of the cached context the mode reads
    # (outcomes/read_choice.py); None without a store.
    read_share: float | None = None

    @property
    def turns_per_s(self) -> np.ndarray:
        return self.aps * self.turns

    @property
    def capacity_aps(self) -> float:
        """The arrival rate at which the busiest link saturates (agents/s)."""
        return self.saturated_turns_per_s / self.turns

    def reason(self, i: int) -> str | None:
        """Why the rate at index ``i`` is beyond capacity, in a sentence (None: it is not)."""
        if not bool(self.beyond[i]):
            return None
        aps, lam, t = float(self.aps[i]), float(self.turns_per_s[i]), self.saturated_turns_per_s
        rate = f"rate {aps:.4g} agents/s = {lam:.4g} turns/s"
        if lam >= t:
            return f"beyond capacity ({rate} >= saturated {t:.4g} turns/s)"
        # Below the saturated throughput the busiest prefill GPU's queue can still be unstable
        # (its share of the turns above what its batch serves): the queue's own limit.
        return (
            f"beyond capacity ({rate}, below the saturated {t:.4g} turns/s, but the busiest "
            "prefill GPU's batch queue is unstable)"
        )

    def reasons(self) -> list[str | None]:
        return [self.reason(i) for i in range(self.aps.size)]


def rate_points(
    sc: Scenario, mode: ModeName, aps: np.ndarray, percentiles: SloPercentiles | None = None
) -> RatePoints:
    """TTFT, TPOT, agent JCT, KV working set and utilization of ``sc``'s cluster in ``mode`` at
    each arrival rate of ``aps`` (agents/s, finite and >= 0; any shape, flattened). Raises
    InfeasibleError where the cluster cannot run in the mode (as ``size`` says), ValueError
    for a negative or non-finite rate."""
    rates = np.atleast_1d(np.asarray(aps, dtype=np.float64)).ravel()
    if not (np.isfinite(rates).all() and (rates >= 0).all()):
        raise ValueError("arrival rates must be finite and >= 0")
    sc = read_scenario(sc, mode)  # with a store of finite size, what the mode reads of it
    sat, t_max = runnable(sc, mode)
    # The queue of one cluster; ``at`` broadcasts its one-entry arrays over the rates.
    q = online_queue(sc, sat.assembly, sat.solution)
    # TTFT and TPOT as the SLOs hold them (means, or ``percentiles``); the agent's lifetime and
    # the working set by Little's law from the means.
    mean_ttft, mean_tpot = q.at(rates)
    ttft, tpot = (mean_ttft, mean_tpot) if percentiles is None else q.at(rates, percentiles)
    lam = rates * q.turns
    beyond = (lam >= t_max) | ~(np.isfinite(ttft) & np.isfinite(tpot))
    ttft = np.where(beyond, math.inf, ttft)
    tpot = np.where(beyond, math.inf, tpot)
    agent = np.asarray(
        agent_time_s(
            sc, np.where(beyond, math.inf, mean_ttft), np.where(beyond, math.inf, mean_tpot)
        ),
        dtype=np.float64,
    )
    working = np.asarray(kv_working_set_gbyte(sc, rates, agent), dtype=np.float64)
    return RatePoints(
        mode=mode,
        aps=rates,
        ttft_s=ttft,
        tpot_s=tpot,
        agent_jct_s=agent,
        kv_working_set_gbyte=np.where(beyond, math.inf, working),
        utilization=lam / t_max,
        beyond=beyond,
        turns=sc.turn_demand.trajectory_turns.mean,
        saturated_turns_per_s=t_max,
        read_share=sc.read_share,
    )


@record
class RateReport:
    """Every mode of a scenario at the same arrival rates (``size --aps``, ``--aps-curve``):
    each mode that runs the cluster, and why the others cannot."""

    scenario: Scenario
    config: ServingConfig  # the SLOs a report compares against (the model does not use them)
    aps: np.ndarray
    modes: dict[ModeName, RatePoints]
    infeasible: dict[ModeName, str] = field(default_factory=dict)

    def slo_met(self, mode: ModeName) -> np.ndarray:
        """Per rate: both SLOs met (never beyond capacity)."""
        p = self.modes[mode]
        return (p.ttft_s <= self.config.ttft_slo_s) & (p.tpot_s <= self.config.tpot_slo_s)


def rate_report(
    sc: Scenario,
    cfg: ServingConfig,
    aps: np.ndarray,
    modes: tuple[ModeName, ...] = REPORT_MODES,
) -> RateReport:
    """``rate_points`` of every mode that runs the cluster, and why the others cannot; when
    none runs, the error of the least demanding mode (the last), as ``serving.evaluate``."""
    rates = np.atleast_1d(np.asarray(aps, dtype=np.float64)).ravel()
    out: dict[ModeName, RatePoints] = {}
    infeasible: dict[ModeName, str] = {}
    last: InfeasibleError | None = None
    for m in modes:
        try:
            out[m] = rate_points(sc, m, rates, cfg.slo_percentiles)
        except InfeasibleError as exc:
            last = exc
            infeasible[m] = exc.detail
    if not out and last is not None:
        raise InfeasibleError(f"no mode can run this cluster: {last.detail}", field=last.field)
    return RateReport(sc, cfg, rates, out, infeasible)
