"""Every link at an operating point: its capacity, its load, its unit and what derates it.
One function builds this for ``size`` and ``paths`` alike (their JSON ``limits``)."""

from __future__ import annotations

import math

import numpy as np

from dualpath_plan.frozen import record
from dualpath_plan.physics.links import LINK_TABLE
from dualpath_plan.scenario.assemble import Assembly
from dualpath_plan.solvers.closed_form import Solution


@record
class LinkLimit:
    capacity: float | None  # per second, summed over the link's side (None: no limit)
    load: float  # per second at the optimum, summed over the side
    unit: str  # of both, per second
    utilization: float
    nodes: float  # the nodes the capacity is summed over (1 for cluster-wide links)
    derated_by: tuple[str, ...]

    @property
    def capacity_per_node(self) -> float | None:
        return None if self.capacity is None else self.capacity / self.nodes

    @property
    def load_per_node(self) -> float:
        return self.load / self.nodes


def link_limits(asm: Assembly, sol: Solution, index: tuple[int, ...] = ()) -> dict[str, LinkLimit]:
    """Per link (table order) at the solution of one scenario (``index`` into arrays)."""
    x = float(np.asarray(sol.decode_path_fraction)[index])
    t = float(np.asarray(sol.throughput_turns_per_s)[index])
    util = np.asarray(sol.utilization)[index]
    out: dict[str, LinkLimit] = {}
    for i, k in enumerate(LINK_TABLE):
        a, b = asm.links.load[k.name]
        cap = float(
            np.broadcast_to(
                np.asarray(asm.links.capacity[k.name]), np.shape(sol.decode_path_fraction)
            )[index]
        )
        load = (
            (
                float(np.asarray(a)[()] if np.ndim(a) == 0 else np.asarray(a)[index])
                + x * float(np.asarray(b)[()] if np.ndim(b) == 0 else np.asarray(b)[index])
            )
            * t
            if math.isfinite(t)
            else 0.0
        )
        nodes = asm.nodes_of(k.name)
        out[k.name] = LinkLimit(
            capacity=cap if math.isfinite(cap) else None,
            load=load,
            unit=f"{k.unit}/s",
            utilization=float(util[i]),
            nodes=float(np.asarray(nodes)[index]) if np.ndim(nodes) else float(nodes),
            derated_by=asm.derated_by(k.name, index),
        )
    return out
