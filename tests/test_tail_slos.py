"""Percentile SLOs (issue 33, item 1): the TTFT's tail approximation (docs/model.md section
6c) and ``--slo-percentile`` in every command that plans to SLOs (INV-76).

``TAIL_SLO_CASES`` sets how many (scenario, load) pairs are simulated against the analytical
p90 TTFT (CI: the default, 1; 6 for the whole table of docs/model.md section 6c).
``TAIL_SLO_RANDOM`` sets how many random scenarios of bench/p90_agreement.py's draw are
(CI: the default, 2, about 3 s; 50 for issue 33's bound, about 4 minutes; INV-89)."""

from __future__ import annotations

import math
import os
import random
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import dualpath_plan.api as dp
from dualpath_plan.errors import PlanInputError
from dualpath_plan.outcomes.online import _sum_quantile, erlang_c, online_queue
from dualpath_plan.outcomes.serving import evaluate, light_load, runnable
from dualpath_plan.scenario.spec import ServingConfig, SloPercentiles
from tests.conftest import load_bench

CASES = int(os.environ.get("TAIL_SLO_CASES", "1"))
RANDOM = int(os.environ.get("TAIL_SLO_RANDOM", "2"))


@settings(max_examples=40, deadline=None)
@given(
    a=st.floats(0.0, 5.0),
    m=st.floats(0.0, 5.0),
    pi=st.floats(0.0, 1.0),
    p=st.sampled_from([0.5, 0.9, 0.95, 0.99]),
    v=st.sampled_from([0.0, 0.0, 0.3, 2.0]),
    pi_v=st.floats(0.01, 1.0),
    width=st.sampled_from([math.inf, math.inf, 0.0, 0.2, 1.5]),
)
@example(a=0.0, m=1.0, pi=0.0234375, p=0.99, v=0.0, pi_v=1.0, width=math.inf)  # rare long wait
@example(a=1.0, m=6.240895871733344e-58, pi=1.0, p=0.5, v=2.0, pi_v=1.0, width=math.inf)  # W nil
@example(a=7.430539791292702e-129, m=1.0, pi=1.0, p=0.5, v=0.3, pi_v=0.5, width=math.inf)  # U nil
@example(a=3.0, m=0.00390625, pi=1.0, p=0.5, v=2.0, pi_v=1.0, width=math.inf)  # e^768 overflowed
@example(a=0.0, m=0.0, pi=0.0, p=0.9, v=0.3, pi_v=1.0, width=0.0)  # V a point
def test_the_quantile_is_that_of_the_sum_sampled(
    a: float, m: float, pi: float, p: float, v: float, pi_v: float, width: float
) -> None:
    """``_sum_quantile`` is the quantile of U + W + V drawn: U uniform on [0, a], W 0 with
    probability 1 - pi and exponential of mean m / pi otherwise, V (round robin's
    processor-shared block reads) 0 with probability 1 - pi_v and otherwise uniform with mean
    v / pi_v over at most ``width``: on [0, 2 v / pi_v] where that is narrower, else centred."""
    rng = np.random.default_rng(7)
    n = 400_000
    u = rng.uniform(0.0, 1.0, n) * a
    waits = (rng.uniform(0.0, 1.0, n) < pi) if m > 0 and pi > 0 else np.zeros(n, dtype=bool)
    w = np.where(waits, rng.exponential(m / pi if pi > 0 else 0.0, n), 0.0)
    shares = rng.uniform(0.0, 1.0, n) < pi_v
    centre = v / pi_v
    span = min(2.0 * centre, width)
    shared = np.where(shares, centre - span / 2.0 + rng.uniform(0.0, 1.0, n) * span, 0.0)
    drawn = u + w + shared
    got = float(
        _sum_quantile(
            p,
            np.array([a]),
            np.array([m]),
            np.array([pi]),
            np.array([v]),
            np.array([pi_v]),
            np.array([width]),
        )[0]
    )
    scale = a + (m / pi if pi > 0 else 0.0) + 2.0 * v / pi_v
    # The share of the draws at or below the quantile is p, to the sampling error of a share
    # (standard deviation sqrt(p (1 - p) / n); five of them). Compared by shares, not by
    # values: a sampled p99 of a rare long wait (pi 0.02, mean 43) strays by a unit or more,
    # more than any fixed share of the spread. At an atom (no wait, a = 0) the quantile's
    # share is an interval, from the draws below it to the draws at it.
    tol = 5.0 * math.sqrt(p * (1.0 - p) / n)
    eps = 1e-9 * scale + 1e-12
    below, at = float(np.mean(drawn < got - eps)), float(np.mean(drawn <= got + eps))
    assert below - tol <= p <= at + tol, (got, below, at)


def _queue(spec: dict[str, object], mode: str = "dualpath"):
    sc = dp.scenario(dp.spec(**spec))
    sat, t_max = runnable(sc, mode)  # type: ignore[arg-type]
    return online_queue(sc, sat.assembly, sat.solution), t_max


SPECS = (
    {},
    {"model": "llama-3.1-70b", "workload": "paper-32k", "node": "dgx-h100"},
    {"model": "qwen3-235b-a22b", "node": "dgx-h200", "prefill_nodes": 3, "decode_nodes": 2},
)


@settings(max_examples=25, deadline=None)
@given(
    which=st.sampled_from(range(len(SPECS))),
    load=st.floats(0.01, 0.95),
    mode=st.sampled_from(["basic", "dualpath"]),
)
def test_the_parts_sum_to_the_mean_and_quantiles_rise(which: int, load: float, mode: str) -> None:
    """The distribution's mean is the online model's TTFT (fixed + residual / 2 + queued +
    shared, to rounding), and its quantiles rise with p from above the fixed part."""
    q, t_max = _queue(SPECS[which], mode)
    w = q.waits(np.array([load * t_max / q.turns]))
    mean = float((w.fixed_s + w.residual_s / 2 + w.queued_s + w.shared_s)[0])
    assert mean == pytest.approx(float(w.mean_ttft_s[0]), rel=1e-12)
    qs = [float(w.ttft_quantile(p)[0]) for p in (0.1, 0.5, 0.9, 0.99, 0.999)]
    assert all(math.isfinite(v) for v in qs)
    assert float(w.fixed_s[0]) <= qs[0]
    assert qs == sorted(qs)


@settings(max_examples=8, deadline=None)
@given(which=st.sampled_from(range(len(SPECS))), lo=st.floats(50, 95), up=st.floats(0.5, 4.5))
def test_a_higher_percentile_never_allows_a_higher_aps(which: int, lo: float, up: float) -> None:
    """TTFT and TPOT quantiles rise with p, so the rates that meet the SLOs shrink: the APS
    under p_hi is at most that under p_lo, and under any percentile the APS reads the same
    headroom cap."""
    hi = min(lo + up, 99.9)
    sc = dp.scenario(dp.spec(**SPECS[which]))
    got = []
    for p in (lo, hi):
        cfg = ServingConfig(slo_percentiles=SloPercentiles(p, p))
        got.append(evaluate(sc, cfg, strict=False).modes)
    for mode, low_p in got[0].items():
        high_p = got[1][mode]
        assert high_p.aps <= low_p.aps * (1 + 1e-9)
        # Little's law reads the means: the working set at an APS is the mean's.
        assert high_p.working_set_gbyte >= 0


def test_mean_percentiles_are_the_means(cli) -> None:
    """'--slo-percentile mean' and no flag give the same report, byte for byte."""
    plain = cli("size", "--json")
    means = cli("size", "--json", "--slo-percentile", "mean")
    assert plain.code == 0 and means.code == 0, means.err
    assert plain.out == means.out


def test_percentile_slos_in_every_planning_command(cli) -> None:
    """size, size --aps, size --target-aps, recommend and sweep name the percentile they plan
    to, and a p99 TTFT SLO gives a lower APS than the mean on the README default (without
    the headroom cap, which sets both at 80% of capacity)."""
    mean = cli("size", "--json", "--max-utilization", "1").json()
    p99 = cli("size", "--json", "--max-utilization", "1", "--slo-percentile", "99").json()
    assert p99["inputs"]["slo_percentiles"] == {"ttft": 99.0, "tpot": 99.0}
    assert p99["modes"]["dualpath"]["aps"] < mean["modes"]["dualpath"]["aps"]
    for args, said in (
        (["size", "--slo-percentile", "90,99"], "p90 TTFT 4 s and p99 TPOT 50 ms"),
        (["size", "--aps", "0.1", "--slo-percentile", "90"], "p90 TTFT"),
        (["size", "--target-aps", "0.5", "--slo-percentile", "90"], "p90 TTFT 4 s"),
        (
            ["recommend", "--budget-nodes", "6", "--objective", "aps", "--slo-percentile", "90"],
            "p90",
        ),
        (
            ["sweep", "--grid", "P=1:2", "--grid", "D=1:2", "--slo-percentile", "mean,99"],
            "p99 TPOT",
        ),
    ):
        r = cli(*args)
        assert r.code == 0, (args, r.err)
        assert said in r.out, (args, r.out)


@pytest.mark.parametrize(
    "text, why",
    [
        ("0.9", "did you mean 90?"),
        ("100", "below 100"),
        ("nan", "below 100"),
        ("90,99,50", "P or P_TTFT,P_TPOT"),
        ("p90", "'p90'"),
        # '' planned to the means silently, as no flag.
        ("", "got an empty value"),
        (" ", "got an empty value"),
    ],
)
def test_bad_percentiles_are_one_line(cli, text: str, why: str) -> None:
    r = cli("size", "--slo-percentile", text)
    assert r.code == 2
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and why in lines[0], r.err
    with pytest.raises(PlanInputError):
        SloPercentiles.parse(text)


# (scenario, mode, load): the analytical p90 TTFT against the simulation's, five seeds each,
# on the README default (docs/model.md section 6c has the table; Llama-3.1-70B on DGX H100
# at 60% load, 26% low, is a known gap there).
# The first is CI's (TAIL_SLO_CASES=1): the quickest to simulate (4 s; dualpath at 60%, 22 s).
AGREEMENT = (
    ({}, "basic", 0.2),
    ({}, "dualpath", 0.6),
    ({}, "basic", 0.4),
    ({}, "dualpath", 0.2),
    ({}, "dualpath", 0.4),
    ({}, "basic", 0.6),
)


@pytest.mark.parametrize("spec, mode, load", AGREEMENT[:CASES])
def test_p90_ttft_against_the_simulation(spec: dict[str, object], mode: str, load: float) -> None:
    """Below 70% load, the analytical p90 TTFT within 15% of the simulation's (the mean of five
    seeds' p90), issue 33's bound."""
    q, t_max = _queue(spec, mode)
    aps = load * t_max / q.turns
    analytical = float(q.waits(np.array([aps])).ttft_quantile(0.9)[0])
    stated = dp.spec(**spec)
    simulated = np.mean(
        [dp.simulate(stated, mode=mode, aps=aps, seed=s).ttft_s.p90 for s in range(5)]  # type: ignore[arg-type]
    )
    assert analytical == pytest.approx(simulated, rel=0.15)


def test_the_fixed_part_is_the_simulated_light_load_ttft() -> None:
    """At light load a turn waits for nothing: the simulation's median TTFT is the analytical
    fixed part (the whole storage read, Full Blocks, then the longer of its pass on its rank
    and its KV's move to the decode node), for tensor-parallel dense models (a rank of 8 GPUs;
    Llama-3.1-8B's 4 ms pass is shorter than its 64k-token KV's 22 ms move, which the fixed
    part lacked: 21% low) and the MoE default (a rank of one)."""
    for spec in (
        {"model": "llama-3.1-70b", "workload": "paper-32k", "node": "dgx-h100"},
        {
            "model": "llama-3.1-8b",
            "workload": "paper-64k",
            "node": "dgx-b200",
            "prefill_nodes": 2,
            "decode_nodes": 2,
        },
        {},
    ):
        q, t_max = _queue(spec)
        aps = 0.05 * t_max / q.turns
        fixed = float(q.waits(np.array([aps])).fixed_s[0])
        median = dp.simulate(dp.spec(**spec), aps=aps, seed=1).ttft_s.p50
        assert fixed == pytest.approx(median, rel=0.05)


@pytest.mark.parametrize(
    ("spec", "mode"),
    [
        ({"model": "llama-3.1-8b", "workload": "paper-64k", "node": "dgx-b200"}, "dualpath"),
        ({"model": "qwen3-235b-a22b", "node": "hgx-b300", "decode_nodes": 2}, "dualpath"),
        ({}, "basic"),
    ],
)
def test_the_kv_move_is_the_simulations(spec: dict[str, object], mode: str) -> None:
    """The move of a turn's KV after its read (``kv_transfer_s``), per read path, is the
    simulation's: the slowest of its MOVE-phase link groups for the mean turn's hit and miss
    bytes at the groups' capacities (the links without the scheduler's imbalance). At light
    load the fixed part is the read and the longer of the pass and the move; the move's links
    share their bandwidth, so it rises with the rate (M/G/1-PS, S / (1 - rho))."""
    from dualpath_plan.outcomes.online import kv_transfer_s
    from dualpath_plan.outcomes.simulation import SimConfig, _links
    from dualpath_plan.outcomes.simulation.links import MOVE

    sc = dp.scenario(dp.spec(**spec))
    sat, t_max = runnable(sc, mode)  # type: ignore[arg-type]
    got = kv_transfer_s(sc, sat.assembly, 1).max(axis=1)[0]
    d = sc.turn_demand
    moved = np.array([d.mean(d.hit_bytes), d.mean(d.miss_bytes), 0.0, 0.0])
    groups = _links(sc, SimConfig(mode=mode, agents=None, aps=1.0)).groups  # type: ignore[arg-type]
    for path in (0, 1):
        sim = max(
            float((np.array(g.coef) + path * np.array(g.dcoef)) @ moved) / g.capacity
            for g in groups
            if g.phase == MOVE
        )
        assert float(got[path]) == pytest.approx(sim, rel=1e-9)
    q, _ = _queue(spec, mode)
    pm = q.prefill
    tau_1 = float(np.asarray(pm.t0_s)) + float(np.asarray(pm.u_s)) / float(
        np.asarray(pm.request_gpus)
    )
    x = float(q.de_share[0])
    lone = (1 - x) * max(tau_1, float(got[0])) + x * max(tau_1, float(got[1]))
    low = q.waits(np.array([1e-9 / q.turns])).fixed_s[0]
    assert float(low) == pytest.approx(float(pm.read_latency_s) + lone, rel=1e-6)
    # The light-load TTFT of every command (serving.light_load: the offline floor, the cycle,
    # the simulation's lifetimes) is this fixed part at no load: one definition.
    assert float(light_load(sc, sat)[0].reshape(-1)[0]) == pytest.approx(float(low), rel=1e-6)
    fixed = [float(q.waits(np.array([f * t_max / q.turns])).fixed_s[0]) for f in (0.2, 0.6)]
    assert float(low) <= fixed[0] <= fixed[1]


@settings(max_examples=40, deadline=None)
@given(c=st.integers(1, 400), rho=st.floats(0.01, 0.99))
def test_erlang_c(c: int, rho: float) -> None:
    """Erlang C against its closed forms (one server: rho; two: 2 rho^2 / (1 + rho)), its
    exact sum (Poisson terms, to 400 servers), and rising with the utilization."""
    got = float(erlang_c(np.array([float(c)]), np.array([rho]))[0])
    a = c * rho
    terms = [math.exp(k * math.log(a) - a - math.lgamma(k + 1)) for k in range(c)]
    last = math.exp(c * math.log(a) - a - math.lgamma(c + 1)) / (1 - rho)
    exact = last / (sum(terms) + last)
    if c == 1:
        assert got == pytest.approx(rho, rel=1e-12)
    if c == 2:
        assert got == pytest.approx(2 * rho * rho / (1 + rho), rel=1e-12)
    # Exact to 64 servers; Halfin and Whitt's approximation beyond, within 1.5% of the
    # probability (an absolute error: the probability itself is small there).
    assert got == pytest.approx(exact, rel=1e-9) if c <= 64 else abs(got - exact) <= 0.015
    higher = float(erlang_c(np.array([float(c)]), np.array([min(rho + 0.005, 0.999)]))[0])
    assert higher >= got - 0.015


def test_a_batch_counts_the_requests_of_a_rank() -> None:
    """The wait for later batches (Kingman's, for batches of B arrivals) counts a batch's
    requests: B is a GPU's share, a request on a tensor-parallel rank of g GPUs is 1 / g of
    it, so a batch holds B g requests and c_a^2 = c^2 / (B g). Llama-3.1-70B on DGX H100 runs
    a request on 8 GPUs: without g its mean TTFT at 40% load was 28% above the simulation's."""
    from dualpath_plan.outcomes.online import _io_wait

    q, t_max = _queue(SPECS[1])
    g = float(np.asarray(q.prefill.request_gpus))
    assert g == 8.0
    for load in (0.2, 0.4, 0.6):
        lam = np.array([load * t_max])
        w = q.waits(lam / q.turns)
        c2 = q.gap_cv2(lam)
        io, *_ = _io_wait(lam, q.t_io, q.io_nodes, c2, q.reads_pooled, q.node_ranks)
        cap = q.batch_cap
        tau_cap = q.prefill.t0_s + cap * q.prefill.u_s
        rho = lam / q.gpus * tau_cap / cap
        kingman = rho / (1 - rho) * tau_cap * c2 / (2 * cap * g)
        # Less its limit without a cap (the work's wait, which the steady batch holds).
        rho_u = lam / q.gpus * q.prefill.u_s
        kingman -= rho_u / (1 - rho_u) * q.prefill.u_s * c2 / (2 * g)
        assert float(w.queued_s[0] - io[0]) == pytest.approx(float(kingman[0]), rel=1e-9)


def _llama_at_40() -> tuple[float, float, float, float]:
    spec = SPECS[1]
    q, t_max = _queue(spec)
    aps = 0.4 * t_max / q.turns
    w = q.waits(np.array([aps]))
    runs = [dp.simulate(dp.spec(**spec), aps=aps, seed=s) for s in range(3)]
    return (
        float(w.mean_ttft_s[0]),
        float(np.mean([r.ttft_s.mean for r in runs])),
        float(w.ttft_quantile(0.9)[0]),
        float(np.mean([r.ttft_s.p90 for r in runs])),
    )


def test_a_tensor_parallel_rank_waits_as_the_simulation() -> None:
    """Llama-3.1-70B on DGX H100 (a rank of 8 GPUs), dualpath at 40% load: the analytical
    mean TTFT against the simulation's (three seeds' mean). Measured: -3.5% (-9% before the
    two-choice reads, +28% before a batch counted its rank's requests)."""
    mean, sim_mean, _, _ = _llama_at_40()
    assert mean == pytest.approx(sim_mean, rel=0.1)


def test_a_tensor_parallel_rank_p90_with_two_choice_reads() -> None:
    """Its p90 against the simulation's: -15.1% (0.180 against 0.212 s), within 20% but not
    the issue's 15% (three seeds; -16.4% over five). The reads join the less loaded of the
    two nodes the paper scheduler placed the turn on (``two_choice_wait``); where the model
    pooled all P + D nodes it was 27% low (a strict xfail until 2026-12-07), and -15% while
    the wait for later batches still held a GPU's M/D/1 wait for the work, which made up part
    of the reads'."""
    _, _, p90, sim_p90 = _llama_at_40()
    assert p90 == pytest.approx(sim_p90, rel=0.2)


@pytest.mark.parametrize("case", range(RANDOM))
def test_p90_ttft_on_random_scenarios(case: int) -> None:
    """INV-89 (issue 33): on random scenarios (model, node, P and D, workload, basic or
    dualpath, 10% to 70% load; bench/p90_agreement.py's draw of seed 0, those the model runs),
    the analytical p90 TTFT within 15% of the simulation's, the mean of five seeds' p90.
    Measured on 50 (TAIL_SLO_RANDOM=50): 49 hold (47 before the paper scheduler's reads were
    the least loaded of two nodes and the simulation's ties random, 43 before the turns of few
    agents, the narrow overlapped reads and the varying batches); 42 and 48 of two other
    draws' 50;
    the misses are named in docs/model.md section 6c."""
    bench = load_bench("p90_agreement")
    m = bench.measure(bench.draw_cases(case + 1)[case], seeds=5)
    assert m.analytical_p90_s == pytest.approx(m.simulated_p90_s, rel=bench.BOUND), m.case.label()


def _least_loaded_of_two(queues: int, rho: float, arrivals: int) -> tuple[float, float]:
    """A direct simulation of the rule: Poisson arrivals at rho per queue, each to the less
    loaded (in seconds of work) of two FIFO queues drawn at random, exponential work of mean
    1; the share of arrivals that wait and their mean wait (the first tenth dropped)."""
    rng = random.Random(1)
    free = [0.0] * queues
    t = waited = wait = 0.0
    skip = arrivals // 10
    for i in range(arrivals):
        t += rng.expovariate(rho * queues)
        a = rng.randrange(queues)
        b = (a + 1 + rng.randrange(queues - 1)) % queues
        k = a if free[a] <= free[b] else b
        w = max(free[k] - t, 0.0)
        if i >= skip:
            waited += w > 0.0
            wait += w
        free[k] = t + w + rng.expovariate(1.0)
    return waited / (arrivals - skip), wait / (arrivals - skip)


@pytest.mark.parametrize("rho", [0.3, 0.6, 0.85])
def test_two_choice_wait_is_the_least_loaded_of_two(rho: float) -> None:
    """``two_choice_wait`` (the paper scheduler's read path: the less loaded of the two nodes
    a turn was placed on) against a 400-queue simulation of the rule: the chance to wait
    (rho^2) within 2% and the mean wait (-ln(1 - rho^2) / rho^2 - 1 service times) within 3%.
    The count of jobs instead of their work (rho^2 + rho^6 + ...) waits 70% longer at 0.6."""
    from dualpath_plan.outcomes.online import two_choice_wait

    chance, wait = two_choice_wait(np.array([rho]), np.array([1.0]))
    sim_chance, sim_wait = _least_loaded_of_two(400, rho, 300_000)
    assert chance[0] == pytest.approx(sim_chance, rel=0.02)
    assert wait[0] == pytest.approx(sim_wait, rel=0.03)


def test_no_cap_no_wait_for_later_batches() -> None:
    """The wait for later batches is Kingman's at the batch cap less its limit without a cap
    (the work's wait, which the running pass and the steady batch hold): 0 as the cap grows
    without bound, and it rises as the cap shrinks (INV-76)."""
    from dualpath_plan.outcomes.online import _io_wait

    q, t_max = _queue(SPECS[0], "basic")
    lam = np.array([0.4 * t_max])
    io, *_ = _io_wait(lam, q.t_io, q.io_nodes, q.gap_cv2(lam), q.reads_pooled, q.node_ranks)
    got = []
    for scale in (1.0, 10.0, 1e3, 1e9):
        w = replace(q, batch_cap=q.batch_cap * scale).waits(lam / q.turns)
        got.append(float(w.queued_s[0] - io[0]))
    assert got[0] > got[1] > got[2] > got[3] >= 0.0
    assert got[3] <= 1e-9 * got[0]


def test_round_robin_reads_are_processor_shared_blocks() -> None:
    """Round robin's prefill-node reads (basic, ranks of one GPU: k = 8 a node) wait as a
    processor-shared link fed in blocks (``_block_read_wait``), out of the FIFO queues' total:
    the TTFT's parts still sum to its mean, the wait rises with the load, and with one node
    (every turn to it) and one rank a node it is the M/D/1-PS wait rho S / (1 - rho), twice
    the M/D/1 one (Kraemer and Langenbach-Belz's factor is 1 at c_b^2 = 1, no block)."""
    from dualpath_plan.outcomes.online import _block_read_wait

    q, t_max = _queue(SPECS[0], "basic")
    assert float(q.node_ranks[0]) == 8.0
    got = []
    for load in (0.2, 0.4, 0.6):
        w = q.waits(np.array([load * t_max / q.turns]))
        parts = w.fixed_s + w.residual_s / 2 + w.queued_s + w.shared_s
        assert float(parts[0]) == pytest.approx(float(w.mean_ttft_s[0]), rel=1e-12)
        got.append(float(w.shared_s[0]))
    assert 0.0 < got[0] < got[1] < got[2]
    rho, t_s = 0.5, np.array([10.0])
    wait, share, _ = _block_read_wait(rho * t_s, t_s, np.array([1.0]), np.array([1.0]), 1.0)
    service = 1.0 / t_s
    assert float(wait[0]) == pytest.approx(float(rho * service[0] / (1 - rho)), rel=1e-12)
    assert float(share[0]) == pytest.approx(min(1.0, float(wait[0] / service[0])))


def _poisson_block_wait_loop(lam: np.ndarray, service: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``online._poisson_block_wait`` as a loop over i of loops over the Erlang terms (as it
    was written first): the reference its grid of i by the clusters reproduces bit for bit."""
    out = np.zeros(np.broadcast(lam, service, k).shape)
    for i in range(1, int(np.max(k, initial=1.0))):
        x = i * service
        y = lam * x
        term = np.exp(-y)
        partial = np.zeros_like(term)
        for n in range(i):
            if n > 0:
                term = term * y / n
            partial = partial + term
        p_i = 1.0 - partial
        p_next = p_i - term * y / i
        with np.errstate(divide="ignore", invalid="ignore"):
            e_pos = np.where(lam > 0.0, x * p_i - i / lam * p_next, 0.0)
            small = y < 1.0
            if np.any(small):
                term_m = y ** (i + 1) / math.factorial(i + 1)
                series = np.zeros_like(term)
                for m in range(i + 1, i + 21):
                    if m > i + 1:
                        term_m = term_m * y / m
                    series = series + (m - i) * term_m
                tail = np.where(lam > 0.0, np.exp(-y) * series / lam, 0.0)
                e_pos = np.where(small, tail, e_pos)
        out = out + np.where(i < k, (k - i) * np.maximum(e_pos, 0.0) / i, 0.0)
    return out / np.maximum(k, 1.0)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), size=st.integers(1, 60))
def test_the_block_wait_grid_is_the_loop_bit_for_bit(seed: int, size: int) -> None:
    """The block reads' exact Poisson wait over a grid of i by the clusters (one pass of the
    Erlang terms, the small-y series on the rows that need it) gives the loop's numbers to the
    bit: light and heavy loads, no arrivals, blocks of one to sixteen reads."""
    from dualpath_plan.outcomes.online import _poisson_block_wait

    rng = np.random.default_rng(seed)
    lam = 10 ** rng.uniform(-4, 3, size)
    lam[rng.random(size) < 0.1] = 0.0
    service = 10 ** rng.uniform(-4, 1, size)
    k = np.maximum(np.floor(rng.integers(0, 17, size) + 1e-9), 1.0)
    got = _poisson_block_wait(lam, service, k)
    assert np.array_equal(got, _poisson_block_wait_loop(lam, service, k), equal_nan=True)
    one = (np.float64(lam[0]), np.float64(service[0]), np.float64(max(k[0], 2.0)))
    assert _poisson_block_wait(*one) == _poisson_block_wait_loop(*one)


@settings(max_examples=60, deadline=None)
@given(x=st.floats(-40.0, 40.0))
def test_the_normal_distribution_function_is_erfs(x: float) -> None:
    """``_normal_cdf`` (Abramowitz and Stegun 7.1.26, in NumPy so that a plain size loads no
    SciPy) within 1e-7 of Phi from math.erf, and monotone."""
    from dualpath_plan.outcomes.online import _normal_cdf

    exact = 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))
    got = float(_normal_cdf(np.array([x]))[0])
    assert abs(got - exact) <= 1e-7
    assert float(_normal_cdf(np.array([x + 0.01]))[0]) >= got - 1e-7


def _case(bench, model: str, node: str, p: int, d: int, workload: str, mode: str, load: float):
    """A case of bench/p90_agreement.py's kind, by its scenario, mode and load."""
    spec = {"model": model, "node": node, "prefill_nodes": p, "decode_nodes": d}
    return bench.Case({**spec, "workload": workload}, mode, load)


@settings(max_examples=60, deadline=None)
@given(
    agents_cv2=st.floats(0.0, 4.0),
    cycle_s=st.floats(1e-3, 1e3),
    cycle_cv2=st.floats(0.0, 1.0),
    nodes=st.integers(1, 64),
    rates=st.lists(st.floats(0.0, 1e5), min_size=2, max_size=6),
)
def test_turns_of_few_agents_are_regular_and_of_many_poisson(
    agents_cv2: float, cycle_s: float, cycle_cv2: float, nodes: int, rates: list[float]
) -> None:
    """INV-102: the turns' gaps' variation (``turn_gap_cv2``) lies between the agents'
    variation times the cycle's and the agents' own; it never falls as the rate (the agents in
    the system, lambda c) rises, is the agents' times the cycle's while there are no more agents
    than prefill nodes, and tends to the agents' (Poisson's for Poisson agents) as they grow."""
    from dualpath_plan.outcomes.online import turn_gap_cv2

    lam = np.sort(np.array(rates))
    got = turn_gap_cv2(agents_cv2, lam, cycle_s, cycle_cv2, float(nodes))
    assert np.all(got >= agents_cv2 * cycle_cv2 - 1e-12)
    assert np.all(got <= agents_cv2 + 1e-12)
    assert np.all(np.diff(got) >= -1e-12)
    few = lam * cycle_s <= nodes
    assert np.allclose(got[few], agents_cv2 * cycle_cv2)
    many = float(turn_gap_cv2(agents_cv2, 1e9 * nodes / cycle_s, cycle_s, cycle_cv2, nodes))
    assert many == pytest.approx(agents_cv2, rel=1e-6, abs=1e-12)


def test_few_agents_wait_less_than_poisson_turns_would() -> None:
    """INV-102: Qwen3-32B on DGX B200 2P4D, basic at 35% load, has 5 agents in the system:
    its turns reach a prefill node far more regularly than a Poisson stream, and the simulation
    (two seeds) puts the p90 TTFT barely above its fixed part. The analytical p90 is within 15%
    of it (52% above with Poisson's turns)."""
    bench = load_bench("p90_agreement")
    case = _case(bench, "qwen3-32b", "dgx-b200", 2, 4, "paper-32k", "basic", 0.35)
    m = bench.measure(case, seeds=2)
    assert m.analytical_p90_s == pytest.approx(m.simulated_p90_s, rel=bench.BOUND)
    q, t_max = _queue(case.spec, "basic")
    lam = 0.35 * t_max
    assert float(lam * q.cycle_s[0]) < 6.0  # few agents
    poisson = replace(q, cycle_s=np.full_like(q.cycle_s, 1e12))  # as if agents were countless
    aps = np.array([lam / q.turns])
    assert float(q.waits(aps).ttft_quantile(0.9)[0]) < float(
        poisson.waits(aps).ttft_quantile(0.9)[0]
    )


def test_overlapped_block_reads_are_narrow() -> None:
    """gpt-oss-120b on HGX B300 4P3D, basic at 67% load: round robin's blocks of 8 reads
    overlap at a local load of 2.7, so a read always shares its link and the block's reads end
    together; their waits lie within the block's arrival span and two reads' times
    (``shared_width_s``), not over [0, 2 W_V]. The mean is the same and the p90 is lower, within
    15% of the simulation's (two seeds; 16% high over [0, 2 W_V])."""
    bench = load_bench("p90_agreement")
    case = _case(bench, "gpt-oss-120b", "hgx-b300", 4, 3, "agentic-22gb-pflop", "basic", 0.67)
    q, t_max = _queue(case.spec, "basic")
    w = q.waits(np.array([0.67 * t_max / q.turns]))
    assert float(w.shared_share[0]) == 1.0
    assert float(w.shared_width_s[0]) < 2.0 * float(w.shared_s[0])
    wide = replace(w, shared_width_s=np.full_like(w.shared_width_s, math.inf))
    assert float(w.ttft_quantile(0.9)[0]) < float(wide.ttft_quantile(0.9)[0])
    m = bench.measure(case, seeds=2)
    assert m.analytical_p90_s == pytest.approx(m.simulated_p90_s, rel=bench.BOUND)


def test_a_turn_meets_its_batches_size_and_length_biased() -> None:
    """INV-104: a GPU's batches vary (a pass takes what arrived during the one before, Var B =
    (c^2 / r) b / (1 - rho_u^2)), so a turn is in a batch size-biased and waits out a pass
    length-biased. With regular turns (c^2 = 0) both are the mean batch's (its pass, half of
    it); with Poisson's the TTFT is higher. DeepSeek-V3.2 on HGX B300 1P4D, dualpath at 67%
    load (compute-bound): the analytical p90 within 15% of the simulation's (five seeds; 15.5%
    low with the mean batch)."""
    bench = load_bench("p90_agreement")
    case = _case(bench, "deepseek-v3.2", "hgx-b300", 1, 4, "paper-32k", "dualpath", 0.67)
    q, t_max = _queue(case.spec)
    aps = np.array([0.67 * t_max / q.turns])
    w = q.waits(aps)
    regular = replace(q, arrival_cv2=0.0).waits(aps)
    pm = q.prefill
    lam_g = float(w.turns_per_s[0] / q.gpus[0])
    b = lam_g * float(pm.t0_s) / (1.0 - lam_g * float(pm.u_s))
    assert b > 1.0  # the GPU always busy
    tau = float(pm.t0_s) + b * float(pm.u_s)
    assert float(regular.residual_s[0]) == pytest.approx(tau, rel=1e-9)  # 2 W_run = tau(b)
    assert float(w.residual_s[0]) > tau
    assert float(w.fixed_s[0]) > float(regular.fixed_s[0])
    m = bench.measure(case, seeds=5)
    assert m.analytical_p90_s == pytest.approx(m.simulated_p90_s, rel=bench.BOUND)
