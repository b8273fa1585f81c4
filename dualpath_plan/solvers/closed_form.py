"""Closed-form optimum of the homogeneous two-path model, vectorized over any inputs.

With link loads a + b x per turn and capacities c, link l is busy u_l(x) = (a_l + b_l x)/c_l
seconds per turn per second of capacity; throughput is T(x) = 1 / max_l u_l(x) turns/s.
Minimizing a maximum of lines over x in [0, 1] is a 2-variable LP (x, t), so its optimum is
fixed by at most two lines (Helly): it sits at x = 0, x = 1, or where a rising line meets a
falling one. Hence, with R the rising lines (b > 0) and F the falling ones (b < 0):

    t* = max( max_R u(0), max_F u(1), max over (r, f) crossing in [0, 1] of u_r(x_rf), const )

and x* is the smallest x with every line <= t* (the least traffic moved onto the longer
path that reaches the optimum; where it is not unique, ``split_low``..``split_high`` bound it).
All of it is NumPy over a leading scenario axis, so millions of scenarios cost one pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from dualpath_plan.physics.links import (
    COMPUTE_LINKS,
    LINK_INDEX,
    LINKS,
    Cluster,
    Demand,
    PathOptions,
    capacities,
    even_share,
    turn_loads,
)
from dualpath_plan.physics.model import FloatArray

Mode = Literal["basic", "even", "dualpath", "oracle"]
MODES: tuple[Mode, ...] = ("basic", "even", "dualpath", "oracle")
_TOL = 1e-12


@dataclass(frozen=True)
class Solution:
    """Per scenario (leading axes): the split, throughput, and every link's utilization."""

    mode: Mode
    throughput_turns_per_s: FloatArray
    decode_path_fraction: FloatArray  # share of hit bytes read on the DE path
    split_low: FloatArray  # range of optimal splits (equal unless degenerate)
    split_high: FloatArray
    utilization: FloatArray  # (..., len(LINKS)), 0..1 at the optimum
    bottleneck: FloatArray  # index into LINKS of the most utilized link

    def bottleneck_name(self, index: tuple[int, ...] = ()) -> str:
        return LINKS[int(np.asarray(self.bottleneck)[index])]

    def binding(self, index: tuple[int, ...] = (), tol: float = 1e-6) -> list[str]:
        u = np.asarray(self.utilization)[index]
        return [LINKS[i] for i in np.flatnonzero(u >= 1.0 - tol)]


def _oracle_mask() -> FloatArray:
    """Oracle skips disk reads, H2D/D2H and P-D transfers: only compute links remain."""
    keep = np.zeros(len(LINKS))
    for name in COMPUTE_LINKS:
        keep[LINK_INDEX[name]] = 1.0
    return keep


def per_turn_seconds(
    a: FloatArray, b: FloatArray, cap: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """alpha, beta with u(x) = alpha + beta x (seconds of each link per turn)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        inv = np.where(np.isinf(cap), 0.0, 1.0 / cap)
    return a * inv, b * inv


def minimize_max_of_lines(
    alpha: FloatArray, beta: FloatArray, active: np.ndarray | None = None
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """(t*, x_low, x_high): min over x in [0,1] of max_l alpha_l + beta_l x over the ``active``
    lines (default all), and the optimal x range, along the last axis."""
    on = np.ones(alpha.shape, dtype=bool) if active is None else np.asarray(active, dtype=bool)
    scale = np.abs(np.where(on, alpha, 0.0)).max(axis=-1, keepdims=True)
    rising = on & (beta > _TOL * scale)
    falling = on & (beta < -_TOL * scale)
    u0 = alpha
    u1 = alpha + beta
    neg = -np.inf
    t = np.max(np.where(on & ~rising & ~falling, alpha, neg), axis=-1)  # flat lines
    t = np.maximum(t, np.max(np.where(rising, u0, neg), axis=-1))
    t = np.maximum(t, np.max(np.where(falling, u1, neg), axis=-1))
    # Crossings of each rising r with each falling f: x = (alpha_f - alpha_r)/(beta_r - beta_f).
    # Only columns that rise (fall) in some scenario can pair, which keeps the work small.
    rcols = np.flatnonzero(rising.reshape(-1, rising.shape[-1]).any(axis=0))
    fcols = np.flatnonzero(falling.reshape(-1, falling.shape[-1]).any(axis=0))
    ar, br = alpha[..., rcols, None], beta[..., rcols, None]
    af, bf = alpha[..., None, fcols], beta[..., None, fcols]
    pair = rising[..., rcols, None] & falling[..., None, fcols]
    with np.errstate(divide="ignore", invalid="ignore"):
        x = (af - ar) / (br - bf)
        inside = pair & (x >= 0.0) & (x <= 1.0)
        value = np.where(inside, ar + br * x, neg)
    if value.shape[-1] * value.shape[-2] == 0:
        value = np.full((*value.shape[:-2], 1, 1), neg)
    t = np.maximum(t, value.reshape(*value.shape[:-2], -1).max(axis=-1))
    # Optimal range: falling lines need x >= (alpha - t)/|beta|, rising ones x <= (t - alpha)/beta.
    tt = t[..., None]
    slack = 1e-12 * np.maximum(tt, 1e-300)
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = np.where(falling, (alpha - tt - slack) / -beta, 0.0).max(axis=-1)
        hi = np.where(rising, (tt + slack - alpha) / beta, 1.0).min(axis=-1)
    lo = np.clip(lo, 0.0, 1.0)
    hi = np.clip(np.maximum(hi, lo), 0.0, 1.0)
    return t, lo, hi


def solve(
    cluster: Cluster, demand: Demand, mode: Mode = "dualpath", options: PathOptions = PathOptions()
) -> Solution:
    """Throughput, split and utilization for one mode, vectorized over every input array."""
    a, b = turn_loads(demand, options)
    cap = capacities(cluster)
    a, b, cap = np.broadcast_arrays(a, b, cap)
    if mode == "oracle":
        keep = _oracle_mask()
        a, b = a * keep, b * 0.0
    alpha, beta = per_turn_seconds(a, b, cap)
    if mode == "dualpath":
        t, lo, hi = minimize_max_of_lines(alpha, beta)
        # The balanced split: among optimal ones, the one that minimizes the busiest link that
        # depends on the split (the scheduler balances read queues, paper 6).
        _, balanced, _ = minimize_max_of_lines(alpha, beta, active=np.abs(beta) > 0)
        x = np.clip(balanced, lo, hi)
    else:
        if mode == "basic" or mode == "oracle":
            x = np.zeros(alpha.shape[:-1])
        else:
            x = np.broadcast_to(even_share(cluster), alpha.shape[:-1]).astype(np.float64)
        lo = hi = x
        t = np.max(alpha + beta * x[..., None], axis=-1)
    u_abs = alpha + beta * x[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        throughput = np.where(t > 0, 1.0 / t, np.inf)
        util = np.where(t[..., None] > 0, u_abs / t[..., None], 0.0)
    return Solution(
        mode=mode,
        throughput_turns_per_s=throughput,
        decode_path_fraction=np.asarray(x, dtype=np.float64),
        split_low=np.asarray(lo, dtype=np.float64),
        split_high=np.asarray(hi, dtype=np.float64),
        utilization=util,
        bottleneck=np.argmax(util, axis=-1),
    )


def solve_all(
    cluster: Cluster, demand: Demand, options: PathOptions = PathOptions()
) -> dict[Mode, Solution]:
    return {m: solve(cluster, demand, m, options) for m in MODES}
