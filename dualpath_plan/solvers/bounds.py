"""Bottleneck-free P/D range (dualpath-paper.md 2.4, eqs. (1)-(9)), from the same link table,
loads and per-node capacities as the other solvers, in closed form and vectorized.

The paper's assumption: every node's storage reads saturated and shared evenly, so each PE node
reads S_p B/s on the PE path and each DE node S_d on the DE path (S = the least of the node's
storage-read links: its SNICs, and the storage system's per-client limit). With a link's
per-turn load H (alpha + beta x) (divided by the hit bytes H) and q = D/P, r = P/D:

  PE-side link, per PE node:  alpha S_p + (alpha + beta) S_d q  <= cap  ->  a lower bound on r
  DE-side link, per DE node:  alpha S_p r + (alpha + beta) S_d  <= cap  ->  an upper bound on r

For g GPUs, s = S/B and the paper's links this gives eq. (2)-(3) r >= s/(g-s), (4)-(5)
r <= (g-2s)/s, (6)-(7) r <= (g-s)/(2s), (8) r <= (M/(Bs) - 3)/2, and (9) their intersection.
Only the I/O links of a node count; compute and the storage cluster's aggregate do not.
"""

from __future__ import annotations

import numpy as np

from dualpath_plan.errors import InfeasibleError
from dualpath_plan.frozen import record
from dualpath_plan.physics.links import LINK_TABLE
from dualpath_plan.physics.model import FloatArray
from dualpath_plan.scenario.assemble import Assembly

# Links the bounds consider: every node I/O link except the saturated storage reads.
BOUND_LINKS = tuple(
    k.name for k in LINK_TABLE if k.io and k.side in ("pe", "de") and not k.reads_storage
)


@record
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


def _read_rate(asm: Assembly, side: str) -> FloatArray:
    per_node = asm.pe.per_node if side == "pe" else asm.de.per_node
    return np.fmin.reduce(
        [np.asarray(per_node[k.name], dtype=np.float64) for k in LINK_TABLE
         if k.reads_storage and k.side == side]
    )  # fmt: skip


def pd_bounds(asm: Assembly) -> Bounds:
    """The P/D ratios (node counts) at which no node I/O link is over capacity while every
    node's storage reads are saturated and shared evenly. Only per-node capacities matter."""
    H = np.asarray(asm.links.hit_bytes, dtype=np.float64)
    if np.any(~(H > 0)):
        raise InfeasibleError(
            "the bottleneck-free analysis saturates the storage NICs with cached KV; this "
            "workload loads none (context_tokens = 0)",
            field="context_tokens",
        )
    sp, sd = _read_rate(asm, "pe"), _read_rate(asm, "de")
    shape = np.broadcast(H, sp, sd).shape
    lower = np.zeros(shape)
    upper = np.full(shape, np.inf)
    low_name = np.full(shape, "none", dtype=object)
    up_name = np.full(shape, "none", dtype=object)
    violated = np.zeros((*shape, len(BOUND_LINKS)), dtype=bool)
    per_link: dict[str, FloatArray] = {}
    for k, name in enumerate(BOUND_LINKS):
        a, b = asm.links.load[name]
        with np.errstate(all="ignore"):
            al = np.broadcast_to(np.asarray(a, dtype=np.float64) / H, shape)
            ab = np.broadcast_to((np.asarray(a) + np.asarray(b)) / H, shape)
        if not (np.all(np.isfinite(al)) and np.all(np.isfinite(ab))):
            raise InfeasibleError(
                "the cached KV is too small against the other bytes of a turn for the SNIC-"
                "saturation analysis (context_tokens near 0)",
                field="context_tokens",
            )
        side_caps = asm.pe.per_node if name.startswith("pe_") else asm.de.per_node
        cap = np.broadcast_to(np.asarray(side_caps[name], dtype=np.float64), shape)
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
