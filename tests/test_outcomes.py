"""Issue 5: prefill/decode models, offline JCT, online APS, size and inverse sizing.

Golden values: the DualPath paper (dualpath-paper.md 5.1-5.5), with the tolerance the issue
sets (15% for figure readings). The dualpath-hopper calibration is fitted to the DS 660B 2P4D
64K point only (dualpath-plan calibrate bench/paper_points.csv); the other claims are predictions.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dualpath_plan.errors import PlanInputError
from dualpath_plan.outcomes.serving import evaluate, evaluate_mode, offline_jct_s
from dualpath_plan.outcomes.sizing import smallest_cluster
from dualpath_plan.physics.engines import Scheduling
from dualpath_plan.physics.modes import ABLATION_MODES, REPORT_MODES
from dualpath_plan.physics.workload import TurnCounts
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ServingConfig

REGISTRY = Registry.load(use_env=False)
# The paper's online APS is the highest arrival rate within the SLOs: no planning headroom.
PAPER_ONLINE = ServingConfig(max_utilization=1.0)


def _ds660(registry: Registry, **kw) -> Scenario:
    return Scenario.from_ids(
        registry, model="deepseek-v3.2", prefill_nodes=2, decode_nodes=4, workload="paper-64k", **kw
    )


def _ds27(registry: Registry) -> Scenario:
    return Scenario.from_ids(
        registry, model="ds-27b", prefill_nodes=1, decode_nodes=1, workload="paper-64k"
    )


def test_ds660b_2p4d_offline_speedup(registry) -> None:
    rep = evaluate(_ds660(registry), ServingConfig(agents=2048))
    assert rep.speedup_jct == pytest.approx(1.87, rel=0.15)  # paper 5.1: up to 1.87x


def test_ds27b_1p1d_offline_speedup(registry) -> None:
    rep = evaluate(_ds27(registry), ServingConfig(agents=2048))
    assert rep.speedup_jct == pytest.approx(1.78, rel=0.15)  # paper 5.2: up to 1.78x (predicted)


@pytest.mark.parametrize("agents", [1024, 2048])
def test_ablation_ordering(registry, agents) -> None:
    # paper 5.5: Basic > + layer-wise > + dual-path loading > + scheduling (JCT)
    sc = _ds660(registry)
    cfg = ServingConfig(agents=agents)
    jct = [evaluate_mode(sc, m, cfg).jct_s for m in ABLATION_MODES]
    assert jct[0] > jct[1] > jct[2] > jct[3]
    # The unscheduled dual-path step is not fitted: about 6,500 s at 2048 agents (Fig. 12 right).
    if agents == 2048:
        assert jct[2] == pytest.approx(6_500, rel=0.15)


@pytest.mark.xfail(
    strict=True,
    reason=(
        "Online APS gains are not reproduced: the model gives about 1.6x for DS 660B 2P4D. "
        "Even at equal utilization the gain is the capacity ratio the offline bars fix, about "
        "1.88x; the paper's DualPath APS of about 0.45 means 70.7 turns/s with the 64K trace, "
        "above the 65 to 68 turns/s Figure 7 gives offline. The online trace is not stated "
        "(dualpath-paper.md 4.3, UNCONFIRMED)."
    ),
)
def test_ds660b_online_aps_gain(registry) -> None:
    rep = evaluate(_ds660(registry), PAPER_ONLINE)
    assert rep.speedup_aps == pytest.approx(2.25, rel=0.15)


@pytest.mark.xfail(
    strict=True,
    reason=(
        "DS 27B 1P1D is storage-bound in both modes in this model, so its online gain is the "
        "(P+D)/P = 2 ceiling, 20% above the paper's 1.67x; the online trace is not stated."
    ),
)
def test_ds27b_online_aps_gain(registry) -> None:
    rep = evaluate(_ds27(registry), PAPER_ONLINE)
    assert rep.speedup_aps == pytest.approx(1.67, rel=0.15)


def test_online_basic_aps_matches_the_figure(registry) -> None:
    # Absolute APS readings (paper 5.4, [R1]): DS 660B Basic about 0.2, DS 27B DualPath about 0.5.
    assert evaluate_mode(_ds660(registry), "basic", PAPER_ONLINE).aps == pytest.approx(
        0.2, rel=0.15
    )
    assert evaluate_mode(_ds27(registry), "dualpath", PAPER_ONLINE).aps == pytest.approx(
        0.5, rel=0.15
    )


def test_prefill_batch_curve_is_figure_3(registry) -> None:
    # paper 2.1, Figure 3 right: about 3x token throughput from batch 1 to batch 20.
    pm = _prefill(Scenario.from_ids(registry), "dualpath")
    rate = lambda b: b / pm.forward_s(b)  # noqa: E731
    assert rate(20) / rate(1) == pytest.approx(3.0, rel=1e-9)


def _prefill(sc, mode):
    from dualpath_plan.scenario.assemble import assemble

    return assemble(sc, mode, 2.0, 4.0).pe.prefill


def test_layerwise_batch_is_larger_than_hbm_batch(registry) -> None:
    sc = Scenario.from_ids(registry)
    assert _prefill(sc, "dualpath").batch_cap > 10 * _prefill(sc, "basic").batch_cap


@pytest.mark.parametrize("P,D", [(1, 1), (2, 4), (4, 2), (1, 7)])
def test_mode_ordering(registry, P, D) -> None:
    sc = Scenario.from_ids(registry, model="ds-27b", prefill_nodes=P, decode_nodes=D)
    rep = evaluate(sc, ServingConfig(agents=1024), strict=False)
    m = rep.modes
    assert m["dualpath"].throughput_turns_per_s >= m["basic"].throughput_turns_per_s
    assert m["dualpath"].throughput_turns_per_s >= m["even"].throughput_turns_per_s * (1 - 1e-9)
    assert m["oracle"].throughput_turns_per_s >= m["dualpath"].throughput_turns_per_s * (1 - 1e-9)
    assert m["dualpath"].jct_s <= m["basic"].jct_s
    assert m["dualpath"].aps >= m["basic"].aps


def test_mode_ordering_where_one_request_is_more_than_betas_work(registry) -> None:
    # INV-2 where a pass is longer than beta's 5 s (DeepSeek-V3 on DGX A100, 13 s a pass and
    # 5.5 s a request): beta still admits one request whole, so the layer-wise modes batch at
    # least basic's one request a pass (they gave 0.45 turns/s to basic's 0.99 and the
    # simulation's 1.31 when beta's admitted batch could fall to 0.27 of a request).
    sc = Scenario.from_ids(
        registry, model="deepseek-v3", node="dgx-a100", workload="paper-32k",
        prefill_nodes=3, decode_nodes=3,
    )  # fmt: skip
    m = evaluate(sc, ServingConfig(agents=64), strict=False).modes
    assert m["dualpath"].throughput_turns_per_s >= m["basic"].throughput_turns_per_s
    assert m["oracle"].throughput_turns_per_s >= m["dualpath"].throughput_turns_per_s * (1 - 1e-9)
    from dualpath_plan.scenario.assemble import assemble

    for mode in ("dualpath", "oracle"):
        prefill = assemble(sc, mode, 3.0, 3.0).pe.prefill
        assert prefill.admitted_batch >= 1.0 / prefill.request_gpus


_ORDERING_MODELS = sorted(REGISTRY.ids("model"))
_ORDERING_NODES = sorted(REGISTRY.ids("node"))


@settings(max_examples=40, deadline=None)
@given(
    model=st.sampled_from(_ORDERING_MODELS),
    node=st.sampled_from(_ORDERING_NODES),
    workload=st.sampled_from(["paper-32k", "paper-48k", "paper-64k"]),
    P=st.integers(1, 6),
    D=st.integers(1, 6),
    policy=st.sampled_from(["queue_aware", "round_robin"]),
)
def test_mode_ordering_under_one_scheduler(model, node, workload, P, D, policy) -> None:
    # INV-2 over the real profiles: with one scheduler for every mode (--scheduler), the layer-
    # wise modes' extra paths only add capacity. Under the default schedulers basic runs round
    # robin and dualpath the paper's, whose beta admission batch can cost compute on a slow
    # node (DGX A100), so basic may sit above dualpath there (docs/invariants.md, INV-2).
    try:
        sc = Scenario.from_ids(
            REGISTRY, model=model, node=node, workload=workload,
            prefill_nodes=P, decode_nodes=D, scheduling=Scheduling(policy=policy),
        )  # fmt: skip
        m = evaluate(sc, ServingConfig(agents=1024), strict=False).modes
    except PlanInputError:
        return  # the model does not fit this cluster: refused, nothing to order
    t = {mode: m[mode].throughput_turns_per_s for mode in ("basic", "even", "dualpath", "oracle")}
    if not all(np.isfinite(v) and v > 0 for v in t.values()):
        return
    assert t["dualpath"] >= t["basic"] * (1 - 1e-9)
    assert t["dualpath"] >= t["even"] * (1 - 1e-9)
    assert t["oracle"] >= t["dualpath"] * (1 - 1e-9)


def test_jct_grows_with_agents_and_latency_bound_at_small_n(registry) -> None:
    sc = Scenario.from_ids(registry)
    one = evaluate_mode(sc, "dualpath", ServingConfig(agents=1))
    assert one.latency_bound
    # One agent: its critical path, turns x (TTFT + generated x TPOT).
    turns, gen = sc.workload.turns, sc.workload.generated_tokens
    assert one.jct_s == pytest.approx(turns * (one.ttft_s + gen * one.tpot_s), rel=1e-6)
    jcts = [
        evaluate_mode(sc, "dualpath", ServingConfig(agents=n)).jct_s for n in (1, 64, 512, 4096)
    ]
    assert jcts == sorted(jcts)
    assert not evaluate_mode(sc, "dualpath", ServingConfig(agents=4096)).latency_bound


def test_slos_hold_at_the_aps(registry) -> None:
    cfg = ServingConfig()
    for mode in REPORT_MODES:
        o = evaluate_mode(Scenario.from_ids(registry), mode, cfg)
        assert o.online_ttft_s <= cfg.ttft_slo_s * (1 + 1e-6)
        assert o.online_tpot_s <= cfg.tpot_slo_s * (1 + 1e-6)
        assert o.working_set_gbyte > 0


@settings(max_examples=30, deadline=None)
@given(
    p=st.integers(1, 6),
    d=st.integers(1, 12),
    mode=st.sampled_from(REPORT_MODES),
    model=st.sampled_from(["deepseek-v3.2", "ds-27b"]),
    ttft=st.floats(0.5, 20.0),
    tpot=st.floats(0.01, 0.2),
    looser=st.tuples(st.floats(1.0, 4.0), st.floats(1.0, 4.0)),
    headroom=st.sampled_from([0.8, 1.0]),
)
def test_looser_slo_never_lowers_aps(p, d, mode, model, ttft, tpot, looser, headroom) -> None:
    """INV-12: loosening either SLO, or both, never lowers the APS, in every mode and cluster."""
    from dualpath_plan.errors import InfeasibleError

    sc = Scenario.from_ids(REGISTRY, model=model, prefill_nodes=p, decode_nodes=d)

    def aps(ttft_s: float, tpot_s: float) -> float:
        cfg = ServingConfig(ttft_slo_s=ttft_s, tpot_slo_s=tpot_s, max_utilization=headroom)
        return evaluate_mode(sc, mode, cfg).aps

    try:
        tight = aps(ttft, tpot)
    except InfeasibleError:
        return  # the model does not fit this cluster in this mode: no APS to compare
    a, b = looser
    for loose in (aps(ttft * a, tpot), aps(ttft, tpot * b), aps(ttft * a, tpot * b)):
        assert loose >= tight * (1 - 1e-9)


@settings(max_examples=12, deadline=None)
@given(
    model=st.sampled_from(["deepseek-v3.2", "ds-27b"]),
    mode=st.sampled_from(["basic", "dualpath"]),
    target=st.floats(0.02, 1.2),
    deadline=st.booleans(),
)
@example(model="ds-27b", mode="dualpath", target=1.0, deadline=False)
def test_inverse_sizing_is_minimal(model, mode, target, deadline) -> None:
    """INV-13: the cluster sizing finds meets the target and no cluster of fewer nodes does,
    whatever its split (every one of them evaluated, not only one node fewer)."""
    from dualpath_plan.errors import InfeasibleError

    sc = Scenario.from_ids(REGISTRY, model=model, prefill_nodes=1, decode_nodes=1)
    cfg = ServingConfig()
    goal = {"deadline_s": 3600.0 / target} if deadline else {"target_aps": target}
    res = smallest_cluster(sc, mode, cfg, max_nodes=64, **goal)
    if res.outcome is None:
        return  # beyond 64 nodes: INV-13's other test covers the search's reach
    assert res.prefill_nodes + res.decode_nodes == res.nodes
    assert res.gpus == res.nodes * 8

    def meets(out) -> bool:
        return out.jct_s <= goal["deadline_s"] if deadline else out.aps >= target

    assert meets(res.outcome)
    for n in range(2, res.nodes):
        for p in range(1, n):
            trial = replace(sc, prefill_nodes=p, decode_nodes=n - p)
            try:
                out = evaluate_mode(trial, mode, cfg)
            except InfeasibleError:
                continue
            assert not meets(out), (n, p, n - p)


@settings(max_examples=10, deadline=None)
@given(
    model=st.sampled_from(["deepseek-v3.2", "ds-27b"]),
    mode=st.sampled_from(["basic", "dualpath", "oracle"]),
    target=st.floats(0.02, 3.0),
    deadline=st.booleans(),
    ttft=st.sampled_from([1.0, 4.0]),
)
def test_sizing_evaluates_splits_at_once_as_each_alone(model, mode, target, deadline, ttft) -> None:
    """The search evaluates every split of a size at once (the sweep's evaluation, the APS only
    where the saturated rate can reach the target) and finds the cluster, split and outcome
    it finds evaluating each split alone."""
    from dualpath_plan.outcomes import sizing

    sc = Scenario.from_ids(REGISTRY, model=model, prefill_nodes=1, decode_nodes=1)
    cfg = ServingConfig(ttft_slo_s=ttft)
    goal = {"deadline_s": 3600.0 / target} if deadline else {"target_aps": target}
    fast = smallest_cluster(sc, mode, cfg, max_nodes=96, **goal)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(
            sizing, "_best_split", lambda s, n, mo, c, t, g: sizing._best_split_each(s, n, mo, c, t)
        )
        each = smallest_cluster(sc, mode, cfg, max_nodes=96, **goal)
    assert (fast.prefill_nodes, fast.decode_nodes, fast.reason) == (
        each.prefill_nodes,
        each.decode_nodes,
        each.reason,
    )
    assert fast.outcome == each.outcome


def test_size_cli_default_json(cli) -> None:
    result = cli("size", "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert set(data["modes"]) == {"basic", "even", "dualpath", "oracle"}
    for mode in data["modes"].values():
        for key in (
            "throughput_turns_per_s",
            "jct_s",
            "aps",
            "ttft_s",
            "tpot_s",
            "bottleneck",
            "decode_path_fraction",
            "utilization",
        ):
            assert key in mode
        assert all(0 <= u <= 1 + 1e-9 for u in mode["utilization"].values())
    assert data["speedup"]["jct"] == pytest.approx(
        data["modes"]["basic"]["jct_s"] / data["modes"]["dualpath"]["jct_s"]
    )
    assert data["speedup"]["aps"] == pytest.approx(
        data["modes"]["dualpath"]["aps"] / data["modes"]["basic"]["aps"]
    )
    text = cli("size").out
    assert "dualpath vs basic" in text and "GB/PFLOP" in text


def test_size_cli_sizing(cli) -> None:
    data = cli("size", "--model", "ds-27b", "--target-aps", "1", "--json").json()
    assert data["modes"]["dualpath"]["aps"] >= 1
    assert data["modes"]["dualpath"]["nodes"] <= data["modes"]["basic"]["nodes"]
    data = cli(
        "size", "--model", "ds-27b", "--deadline", "3600", "--agents", "1024", "--json"
    ).json()
    assert all(m["jct_s"] <= 3600 for m in data["modes"].values())


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (("--agents", "0"), "--agents"),
        (("--agents", "-5"), "--agents"),
        (("--ttft-slo", "nan"), "--ttft-slo"),
        (("-P", "0"), "at least one node"),
        (("-P", "1", "-D", "1"), "do not fit"),
        (("--target-aps", "1", "--deadline", "10"), "not both"),
        (("--target-aps", "-1"), "--target-aps"),
    ],
)
def test_size_bad_input(cli, args, expect) -> None:
    result = cli("size", *args)
    assert result.code == 2, (args, result.err)
    assert expect in result.err
    assert result.err.count("\n") == 1 and "Traceback" not in result.err


@pytest.mark.parametrize("args", [("--ttft-slo", "0.01"), ("--tpot-slo", "0.005")])
def test_size_with_unmeetable_slos_still_answers_offline(cli, args) -> None:
    """An SLO no arrival rate meets sets every mode's APS to 0 with the reason; the offline
    answers, which do not depend on it, are still given."""
    result = cli("size", *args, "--json")
    assert result.code == 0, result.err
    data = result.json()
    for m in data["modes"].values():
        assert m["aps"] == 0 and m["aps_limit"] == "unreachable"
        assert m["jct_s"] > 0
    text = cli("size", *args).out
    assert text.count("no arrival rate meets the SLOs") == len(data["modes"])


# --- offline JCT with stragglers (docs/model.md section 6) ---------------------------------

_counts = st.builds(
    TurnCounts.uniform,
    st.floats(1.0, 1000.0),
    st.floats(0.0, 1.0),
)


@settings(max_examples=200, deadline=None)
@given(
    agents=st.integers(1, 100_000),
    t_max=st.floats(0.01, 1e4),
    cycle=st.floats(0.01, 100.0),
    counts=_counts,
)
@example(agents=2, t_max=2.03125, cycle=0.5, counts=TurnCounts.uniform(1.0, 1.0))
def test_offline_jct_is_above_both_bounds(agents, t_max, cycle, counts) -> None:
    # The example: c N only just above N / T, so the two bounds cross near S = 0 and Newton
    # from c / r needs ~40 steps (4 fixed steps once left the JCT 2e-6 under the bound).
    jct = offline_jct_s(agents, t_max, cycle, counts)
    assert math.isfinite(jct)
    assert jct >= agents * counts.mean / t_max * (1 - 1e-9)  # throughput bound
    assert jct >= cycle * counts.mean * (1 - 1e-9)  # an agent's own turns
    assert jct <= agents * counts.longest / t_max + cycle * counts.longest + 1e-9


@settings(max_examples=100, deadline=None)
@given(
    agents=st.integers(1, 100_000),
    t_max=st.floats(0.01, 1e4),
    cycle=st.floats(0.01, 100.0),
    turns=st.floats(1.0, 1000.0),
)
def test_offline_jct_without_spread_is_the_asymptotic_bound(agents, t_max, cycle, turns) -> None:
    jct = offline_jct_s(agents, t_max, cycle, TurnCounts.uniform(turns, 0.0))
    assert jct == pytest.approx(agents * turns / min(t_max, agents / cycle), rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(
    t_max=st.floats(0.1, 1e3),
    cycle=st.floats(0.1, 30.0),
    counts=_counts,
    agents=st.lists(st.integers(1, 50_000), min_size=2, max_size=6),
    spreads=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=6),
)
def test_offline_jct_is_monotone(t_max, cycle, counts, agents, spreads) -> None:
    by_agents = [offline_jct_s(n, t_max, cycle, counts) for n in sorted(agents)]
    assert all(a <= b * (1 + 1e-12) for a, b in itertools.pairwise(by_agents))
    # A wider spread of the same mean never shortens the job: the longest trajectories grow.
    mean = counts.mean
    by_spread = [
        offline_jct_s(512, t_max, cycle, TurnCounts.uniform(mean, s)) for s in sorted(spreads)
    ]
    assert all(a <= b * (1 + 1e-9) for a, b in itertools.pairwise(by_spread))


@settings(max_examples=60, deadline=None)
@given(
    agents=st.integers(1, 2_000),
    cycle=st.floats(0.1, 30.0),
    ratio=st.floats(0.2, 5.0),
    spread=st.floats(0.05, 1.0),
)
def test_offline_jct_ramp_is_the_integral(agents, cycle, ratio, spread) -> None:
    """The closed-form ramp equals the same uniform distribution cut into 20,000 steps (the
    midpoint rule), where the crossing of the two bounds is hardest: r = N / T near c."""
    t_max = agents / (cycle * ratio)
    ramp = TurnCounts.uniform(157, spread)
    m = 20_000
    steps = TurnCounts(
        np.concatenate([[157 * (1 - spread)], np.full(m, 2 * 157 * spread / m)]),
        np.concatenate([[1.0], 1.0 - (np.arange(m) + 0.5) / m]),
    )
    exact = offline_jct_s(agents, t_max, cycle, ramp)
    assert exact == pytest.approx(offline_jct_s(agents, t_max, cycle, steps), rel=1e-5)


def test_offline_jct_is_vectorized_like_the_scalar() -> None:
    counts = TurnCounts.uniform(157, 1.0)
    agents = np.array([1, 64, 512, 2048, 4096, 2])
    t = np.array([10.0, 30.0, 58.8, 64.0, 100.0, 2.03125])
    c = np.array([5.0, 6.2, 6.2, 7.0, 1.0, 0.5])
    vec = offline_jct_s(agents, t, c, counts)
    scalar = [
        offline_jct_s(int(n), float(x), float(y), counts)
        for n, x, y in zip(agents, t, c, strict=True)
    ]
    np.testing.assert_allclose(vec, scalar, rtol=1e-12)


def _ramp_integral_every_point(n, r, c, top):
    """The ramp integral as first written: every term over the full broadcast shape (the
    reference the per-agents and crossing-only form is held to, bit for bit)."""
    from dualpath_plan.outcomes.serving import _NEWTON_MAX_STEPS

    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):

        def g_integral(x):
            return c * (x + np.expm1((n + 1) * np.log1p(-x)) / (n + 1))

        top_arr = np.full(np.broadcast(n, r, c).shape, top)
        g_top = -c * np.expm1(n * np.log1p(-top))
        below = c * n <= r
        above = ~below & (g_top >= r * top)
        shape = top_arr.shape
        flat = np.array(np.minimum(top_arr, c / r), dtype=np.float64).reshape(-1)
        nf, rf, cf = (np.broadcast_to(a, shape).reshape(-1) for a in (n, r, c))
        active = np.flatnonzero(~below & ~above)
        for _ in range(_NEWTON_MAX_STEPS):
            if active.size == 0:
                break
            xa, na, ra, ca = flat[active], nf[active], rf[active], cf[active]
            gone = np.exp(na * np.log1p(-xa))
            phi = ca * (1.0 - gone) - ra * xa
            slope = ca * na * gone / (1.0 - xa) - ra
            step = np.where(slope < 0, phi / slope, 0.0)
            flat[active] = np.clip(xa - step, 0.0, top)
            active = active[np.abs(step) > 1e-13 + 1e-12 * flat[active]]
        x = flat.reshape(shape)
        crossing = g_integral(x) + r * (top * top - x * x) / 2
        return np.where(below, r * top * top / 2, np.where(above, g_integral(top_arr), crossing))


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    top=st.sampled_from([1.0, 0.5, 0.999, 0.01]),
    special=st.booleans(),
)
def test_ramp_integral_is_the_every_point_form_bit_for_bit(seed, top, special) -> None:
    # Agents broadcast against the throughput and cycle (as a sweep's grid passes them), each
    # case (below, above, crossing) present, and with ``special`` zeros, infinities and NaN.
    from dualpath_plan.outcomes.serving import _ramp_integral

    rng = np.random.default_rng(seed)
    n = rng.integers(1, 5000, (1, 1, 7)).astype(np.float64)
    c = rng.uniform(0.1, 30.0, (1, 5, 1))
    r = c * np.exp(rng.uniform(-1.0, 1.2, (4, 5, 7)) * np.log(n + 1.0))  # about c / n .. c n
    if special:
        r = r.copy()
        r[0, 0, 0], r[1, 1, 0], r[2, 2, 0] = np.inf, np.nan, 0.0
    # Agents broadcast, laid out in full, and the throughput in Fortran order (the crossing
    # is written into the result by its C-order flat index).
    full_n = np.broadcast_to(n, r.shape[:2] + n.shape[2:]).copy()
    for args in ((n, r, c), (full_n, r, c), (n, np.asfortranarray(r), c)):
        got = _ramp_integral(*args, top)
        want = _ramp_integral_every_point(*args, top)
        assert got.shape == want.shape
        assert np.array_equal(got, want, equal_nan=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        below = c * n <= r
        above = ~below & (-c * np.expm1(n * np.log1p(-top)) >= r * top)
    assert below.any() and (above.any() or top < 0.5) and (~below & ~above).any()
    assert np.array_equal(
        _ramp_integral(np.float64(512.0), np.float64(40.0), np.float64(6.0), top),
        _ramp_integral_every_point(np.float64(512.0), np.float64(40.0), np.float64(6.0), top),
    )


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    piece=st.sampled_from([(0.0, 0.125), (0.125, 0.25), (0.5, 0.625), (0.875, 1.0), (0.3, 0.31)]),
    special=st.booleans(),
)
def test_ramp_piece_is_the_integral_over_the_piece(seed, piece, special) -> None:
    # _ramp_piece (one pass over [lo, hi], the offline JCT's ramp pieces) against the ramp
    # integral to hi less the integral to lo (as the pieces were computed before), to rounding,
    # every case (h throughout, g throughout, a crossing inside the piece or before it) drawn;
    # zeros, infinities and NaN; and a midpoint quadrature.
    from dualpath_plan.outcomes.serving import _ramp_integral, _ramp_piece

    lo, hi = piece
    rng = np.random.default_rng(seed)
    n = rng.integers(1, 5000, (1, 1, 7)).astype(np.float64)
    c = rng.uniform(0.1, 30.0, (1, 5, 1))
    r = c * np.exp(rng.uniform(-1.0, 1.2, (4, 5, 7)) * np.log(n + 1.0))
    if special:
        r = r.copy()
        r[0, 0, 0], r[1, 1, 0], r[2, 2, 0] = np.inf, np.nan, 0.0
    got = _ramp_piece(n, r, c, lo, hi)
    to_hi = _ramp_integral(n, r, c, hi)
    with np.errstate(invalid="ignore"):
        want = to_hi - (_ramp_integral(n, r, c, lo) if lo > 0 else 0.0)
    assert got.shape == want.shape
    # An infinite integrand (r = inf) is an infinite piece, where the difference was inf - inf.
    infinite = np.isinf(to_hi)
    assert np.all(got[infinite] == np.inf)
    finite = np.isfinite(want)
    assert np.array_equal(finite, np.isfinite(got))
    assert np.array_equal(np.isnan(to_hi), np.isnan(got))
    assert np.all(np.abs(got[finite] - want[finite]) <= 1e-12 * np.abs(to_hi[finite]) + 1e-300)
    # The integrand at the midpoints of 20,000 slices of the piece, on a few points.
    s = lo + (hi - lo) * (np.arange(20_000) + 0.5) / 20_000
    for i in [(0, 1, 2), (3, 4, 6), (1, 2, 3)]:
        ni, ri, ci = float(n[0, 0, i[2]]), float(r[i]), float(c[0, i[1], 0])
        if not math.isfinite(ri):
            continue
        f = np.maximum(-ci * np.expm1(ni * np.log1p(-s)), ri * s)
        assert float(got[i]) == pytest.approx(float(np.mean(f)) * (hi - lo), rel=1e-6)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), spread=st.sampled_from([0.0, 0.3, 0.83, 1.0]))
def test_ramp_pieces_at_once_are_piece_by_piece(seed, spread) -> None:
    # offline_jct_s with a load-dependent cycle evaluates the ramp's pieces at once on a few
    # clusters (the intervals') and piece by piece on many (a sweep's chunk): bit for bit the
    # same, crossings included; and _ramp_integral over an array of tops is each top alone.
    from dualpath_plan.outcomes import serving
    from dualpath_plan.outcomes.serving import CYCLE_POINTS, ClosedCycle, _ramp_integral

    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 30))
    nk = np.sort(10 ** rng.uniform(-1, 4, (CYCLE_POINTS, m)), axis=0)
    ck = np.sort(10 ** rng.uniform(0, 3, (CYCLE_POINTS, m)), axis=0)
    # Each cluster its own group, r = 0: n_k and c_k as drawn.
    table = ClosedCycle(
        nk.T.copy(),
        np.zeros((m, CYCLE_POINTS)),
        ck.T.copy(),
        np.arange(m),
        np.zeros(m),
        ck[0],
        10 ** rng.uniform(-3, 0, m),
    )
    t = 10 ** rng.uniform(-1, 3, m)
    counts = TurnCounts.uniform(float(rng.uniform(2, 300)), spread)
    for agents in (16.0, 2048.0):
        at_once = offline_jct_s(agents, t, ck[0], counts, table)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(serving, "_PIECES_AT_ONCE", 0)
            one_by_one = offline_jct_s(agents, t, ck[0], counts, table)
        assert np.array_equal(at_once, one_by_one, equal_nan=True)
    n, r, c = np.float64(512.0), t[:, None], ck[0][:, None]
    tops = np.array([0.125, 0.5, 0.875, 1.0])
    many = _ramp_integral(n, r, c, tops)
    for j, top in enumerate(tops):
        assert np.array_equal(many[:, j], _ramp_integral(n, r[:, 0], c[:, 0], float(top)))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), agents=st.integers(1, 600))
def test_the_closed_cycle_is_its_interpolation_by_every_path(seed, agents) -> None:
    # ClosedCycle reads c(n) from per-group tables (n_k = b_k + r q_k, c_k = r + g TPOT_k)
    # by a binary search (one n for all clusters, or one per element) or, where every
    # cluster asks the same many n values, by counting: each path is the table's linear
    # interpolation (np.interp between n_0 and the last point; the light-load cycle below,
    # n times the cycle per agent beyond), and the paths agree bit for bit.
    from dualpath_plan.outcomes.serving import CYCLE_POINTS, ClosedCycle

    rng = np.random.default_rng(seed)
    groups, rows = int(rng.integers(1, 6)), int(rng.integers(2, 7))
    b = np.sort(10 ** rng.uniform(0, 3, (groups, CYCLE_POINTS)), axis=1)
    b[:, 0] = 1.0
    decode = np.sort(10 ** rng.uniform(-1, 1, (groups, CYCLE_POINTS)), axis=1)
    q = np.maximum.accumulate(b / decode, axis=1)
    group = rng.integers(0, groups, (rows, 1))
    rest = 10 ** rng.uniform(-1, 2, (rows, 1))
    rest[0, 0] = 0.0  # no TTFT and no tool latency: n_k = b_k
    one = rest + decode[group[:, 0], :1] * rng.uniform(0.5, 1.0, (rows, 1))
    per_agent = 10 ** rng.uniform(-3, -1, (rows, 1))
    table = ClosedCycle(b, q, decode, group, rest, one, per_agent)
    n = np.concatenate([[0.0, 1.0, float(agents)], 10 ** rng.uniform(-1, 4, 29)])
    counted = table(n[None, :])  # (rows, 32): 32 values asked of every cluster
    searched = table(np.broadcast_to(n, (rows, n.size)).copy())  # one n per element
    assert np.array_equal(counted, searched)
    for j, v in enumerate(n):
        assert np.array_equal(table(np.float64(v))[:, 0], counted[:, j])  # one n for all
    for i in range(rows):
        g, r = int(group[i, 0]), float(rest[i, 0])
        nk, ck = b[g] + r * q[g], r + decode[g]
        ck[0] = one[i, 0]
        want = np.where(
            n <= nk[0], one[i, 0], np.where(n > nk[-1], n * per_agent[i, 0], np.interp(n, nk, ck))
        )
        np.testing.assert_allclose(counted[i], want, rtol=1e-12)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), rests=st.integers(1, 6), wide=st.booleans())
def test_distinct_clusters_give_each_cluster_its_own_value(seed, rests, wide) -> None:
    # A sweep's chunk of P x D clusters holds few distinct ones (a decode group per D value,
    # a few light-load TTFTs): ClosedCycle reads c(n) for each distinct cluster once and
    # spreads it, from the second n asked (each() asks several at once). Bit for bit each
    # cluster's value by the search over every cluster (a new table's first call), whether
    # the fields are laid out over the grid or broadcast from one axis, and where too many
    # clusters differ (``wide``: every rest its own) the search itself.
    from dualpath_plan.outcomes.serving import CYCLE_POINTS, ClosedCycle

    rng = np.random.default_rng(seed)
    groups, p_values, d_values = int(rng.integers(1, 8)), 24, 20
    b = np.sort(10 ** rng.uniform(0, 3, (groups, CYCLE_POINTS)), axis=1)
    b[:, 0] = 1.0
    decode = np.sort(10 ** rng.uniform(-1, 1, (groups, CYCLE_POINTS)), axis=1)
    q = np.maximum.accumulate(b / decode, axis=1)
    group = rng.integers(0, groups, (1, d_values))  # per D value
    choices = 10 ** rng.uniform(-1, 2, rests)
    rest = rng.choice(choices, (p_values, d_values))
    if wide:
        rest = 10 ** rng.uniform(-1, 2, (p_values, d_values))
    one = rest + decode[group, 0] * 0.75
    per_agent = np.broadcast_to(10 ** rng.uniform(-3, -1, (1, d_values)), rest.shape)
    if rng.integers(2):
        group = np.broadcast_to(group, rest.shape).copy()  # laid out over the grid
    fields = (b, q, decode, group, rest, one, per_agent.copy())
    n = [np.float64(v) for v in (0.0, 1.0, *(10 ** rng.uniform(-1, 4, 10)))]
    want = [ClosedCycle(*fields)(v) for v in n]  # each table's first call: the search
    table = ClosedCycle(*fields)
    got = table.each(n)
    again = [table(v) for v in n]
    for w, g, a in zip(want, got, again, strict=True):
        assert g.shape == w.shape == a.shape
        assert np.array_equal(g, w, equal_nan=True)
        assert np.array_equal(a, w, equal_nan=True)
    assert ("_distinct_table" in table.__dict__) and (
        (table.__dict__["_distinct_table"] is None) == wide
    )


def test_flat_at_is_the_broadcast_take() -> None:
    # The crossing's terms are taken by flat index from arrays over some axes of the shape
    # (agents, D values): each element as laying the array out over the shape would give.
    from dualpath_plan.outcomes.serving import _flat_at

    rng = np.random.default_rng(7)
    shape = (4, 5, 3, 2)
    index = rng.integers(0, int(np.prod(shape)), 50)
    for dims in [(1, 5, 1, 1), (4, 1, 3, 1), (3, 2), (2,), (1, 1, 1, 1), (), (4, 5, 3, 2),
                 (5, 1, 2), (4, 1, 1, 2)]:  # fmt: skip
        a = rng.uniform(size=dims)
        want = np.broadcast_to(a, shape).reshape(-1)[index]
        assert np.array_equal(_flat_at(a, shape, index), want), dims


def test_no_agent_left_is_exp_to_the_bit() -> None:
    # (1 - x)^N from its logarithm: exp where it can be above 0, else 0 without asking exp;
    # the same bits as exp everywhere (the cut-off, subnormals, infinities and NaN).
    from dualpath_plan.outcomes.serving import _EXP_ZERO_BELOW, _no_agent_left

    y = np.concatenate(
        [
            np.linspace(-1e6, _EXP_ZERO_BELOW, 200_001),
            np.linspace(_EXP_ZERO_BELOW - 50, -700.0, 200_001),
            np.linspace(-50.0, 0.0, 1001),
            [-np.inf, np.nan, np.inf, np.nextafter(_EXP_ZERO_BELOW, 0.0), 0.0, -0.0],
        ]
    )
    with np.errstate(under="ignore", over="ignore"):
        want = np.exp(y)
        assert np.array_equal(_no_agent_left(y), want, equal_nan=True)
        assert np.array_equal(np.signbit(_no_agent_left(y)), np.signbit(want))
        assert np.array_equal(_no_agent_left(y[:10]), want[:10])  # every one below the cut


def test_stragglers_set_the_small_batch_jct(registry) -> None:
    """Figure 7 (DS 660B 2P4D 64K): JCT(512 agents) is far above 512/2048 of JCT(2048): the
    longest trajectories finish alone. Without a spread the model misses it by a third."""
    sc = _ds660(registry)
    small = evaluate_mode(sc, "dualpath", ServingConfig(agents=512))
    assert small.jct_s == pytest.approx(2_100, rel=0.15)  # paper 5.2 reading (calibration point)
    assert small.drain_s > 0.3 * small.jct_s
    flat = replace(
        sc, turn_demand=replace(sc.turn_demand, trajectory_turns=TurnCounts.uniform(157, 0.0))
    )
    assert evaluate_mode(flat, "dualpath", ServingConfig(agents=512)).jct_s < 0.7 * 2_100
    # Predictions (not fitted): Basic at 512 and 4096 agents, DualPath at 4096 (paper 5.2).
    assert evaluate_mode(sc, "basic", ServingConfig(agents=512)).jct_s == pytest.approx(
        2_900, rel=0.15
    )
    assert evaluate_mode(sc, "basic", ServingConfig(agents=4096)).jct_s == pytest.approx(
        19_500, rel=0.15
    )
    assert evaluate_mode(sc, "dualpath", ServingConfig(agents=4096)).jct_s == pytest.approx(
        10_400, rel=0.15
    )


def test_trace_workload_drains_through_its_longest_trajectory(cli, tmp_path) -> None:
    """A trace file gives the observed turns per trajectory: one trajectory of 40 turns among
    nine of 4 sets the JCT of a small batch, and the report says the trace's numbers."""
    wdir = tmp_path / "workload"
    wdir.mkdir()
    rows = ["trajectory_id,append_tokens,generated_tokens"]
    for tid, turns in enumerate([4] * 9 + [40]):
        rows += [f"{tid},400,150"] * turns
    (wdir / "t.csv").write_text("\n".join(rows) + "\n")
    (wdir / "skewed.toml").write_text(
        'kind = "workload"\nname = "skewed"\nturns = 7.6\nappend_tokens = 400\n'
        'generated_tokens = 150\ncontext_tokens = 2000\ntrace_file = "t.csv"\n'
    )
    result = cli("size", "--profiles", str(tmp_path), "--workload", "skewed", "--agents", "64")
    assert result.code == 0, result.err
    assert "trace t.csv: 7.6 turns, longest 40" in result.out
    data = cli(
        "size", "--profiles", str(tmp_path), "--workload", "skewed", "--agents", "64", "--json"
    ).json()
    dp = data["modes"]["dualpath"]
    # 64 agents hardly load the cluster: the JCT is the longest trajectory's critical path,
    # 40 turns of (TTFT + generated x TPOT) at light load, not 7.6 mean turns.
    assert dp["drain_s"] > 0.5 * dp["jct_s"]
    assert dp["jct_s"] > 40 * 150 * 0.03


def test_size_tables_group_offline_and_online_and_state_the_agents(cli) -> None:
    # The TTFT column was the offline TTFT under load beside an APS at the 4 s SLO, unlabelled;
    # the --target-aps table showed a JCT for an unstated 2,048 agents; --deadline mixed units.
    out = cli("size").out
    assert "offline: 2,048 agents started together" in out and "TTFT under load" in out
    assert "online: Poisson agent arrivals, SLO TTFT 4 s and TPOT 50 ms" in out
    assert out.index("offline:") < out.index("online:")
    sizing = cli("size", "--model", "ds-27b", "--target-aps", "1", "--agents", "512").out
    assert "JCT, 512 agents" in sizing
    deadline = cli("size", "--model", "ds-27b", "--deadline", "3600", "--agents", "1024").out
    data = cli(
        "size", "--model", "ds-27b", "--deadline", "3600", "--agents", "1024", "--json"
    ).json()
    # One unit for the whole JCT column, its interval included (the table wraps long cells).
    jct = " ".join(line.split("│")[7] for line in deadline.splitlines() if line.startswith("│"))
    units = set(re.findall(r"[\d.,]+ (h|s)\b", jct))
    assert len(units) == 1, jct
    assert all(m.get("jct_s_interval") for m in data["modes"].values() if m["reached"])


def test_the_offline_decode_batch_is_at_most_the_agents(registry) -> None:
    """A closed system of N agents decodes at most N sequences: at the latency bound the
    operating rate rests on a batch of one's TPOT, and Little's batch alone gave 136.9 for
    128 agents (and TPOT at that batch); above the bound the batch is Little's as before."""
    from dualpath_plan.outcomes.serving import evaluate_mode
    from dualpath_plan.scenario import Scenario
    from dualpath_plan.scenario.spec import ServingConfig

    sc = Scenario.from_ids(registry)
    for agents in (1, 16, 128, 300, 2048):
        o = evaluate_mode(sc, "dualpath", ServingConfig(agents=agents))
        assert 0 < o.decode_batch <= agents
    big = evaluate_mode(sc, "dualpath", ServingConfig(agents=2048))
    assert big.decode_batch < 2048  # Little's batch, not the cap


def test_reports_say_what_a_mode_and_a_count_are(cli) -> None:
    """Found in a trial: 'paths --mode oracle' drew both read paths of a mode that reads
    nothing, 'size' gave the oracle a DE share of 0%, '1 agents', and a KV working set of
    tens of GB as '0.0 TB'."""
    oracle = cli("paths", "--mode", "oracle").out
    assert "PE path" not in oracle and "DE-path share" not in oracle and "no KV I/O" in oracle
    assert "PE path (" in cli("paths").out
    size = cli("size", "--model", "ds-27b", "-P", "1", "-D", "1", "--agents", "1").out
    assert "1 agent started together" in size and "1 agents" not in size
    oracle_row = next(line for line in size.splitlines() if line.startswith("│ oracle"))
    assert oracle_row.rstrip("│ ").endswith("-"), oracle_row
    assert " GB " in size and "0.0 TB" not in size


def test_size_says_the_rate_few_agents_run_at(cli) -> None:
    """With too few agents to saturate the cluster (latency-bound, L), the table's turns/s is
    the cluster's maximum, and the rate the agents run at is said beside it (size printed 60.7
    turns/s for 4 agents whose JCT means 0.4: found in a trial); the JSON gives both, the
    operating rate as ``throughput_turns_per_s`` (simulate --compare's analytical throughput)
    and the maximum as ``saturated_turns_per_s``."""
    text = cli("size", "--agents", "4").out
    assert "max" in text and "turns/s while all run: basic" in text and "dualpath L" in text
    data = cli("size", "--agents", "4", "--json").json()
    for o in data["modes"].values():
        assert o["latency_bound"] and o["throughput_turns_per_s"] < o["saturated_turns_per_s"]
    many = cli("size", "--json").json()["modes"]["dualpath"]
    assert many["throughput_turns_per_s"] == many["saturated_turns_per_s"]


def _ttft_by_turns(agents, t_max, floor, decode, counts: TurnCounts, lo, hi, steps=200_000):
    """The closed system's mean TTFT over the turns done from share lo to hi of all, by a
    midpoint rule over the turn index: S(k) on a fine grid, each index weighing its N S(k)
    turns."""
    k_end = counts.longest
    dk = k_end / steps
    k = (np.arange(steps) + 0.5) * dk
    edges = np.concatenate([[0.0], np.cumsum(counts.length)])
    j = np.minimum(np.searchsorted(edges, k, side="right") - 1, counts.length.size)
    top = float(counts.surviving[-1])
    on_ramp = j >= counts.length.size
    s = np.where(
        on_ramp,
        top * (1 - (k - edges[-1]) / max(counts.ramp_turns, 1e-300)),
        counts.surviving[np.minimum(j, counts.length.size - 1)],
    )
    done = np.cumsum(s * dk) / (counts.mean)
    ttft = np.maximum(agents * s / t_max - decode, floor)
    inside = (done > lo) & (done <= hi)
    return float((s * ttft)[inside].sum() / s[inside].sum())


@settings(max_examples=40, deadline=None)
@given(
    agents=st.integers(1, 8192),
    t_max=st.floats(5.0, 500.0),
    floor=st.floats(0.1, 5.0),
    decode=st.floats(0.0, 30.0),
    turns=st.floats(4.0, 300.0),
    spread=st.floats(0.0, 1.0),
    observed=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_offline_ttft_is_the_turn_weighted_closed_system_wait(
    agents, t_max, floor, decode, turns, spread, observed, seed
) -> None:
    """INV-84: the analytical offline TTFT is the closed system's wait max(N S / T - decode,
    floor) at the agents still running, weighted by the turns at each turn index: over the whole
    run and over the saturated span (10% to 50% of the turns done), as a midpoint rule over the
    turn index gives it, for uniform turn counts and observed ones; where every trajectory has
    the mean length both are the wait while all N run."""
    from dualpath_plan.outcomes.serving import offline_ttft

    if observed:
        rng = np.random.default_rng(seed)
        counts = TurnCounts.observed(rng.integers(1, int(turns) + 2, size=50).astype(float))
    else:
        counts = TurnCounts.uniform(turns, spread)
    got = offline_ttft(agents, t_max, floor, decode, counts)
    for value, (lo, hi) in ((got.whole_run_s, (0.0, 1.0)), (got.span_s, (0.1, 0.5))):
        want = _ttft_by_turns(agents, t_max, floor, decode, counts, lo, hi)
        assert value == pytest.approx(want, rel=2e-3, abs=1e-6)
    flat = offline_ttft(agents, t_max, floor, decode, TurnCounts.uniform(turns, 0.0))
    all_running = max(agents / t_max - decode, floor)
    assert flat.whole_run_s == pytest.approx(all_running, rel=1e-12)
    assert flat.span_s == pytest.approx(all_running, rel=1e-12)


def test_size_gives_both_offline_ttfts(registry) -> None:
    """INV-84: ``size`` gives the offline TTFT over the whole run (``ttft_s``) and over the
    saturated span (``ttft_span_s``), the closed system's at the agents still running: on the
    README default (turn counts uniform on 0 to 314, agents leaving all along) both are below
    the wait while all 2,048 run, the whole run's the lowest (the drain's turns wait little)."""
    sc = _ds660(registry)
    o = evaluate_mode(sc, "dualpath", ServingConfig(agents=2048))
    gen = sc.workload.generated_tokens
    all_running = 2048 / o.throughput_turns_per_s - gen * o.tpot_s - sc.workload.tool_latency_s
    assert 0 < o.ttft_s < o.ttft_span_s < all_running
