"""P/D-ratio recommendation: every split of a budget, per mode, ranked by an objective.

Candidates are the maximal splits of the budget: P, D >= 1 with cost(P, D) within the budget
and no room for one more node of either kind (a node-count budget is a cost of 1 per node, a
GPU budget a node's GPU count). Each is evaluated with the full outcome model, all at once
(:func:`evaluate_each`, each split as :func:`evaluate_mode` gives it). Phases (workloads with
weights, e.g. an RL run whose appended lengths change) get a ratio each, and the gain of
re-balancing is measured against the best static ratio over all phases.
"""

from __future__ import annotations

import math
from dataclasses import field, replace

from dualpath_plan.errors import InfeasibleError, PlanInputError
from dualpath_plan.frozen import record
from dualpath_plan.outcomes.cost import (
    PlanCost,
    node_usd_per_hour,
    plan_cost,
    plan_store_nodes,
    priced,
)
from dualpath_plan.outcomes.objectives import Objective, objective_of
from dualpath_plan.outcomes.paths import bottleneck_free_range
from dualpath_plan.outcomes.serving import (
    ModeOutcome,
    OutcomeMode,
    evaluate_each,
    unreachable_reason,
)
from dualpath_plan.outcomes.uncertainty import OutcomeIntervals, answer_intervals
from dualpath_plan.physics.links import link
from dualpath_plan.physics.modes import REPORT_MODES
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.profiles.schemas import hourly_price
from dualpath_plan.scenario.bundle import Scenario
from dualpath_plan.scenario.spec import MAX_SIDE_NODES, ScenarioSpec, ServingConfig
from dualpath_plan.units import shares

# What recommend ranks splits by (outcomes/objectives.py: one vocabulary with sweep).
OBJECTIVES: tuple[Objective, ...] = ("jct_s", "aps", "throughput_per_gpu", "cost")
MAX_SPLITS = 4096


@record
class Budget:
    nodes: int | None = None
    gpus: int | None = None
    cost: float | None = None  # $/h with per-node $/h (None: the profiles' prices)
    prefill_node_cost: float | None = None
    decode_node_cost: float | None = None
    # The store's $/h taken from a cost budget before the nodes (issue 32; see priced()).
    store_cost: float = 0.0

    def validate(self) -> None:
        given = [v for v in (self.nodes, self.gpus, self.cost) if v is not None]
        if len(given) != 1:
            raise PlanInputError(
                "give exactly one of --budget-nodes, --budget-gpus, --budget-cost",
                field="--budget-nodes",
            )
        for name, v in (
            ("--budget-nodes", self.nodes),
            ("--budget-gpus", self.gpus),
            ("--budget-cost", self.cost),
            ("--prefill-node-cost", self.prefill_node_cost),
            ("--decode-node-cost", self.decode_node_cost),
        ):
            if v is not None and not (math.isfinite(v) and v > 0):
                raise PlanInputError(f"expected a finite number > 0, got {v!r}", field=name)

    def describe(self, gpus_p: int, gpus_d: int) -> str:
        """The budget in words: "10 nodes", "80 GPUs", or a cost and the per-node costs."""
        if self.nodes is not None:
            return f"{self.nodes:,} nodes"
        if self.gpus is not None:
            per = f"{gpus_p}" if gpus_p == gpus_d else f"{gpus_p} prefill, {gpus_d} decode"
            return f"{self.gpus:,} GPUs ({per} per node)"
        store = f", the store {self.store_cost:g}" if self.store_cost else ""
        return (
            f"cost {self.cost:g} (a prefill node {self.prefill_node_cost or 1.0:g}, a decode "
            f"node {self.decode_node_cost or 1.0:g}{store})"
        )

    @property
    def option(self) -> str:
        """The option the budget was given with (errors about it name it)."""
        if self.nodes is not None:
            return "--budget-nodes"
        return "--budget-gpus" if self.gpus is not None else "--budget-cost"

    def splits(self, gpus_p: int, gpus_d: int) -> list[tuple[int, int]]:
        if self.nodes is not None:
            cp, cd, total = 1.0, 1.0, float(self.nodes)
        elif self.gpus is not None:
            cp, cd, total = float(gpus_p), float(gpus_d), float(self.gpus)
        else:
            cp, cd = self.prefill_node_cost or 1.0, self.decode_node_cost or 1.0
            total = float(self.cost or 0) - self.store_cost
        if total / cp > 4 * MAX_SPLITS:
            raise PlanInputError(
                f"a budget of {total:g} allows more than {MAX_SPLITS:,} splits; "
                "use sweep for larger grids",
                field=self.option,
            )
        if (total - cp) / cd > MAX_SIDE_NODES:  # beside the one prefill node every split has
            raise PlanInputError(
                f"a budget of {total:g} buys more than {MAX_SIDE_NODES:,} decode nodes "
                "(the most -D takes)",
                field=self.option,
            )
        out = []
        # Relative to the budget: the same splits at any scale of the costs (an absolute
        # 1e-9 let a budget of 1e-30 count prefill nodes of 1e-31 without end).
        eps = 1e-9 * total
        p = 1
        while cp * p + cd <= total + eps:
            d = math.floor((total - cp * p) / cd + 1e-9)
            # Maximal: no room for one more node of either kind.
            if cp * (p + 1) + cd * d > total + eps and cp * p + cd * (d + 1) > total + eps:
                out.append((p, d))
            p += 1
        return out


def priced_budget(sc: Scenario, budget: Budget, cfg: ServingConfig, store_cost: float) -> Budget:
    """A cost budget in $/h with each node's $/h: the flag where given, else the profile's
    (its price, and its power for owned nodes, outcomes/cost.py), and ``store_cost`` taken
    from it first. A node with no price and no flag is refused naming both."""
    if budget.cost is None:
        return budget
    costs = []
    for flag, node, given in (
        ("--prefill-node-cost", sc.prefill_node, budget.prefill_node_cost),
        ("--decode-node-cost", sc.decode_node, budget.decode_node_cost),
    ):
        if given is None:
            given = node_usd_per_hour(node, cfg.pue, cfg.power_price)[0]
            if given is None:
                raise PlanInputError(
                    f"node '{node.id}' has no price (price_usd_per_hour, or capital_usd with "
                    f"amortization_years, and power_w with --power-price): give {flag}",
                    field="--budget-cost",
                )
        costs.append(given)
    return replace(
        budget, prefill_node_cost=costs[0], decode_node_cost=costs[1], store_cost=store_cost
    )


@record
class Candidate:
    prefill_nodes: int
    decode_nodes: int
    gpus: int
    # P/D inside the bottleneck-free range of eq. (9) and feasible in some mode: a split where
    # the weights do not fit, or that no mode reaches, is never called bottleneck-free.
    bottleneck_free: bool
    modes: dict[OutcomeMode, ModeOutcome | None]  # None: infeasible in that mode
    # Why a mode is infeasible at this split (the error size would give), per mode.
    reasons: dict[OutcomeMode, str] = field(default_factory=dict)
    # Each feasible mode's cost (outcomes/cost.py); empty where no profile has a price.
    costs: dict[OutcomeMode, PlanCost] = field(default_factory=dict)

    @property
    def reason(self) -> str:
        """Why the split runs in no mode (the first mode's reason), or ''."""
        return "" if self.feasible else next(iter(self.reasons.values()), "")

    @property
    def feasible(self) -> bool:
        return any(o is not None for o in self.modes.values())

    @property
    def ratio(self) -> float:
        return self.prefill_nodes / self.decode_nodes


def score(o: ModeOutcome, gpus: int, objective: Objective, cost: PlanCost | None = None) -> float:
    """Higher is better; the cost objective: the fewest $ per agent served online."""
    if objective == "cost":
        per_agent = None if cost is None else cost.usd_per_agent
        return -math.inf if per_agent is None else -per_agent
    if objective == "jct_s":
        return -o.jct_s
    if objective == "aps":
        return o.aps
    return o.throughput_turns_per_s / gpus


@record
class Recommendation:
    mode: OutcomeMode
    candidate: Candidate
    why: str


@record
class RecommendReport:
    scenario: Scenario
    objective: Objective
    candidates: list[Candidate]
    recommended: dict[OutcomeMode, Recommendation]
    pd_min: float
    pd_max: float
    budget: Budget
    config: ServingConfig
    # Modes that give the same outcome at every candidate (within COINCIDE_REL), in mode
    # order, each group of two or more: one line in a chart, "even = dualpath" in its label.
    coinciding: tuple[tuple[OutcomeMode, ...], ...] = ()
    # Each mode's outcome at its recommended split, with the calibration's 95% interval.
    intervals: OutcomeIntervals | None = None
    # Modes that run but that no split serves under the objective (APS 0 at every split: no
    # arrival rate meets the SLOs), each with why at its highest-throughput split: they get
    # no recommendation (a split "recommended" for 0 agents/s would be picked by order).
    unserved: dict[OutcomeMode, str] = field(default_factory=dict)

    def label(self, mode: OutcomeMode) -> str:
        """A mode's name, or the names of the modes it coincides with ("even = dualpath")."""
        for group in self.coinciding:
            if mode in group:
                return " = ".join(group)
        return mode

    def drawn(self) -> list[OutcomeMode]:
        """The modes to draw: the first of each coinciding group stands for the group."""
        modes = list(self.candidates[0].modes)
        later = {m for g in self.coinciding for m in g[1:]}
        return [m for m in modes if m not in later]


# Two modes coincide when throughput, JCT and APS agree within this (relative) at every
# candidate and they are infeasible at the same ones.
COINCIDE_REL = 1e-9


def _same(a: ModeOutcome | None, b: ModeOutcome | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return all(
        math.isclose(x, y, rel_tol=COINCIDE_REL, abs_tol=0.0) or x == y
        for x, y in (
            (a.throughput_turns_per_s, b.throughput_turns_per_s),
            (a.jct_s, b.jct_s),
            (a.aps, b.aps),
        )
    )


def coinciding_modes(
    cands: list[Candidate], modes: tuple[OutcomeMode, ...]
) -> tuple[tuple[OutcomeMode, ...], ...]:
    """Groups of two or more modes with the same outcome at every candidate, in mode order."""
    groups: list[list[OutcomeMode]] = []
    for m in modes:
        for g in groups:
            if all(_same(c.modes[g[0]], c.modes[m]) for c in cands):
                g.append(m)
                break
        else:
            groups.append([m])
    return tuple(tuple(g) for g in groups if len(g) > 1)


def _evaluate(
    sc: Scenario,
    splits: list[tuple[int, int]],
    cfg: ServingConfig,
    modes: tuple[OutcomeMode, ...],
    pd_min: float,
    pd_max: float,
) -> list[Candidate]:
    out = []
    # Every split's modes at once, each as evaluate_mode gives it alone (serving.evaluate_each).
    trials = [replace(sc, prefill_nodes=p, decode_nodes=d) for p, d in splits]
    for (p, d), found in zip(splits, evaluate_each(trials, modes, cfg), strict=True):
        results: dict[OutcomeMode, ModeOutcome | None] = {}
        reasons: dict[OutcomeMode, str] = {}
        for m, got in found.items():
            if isinstance(got, InfeasibleError):
                results[m] = None
                reasons[m] = got.detail
            else:
                results[m] = got
        gpus = p * sc.prefill_node.gpus_per_node + d * sc.decode_node.gpus_per_node
        feasible = any(o is not None for o in results.values())
        free = feasible and bool(pd_min <= p / d <= pd_max)
        costs = {}
        if priced(sc):
            at = replace(sc, prefill_nodes=p, decode_nodes=d)
            costs = {m: plan_cost(at, o, cfg) for m, o in results.items() if o is not None}
        out.append(Candidate(p, d, gpus, free, results, reasons, costs))
    return out


def _why(cands: list[Candidate], best: Candidate, mode: OutcomeMode) -> str:
    """What binds at the recommended split and on each side of it."""
    by = {(c.prefill_nodes, c.decode_nodes): c for c in cands}
    here = best.modes[mode]
    assert here is not None
    what = "; ".join(link(n).description for n in here.binding)
    parts = [f"{best.prefill_nodes}P{best.decode_nodes}D is bound by {here.bottleneck} ({what})"]
    ordered = sorted(by)
    k = ordered.index((best.prefill_nodes, best.decode_nodes))
    for j, side in ((k - 1, "fewer prefill nodes"), (k + 1, "more prefill nodes")):
        if 0 <= j < len(ordered):
            o = by[ordered[j]].modes[mode]
            if o is not None:
                p, d = ordered[j]
                parts.append(f"with {side} ({p}P{d}D) {o.bottleneck} binds")
    return "; ".join(parts)


def recommend(
    sc: Scenario,
    budget: Budget,
    cfg: ServingConfig,
    objective: Objective,
    modes: tuple[OutcomeMode, ...] = REPORT_MODES,
) -> RecommendReport:
    budget.validate()
    objective = objective_of(objective, OBJECTIVES)
    if objective == "cost" and not priced(sc):
        raise PlanInputError(
            "ranks splits by $ per agent: no profile of the scenario has a price "
            "(price_usd_per_hour, or capital_usd with amortization_years)",
            field="--objective",
        )
    if budget.cost is not None:
        # The store comes out of the budget first: --storage-nodes N as given, else the
        # largest store a split of the whole budget needs (each sized at its own rate).
        budget = priced_budget(sc, budget, cfg, 0.0)
        first = _store_cost(sc, cfg, budget, modes)
        budget = priced_budget(sc, budget, cfg, first)
    splits = budget.splits(sc.prefill_node.gpus_per_node, sc.decode_node.gpus_per_node)
    if len(splits) > MAX_SPLITS:
        raise PlanInputError(
            f"the budget allows {len(splits):,} splits; at most {MAX_SPLITS:,} "
            "are evaluated (use sweep for larger grids)",
            field=budget.option,
        )
    if not splits:
        store = f" beside the store's {budget.store_cost:g} $/h" if budget.store_cost else ""
        raise InfeasibleError(
            f"the budget does not buy one prefill and one decode node{store}",
            field=budget.option,
        )
    b = bottleneck_free_range(sc)
    free = bool(b.feasible)
    pd_min, pd_max = (float(b.pd_min), float(b.pd_max)) if free else (math.nan, math.nan)
    cands = _evaluate(sc, splits, cfg, modes, pd_min, pd_max)
    recommended = {}
    unserved: dict[OutcomeMode, str] = {}
    for m in modes:
        feasible = [c for c in cands if c.modes[m] is not None]
        if not feasible:
            continue
        if objective == "cost" and any(not c.costs[m].known for c in feasible):
            why = next(c.costs[m].unknown for c in feasible if not c.costs[m].known)
            raise PlanInputError(f"ranks splits by $ per agent: {why}", field="--objective")
        best = max(
            feasible,
            key=lambda c: score(c.modes[m], c.gpus, objective, c.costs.get(m)),  # type: ignore[arg-type]
        )
        o = best.modes[m]
        assert o is not None
        if objective in ("aps", "cost") and not o.aps > 0:
            fastest = max(feasible, key=lambda c: c.modes[m].throughput_turns_per_s)  # type: ignore[union-attr]
            at = fastest.modes[m]
            assert at is not None
            why = unreachable_reason(at, cfg, named=False)
            unserved[m] = (
                f"no split of the budget meets the SLOs (APS 0 at every split; at "
                f"{fastest.prefill_nodes}P{fastest.decode_nodes}D {why})"
            )
            continue
        recommended[m] = Recommendation(m, best, _why(feasible, best, m))
    if not recommended and not unserved:
        raise InfeasibleError(
            "no split of the budget is feasible (the model does not fit "
            "on either side); raise the budget",
            field=budget.option,
        )
    return RecommendReport(
        sc,
        objective,
        cands,
        recommended,
        pd_min,
        pd_max,
        budget,
        cfg,
        coinciding_modes(cands, modes),
        answer_intervals(
            sc,
            cfg,
            {
                m: (rec.candidate.prefill_nodes, rec.candidate.decode_nodes, o)
                for m, rec in recommended.items()
                if (o := rec.candidate.modes[m]) is not None
            },
        ),
        unserved,
    )


def _store_cost(
    sc: Scenario, cfg: ServingConfig, budget: Budget, modes: tuple[OutcomeMode, ...]
) -> float:
    """The store's $/h a cost budget pays first (recommend): --storage-nodes N's, else the
    largest of the stores the maximal splits of the whole budget need, each sized at its
    own rate (outcomes/cost.py), so that every split of the rest runs with its store within
    the budget; 0 without a store or a store price."""
    st = sc.storage
    if st is None or hourly_price(st) is None:
        return 0.0
    each = node_usd_per_hour(st, cfg.pue, cfg.power_price)[0]
    if each is None:
        return 0.0
    if sc.store is not None:
        return st.storage_nodes * each
    splits = budget.splits(sc.prefill_node.gpus_per_node, sc.decode_node.gpus_per_node)
    if not splits or len(splits) > MAX_SPLITS:
        return 0.0  # recommend says why about the splits themselves
    nodes = 0
    trials = [replace(sc, prefill_nodes=p, decode_nodes=d) for p, d in splits]
    for trial, found in zip(trials, evaluate_each(trials, modes, cfg), strict=True):
        for got in found.values():
            if not isinstance(got, InfeasibleError):
                nodes = max(nodes, plan_store_nodes(trial, got, cfg.agents, cfg.max_utilization))
    return nodes * each


@record
class PhasePlan:
    phases: list[tuple[str, float, Recommendation]]  # workload, weight, best split
    static: Candidate | None  # the best single split over all phases (None: see unserved)
    static_score: float
    rebalanced_score: float
    # Phases no split serves under the objective (APS 0: no arrival rate meets the SLOs),
    # with why: the run then serves no agents/s at any split or split per phase, so there is
    # no static split and no gain to give.
    unserved: dict[str, str] = field(default_factory=dict)

    @property
    def gain(self) -> float | None:
        """How much better re-balancing per phase is than the best static ratio (x); None
        where a phase is unserved."""
        if self.static is None:
            return None
        if self.static_score == 0:
            return 1.0
        if self.static_score < 0:  # JCT: scores are negative times
            return self.static_score / self.rebalanced_score
        return self.rebalanced_score / self.static_score


def phase_plan(
    registry: Registry,
    spec: ScenarioSpec,
    phases: list[tuple[str, float]],
    budget: Budget,
    cfg: ServingConfig,
    objective: Objective,
    mode: OutcomeMode = "dualpath",
) -> PhasePlan:
    """A ratio per phase, and the gain over the best static ratio. Phases combine as work
    done in sequence: total time = sum of weight x time (JCT objective), effective throughput
    = 1 / sum of weight / throughput (the others)."""
    if objective == "cost":
        raise PlanInputError(
            "phases are combined by time or throughput; rank them by jct_s, aps or "
            "throughput_per_gpu",
            field="--objective",
        )
    share = shares([w for _, w in phases])
    for wid, _ in phases:
        if wid not in registry.ids("workload"):
            known = ", ".join(registry.ids("workload"))
            raise PlanInputError(f"unknown workload {wid!r}; known: {known}", field="--phase")
    reports = []
    for (wid, _), w in zip(phases, share, strict=True):
        sc = Scenario.from_spec(registry, spec.with_(workload=wid))
        reports.append((wid, w, recommend(sc, budget, cfg, objective, (mode,))))
    unserved = {wid: rep.unserved[mode] for wid, _, rep in reports if mode in rep.unserved}
    if unserved:
        served = [(wid, w, rep.recommended[mode]) for wid, w, rep in reports if wid not in unserved]
        return PhasePlan(served, None, 0.0, 0.0, unserved)
    splits = [(c.prefill_nodes, c.decode_nodes) for c in reports[0][2].candidates]

    def combined(values: list[tuple[float, float]]) -> float:
        if objective == "jct_s":
            return -sum(w * v for w, v in values)  # v: JCT
        return 1.0 / sum(w / v for w, v in values) if all(v > 0 for _, v in values) else 0.0

    def metric(o: ModeOutcome, gpus: int) -> float:
        if objective == "jct_s":
            return o.jct_s
        return o.aps if objective == "aps" else o.throughput_turns_per_s / gpus

    best_static, best_val = None, -math.inf
    for k, _ in enumerate(splits):
        vals = []
        for _, w, rep in reports:
            o = rep.candidates[k].modes[mode]
            if o is None:
                break
            vals.append((w, metric(o, rep.candidates[k].gpus)))
        else:
            v = combined(vals)
            if v > best_val:
                best_static, best_val = reports[0][2].candidates[k], v
    if best_static is None:
        raise InfeasibleError("no single split is feasible in every phase", field="--phase")
    per_phase = []
    vals = []
    for wid, w, rep in reports:
        r = rep.recommended[mode]
        o = r.candidate.modes[mode]
        assert o is not None
        per_phase.append((wid, w, r))
        vals.append((w, metric(o, r.candidate.gpus)))
    return PhasePlan(per_phase, best_static, best_val, combined(vals))
