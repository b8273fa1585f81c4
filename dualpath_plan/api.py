"""The Python API: what the commands do, as functions over typed objects (docs/api.md).

Every function here calls the layer the CLI calls, with the same defaults and the same
errors (``PlanInputError``, and its ``InfeasibleError`` for a cluster that cannot run): a
number from Python is the number the command prints. Inputs are profile registries,
``ScenarioSpec`` (what a user states) and ``Scenario`` (the profiles it resolves to); outputs
are the outcome dataclasses and NumPy arrays, each with ``to_records()`` (a list of flat dicts,
one per row) for pandas or polars.

    import dualpath_plan as dp
    report = dp.evaluate(dp.spec(prefill_nodes=2, decode_nodes=4, agents=512))
    report.modes["dualpath"].jct_s
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np

from dualpath_plan.outcomes.cost import PlanCost, size_costs
from dualpath_plan.outcomes.objectives import Objective
from dualpath_plan.outcomes.paths import PathsResult, explain_paths
from dualpath_plan.outcomes.recommend import Budget, RecommendReport
from dualpath_plan.outcomes.recommend import recommend as _recommend
from dualpath_plan.outcomes.serving import ModeOutcome, OutcomeMode, SizeReport
from dualpath_plan.outcomes.serving import evaluate as _evaluate
from dualpath_plan.outcomes.sizing import SizingReport, sizing_report
from dualpath_plan.outcomes.sweep import Axis, SweepSummary, binding_label, parse_axis, run_sweep
from dualpath_plan.physics.modes import REPORT_MODES
from dualpath_plan.profiles.registry import Overrides, Registry
from dualpath_plan.scenario.bundle import Scenario
from dualpath_plan.scenario.spec import DEFAULT_MAX_NODES, ScenarioSpec, ServingConfig

__all__ = [
    "ModeOutcome",
    "PlanCost",
    "RecommendReport",
    "Scenario",
    "ScenarioSpec",
    "ServingConfig",
    "SizeReport",
    "SizingReport",
    "SweepResult",
    "costs",
    "evaluate",
    "load_profiles",
    "paths",
    "recommend",
    "records",
    "scenario",
    "simulate",
    "size",
    "spec",
    "sweep",
]


def load_profiles(*dirs: str | Path, sets: Sequence[str] = ()) -> Registry:
    """The built-in profiles and those under ``dirs`` (a later folder's profile replaces an
    earlier one of the same kind and id, as ``--profiles``), with ``sets`` applied
    (``"node.snic_efficiency=0.6"``, as ``--set``)."""
    return Registry.load([Path(d) for d in dirs], overrides=Overrides.parse(list(sets)))


def spec(**fields: Any) -> ScenarioSpec:
    """A scenario as a user states it: ``ScenarioSpec``'s fields (``model``, ``workload``,
    ``node``, ``prefill_node``, ``decode_node``, ``prefill_nodes``, ``decode_nodes``,
    ``agents``, ``ttft_slo_s``, ``tpot_slo_s``, ``max_utilization``, ``scheduler``, the store's
    ``storage_capacity="500TB"`` or ``storage_nodes=N``, the site's ``pue`` and
    ``power_price`` ($/kWh) for a plan's cost, ...), validated as the command line's:
    a bad one is a ``PlanInputError`` naming it. ``scenario(spec(...)).store`` is the store's
    capacity against the working set where it changes a number (docs/model.md section 12)."""
    return ScenarioSpec.build(fields)


def scenario(stated: ScenarioSpec | None = None, registry: Registry | None = None) -> Scenario:
    """The profiles a scenario names, resolved: ``stated`` (default: the default scenario) in
    ``registry`` (default: the built-in profiles)."""
    return Scenario.from_spec(
        registry if registry is not None else Registry.load(),
        stated if stated is not None else ScenarioSpec(),
    )


def evaluate(
    stated: ScenarioSpec | None = None,
    registry: Registry | None = None,
    modes: Sequence[OutcomeMode] = REPORT_MODES,
) -> SizeReport:
    """``size``: every mode of one cluster (its offline throughput and JCT, online APS under
    the SLOs, TTFT, TPOT, binding links, decode-path share)."""
    stated = stated if stated is not None else ScenarioSpec()
    return _evaluate(scenario(stated, registry), stated.serving, tuple(modes))


def costs(report: SizeReport | SizingReport) -> dict[OutcomeMode, PlanCost]:
    """What each mode's plan costs (docs/model.md section 13): of one cluster (``evaluate``)
    or of each mode's smallest cluster and the store sized for it (``size``); empty where no
    profile of the scenario has a price."""
    if isinstance(report, SizingReport):
        return report.costs()
    return size_costs(report)


def size(
    stated: ScenarioSpec | None = None,
    registry: Registry | None = None,
    *,
    target_aps: float | None = None,
    deadline_s: float | None = None,
    max_nodes: int = DEFAULT_MAX_NODES,
    modes: Sequence[OutcomeMode] = REPORT_MODES,
) -> SizingReport:
    """``size --target-aps`` / ``size --deadline``: the smallest cluster per mode that serves
    ``target_aps`` agents/s under the SLOs, or finishes the scenario's agents within
    ``deadline_s``."""
    stated = stated if stated is not None else ScenarioSpec()
    return sizing_report(
        scenario(stated, registry),
        stated,
        target_aps=target_aps,
        deadline_s=deadline_s,
        max_nodes=max_nodes,
        modes=tuple(modes),
    )


def recommend(
    stated: ScenarioSpec | None = None,
    registry: Registry | None = None,
    *,
    budget_nodes: int | None = None,
    budget_gpus: int | None = None,
    budget_cost: float | None = None,
    objective: Objective = "jct_s",
    modes: Sequence[OutcomeMode] = REPORT_MODES,
) -> RecommendReport:
    """``recommend``: every P/D split of a budget (nodes, GPUs, or ``budget_cost`` $/h of
    nodes, store and power at the profiles' prices), per mode, ranked by ``objective``
    (``jct_s``, ``aps``, ``throughput_per_gpu`` or ``cost``: $ per agent served). Each
    candidate's ``costs`` holds its cost per mode (docs/model.md section 13)."""
    stated = stated if stated is not None else ScenarioSpec()
    budget = Budget(nodes=budget_nodes, gpus=budget_gpus, cost=budget_cost)
    return _recommend(scenario(stated, registry), budget, stated.serving, objective, tuple(modes))


def paths(
    stated: ScenarioSpec | None = None,
    registry: Registry | None = None,
    mode: OutcomeMode = "dualpath",
) -> PathsResult:
    """``paths``: one cluster's saturated optimum in one mode, every link's capacity and load,
    and the same problem by linear program (its duals)."""
    return explain_paths(scenario(stated, registry), mode)


@dataclass
class SweepResult:
    """Every point of a sweep as columns (NumPy arrays of one length: ``mode``, ``P``, ``D``,
    ``agents``, ``gpus``, ``throughput_turns_per_s``, ``throughput_per_gpu``,
    ``saturated_turns_per_s``, ``jct_s``, ``drain_s``, ``decode_path_fraction``,
    ``bottleneck``, ``feasible``, a column per profile-field axis, and with ``aps`` the APS),
    NaN where a point is infeasible, and the summary ``sweep`` prints (best points per mode)."""

    columns: dict[str, np.ndarray]
    summary: SweepSummary

    def __len__(self) -> int:
        return int(self.columns["point"].size) if "point" in self.columns else 0

    def to_records(self) -> list[dict[str, object]]:
        """One dict per point, its values Python numbers and strings."""
        names = list(self.columns)
        lists = [self.columns[n].tolist() for n in names]
        return [dict(zip(names, row, strict=True)) for row in zip(*lists, strict=True)]


def sweep(
    grid: Mapping[str, str | Sequence[float]],
    stated: ScenarioSpec | None = None,
    registry: Registry | None = None,
    *,
    modes: Sequence[OutcomeMode] = ("dualpath",),
    objective: Objective = "throughput_per_gpu",
    aps: bool = False,
    top: int = 1,
    max_points: int | None = 1_000_000,
) -> SweepResult:
    """``sweep``: every point of a grid over ``P``, ``D``, ``agents`` and any numeric profile
    field (``{"P": "1:8", "node.snic_efficiency": [0.5, 0.9]}``: values as ``--grid`` takes
    them, or a list of numbers), each point what ``size`` gives its cluster. The points are
    kept in memory, so ``max_points`` is a million unless raised."""
    axes: list[Axis] = [
        parse_axis(f"{name}={_values_text(values)}") for name, values in grid.items()
    ]
    chunks: list[dict[str, np.ndarray]] = []
    stated = stated if stated is not None else ScenarioSpec()
    summary = run_sweep(
        registry if registry is not None else Registry.load(),
        stated,
        axes,
        tuple(modes),
        stated.serving,
        objective=objective,
        aps=aps,
        top=top,
        max_points=max_points,
        on_chunk=chunks.append,
    )
    return SweepResult(_columns(chunks), summary)


def _values_text(values: str | Sequence[float]) -> str:
    """An axis's values as ``--grid`` takes them: as given, or a list of numbers joined."""
    return values if isinstance(values, str) else ",".join(repr(float(v)) for v in values)


def _columns(chunks: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """The chunks' public columns laid end to end: a chunk's own (``_``) columns dropped, its
    mode spread over its points and its binding links named."""
    out: dict[str, list[np.ndarray]] = {}
    for rows in chunks:
        n = int(np.size(rows["point"]))
        cols = {k: v for k, v in rows.items() if not k.startswith("_")}
        cols["mode"] = np.full(n, str(np.asarray(rows["mode"])[()]))
        masks = np.asarray(cols.pop("binding_mask"))
        labels = {int(m): binding_label(int(m)) for m in np.unique(masks)}
        cols["bottleneck"] = np.asarray([labels[int(m)] for m in masks], dtype=object)
        for k, v in cols.items():
            out.setdefault(k, []).append(np.broadcast_to(np.asarray(v), (n,)))
    return {k: np.concatenate(v) for k, v in out.items()}


def simulate(
    stated: ScenarioSpec | None = None,
    registry: Registry | None = None,
    *,
    mode: OutcomeMode = "dualpath",
    agents: int | None = None,
    aps: float | None = None,
    seed: int = 0,
    scheduler: str | None = None,
    seeds: int | None = None,
    workers: int | None = 1,
    ray: str | None = None,
) -> Any:
    """``simulate``: the discrete-event simulation of the cluster, offline (``agents`` started
    together, default the scenario's) or online (Poisson arrivals at ``aps``); the
    ``SimResult`` (throughput, JCT, TTFT/TPOT distributions, storage-read balance, ...).
    ``seeds=N`` (``simulate --seeds``): the N runs of seeds ``seed`` to ``seed + N - 1``, a list
    in seed order, on ``workers`` local processes (1: here; None: the machine's cores) or the
    Ray cluster at ``ray``; ``outcomes.sim_plans.mean_ci`` gives a metric's 95% interval."""
    from dualpath_plan.outcomes.executor import make_executor
    from dualpath_plan.outcomes.sim_plans import run_seeds
    from dualpath_plan.outcomes.simulation import simulate as _simulate

    stated = stated if stated is not None else ScenarioSpec()
    cfg = _sim_config(stated, mode, agents, aps, seed, scheduler)
    sc = scenario(stated, registry)
    if seeds is None:
        return _simulate(sc, cfg)
    return run_seeds(sc, cfg, seeds, make_executor(workers, ray))


def _sim_config(
    stated: ScenarioSpec,
    mode: OutcomeMode,
    agents: int | None,
    aps: float | None,
    seed: int,
    scheduler: str | None,
) -> Any:
    from dualpath_plan.outcomes.simulation import SimConfig

    if aps is None and agents is None:
        agents = stated.agents
    return SimConfig(
        mode=mode,
        agents=agents,
        aps=aps,
        seed=seed,
        scheduler=scheduler,  # type: ignore[arg-type]  # checked by SimConfig
    )


def aps_search(
    stated: ScenarioSpec | None = None,
    registry: Registry | None = None,
    *,
    mode: OutcomeMode = "dualpath",
    seed: int = 0,
    seeds: int = 2,
    tolerance: float = 0.02,
    scheduler: str | None = None,
    workers: int | None = 1,
    ray: str | None = None,
) -> Any:
    """``simulate --aps-search``: the highest APS whose SLOs (the spec's, means or
    ``slo_percentile``) hold in the simulation, the mean over ``seeds`` seeds per rate, by
    bisection bracketed by the analytical APS with and without the headroom cap; the
    ``ApsSearch`` (``aps``, ``bracket``, ``points``, ``inside_bracket``, ...)."""
    from dualpath_plan.outcomes.executor import make_executor
    from dualpath_plan.outcomes.sim_plans import search_aps

    stated = stated if stated is not None else ScenarioSpec()
    cfg = _sim_config(stated, mode, None, 1.0, seed, scheduler)
    sc = scenario(stated, registry)
    return search_aps(sc, cfg, stated.serving, make_executor(workers, ray), seeds, tolerance)


def records(outcome: SizeReport | RecommendReport) -> list[dict[str, object]]:
    """Flat rows of a report for a table library: ``size``'s one per mode, ``recommend``'s one
    per split and mode; each outcome's numbers and labels (its per-link limits left out)."""
    if isinstance(outcome, SizeReport):
        return [_mode_row(o) for o in outcome.modes.values()]
    return [
        {"prefill_nodes": c.prefill_nodes, "decode_nodes": c.decode_nodes, **_mode_row(o)}
        for c in outcome.candidates
        for o in c.modes.values()
        if isinstance(o, ModeOutcome)
    ]


def _mode_row(o: ModeOutcome) -> dict[str, object]:
    row: dict[str, object] = {}
    for f in fields(o):
        v = getattr(o, f.name)
        if isinstance(v, bool | int | float | str):
            row[f.name] = v
    row["binding"] = o.bottleneck
    return row
