"""The store that serves a rate of agents (issue 32, item 3; docs/model.md section 12):
storage nodes for its bandwidth and for its capacity. Read by ``size --target-aps``
(outcomes/sizing.py) and by a plan's cost (outcomes/cost.py)."""

from __future__ import annotations

import math

from dualpath_plan.frozen import record
from dualpath_plan.outcomes.serving import ModeOutcome
from dualpath_plan.scenario.bundle import Scenario


@record
class StoreSize:
    """The store that serves a mode's sized cluster at the target APS (issue 32, item 3):
    storage nodes for its read and write bandwidth, with the busiest storage node at most
    --max-utilization as every link, and for its capacity, the KV working set at the cluster's
    APS (Little's law); the count is the larger, ``set_by`` says which."""

    nodes: int
    nodes_for_bandwidth: int
    nodes_for_capacity: int
    read_gbyte_s: float
    write_gbyte_s: float
    capacity_tbyte: float  # the working set it must hold
    set_by: str  # "bandwidth" or "capacity"


def store_size(
    sc: Scenario, o: ModeOutcome, aps: float, max_utilization: float
) -> StoreSize | None:
    """The store for ``aps`` agents/s on a cluster whose outcome is ``o``; None where the
    storage profile gives no per-node capacity and bandwidth (or there is no store)."""
    st = sc.storage
    if (
        st is None
        or st.node_capacity_tbyte is None
        or st.node_read_gbyte_s is None
        or st.node_write_gbyte_s is None
    ):
        return None
    d = sc.turn_demand
    turns_s = aps * d.trajectory_turns.mean
    read = turns_s * d.mean(d.hit_bytes) / 1e9
    write = turns_s * d.mean(d.generated_kv_bytes + d.append_writeback_bytes) / 1e9
    for_bw = max(
        math.ceil(read / (max_utilization * st.node_read_gbyte_s)),
        math.ceil(write / (max_utilization * st.node_write_gbyte_s)),
        1,
    )
    capacity_tb = o.working_set_gbyte / 1e3
    for_cap = max(math.ceil(capacity_tb / st.node_capacity_tbyte), 1)
    return StoreSize(
        nodes=max(for_bw, for_cap),
        nodes_for_bandwidth=for_bw,
        nodes_for_capacity=for_cap,
        read_gbyte_s=read,
        write_gbyte_s=write,
        capacity_tbyte=capacity_tb,
        set_by="bandwidth" if for_bw >= for_cap else "capacity",
    )
