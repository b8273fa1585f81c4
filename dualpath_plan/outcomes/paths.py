"""Both read paths of one configuration (``paths``) and the bottleneck-free range (``bounds``),
from the one assembly: the closed form's optimum with every link's load, capacity and
deratings, the LP's duals on the same problem, and the LP over mixed node groups and workload
classes."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from dualpath_plan.errors import InfeasibleError, PlanInputError
from dualpath_plan.frozen import record
from dualpath_plan.outcomes.limits import LinkLimit, link_limits
from dualpath_plan.outcomes.read_choice import read_scenario
from dualpath_plan.outcomes.serving import runnable
from dualpath_plan.physics.engines import check_weights_fit
from dualpath_plan.physics.modes import MODE_TABLE, ModeName
from dualpath_plan.physics.workload import workload_demand
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.profiles.schemas import WorkloadProfile
from dualpath_plan.scenario.assemble import Assembly, assemble
from dualpath_plan.scenario.bundle import Scenario
from dualpath_plan.scenario.groups import GroupAssembly, NodeGroup, WorkClass, assemble_groups

if TYPE_CHECKING:  # scipy.optimize loads only for commands that solve an LP (start-up time)
    from dualpath_plan.solvers.bounds import Bounds
    from dualpath_plan.solvers.lp import LPSolution


# The mode whose assembly (and scheduler) the bottleneck-free range is taken in: the reports
# name its scheduler.
BOUNDS_MODE: ModeName = "dualpath"


def bottleneck_free_range(sc: Scenario) -> Bounds:
    """The paper's eq. (1)-(9) range for the scenario's nodes: per-node capacities from the
    assembly of the dualpath mode, derated by its scheduler's imbalance as every solver derates
    them (so that no split inside the range has an I/O link binding in sweep or recommend);
    the paper's perfectly balanced reads, and its eq. (9), are ``--scheduler ideal``."""
    from dualpath_plan.solvers.bounds import pd_bounds  # here: size does not need it

    return pd_bounds(assemble(sc, BOUNDS_MODE, 1.0, 1.0))


@record
class PathsResult:
    scenario: Scenario
    mode: ModeName
    assembly: Assembly
    saturated_turns_per_s: float  # the path model's optimum: the most turns/s it sustains
    decode_path_fraction: float
    decode_path_fraction_range: tuple[float, float]
    binding: tuple[str, ...]
    limits: dict[str, LinkLimit]
    lp: LPSolution  # the same problem by linear program: its throughput and duals


def explain_paths(sc: Scenario, mode: ModeName) -> PathsResult:
    """One cluster in one mode: the closed form's optimum and the LP's on the same assembly."""
    from dualpath_plan.solvers.lp import LPProblem, solve_lp

    # The checks and the solve of every outcome of one cluster: refused for size's reason
    # (paths said only "the cluster sustains no turns" where a prefill GPU held no request).
    sc = read_scenario(sc, mode)  # with a store of finite size, what the mode reads of it
    sat, t = runnable(sc, mode)  # type: ignore[arg-type]
    asm, sol = sat.assembly, sat.solution
    return PathsResult(
        scenario=sc,
        mode=mode,
        assembly=asm,
        saturated_turns_per_s=t,
        decode_path_fraction=float(sol.decode_path_fraction),
        decode_path_fraction_range=(float(sol.split_low), float(sol.split_high)),
        binding=tuple(sol.binding()),
        limits=link_limits(asm, sol),
        lp=solve_lp(LPProblem.from_assembly(asm)),
    )


@record
class MixedResult:
    scenario: Scenario
    mode: ModeName
    prefill: list[NodeGroup]
    decode: list[NodeGroup]
    classes: list[WorkClass]
    solution: LPSolution
    assembly: GroupAssembly

    def derated_by(self, link_name: str, group: str) -> tuple[str, ...]:
        """What derates a group's capacity of a link (for the first class: the prefill batch
        and the decode step are the only capacities that depend on the class)."""
        names = [g.name for g in (*self.prefill, *self.decode)]
        sides = [*self.assembly.pe[0], *self.assembly.de[0]]
        for name, part in zip(names, sides, strict=True):
            if name == group and link_name in part.factors:
                return tuple(f.describe() for f in part.factors[link_name])
        return tuple(f.describe() for f in self.assembly.storage_factors.get(link_name, ()))


def explain_mixed(
    registry: Registry,
    sc: Scenario,
    mode: ModeName,
    prefill_groups: list[tuple[str, int]],
    decode_groups: list[tuple[str, int]],
    classes: list[tuple[str, float]],
    gpu: str | None = None,
) -> MixedResult:
    """Several node groups per side and several workload classes, by LP, with the per-node
    capacities of the one assembly. Sides or classes not given are the scenario's own."""
    from dualpath_plan.solvers.lp import LPProblem, solve_lp

    def groups(spec: list[tuple[str, int]], side: str) -> list[NodeGroup]:
        if not spec:
            node = sc.prefill_node if side == "prefill" else sc.decode_node
            g = sc.prefill_gpu if side == "prefill" else sc.decode_gpu
            n = sc.prefill_nodes if side == "prefill" else sc.decode_nodes
            spec_groups = [NodeGroup(node.id, node, g, n)]
        else:
            spec_groups = []
            for k, (nid, count) in enumerate(spec):
                if nid not in registry.ids("node"):
                    raise PlanInputError(
                        f"unknown node profile {nid!r}; known: {', '.join(registry.ids('node'))}",
                        field=f"--{side}-group",
                    )
                node = registry.node(nid)
                name = f"{nid}#{k}" if len(spec) > 1 else nid
                spec_groups.append(NodeGroup(name, node, registry.gpu(gpu or node.gpu), count))
        for grp in spec_groups:
            try:
                check_weights_fit(sc.model, grp.node, grp.gpu, grp.nodes, side)
            except InfeasibleError as exc:
                if not spec:
                    raise  # the spec's own side: -P or -D
                raise InfeasibleError(exc.detail, field=f"--{side}-group") from None
        return spec_groups

    pre = groups(prefill_groups, "prefill")
    dec = groups(decode_groups, "decode")
    # The groups' nodes time their passes with their own engine profiles (the scenario's
    # nodes keep theirs, --engine included).
    extra = {
        g.node.id: registry.engine(g.node.engine)
        for g in pre + dec
        if g.node.engine is not None and sc.engine_for(g.node) is None
    }
    if extra:
        sc = replace(sc, engines=sc.engines + tuple(extra.items()))

    def workload(wid: str) -> WorkloadProfile:
        try:
            return registry.workload(wid)
        except PlanInputError as exc:
            # A class's workload is named by --class, not --workload (which it replaces).
            raise PlanInputError(exc.detail, field="--class") from None

    work = [
        WorkClass(
            wid,
            weight,
            workload_demand(sc.model, w, registry.origins.get(("workload", w.id))),
        )
        for wid, weight in (classes or [(sc.workload.id, 1.0)])
        for w in [workload(wid)]
    ]
    ga = assemble_groups(sc, mode, pre, dec, work)
    for c, row in enumerate(ga.pe + ga.de):
        for part in row:
            if not bool(np.all(part.feasible)):
                what = "one prefill request" if part.side == "pe" else "one decode sequence"
                raise InfeasibleError(
                    f"{what} of class '{work[c % len(work)].name}' does not fit in a group's HBM",
                    field="--class",
                )
    if mode not in MODE_TABLE:
        raise PlanInputError(f"unknown mode {mode!r}", field="--mode")
    return MixedResult(sc, mode, pre, dec, work, solve_lp(LPProblem.from_groups(ga)), ga)
