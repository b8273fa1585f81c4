"""Bottleneck-free P/D range (dualpath-paper.md 2.4, eqs. (1)-(9)), from the same link
coefficients as the solvers, in closed form and vectorized.

The paper's assumption: every SNIC saturated and shared evenly, so each PE node reads S_p B/s
on the PE path and each DE node S_d on the DE path (S = the node's SNIC read capacity). With a
link's per-turn load H (alpha + beta x) (from :func:`turn_loads`, divided by the hit bytes H)
and q = D/P, r = P/D:

  PE-side link, per PE node:  alpha S_p + (alpha + beta) S_d q  <= cap  ->  a lower bound on r
  DE-side link, per DE node:  alpha S_p r + (alpha + beta) S_d  <= cap  ->  an upper bound on r

For g GPUs, s = S/B and the paper's links this gives eq. (2)-(3) r >= s/(g-s), (4)-(5)
r <= (g-2s)/s, (6)-(7) r <= (g-s)/(2s), (8) r <= (M/(Bs) - 3)/2, and (9) their intersection.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dualpath_plan.errors import InfeasibleError
from dualpath_plan.physics.links import LINK_INDEX, LINKS, Cluster, Demand, PathOptions, turn_loads
from dualpath_plan.physics.model import FloatArray

# Links the bounds consider: every I/O link of a node except the saturated SNIC reads.
_EXCLUDED = {
    "pe_snic_read",
    "de_snic_read",
    "pe_compute",
    "de_decode",
    "storage_read",
    "storage_write",
}
BOUND_LINKS = tuple(n for n in LINKS if n not in _EXCLUDED)


@dataclass(frozen=True)
class Bounds:
    pd_min: FloatArray  # 0 when nothing bounds P/D from below
    pd_max: FloatArray  # inf when nothing bounds it from above
    binding_lower: list[str]  # per scenario (flattened) the link setting pd_min ("none")
    binding_upper: list[str]
    per_link: dict[str, FloatArray]  # each link's own bound (lower for PE links, upper for DE)
    violated: list[list[str]]  # links over capacity at every P/D (no ratio is bottleneck-free)

    @property
    def feasible(self) -> FloatArray:
        return np.asarray(self.pd_min <= self.pd_max) & np.array(
            [not v for v in self.violated]
        ).reshape(np.shape(self.pd_min))


def pd_bounds(cluster: Cluster, demand: Demand, options: PathOptions = PathOptions()) -> Bounds:
    """The P/D ratios (node counts) at which no I/O link is over capacity while every SNIC is
    saturated and shared evenly. Only the per-node capacities of ``cluster`` matter."""
    a, b = turn_loads(demand, options)
    H = np.asarray(demand.hit_bytes, dtype=np.float64)[..., None]
    if np.any(~(H > 0)):
        raise InfeasibleError(
            "the bottleneck-free analysis saturates the storage NICs with cached KV; this "
            "workload loads none (context_tokens = 0)",
            field="context_tokens",
        )
    with np.errstate(all="ignore"):
        alpha, beta = a / H, b / H
    if not (np.all(np.isfinite(alpha)) and np.all(np.isfinite(beta))):
        raise InfeasibleError(
            "the cached KV is too small against the other bytes of a turn for the SNIC-"
            "saturation analysis (context_tokens near 0)",
            field="context_tokens",
        )
    sp = np.asarray(cluster.pe.snic_read, dtype=np.float64)
    sd = np.asarray(cluster.de.snic_read, dtype=np.float64)
    shape = np.broadcast(alpha[..., 0], sp, sd).shape
    lower = np.zeros(shape)
    upper = np.full(shape, np.inf)
    low_name = np.full(shape, "none", dtype=object)
    up_name = np.full(shape, "none", dtype=object)
    violated = np.zeros((*shape, len(BOUND_LINKS)), dtype=bool)
    per_link: dict[str, FloatArray] = {}
    for k, name in enumerate(BOUND_LINKS):
        li = LINK_INDEX[name]
        side = cluster.pe if name.startswith("pe_") else cluster.de
        cap = np.broadcast_to(np.asarray(getattr(side, name[3:]), dtype=np.float64), shape)
        al = np.broadcast_to(alpha[..., li], shape)
        ab = np.broadcast_to(alpha[..., li] + beta[..., li], shape)
        with np.errstate(divide="ignore", invalid="ignore"):
            if name.startswith("pe_"):
                # alpha S_p + (alpha+beta) S_d / r <= cap
                room = cap - al * sp
                bound = np.where(ab > 0, ab * sd / room, 0.0)
                bad = (room <= 0) & (ab > 0) | (room < 0)
                bound = np.where(bad, np.inf, np.where(np.isinf(cap), 0.0, bound))
                per_link[name] = bound
                tighter = bound > lower
                lower = np.where(tighter, bound, lower)
                low_name = np.where(tighter, name, low_name)
            else:
                # alpha S_p r + (alpha+beta) S_d <= cap
                room = cap - ab * sd
                bound = np.where(al > 0, room / (al * sp), np.inf)
                bad = room < 0
                bound = np.where(bad, -np.inf, np.where(np.isinf(cap), np.inf, bound))
                per_link[name] = bound
                tighter = bound < upper
                upper = np.where(tighter, bound, upper)
                up_name = np.where(tighter, name, up_name)
        violated[..., k] = bad & ~np.isinf(cap)
    flat_v = violated.reshape(-1, len(BOUND_LINKS))
    return Bounds(
        pd_min=lower,
        pd_max=upper,
        binding_lower=[str(v) for v in np.ravel(low_name)],
        binding_upper=[str(v) for v in np.ravel(up_name)],
        per_link=per_link,
        violated=[[BOUND_LINKS[k] for k in np.flatnonzero(row)] for row in flat_v],
    )
