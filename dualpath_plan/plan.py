"""One place that turns profile ids into a solved scenario; the CLI and Python users call it.

from dualpath_plan.plan import Scenario
result = Scenario.from_ids(registry, model="deepseek-v3.2", workload="paper-64k",
                           node="dualpath-hopper", prefill_nodes=2, decode_nodes=4).solve()
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from dualpath_plan.physics.cluster import (
    DecodeCapacity,
    Scheduler,
    build_cluster,
    demand_means,
    side_caps,
)
from dualpath_plan.physics.links import Cluster, Demand, PathOptions
from dualpath_plan.physics.workload import TurnDemand, workload_demand
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.profiles.schemas import (
    GpuProfile,
    ModelProfile,
    NodeProfile,
    StorageProfile,
    WorkloadProfile,
)
from dualpath_plan.solvers.bounds import Bounds, pd_bounds
from dualpath_plan.solvers.closed_form import MODES, Mode, Solution, solve

if TYPE_CHECKING:  # the LP (scipy.optimize) is imported only where it is used: start-up time
    from dualpath_plan.solvers.lp import LPProblem, LPSolution

DEFAULTS = {
    "model": "deepseek-v3.2",
    "workload": "paper-64k",
    "node": "dualpath-hopper",
    "storage": "3fs",
    "prefill_nodes": 2,
    "decode_nodes": 4,
}


@dataclass(frozen=True)
class Scenario:
    model: ModelProfile
    workload: WorkloadProfile
    turn_demand: TurnDemand
    prefill_node: NodeProfile
    prefill_gpu: GpuProfile
    decode_node: NodeProfile
    decode_gpu: GpuProfile
    storage: StorageProfile | None
    prefill_nodes: int
    decode_nodes: int
    options: PathOptions = field(default_factory=PathOptions)
    scheduler: Scheduler = field(default_factory=Scheduler)
    tpot_slo_s: float | None = None

    @classmethod
    def from_ids(
        cls,
        registry: Registry,
        *,
        model: str = DEFAULTS["model"],  # type: ignore[assignment]
        workload: str = DEFAULTS["workload"],  # type: ignore[assignment]
        node: str = DEFAULTS["node"],  # type: ignore[assignment]
        prefill_node: str | None = None,
        decode_node: str | None = None,
        gpu: str | None = None,
        storage: str | None = DEFAULTS["storage"],  # type: ignore[assignment]
        prefill_nodes: int = DEFAULTS["prefill_nodes"],  # type: ignore[assignment]
        decode_nodes: int = DEFAULTS["decode_nodes"],  # type: ignore[assignment]
        options: PathOptions = PathOptions(),
        scheduler: Scheduler = Scheduler(),
        tpot_slo_s: float | None = None,
    ) -> Scenario:
        m = registry.model(model)
        w = registry.workload(workload)
        pn = registry.node(prefill_node or node)
        dn = registry.node(decode_node or node)
        pg = registry.gpu(gpu or pn.gpu)
        dg = registry.gpu(gpu or dn.gpu)
        return cls(
            model=m,
            workload=w,
            turn_demand=workload_demand(m, w, registry.origins.get(("workload", w.id))),
            prefill_node=pn,
            prefill_gpu=pg,
            decode_node=dn,
            decode_gpu=dg,
            storage=registry.storage(storage) if storage else None,
            prefill_nodes=prefill_nodes,
            decode_nodes=decode_nodes,
            options=options,
            scheduler=scheduler,
            tpot_slo_s=tpot_slo_s,
        )

    @property
    def demand(self) -> Demand:
        return demand_means(self.turn_demand)

    def cluster(self) -> tuple[Cluster, DecodeCapacity]:
        return build_cluster(
            model=self.model,
            demand=self.turn_demand,
            prefill_node=self.prefill_node,
            prefill_gpu=self.prefill_gpu,
            decode_node=self.decode_node,
            decode_gpu=self.decode_gpu,
            prefill_nodes=self.prefill_nodes,
            decode_nodes=self.decode_nodes,
            storage=self.storage,
            options=self.options,
            scheduler=self.scheduler,
            tpot_slo_s=self.tpot_slo_s,
        )

    def solve(self, modes: tuple[Mode, ...] = MODES) -> ScenarioResult:
        from dualpath_plan.solvers.lp import LPProblem, solve_lp

        cluster, decode = self.cluster()
        demand = self.demand
        closed = {m: solve(cluster, demand, m, self.options) for m in modes}
        lp = {m: solve_lp(LPProblem.from_cluster(cluster, demand), m, self.options) for m in modes}
        return ScenarioResult(self, cluster, decode, closed, lp)

    def bounds(self) -> Bounds:
        """P/D bounds depend only on per-node capacities and the demand's byte ratios."""
        pe = side_caps(self.prefill_node, self.prefill_gpu, self.model, self.options)
        de = side_caps(self.decode_node, self.decode_gpu, self.model, self.options)
        one, inf = np.float64(1.0), np.float64(np.inf)
        cluster = Cluster(
            prefill_nodes=one,
            decode_nodes=one,
            pe=pe,
            de=de,
            decode_tokens_per_s=one,
            storage_read=inf,
            storage_write=inf,
        )
        return pd_bounds(cluster, self.demand, self.options)


@dataclass(frozen=True)
class ScenarioResult:
    scenario: Scenario
    cluster: Cluster
    decode: DecodeCapacity
    closed_form: dict[Mode, Solution]
    lp: dict[Mode, LPSolution]


def heterogeneous_problem(
    registry: Registry,
    *,
    model: str,
    classes: list[tuple[str, float]],
    prefill_groups: list[tuple[str, int]],
    decode_groups: list[tuple[str, int]],
    storage: str | None,
    options: PathOptions = PathOptions(),
) -> LPProblem:
    """Several node groups per side and several workload classes, for the LP."""
    from dualpath_plan.physics.cluster import check_weights_fit, decode_capacity
    from dualpath_plan.solvers.lp import Group, LPProblem, WorkClass

    m = registry.model(model)
    total = sum(w for _, w in classes)
    demands = []
    for wid, weight in classes:
        w = registry.workload(wid)
        td = workload_demand(m, w, registry.origins.get(("workload", w.id)))
        demands.append((wid, weight / total, td))

    def groups(spec: list[tuple[str, int]], side: str) -> list[Group]:
        out = []
        for k, (nid, count) in enumerate(spec):
            node = registry.node(nid)
            gpu = registry.gpu_of(node)
            check_weights_fit(m, node, gpu, count, side)
            out.append(
                Group(
                    f"{nid}#{k}" if len(spec) > 1 else nid,
                    float(count),
                    side_caps(node, gpu, m, options),
                )
            )
        return out

    pre = groups(prefill_groups, "prefill")
    dec = groups(decode_groups, "decode")
    rates = []
    for _, _, td in demands:
        row = []
        for nid, count in decode_groups:
            node = registry.node(nid)
            cap = decode_capacity(
                m,
                node,
                registry.gpu_of(node),
                count,
                td.mean(td.context_tokens),
                td.mean(td.generated_tokens),
                options,
            )
            row.append(cap.tokens_per_s)
        rates.append(row)
    st = registry.storage(storage) if storage else None
    limit = st is not None and options.storage_limit
    return LPProblem(
        prefill=pre,
        decode=dec,
        classes=[WorkClass(wid, share, demand_means(td)) for wid, share, td in demands],
        decode_tokens_per_s=rates,
        storage_read=st.aggregate_read_gbyte_s * 1e9 if limit and st else float("inf"),
        storage_write=st.aggregate_write_gbyte_s * 1e9 if limit and st else float("inf"),
    )
