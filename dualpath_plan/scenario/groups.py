"""The LP's mixed clusters: node groups per side and workload classes, each group's capacities
from the one assembly's :func:`~dualpath_plan.scenario.assemble.side_capacity` (``paths`` with
``--prefill-group``, ``--decode-group`` or ``--class``). Apart from ``assemble``, so that a
command of one homogeneous cluster (``size``) does not define what it never builds."""

from __future__ import annotations

from dualpath_plan.frozen import record
from dualpath_plan.physics.links import Num
from dualpath_plan.physics.modes import MODE_TABLE, Mode, ModeName
from dualpath_plan.physics.workload import TurnDemand
from dualpath_plan.profiles.schemas import GpuProfile, NodeProfile
from dualpath_plan.scenario.assemble import (
    Factor,
    SideCapacity,
    mode_loads,
    side_capacity,
    storage_capacity,
)
from dualpath_plan.scenario.bundle import Scenario


@record
class NodeGroup:
    """Nodes of one kind on one side of a mixed cluster (``--prefill-group NODE:N``)."""

    name: str
    node: NodeProfile
    gpu: GpuProfile
    nodes: int


@record
class WorkClass:
    """A workload class of a mixed cluster with its share of turns (``--class W:WEIGHT``)."""

    name: str
    weight: float
    turns: TurnDemand


@record
class GroupAssembly:
    """A mixed cluster for the LP: per class, every group's side capacity (its prefill batch
    and decode step depend on the class's turns) and the class's loads."""

    mode: Mode
    prefill: list[NodeGroup]
    decode: list[NodeGroup]
    classes: list[WorkClass]
    pe: list[list[SideCapacity]]  # [class][group]
    de: list[list[SideCapacity]]
    loads: list[dict[str, tuple[Num, Num]]]  # [class]
    shared: dict[str, Num]  # cluster-wide links (storage aggregate)
    storage_factors: dict[str, tuple[Factor, ...]]


def assemble_groups(
    sc: Scenario,
    mode: ModeName | Mode,
    prefill: list[NodeGroup],
    decode: list[NodeGroup],
    classes: list[WorkClass],
) -> GroupAssembly:
    """The same per-node capacities as :func:`assemble`, for several node groups per side and
    several workload classes. ``sc`` gives the model, storage, options and scheduling."""
    m = MODE_TABLE[mode] if isinstance(mode, str) else mode
    pe = [
        [side_capacity(sc, "pe", g.node, g.gpu, g.nodes, m, c.turns) for g in prefill]
        for c in classes
    ]
    de = [
        [side_capacity(sc, "de", g.node, g.gpu, g.nodes, m, c.turns) for g in decode]
        for c in classes
    ]
    loads = [mode_loads(c.turns.means(), m, sc) for c in classes]
    shared, storage_factors = storage_capacity(sc)
    return GroupAssembly(m, prefill, decode, classes, pe, de, loads, shared, storage_factors)
