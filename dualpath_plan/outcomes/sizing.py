"""Inverse sizing: the smallest cluster (node count, P/D split) that meets a target, per mode.

For a total of n nodes every split P + D = n (P, D >= 1) is evaluated and the best kept. More
nodes never lower the best split's throughput or APS (every capacity only rises: the
monotonicity the path model is tested for), so n is found by doubling, capped at the largest
cluster the user allows, and then bisection. A mode that cannot reach the target within it
says why instead of stopping the others.
"""

from __future__ import annotations

import math
from dataclasses import field, replace
from typing import Literal

import numpy as np

from dualpath_plan import plausible
from dualpath_plan.errors import InfeasibleError, PlanInputError
from dualpath_plan.formatting import plain
from dualpath_plan.frozen import record
from dualpath_plan.outcomes.cost import PlanCost, plan_cost, priced
from dualpath_plan.outcomes.online import APS_LIMITS
from dualpath_plan.outcomes.read_choice import read_scenario
from dualpath_plan.outcomes.serving import (
    ModeOutcome,
    OutcomeMode,
    evaluate_mode,
    light_load,
    mode_offline,
    offline_jct_s,
)
from dualpath_plan.outcomes.store_size import StoreSize, store_size
from dualpath_plan.outcomes.sweep import evaluate_clusters
from dualpath_plan.physics.modes import REPORT_MODES
from dualpath_plan.scenario.bundle import Scenario
from dualpath_plan.scenario.spec import (
    DEFAULT_MAX_NODES,
    ScenarioSpec,
    ServingConfig,
    check_max_nodes,
)

Target = Literal["aps", "deadline"]


@record
class SizingResult:
    mode: OutcomeMode
    prefill_nodes: int
    decode_nodes: int
    gpus: int
    outcome: ModeOutcome | None  # None: the target is out of reach (see reason)
    reason: str = ""

    @property
    def nodes(self) -> int:
        return self.prefill_nodes + self.decode_nodes

    @property
    def reached(self) -> bool:
        return self.outcome is not None


@record
class SizingReport:
    scenario: Scenario
    spec: ScenarioSpec
    target: Target
    goal: float
    max_nodes: int
    modes: dict[OutcomeMode, SizingResult]
    # --target-aps: per reached mode, the store that serves it (None: not sized, see store_size)
    stores: dict[OutcomeMode, StoreSize | None] = field(default_factory=dict)

    def costs(self) -> dict[OutcomeMode, PlanCost]:
        """Each reached mode's cost, its store the one sized for it (--target-aps) or the
        plan's own (outcomes/cost.py); empty where no profile has a price."""
        if not priced(self.scenario):
            return {}
        out = {}
        for m, s in self.modes.items():
            if s.outcome is None:
                continue
            sc = replace(self.scenario, prefill_nodes=s.prefill_nodes, decode_nodes=s.decode_nodes)
            st = self.stores.get(m)
            out[m] = plan_cost(sc, s.outcome, self.spec.serving, st.nodes if st else None)
        return out


def _best_split(
    sc: Scenario, n: int, mode: OutcomeMode, cfg: ServingConfig, target: Target, goal: float
) -> tuple[int, int, ModeOutcome] | None:
    """The split of ``n`` nodes that serves the target best (the highest APS or the shortest
    JCT; the fewest prefill nodes among equals) and its outcome, where it can reach ``goal``;
    None where no split runs (or, for an APS target, none can reach it or the SLOs). Every
    split is evaluated at once, as a sweep evaluates its points (each split's numbers are
    ``evaluate_mode``'s, INV-18: a search to 1,024 nodes evaluates thousands of splits), the
    online APS only of the splits whose saturated rate reaches the goal (the APS is at most
    the saturated turns/s over an agent's turns); the chosen split's outcome is
    ``evaluate_mode``'s, and where it does not give the number the ranking read, each split
    is evaluated alone instead."""
    P = np.arange(1, n, dtype=np.float64)
    D = n - P
    rows = evaluate_clusters(sc, mode, cfg, P, D, aps=False)
    ok = np.asarray(rows["feasible"], dtype=bool)
    if target == "aps":
        turns = sc.turn_demand.trajectory_turns.mean
        with np.errstate(invalid="ignore"):
            ok &= np.asarray(rows["saturated_turns_per_s"]) / turns >= goal * (1 - 1e-9)
        if not ok.any():
            return None
        P, D = P[ok], D[ok]
        rows = evaluate_clusters(sc, mode, cfg, P, D, aps=True)
        ok = np.asarray(rows["feasible"], dtype=bool)
        ok &= np.asarray(rows["aps_limit"]) != APS_LIMITS.index("unreachable")
        score = np.where(ok, rows["aps"], -np.inf)
    else:
        score = np.where(ok, -np.asarray(rows["jct_s"]), -np.inf)
    if not ok.any():
        return None
    k = int(np.argmax(score))
    p = int(P[k])
    try:
        out = evaluate_mode(replace(sc, prefill_nodes=p, decode_nodes=n - p), mode, cfg)
    except InfeasibleError:
        return _best_split_each(sc, n, mode, cfg, target)
    if (out.aps if target == "aps" else -out.jct_s) != score[k]:
        return _best_split_each(sc, n, mode, cfg, target)
    return p, n - p, out


def _best_split_each(
    sc: Scenario, n: int, mode: OutcomeMode, cfg: ServingConfig, target: Target
) -> tuple[int, int, ModeOutcome] | None:
    """``_best_split`` with each split evaluated alone (``evaluate_mode``)."""
    best: tuple[int, int, ModeOutcome] | None = None
    for p in range(1, n):
        trial = replace(sc, prefill_nodes=p, decode_nodes=n - p)
        try:
            out = evaluate_mode(trial, mode, cfg)
        except InfeasibleError:
            continue  # e.g. the weights do not fit on this side
        if out.aps_limit == "unreachable" and target == "aps":
            continue
        better = best is None or (
            out.aps > best[2].aps if target == "aps" else out.jct_s < best[2].jct_s
        )
        if better:
            best = (p, n - p, out)
    return best


def smallest_cluster(
    sc: Scenario,
    mode: OutcomeMode,
    cfg: ServingConfig,
    *,
    target_aps: float | None = None,
    deadline_s: float | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
) -> SizingResult:
    """The smallest cluster of at most ``max_nodes`` nodes that meets the target in ``mode``;
    a result without an outcome (and with the reason) when none does."""
    target, goal = _target(target_aps, deadline_s)
    check_max_nodes(max_nodes)

    # The best split of the last n tried, met or not (a deadline out of reach says its JCT).
    last: list[tuple[int, int, ModeOutcome] | None] = [None]

    def meets(n: int) -> tuple[int, int, ModeOutcome] | None:
        best = last[0] = _best_split(sc, n, mode, cfg, target, goal)
        if best is None:
            return None
        ok = best[2].aps >= goal if target == "aps" else best[2].jct_s <= goal
        return best if ok else None

    lo, hi = 1, 2
    found = meets(hi)
    while found is None:
        if hi >= max_nodes:
            what = f"{plain(goal)} agents/s" if target == "aps" else f"a JCT of {plain(goal)} s"
            reason = f"no cluster of up to {max_nodes:,} nodes reaches {what}"
            if target == "deadline" and last[0] is not None:
                reason += _jct_floor_note(sc, mode, cfg, last[0], goal)  # hi is max_nodes
            return SizingResult(mode, 0, 0, 0, None, reason)
        lo, hi = hi, min(hi * 2, max_nodes)
        found = meets(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        trial = meets(mid)
        if trial is None:
            lo = mid
        else:
            hi, found = mid, trial
    p, d, out = found
    gpus = p * sc.prefill_node.gpus_per_node + d * sc.decode_node.gpus_per_node
    return SizingResult(mode, p, d, gpus, out)


def _jct_floor_note(
    sc: Scenario,
    mode: OutcomeMode,
    cfg: ServingConfig,
    best: tuple[int, int, ModeOutcome],
    goal: float,
) -> str:
    """Why a deadline is out of reach: the best split of the largest cluster (``best``, as
    ``_best_split`` gave it) and its JCT, and where the agents' own critical path (their turns
    one after another at light load: the JCT at an unbounded throughput, docs/model.md
    section 6) is beyond the deadline, that more nodes do not shorten it (a turn's light-load
    time is a node's, not the cluster's)."""
    p, d, out = best
    at = replace(sc, prefill_nodes=p, decode_nodes=d)
    cycle_min = light_load(at, mode_offline(at, mode, cfg)[0])[1].item()
    floor = float(offline_jct_s(cfg.agents, math.inf, cycle_min, sc.turn_demand.trajectory_turns))
    note = f": the best, {p}P{d}D, takes {out.jct_s:,.0f} s"
    if floor > goal:
        note += (
            f", of which the agents' own critical path (their turns one after another at "
            f"light load) is {floor:,.0f} s: more nodes do not shorten it"
        )
    return note


def _target(target_aps: float | None, deadline_s: float | None) -> tuple[Target, float]:
    if (target_aps is None) == (deadline_s is None):
        raise PlanInputError("give exactly one of --target-aps or --deadline", field="--target-aps")
    target: Target = "aps" if target_aps is not None else "deadline"
    goal = float(target_aps if target_aps is not None else deadline_s)  # type: ignore[arg-type]
    if not (math.isfinite(goal) and goal > 0):
        raise PlanInputError(
            f"expected a finite number > 0, got {goal!r}",
            field="--target-aps" if target == "aps" else "--deadline",
        )
    why = plausible.problem("aps", goal) if target == "aps" else None
    if why is not None:  # 1e308 agents/s was searched for, up to --max-nodes
        raise PlanInputError(why, field="--target-aps")
    return target, goal


def sizing_report(
    sc: Scenario,
    spec: ScenarioSpec,
    *,
    target_aps: float | None = None,
    deadline_s: float | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
    modes: tuple[OutcomeMode, ...] = REPORT_MODES,
) -> SizingReport:
    """The smallest cluster per mode; every mode is reported, reached or not."""
    target, goal = _target(target_aps, deadline_s)
    check_max_nodes(max_nodes)
    cfg = spec.serving
    results = {
        m: smallest_cluster(
            sc, m, cfg, target_aps=target_aps, deadline_s=deadline_s, max_nodes=max_nodes
        )
        for m in modes
    }
    # The store each mode's smallest cluster reads: with a capacity, what the mode chooses to
    # read of it there (read_choice), as the outcome rests on.
    stores = (
        {
            m: store_size(
                read_scenario(
                    replace(sc, prefill_nodes=s.prefill_nodes, decode_nodes=s.decode_nodes), m
                ),
                s.outcome,
                target_aps,
                cfg.max_utilization,
            )
            for m, s in results.items()
            if s.outcome is not None
        }
        if target_aps is not None
        else {}
    )
    return SizingReport(sc, spec, target, goal, max_nodes, results, stores)
