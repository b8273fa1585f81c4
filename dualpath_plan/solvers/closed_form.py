"""Closed-form optimum of the homogeneous two-path model, vectorized over any inputs.

With link loads a + b x per turn and capacities c, link l is busy u_l(x) = (a_l + b_l x)/c_l
seconds per turn per second of capacity; throughput is T(x) = 1 / max_l u_l(x) turns/s.
Minimizing a maximum of lines over x in [0, 1] is a 2-variable LP (x, t), so its optimum is
fixed by at most two lines (Helly). With R the rising lines (b > 0), F the falling ones
(b < 0) and K the flat ones, for a pair (r, f) the min over [0, 1] of max(u_r, u_f) is
max(u_r(0), u_f(1), c_rf), c_rf = (b_r a_f - a_r b_f)/(b_r - b_f) their crossing value (a
crossing outside [0, 1] lies below one of the two endpoint terms), so

    t* = max( max_K u(0), max_R u(0), max_F u(1), max over (r, f) of c_rf )

with no case analysis. A rising line's crossings are computed together: u_r rises, so the
highest is u_r at the largest crossing point x_rf = (a_f - a_r)/(b_r - b_f), taken in [0, 1]
(one division per pair; ``_highest_crossing``). The split reported is the balanced one: the
smallest x at which every split-dependent line is at most its own min-max t_var (a
read-queue-balancing scheduler's choice); ``split_low``..``split_high`` bound all optimal
splits. The signs of b are fixed by the
path structure (``links.RISING``/``FALLING``), so everything is column-wise NumPy: inputs that
do not vary stay scalars and millions of scenarios cost a few passes.

Dominated lines are dropped once per link set, before any array is touched (``_prune``):
within a group of links whose capacities scale alike (``LinkSet.scaling``: the same side's
node count and array factors), a line at most (1 - ``PRUNE_MARGIN``) of another's at x = 0 and
at x = 1 lies below it on the whole of [0, 1] in every scenario, so it is never the busiest
and never within TIGHT_REL of it. A split-dependent line is dropped only for a
split-dependent one (it may set the balanced split; one of the same direction at least
``PRUNE_SLOPE`` as steep, so that rounding cannot reorder their bounds), a flat one for any.
The answer is the unpruned one bit for bit (docs/invariants.md INV-28): the margin keeps a
dropped line's endpoint terms and split bounds clear of rounding; only a crossing of a dropped
line with a falling line under 1e-9 of its slope could come within rounding of the kept one's
(the last bits of T, never the binding links), which no tested or assembled input reaches.
"""

from __future__ import annotations

import functools
import math
import threading
from collections.abc import Callable, Sequence

import numpy as np

from dualpath_plan.frozen import record
from dualpath_plan.physics.links import FALLING, FLAT, LINK_INDEX, LINKS, RISING, SLOPE_SIGN, Num
from dualpath_plan.physics.model import FloatArray
from dualpath_plan.physics.modes import SplitRule
from dualpath_plan.scenario.assemble import LinkSet

# Links whose utilization is within this of the busiest one are all binding: one operating
# point, one set of names, whichever mode or command reached it.
TIGHT_REL = 1e-9
# A line is pruned only when it lies this far (relative) below another at both ends: far
# beyond TIGHT_REL and any rounding, so a pruned link can neither bind nor set a term.
PRUNE_MARGIN = 1e-6
# ... and, for two split-dependent lines of one direction, when the one kept is at least this
# steep relative to the one dropped.
PRUNE_SLOPE = 1e-3


@record
class Solution:
    """Per scenario (leading axes): the split, throughput, and every link's utilization."""

    split: SplitRule
    throughput_turns_per_s: FloatArray
    decode_path_fraction: FloatArray  # share of hit bytes read on the DE path
    split_low: FloatArray  # range of optimal splits (equal unless degenerate)
    split_high: FloatArray
    _alpha: dict[str, Num]  # of the links solved: every link the pruning kept
    _beta: dict[str, Num]
    _t: FloatArray
    _links: LinkSet | None = None  # for the pruned links' utilization, on demand

    @functools.cached_property
    def utilization(self) -> FloatArray:
        """(..., len(LINKS)): each link's load over its capacity at the optimum, 0..1."""
        x = self.decode_path_fraction
        alpha, beta = self._alpha, self._beta
        missing = [n for n in LINKS if n not in alpha]
        if missing and self._links is not None:
            more = _seconds_per_turn(self._links, missing)
            alpha, beta = alpha | more[0], beta | more[1]
        # Every link at once, the links on a last axis (one expression, not one per link: a
        # scalar cluster's utilization was 25 small NumPy expressions); the same operations on
        # each element, so the same bits.
        a = np.stack(np.broadcast_arrays(*(np.asarray(alpha[n], np.float64) for n in LINKS)), -1)
        b = np.stack(np.broadcast_arrays(*(np.asarray(beta[n], np.float64) for n in LINKS)), -1)
        t = np.asarray(self._t)[..., None]
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(t > 0, (a + b * np.asarray(x)[..., None]) / t, 0.0)

    @functools.cached_property
    def binding_mask(self) -> np.ndarray:
        """Per scenario, a bit per link (bit i: LINKS[i]) set where the link is tight: its
        load at the split within TIGHT_REL of t, the busiest load (at the split every line is
        at most t, to the split bounds' 1e-12 allowance, and one reaches it; so the tight links
        are those whose utilization is at least 1 - TIGHT_REL). A pruned link never is: it
        lies at least PRUNE_MARGIN below a link that is kept."""
        x = self.decode_path_fraction
        shape = np.shape(x)
        t = np.asarray(self._t)
        # Where no link is busy (t <= 0) none is tight: an infinite threshold says so once.
        threshold = np.where(t > 0, t * (1.0 - TIGHT_REL), np.inf)
        mask = np.zeros(shape, dtype=np.int64)
        tight = _scratch(shape, 0, bool)
        tight = np.empty(shape, dtype=bool) if tight is None else tight
        bits = _scratch(shape, 1, np.int64)
        bits = np.empty(shape, dtype=np.int64) if bits is None else bits
        for n in LINKS:
            if n not in self._alpha or not (_any(self._alpha[n]) or _any(self._beta[n])):
                continue
            u = _line_at(self._alpha[n], self._beta[n], x, _scratch(shape, 11))
            np.greater_equal(u, threshold, out=tight)
            n_tight = np.count_nonzero(tight)
            if n_tight == tight.size:
                np.bitwise_or(mask, np.int64(1) << LINK_INDEX[n], out=mask)
            elif n_tight:
                # mask |= tight << i, without ``where=``: a masked ufunc runs its loop once per
                # run of True, ~25x a plain pass where the tight links change from scenario to
                # scenario (random clusters); a link tight nowhere (most) costs the count.
                np.copyto(bits, tight)
                np.left_shift(bits, LINK_INDEX[n], out=bits)
                np.bitwise_or(mask, bits, out=mask)
        return mask

    def binding(self, index: tuple[int, ...] = ()) -> list[str]:
        """The tight links of one scenario, in table order."""
        return mask_names(int(np.asarray(self.binding_mask)[index]))


def mask_names(mask: int) -> list[str]:
    return [n for i, n in enumerate(LINKS) if mask >> i & 1]


def _first(v: Num) -> float | None:
    """The first element of a value (None when it has none)."""
    a = np.asarray(v)
    return float(a.flat[0]) if a.size else None


def _any(v: Num) -> bool:
    """np.any(v), without a pass over the array when its first element already decides."""
    first = _first(v)
    return bool(first) or (first is not None and np.ndim(v) > 0 and bool(np.any(v)))


def _all_zero(v: Num) -> bool:
    """np.all(v == 0), without a pass over the array when its first element already decides."""
    first = _first(v)
    return first is None or (first == 0 and (np.ndim(v) == 0 or bool(np.all(np.asarray(v) == 0))))


def _sum_all_zero(a: Num, b: Num, shape: tuple[int, ...]) -> bool:
    """np.all(a + b == 0), without a pass when the first elements already decide (and the
    sum in a work array: no array allocated per line)."""
    fa, fb = _first(a), _first(b)
    if fa is not None and fb is not None and fa + fb != 0:
        return False
    work = _scratch(shape, 19) if np.broadcast(a, b).shape == shape else None
    total = np.add(a, b) if work is None else np.add(a, b, out=work)
    return not np.any(total)  # NaN counts as nonzero, -0.0 as zero: as a + b == 0


def _line_at(alpha: Num, beta: Num, x: FloatArray, out: np.ndarray | None) -> FloatArray:
    """alpha + beta x (into ``out`` when it has the full shape); a flat line (beta a scalar 0:
    x is finite) is its alpha as it is."""
    if np.ndim(beta) == 0 and float(beta) == 0.0:
        return np.broadcast_to(np.asarray(alpha, dtype=np.float64), np.shape(x))
    if out is None or np.broadcast(alpha, beta, x).shape != out.shape:
        return np.asarray(alpha + beta * x)
    np.multiply(beta, x, out=out)
    return np.add(alpha, out, out=out)


def _seconds_per_turn(
    links: LinkSet, names: Sequence[str] = LINKS
) -> tuple[dict[str, Num], dict[str, Num]]:
    """alpha, beta per link of ``names`` with u(x) = alpha + beta x: seconds of the link per
    turn. An infinite capacity costs nothing; no load costs nothing, whatever the capacity."""
    alpha: dict[str, Num] = {}
    beta: dict[str, Num] = {}
    for n in names:
        a, b = links.load[n]
        c = links.capacity[n]
        alpha[n], beta[n] = _per_capacity(a, c), _per_capacity(b, c)
    return alpha, beta


def _per_capacity(load: Num, capacity: Num) -> Num:
    """load / capacity, where no load costs nothing whatever the capacity (0/0 is 0) and an
    infinite capacity costs nothing (IEEE: x/inf = 0); a load on no capacity is infinite
    (``solve`` refuses it: ``_require_capacity``)."""
    if np.ndim(load) == 0 and float(load) == 0.0:
        return np.float64(0.0)  # the common case of a scalar demand: no division at all
    with np.errstate(divide="ignore", invalid="ignore"):
        out = load / np.asarray(capacity)
    return np.where(np.asarray(load) == 0, 0.0, out) if np.ndim(load) else out


def _prune(links: LinkSet) -> frozenset[str]:
    """The links whose load lines are dominated within their scaling group (module
    docstring), decided from scalars once per link set: per link of a group, its line in
    the group's units (load / k at x = 0 and x = 1). A group is left whole unless its loads
    are scalars and its common scale is positive in every scenario (a capacity of 0 makes
    every loaded line of the group infinite there, and infinite lines all tie)."""
    groups: dict[str, list[tuple[str, float, float]]] = {}
    reference: dict[str, Num] = {}
    for n, s in links.scaling.items():
        a, b = links.load[n]
        if links.capacity.get(n) is not s.capacity or np.ndim(a) or np.ndim(b):
            continue  # replaced since it was declared, or a load that varies by scenario
        a, b, k = float(a), float(b), float(s.k)
        if not (k > 0 and math.isfinite(a) and math.isfinite(b)):
            continue
        if math.isfinite(k):
            reference.setdefault(s.group, s.capacity)
            p0, p1 = a / k, (a + b) / k
        else:
            p0 = p1 = 0.0
        if math.isfinite(p0) and math.isfinite(p1) and p0 >= 0 and p1 >= 0:
            groups.setdefault(s.group, []).append((n, p0, p1))
    pruned: set[str] = set()
    for g, lines in groups.items():
        if len(lines) < 2 or g not in reference:
            continue
        c = np.asarray(reference[g])
        if not (c.size and np.min(c) > 0):
            continue
        for n, p0, p1 in lines:
            if any(m != n and _dominates(m, q0, q1, n, p0, p1) for m, q0, q1 in lines):
                pruned.add(n)
    return frozenset(pruned)


def _dominates(j: str, q0: float, q1: float, i: str, p0: float, p1: float) -> bool:
    """Whether line j (q0 at x = 0, q1 at x = 1) makes line i redundant: j carries load and i
    is at most (1 - PRUNE_MARGIN) of it at both ends; a split-dependent i only for a
    split-dependent j, of the other direction or at least PRUNE_SLOPE as steep."""
    if max(q0, q1) <= 0 or p0 > (1 - PRUNE_MARGIN) * q0 or p1 > (1 - PRUNE_MARGIN) * q1:
        return False
    si, sj = SLOPE_SIGN[i], SLOPE_SIGN[j]
    if si == 0:
        return True
    if sj == 0:
        return False
    return si != sj or abs(q1 - q0) >= PRUNE_SLOPE * abs(p1 - p0)


# Work arrays reused from call to call (a sweep solves chunk after chunk of one size): each
# pass writes into memory already mapped instead of a fresh array that the allocator maps,
# faults in and hands back to the OS. Per thread, for the latest shape, up to this size.
_SCRATCH = threading.local()
SCRATCH_MAX_SIZE = 1 << 20


def _scratch(shape: tuple[int, ...], i: int, dtype: type = np.float64) -> np.ndarray | None:
    """The i-th work array of ``shape`` (None: allocate, for scalars and very large arrays).
    Never part of a result."""
    size = math.prod(shape)
    if not shape or size > SCRATCH_MAX_SIZE:
        return None
    pool: tuple[tuple[int, ...], dict[tuple[int, str], np.ndarray]] | None
    pool = getattr(_SCRATCH, "pool", None)
    if pool is None or pool[0] != shape:
        pool = _SCRATCH.pool = (shape, {})
    arrays: dict[tuple[int, str], np.ndarray] = pool[1]
    key = (i, np.dtype(dtype).char)
    if key not in arrays:
        arrays[key] = np.empty(shape, dtype)
    return arrays[key]


Term = Callable[[np.ndarray | None], Num]


def _fold(
    op: np.ufunc, terms: Sequence[Term], shape: tuple[int, ...], out: np.ndarray | None
) -> FloatArray:
    """functools.reduce(op, [term() ...]) with every term computed into one reused work array
    and the running result kept in ``out`` (the same values, in the same order)."""
    work = _scratch(shape, 0)
    acc: Num = terms[0](out)
    for term in terms[1:]:
        acc = op(acc, term(work), out=out) if out is not None else op(acc, term(None))
    return np.asarray(acc)


@record
class _Line:
    """A split-dependent line u(x) = a + b x, with |b| (every split bound divides by it:
    computed once per line, not once per bound)."""

    a: Num
    b: Num
    size: Num


def _line(a: Num, b: Num, work: np.ndarray | None) -> _Line:
    """|b|, not -b, for a falling line: one with no load has b = +0, and -0.0 would turn "no
    bound" (-inf) into "x >= inf". Into ``work`` where b has its shape (lines live only while
    one solve runs)."""
    fits = work is not None and np.shape(b) == work.shape
    return _Line(a, b, np.abs(b, out=work) if fits else np.abs(b))


def _into(op: np.ufunc, x: Num, y: Num, out: np.ndarray | None) -> Num:
    """op(x, y), into ``out`` where the result has its shape (a line of one side over a grid
    of P and D varies along that side's axis only: computed there, broadcast later)."""
    if out is not None and np.broadcast(x, y).shape == out.shape:
        return op(x, y, out=out)
    return op(x, y)


def _is_zero(v: Num) -> bool:
    return np.ndim(v) == 0 and float(v) == 0.0


def _highest_crossing(r: _Line, falling: Sequence[_Line], shape: tuple[int, ...]) -> Term:
    """The highest of rising line r's crossings with the falling lines, as at most t*: r
    crosses f at x_rf = (a_f - a_r)/(b_r - b_f), and r rises, so its highest crossing is r
    at the largest x_rf, taken in [0, 1]: every crossing inside [0, 1] is at most that, and
    that is at most t* (a crossing beyond 1 leaves r below that falling line at x = 1,
    u_r(1) < u_f(1), an endpoint term; one below 0 leaves u_r(0), another). One division per
    pair and one evaluation per rising line, where each pair's height took two products
    more."""
    origin = _is_zero(r.a)  # a line through the origin: x_rf = a_f / (b_r - b_f)

    def term(out: np.ndarray | None) -> Num:
        work = (_scratch(shape, 7), _scratch(shape, 8)) if out is not None else (None, None)
        top: Num | None = None
        for f in falling:
            num = f.a if origin else _into(np.subtract, f.a, r.a, work[0])
            den = _into(np.subtract, r.b, f.b, work[1])
            x = _into(np.divide, num, den, out if top is None else work[0])
            top = x if top is None else _into(np.fmax, top, x, out)
        assert top is not None
        # ``top`` is ``out`` or an array of its own (a division's): changed in place.
        at = np.asarray(top, dtype=np.float64)
        own = at if at.ndim else None
        at = np.clip(at, 0.0, 1.0, out=own)
        height = _into(np.multiply, r.b, at, own)
        return height if origin else _into(np.add, r.a, height, own)

    return term


def _value(v: Num) -> Term:
    return lambda out: v


def _sum(a: Num, b: Num, shape: tuple[int, ...]) -> Term:
    """a + b, at its own shape where that is smaller than the scenarios' (see _into)."""
    small = np.broadcast(a, b).shape != shape
    return lambda out: a + b if out is None or small else np.add(a, b, out=out)


def _level(t: FloatArray, slot: int) -> FloatArray:
    """t + 1e-12 |t|: the height the split bounds hold the lines to, with an allowance for
    rounding (in a work array: it lives only while one set of bounds is computed)."""
    work = _scratch(np.shape(t), slot)
    if work is None:
        return np.asarray(t + 1e-12 * np.abs(t))
    np.abs(t, out=work)
    np.multiply(1e-12, work, out=work)
    return np.add(t, work, out=work)


def _max_into(values: Sequence[Num], out: np.ndarray | None) -> FloatArray:
    """_max(values), folded into ``out`` where every value fits it (no array per step)."""
    if out is None or len(values) < 2 or any(np.shape(v) != out.shape for v in values[:2]):
        return _max(values)
    np.fmax(values[0], values[1], out=out)
    for v in values[2:]:
        np.fmax(out, v, out=out)
    return out


def _max(values: Sequence[Num]) -> FloatArray:
    return np.asarray(functools.reduce(np.fmax, values))


def _split_low(falling: Sequence[_Line], level: FloatArray) -> FloatArray:
    """The least x in [0, 1] with every falling line at most ``level``: x >= (a - level)/|b|."""
    shape = np.shape(level)

    def bound(f: _Line) -> Term:
        def term(out: np.ndarray | None) -> Num:
            return _into(np.divide, _into(np.subtract, f.a, level, out), f.size, out)

        return term

    first: list[Term] = [lambda out: np.float64(0.0)]
    with np.errstate(divide="ignore", invalid="ignore"):
        lo = _fold(np.fmax, first + [bound(f) for f in falling], shape, _scratch(shape, 2))
    return np.clip(lo, 0.0, 1.0)


def _split_high(rising: Sequence[_Line], level: FloatArray, lo: FloatArray) -> FloatArray:
    """The greatest x in [lo, 1] with every rising line at most ``level``: x <= (level - a)/|b|
    (lo where even that is above them: the range is never empty)."""
    shape = np.shape(level)

    def bound(r: _Line) -> Term:
        def term(out: np.ndarray | None) -> Num:
            return _into(np.divide, _into(np.subtract, level, r.a, out), r.size, out)

        return term

    first: list[Term] = [lambda out: np.float64(1.0)]
    with np.errstate(divide="ignore", invalid="ignore"):
        hi = _fold(np.fmin, first + [bound(r) for r in rising], shape, _scratch(shape, 2))
    return np.clip(np.fmax(hi, lo), 0.0, 1.0)


def _envelope_lines(
    alpha: dict[str, Num], beta: dict[str, Num], shape: tuple[int, ...]
) -> tuple[list[_Line], list[_Line]]:
    """The rising and falling lines, with exact merges: rising lines through the origin
    (alpha = 0: a link only the DE path loads) are dominated by the steepest of them, falling
    lines through (1, 0) (alpha + beta = 0: only the PE path loads it) by the highest. Fewer
    lines, fewer crossings and split bounds, the same maximum and range: a merged line's
    bound is the tightest of its lines' (x <= t/b over the origin lines is t over the
    largest b; x >= (a - t)/a over the lines through (1, 0) is 1 - t over the largest a).
    ``shape``: the scenarios'; the lines' arrays of that shape are work arrays."""
    slots = iter(range(20, 20 + 2 * len(LINKS) + 4))

    def work() -> np.ndarray | None:
        return _scratch(shape, next(slots))

    rising: list[_Line] = []
    origin: list[Num] = []
    for r in RISING:
        if r not in alpha:
            continue
        if _all_zero(alpha[r]):
            origin.append(beta[r])
        else:
            rising.append(_line(alpha[r], beta[r], work()))
    if origin:
        steepest = _max_into(origin, work())
        rising.append(_line(np.float64(0.0), steepest, work()))
    falling: list[_Line] = []
    pivot: list[Num] = []
    for f in FALLING:
        if f not in alpha:
            continue
        if _sum_all_zero(alpha[f], beta[f], shape):
            pivot.append(alpha[f])
        else:
            falling.append(_line(alpha[f], beta[f], work()))
    if pivot:
        top = _max_into(pivot, work())  # alpha >= 0 (a load over a capacity)
        down = work()
        fits = down is not None and np.shape(top) == down.shape
        # Its size |b| is |top|, not top: a -0.0 there would turn "no bound" into x >= inf.
        size = np.abs(top, out=work()) if fits else np.abs(top)
        falling.append(_Line(top, np.negative(top, out=down) if fits else -top, size))
    return rising, falling


def _require_capacity(links: LinkSet) -> None:
    """Every loaded link's capacity is a number >= 0 in every scenario, and > 0 for a
    split-dependent one, or a ValueError naming the link. A flat line on no capacity is
    infinite at every split (the throughput 0: how an infeasible point's decode or batch
    limit reads); a split-dependent one is infinite except where the split empties it (x = 1
    for a PE-path link, 0 for a DE-path one), a constraint these lines cannot state: it
    evaluates to NaN there (inf - inf, inf x 0), which the maxima skip (pe_snic_read of
    capacity 0 gave an infinite throughput), as they skip a NaN capacity. Profiles admit
    neither (every rate is at least 1e-9): only a link set built by hand reaches this. One
    reduction per scaling group (its members are finite k > 0 times one array: one member's
    least value has the sign of every member's, NaN included) and per capacity outside one
    (min keeps a NaN)."""
    checked: dict[object, float] = {}
    for n in LINKS:
        c = links.capacity[n]
        a, b = links.load[n]
        if not (_any(a) or _any(b)):
            continue
        s = links.scaling.get(n)
        k = float(s.k) if s is not None and s.capacity is c and np.ndim(s.k) == 0 else math.nan
        key: object = (s.group if s is not None else None) if 0 < k < math.inf else id(c)
        low = checked.get(key)
        if low is None:
            low = checked[key] = float(np.min(c)) if np.size(c) else 1.0
        if not (low > 0 or (low == 0 and SLOPE_SIGN[n] == 0)):
            raise ValueError(
                f"link {n}: capacity {low:g} where it carries load (a capacity is > 0, or 0 "
                "for a link whose load does not depend on the split)"
            )


def solve(links: LinkSet, prune: bool = True) -> Solution:
    """Throughput, split and utilization for the link set's split rule, vectorized over every
    input array. ``prune=False`` solves every line (the reference the pruning is tested
    against). Every loaded link's capacity must be above 0 (``_require_capacity``)."""
    _require_capacity(links)
    pruned = _prune(links) if prune else frozenset()
    alpha, beta = _seconds_per_turn(links, [n for n in LINKS if n not in pruned])
    return _solve_lines(links, alpha, beta, links if pruned else None)


def solve_each(link_sets: Sequence[LinkSet]) -> list[Solution]:
    """``solve`` of each link set as it gives it alone, in one solve per kind of link set:
    the perturbed clusters of the intervals (a few dozen one-point link sets, each a few
    hundred NumPy operations on single numbers) and a sweep's combinations of profile values
    (link sets over one grid of P and D, each some hundred operations on it).

    Stacked, each link set is an element of a new leading axis, and every step of the closed
    form is elementwise (+, -, x, /, fmax, fmin, clip: the same rounding on an array as on a
    number, INV-10). The stack drops the lines every link set's pruning drops (a line dropped
    or not changes no bit, INV-28: one-point link sets, whose pruning differs from set to
    set, are solved unpruned). What is decided for the whole stack rather than per element
    is the split rule and the exact merges of lines through the origin or (1, 0)
    (``_envelope_lines``): link sets are stacked only with those of the same split rule that
    merge the same lines alone (a kind; the oracle's free I/O merges more than basic), and
    only where each one's answer has the stack's shape (else each is solved alone)."""
    n = len(link_sets)
    if n < 2:
        return [solve(ls) for ls in link_sets]
    rules = [ls.split for ls in link_sets]
    if len(set(rules)) > 1:
        return _apart(link_sets, rules)
    found = _stacked(link_sets)
    if found is None:
        return [solve(ls) for ls in link_sets]
    stacked, points = found
    try:  # the stack's loads are every set's: where it holds, each set does
        _require_capacity(stacked)
    except ValueError:
        for ls in link_sets:  # each refused as alone, the first set's link named
            _require_capacity(ls)
    own = [frozenset()] * n if points else [_prune(ls) for ls in link_sets]
    pruned = frozenset.intersection(*own)
    kept = [name for name in LINKS if name not in pruned]
    alpha, beta = _seconds_per_turn(stacked, kept)
    merges = _merges(alpha, beta, n).tolist()
    if len(set(merges)) > 1:
        return _apart(link_sets, merges)
    sol = _solve_lines(stacked, alpha, beta, None)
    full = np.shape(sol.throughput_turns_per_s)
    if full[:1] != (n,) or not (
        points
        or all(
            _answer_shape(ls, [name for name in LINKS if name not in dropped]) == full[1:]
            for ls, dropped in zip(link_sets, own, strict=True)
        )
    ):  # lines alike in every set (no stack axis), or an answer of another shape alone
        return [solve(ls) for ls in link_sets]
    mask = sol.binding_mask
    # One-point sets: each element's utilization is its row (elementwise, as it computes it
    # alone); over arrays, each set's on demand from its own lines.
    rows = sol.utilization if points else None
    return [
        _entry(sol, i, mask[i], None if rows is None else rows[i], ls if pruned else None)
        for i, ls in enumerate(link_sets)
    ]


def _apart(link_sets: Sequence[LinkSet], kinds: Sequence[object]) -> list[Solution]:
    """``solve_each`` of the link sets of each kind on their own, in the order given."""
    out: list[Solution | None] = [None] * len(link_sets)
    for kind in dict.fromkeys(kinds):
        at = [i for i, k in enumerate(kinds) if k == kind]
        for i, sol in zip(at, solve_each([link_sets[i] for i in at]), strict=True):
            out[i] = sol
    return [sol for sol in out if sol is not None]


def _stacked(link_sets: Sequence[LinkSet]) -> tuple[LinkSet, bool] | None:
    """The link sets as one over a new leading axis (one element per link set), without
    capacity groups: a value that is one number in every set (bit for bit) stays that
    number, any other is each set's broadcast to their common shape and stacked; and whether
    every set is one point (numbers alone). None where one set's value does not broadcast
    with another's."""
    n = len(link_sets)
    # The scenarios' axes, after the stack's: every value padded to as many (a number of one
    # set stacked with another's array, or the sets' P column with their D row).
    ndim = max(np.ndim(v) for ls in link_sets for v in _values(ls))

    def column(values: list[Num]) -> Num | None:
        first = values[0]
        if all(np.ndim(v) == 0 for v in values):
            a = np.array(values, dtype=np.float64)
            bits = a.view(np.int64)
            return first if bool(np.all(bits == bits[0])) else a.reshape((n,) + (1,) * ndim)
        padded = [np.asarray(v, np.float64) for v in values]
        padded = [v.reshape((1,) * (ndim - v.ndim) + v.shape) for v in padded]
        try:
            return np.stack(np.broadcast_arrays(*padded))
        except ValueError:  # shapes that do not broadcast
            return None

    load: dict[str, tuple[Num, Num]] = {}
    capacity: dict[str, Num] = {}
    for name in LINKS:
        a = column([ls.load[name][0] for ls in link_sets])
        b = column([ls.load[name][1] for ls in link_sets])
        c = column([ls.capacity[name] for ls in link_sets])
        if a is None or b is None or c is None:
            return None
        load[name], capacity[name] = (a, b), c
    first = link_sets[0]
    even: Num | None = 0.0
    if first.split == "even":
        even = column([ls.even_share for ls in link_sets])
    hit = column([ls.hit_bytes for ls in link_sets])
    if even is None or hit is None:
        return None
    stacked = LinkSet(load, capacity, first.split, even, hit)
    # Every value with the leading axis or none (a number): the entries are its slices.
    lead = {np.shape(v)[0] for v in _values(stacked) if np.ndim(v)}
    return (stacked, ndim == 0) if lead <= {n} else None


def _values(links: LinkSet) -> list[Num]:
    """Every number or array of a link set that its solve reads."""
    out: list[Num] = [links.even_share, links.hit_bytes]
    for name in LINKS:
        out += [*links.load[name], links.capacity[name]]
    return out


def _answer_shape(links: LinkSet, kept: Sequence[str]) -> tuple[int, ...]:
    """The shape ``solve`` gives the link set alone: its lines' (``kept``, those its pruning
    keeps; a line of no load is a number, ``_per_capacity``) and the even share."""
    shapes: set[tuple[int, ...]] = set()  # a few distinct ones: broadcast once
    for name in kept:
        c = links.capacity[name]
        for load in links.load[name]:
            if not (np.ndim(load) == 0 and float(load) == 0.0):
                shapes.add(np.shape(load))
                shapes.add(np.shape(c))
    if links.split == "even":
        shapes.add(np.shape(links.even_share))
    return np.broadcast_shapes(*shapes)


def _merges(alpha: dict[str, Num], beta: dict[str, Num], n: int) -> np.ndarray:
    """Per link set of a stack of ``n`` (the leading axis), which lines ``_envelope_lines``
    merges where it is solved alone: a bit per rising line with alpha = 0 and per falling
    line with alpha + beta = 0, in every element of the set."""
    # Every array has the leading axis; where every line is a number, each set's is it.
    shape = np.broadcast(*alpha.values(), *beta.values()).shape or (n,)
    bits = np.zeros(n, dtype=np.int64)
    lines = [np.asarray(alpha[r]) == 0 for r in RISING if r in alpha]
    lines += [np.asarray(alpha[f]) + np.asarray(beta[f]) == 0 for f in FALLING if f in alpha]
    for i, zero in enumerate(lines):
        each = np.broadcast_to(zero, shape).reshape(n, -1).all(axis=1)
        bits |= each.astype(np.int64) << i
    return bits


def _entry(
    sol: Solution,
    i: int,
    mask: np.ndarray,
    utilization: np.ndarray | None,
    links: LinkSet | None,
) -> Solution:
    """Link set i of a solution over a stack (``_stacked``: every array has the leading
    axis), as its own solution: each array's slice, every line the stack solved, its binding
    mask and (one-point sets) its row of the utilization, already computed; ``links``: the
    set itself, for the lines the stack dropped (their utilization on demand)."""

    def at(v: Num) -> Num:
        return np.asarray(v)[i] if np.ndim(v) else v

    one = Solution(
        split=sol.split,
        throughput_turns_per_s=sol.throughput_turns_per_s[i, ...],
        decode_path_fraction=sol.decode_path_fraction[i, ...],
        split_low=sol.split_low[i, ...],
        split_high=sol.split_high[i, ...],
        _alpha={name: at(v) for name, v in sol._alpha.items()},
        _beta={name: at(v) for name, v in sol._beta.items()},
        _t=sol._t[i, ...],
        _links=links,
    )
    vars(one)["binding_mask"] = mask  # the cached_properties' own slots
    if utilization is not None:
        vars(one)["utilization"] = utilization
    return one


def _solve_lines(
    links: LinkSet, alpha: dict[str, Num], beta: dict[str, Num], pruned_from: LinkSet | None
) -> Solution:
    """The closed form over the lines ``alpha``, ``beta`` of ``links``' links (all of them, or
    those the pruning kept: ``pruned_from`` then gives the others' utilization on demand)."""
    if links.split == "optimal":
        shape = np.broadcast(*alpha.values(), *beta.values()).shape
        rising, falling = _envelope_lines(alpha, beta, shape)
        terms: list[Term] = [_value(r.a) for r in rising]
        terms += [_sum(f.a, f.b, shape) for f in falling]
        if falling:
            terms += [_highest_crossing(r, falling, shape) for r in rising]
        with np.errstate(divide="ignore", invalid="ignore"):
            t_var = _fold(np.fmax, terms, shape, _scratch(shape, 3))
        flat = [alpha[k] for k in FLAT if k in alpha]
        t = np.fmax(t_var, _max_into(flat, _scratch(shape, 6))) if flat else np.array(t_var)
        # The balanced split: the least x with every falling line at most t_var. Where no
        # flat line is above the lines (t = t_var: the I/O binds), it is also the range's
        # low end, computed once.
        level = _level(t_var, 5)
        balanced = _split_low(falling, level)
        if np.array_equal(t, t_var):
            lo = balanced
        else:
            level = _level(t, 9)
            lo = _split_low(falling, level)
        hi = _split_high(rising, level, lo)
        x = np.clip(balanced, lo, hi)
    else:
        x = np.asarray(links.even_share if links.split == "even" else 0.0, dtype=np.float64)
        t = _max([alpha[n] + beta[n] * x for n in alpha])
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
        _links=pruned_from,
    )
