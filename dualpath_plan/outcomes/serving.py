"""Outcomes: offline JCT, online APS under TTFT/TPOT SLOs, TTFT, TPOT, per mode.

The path model (physics/links.py, solvers/closed_form.py) gives the most turns/s a cluster
sustains. This layer adds the prefill batching, the decode batch and the queueing that turn a
capacity into latencies (docs/model.md section 6):

Prefill on one GPU (paper Figure 3 right): a forward pass of b requests takes
    tau(b) = t0 + b u,   t0 = h t1,   u = t1 + s,
with t1 = F / (peak x prefill_mfu) the compute of one request, h = prefill_batch_half_requests
and s the copy of its KV into HBM when that is not overlapped with compute (no layer-wise
prefill: the paper's Basic). The batch is capped by HBM: the whole KV of the batch without
layer-wise prefill, one layer's KV with it. Throughput per GPU is b / tau(b) = b / (t1 (b + h))
without the copy: 3x from b = 1 to 20 for h = 2.35.

Offline (N agents start together, paper 7.2): a closed system drained by its stragglers. While
n agents are running, each takes a turn every max(cycle_min, n / T_max) (the asymptotic bounds
of a closed system), with cycle_min = TTFT_min + generated x TPOT + tool latency, the
per-agent critical path. Agents progress together, so after k turns n = N S(k) are left, S the
survival function of turns per trajectory, and
    JCT = integral over k of max(cycle_min x P(any left), N S(k) / T_max),
P(any left) = 1 - (1 - S(k))^N (the expected longest of N trajectories). With every
trajectory of the mean length this is N x turns / min(T_max, N / cycle_min).

Online (Poisson agent arrivals, paper 7.3): turns arrive at lambda_t = APS x turns. Prefill
is a gated batch-service queue: a request waits for the running batch (mean residual tau/2)
and then its own batch, and the steady batch is b = lambda_g t0 / (1 - lambda_g u); near the
batch cap B it also waits for later batches (Kingman: W_B = rho/(1-rho) tau(B)/(2B), rho
against the capped rate B / tau(B)); so
    TTFT = R + 1.5 tau(b) + W_B + W_io,
R the part of the KV read not hidden behind compute, W_io the M/D/1 wait of the binding I/O
link (one node serves a turn's read), lambda_g the arrival rate at the busiest GPU. TPOT is
the decode step at the decode batch b_d = lambda_t x generated x TPOT (Little). APS is the
largest rate with TTFT <= SLO and TPOT <= SLO, found by a bracketing search, and at most U x T_max /
turns: a planner's headroom, the busiest link's utilization capped at U (max_utilization).
The online model lives in outcomes/online.py, vectorized, so that ``sweep`` runs the same one
over arrays of clusters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field, fields
from fractions import Fraction
from itertools import pairwise
from typing import NamedTuple

import numpy as np

from dualpath_plan.errors import InfeasibleError, PlanInputError
from dualpath_plan.formatting import number, plain
from dualpath_plan.frozen import record
from dualpath_plan.memo import IdentityMemo
from dualpath_plan.outcomes.limits import LinkLimit, link_limits
from dualpath_plan.outcomes.online import (
    KvMoves,
    OnlineAps,
    kv_move_s,
    light_load_s,
    online_aps,
    online_aps_each,
    online_queue,
)
from dualpath_plan.outcomes.read_choice import read_scenario
from dualpath_plan.physics import model as phys
from dualpath_plan.physics.engines import DecodeGroup, PrefillEngine
from dualpath_plan.physics.links import LINK_INDEX, LINK_TABLE, LINKS, Num
from dualpath_plan.physics.modes import MODE_TABLE, REPORT_MODES, ModeName
from dualpath_plan.physics.workload import TurnCounts, trajectory_tokens
from dualpath_plan.scenario.assemble import Assembly, SideMemo, assemble
from dualpath_plan.scenario.bundle import Scenario
from dualpath_plan.scenario.feasibility import check_feasible
from dualpath_plan.scenario.spec import ServingConfig
from dualpath_plan.solvers.closed_form import Solution, solve, solve_each

OutcomeMode = ModeName


@record
class ModeOutcome:
    mode: OutcomeMode
    # Offline, the rate the N agents run at while all run: min(T, N / cycle_min)
    # (``operating_rate``); at most the saturated rate, below it where the agents are too few.
    throughput_turns_per_s: float
    saturated_turns_per_s: float  # T: the most turns/s the cluster sustains (the path model)
    jct_s: float  # offline, N agents
    drain_s: float  # of the JCT, time beyond N x turns / throughput: stragglers, critical path
    aps: float  # online agents/s: under both SLOs and the utilization cap (0: no rate meets them)
    # Offline TTFT, the closed system's (``offline_ttft``): the mean over every turn of the run,
    # the drain included, and over the saturated span (the turns done from 10% to 50% of all)
    ttft_s: float
    ttft_span_s: float
    # Offline TPOT, (done - first token) / generated turn-weighted over the run: the decode step
    # at the operating point's batch and, where the decode group binds, the wait for a slot
    tpot_s: float
    decode_wait_s: float  # offline, the mean wait for a decode slot (0 unless decode binds)
    online_ttft_s: float  # at the APS
    online_tpot_s: float
    binding: tuple[str, ...]  # the tight links at the optimum (all of them on a tie)
    limits: dict[str, LinkLimit]  # every link: capacity, load, unit, what derates it
    decode_path_fraction: float
    utilization: dict[str, float]
    prefill_batch: float  # requests per forward pass per GPU offline
    decode_batch: float  # sequences decoding offline while all N agents run (tpot_s: over the run)
    working_set_gbyte: float  # online KV working set at the APS (Little's law, paper 2.5)
    latency_bound: bool  # offline JCT set by the per-agent critical path, not throughput
    aps_limit: str  # what stops a higher APS: ttft, tpot, throughput, utilization, unreachable
    slo_aps: float  # agents/s under both SLOs alone, without the utilization cap
    binding_utilization: float  # the busiest link's utilization at the APS: turns/s over T
    # With a store of finite size: the share of the turns' cached context this mode reads, the
    # rest recomputed where that is faster (outcomes/read_choice.py); None without a store.
    read_share: float | None = None

    @property
    def bottleneck(self) -> str:
        """The binding links as one label ("a + b" on a tie)."""
        return " + ".join(self.binding)


@record
class Saturated:
    """The most turns/s a mode sustains (offline, saturated), over arrays of P and D: the one
    assembly of the cluster and its closed-form optimum."""

    assembly: Assembly
    solution: Solution

    @property
    def prefill(self) -> PrefillEngine:
        assert self.assembly.pe.prefill is not None
        return self.assembly.pe.prefill

    @property
    def feasible(self) -> np.ndarray:
        return self.assembly.feasible


def saturated(
    sc: Scenario,
    mode: OutcomeMode,
    prefill_nodes: Num,
    decode_nodes: Num,
    sides: SideMemo | None = None,
) -> Saturated:
    """The path model's optimum for the mode, vectorized over ``prefill_nodes`` and
    ``decode_nodes`` (used by size, recommend, sweep); ``sides``: assemble's."""
    asm = assemble(sc, mode, prefill_nodes, decode_nodes, sides)
    return Saturated(asm, solve(asm.links))


def saturated_each(
    scenarios: Sequence[Scenario], mode: OutcomeMode, prefill_nodes: Num, decode_nodes: Num
) -> list[Saturated]:
    """``saturated`` of each scenario over the same clusters (a sweep's combinations of
    profile values over one grid of P and D), their link sets solved at once
    (``closed_form.solve_each``: each as it is alone, bit for bit, INV-56)."""
    built = [assemble(sc, mode, prefill_nodes, decode_nodes) for sc in scenarios]
    solved = solve_each([asm.links for asm in built])
    return [Saturated(asm, sol) for asm, sol in zip(built, solved, strict=True)]


# The ramp of S (a uniform's tail) in this many equal pieces of S, each at the load-dependent
# cycle of its midpoint's running agents (``offline_jct_s`` with a ``ClosedCycle``).
RAMP_PIECES = 8
# Points x pieces up to which the ramp's pieces are evaluated at once (a few clusters: the
# intervals' perturbed ones, 15 calls one by one), beyond which piece by piece (a sweep's chunk,
# whose temporaries would take the pieces' times the memory).
_PIECES_AT_ONCE = 1 << 12


def offline_jct_s(
    agents: Num,
    t_max: Num,
    cycle_min: Num,
    counts: TurnCounts,
    cycle_at: ClosedCycle | None = None,
) -> Num:
    """Offline JCT of N agents started together (docs/model.md section 6): over the turn
    index k, turns take max(cycle_min x P(any left), N S(k) / T_max) each, P(any left) =
    1 - (1 - S)^N. Exact: a sum over the steps of S, and the integral over its linear ramp in
    closed form. Vectorized over agents, t_max and cycle_min. A step of no turns adds
    nothing (the uniform turn counts of a spread of 1 start with one): it is skipped, so
    where T_max = 0 the JCT is inf (no turns are ever served) rather than NaN. ``cycle_at``:
    the critical path rises with the agents running (``ClosedCycle``): a step of S takes the
    cycle of its N S agents, the ramp ``RAMP_PIECES`` pieces each its midpoint's."""
    n = np.asarray(agents, dtype=np.float64)
    t = np.asarray(t_max, dtype=np.float64)
    c = np.asarray(cycle_min, dtype=np.float64)
    r = n / t  # seconds per turn while all N run
    total = np.zeros(np.broadcast(n, t, c).shape)
    steps, top, pieces = _run_pieces(counts)
    at_once = total.size * RAMP_PIECES <= _PIECES_AT_ONCE
    # The cycle at each step's and (piece by piece) each ramp piece's running agents, asked
    # at once (ClosedCycle.each: the same values as one by one).
    asked = [n * share for _, share in steps]
    if counts.ramp_turns > 0 and not at_once:
        asked += [n * (lo + hi) / 2 for lo, hi in pieces]
    cycles = iter(cycle_at.each(asked)) if cycle_at is not None else None
    for length, share in steps:
        # (x 1.0 is x to the bit: skipped for the first step, where every agent is left)
        any_left = -np.expm1(n * np.log1p(-share)) if share < 1.0 else None
        cs = c if cycles is None else next(cycles)
        bound = cs if any_left is None else cs * any_left
        total += length * np.maximum(bound, r if share == 1.0 else r * share)
    if counts.ramp_turns > 0:
        if cycle_at is None or cycles is None:
            ramp = _ramp_integral(n, r, c, top)  # a new array of the full shape: scaled in place
        else:
            # Each piece in one pass at its own cycle (``_ramp_piece``).
            ramp = np.zeros(total.shape)
            if at_once:
                # Every piece at once, on a leading axis (each element as piece by piece).
                axes = max(total.ndim, cycle_at.ndim)
                lead = (RAMP_PIECES,) + (1,) * axes
                sums = np.array([lo + hi for lo, hi in pieces]).reshape(lead)
                cj = cycle_at(n * sums / 2)
                lows = np.array([lo for lo, _ in pieces]).reshape(lead)
                highs = np.array([hi for _, hi in pieces]).reshape(lead)
                each = _ramp_piece(n, r, cj, lows, highs)
                for j in range(RAMP_PIECES):  # summed in the pieces' order
                    ramp += each[j]
            else:
                for lo, hi in pieces:
                    cj = next(cycles)
                    ramp += _ramp_piece(n, r, cj, lo, hi)
        ramp *= counts.ramp_turns / top
        total += ramp
    return float(total) if total.ndim == 0 else total


def _run_pieces(
    counts: TurnCounts,
) -> tuple[list[tuple[float, float]], float, list[tuple[float, float]]]:
    """The turn index of a run in the pieces the offline JCT and TPOT sum over: the steps of S
    (their turn indices and S; a step of none skipped), the ramp's top S, and its
    ``RAMP_PIECES`` equal pieces of S below that, (lo, hi)."""
    steps = [
        (float(length), float(share))
        for length, share in zip(counts.length, counts.surviving, strict=True)
        if length != 0
    ]
    top = float(counts.surviving[-1]) if counts.surviving.size else 1.0
    edges = [top * j / RAMP_PIECES for j in range(RAMP_PIECES + 1)]
    return steps, top, list(pairwise(edges))


# The saturated span of an offline run: the turns done from 10% to 50% of all turns (most agents
# still run; the drain after it is the stragglers'). The simulation measures its throughput and
# span TTFT over it, the analytical model averages its closed-system TTFT over it.
SATURATED_SPAN = (Fraction(1, 10), Fraction(1, 2))


def saturated_span_turns(total: int) -> tuple[int, int]:
    """The turns done at the saturated span's start and end (at least one turn apart)."""
    lo = int(total * SATURATED_SPAN[0])
    return lo, max(int(total * SATURATED_SPAN[1]), lo + 1)


@record
class OfflineTtft:
    """The closed system's TTFT, turn-weighted: over the whole run and the saturated span."""

    whole_run_s: float
    span_s: float


def offline_ttft(
    agents: float, t_max: float, floor_s: float, decode_s: float, counts: TurnCounts
) -> OfflineTtft:
    """The mean TTFT of N agents started together (docs/model.md section 6). While n = N S(k)
    agents run, a turn's cycle is max(n / T, cycle_min) (the JCT's asymptotic bounds), of
    which ``decode_s`` (generated x TPOT + tool latency) is not TTFT: TTFT(S) = max(a S - b, f),
    a = N / T, b = ``decode_s``, f = ``floor_s`` (at most the light-load TTFT below the cycle's
    lower bound). Turn index k holds N S(k) turns, so a mean over turns weighs TTFT(S(k)) by
    S(k): over the whole run (the drain's short waits included) and over the turns done from
    10% to 50% of all (``SATURATED_SPAN``: fewer agents than N run there, as some have
    finished, so the span's cycle is below N / T). Exact: the steps of S are sums, its linear
    ramp the closed-form integral of S max(a S - b, f)."""
    a, b, f = agents / t_max, decode_s, floor_s
    kink = (b + f) / a if a > 0 else math.inf  # where a S - b crosses the floor

    def ttft(s: float) -> float:
        return max(a * s - b, f)

    def area(s: float) -> float:
        """Integral from 0 to s of S TTFT(S) dS."""
        x = min(s, kink)
        out = f * x * x / 2
        if s > x:
            out += a * (s**3 - x**3) / 3 - b * (s * s - x * x) / 2
        return out

    # Pieces of the turn index: (turns, S at start, S at end), steps flat, the ramp falling.
    pieces = [
        (float(n), float(s), float(s))
        for n, s in zip(counts.length, counts.surviving, strict=True)
        if n > 0
    ]
    top = float(counts.surviving[-1]) if counts.surviving.size else 1.0
    if counts.ramp_turns > 0 and top > 0:
        pieces.append((float(counts.ramp_turns), top, 0.0))
    mean = counts.mean
    lo, hi = (float(x) * mean for x in SATURATED_SPAN)

    def between(c0: float, c1: float) -> float:
        """Integral of S TTFT(S) dk over the turns done from c0 to c1 (in mean turns)."""
        done, out = 0.0, 0.0
        for n, s0, s1 in pieces:
            here = n * (s0 + s1) / 2  # turns per agent done in this piece
            u0, u1 = max(c0 - done, 0.0), min(c1 - done, here)
            done += here
            if u1 <= u0:
                continue
            if s0 == s1:
                out += (u1 - u0) * ttft(s0)
                continue
            # On the ramp S falls linearly over n turns: turns done to S is n (s0^2 - S^2) /
            # (2 s0), and dk = n / s0 dS.
            hi_s = math.sqrt(max(s0 * s0 - 2 * s0 * u0 / n, 0.0))
            lo_s = math.sqrt(max(s0 * s0 - 2 * s0 * u1 / n, 0.0))
            out += n / s0 * (area(hi_s) - area(lo_s))
        return out

    whole = between(0.0, mean) / mean if mean > 0 else f
    span = between(lo, hi) / (hi - lo) if hi > lo else f
    return OfflineTtft(whole, span)


def offline_tpot_s(
    agents: float,
    t_max: float,
    counts: TurnCounts,
    cycle_at: ClosedCycle,
    group: DecodeGroup,
    generated: float,
    decode_waits: bool,
    held_s: float = 0.0,
) -> tuple[float, float]:
    """The mean TPOT of N agents started together, turn-weighted over the run as the
    simulation's mean over every turn is (docs/model.md section 6, "TPOT over the run"). While
    n = N S(k) agents run, turns go at x = min(T, n / c(n)) (c the load-dependent cycle,
    ``cycle_at``), the decode batch is Little's at x (at most n and the HBM's), and a token
    takes the step at that batch. Where the decode group binds, the closed system's wait beyond
    the cycle's own parts, n / x - r - g TPOT (r the lone turn's TTFT and the tool call), is at
    the decode slots, less ``held_s`` (what the prefill side's queue holds, in TTFT), and a
    token's share of it is in TPOT (the second value: that wait, turn-weighted, a turn's).
    The steps of S each at their n, the ramp in
    ``RAMP_PIECES`` pieces at their midpoints', each weighed by the turns done in it. At the
    N agents alone (the TPOT before this form) a decode-bound cluster's TPOT was the HBM
    cap's step while the agents still running fall through the run, and with them the batch
    (Qwen2.5-32B DGX H100 4P1D, 128 agents: 32.1 ms against the simulation's 22.8 ms)."""
    steps, top, ramp = _run_pieces(counts)
    # (S, turns done per agent at it)
    pieces = [(share, length * share) for length, share in steps]
    if counts.ramp_turns > 0 and top > 0:
        pieces += [
            ((lo + hi) / 2, counts.ramp_turns / top * (hi * hi - lo * lo) / 2) for lo, hi in ramp
        ]
    rest = float(np.asarray(cycle_at.rest).reshape(-1)[0])
    # Every piece's cycle in one call (one cluster: the n values on its axis).
    ns = np.array([agents * share for share, _ in pieces])
    cycles = np.asarray(cycle_at(ns)).reshape(-1).tolist()
    total = waited = weight = 0.0
    for (share, turns), c in zip(pieces, cycles, strict=True):
        n = agents * share
        x = min(t_max, n / c) if c > 0 else t_max
        step = group.step_s(max(min(group.little_batch(x, generated), n), 1.0))
        wait = 0.0
        if decode_waits and generated > 0 and x > 0:
            wait = max(n / x - rest - generated * step - held_s, 0.0)
        total += turns * (step + wait / generated if generated > 0 else step)
        waited += turns * wait
        weight += turns
    if weight <= 0:
        return group.step_s(1.0), 0.0
    return total / weight, waited / weight


def offline_drain_s(jct_s: Num, agents: Num, t_max: Num, counts: TurnCounts) -> Num:
    """The part of an offline JCT beyond the throughput bound N x mean turns / T_max: the time
    the cluster runs below saturation (stragglers, and the critical path of too few agents)."""
    return np.maximum(jct_s - np.asarray(agents) * counts.mean / t_max, 0.0)


def _ramp_integral(
    n: np.ndarray, r: np.ndarray, c: np.ndarray, top: float | np.ndarray
) -> np.ndarray:
    """The integral over S from 0 to ``top`` of max(g, h), g = c (1 - (1 - S)^n) (concave,
    the critical path while any agent is left) and h = r S (the throughput bound). g starts
    above h iff c n > r; a concave g then crosses h at most once, at the S where g = h,
    found by Newton's method from the right (monotone for a concave difference).

    Three cases: h above g throughout (r top^2 / 2), g above h throughout (G(top), G(x) =
    c (x + expm1((n + 1) log1p(-x)) / (n + 1)) the integral of g from 0 to x), else a crossing
    at x (G(x) + r (top^2 - x^2) / 2). The transcendental part of G(top) depends on the agents
    alone: it is computed on ``n`` as given (one value per agents value where ``n`` is
    broadcast against ``r`` and ``c``), and the crossing's terms only where there is one
    (a small share of a sweep's points). ``top`` may be an array broadcast with them (the
    ramp's pieces at once)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        shape = np.broadcast(n, r, c, top).shape
        one = np.ndim(top) == 0 and top == 1.0
        n1 = n + 1
        g_top = -c * np.expm1(n * np.log1p(-top))
        below_throughout = c * n <= r
        rt = r if one else r * top  # (x 1.0 is x to the bit)
        # Neither below nor above throughout (g_top >= r top and not below): a crossing,
        # NaN included (no comparison holds).
        settled = np.greater_equal(g_top, rt)
        settled |= below_throughout
        # r top^2 / 2 (a halving is exact: x 0.5), then G(top) where not below throughout.
        out = rt * 0.5 if one else rt * top * 0.5
        if not (
            isinstance(out, np.ndarray)
            and out.shape == shape
            and out.dtype == np.float64
            and out.flags.c_contiguous
        ):
            out = np.array(np.broadcast_to(out, shape), dtype=np.float64, order="C")
        g_all = c * (top + np.expm1(n1 * np.log1p(-top)) / n1)
        np.copyto(out, g_all, where=~below_throughout)
        cross = np.flatnonzero(~settled)
        if cross.size == 0:
            return out
        na, ra, ca = (_flat_at(a, shape, cross) for a in (n, r, c))
        ta = top if np.ndim(top) == 0 else _flat_at(np.asarray(top), shape, cross)
        x = _crossing(na, ra, ca, 0.0, ta)
        g_x = ca * (x + np.expm1((na + 1) * np.log1p(-x)) / (na + 1))
        out.reshape(-1)[cross] = g_x + ra * (ta * ta - x * x) * 0.5  # a view: C-contiguous
        return out


def _crossing(n: np.ndarray, r: np.ndarray, c: np.ndarray, lo: Num, hi: Num) -> np.ndarray:
    """Where g = c (1 - (1 - S)^n) crosses h = r S in [lo, hi], for points known to have
    their crossing there (g above h at lo, below at hi): Newton's method from the right, from
    where h = c (or from hi), where g - h < 0; each iterate clipped to [lo, hi]. ``lo`` and
    ``hi``: numbers, or arrays of the points'."""
    x = np.minimum(hi, c / r)
    active: np.ndarray | None = None  # every point, on the first step
    for _ in range(_NEWTON_MAX_STEPS):  # on the points not yet converged only
        if active is None:
            xa, nx, rx, cx, lx, hx = x, n, r, c, lo, hi
        elif active.size == 0:
            break
        else:
            xa, nx, rx, cx = x[active], n[active], r[active], c[active]
            lx = lo if np.ndim(lo) == 0 else np.asarray(lo)[active]
            hx = hi if np.ndim(hi) == 0 else np.asarray(hi)[active]
        gone = _no_agent_left(nx * np.log1p(-xa))
        phi = cx * (1.0 - gone) - rx * xa
        slope = cx * nx * gone / (1.0 - xa) - rx
        step = np.where(slope < 0, phi / slope, 0.0)
        # clip to [lo, hi]: the larger of x - step and lo, then the smaller of it and hi
        moved = np.minimum(np.maximum(xa - step, lx), hx)
        going = np.abs(step) > 1e-13 + 1e-12 * moved
        if active is None:
            x, active = moved, np.flatnonzero(going)
        else:
            x[active] = moved
            active = active[going]
    return x


def _ramp_piece(n: np.ndarray, r: np.ndarray, c: np.ndarray, lo: Num, hi: Num) -> np.ndarray:
    """The integral over S from ``lo`` to ``hi`` (0 <= lo < hi <= 1; numbers, or arrays
    broadcast with the others: the ramp's pieces at once on a leading axis) of max(g, h), g
    and h as in ``_ramp_integral``, in one pass over the piece rather than as the integral to
    hi less the integral to lo (the ramp's pieces, each at its own cycle c). g - h is concave
    and 0 at S = 0, so on [lo, hi] it is h throughout where g starts below h (c n <= r) or
    where g is already at most h at lo > 0; g throughout where g is still at
    least h at hi; else g up to the crossing x, h after it: G(x) - G(lo) + r (hi^2 - x^2) / 2,
    G(x) = c (x + expm1((n + 1) log1p(-x)) / (n + 1)). What depends on the agents and the
    piece alone (g / c and G / c at lo and hi) is computed on them as given; the crossing's
    terms only where there is one (``_crossing``)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        shape = np.broadcast(n, r, c, lo, hi).shape
        below = c * n <= r
        n1 = n + 1
        unit_lo = lo + np.expm1(n1 * np.log1p(-lo)) / n1  # G(lo) / c
        unit_hi = hi + np.expm1(n1 * np.log1p(-hi)) / n1
        on_g = np.greater_equal(c * -np.expm1(n * np.log1p(-hi)), r * hi)  # g >= h at hi
        on_g &= ~below
        settled = on_g | below
        # g at most h already at lo (where lo > 0: at 0 both are 0)
        at_lo = np.less_equal(c * -np.expm1(n * np.log1p(-lo)), r * lo)
        settled |= at_lo if np.all(np.asarray(lo) > 0.0) else at_lo & (np.asarray(lo) > 0.0)
        out = np.where(on_g, c * (unit_hi - unit_lo), r * ((hi * hi - lo * lo) * 0.5))
        if out.shape != shape or not out.flags.c_contiguous:
            out = np.array(np.broadcast_to(out, shape), dtype=np.float64, order="C")
        cross = np.flatnonzero(~settled)
        if cross.size == 0:
            return out
        na, ra, ca, la, ha = (_flat_at(np.asarray(a), shape, cross) for a in (n, r, c, lo, hi))
        x = _crossing(na, ra, ca, la, ha)
        g_x = ca * (x + np.expm1((na + 1) * np.log1p(-x)) / (na + 1))
        g_lo = ca * _flat_at(np.asarray(unit_lo), shape, cross)
        out.reshape(-1)[cross] = (g_x - g_lo) + ra * (ha * ha - x * x) * 0.5
        return out


# (1 - x)^N below exp(-750) is 0 to the bit: the true value is under 1% of the least
# subnormal, so exp rounds it to 0, slowly (an underflow per element, most of a crossing's).
_EXP_ZERO_BELOW = -750.0


def _no_agent_left(log_gone: np.ndarray) -> np.ndarray:
    """exp(log_gone): (1 - x)^N, the chance no agent is left, from its logarithm; 0 where
    that is below ``_EXP_ZERO_BELOW`` without asking exp."""
    live = ~(log_gone <= _EXP_ZERO_BELOW)  # NaN too
    if live.all():
        return np.exp(log_gone)
    gone = np.zeros_like(log_gone)
    gone[live] = np.exp(log_gone[live])
    return gone


def _flat_at(a: np.ndarray, shape: tuple[int, ...], index: np.ndarray) -> np.ndarray:
    """The elements at flat ``index`` of ``a`` broadcast to ``shape``: for an array over
    some of the axes (the agents values, the D values), each index's place along those axes
    into ``a`` itself, without laying ``a`` out over the whole shape."""
    a = np.asarray(a, dtype=np.float64)
    if a.shape == shape:
        return a.reshape(-1)[index]
    if a.size == 1:  # one agents value
        return np.full(index.size, a.reshape(-1)[0])
    dims = (1,) * (len(shape) - a.ndim) + a.shape
    at: np.ndarray | None = None
    stride = within = 1  # of an axis over the shape, and over a
    for size, own in zip(reversed(shape), reversed(dims), strict=True):
        if own > 1:
            place = (index // stride if stride > 1 else index) % size
            place = place * within if within > 1 else place
            at = place if at is None else at + place
            within *= own
        stride *= size
    return a.reshape(-1)[at]


# Newton steps for the crossing in _ramp_integral, at most: from the right of the root of a
# concave difference the iterates fall monotonically; from c / r they land within (1 - S)^N of
# it in one step where many agents are left, and converge quadratically. Where c N only just
# exceeds r the root is near 0 and the first steps merely halve the distance (about 40 steps
# for 1e-12), hence the loop stops once every step is below 1e-12 of x.
_NEWTON_MAX_STEPS = 100


# What a mode's offline outcome of one cluster rests on: its saturated optimum, the saturated
# throughput, the offline JCT, the per-agent cycle while the N agents run (``closed_cycle``)
# and a lone turn's TTFT (``light_load``).
Offline = tuple[Saturated, float, float, float, float]


@record
class ModeCore:
    """What a mode's outcome rests on, for one cluster: its saturated optimum, the offline JCT
    and the online APS. ``evaluate_mode`` reports it in full; intervals (outcomes/uncertainty.py)
    read only the throughput, JCT and APS, at every perturbed scenario."""

    sat: Saturated
    t_max: float
    jct_s: float
    cycle_min: float  # the per-agent cycle while all N run (``closed_cycle``)
    online: OnlineAps
    ttft_min: float  # a turn alone in the cluster (``light_load``): the critical path's TTFT

    @property
    def aps(self) -> float:
        return float(self.online.aps[0])


class ClusterMemo:
    """What the modes of one cluster (a scenario at its node counts) share, built by the first
    mode that needs it: the sides of its assemblies (``assemble``'s ``sides``) and the passed
    feasibility check, which no mode changes. Intervals evaluate every mode of a dozen
    perturbed scenarios: each scenario's modes share one, and scenarios alike in all the sides
    read share one too (``_sides_key``)."""

    __slots__ = ("checked", "sides")

    def __init__(self) -> None:
        self.sides: SideMemo = {}
        self.checked = False


def _sides_key(sc: Scenario) -> tuple[object, ...]:
    """What a scenario's sides (``side_capacity``) and feasibility check read of it: every
    field but the workload and its turns, profiles and options by identity (frozen objects,
    shared by the scenarios ``dataclasses.replace`` derives) and counts by value, and of the
    turns the means of a turn they read, by value. The intervals' scenarios one standard error
    of turns_spread away (it moves how many turns an agent takes, not a turn's mean) build
    the centre's sides again otherwise (two of the ten perturbed scenarios)."""
    d = sc.turn_demand
    means = tuple(
        float(d.mean(v))
        for v in (
            d.hit_bytes, d.prefill_flops, d.context_tokens, d.append_tokens, d.generated_tokens
        )
    )  # fmt: skip
    kept = tuple(
        (v if isinstance(v, int) else id(v))
        for f in fields(sc)
        if f.name not in ("workload", "turn_demand")
        for v in (getattr(sc, f.name),)
    )
    return (*kept, *means)


def runnable(
    sc: Scenario, mode: OutcomeMode, memo: ClusterMemo | None = None
) -> tuple[Saturated, float]:
    """The saturated optimum of one cluster in a mode and its throughput (turns/s, finite and
    > 0); raises InfeasibleError where the cluster does not run in it. What every outcome of
    one cluster (``mode_core``, ``outcomes/at_rate.py``) starts from, so they refuse a cluster
    for the same reason. ``memo``: what this cluster's other modes built already."""
    asm = cluster_assembly(sc, mode, memo)
    sat = Saturated(asm, solve(asm.links))
    return sat, sustained(sc, mode, sat)


def cluster_assembly(sc: Scenario, mode: OutcomeMode, memo: ClusterMemo | None = None) -> Assembly:
    """``runnable``'s first half: the checks every mode of a cluster shares, then the mode's
    assembly (not solved); raises where the cluster is too small."""
    # Node counts, weights and one decode request first: the clearest reasons a cluster is too
    # small, the same in every mode.
    if memo is None or not memo.checked:
        check_feasible(sc)
        if memo is not None:
            memo.checked = True
    sides = None if memo is None else memo.sides
    return assemble(sc, mode, sc.prefill_nodes, sc.decode_nodes, sides)


def sustained(sc: Scenario, mode: OutcomeMode, sat: Saturated) -> float:
    """``runnable``'s second half: the throughput of a cluster's solved optimum (turns/s,
    finite and > 0); raises InfeasibleError where the cluster does not run in the mode."""
    pm = sat.prefill.one_cluster()
    if not bool(sat.feasible):
        per = float(
            phys.kv_bytes_for_context(sc.model, sc.turn_demand.mean(sc.turn_demand.context_tokens))
        )
        reserve = sc.prefill_node.prefill_hbm_reserve_gbyte if sc.options.efficiencies else 0.0
        free = float(np.asarray(pm.free_hbm_bytes)) / 1e9
        held = (
            f"one layer of one request's KV ({pm.kv_bytes_per_request / 1e9:.3g} GB)"
            if MODE_TABLE[mode].layerwise
            else f"one request's KV ({per / 1e9:.2f} GB, no layer-wise prefill)"
        )
        hint = "" if MODE_TABLE[mode].layerwise else ", or use a mode with layer-wise prefill"
        left = (
            f"leave {free:.3g} GB"
            if free >= 0
            else f"exceed its HBM by {-free:.3g} GB"  # not "leave -1e+12 GB"
        )
        raise InfeasibleError(
            f"in {mode}, a prefill GPU cannot hold {held}: its share of the weights and the "
            f"{plain(reserve)} GB reserve {left}; add prefill nodes{hint}",
            field="prefill_nodes",
        )
    sol = sat.solution
    t_max = float(sol.throughput_turns_per_s)
    if not (math.isfinite(t_max) and t_max > 0):
        binding = tuple(sol.binding())
        raise InfeasibleError(
            f"{mode}: the cluster sustains no turns ({', '.join(binding) or 'no link'} has no "
            "capacity left for this workload)",
            field="cluster",
        )
    return t_max


def agent_time_s(sc: Scenario, ttft_s: Num, tpot_s: Num) -> Num:
    """One agent's time online, all its turns: turns x (TTFT + generated x TPOT + tool
    latency). The one definition: the KV working set (``kv_working_set_gbyte``) holds each
    agent's context for this long, and ``size --aps`` reports it as the agent's JCT."""
    d = sc.turn_demand
    gen = d.mean(d.generated_tokens)
    return d.trajectory_turns.mean * (ttft_s + gen * tpot_s + sc.workload.tool_latency_s)


def kv_working_set_gbyte(sc: Scenario, aps: Num, agent_s: Num) -> Num:
    """The online KV working set by Little's law (paper 2.5): agents in the system (the
    arrival rate x each one's time, ``agent_time_s``) x half the tokens of a trajectory (its
    context grows from nothing to the total) x KV bytes per token, in GB; 0 at no arrivals
    (an unbounded agent time there holds nothing). Vectorized over ``aps`` and ``agent_s``."""
    d = sc.turn_demand
    total = trajectory_tokens(sc.workload, d)
    per_token = phys.kv_bytes_per_token(sc.model)
    rate, time = np.asarray(aps, dtype=np.float64), np.asarray(agent_s, dtype=np.float64)
    with np.errstate(invalid="ignore"):
        gbyte = np.where(rate > 0, rate * time * total / 2.0 * per_token, 0.0) / 1e9
    return float(gbyte) if gbyte.ndim == 0 else gbyte


def mode_core(
    sc: Scenario, mode: OutcomeMode, cfg: ServingConfig, memo: ClusterMemo | None = None
) -> ModeCore:
    """The saturated optimum, offline JCT and online APS of one cluster in a mode; raises
    InfeasibleError where the cluster does not run in it. ``memo``: ``runnable``'s. With a
    store of finite size, on the scenario that reads what the mode chooses (read_choice)."""
    sat, t_max, jct, cycle_min, ttft_min = mode_offline(sc, mode, cfg, memo)
    # Online: the one queueing model (outcomes/online.py), on this one cluster.
    on = online_aps(online_queue(read_scenario(sc, mode), sat.assembly, sat.solution), cfg)
    return ModeCore(sat, t_max, jct, cycle_min, on, ttft_min)


def mode_offline(
    sc: Scenario, mode: OutcomeMode, cfg: ServingConfig, memo: ClusterMemo | None = None
) -> Offline:
    """``mode_core`` without the online APS: the saturated optimum, its throughput, the
    offline JCT and the per-agent cycle (intervals search the APS of many clusters at once);
    ``memo``: ``runnable``'s (not shared with a scenario that reads another share)."""
    chosen = read_scenario(sc, mode)
    sat, t_max = runnable(chosen, mode, memo if chosen is sc else None)
    return _offline(chosen, cfg, sat, t_max)


def _offline(sc: Scenario, cfg: ServingConfig, sat: Saturated, t_max: float) -> Offline:
    """``mode_offline`` of a cluster that runs (``runnable``'s optimum and throughput)."""
    return _offline_many(cfg, [(sc, sat, t_max)])[0]


def _offline_many(
    cfg: ServingConfig,
    clusters: Sequence[tuple[Scenario, Saturated, float]],
    lights: Sequence[tuple[np.ndarray, np.ndarray]] | None = None,
) -> list[Offline]:
    """``_offline`` of each (scenario, optimum, throughput) of clusters that run. Offline: the
    closed system while all N agents run (the operating point), then drained; the critical
    path at the N agents' decode batch (``closed_cycle``), and in the drain at the agents still
    running. One ``offline_jct_s`` per distinct turn-count distribution (a perturbed
    turns_spread has its own), each cluster a column of the stacked ``ClosedCycle``, as it
    gives alone (40 calls one by one were most of a cold `size`'s intervals). ``lights``: each
    cluster's ``light_load``, where the caller has them."""
    out: dict[int, Offline] = {}
    groups: dict[bytes, list[tuple[int, float, ClosedCycle, float]]] = {}
    for k, (sc, sat, _) in enumerate(clusters):
        counts = sc.turn_demand.trajectory_turns
        key = (
            counts.length.tobytes() + counts.surviving.tobytes() + repr(counts.ramp_turns).encode()
        )
        ttft, cycle = light = light_load(sc, sat) if lights is None else lights[k]
        at = closed_cycle(sc, sat, light)
        groups.setdefault(key, []).append((k, cycle.item(), at, ttft.item()))
    for group in groups.values():
        stacked = ClosedCycle.stack([at for _, _, at, _ in group])
        jcts = offline_jct_s(
            cfg.agents,
            np.array([clusters[k][2] for k, *_ in group]),
            np.array([cycle for _, cycle, *_ in group]),
            clusters[group[0][0]][0].turn_demand.trajectory_turns,
            stacked,
        )
        # The cycle while all N run, of every cluster at once (each column as its own table
        # gives it: the table is read elementwise).
        cycles = stacked(cfg.agents)
        for (k, *_, ttft_min), jct, cycle_n in zip(group, np.atleast_1d(jcts), cycles, strict=True):
            _, sat, t_max = clusters[k]
            out[k] = (sat, t_max, float(jct), float(cycle_n), ttft_min)
    return [out[k] for k in range(len(clusters))]


def offline_each(
    scenarios: Sequence[Scenario], modes: tuple[OutcomeMode, ...], cfg: ServingConfig
) -> list[dict[OutcomeMode, Offline | PlanInputError]]:
    """Per scenario (each its own cluster), per mode: what ``mode_offline`` gives, or the
    PlanInputError it raises. The optima of a mode's clusters come from one closed-form solve
    (``solve_each``: each as it is alone, INV-56), the modes of a scenario share its sides
    (``ClusterMemo``). The intervals' perturbed scenarios."""
    return _offline_each(scenarios, modes, cfg)[0]


def _offline_each(
    scenarios: Sequence[Scenario], modes: tuple[OutcomeMode, ...], cfg: ServingConfig
) -> tuple[
    list[dict[OutcomeMode, Offline | PlanInputError]],
    dict[tuple[int, OutcomeMode], tuple[KvMoves, tuple[np.ndarray, np.ndarray]]],
]:
    """``offline_each``, and of each scenario and mode that runs its KV moves (``kv_move_s``)
    and its light load (``light_load``), which the offline cycle read and its online queue
    reads (``cores_each``): each computed once."""
    out: list[dict[OutcomeMode, Offline | PlanInputError]] = [{} for _ in scenarios]
    built: list[tuple[int, OutcomeMode, Assembly]] = []
    memos: dict[tuple[object, ...], ClusterMemo] = {}
    for i, s in enumerate(scenarios):
        memo = memos.setdefault(_sides_key(s), ClusterMemo())
        for m in modes:
            try:
                built.append((i, m, cluster_assembly(s, m, memo)))
            except PlanInputError as exc:
                out[i][m] = exc
    # One solve per mode: its clusters' link sets are alike (solve_each stacks link sets of
    # one split rule that merge the same lines; the modes of one rule may not, basic and the
    # oracle's free I/O).
    by_mode: dict[OutcomeMode, list[int]] = {}
    for k, (_, m, _) in enumerate(built):
        by_mode.setdefault(m, []).append(k)
    solutions: dict[int, Solution] = {}
    for ks in by_mode.values():
        solutions.update(zip(ks, solve_each([built[k][2].links for k in ks]), strict=True))
    runs: list[tuple[int, OutcomeMode, tuple[Scenario, Saturated, float]]] = []
    for k, (i, m, asm) in enumerate(built):
        sat = Saturated(asm, solutions[k])
        try:
            runs.append((i, m, (scenarios[i], sat, sustained(scenarios[i], m, sat))))
        except PlanInputError as exc:
            out[i][m] = exc
    moves = [kv_move_s(scenarios[i], sat.assembly) for i, _, (_, sat, _) in runs]
    lights = [light_load(sc, sat, mv) for (_, _, (sc, sat, _)), mv in zip(runs, moves, strict=True)]
    found = _offline_many(cfg, [cluster for _, _, cluster in runs], lights)
    for (i, m, _), got in zip(runs, found, strict=True):
        out[i][m] = got
    light_each = zip(runs, moves, lights, strict=True)
    moved = {(i, m): (mv, light) for (i, m, _), mv, light in light_each}
    return [{m: o[m] for m in modes} for o in out], moved


def cores_each(
    scenarios: Sequence[Scenario], modes: tuple[OutcomeMode, ...], cfg: ServingConfig
) -> list[dict[OutcomeMode, ModeCore | PlanInputError]]:
    """Per scenario (each its own cluster), per mode: ``mode_core``'s, or the PlanInputError
    it raises; the optima of a mode's clusters in one solve (``offline_each``) and every APS
    in one search (``online_aps_each``), each as the cluster alone gives it. With a store of
    finite size, each mode on the scenario that reads what it chooses (read_choice)."""
    if any(sc.store is not None and sc.read_share is None for sc in scenarios):
        return cores_by_mode(modes, cfg, lambda m: [read_scenario(sc, m) for sc in scenarios])
    offline, moved = _offline_each(scenarios, modes, cfg)
    runs = [
        (i, m, got)
        for i, found in enumerate(offline)
        for m, got in found.items()
        if not isinstance(got, PlanInputError)
    ]
    online = online_aps_each(
        [(scenarios[i], sat.assembly, sat.solution) for i, _, (sat, *_) in runs],
        cfg,
        [moved[(i, m)][0] for i, m, _ in runs],
        [moved[(i, m)][1] for i, m, _ in runs],
    )
    out: list[dict[OutcomeMode, ModeCore | PlanInputError]] = [
        {m: got for m, got in found.items() if isinstance(got, PlanInputError)} for found in offline
    ]
    for (i, m, (sat, t_max, jct, cycle_min, ttft_min)), on in zip(runs, online, strict=True):
        out[i][m] = ModeCore(sat, t_max, jct, cycle_min, on, ttft_min)
    return [{m: row[m] for m in modes} for row in out]


def cores_by_mode(
    modes: tuple[OutcomeMode, ...],
    cfg: ServingConfig,
    scenarios_of: Callable[[OutcomeMode], Sequence[Scenario]],
) -> list[dict[OutcomeMode, ModeCore | PlanInputError]]:
    """``cores_each``'s rows where each mode runs on scenarios of its own (``scenarios_of``:
    one per row, each reading the share of its store that the mode reads), a mode at a time."""
    rows: list[dict[OutcomeMode, ModeCore | PlanInputError]] = []
    for m in modes:
        found = cores_each(scenarios_of(m), (m,), cfg)
        rows = rows or [{} for _ in found]
        for row, got in zip(rows, found, strict=True):
            row.update(got)
    return rows


def outcomes_of(
    sc: Scenario, cfg: ServingConfig, cores: Mapping[OutcomeMode, ModeCore | PlanInputError]
) -> dict[OutcomeMode, ModeOutcome | InfeasibleError]:
    """A scenario's ``cores_each`` row in full (``mode_outcome``); an error other than an
    InfeasibleError is bad input, raised as ``evaluate_mode`` raises it."""
    out: dict[OutcomeMode, ModeOutcome | InfeasibleError] = {}
    for m, got in cores.items():
        if isinstance(got, PlanInputError):
            if not isinstance(got, InfeasibleError):
                raise got
            out[m] = got
    for m, got in cores.items():
        if not isinstance(got, PlanInputError):
            out[m] = mode_outcome(read_scenario(sc, m), m, cfg, got)
    return {m: out[m] for m in cores}


def evaluate_each(
    scenarios: Sequence[Scenario], modes: tuple[OutcomeMode, ...], cfg: ServingConfig
) -> list[dict[OutcomeMode, ModeOutcome | InfeasibleError]]:
    """Per scenario (each its own cluster), per mode: ``evaluate_mode``'s outcome, or the
    InfeasibleError it raises (``cores_each`` in full). ``recommend``'s splits (one by one, a
    budget of 2,000 nodes took 35 s)."""
    rows = cores_each(scenarios, modes, cfg)
    for row in rows:  # bad input in any scenario before any outcome, as one by one
        for got in row.values():
            if isinstance(got, PlanInputError) and not isinstance(got, InfeasibleError):
                raise got
    return [outcomes_of(sc, cfg, row) for sc, row in zip(scenarios, rows, strict=True)]


def light_load(
    sc: Scenario, sat: Saturated, moves: KvMoves | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """A turn alone in each cluster of ``sat``: its TTFT (the read not hidden, then the longer
    of a pass of one and its KV's move, per read path: ``online.prefilled_s``; the pass per
    prefill node count, each count its own layout under the operator model, the move and the
    paths' shares per cluster, over both sides' links) and its cycle, the
    per-agent critical path (that TTFT, its tokens at a decode batch of one, the tool
    latency). The one definition: size, sweep, recommend, intervals and simulate read it, a
    single cluster as arrays of one element; the online queue's fixed part at no load is it.
    ``moves``: the assembly's ``kv_move_s``, where the caller has it."""
    return light_load_s(sc, sat.assembly, sat.solution.decode_path_fraction, moves)


# Points of the decode batch (geometric from 1 to the HBM cap) at which ``closed_cycle``
# tabulates the cycle; between them it interpolates linearly in the running agents (within
# 0.3% of the exact fixed point on the README default's group, tests/test_sim_agreement.py).
CYCLE_POINTS = 64


@record
class ClosedCycle:
    """The per-agent cycle while n agents run and no link saturates (docs/model.md section 6,
    "Load-dependent cycle"): c(n) = r + g TPOT(b(n)), r = TTFT_min + tool latency, g the
    generated tokens, b(n) the decode batch of Little's law in the closed system,
    b = n g TPOT(b) / c(n): the n agents share their cycle between the decode batch and the
    rest. Tabulated at decode batches b_k (``CYCLE_POINTS``) as the agents n_k = b_k c_k /
    (g TPOT(b_k)) that give them, so c(n) is an interpolation over n. Below one sequence the
    light-load cycle; beyond the HBM cap the batch is the cap, c = n g TPOT(B) / B (the decode
    group's capacity, which the saturated throughput T already holds).

    The table is affine in a cluster's r: n_k = b_k + r q_k, q_k = b_k / (g TPOT(b_k)), and
    c_k = r + g TPOT(b_k), so it is kept per decode group (``batches``, ``per_rest``,
    ``decode``: a row per group, a column per point) and per cluster only r, c_0, the
    cycle per agent beyond the cap and the cluster's group (``group``, any shape: the clusters'
    axes). A sweep's chunk of 10^4 clusters and a hundred groups no longer lays out 64 points
    per cluster (that and reading it were most of a profile grid's time). Where a group's n_k
    does not rise with k for every r (a step's rounding), each cluster is its own group, its
    n_k laid out with a running maximum and ``per_rest`` zero."""

    batches: np.ndarray  # b_k per group, or n_k per cluster (see the class docstring)
    per_rest: np.ndarray  # q_k per group
    decode: np.ndarray  # g TPOT(b_k) per group
    group: np.ndarray  # each cluster's group (a row of the tables)
    rest: np.ndarray  # r per cluster
    cycle_one: np.ndarray  # c_0 per cluster: the light-load cycle
    per_agent_s: np.ndarray  # per cluster, beyond the cap: g TPOT(B) / B

    @property
    def ndim(self) -> int:
        """The clusters' axes."""
        return int(np.ndim(self.rest))

    def __call__(self, n: Num) -> np.ndarray:
        """c(n), broadcast over ``n`` and the clusters: between the table's points n_k < n <=
        n_(k+1) the linear interpolation, at or below n_0 the light-load cycle c_0, beyond
        the last point n g TPOT(B) / B. The interval is found by a binary search over the
        points (six halvings of 64, each reading a group's threshold or two group-table
        entries per element), where counting the points below n compared all 64 per
        element; where every cluster asks the same many n values, by ``_shared``."""
        n = np.asarray(n, dtype=np.float64)
        clusters = np.broadcast_shapes(*(np.shape(v) for v in self._per_cluster()))
        shape = np.broadcast_shapes(clusters, n.shape)
        if n.size >= _SHARED_QUERIES and n.size * math.prod(clusters) == math.prod(shape):
            # Every cluster asks the same n values (an agents axis): by counting, below.
            return self._shared(n, clusters, shape)
        if n.size == 1:  # one n for every cluster
            spread = self._each_distinct([n], clusters)
            if spread is not None:
                return spread[0]
            return self._each_n(n.reshape(1), clusters)[0].reshape(shape)
        rest = np.broadcast_to(self.rest, shape).reshape(-1)
        # Each element's group's first point: the tables are laid out group by group.
        base = np.broadcast_to(self.group * CYCLE_POINTS, shape).reshape(-1)
        b, q = self.batches.reshape(-1), self.per_rest.reshape(-1)
        at = np.broadcast_to(n, shape).reshape(-1)
        # pos = base + count, the count of points known to lie below n (n_k rises with k).
        pos = base.astype(np.intp, copy=True)
        step = _SEARCH_FIRST
        while step:
            k = pos + (step - 1)
            pos += (b.take(k) + rest * q.take(k) < at) * step
            step >>= 1
        pos += b.take(pos) + rest * q.take(pos) < at
        return self._at_points(pos, base, rest, at, shape)

    def _at_points(
        self,
        pos: np.ndarray,
        base: np.ndarray,
        rest: np.ndarray,
        at: np.ndarray,
        shape: tuple[int, ...],
    ) -> np.ndarray:
        """c(n) from the search's result: ``pos`` each element's count of points below its n
        (from its group's first, ``base``), ``rest`` its r, ``at`` its n (flat, laid out as
        ``shape``)."""
        b, q = self.batches.reshape(-1), self.per_rest.reshape(-1)
        below = pos - base  # k + 1 for n in (n_k, n_(k+1)]
        hi_at = np.minimum(np.maximum(pos, base + 1), base + (CYCLE_POINTS - 1))
        lo_at = hi_at - 1
        lo = b.take(lo_at) + rest * q.take(lo_at)
        hi = b.take(hi_at) + rest * q.take(hi_at)
        d = self.decode.reshape(-1)
        one = np.broadcast_to(self.cycle_one, shape).reshape(-1)
        c_lo = np.where(lo_at == base, one, rest + d.take(lo_at))  # c_0: the light-load cycle
        c_hi = rest + d.take(hi_at)
        beyond = at * np.broadcast_to(self.per_agent_s, shape).reshape(-1)
        return _interpolated(at, below, lo, hi, c_lo, c_hi, one, beyond).reshape(shape)

    def _per_cluster(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.group, self.rest, self.cycle_one, self.per_agent_s

    def each(self, ns: Sequence[Num]) -> list[np.ndarray]:
        """c(n) for each of ``ns``, as one call each gives it, bit for bit: where each is one
        n for every cluster (the offline JCT's steps and ramp pieces), at once."""
        values = [np.asarray(n, dtype=np.float64) for n in ns]
        if len(values) > 1 and all(v.size == 1 for v in values):
            clusters = np.broadcast_shapes(*(np.shape(v) for v in self._per_cluster()))
            spread = self._each_distinct(values, clusters)
            if spread is not None:
                return spread
        return [self(v) for v in values]

    def _each_distinct(
        self, ns: list[np.ndarray], clusters: tuple[int, ...]
    ) -> list[np.ndarray] | None:
        """c(n) for each of ``ns`` (one n for every cluster each) from the distinct clusters'
        table, spread over the clusters; None where there is no table (``_distinct``)."""
        if math.prod(clusters) < _DISTINCT_FROM:
            return None
        distinct = self._distinct(clusters, len(ns))
        if distinct is None:
            return None
        table, key = distinct
        values = np.array([float(n.reshape(())) for n in ns])
        found = table._each_n(values, np.shape(table.rest)).take(key, axis=1)
        return [
            row.reshape(np.broadcast_shapes(clusters, n.shape))
            for row, n in zip(found, ns, strict=True)
        ]

    def _each_n(self, values: np.ndarray, clusters: tuple[int, ...]) -> np.ndarray:
        """c(n) for each of the m ``values``, one n for every cluster each: (m, *clusters).
        n_k < n where r < (n - b_k) / q_k, a group's threshold (falling with k as n_k rises;
        +inf or -inf where q_k = 0): each value its row of thresholds, one read per step."""
        m = values.size
        shape = (m, *clusters)
        lead = (m,) + (1,) * len(clusters)
        rest = np.broadcast_to(self.rest, shape).reshape(-1)
        # Each element's group's first point: the tables are laid out group by group.
        base = np.broadcast_to(self.group * CYCLE_POINTS, shape).reshape(-1)
        b, q = self.batches.reshape(-1), self.per_rest.reshape(-1)
        with np.errstate(divide="ignore", invalid="ignore"):
            limit = ((values.reshape(-1, 1) - b) / q).reshape(-1)
        # Each element's value's row of thresholds.
        row = np.broadcast_to((np.arange(m) * b.size).reshape(lead), shape).reshape(-1)
        # pos = base + count, the count of points known to lie below n (n_k rises with k).
        pos = base.astype(np.intp, copy=True)
        step = _SEARCH_FIRST
        while step:
            pos += (rest < limit.take(row + (pos + (step - 1)))) * step
            step >>= 1
        pos += rest < limit.take(row + pos)
        at = np.broadcast_to(values.reshape(lead), shape).reshape(-1)
        return self._at_points(pos, base, rest, at, shape)

    def _distinct(
        self, clusters: tuple[int, ...], calls: int = 1
    ) -> tuple[ClosedCycle, np.ndarray] | None:
        """The clusters that differ, as a table of their own, and each cluster's place in it;
        None where most differ. c(n) reads nothing of a cluster but its four fields, so a
        distinct cluster's value is every one of its copies', bit for bit. A sweep's chunk of
        10^4 clusters (P x D) holds a few hundred: a decode group per D value and two or three
        light-load TTFTs, asked about a dozen times (the offline JCT's steps and ramp pieces),
        so the table is found from the second n asked (``_calls``), not for a chunk's only
        one."""
        memo = self.__dict__
        calls += memo.get("_calls", 0)
        memo["_calls"] = calls
        if calls < 2:
            return None
        if "_distinct_table" not in memo:
            memo["_distinct_table"] = _distinct_clusters(self, clusters)
        found: tuple[ClosedCycle, np.ndarray] | None = memo["_distinct_table"]
        return found

    def _shared(
        self, n: np.ndarray, clusters: tuple[int, ...], shape: tuple[int, ...]
    ) -> np.ndarray:
        """c(n) where n varies only along axes the clusters do not (each of the m values of
        ``n`` asked of every cluster): each cluster's points laid out (clusters x points,
        the same n_k and c_k the search reads), each point's place among the sorted n values
        found once (``searchsorted``), and the count of points below each n value a cumulative
        histogram over those places, where the search reads every point of every element
        (a P x D x agents sweep's 400 agents values per cluster). The same interpolation as
        ``__call__``'s, bit for bit."""
        size = math.prod(clusters)
        g = np.broadcast_to(self.group, clusters).reshape(-1, 1)
        rest = np.broadcast_to(self.rest, clusters).reshape(-1, 1)
        table = g * CYCLE_POINTS + np.arange(CYCLE_POINTS)  # (clusters, points)
        nk = self.batches.reshape(-1).take(table) + rest * self.per_rest.reshape(-1).take(table)
        ck = rest + self.decode.reshape(-1).take(table)
        ck[:, 0] = np.broadcast_to(self.cycle_one, clusters).reshape(-1)  # c_0
        values = n.reshape(-1)
        ordered = np.sort(values)
        # n_k < v exactly where the n values at or below n_k (``place``) come before v's first
        # place among the sorted values (NaN sorts last: a NaN n_k is below no value).
        place = np.searchsorted(ordered, nk, side="right")
        place += np.arange(size).reshape(-1, 1) * (values.size + 1)
        counts = np.bincount(place.reshape(-1), minlength=size * (values.size + 1))
        below_at = np.cumsum(counts.reshape(size, values.size + 1), axis=1)
        first = np.searchsorted(ordered, values, side="left")
        cluster = np.arange(size).reshape(clusters)
        pad = (1,) * (len(shape) - n.ndim)
        # On the elements' axes (n's and the clusters' broadcast), without laying them flat.
        below = below_at[cluster, first.reshape(pad + n.shape)]
        hi_at = cluster * CYCLE_POINTS + np.minimum(np.maximum(below, 1), CYCLE_POINTS - 1)
        lo_at = hi_at - 1
        lo, hi = nk.take(lo_at), nk.take(hi_at)
        c_lo, c_hi = ck.take(lo_at), ck.take(hi_at)
        beyond = n * self.per_agent_s
        return _interpolated(n, below, lo, hi, c_lo, c_hi, self.cycle_one, beyond)

    def _clusters(
        self, change: Callable[[np.ndarray], np.ndarray], shape: tuple[int, ...] | None = None
    ) -> ClosedCycle:
        """The table with ``change`` applied to each per-cluster field, laid out alike (as
        ``shape``, or their own broadcast shape)."""
        if shape is None:
            shape = np.broadcast_shapes(*(np.shape(v) for v in self._per_cluster()))
        each = (change(np.broadcast_to(v, shape)) for v in self._per_cluster())
        group, rest, one, per_agent = each
        return ClosedCycle(self.batches, self.per_rest, self.decode, group, rest, one, per_agent)

    def expand(self, axes: int) -> ClosedCycle:
        """The table with ``axes`` trailing cluster axes of one (to broadcast against an
        agents axis)."""
        return self._clusters(lambda v: v.reshape(v.shape + (1,) * axes))

    def select(self, index: np.ndarray) -> ClosedCycle:
        """The clusters at ``index`` (along the clusters' axis)."""
        return self._clusters(lambda v: v[index])

    def pick(self, index: tuple[np.ndarray, ...], shape: tuple[int, ...]) -> ClosedCycle:
        """The clusters at ``index`` (a fancy index) of the clusters laid out as ``shape``,
        which the fields broadcast to (a chunk's P x D grid where the cycle varies along D
        alone): one axis of the clusters picked."""
        return self._clusters(lambda v: v[index], shape)

    @staticmethod
    def stack(tables: Sequence[ClosedCycle]) -> ClosedCycle:
        """Single clusters' tables as one, a cluster each along one axis, to evaluate them at
        once: their groups side by side."""
        offsets = np.cumsum([0] + [t.batches.shape[0] for t in tables[:-1]])
        return ClosedCycle(
            np.concatenate([t.batches for t in tables]),
            np.concatenate([t.per_rest for t in tables]),
            np.concatenate([t.decode for t in tables]),
            np.array(
                [
                    int(np.asarray(t.group).reshape(())) + o
                    for t, o in zip(tables, offsets, strict=True)
                ]
            ),
            np.array([float(np.asarray(t.rest).reshape(())) for t in tables]),
            np.array([float(np.asarray(t.cycle_one).reshape(())) for t in tables]),
            np.array([float(np.asarray(t.per_agent_s).reshape(())) for t in tables]),
        )


def _distinct_clusters(
    cycle: ClosedCycle, clusters: tuple[int, ...]
) -> tuple[ClosedCycle, np.ndarray] | None:
    """``ClosedCycle._distinct``: the distinct clusters' table and each cluster's place in it
    (None where more than ``_DISTINCT_SHARE`` of them differ). Values are compared by their
    bits. Field by field: a field that is a function of the fields before it (the decode
    group's cycle beyond the cap, of the group) adds nothing; another is coded on its own
    values (on the axes along which it changes: the decode group per D value on those) and
    its codes combined with the key so far, renumbered: by a table over every pair of codes
    where that is small, else by sorting."""
    size = math.prod(clusters)
    limit = size * _DISTINCT_SHARE
    key: np.ndarray | None = None
    count = 1
    first = np.zeros(1, dtype=np.intp)  # a place of each distinct cluster so far
    for value in cycle._per_cluster():
        bits = _bits(value)
        if bits.size == 1:
            continue
        bits = _constant_axes_dropped(bits)
        if key is not None:
            spread_bits = np.broadcast_to(bits, clusters).reshape(-1)
            if np.array_equal(spread_bits.take(first).take(key), spread_bits):
                continue
        coded = _codes(bits.reshape(-1))
        if coded is None or coded[1] > limit:
            return None
        codes, n = coded
        spread = np.broadcast_to(codes.reshape(bits.shape), clusters).reshape(-1)
        if key is None:
            key, count = spread, n
        else:
            pairs = key * n + spread
            if count * n <= 4 * size:
                seen = np.zeros(count * n, dtype=np.intp)
                seen[pairs] = 1
                number = np.cumsum(seen) - 1
                key, count = number.take(pairs), int(number[-1]) + 1
            else:
                found, key = np.unique(pairs, return_inverse=True)
                count = found.size
            if count > limit:
                return None
        first = np.zeros(count, dtype=np.intp)
        first[key] = np.arange(size)  # any copy's place: their fields are the same
    if key is None:  # every field one value: one cluster
        key = np.zeros(size, dtype=np.intp)

    def at(value: np.ndarray) -> np.ndarray:
        return np.broadcast_to(value, clusters).reshape(-1).take(first)

    table = ClosedCycle(
        cycle.batches,
        cycle.per_rest,
        cycle.decode,
        *(at(np.asarray(v)) for v in cycle._per_cluster()),
    )
    return table, key


def _bits(value: np.ndarray) -> np.ndarray:
    """A field's values as 64-bit integers, bit for bit (NaNs of the same bits equal)."""
    v = np.ascontiguousarray(value)
    if v.dtype.kind == "f":
        return v.astype(np.float64, copy=False).view(np.int64)
    return v.astype(np.int64, copy=False)


def _constant_axes_dropped(bits: np.ndarray) -> np.ndarray:
    """``bits`` with each axis along which it does not change cut to one (a field laid out
    over P x D that varies with D alone: its D values)."""
    for axis, size in enumerate(bits.shape):
        if size > 1:
            head = bits[(slice(None),) * axis + (slice(0, 1),)]
            if np.array_equal(bits, np.broadcast_to(head, bits.shape)):
                bits = head
    return bits


def _codes(flat: np.ndarray) -> tuple[np.ndarray, int] | None:
    """Each value's code (0 to n - 1) and the count n of values: a few values peeled off one
    by one (a pass or two each), more by sorting; None where that finds too many."""
    if flat.size > _PEEL_FROM:
        codes = np.zeros(flat.size, dtype=np.intp)
        pending = np.ones(flat.size, dtype=bool)
        for n in range(_PEEL_VALUES):
            at = int(pending.argmax())
            if not pending[at]:
                return codes, n
            hit = flat == flat[at]
            codes[hit] = n
            pending[hit] = False
        if not pending.any():
            return codes, _PEEL_VALUES
    values, codes = np.unique(flat, return_inverse=True)
    return codes.reshape(-1), int(values.size)


# Values of a field that ``_codes`` peels off one by one before it sorts, and the values from
# which it tries (a sort of a few hundred is as quick).
_PEEL_VALUES = 4
_PEEL_FROM = 512


# Clusters from which ``ClosedCycle`` looks for distinct ones (below, the search is as cheap),
# and the share of them that may differ for the distinct table to pay.
_DISTINCT_FROM = 256
_DISTINCT_SHARE = 0.25


def _interpolated(
    at: np.ndarray,
    below: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    c_lo: np.ndarray,
    c_hi: np.ndarray,
    one: np.ndarray,
    beyond: np.ndarray,
) -> np.ndarray:
    """``ClosedCycle``'s c(n) from n's interval (``below``: the points below n; ``lo``, ``hi``
    and ``c_lo``, ``c_hi``: the interval's ends), the light-load cycle ``one`` and the cycle
    beyond the cap ``beyond``, each element's (broadcast together)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        w = np.where(hi > lo, (at - lo) / (hi - lo), 1.0)
    between = c_lo + (c_hi - c_lo) * w
    out = np.where(below == 0, one, np.where(below == CYCLE_POINTS, beyond, between))
    return np.where(np.isnan(at), beyond, out)


# Values of n asked of every cluster from which ``ClosedCycle`` counts, rather than searches,
# the points below each (a search reads about 60 values per element, the count about
# 64 (log2 m + 4) per cluster and 20 per element: the count is cheaper from about 16).
_SHARED_QUERIES = 16

# The binary search's first step over the table's points (half of them): the steps halve to
# one, so that with a last comparison the count of points below n (0 to CYCLE_POINTS) is found.
_SEARCH_FIRST = CYCLE_POINTS // 2
assert CYCLE_POINTS & (CYCLE_POINTS - 1) == 0, "the binary search halves a power of two"


def closed_cycle(
    sc: Scenario, sat: Saturated, light: tuple[np.ndarray, np.ndarray] | None = None
) -> ClosedCycle:
    """The load-dependent cycle of each cluster of ``sat`` (``ClosedCycle``), from the same
    light-load TTFT and decode steps ``light_load`` uses (``light``: its result, where the
    caller has it)."""
    d = sc.turn_demand
    asm = sat.assembly
    group = asm.de.decode
    assert group is not None
    ttft_min, cycle_one = light_load(sc, sat) if light is None else light
    gen = d.mean(d.generated_tokens)
    rest = np.asarray(ttft_min + sc.workload.tool_latency_s, dtype=np.float64)
    steps = _group_steps(group)
    top, b, step = steps.top, steps.batches, steps.steps
    # Tables (groups, points), a group's points side by side; each cluster's group, as
    # ``take`` reads it.
    b = np.ascontiguousarray(b.reshape(CYCLE_POINTS, -1).T)
    decode = np.ascontiguousarray(
        np.asarray(gen * step, dtype=np.float64).reshape(CYCLE_POINTS, -1).T
    )
    index = asm.de.index if top.ndim and asm.de.index is not None else None
    own = np.zeros(np.shape(rest), dtype=np.intp) if index is None else np.asarray(index)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_rest = b / decode
        per_agent = gen * asm.de.take(steps.at_top) / asm.de.take(top)
    # n_k = b_k + r q_k rises with k for every r >= 0 where b_k and q_k do (a step grows less
    # than its batch) and every step takes time: checked once on the groups' table.
    rising = bool(
        np.all(decode > 0)
        and np.all(np.diff(b, axis=1) >= 0.0)
        and np.all(np.diff(per_rest, axis=1) >= 0.0)
    )
    one = np.asarray(cycle_one, dtype=np.float64)
    if rising:
        return ClosedCycle(b, per_rest, decode, own, rest, one, np.asarray(per_agent))
    # Else each cluster its own group: its n_k with a running maximum (a floor's rounding; a
    # step of no time is a point at infinity), laid out per cluster.
    shape = np.broadcast_shapes(np.shape(rest), np.shape(own))
    flat = np.broadcast_to(own, shape).reshape(-1)
    r = np.broadcast_to(rest, shape).reshape(-1, 1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        nk = np.where(decode[flat] > 0, b[flat] + r * per_rest[flat], np.inf)
    nk = np.maximum.accumulate(nk, axis=1)
    clusters = np.arange(flat.size).reshape(shape)
    return ClosedCycle(
        nk, np.zeros_like(nk), decode[flat], clusters, rest, one, np.asarray(per_agent)
    )


class GroupSteps(NamedTuple):
    """A decode group's steps the cycle table reads (``_group_steps``): at the table's batches
    b_k from one to the HBM cap (``top``, at least one) on a leading axis, and at the cap."""

    top: np.ndarray
    batches: np.ndarray
    steps: np.ndarray
    at_top: np.ndarray


# ``GroupSteps`` by decode group (identity; a group's fields are frozen): every cluster of a
# group reads the same (the intervals' 44 clusters have five groups among them).
_GROUP_STEPS: IdentityMemo[GroupSteps] = IdentityMemo(64)


def _group_steps(group: DecodeGroup) -> GroupSteps:
    def compute() -> GroupSteps:
        top = np.maximum(np.asarray(group.max_batch_array()), 1.0)
        # Every table point's decode step in one call: the batches b_k on a leading axis, the
        # decode groups' after it (each cluster's group taken after, as ``take`` does).
        powers = np.arange(CYCLE_POINTS, dtype=np.float64) / (CYCLE_POINTS - 1)
        b = top[None, ...] ** powers.reshape((-1,) + (1,) * top.ndim)
        found = GroupSteps(
            top,
            b,
            group.step_array_s(b),
            group.step_array_s(top),
        )
        for v in found:
            if isinstance(v, np.ndarray):
                v.flags.writeable = False  # shared by every cluster of the group
        return found

    return _GROUP_STEPS.get((group,), compute)


def operating_rate(agents: Num, saturated: Num, cycle_min: Num) -> Num:
    """Turns/s while all N agents of a closed system run: min(T, N / cycle_min), its
    asymptotic bounds (docs/model.md section 6). What ``throughput_turns_per_s`` is in every
    command; ``saturated`` (T) is ``saturated_turns_per_s``."""
    return np.minimum(saturated, np.asarray(agents, dtype=np.float64) / cycle_min)


def evaluate_mode(
    sc: Scenario, mode: OutcomeMode, cfg: ServingConfig, memo: ClusterMemo | None = None
) -> ModeOutcome:
    return mode_outcome(read_scenario(sc, mode), mode, cfg, mode_core(sc, mode, cfg, memo))


def mode_outcome(
    sc: Scenario, mode: OutcomeMode, cfg: ServingConfig, core: ModeCore
) -> ModeOutcome:
    """A mode's full outcome on one cluster from what it rests on (``mode_core``'s)."""
    sat, t_max, jct, cycle_min, on = core.sat, core.t_max, core.jct_s, core.cycle_min, core.online
    P = sc.prefill_nodes
    pm = sat.prefill.one_cluster()
    cap = float(np.asarray(pm.pass_batch))  # one cluster: numbers
    t0, u = float(np.asarray(pm.t0_s)), float(np.asarray(pm.u_s))
    group = sat.assembly.de.decode
    assert group is not None
    sol = sat.solution
    binding = tuple(sol.binding())
    d = sc.turn_demand
    gen = d.mean(d.generated_tokens)
    counts = d.trajectory_turns
    turns = counts.mean
    tool = sc.workload.tool_latency_s
    # Offline: the operating point while all N agents run.
    ttft_min = core.ttft_min
    x = float(operating_rate(cfg.agents, t_max, cycle_min))
    # Little's batch at that rate, at most the N agents (a closed system of N agents decodes
    # at most N sequences: at the latency bound x rests on the light-load cycle, whose TPOT is
    # a batch of one's, and x gen TPOT(b) alone gave 137 sequences for 128 agents).
    b_dec = min(group.little_batch(x, gen), float(cfg.agents))
    step = group.step_s(max(b_dec, 1.0))
    # The cycle max(N S / T, c) less the decode and the tool call: max(a S - b, f), f a lone
    # turn's TTFT (the prefill side's own latency) and the rest, W(S) = max(a S - b - f, 0),
    # the wait of the closed system's queue, at its bottleneck (docs/model.md section 6,
    # "Where the wait is"): a decode slot where the decode group binds (in TPOT, as the
    # simulation counts it), else prefill (in TTFT).
    floor = ttft_min
    closed = offline_ttft(cfg.agents, t_max, floor, gen * step + tool, counts)
    decode_waits = any(LINK_TABLE[LINK_INDEX[n]].resource == "decode" for n in binding)
    if decode_waits:
        # The prefill side, not the bottleneck, queues as it would open at the rate x (the
        # online model's TTFT there); the decode slot holds the rest of W, the turn-weighted
        # mean of W over the run.
        wait = closed.whole_run_s - floor
        pre = float(online_queue(sc, sat.assembly, sol).waits(np.array([x / turns])).mean_ttft_s[0])
        pre = min(max(pre, floor), floor + wait) if math.isfinite(pre) else floor + wait
        closed = OfflineTtft(pre, min(pre, closed.span_s))
    # Over the run, at the agents still running (``offline_tpot_s``).
    tpot, slot_wait = offline_tpot_s(
        float(cfg.agents),
        t_max,
        counts,
        closed_cycle(sc, sat),
        group,
        gen,
        decode_waits,
        held_s=closed.whole_run_s - floor if decode_waits else 0.0,
    )
    util = np.asarray(sol.utilization)
    aps, slo_aps = float(on.aps[0]), float(on.slo_aps[0])
    t_on, p_on = float(on.ttft_s[0]), float(on.tpot_s[0])
    limit = on.limit_names()[0]
    gpus = P * sc.prefill_node.gpus_per_node
    # Little's law reads the means (the same as t_on and p_on unless the SLOs hold percentiles).
    t_mean, p_mean = float(on.mean_ttft_s[0]), float(on.mean_tpot_s[0])
    working_set = kv_working_set_gbyte(sc, aps, agent_time_s(sc, t_mean, p_mean))
    return ModeOutcome(
        mode=mode,
        throughput_turns_per_s=x,
        saturated_turns_per_s=t_max,
        jct_s=jct,
        drain_s=float(offline_drain_s(jct, cfg.agents, t_max, counts)),
        aps=aps,
        ttft_s=closed.whole_run_s,
        ttft_span_s=closed.span_s,
        tpot_s=tpot,
        decode_wait_s=slot_wait,
        online_ttft_s=t_on,
        online_tpot_s=p_on,
        binding=binding,
        limits=link_limits(sat.assembly, sol),
        decode_path_fraction=float(sol.decode_path_fraction),
        utilization={n: float(util[i]) for i, n in enumerate(LINKS)},
        prefill_batch=min(cap, x / gpus * t0 / max(1e-12, 1 - x / gpus * u))
        if x / gpus * u < 1
        else cap,
        decode_batch=b_dec,
        working_set_gbyte=float(working_set),
        latency_bound=cfg.agents / cycle_min < t_max,
        aps_limit=limit,
        slo_aps=slo_aps,
        binding_utilization=aps * turns / t_max,
        read_share=sc.read_share,
    )


# The metrics ``size`` shows, each with its gap to the oracle (``SizeReport.oracle_gap``).
GAP_METRICS = (
    "saturated_turns_per_s",
    "throughput_turns_per_s",
    "jct_s",
    "ttft_span_s",
    "tpot_s",
    "aps",
    "online_ttft_s",
    "online_tpot_s",
)


@record
class SizeReport:
    scenario: Scenario
    config: ServingConfig
    gb_per_pflop: float
    modes: dict[OutcomeMode, ModeOutcome]
    # Modes the cluster cannot run at all, and why (not strict: the others are still given).
    infeasible: dict[OutcomeMode, str] = field(default_factory=dict)

    def _ratio(self, a: OutcomeMode, b: OutcomeMode, metric: str) -> float:
        """metric of a over metric of b; NaN where either mode has no outcome or b is 0."""
        if a not in self.modes or b not in self.modes:
            return math.nan
        den = float(getattr(self.modes[b], metric))
        return float(getattr(self.modes[a], metric)) / den if den > 0 else math.nan

    @property
    def speedup_jct(self) -> float:
        """basic over dualpath JCT (NaN where either cannot run)."""
        return self._ratio("basic", "dualpath", "jct_s")

    @property
    def speedup_aps(self) -> float:
        """dualpath over basic APS (NaN where basic serves no agents: no ratio exists)."""
        return self._ratio("dualpath", "basic", "aps")

    @property
    def oracle_gap(self) -> dict[str, float]:
        """Per metric the tables show (``GAP_METRICS``), dualpath's value over the oracle's
        minus 1: how far DualPath is from I/O-free serving (0: it reaches the oracle; +5% on
        the JCT: 5% longer, -5% on the APS: 5% fewer agents/s); NaN where either mode has no
        outcome or the oracle's value is 0."""
        return {k: self._ratio("dualpath", "oracle", k) - 1.0 for k in GAP_METRICS}


def evaluate(
    sc: Scenario,
    cfg: ServingConfig = ServingConfig(),
    modes: tuple[OutcomeMode, ...] = REPORT_MODES,
    strict: bool = True,
) -> SizeReport:
    """All modes of a scenario. A mode whose SLOs no arrival rate meets has an APS of 0 and
    says why (``unreachable_reason``); ``strict``: when that is every mode, it is an error (the
    CLI's exit 2) rather than a table of zeros, and a mode the cluster cannot run at all is an
    error too. Not strict, such a mode is left out with its reason (``infeasible``) while
    another runs; when none runs, the last mode's error is raised."""
    # Every mode's outcome as evaluate_mode gives it, the APS in one search (evaluate_each).
    return size_report(sc, cfg, evaluate_each([sc], modes, cfg)[0], strict)


def size_report(
    sc: Scenario,
    cfg: ServingConfig,
    found: Mapping[OutcomeMode, ModeOutcome | InfeasibleError],
    strict: bool = True,
) -> SizeReport:
    """``evaluate``'s report from its modes' outcomes (``evaluate_each``'s row of ``sc``)."""
    out: dict[OutcomeMode, ModeOutcome] = {}
    infeasible: dict[OutcomeMode, str] = {}
    # When no mode runs, the last one's reason: the modes go from basic to the oracle, the
    # least demanding (layer-wise prefill, no I/O), so its reason holds for all.
    last: InfeasibleError | None = None
    for m, got in found.items():
        if isinstance(got, InfeasibleError):
            if strict:
                raise got
            last = got
            infeasible[m] = got.detail
        else:
            out[m] = got
    if not out and last is not None:
        raise InfeasibleError(f"no mode can run this cluster: {last.detail}", field=last.field)
    if strict and all(o.aps_limit == "unreachable" for o in out.values()):
        o = next(iter(out.values()))
        which = "TTFT" if not o.online_ttft_s <= cfg.ttft_slo_s else "TPOT"
        raise InfeasibleError(
            f"no arrival rate meets the SLOs in any mode: {unreachable_reason(o, cfg)}",
            field="--ttft-slo" if which == "TTFT" else "--tpot-slo",
        )
    return SizeReport(sc, cfg, sc.turn_demand.gb_per_pflop, out, infeasible)


def unreachable_reason(o: ModeOutcome, cfg: ServingConfig, named: bool = True) -> str:
    """Why no arrival rate meets the SLOs in a mode: what even one agent sees (``named``:
    saying in which mode; a caller that names it already says False)."""
    if not (math.isfinite(o.online_ttft_s) and math.isfinite(o.online_tpot_s)):
        return (
            f"{o.mode if named else 'it'} sustains almost no turns ({o.bottleneck} binds at "
            f"{number(o.saturated_turns_per_s)} turns/s)"
        )
    return (
        f"{f'in {o.mode} ' if named else ''}even one agent sees TTFT {o.online_ttft_s:.2f} s (SLO "
        f"{plain(cfg.ttft_slo_s)} s) and TPOT {o.online_tpot_s * 1e3:.1f} ms (SLO "
        f"{plain(cfg.tpot_slo_s * 1e3)} ms)"
    )
