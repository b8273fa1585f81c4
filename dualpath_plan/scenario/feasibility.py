"""The checks every outcome of a cluster starts from: a node per side, the weights fit on
both sides and the decode group holds one request. The errors a user can act on, the same in
every mode and every command (size, paths, sweep, simulate)."""

from __future__ import annotations

import numpy as np

from dualpath_plan.errors import InfeasibleError
from dualpath_plan.formatting import plain
from dualpath_plan.physics.engines import check_weights_fit, decode_group
from dualpath_plan.scenario.bundle import Scenario


def check_feasible(sc: Scenario) -> None:
    """At least one node per side, the weights fit on both sides and the decode group holds one
    request: the errors a user can act on, the same in every mode."""
    P, D = sc.prefill_nodes, sc.decode_nodes
    if not (P >= 1 and D >= 1):
        raise InfeasibleError(
            f"a P/D cluster needs at least one node per side, got {P}P{D}D",
            field="prefill_nodes" if not P >= 1 else "decode_nodes",
        )
    check_weights_fit(sc.model, sc.prefill_node, sc.prefill_gpu, P, "prefill")
    check_weights_fit(sc.model, sc.decode_node, sc.decode_gpu, D, "decode")
    check_decode_fits(sc)


def check_decode_fits(sc: Scenario) -> None:
    """The decode group's HBM beside the weights holds one request's KV at the end of its
    generation (mean context + generated tokens), the decode batch of one; else no mode serves
    a turn. The group is the assembly's (``decode_group``)."""
    d = sc.turn_demand
    prompt, gen = d.mean(d.context_tokens), d.mean(d.generated_tokens)
    D, node, gpu = sc.decode_nodes, sc.decode_node, sc.decode_gpu
    group = decode_group(
        sc.model, node, gpu, float(D), prompt, gen, sc.options.efficiencies, sc.engine_for(node)
    )
    if group.max_batch >= 1:
        return
    hbm = D * node.gpus_per_node * gpu.hbm_gbyte
    r = float(np.asarray(group.replicas))
    free = float(np.asarray(group.free_hbm_bytes)) / 1e9 / r
    keeps = (
        f"keep{'s' if D == 1 else ''} {free:,.2f} GB beside the"
        if r == 1
        else f"run {plain(r)} model replicas (one per node), each keeping {free:,.2f} GB beside its"
    )
    raise InfeasibleError(
        f"{D:,} decode node{'s' if D != 1 else ''} ({D:,} x {node.gpus_per_node} x "
        f"{plain(gpu.hbm_gbyte)} GB = {hbm:,.0f} GB of HBM) {keeps} "
        f"{sc.model.id} weights, less than one request's KV at the end of its generation "
        f"({group.kv_bytes_per_sequence / 1e9:,.2f} GB for {prompt:,.0f} context + {gen:,.0f} "
        "generated tokens): not one request fits; add decode nodes or choose a GPU with more HBM",
        field="-D/--decode-nodes",
    )
