"""Online serving (Poisson agent arrivals under TTFT/TPOT SLOs), vectorized over clusters.

The one online model (docs/model.md section 6): ``evaluate_mode`` (``size``, ``recommend``)
runs it on one cluster, ``sweep`` on arrays of them, so a sweep's APS is ``size``'s APS at the
same point. Turns arrive at lambda_t = APS x turns. Prefill is a gated batch-service queue: a
request waits for the running batch (mean residual tau/2) and then its own, the steady batch
is b = lambda_g t0 / (1 - lambda_g u); near the batch cap B it also waits for later batches
(Kingman: W_B = rho/(1-rho) tau(B)/(2B), rho against the capped rate B / tau(B)); so

    TTFT = R + 1.5 tau(b) + W_B + W_io   (b >= 1; below one request per pass the GPU idles
                                            and the running pass's wait is Kingman's for the
                                            GPU's regular arrivals, c^2 / G),

R the part of the KV read not hidden behind compute (tau(b) the longer of the pass and the
KV's move after the read, ``kv_transfer_s``), W_io the M/D/1 wait of the binding I/O
link (one node serves a turn's read), lambda_g the arrival rate at the busiest GPU. TPOT is the
decode step at the decode batch b_d = lambda_t x generated x TPOT (Little). APS is the largest
rate with TTFT <= SLO and TPOT <= SLO, found by a bracketing search (regula falsi on the
SLOs' slack, safeguarded by halvings) that stops each cluster once its rate is known to 1e-12
of itself, so an array of clusters gives what each one gives alone.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from statistics import NormalDist
from typing import Any

import numpy as np

from dualpath_plan.frozen import record
from dualpath_plan.memo import IdentityMemo
from dualpath_plan.physics.engines import DecodeGroup, PrefillEngine
from dualpath_plan.physics.links import (
    LINK_BY_NAME,
    LINK_INDEX,
    LINK_TABLE,
    Demand,
    Num,
    turn_load_columns,
)
from dualpath_plan.scenario.assemble import Assembly
from dualpath_plan.scenario.bundle import Scenario
from dualpath_plan.scenario.spec import ServingConfig, SloPercentiles
from dualpath_plan.solvers.closed_form import Solution

# What stops a higher APS, by code (``OnlineAps.limit``): the first three are what binds just
# above the APS; "unreachable" means no arrival rate meets the SLOs (even one agent misses).
APS_LIMITS: tuple[str, ...] = ("throughput", "ttft", "tpot", "unreachable", "utilization")
# The APS search narrows [1e-9 / turns, T / turns] until every cluster's rate is known to
# 1e-12 of itself: about 10 steps where the SLOs' slack is smooth at the APS (a chord at an
# end steps half that precision past it, to close the bracket from the other side), a halving
# per step where it jumps (an unstable queue). At most three steps per halving, so 180 steps
# narrow it at least as far as 60 halvings of a bisection.
_SEARCH_STEPS = 180
_BISECTION_REL = 1e-12
# Clusters x grid points up to which the decode batch is found by testing every grid point
# (one cluster: a few thousand), beyond which by a search.
_DIRECT_CELLS = 1 << 16
_IO = np.asarray([i for i, k in enumerate(LINK_TABLE) if k.io])
_IO_SIDE = np.asarray([{"pe": 0, "de": 1}.get(LINK_TABLE[i].side, 2) for i in _IO])
_IO_SIDES = 3  # prefill nodes, decode nodes, storage


def decode_little_batch(
    group: DecodeGroup, turns_per_s: np.ndarray, generated: float | np.ndarray
) -> np.ndarray:
    """``DecodeGroup.little_batch`` over an array of turn rates, for one decode group: the batch
    b with b = rate x generated x TPOT(b), at most the HBM-limited batch (the same step table
    and the same linear crossing)."""
    b, t = group.step_table
    v = np.asarray(turns_per_s, dtype=np.float64) * generated
    n = b.size
    if v.size * n <= _DIRECT_CELLS:  # the scalar's test at every grid point, at once
        ok = v[..., None] * t <= b
        k = np.where(ok.any(axis=-1), np.argmax(ok, axis=-1), n)
    else:
        # The first grid point with v t_k <= b_k: b / t(b) (tokens/s) rises with the batch,
        # so a search on its running maximum finds it; the exact test settles rounding at the
        # edge.
        with np.errstate(divide="ignore", invalid="ignore"):
            rising = np.maximum.accumulate(b / t)
        k = np.searchsorted(rising, v, side="left")
        for _ in range(2):
            below = np.maximum(k - 1, 0)
            k = np.where((k > 0) & (v * t[below] <= b[below]), k - 1, k)
            here = np.minimum(k, n - 1)
            k = np.where((k < n) & ~(v * t[here] <= b[here]), k + 1, k)
    hi = np.minimum(np.maximum(k, 1), n - 1)
    lo = hi - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        f0 = v * t[lo] - b[lo]
        f1 = v * t[hi] - b[hi]
        crossing = b[lo] + (b[hi] - b[lo]) * f0 / (f0 - f1)
    first = np.maximum(v * t[0], 0.0)
    return np.where(k >= n, b[-1], np.where(k == 0, first, crossing))


def decode_step(group: DecodeGroup, batch: np.ndarray) -> np.ndarray:
    """``DecodeGroup.step_s`` over an array of batches: the tabulated step time, interpolated,
    within the table; the roofline outside it."""
    b, t = group.step_table
    batch = np.asarray(batch, dtype=np.float64)
    inside = (batch >= 1.0) & (batch <= b[-1])
    out = np.interp(batch, b, t)
    if not inside.all():
        out = np.where(inside, out, group.step_array_s(batch))
    return out


@record
class OnlineQueue:
    """The online model's inputs for an array of clusters of one mode (1-D, one entry per
    cluster): the saturated throughput, the busiest prefill GPU, the prefill batch cap, the
    binding I/O link, and each cluster's decode group."""

    # Per cluster, or one number for all (``stack_queues``: each queue's own).
    turns: float | np.ndarray  # mean turns per agent
    generated: float | np.ndarray  # mean generated tokens per turn
    # Squared coefficient of variation of the gaps between turns arriving (1: Poisson); a
    # trace's burstiness (workload arrival_cv) scales the queueing waits (Kingman).
    arrival_cv2: float | np.ndarray
    # The light-load cycle of an agent (``light_load_s``) and its squared variation from turn
    # to turn (``cycle_cv2``): the agents in the system at a rate, lambda c, and how regular
    # their turns are (``turn_gap_cv2``).
    cycle_s: np.ndarray
    cycle_cv2: np.ndarray
    t_max: np.ndarray  # saturated turns/s
    gpus: np.ndarray  # prefill GPUs
    imbalance: np.ndarray  # the busiest prefill GPU's load over the mean
    # 1 where the scheduler sends a turn to the least-loaded GPU (queue_aware, ideal): the GPUs
    # are one pool; 0 where it deals turns in turn (round_robin).
    pooled: np.ndarray
    # Where the scheduler also picks each turn's read path by the read queues (dualpath's
    # optimal split): 1 under ideal, the prefill and decode nodes' reads one pool;
    # TWO_CHOICE_READS under queue_aware, the shorter of the two nodes it placed the turn on
    # (``two_choice_wait``); 0 elsewhere.
    reads_pooled: np.ndarray
    # Where round robin deals the turns and every read is on the prefill side (basic): the
    # ranks of one prefill node, which it deals one after another (its reads come in blocks
    # of that many, ``_block_read_wait``); 0 elsewhere.
    node_ranks: np.ndarray
    prefill: PrefillEngine  # t0, u and the read latency (batch cap: ``batch_cap``)
    batch_cap: np.ndarray
    # Per cluster and I/O side (prefill nodes, decode nodes, storage: clusters x 3): the
    # turns/s at which the side's busiest I/O link saturates (inf: no I/O load there), and
    # the servers that share its load (P, D, 1).
    t_io: np.ndarray
    io_nodes: np.ndarray
    # Per cluster, link and read path (clusters x links x 2: a turn read on the prefill side,
    # on the decode side): the KV's move after the read, alone on each link it crosses
    # (``kv_transfer_s``), which the pass overlaps but cannot shorten; the turns/s at which
    # each of those links saturates (clusters x links, inf: no load); and the share of turns
    # read on the decode side.
    transfer_s: np.ndarray
    t_transfer: np.ndarray
    de_share: np.ndarray
    groups: tuple[DecodeGroup, ...]  # one decode group per distinct decode node count
    order: np.ndarray  # the clusters sorted by their decode group
    starts: np.ndarray  # where each group's clusters start in that order (and the end)

    def at(
        self, aps: np.ndarray, percentiles: SloPercentiles | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """TTFT and TPOT at an arrival rate of ``aps`` agents/s per cluster (inf where the
        queue is unstable): their means, or with ``percentiles`` the quantiles it names
        (``ttft_quantile``, ``tpot_quantile``; None for a mean)."""
        w = self.waits(aps)
        if percentiles is None or percentiles.ttft is None:
            ttft = w.mean_ttft_s
        else:
            ttft = w.ttft_quantile(percentiles.ttft / 100.0)
        lam = w.turns_per_s
        if len(self.groups) == 1:
            b_d = decode_little_batch(self.groups[0], lam, self.generated)
            tpot = _tpot(self.groups[0], b_d, percentiles)
        else:  # per decode group, over its clusters
            by_group = lam[self.order]
            gen = np.asarray(self.generated, dtype=np.float64)
            gen = gen[self.order] if gen.ndim else gen
            sorted_tpot = np.empty_like(by_group)
            for g, group in enumerate(self.groups):
                s = slice(self.starts[g], self.starts[g + 1])
                if s.start < s.stop:
                    b_d = decode_little_batch(group, by_group[s], gen[s] if gen.ndim else gen)
                    sorted_tpot[s] = _tpot(group, b_d, percentiles)
            tpot = np.empty_like(lam)
            tpot[self.order] = sorted_tpot
        return np.where(w.unstable, math.inf, ttft), np.where(w.unstable, math.inf, tpot)

    @functools.cached_property
    def _fixed(self) -> tuple[Any, ...]:
        """What ``waits`` reads that no rate changes, computed once per queue (the APS search
        asks for the waits a dozen times), each as ``waits`` writes it: the pass's time per
        request u, the capped pass per GPU t0 + B u, a request's share of a GPU 1 / g, its pass
        tau(1/g) and the ranks of the pool."""
        pm = self.prefill
        u = pm.u_s
        one = 1.0 / np.asarray(pm.request_gpus)
        return (
            u,
            pm.t0_s + self.batch_cap * u,
            one,
            pm.t0_s + one * u,
            np.maximum(np.round(self.gpus / np.asarray(pm.request_gpus)), 1.0),
        )

    def gap_cv2(self, lam: np.ndarray) -> np.ndarray:
        """The squared variation of the gaps between turns that the queues see at ``lam``
        turns/s per cluster (``turn_gap_cv2``: the agents in the system at that rate)."""
        return turn_gap_cv2(
            self.arrival_cv2, lam, self.cycle_s, self.cycle_cv2, self.io_nodes[:, 0]
        )

    def waits(self, aps: np.ndarray) -> PrefillWaits:
        """What a turn's TTFT is made of at an arrival rate of ``aps`` agents/s per cluster:
        the fixed part, the running pass's residual and the queues' waits (``PrefillWaits``)."""
        pm = self.prefill
        u, forward_cap, one, tau_1, ranks = self._fixed
        lam = np.asarray(aps, dtype=np.float64) * self.turns
        # The waits are the mean GPU's; whether the queue is stable, the busiest GPU's (the
        # scheduler's imbalance). The discrete-event simulation shows a mean TTFT taken at the
        # busiest GPU's rate 34% to 84% high at half to 70% of capacity under round robin,
        # which deals equal turns evenly (docs/model.md section 10).
        lam_g = lam / self.gpus
        lam_busy = lam_g * self.imbalance
        cap = self.batch_cap
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            unstable = (lam >= self.t_max) | (lam_busy * u >= 1.0)
            unstable |= lam_busy * pm.t0_s / (1.0 - lam_busy * u) > cap
            batch = lam_g * pm.t0_s / (1.0 - lam_g * u)
            # Near the batch cap B, requests also wait for later batches: Kingman's
            # heavy-traffic wait for batches of B arrivals served in a fixed tau(B) (c_s^2 =
            # 0), rho against the capped rate B / tau(B). B counts a GPU's share of requests
            # (1 / g of a request that runs on g = request_gpus GPUs), so a batch of B holds
            # B g requests: c_a^2 = c^2 / (B g) for arrivals of squared variation c^2 (1 for
            # Poisson). It keeps TTFT finite only below the capped capacity. (Without g, a
            # tensor-parallel rank of 8 GPUs waited 8 times too long: Llama-3.1-70B's mean
            # TTFT on DGX H100 2P2D at 40% load 28% above the simulation's, its p90 80%.)
            # Only the cap's part counts: tau(B) / B = t0 / B + u, and without a cap (B ->
            # infinity) the same wait tends to rho_u / (1 - rho_u) u c^2 / (2 g), rho_u =
            # lambda_g u: a GPU's M/D/1 wait for the work u of the requests ahead, which the
            # running pass's wait and the steady batch b already hold. So the wait for later
            # batches is Kingman's at the cap less that limit: 0 without a cap, Kingman's
            # pole at the cap (docs/model.md section 6c; Kingman's alone put a compute-bound
            # MoE whose simulated turns wait for nothing 59% to 188% above the simulation's
            # p90 at 30% to 60% load).
            # The turns' gaps as the queues see them: Poisson's for many agents, more regular
            # for few (``turn_gap_cv2``).
            c2 = self.gap_cv2(lam)
            rho_cap = lam_g * forward_cap / cap
            rho_u = lam_g * u
            unstable |= lam_busy * forward_cap / cap >= 1.0
            wait_batches = (
                rho_cap / (1.0 - rho_cap) * forward_cap / cap - rho_u / (1.0 - rho_u) * u
            ) * (c2 / (2.0 * np.asarray(pm.request_gpus)))
            # The chance a request waits for a later batch: the share of the capped rate's
            # room that the passes' fixed time takes beyond the work, (rho_cap - rho_u) /
            # (1 - rho_u) = lambda_g t0 / (B (1 - rho_u)): 0 without a cap, 1 at it.
            batch_busy = np.clip((rho_cap - rho_u) / (1.0 - rho_u), 0.0, 1.0)
            # The I/O queues a turn's read passes, one after another: on each side its
            # busiest link's Kingman G/D/1 wait (c^2 + 0) / 2 x rho / (1 - rho) / mu, the
            # M/D/1 wait for Poisson arrivals, summed (``_io_wait``).
            wait_io, io_busy, wait_read, read_share, read_width = _io_wait(
                lam, self.t_io, self.io_nodes, c2, self.reads_pooled, self.node_ranks
            )
            # The running pass: at or above one request per pass (b >= 1, the GPU always busy)
            # a request waits out its residual, tau(b)/2, then its own pass. Below that a pass
            # holds one request and the GPU idles between passes; the scheduler deals the
            # turns to the G GPUs in turn or by load, not at random, so a GPU's arrivals are
            # far more regular than the Poisson stream (gaps' c^2 / G, an Erlang-G gap for
            # Poisson): Kingman's G/D/1 wait for a pass of one, at most the residual.
            # A pass of one request (1 / request_gpus per GPU: a tensor-parallel replica's
            # GPUs share it).
            # A GPU's batches vary: a pass takes what arrived during the one before, whose
            # length t0 + u B rises with its batch. A rank's arrivals are regular (the scheduler
            # deals the turns in turn or by load: gaps' c^2 / r over r ranks, as below), so a
            # pass of mean b gets a count of variance (c^2 / r) b, and the feedback through u
            # makes Var B = (c^2 / r) b / (1 - rho_u^2), rho_u = lambda_g u (in a GPU's share:
            # over g, the GPUs of a request). A turn is in a batch size-biased, E[B^2] / E[B] =
            # b + Var B / b (at least itself), and arrives in a pass length-biased: the
            # running pass's residual E[tau^2] / (2 E[tau]). Measured: DeepSeek-V3.2 on HGX
            # B300 1P4D at 67% load, the simulated batches' mean 1.65 and variance 0.38 (this
            # gives 1.51 and 0.34); its p90 15.5% low with the batch b for both. Only where
            # the GPU is always busy (b >= 1): a step up there, as the residual's regime.
            # Below one request a pass (b < 1) the GPU idles between passes of one, started as
            # a turn comes: no batch to vary (the light-load waits below, as measured).
            var_batch = np.where(
                batch >= one, c2 / ranks * batch * one / (1.0 - np.minimum(rho_u, 1.0) ** 2), 0.0
            )
            batch_own = np.maximum(batch + var_batch / np.maximum(batch, one), one)
            tau_own = pm.t0_s + batch_own * u
            tau_pass = pm.t0_s + np.maximum(batch, one) * u
            residual = tau_pass / 2.0 + u**2 * var_batch / (2.0 * tau_pass)
            rho_1 = np.minimum(lam_g * tau_1, 1.0)
            wait_idle = np.where(
                rho_1 < 1.0, c2 / self.gpus * rho_1 / (2.0 * (1.0 - rho_1)) * tau_1, math.inf
            )
            # A scheduler that sends a turn to the least-loaded GPU makes the GPUs one pool:
            # a turn waits only when every rank (the GPUs one request runs on) is busy, the
            # M/D/c wait, about half the M/M/c one (Erlang C), c the ranks and rho a rank's
            # utilization. Kingman's per-GPU wait put the simulated light-load TTFT 8% high
            # and its p90 18% (docs/model.md section 6c).
            rho_r = lam / ranks * tau_1
            wait_pool = np.where(
                rho_r < 1.0,
                0.5 * c2 * erlang_c(ranks, rho_r) * tau_1 / (ranks * (1.0 - rho_r)),
                math.inf,
            )
            wait_idle = np.where(self.pooled > 0.0, wait_pool, wait_idle)
            wait_running = np.minimum(wait_idle, residual)
            # The turn is prefilled when its pass and its KV's move (into HBM, on to the
            # decode node) are both over: they start together and layer-wise prefill overlaps
            # them, so the longer of the two, per read path (``kv_transfer_s``). A pass of a
            # rank of 8 GPUs (Llama-3.1-8B: 4 ms) is shorter than the move of its 64k-token
            # KV to the decode node (22 ms), which the simulation waits for.
            # Each link shares its bandwidth among the transfers on it (processor sharing, as
            # the simulation runs it): the M/G/1-PS mean sojourn S / (1 - rho), rho the link's
            # utilization at this rate (Kleinrock 1967; insensitive to the transfers' sizes).
            # The move's time is its slowest link's.
            rho_move = lam[:, None] / self.t_transfer
            slow = np.where(rho_move < 1.0, 1.0 / (1.0 - rho_move), math.inf)[:, :, None]
            crossing = np.where(self.transfer_s > 0.0, self.transfer_s * slow, 0.0)
            move = np.max(crossing, axis=1, initial=0.0)
            own = prefilled_s(tau_own, move[:, 0], move[:, 1], self.de_share)
            ttft = pm.read_latency_s + wait_running + own + wait_batches + wait_io + wait_read
            # The chance a turn finds a queue: that of each queue it passes, taken as
            # independent (the batches' share above, each I/O side's rho).
            queued_share = 1.0 - (1.0 - batch_busy) * (1.0 - io_busy)
        return PrefillWaits(
            turns_per_s=lam,
            unstable=unstable,
            mean_ttft_s=ttft,
            fixed_s=pm.read_latency_s + own,
            # The running pass's wait is at most the pass: uniform over twice its mean (the
            # whole pass where the GPU is always busy; less where it idles and the scheduler's
            # regular arrivals find it free more often than not).
            residual_s=2.0 * wait_running,
            queued_s=wait_batches + wait_io,
            queued_share=queued_share,
            shared_s=wait_read,
            shared_share=read_share,
            shared_width_s=read_width,
        )


# ``OnlineQueue.reads_pooled`` where the paper scheduler picks a read's node out of two.
TWO_CHOICE_READS = 2.0


def two_choice_wait(rho: np.ndarray, service_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An arrival that joins the less loaded (in seconds of work) of two queues drawn at
    random, each busy with probability ``rho``, served in ``service_s`` on average: the chance
    it waits and its mean wait, in the many-server mean field (Poisson arrivals, exponential
    work; the least-loaded-of-d model of Hellemans and Van Houdt, 2018). A queue's work W has
    P(W > w) = F(w), F(0) = rho; work drains at rate 1 and rises by a job's X where the lesser
    of two works u is below w, so F' = rho F^2 - F (level crossing, in service times), whence
    F(w) = rho / (rho^2 + (1 - rho^2) e^w). The arrival waits the lesser of two works: with
    probability F(0)^2 = rho^2, and for the integral of F^2, -ln(1 - rho^2) / rho^2 - 1
    (rho^2 / 2 + rho^4 / 3 + ...; ~0.24 at rho 0.6, where one M/M/1 queue waits 1.5 and the
    join-the-shorter count of jobs 0.41). The caller keeps it for deterministic reads on
    processor-shared links, an approximation: an M/G/1-PS queue's mean delay is the M/M/1 one
    whatever the sizes, but under Poisson arrivals that do not depend on the queue, which
    least-work routing breaks; scaled by the arrivals' variation as Kingman's (c_a^2 + 1) / 2,
    also an approximation (halving it for deterministic reads held 48 of the 50 random
    scenarios of docs/model.md section 6c, this 49); infinite at rho >= 1. A 400-queue
    simulation of the rule is within 2% at rho 0.3 to 0.85
    (``tests/test_tail_slos.py::test_two_choice_wait_is_the_least_loaded_of_two``)."""
    r = np.clip(np.asarray(rho, dtype=np.float64), 0.0, 1.0)
    x = r * r
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = -np.log1p(-x) / x - 1.0
        units = np.where(x < 1e-4, x / 2.0 + x * x / 3.0 + x**3 / 4.0, exact)
        wait_s = np.where(r < 1.0, units * service_s, math.inf)
    return x, wait_s


# Servers up to which Erlang C is computed exactly (the Erlang B recursion), beyond which by
# the Halfin-Whitt approximation, within 1% there.
_ERLANG_EXACT = 64


def erlang_c(servers: np.ndarray, rho: np.ndarray) -> np.ndarray:
    """The probability that an arrival waits in an M/M/c queue of c = ``servers`` at
    utilization ``rho`` (< 1): Erlang C = B / (1 - rho (1 - B)), B Erlang's loss formula by its
    recursion B_k = a B_(k-1) / (k + a B_(k-1)), a = c rho; above ``_ERLANG_EXACT`` servers
    Halfin and Whitt's 1 / (1 + beta Phi(beta) / phi(beta)), beta = (1 - rho) sqrt(c)."""
    c, r = np.broadcast_arrays(
        np.asarray(servers, dtype=np.float64), np.clip(np.asarray(rho, dtype=np.float64), 0, 1)
    )
    a = c * r
    small = c <= _ERLANG_EXACT
    b = np.ones_like(a)
    # Up to the fewest servers every element's recursion runs: the same terms without the
    # mask (the APS search calls this twice per step); beyond, only where there are that many.
    every = int(c.min()) if c.size and small.all() else 0
    for k in range(1, int(min(c.max(initial=1.0), _ERLANG_EXACT)) + 1):
        if k <= every:
            b = a * b / (k + a * b)
        else:
            b = np.where(small & (k <= c), a * b / (k + a * b), b)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = b / (1.0 - r * (1.0 - b))
        out = exact
        if not small.all():
            beta = (1.0 - r) * np.sqrt(c)
            phi = np.exp(-beta * beta / 2.0) / math.sqrt(2.0 * math.pi)
            big_phi = _normal_cdf(beta)
            out = np.where(small, exact, 1.0 / (1.0 + beta * big_phi / phi))
    return np.clip(np.nan_to_num(out, nan=1.0), 0.0, 1.0)


# Abramowitz and Stegun 7.1.26: erf(x) = 1 - (a1 t + ... + a5 t^5) e^(-x^2), t = 1 / (1 + p x),
# x >= 0, within 1.5e-7 of erf everywhere. In NumPy, over arrays of clusters: SciPy's ndtr
# would load SciPy on a plain `size` (a tenth of a second of its cold start, INV-17), and
# math.erf per element takes a microsecond each in the APS search's loops.
_AS_P = 0.3275911
_AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    """Phi(x), the standard normal distribution function, within 1e-7 (``_AS_A``)."""
    x = np.asarray(x, dtype=np.float64)
    z = np.abs(x) / math.sqrt(2.0)
    with np.errstate(over="ignore", invalid="ignore"):
        t = 1.0 / (1.0 + _AS_P * z)
        poly = t * (_AS_A[0] + t * (_AS_A[1] + t * (_AS_A[2] + t * (_AS_A[3] + t * _AS_A[4]))))
        erf = 1.0 - poly * np.exp(-z * z)
    return np.where(x >= 0.0, 0.5 * (1.0 + erf), 0.5 * (1.0 - erf))


def _tpot(group: DecodeGroup, b_d: np.ndarray, percentiles: SloPercentiles | None) -> np.ndarray:
    """The decode step at Little's batch ``b_d`` (a mean TPOT), or with a TPOT percentile
    the step at the batch's quantile: the sequences decoding are an M/G/infinity population,
    Poisson of mean b_d, taken at its normal approximation b_d + z_p sqrt(b_d). A turn's TPOT
    averages the step over its tokens, so this bounds its quantile from above
    (docs/model.md section 6c)."""
    if percentiles is not None and percentiles.tpot is not None:
        z = NormalDist().inv_cdf(percentiles.tpot / 100.0)
        b_d = b_d + z * np.sqrt(np.maximum(b_d, 0.0))
    return decode_step(group, np.maximum(b_d, 1.0))


@record
class PrefillWaits:
    """A turn's TTFT at a rate, per cluster, in parts (docs/model.md section 6c): fixed (the
    read not hidden and its own pass), the running pass's residual (uniform on [0, residual_s]
    where the GPU is always busy, 0 otherwise) and the queues' waits (mean ``queued_s``; a turn
    waits at all with probability ``queued_share``, and then an exponential time: the
    heavy-traffic shape of a G/G/1 wait). Their mean is ``mean_ttft_s``, the online model's
    TTFT."""

    turns_per_s: np.ndarray
    unstable: np.ndarray
    mean_ttft_s: np.ndarray
    fixed_s: np.ndarray
    residual_s: np.ndarray
    queued_s: np.ndarray
    queued_share: np.ndarray
    # The wait of a read on a processor-shared link fed in blocks (round robin's prefill
    # nodes, ``_block_read_wait``): mean ``shared_s``; zero with probability 1 - pi_S, else
    # uniform with mean shared_s / pi_S, pi_S = ``shared_share``, over at most
    # ``shared_width_s`` (from 0 where that is wide enough, else centred on its mean): a
    # block's overlapping reads end together, so their sojourns are narrow, not exponential.
    shared_s: np.ndarray
    shared_share: np.ndarray
    shared_width_s: np.ndarray

    def ttft_quantile(self, p: float) -> np.ndarray:
        """The p-quantile of the TTFT (0 < p < 1): fixed_s plus that of U + W + V, U uniform
        on [0, a], W zero with probability 1 - pi, else exponential of mean m / pi, and V zero
        with probability 1 - pi_S, else uniform with mean shared_s / pi_S over at most
        shared_width_s, found on its distribution function by bisection (``_sum_quantile``)."""
        return self.fixed_s + _sum_quantile(
            p,
            self.residual_s,
            self.queued_s,
            self.queued_share,
            self.shared_s,
            self.shared_share,
            self.shared_width_s,
        )


# Bisection steps of ``_sum_quantile``: its bracket is at most the residual wide, 60 halvings
# narrow it to 1e-18 of that.
_QUANTILE_STEPS = 60


def _sum_quantile(
    p: float,
    a: np.ndarray,
    m: np.ndarray,
    pi: np.ndarray,
    v: np.ndarray | float = 0.0,
    pi_v: np.ndarray | float = 0.0,
    v_width: np.ndarray | float = math.inf,
) -> np.ndarray:
    """The p-quantile of U + W + V: U uniform on [0, a] (a >= 0), W zero with probability
    1 - pi and exponential of rate theta = pi / m otherwise, V zero with probability 1 - pi_v
    and otherwise uniform with mean v / pi_v over at most ``v_width``: on [0, 2 v / pi_v]
    where that is narrower, else on v / pi_v -+ v_width / 2 (mean v). U + W's distribution
    function is F0(t) = (1 - pi) min(t / a, 1) + pi G(t), G that of U + an exponential: for
    t <= a (t - (1 - e^(-theta t)) / theta) / a, beyond 1 - (e^(-theta (t - a)) -
    e^(-theta t)) / (theta a); with V on [l, l + b], F(t) = (1 - pi_v) F0(t) + pi_v
    (H0(t - l) - H0(t - l - b)) / b, H0 the integral of F0 from 0 (``_f0_integral``). The
    quantile lies between W's (and U's, p a) and a + l + b more than W's."""
    a = np.asarray(a, dtype=np.float64)
    shape = np.broadcast_shapes(
        a.shape, np.shape(m), np.shape(pi), np.shape(v), np.shape(pi_v), np.shape(v_width)
    )
    a, m, pi, v, pi_v, v_width = (
        np.broadcast_to(np.asarray(x, dtype=np.float64), shape)
        for x in (a, m, pi, v, pi_v, v_width)
    )
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        shares = (pi_v > 0.0) & (v > 0.0) & np.isfinite(v)
        pi_v = np.where(shares, np.clip(pi_v, 0.0, 1.0), 0.0)
        centre = np.where(shares, v / np.where(shares, pi_v, 1.0), 0.0)
        b = np.minimum(2.0 * centre, np.maximum(v_width, 0.0))
        low = centre - b / 2.0  # V's least value where it is met
        # A wait W whose mean m / pi is below 1e-12 of U's and V's spans is W = 0 (its
        # rate theta, up to 1e57, overflowed the integral of V's part: a median of U + V of
        # 2.5 came out as 1.0, found by the sampling test).
        waits = (pi > 0.0) & (m > 0.0)
        waits &= m / np.where(waits, pi, 1.0) > 1e-12 * (a + b)
        theta = np.where(waits, pi / np.where(m > 0.0, m, 1.0), 1.0)
        pi = np.where(waits, np.clip(pi, 0.0, 1.0), 0.0)
        # Likewise a span a of U below 1e-12 of W's mean and V's span is U = 0 (F0's terms
        # divide by a: at a = 7e-129 V's part came out as nothing and the median of W + V as
        # W's alone).
        a = np.where(a > 1e-12 * (np.where(waits, 1.0 / theta, 0.0) + b), a, 0.0)
        q_w = np.where(pi > 1.0 - p, np.log(pi / (1.0 - p)) / theta, 0.0)
        lo = np.maximum(q_w, p * a)
        hi = a + q_w + low + b
        shifted = shares & (b > 0.0)
        safe_b = np.where(shifted, b, 1.0)
        for _ in range(_QUANTILE_STEPS):
            t = (lo + hi) / 2.0
            f0 = _f0(t, a, pi, theta)
            spread = (
                _f0_integral(t - low, a, pi, theta) - _f0_integral(t - low - b, a, pi, theta)
            ) / safe_b
            # V of no width: the point low (F0 shifted by it).
            spread = np.where(shifted, spread, _f0(np.maximum(t - low, 0.0), a, pi, theta))
            spread = np.where(t - low >= 0.0, spread, 0.0)
            f = (1.0 - pi_v) * f0 + pi_v * np.where(shares, spread, f0)
            below = f < p
            lo, hi = np.where(below, t, lo), np.where(below, hi, t)
    return np.where(np.isfinite(m) & np.isfinite(a) & np.isfinite(v), (lo + hi) / 2.0, math.inf)


def _f0(t: np.ndarray, a: np.ndarray, pi: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """F0 of ``_sum_quantile``: the distribution function of U + W at t >= 0."""
    flat = a > 0.0
    safe_a = np.where(flat, a, 1.0)
    u = np.where(flat, np.minimum(t / safe_a, 1.0), 1.0)
    inside = (t + np.expm1(-theta * t) / theta) / safe_a
    beyond = 1.0 - (np.exp(-theta * (t - a)) - np.exp(-theta * t)) / (theta * safe_a)
    g = np.where(flat, np.where(t <= a, inside, beyond), -np.expm1(-theta * t))
    return (1.0 - pi) * u + pi * g


def _shape_x2(x: np.ndarray) -> np.ndarray:
    """(x^2 / 2 - x + 1 - e^(-x)) / x^2, by its series below 1e-3 (the terms cancel there)."""
    big = x > 1e-3
    safe = np.where(big, x, 1.0)
    exact = (0.5 * safe * safe - safe - np.expm1(-safe)) / (safe * safe)
    return np.where(big, exact, x / 6.0 - x * x / 24.0 + x * x * x / 120.0)


def _f0_integral(s: np.ndarray, a: np.ndarray, pi: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """The integral of F0 (``_f0``) from 0 to s (0 for s <= 0): of min(t / a, 1), s^2 / (2 a)
    to a, s - a / 2 beyond; of G, s^2 q(theta s) / a to a, q(x) = (x^2 / 2 - x + 1 - e^(-x)) /
    x^2, and beyond that at a plus (s - a) - (e^(theta a) - 1) / (theta a) (e^(-theta a) -
    e^(-theta s)) / theta; without U (a = 0), s and s - (1 - e^(-theta s)) / theta."""
    s = np.maximum(s, 0.0)
    flat = a > 0.0
    safe_a = np.where(flat, a, 1.0)
    lin = np.where(s <= a, s * s / (2.0 * safe_a), s - a / 2.0)
    lin = np.where(flat, lin, s)
    at_a = a * _shape_x2(theta * a)
    # (e^(theta a) - 1) e^(-theta a) as 1 - e^(-theta a): e^(theta a) overflowed past
    # theta a = 709 (a U of 3 s and a W of 4 ms), and inf x 0 made the quantile NaN's.
    tail = -np.expm1(-theta * a) / (theta * safe_a)
    tail = tail * -np.expm1(-theta * (s - a)) / theta
    g = np.where(s <= a, s * s * _shape_x2(theta * s) / safe_a, at_a + (s - a) - tail)
    g = np.where(flat, g, s + np.expm1(-theta * s) / theta)
    return (1.0 - pi) * lin + pi * g


@record
class OnlineAps:
    """Per cluster: the APS, what stops a higher one (a code of ``APS_LIMITS``), and the TTFT and
    TPOT there (for an unreachable SLO: what one agent sees)."""

    aps: np.ndarray
    limit: np.ndarray
    ttft_s: np.ndarray  # the SLOs' statistic: the mean, or the percentile they hold
    tpot_s: np.ndarray
    slo_aps: np.ndarray  # the SLOs' own APS, before the max_utilization headroom
    # The means at the APS (the same as ttft_s and tpot_s unless the SLOs hold percentiles):
    # what Little's law reads (the agents' lifetime, the KV working set).
    mean_ttft_s: np.ndarray
    mean_tpot_s: np.ndarray

    def limit_names(self) -> list[str]:
        return [APS_LIMITS[int(k)] for k in np.atleast_1d(self.limit)]


def _slack(ttft: np.ndarray, tpot: np.ndarray, cfg: ServingConfig) -> np.ndarray:
    """How far inside both SLOs: each SLO over its latency, less 1 (>= 0 where both are met,
    -1 where the queue is unstable). Over the latency, the slack is near linear in the rate
    close to a queue's saturation, where the latency has a pole."""
    with np.errstate(divide="ignore"):
        return np.minimum(cfg.ttft_slo_s / ttft, cfg.tpot_slo_s / tpot) - 1.0


def online_queue(
    sc: Scenario,
    asm: Assembly,
    sol: Solution,
    moves: KvMoves | None = None,
    light: tuple[Num, Num] | None = None,
) -> OnlineQueue:
    """The online queue of every cluster of an assembly of ``sc`` and its solution (1-D over
    clusters; a single cluster is an array of one); ``moves`` and ``light``: the assembly's
    ``kv_move_s`` and its light load (``light_load_s``: a turn's TTFT alone and the cycle),
    where the caller has them."""
    P = np.atleast_1d(np.asarray(asm.pe.nodes, dtype=np.float64))
    D = np.atleast_1d(np.asarray(asm.de.nodes, dtype=np.float64))
    n = max(P.size, D.size)
    P, D = _column(P, n), _column(D, n)
    pm = asm.pe.prefill
    decode = asm.de.decode
    assert pm is not None and decode is not None
    gpus = P * sc.prefill_node.gpus_per_node
    scheduler = sc.scheduling.scheduler(asm.mode.scheduler)
    policy = scheduler.policy
    imbalance = scheduler.gpu_imbalance(gpus)  # busiest GPU
    t_max = _column(sol.throughput_turns_per_s, n)
    util_all = np.asarray(sol.utilization).reshape(-1, len(LINK_TABLE))
    if util_all.shape[0] != n:
        util_all = np.broadcast_to(util_all, (n, len(LINK_TABLE)))
    util = util_all[:, _IO]
    t_io = np.full((n, _IO_SIDES), math.inf)
    if not asm.mode.io_free:
        for side in range(_IO_SIDES):
            busiest = util[:, np.equal(_IO_SIDE, side)].max(axis=1)
            with np.errstate(divide="ignore", invalid="ignore"):
                t_io[:, side] = np.where(busiest > 0, t_max / busiest, math.inf)
    io_nodes = np.stack([P, D, np.ones(n)], axis=1)
    if asm.de.index is None:
        groups: tuple[DecodeGroup, ...] = (decode.entry(0),)
        group = np.zeros(n, dtype=np.int64)
    else:
        count = np.asarray(decode.free_hbm_bytes).size
        groups = tuple(decode.entry(i) for i in range(count))
        group = np.broadcast_to(np.asarray(asm.de.index, dtype=np.int64), (n,))
    order = np.argsort(group, kind="stable")
    d = sc.turn_demand
    moves = kv_move_s(sc, asm) if moves is None else moves
    transfer = kv_transfer_s(sc, asm, n, moves)
    de_share = _column(np.asarray(sol.decode_path_fraction, dtype=np.float64).reshape(-1), n)
    if light is None:
        light = light_load_s(sc, asm, de_share, moves)
    ttft_one, cycle = (_column(v, n) for v in light)
    # The move's links saturate where the solution's utilization reaches 1 (their load, the
    # write-back's with it, is proportional to the turn rate).
    with np.errstate(divide="ignore", invalid="ignore"):
        moved = util_all[:, [LINK_INDEX[k] for k in _MOVE_LINKS]]
        t_transfer = np.where(moved > 0, t_max[:, None] / moved, math.inf)
    return OnlineQueue(
        turns=d.trajectory_turns.mean,
        generated=d.mean(d.generated_tokens),
        arrival_cv2=sc.workload.arrival_cv**2,
        cycle_s=cycle,
        cycle_cv2=cycle_cv2(sc, ttft_one, cycle),
        t_max=t_max,
        gpus=gpus,
        imbalance=_column(imbalance, n),
        pooled=_column(float(policy != "round_robin"), n),
        reads_pooled=_column(
            float(policy != "round_robin" and asm.mode.split == "optimal")
            * (TWO_CHOICE_READS if policy == "queue_aware" else 1.0),
            n,
        ),
        node_ranks=_column(
            float(sc.prefill_node.gpus_per_node / max(float(np.asarray(pm.request_gpus)), 1.0))
            if policy == "round_robin" and asm.mode.split == "pe_only"
            else 0.0,
            n,
        ),
        # The pass's times per cluster: per prefill node count under the operator model
        # (each count its own layout), numbers otherwise.
        prefill=replace(
            pm,
            t0_s=_column(asm.pe.take(pm.t0_s), n),
            t1_s=_column(asm.pe.take(pm.t1_s), n),
        )
        if np.ndim(pm.t1_s) > 0
        else pm,
        # The waits' batch cap is the HBM's: the wait for later batches is a heavy-traffic
        # form, and below saturation the paper scheduler's beta holds a turn back only when a
        # GPU's waiting work passes 5 s, which that form at beta's admitted batch overstated
        # (3 of 48 random scenarios' p90 from within 15% to 30% to 51% high). The saturated
        # rate t_max, and so where the queue is unstable, is the pass batch's (section 4).
        batch_cap=_column(asm.pe.take(pm.batch_cap), n),
        t_io=t_io,
        io_nodes=io_nodes,
        transfer_s=transfer,
        t_transfer=t_transfer,
        de_share=de_share,
        groups=groups,
        order=order,
        starts=np.searchsorted(group[order], np.arange(len(groups) + 1)),
    )


# The links a turn's KV crosses after its read, on the nodes' sides (the storage cluster's
# carry only its reads and the write-back).
_MOVE_LINKS = tuple(k.name for k in LINK_TABLE if k.io and not k.read_phase and k.side != "storage")


# A turn's KV move after its read (``kv_move_s``): per link of ``_MOVE_LINKS`` with a load, its
# index there and the move's time read on the prefill side and on the decode side.
KvMoves = list[tuple[int, np.ndarray, np.ndarray]]


def kv_move_s(sc: Scenario, asm: Assembly) -> KvMoves:
    """The time of a mean turn's KV move after its read, alone on each link it crosses: per
    link of ``_MOVE_LINKS`` with a load, (its index there, the time read on the prefill side,
    read on the decode side), each broadcast over the clusters of ``asm``. On each I/O link
    outside the read (``Link.read_phase``), the turn's hit and miss KV (physics/links.py's
    steps: into the prefill GPU's HBM, on to the decode node's DRAM and HBM; the write-back is
    after the turn) at the link's per-node rate without the scheduler's imbalance
    (``SideCapacity.lone_rate``). The simulation starts the move with the turn's pass and
    prefills the turn when both are over. The light-load TTFT (``serving.light_load``) and
    the online queue (``online_queue``) read it; a caller that gives both one cluster
    computes it once and passes it to each (``serving.cores_each``)."""
    out: KvMoves = []
    if asm.mode.io_free:
        return out
    with np.errstate(divide="ignore"):
        for i, name, a, b in _move_loads(sc):
            rate = (asm.pe if LINK_BY_NAME[name].side == "pe" else asm.de).lone_rate(name)
            out.append((i, a / rate, (a + b) / rate))
    return out


# The loads of ``_move_loads`` by the turn demand and options they come from.
_MOVE_LOADS: IdentityMemo[list[tuple[int, str, float, float]]] = IdentityMemo(64)


def _move_loads(sc: Scenario) -> list[tuple[int, str, float, float]]:
    """Per link of ``_MOVE_LINKS`` with a load, (its index there, its name, a, b): the mean
    turn's hit and miss KV on it read on the prefill side (a) and on the decode side (a + b),
    from physics/links.py's steps. They depend on the scenario's turn demand and options
    alone: one list for every mode of a scenario and for the perturbed twins of its nodes."""

    def loads() -> list[tuple[int, str, float, float]]:
        d = sc.turn_demand
        moved = Demand(d.mean(d.hit_bytes), d.mean(d.miss_bytes), 0.0, 0.0, 0.0, 0.0)
        columns = turn_load_columns(moved, sc.options)
        out = []
        for i, name in enumerate(_MOVE_LINKS):
            a, b = (float(np.asarray(v)) for v in columns[name])
            if a + b <= 0.0:
                continue
            out.append((i, name, a, b))
        return out

    return _MOVE_LOADS.get((sc.turn_demand, sc.options), loads)


def kv_transfer_s(sc: Scenario, asm: Assembly, n: int, moves: KvMoves | None = None) -> np.ndarray:
    """``kv_move_s`` laid out per cluster of ``asm`` (``n`` of them), link of ``_MOVE_LINKS``
    and read path (clusters x links x 2: read on the prefill side, on the decode side; 0 where
    a link moves nothing); ``moves``: ``kv_move_s``'s, where the caller has it."""
    out = np.zeros((n, len(_MOVE_LINKS), 2))
    for i, pe_read, de_read in kv_move_s(sc, asm) if moves is None else moves:
        out[:, i, 0] = _column(pe_read, n)
        out[:, i, 1] = _column(de_read, n)
    return out


def light_load_s(
    sc: Scenario, asm: Assembly, de_share: Num, moves: KvMoves | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``serving.light_load`` of the clusters of ``asm`` whose decode-path share is
    ``de_share``: a turn's TTFT alone (the read not hidden, then the longer of a pass of one
    and its KV's move per read path, ``prefilled_s``) and the per-agent cycle (that TTFT, the
    mean turn's tokens at a decode batch of one, the tool latency). ``moves``: ``kv_move_s``
    where the caller has it (the online queue lays the same moves out per link)."""
    d = sc.turn_demand
    pm, group = asm.pe.prefill, asm.de.decode
    assert pm is not None and group is not None
    pass_s = asm.pe.take(pm.single_pass_s)
    move_pe: Num = 0.0
    move_de: Num = 0.0
    for _, pe_read, de_read in kv_move_s(sc, asm) if moves is None else moves:
        move_pe, move_de = np.maximum(move_pe, pe_read), np.maximum(move_de, de_read)
    own = prefilled_s(pass_s, move_pe, move_de, de_share)
    ttft_min = pm.read_latency_s + own
    tpot_one = asm.de.take(decode_step_one(group))
    cycle = ttft_min + d.mean(d.generated_tokens) * tpot_one + sc.workload.tool_latency_s
    return ttft_min, cycle


# A decode group's step at a batch of one, by group (identity: its fields are frozen).
_STEP_ONE: IdentityMemo[np.ndarray] = IdentityMemo(64)


def decode_step_one(group: DecodeGroup) -> np.ndarray:
    """The decode step of one sequence per group entry (``DecodeGroup.step_array_s``), once
    per group: every cluster of a group reads it (the intervals' 44 clusters have five)."""

    def compute() -> np.ndarray:
        step = group.step_array_s(np.ones_like(group.free_hbm_bytes))
        if isinstance(step, np.ndarray):
            step.flags.writeable = False  # shared by every cluster of the group
        return step

    return _STEP_ONE.get((group,), compute)


def cycle_cv2(sc: Scenario, ttft_s: Num, cycle_s: Num) -> np.ndarray:
    """The squared coefficient of variation of an agent's light-load cycle (``light_load_s``)
    from turn to turn: its decode part, g TPOT(1), varies with the generated tokens g of the
    workload's turn kinds (``TurnDemand.weight``); the tool latency is one number, and a
    turn's own TTFT varies little beside them."""
    d = sc.turn_demand
    g = d.generated_tokens
    mean = d.mean(g)
    spread = float(np.sum(d.weight * (g - mean) ** 2)) / mean**2 if mean > 0.0 else 0.0
    cycle = np.asarray(cycle_s, dtype=np.float64)
    decode = cycle - np.asarray(ttft_s) - sc.workload.tool_latency_s
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(cycle > 0.0, spread * (decode / cycle) ** 2, 1.0)
    return np.clip(out, 0.0, 1.0)


def turn_gap_cv2(agents_cv2: Num, lam: Num, cycle_s: Num, cycle_cv2: Num, nodes: Num) -> np.ndarray:
    """The squared variation of the gaps between turns that the queues see, at ``lam`` turns/s
    (docs/model.md section 6c, "Turns of few agents"). The turns are those of the n = lam c
    agents in the system (Little, c the light-load cycle), each with one turn at a time, a
    cycle apart. Over a window t the count of such a stream is not Poisson: with a fixed
    cycle each agent lands in it with probability t / c at most once (a binomial count,
    index of dispersion 1 - t / c), and a cycle of squared variation c_c^2 takes it back to
    c_c^2 over one cycle (a renewal stream's long-run dispersion); linear between. The window
    that matters is one prefill node's mean gap, P / lam, so t / c = P / n, and the
    dispersion 1 - (1 - c_c^2) min(P / n, 1) scales the agents' own arrival variation (1 for
    Poisson). Many agents (n >> P) give Poisson's turns; few, as the simulation shows, far
    more regular ones (Qwen3-32B DGX B200 2P4D at 35% load, 5 agents in the system: its p90
    52% high with Poisson's turns, -3% with these)."""
    lam = np.asarray(lam, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        share = np.where(lam * cycle_s > 0.0, np.minimum(nodes / (lam * cycle_s), 1.0), 1.0)
    return np.asarray(agents_cv2 * (1.0 - (1.0 - np.asarray(cycle_cv2)) * share))


def prefilled_s(pass_s: Num, move_pe_s: Num, move_de_s: Num, de_share: Num) -> np.ndarray:
    """A turn's own time from its read's end to prefilled: its pass and its KV's move start
    together and layer-wise prefill overlaps them, so the longer of the two, per read path,
    weighed by the share of turns read on the decode side. The one definition: the light-load
    TTFT (serving.light_load) and the online queue's fixed part (``OnlineQueue.waits``, each
    link's move slowed by its sharing) read it."""
    x = np.asarray(de_share, dtype=np.float64)
    return (1.0 - x) * np.maximum(pass_s, move_pe_s) + x * np.maximum(pass_s, move_de_s)


def _block_read_wait(
    lam: np.ndarray, t_s: np.ndarray, nodes: np.ndarray, ranks: np.ndarray, c2: Any
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The mean wait of a turn's read at its prefill node where round robin deals the G ranks
    in turn, a node's k = ``ranks`` one after another, and the node's read link shares its
    bandwidth among the reads in flight (processor sharing, as the simulation runs it); and
    the chance a read shares its link at all. The node's reads come in blocks of k at the
    stream's own gaps (mean 1 / lambda, squared variation c^2), then none for (P - 1) k gaps:
    during a block the link sees the local load r = P rho (rho = lambda / t_s its mean
    utilization), above 1 where rho > 1 / P. A FIFO link would hold the j-th read of a block
    (j = 0 .. k - 1) the largest partial sum of the block's last j increments S - gap, S =
    P / t_s a read's time at its node alone: for Poisson arrivals exactly
    ``_poisson_block_wait`` (Spitzer's identity), and for arrivals of squared variation c^2
    that times c^2, as Kingman's form scales the arrivals' part of a wait (reads of one size,
    c_s^2 = 0); with one node (P = 1) none, the stream having no blocks. Plus the wait for the
    earlier blocks' work: over long spans the node gets one turn in P
    (arrivals of squared variation c_b^2 = c^2 / P, Erlang-P gaps for Poisson), Kingman's
    c_b^2 / 2 rho / (1 - rho) S = c^2 rho S / (2 P (1 - rho)) times Kraemer and
    Langenbach-Belz's factor exp(-2 (1 - rho) (1 - c_b^2)^2 / (3 rho c_b^2)) where
    c_b^2 < 1 (reads of one size: c_s^2 = 0), as Kingman's heavy-traffic form overstates the
    wait of regular arrivals. Processor sharing doubles a FIFO link's wait where reads of one
    size overlap: two reads a apart both end at 2 S - a (FIFO: S and 2 S - a, one wait of S - a
    against two), k at once all at k S (FIFO: a mean of (k - 1) S / 2), and the M/D/1-PS wait
    rho S / (1 - rho) is twice the M/D/1 one. So W = 2 (W_in + W_btw). A read shares its
    link with W / S others on average, so it shares it at all with probability
    pi = min(1, W / S) at most (docs/model.md section 6c)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        rho = lam / t_s
        service = nodes / t_s
        k = np.maximum(np.floor(ranks + 1e-9), 1.0)
        # The block's FIFO waits: exact for Poisson arrivals (Spitzer's identity), scaled by
        # c^2 for others (a diffusion form with Siegmund's correction, before, put them at 0
        # for Kimi-K2 on HGX B300 4P4D at 13% load, where they are 0.36 S). One prefill node
        # has no blocks: every read comes to it, one renewal stream whose stationary wait
        # below (c_b^2 = c^2) is all of its FIFO wait; a block starting empty counted its own
        # arrivals twice (Qwen3-235B DGX B200 1P2D at 62% load: the p90 16% high).
        within = np.where(nodes > 1.0, c2 * _poisson_block_wait(lam, service, k), 0.0)
        c_b2 = c2 / nodes
        klb = np.where(
            c_b2 < 1.0, np.exp(-2.0 * (1.0 - rho) * (1.0 - c_b2) ** 2 / (3.0 * rho * c_b2)), 1.0
        )
        between = klb * c2 * rho * service / (2.0 * nodes * (1.0 - rho))
        wait = np.where(rho < 1.0, 2.0 * (within + between), math.inf)
        wait = np.where(lam > 0.0, wait, 0.0)
        share = np.clip(np.where(service > 0.0, wait / service, 0.0), 0.0, 1.0)
        # How far apart the waits of reads that share the link lie: two reads of one size a
        # apart both end at 2 S - a (up to 2 S), a block's k reads arrive over k - 1 gaps and
        # end together (their waits differ by their arrivals'), and the earlier blocks' work
        # varies from block to block (its processor-shared wait 2 W_btw, twice for a uniform's
        # width).
        width = 2.0 * service + (k - 1.0) / np.where(lam > 0.0, lam, 1.0) + 4.0 * between
    return wait, share, width


def _poisson_block_wait(lam: np.ndarray, service: np.ndarray, k: np.ndarray) -> np.ndarray:
    """The mean FIFO wait over a block of k reads of one size S at a link that starts empty,
    the reads a Poisson stream of rate lambda: the (j+1)-th read waits the largest partial sum
    of j steps S - gap, whose mean is sum_(i=1..j) E[(S_i)^+] / i by Spitzer's identity (exact
    for i.i.d. steps), S_i = i S - an Erlang(i, lambda) sum of i gaps, E[(x - G)^+] =
    x P(i, lambda x) - (i / lambda) P(i + 1, lambda x), P the Erlang distribution function
    (a finite sum). The block's mean: (1 / k) sum_(i=1..k-1) (k - i) E[(S_i)^+] / i. The
    diffusion approximation with Siegmund's correction put this at 0 for Kimi-K2's reads on HGX
    B300 4P4D at 13% load (local load 0.52, k = 8), where it is 0.36 S.

    Every i at once: a grid of i (rows) by the clusters, each element's terms in the order a
    loop over i takes them (the same numbers, bit for bit); a loop over i of loops over the
    Erlang terms was a tenth of the intervals' time in a cold `size`."""
    shape = np.broadcast(lam, service, k).shape
    top = int(np.max(k, initial=1.0))
    if top <= 1:
        return np.zeros(shape)
    lam, service, k = (
        np.broadcast_to(np.asarray(v, dtype=np.float64), shape) for v in (lam, service, k)
    )
    steps = np.arange(1, top, dtype=np.float64).reshape((-1,) + (1,) * len(shape))  # i
    x = steps * service
    y = lam * x
    # P(i, y) and P(i + 1, y): 1 - e^(-y) sum_(n < i) y^n / n!, and one term more.
    # Row i takes the terms n < i of the running term e^(-y) y^n / n!: at step n the rows
    # from i = n + 1 on, so each row's term ends at its n = i - 1, the one more P(i + 1) adds.
    term = np.exp(-y)
    partial = np.zeros_like(term)
    for n in range(top - 1):
        if n > 0:
            term[n:] = term[n:] * y[n:] / n
        partial[n:] = partial[n:] + term[n:]
    p_i = 1.0 - partial
    p_next = p_i - term * y / steps
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        e_pos = np.where(lam > 0.0, x * p_i - steps / lam * p_next, 0.0)
        # Below y = 1 the difference cancels (P(i, y) near 0 times i / lambda, huge at a
        # rate near 0): there e^(-y) / lambda sum_(m > i) (m - i) y^m / m!, every term
        # positive (the same sum: y P(i, y) - i P(i + 1, y) term by term); 20 terms put
        # its remainder below 1e-18 of it.
        small = y < 1.0
        # The rows up to the last with a small y (y grows with i: the first rows).
        found = np.flatnonzero(small.reshape(small.shape[0], -1).any(axis=1))
        if found.size:
            rows = int(found[-1]) + 1
            # y^(i + 1) row by row: a power of an integer exponent, as each row's own.
            ys = y[:rows]
            term_m = np.stack(
                [ys[i - 1] ** (i + 1) / math.factorial(i + 1) for i in range(1, rows + 1)]
            )
            series = np.zeros_like(term_m)
            for j in range(20):  # m = i + 1 + j
                if j > 0:
                    term_m = term_m * ys / (steps[:rows] + (1 + j))
                series = series + (j + 1) * term_m
            tail = np.where(lam > 0.0, np.exp(-ys) * series / lam, 0.0)
            e_pos[:rows] = np.where(small[:rows], tail, e_pos[:rows])
        parts = np.where(steps < k, (k - steps) * np.maximum(e_pos, 0.0) / steps, 0.0)
    out = np.zeros(shape)
    for part in parts:  # summed over i in order
        out = out + part
    return out / np.maximum(k, 1.0)


def _io_wait(
    lam: np.ndarray,
    t_io: np.ndarray,
    io_nodes: np.ndarray,
    c2: Any,
    pooled: np.ndarray,
    node_ranks: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The mean wait of a turn's read in the I/O queues, at ``lam`` turns/s: per side (``t_io``,
    ``io_nodes``: clusters x sides), its busiest link's G/D/1 wait, summed over the sides a
    read passes (storage, then a node's SNIC: a tandem, each queue taken on its own). A side
    whose N nodes saturate at t_s turns/s serves a turn in N / t_s at one node; a turn reads
    whole on one path, so PE-path turns, a share (1 - x) of them, wait at a PE node that sees
    (1 - x) lam / P of them and serves one in P / ((1 - x) t_s): the wait per PE-path turn is
    c^2 rho P / (2 (1 - x) t_s (1 - rho)), rho = lam / t_s, and weighted by (1 - x) the
    side adds c^2 rho N / (2 t_s (1 - rho)) to the mean, whatever the split (likewise the DE
    side with x; storage is one server). Every side counts: taking only the busiest side's
    wait jumped the APS by up to 2.35x where the PE and DE read links tie (each rounding step
    of a SNIC rate picked the other side's node count) and by 5% where storage and the nodes'
    links cross; the sum is continuous in every rate."""
    total: np.ndarray | float = 0.0
    free: np.ndarray | float = 1.0  # the chance a turn finds no I/O queue (sides independent)
    waits, busy = [], []
    for side in range(t_io.shape[1]):
        t_s, servers = t_io[:, side], io_nodes[:, side]
        rho = lam / t_s
        waits.append(
            np.where(np.isfinite(t_s), c2 * rho * servers / (2.0 * t_s * (1.0 - rho)), 0.0)
        )
        busy.append(np.clip(np.where(np.isfinite(t_s), rho, 0.0), 0.0, 1.0))
        total = total + waits[-1]
        free = free * (1.0 - busy[-1])
    # Reads whose path the scheduler picks by the read queues. Ideal: the P + D nodes are one
    # pool of c servers, a turn waits only when every one is busy, the M/D/c wait (half
    # M/M/c's, Erlang C). Queue-aware (the paper's): the turn's read goes to the shorter read
    # queue, in seconds, of the two nodes its PE and DE choice placed it on, choices made by
    # the GPUs' tokens and the decode nodes' sequences, not by the reads (alpha lets any node
    # with under 3 s of reads take one), so it waits when both are busy (``two_choice_wait``;
    # the pool put the p90 TTFT of Llama-3.1-70B DGX H100 3P4D at 47% load 32% under the
    # simulation's). rho: the busier side's utilization (the split balances them); a read's
    # mean time at its node S = c rho / lam (Little). The per-node M/D/1 sum put
    # Llama-3.1-70B's TTFT on DGX H100 2P4D at 60% load 63% above the simulation's. Storage
    # (the third side) stays a queue of its own.
    both = np.isfinite(t_io[:, 0]) & np.isfinite(t_io[:, 1]) & (pooled > 0.0)
    if both.any():
        c = io_nodes[:, 0] + io_nodes[:, 1]
        rho = np.maximum(lam / t_io[:, 0], lam / t_io[:, 1])
        two = pooled == TWO_CHOICE_READS
        with np.errstate(divide="ignore", invalid="ignore"):
            if two.any():
                # Processor-shared links: the exponential work's delay, not halved for
                # deterministic reads (an approximation: two_choice_wait).
                # S = c rho / lam = c / (the busier side's rate): no 0 / 0 at no load.
                chance, wait_s = two_choice_wait(rho, c / np.minimum(t_io[:, 0], t_io[:, 1]))
                waiting, pool = chance, 0.5 * (1.0 + c2) * wait_s
            if not two.all():  # the pool's Erlang C only where a cluster reads pooled
                erlang = erlang_c(c, rho)
                pooled_wait = np.where(
                    rho < 1.0, 0.5 * c2 * erlang / (lam * (1.0 - rho)) * rho, math.inf
                )
                waiting = np.where(two, waiting, erlang) if two.any() else erlang
                pool = np.where(two, pool, pooled_wait) if two.any() else pooled_wait
            pool = np.where(lam > 0.0, pool, 0.0)
        total = np.where(both, pool + waits[2], total)
        free = np.where(both, (1.0 - waiting) * (1.0 - busy[2]), free)
    # Round robin's reads at the prefill nodes (basic): processor-shared links fed in blocks
    # (``_block_read_wait``), their own wait and shape, out of the FIFO queues' total.
    shared = np.zeros_like(lam)
    share = np.zeros_like(lam)
    width = np.full_like(lam, math.inf)
    if node_ranks is not None:
        blocks = (node_ranks > 0.0) & np.isfinite(t_io[:, 0]) & (pooled <= 0.0)
        if blocks.any():
            w, sh, wd = _block_read_wait(lam, t_io[:, 0], io_nodes[:, 0], node_ranks, c2)
            total = np.where(blocks, total - waits[0], total)
            free = np.where(blocks, free / np.where(busy[0] < 1.0, 1.0 - busy[0], 1.0), free)
            shared = np.where(blocks, w, 0.0)
            share = np.where(blocks, sh, 0.0)
            width = np.where(blocks, wd, math.inf)
    return (
        np.asarray(total, dtype=np.float64),
        1.0 - np.asarray(free, dtype=np.float64),
        shared,
        share,
        width,
    )


# Clusters up to which a number is laid out over them (np.full) rather than broadcast: a few
# microseconds less per column of a one-point queue, which the intervals stack by the dozen.
_FULL_MAX = 64


def _column(v: object, n: int) -> np.ndarray:
    """``v`` (a number, or an array that broadcasts to n) as n float64 values: the values of
    ``np.broadcast_to``, an array of n as it is, a number laid out for a few clusters."""
    if type(v) is np.ndarray and v.shape == (n,) and v.dtype == np.float64:
        return v
    a = np.asarray(v, dtype=np.float64)
    if a.ndim == 0 and n <= _FULL_MAX:
        return np.full(n, a)
    return np.broadcast_to(a, (n,))


def stack_queues(queues: Sequence[OnlineQueue]) -> OnlineQueue:
    """The clusters of several queues (of any scenarios and modes) as one queue, in order:
    ``online_aps`` on it gives each cluster what it gives alone (every step is elementwise and
    each cluster's search stops on its own), in one search instead of one per queue. Decode
    groups with the same numbers (of one model) are one group."""

    def per(q: OnlineQueue, v: object) -> np.ndarray:
        return _column(v, q.t_max.size)

    def cat(get: Callable[[OnlineQueue], object]) -> np.ndarray:
        return np.concatenate([per(q, get(q)) for q in queues])

    groups: list[DecodeGroup] = []
    known: dict[tuple[object, ...], int] = {}
    index = []
    for q in queues:
        local = np.empty(q.t_max.size, dtype=np.int64)
        local[q.order] = np.repeat(np.arange(len(q.groups)), np.diff(q.starts))
        mine = []
        for g in q.groups:
            key = (id(g.model), *(getattr(g, f.name) for f in fields(g) if f.name != "model"))
            if key not in known:
                known[key] = len(groups)
                groups.append(g)
            mine.append(known[key])
        index.append(np.asarray(mine, dtype=np.int64)[local])
    group = np.concatenate(index)
    order = np.argsort(group, kind="stable")
    # The prefill engine's numbers per cluster (its batch cap is the queue's own).
    prefill: dict[str, Any] = {}
    for name in ("t1_s", "t0_s", "copy_s", "read_latency_s", "request_gpus"):
        prefill[name] = np.concatenate([per(q, getattr(q.prefill, name)) for q in queues])
    return OnlineQueue(
        turns=cat(lambda q: q.turns),
        generated=cat(lambda q: q.generated),
        arrival_cv2=cat(lambda q: q.arrival_cv2),
        cycle_s=cat(lambda q: q.cycle_s),
        cycle_cv2=cat(lambda q: q.cycle_cv2),
        t_max=cat(lambda q: q.t_max),
        gpus=cat(lambda q: q.gpus),
        imbalance=cat(lambda q: q.imbalance),
        pooled=cat(lambda q: q.pooled),
        reads_pooled=cat(lambda q: q.reads_pooled),
        node_ranks=cat(lambda q: q.node_ranks),
        prefill=replace(queues[0].prefill, **prefill),
        batch_cap=cat(lambda q: q.batch_cap),
        t_io=np.concatenate([q.t_io for q in queues]),
        io_nodes=np.concatenate([q.io_nodes for q in queues]),
        transfer_s=np.concatenate([q.transfer_s for q in queues]),
        t_transfer=np.concatenate([q.t_transfer for q in queues]),
        de_share=cat(lambda q: q.de_share),
        groups=tuple(groups),
        order=order,
        starts=np.searchsorted(group[order], np.arange(len(groups) + 1)),
    )


def online_aps(q: OnlineQueue, cfg: ServingConfig) -> OnlineAps:
    """The largest arrival rate with TTFT <= SLO and TPOT <= SLO per cluster, by a bracketing
    search between 0 and the saturated rate, and what stops a higher one."""
    turns = q.turns
    pct = cfg.slo_percentiles
    low = np.full(q.t_max.shape, 1e-9 / turns)
    low_ttft, low_tpot = q.at(low, pct)
    reachable = (low_ttft <= cfg.ttft_slo_s) & (low_tpot <= cfg.tpot_slo_s)
    lo = np.where(reachable, low, 0.0)
    hi = np.where(reachable, q.t_max / turns, 0.0)
    # The SLOs' slack at each end (>= 0 where both are met, -1 where unstable): the next
    # rate is where the slack's chord crosses 0 (regula falsi, Illinois: an end kept twice has
    # its slack halved), the midpoint where the chord is not known or the bracket has not
    # halved in two steps. Only rates with the SLOs met become ``lo``, as in a bisection.
    s_lo = _slack(low_ttft, low_tpot, cfg)
    s_hi = np.full(lo.shape, -1.0)
    kept = np.zeros(lo.shape, dtype=np.int8)  # the end the last step kept: 1 lo, -1 hi
    width = np.full((2, *lo.shape), math.inf)  # the bracket one and two steps ago
    active = hi - lo > _BISECTION_REL * lo
    for _ in range(_SEARCH_STEPS):
        if not active.any():
            break
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            chord = lo + (hi - lo) * (s_lo / (s_lo - s_hi))
        mid = (lo + hi) / 2
        # A chord within half the precision of an end says the rate is there: it steps that
        # far past it instead (Brent's minimum step), so that the next point lands on the
        # root's other side and closes the bracket. A chord that lands on the end itself
        # moved nothing, and the midpoint's halvings then took 20 more steps.
        step = 0.5 * _BISECTION_REL * lo
        chord = np.clip(chord, lo + step, hi - step)
        use_chord = (chord > lo) & (chord < hi) & (hi - lo <= width[1] / 2)
        x = np.where(use_chord, chord, mid)
        t_on, p_on = q.at(x, pct)
        ok = (t_on <= cfg.ttft_slo_s) & (p_on <= cfg.tpot_slo_s) & active
        bad = ~ok & active
        s_x = _slack(t_on, p_on, cfg)
        width = np.stack(
            [np.where(active, hi - lo, width[0]), np.where(active, width[0], width[1])]
        )
        s_hi = np.where(ok & (kept == -1), s_hi / 2, s_hi)
        s_lo = np.where(bad & (kept == 1), s_lo / 2, s_lo)
        lo, s_lo = np.where(ok, x, lo), np.where(ok, s_x, s_lo)
        hi, s_hi = np.where(bad, x, hi), np.where(bad, s_x, s_hi)
        kept = np.where(ok, -1, np.where(bad, 1, kept)).astype(np.int8)
        # A cluster whose rate is known to _BISECTION_REL of itself stops there (the rest would
        # not show), so an array of clusters gives what each one gives alone.
        active &= hi - lo > _BISECTION_REL * lo
    slo_aps = lo
    t_hi, p_hi = q.at(np.minimum(slo_aps * 1.0001 + 1e-12, q.t_max / turns), pct)
    limit = np.where(
        ~np.isfinite(t_hi),
        0,
        np.where(t_hi > cfg.ttft_slo_s, 1, np.where(p_hi > cfg.tpot_slo_s, 2, 0)),
    )
    # Headroom: the busiest link at most max_utilization (its utilization is the turn rate over
    # the saturated throughput, every link's load being proportional to the turn rate).
    cap = cfg.max_utilization * q.t_max / turns
    capped = slo_aps > cap
    aps = np.where(capped, cap, slo_aps)
    limit = np.where(capped, 4, limit)
    limit = np.where(reachable, limit, 3)
    t_on, p_on = q.at(aps, pct)
    ttft = np.where(reachable, t_on, low_ttft)
    tpot = np.where(reachable, p_on, low_tpot)
    if pct.ttft is None and pct.tpot is None:
        mean_ttft, mean_tpot = ttft, tpot
    else:
        t_mean, p_mean = q.at(aps)
        low_t, low_p = q.at(low)
        mean_ttft = np.where(reachable, t_mean, low_t)
        mean_tpot = np.where(reachable, p_mean, low_p)
    return OnlineAps(
        aps=aps,
        limit=limit,
        ttft_s=ttft,
        tpot_s=tpot,
        slo_aps=slo_aps,
        mean_ttft_s=mean_ttft,
        mean_tpot_s=mean_tpot,
    )


def online_aps_each(
    clusters: Sequence[tuple[Scenario, Assembly, Solution]],
    cfg: ServingConfig,
    moves: Sequence[KvMoves] | None = None,
    lights: Sequence[tuple[Num, Num]] | None = None,
) -> list[OnlineAps]:
    """``online_aps`` of each (scenario, assembly, solution) as it gives it alone, in one
    search over all of them (``stack_queues``): the modes of a cluster (``serving.evaluate``)
    or of many perturbed clusters (the intervals) at once; ``moves`` and ``lights``: each
    cluster's ``kv_move_s`` and light load, where the caller has them."""
    queues = [
        online_queue(
            sc,
            asm,
            sol,
            None if moves is None else moves[k],
            None if lights is None else lights[k],
        )
        for k, (sc, asm, sol) in enumerate(clusters)
    ]
    if not queues:
        return []
    found = online_aps(stack_queues(queues), cfg)
    ends = np.cumsum([q.t_max.size for q in queues]).tolist()
    columns = [getattr(found, f.name) for f in fields(OnlineAps)]
    return [
        OnlineAps(*(c[start:end] for c in columns))
        for start, end in zip([0, *ends[:-1]], ends, strict=True)
    ]
