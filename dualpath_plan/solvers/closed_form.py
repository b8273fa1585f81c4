"""Closed-form optimum of the homogeneous two-path model, vectorized over any inputs.

With link loads a + b x per turn and capacities c, link l is busy u_l(x) = (a_l + b_l x)/c_l
seconds per turn per second of capacity; throughput is T(x) = 1 / max_l u_l(x) turns/s.
Minimizing a maximum of lines over x in [0, 1] is a 2-variable LP (x, t), so its optimum is
fixed by at most two lines (Helly). With R the rising lines (b > 0), F the falling ones
(b < 0) and K the flat ones, for a pair (r, f) the min over [0, 1] of max(u_r, u_f) is
max(u_r(0), u_f(1), c_rf), c_rf = (b_r a_f - a_r b_f)/(b_r - b_f) their crossing value (a
crossing outside [0, 1] lies below one of the two endpoint terms), so

    t* = max( max_K u(0), max_R u(0), max_F u(1), max over (r, f) of c_rf )

with no case analysis. The split reported is the balanced one: the smallest x at which every
split-dependent line is at most its own min-max t_var (a read-queue-balancing scheduler's
choice); ``split_low``..``split_high`` bound all optimal splits. The signs of b are fixed by the
path structure (``links.RISING``/``FALLING``), so everything is column-wise NumPy: inputs that
do not vary stay scalars and millions of scenarios cost a few passes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dualpath_plan.physics.links import FALLING, FLAT, LINK_INDEX, LINKS, RISING, Num
from dualpath_plan.physics.model import FloatArray
from dualpath_plan.physics.modes import SplitRule
from dualpath_plan.scenario.assemble import LinkSet

# Links whose utilization is within this of the busiest one are all binding: one operating
# point, one set of names, whichever mode or command reached it.
TIGHT_REL = 1e-9


@dataclass(frozen=True)
class Solution:
    """Per scenario (leading axes): the split, throughput, and every link's utilization."""

    split: SplitRule
    throughput_turns_per_s: FloatArray
    decode_path_fraction: FloatArray  # share of hit bytes read on the DE path
    split_low: FloatArray  # range of optimal splits (equal unless degenerate)
    split_high: FloatArray
    _alpha: dict[str, Num]
    _beta: dict[str, Num]
    _t: FloatArray

    @functools.cached_property
    def utilization(self) -> FloatArray:
        """(..., len(LINKS)): each link's load over its capacity at the optimum, 0..1."""
        x = self.decode_path_fraction
        with np.errstate(divide="ignore", invalid="ignore"):
            cols = [
                np.where(self._t > 0, (self._alpha[n] + self._beta[n] * x) / self._t, 0.0)
                for n in LINKS
            ]
        return np.stack(np.broadcast_arrays(*cols), axis=-1)

    @functools.cached_property
    def binding_mask(self) -> np.ndarray:
        """Per scenario, a bit per link (bit i: LINKS[i]) set where the link is tight: its
        utilization within TIGHT_REL of the busiest link's."""
        x = self.decode_path_fraction
        shape = np.shape(x)
        # Two passes over the links (the busiest, then who is within TIGHT_REL of it), so that
        # no (links x scenarios) array is held: a sweep's chunk stays its own size.
        busy = [n for n in LINKS if np.any(self._alpha[n]) or np.any(self._beta[n])]
        top = np.zeros(shape)
        for n in busy:
            np.fmax(top, self._alpha[n] + self._beta[n] * x, out=top)
        threshold = top * (1.0 - TIGHT_REL)
        mask = np.zeros(shape, dtype=np.int64)
        for n in busy:
            tight = (self._alpha[n] + self._beta[n] * x >= threshold) & (top > 0)
            np.bitwise_or(mask, np.int64(1) << LINK_INDEX[n], out=mask, where=tight)
        return mask

    def binding(self, index: tuple[int, ...] = ()) -> list[str]:
        """The tight links of one scenario, in table order."""
        return mask_names(int(np.asarray(self.binding_mask)[index]))


def mask_names(mask: int) -> list[str]:
    return [n for i, n in enumerate(LINKS) if mask >> i & 1]


def _seconds_per_turn(links: LinkSet) -> tuple[dict[str, Num], dict[str, Num]]:
    """alpha, beta per link with u(x) = alpha + beta x: seconds of the link per turn. An
    infinite capacity costs nothing; no load costs nothing, whatever the capacity."""
    alpha: dict[str, Num] = {}
    beta: dict[str, Num] = {}
    for n in LINKS:
        a, b = links.load[n]
        c = links.capacity[n]
        alpha[n], beta[n] = _per_capacity(a, c), _per_capacity(b, c)
    return alpha, beta


def _per_capacity(load: Num, capacity: Num) -> Num:
    """load / capacity, where no load costs nothing whatever the capacity (0/0 is 0) and an
    infinite capacity costs nothing (IEEE: x/inf = 0); a load on no capacity is infinite."""
    if np.ndim(load) == 0 and float(load) == 0.0:
        return np.float64(0.0)  # the common case of a scalar demand: no division at all
    with np.errstate(divide="ignore", invalid="ignore"):
        out = load / np.asarray(capacity)
    return np.where(np.asarray(load) == 0, 0.0, out) if np.ndim(load) else out


def _max(values: Sequence[Num]) -> FloatArray:
    return np.asarray(functools.reduce(np.fmax, values))


def _min(values: Sequence[Num]) -> FloatArray:
    return np.asarray(functools.reduce(np.fmin, values))


def _split_range(
    alpha: dict[str, Num], beta: dict[str, Num], t: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """The x in [0, 1] with every split-dependent line <= t: falling lines need
    x >= (alpha - t)/|beta|, rising ones x <= (t - alpha)/beta (a small slack for rounding)."""
    slack = 1e-12 * np.abs(t)
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = _max([np.float64(0.0)] + [(alpha[f] - t - slack) / -beta[f] for f in FALLING])
        hi = _min([np.float64(1.0)] + [(t + slack - alpha[r]) / beta[r] for r in RISING])
    lo = np.clip(lo, 0.0, 1.0)
    return lo, np.clip(np.fmax(hi, lo), 0.0, 1.0)


def _envelope_lines(
    alpha: dict[str, Num], beta: dict[str, Num]
) -> tuple[list[tuple[Num, Num]], list[tuple[Num, Num]]]:
    """The rising and falling lines as (alpha, beta), with exact merges: rising lines through
    the origin (alpha = 0: a link only the DE path loads) are dominated by the steepest of
    them, falling lines through (1, 0) (alpha + beta = 0: only the PE path loads it) by the
    highest. Fewer lines, fewer crossings, the same maximum."""
    rising: list[tuple[Num, Num]] = []
    origin: list[Num] = []
    for r in RISING:
        if np.all(np.asarray(alpha[r]) == 0):
            origin.append(beta[r])
        else:
            rising.append((alpha[r], beta[r]))
    if origin:
        rising.append((np.float64(0.0), _max(origin)))
    falling: list[tuple[Num, Num]] = []
    pivot: list[Num] = []
    for f in FALLING:
        if np.all(np.asarray(alpha[f]) + np.asarray(beta[f]) == 0):
            pivot.append(alpha[f])
        else:
            falling.append((alpha[f], beta[f]))
    if pivot:
        top = _max(pivot)
        falling.append((top, -top))
    return rising, falling


def solve(links: LinkSet) -> Solution:
    """Throughput, split and utilization for the link set's split rule, vectorized over every
    input array."""
    alpha, beta = _seconds_per_turn(links)
    if links.split == "optimal":
        rising, falling = _envelope_lines(alpha, beta)
        with np.errstate(divide="ignore", invalid="ignore"):
            crossings = [(br * af - ar * bf) / (br - bf) for ar, br in rising for af, bf in falling]
        t_var = _max([ar for ar, _ in rising] + [af + bf for af, bf in falling] + crossings)
        t = np.fmax(t_var, _max([alpha[k] for k in FLAT]))
        lo, hi = _split_range(alpha, beta, t)
        balanced, _ = _split_range(alpha, beta, t_var)
        x = np.clip(balanced, lo, hi)
    else:
        x = np.asarray(links.even_share if links.split == "even" else 0.0, dtype=np.float64)
        t = _max([alpha[n] + beta[n] * x for n in LINKS])
        lo = hi = x
    shape = np.broadcast(t, x).shape
    t = np.broadcast_to(t, shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        throughput = np.where(t > 0, 1.0 / t, np.inf)
    return Solution(
        split=links.split,
        throughput_turns_per_s=throughput,
        decode_path_fraction=np.broadcast_to(np.asarray(x, dtype=np.float64), shape),
        split_low=np.broadcast_to(np.asarray(lo, dtype=np.float64), shape),
        split_high=np.broadcast_to(np.asarray(hi, dtype=np.float64), shape),
        _alpha=alpha,
        _beta=beta,
        _t=t,
    )
