"""Issue 4: the two-path model, closed form vs LP, bounds, and the CLI."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualpath_plan.physics.links import (
    LINK_INDEX,
    LINKS,
    SIDE_FIELDS,
    Cluster,
    Demand,
    PathOptions,
    SideCaps,
    turn_loads,
)
from dualpath_plan.plan import Scenario
from dualpath_plan.solvers.closed_form import solve
from dualpath_plan.solvers.lp import LPProblem, solve_lp

rate = st.floats(1e9, 1e12)


@st.composite
def clusters(draw):  # random homogeneous clusters and demands
    def side():
        return SideCaps(
            **{f: np.float64(draw(rate) * (1e3 if f == "compute" else 1.0)) for f in SIDE_FIELDS}
        )

    cluster = Cluster(
        prefill_nodes=np.float64(draw(st.integers(1, 64))),
        decode_nodes=np.float64(draw(st.integers(1, 64))),
        pe=side(),
        de=side(),
        decode_tokens_per_s=np.float64(draw(st.floats(1e3, 1e7))),
        storage_read=np.float64(draw(st.sampled_from([math.inf, 1e12, 1e13]))),
        storage_write=np.float64(math.inf),
    )
    hit = draw(st.floats(1e8, 1e10))
    demand = Demand(
        hit_bytes=np.float64(hit),
        miss_bytes=np.float64(hit * draw(st.floats(0, 0.1))),
        generated_kv_bytes=np.float64(hit * draw(st.floats(0, 0.05))),
        append_writeback_bytes=np.float64(hit * draw(st.floats(0, 0.05))),
        prefill_flops=np.float64(draw(st.floats(1e12, 1e15))),
        generated_tokens=np.float64(draw(st.floats(1, 2000))),
    )
    return cluster, demand


@settings(max_examples=80, deadline=None)
@given(case=clusters(), mode=st.sampled_from(["basic", "even", "dualpath", "oracle"]))
def test_lp_equals_closed_form(case, mode) -> None:
    cluster, demand = case
    cf = solve(cluster, demand, mode)
    lp = solve_lp(LPProblem.from_cluster(cluster, demand), mode)
    assert lp.throughput_turns_per_s == pytest.approx(float(cf.throughput_turns_per_s), rel=1e-6)
    tol = 1e-6
    assert float(cf.split_low) - tol <= lp.decode_path_fraction <= float(cf.split_high) + tol
    # The most utilized link in the closed form is binding in the LP too.
    assert lp.utilization(cf.bottleneck_name()) == pytest.approx(1.0, abs=1e-6)


@settings(max_examples=80, deadline=None)
@given(case=clusters())
def test_mode_ordering_and_split_range(case) -> None:
    cluster, demand = case
    t = {
        m: float(solve(cluster, demand, m).throughput_turns_per_s)
        for m in ("basic", "even", "dualpath", "oracle")
    }
    assert t["dualpath"] >= max(t["basic"], t["even"]) * (1 - 1e-12)
    assert t["dualpath"] <= t["oracle"] * (1 + 1e-12)
    x = float(solve(cluster, demand, "dualpath").decode_path_fraction)
    assert 0.0 <= x <= 1.0
    for m in t:
        assert math.isfinite(t[m]) and t[m] > 0


@settings(max_examples=60, deadline=None)
@given(
    case=clusters(),
    field=st.sampled_from(SIDE_FIELDS),
    side=st.sampled_from(["pe", "de"]),
    factor=st.floats(1.0, 10.0),
)
def test_throughput_never_falls_when_a_capacity_rises(case, field, side, factor) -> None:
    cluster, demand = case
    before = float(solve(cluster, demand, "dualpath").throughput_turns_per_s)
    caps = getattr(cluster, side)
    bigger = replace(cluster, **{side: replace(caps, **{field: getattr(caps, field) * factor})})
    after = float(solve(bigger, demand, "dualpath").throughput_turns_per_s)
    assert after >= before * (1 - 1e-12)


@settings(max_examples=60, deadline=None)
@given(case=clusters(), x=st.floats(0, 1))
def test_bytes_conserved_on_each_path(case, x) -> None:
    _, d = case
    a, b = turn_loads(d)
    load = {n: float(a[i] + b[i] * x) for i, n in enumerate(LINKS)}
    H, Mi = float(d.hit_bytes), float(d.miss_bytes)
    wb = float(d.generated_kv_bytes + d.append_writeback_bytes)
    assert load["pe_snic_read"] + load["de_snic_read"] == pytest.approx(H)
    assert load["storage_read"] == pytest.approx(H)
    assert load["pe_gpu_pcie_h2d"] == pytest.approx(H)  # all hit KV reaches PE HBM
    assert load["de_gpu_pcie_h2d"] == pytest.approx(H + Mi)  # the whole prompt reaches DE HBM
    assert load["pe_cnic_net_send"] == pytest.approx(load["de_cnic_net_recv"])
    assert load["de_cnic_net_send"] == pytest.approx(load["pe_cnic_net_recv"])
    assert load["storage_write"] == pytest.approx(load["de_snic_write"]) == pytest.approx(wb)
    # DRAM: every byte written into a buffer is read out of it.
    pe_in = load["pe_snic_read"]
    assert load["pe_dram"] == pytest.approx(2 * pe_in)


def test_storage_bound_speedup_is_p_plus_d_over_p() -> None:
    # Only SNICs limit: dualpath/basic = (P+D)/P (paper section 2.3).
    big = np.float64(1e18)
    for P, D in [(1, 1), (1, 2), (2, 1), (2, 4)]:
        caps = SideCaps(**{f: big for f in SIDE_FIELDS})
        caps = replace(caps, snic_read=np.float64(50e9))
        cluster = Cluster(
            np.float64(P),
            np.float64(D),
            caps,
            caps,
            np.float64(1e18),
            np.float64(math.inf),
            np.float64(math.inf),
        )
        demand = Demand(*(np.float64(v) for v in (1.3e9, 0.0, 0.0, 0.0, 6e13, 176.0)))
        ratio = float(solve(cluster, demand, "dualpath").throughput_turns_per_s) / float(
            solve(cluster, demand, "basic").throughput_turns_per_s
        )
        assert ratio == pytest.approx((P + D) / P, rel=1e-9)
        assert float(solve(cluster, demand, "dualpath").decode_path_fraction) == pytest.approx(
            D / (P + D)
        )


def test_paper_bounds_for_the_testbed(cli) -> None:
    data = cli("bounds", "--node", "dualpath-hopper", "--paper-assumptions", "--json").json()
    assert data["pd_min"] == pytest.approx(1 / 7)
    assert data["pd_max"] == pytest.approx(7 / 2)
    assert data["binding_lower"] == "pe_cnic_pcie_write"
    assert data["binding_upper"] in ("de_dram", "de_cnic_pcie_write")
    # At SNIC line rate (the calibrated profile reads at about half of it), miss KV and
    # write-back add DE DRAM traffic and lower the upper bound.
    ext = cli(
        "bounds", "--node", "dualpath-hopper", "--set", "node.snic_efficiency=1", "--json"
    ).json()
    assert ext["pd_max"] < 3.5
    assert ext["shift_vs_paper_assumptions"]["pd_max"] < 0


@settings(max_examples=40, deadline=None)
@given(g=st.integers(2, 16), s_count=st.integers(1, 4), dram=st.floats(100, 2000))
def test_bounds_follow_equation_9(registry, g, s_count, dram) -> None:
    node = registry.node("dualpath-hopper").model_copy(
        update={"gpus_per_node": g, "cnic_count": g, "snic_count": s_count, "dram_gbyte_s": dram}
    )
    sc = Scenario.from_ids(registry, options=PathOptions.paper(), storage=None)
    sc = replace(sc, prefill_node=node, decode_node=node)
    b = sc.bounds()
    s, B, M = float(s_count), 50.0, dram
    if 2 * s > g or 2 * s * B > M:  # eq. (1), or PE DRAM 2sB <= M, fails at any ratio
        assert b.violated[0]
        return
    lower = s / (g - s) if g > s else math.inf
    upper = min((g - 2 * s) / s, (g - s) / (2 * s), (M / (B * s) - 3) / 2)
    assert float(b.pd_min) == pytest.approx(lower, rel=1e-9)
    if upper > 0:
        assert float(b.pd_max) == pytest.approx(upper, rel=1e-9)


def test_heterogeneous_lp(cli) -> None:
    data = cli(
        "paths",
        "--model",
        "deepseek-v3.2",
        "--prefill-group",
        "dualpath-hopper:2",
        "--decode-group",
        "dgx-b200:2",
        "--decode-group",
        "dualpath-hopper:2",
        "--class",
        "paper-64k:3",
        "--class",
        "paper-32k:1",
        "--json",
    ).json()
    assert data["throughput_turns_per_s"] > 0
    assert {s["class"] for s in data["splits"]} == {"paper-64k", "paper-32k"}
    assert all(0 <= s["decode_path_fraction"] <= 1 for s in data["splits"])
    assert data["binding"]


def test_heterogeneous_lp_beats_or_equals_homogeneous_groups(registry) -> None:
    from dualpath_plan.plan import heterogeneous_problem

    one = heterogeneous_problem(
        registry,
        model="deepseek-v3.2",
        classes=[("paper-64k", 1)],
        prefill_groups=[("dualpath-hopper", 2)],
        decode_groups=[("dualpath-hopper", 4)],
        storage="3fs",
    )
    sc = Scenario.from_ids(registry)
    cluster, _ = sc.cluster()
    t_cf = float(solve(cluster, sc.demand, "dualpath").throughput_turns_per_s)
    assert solve_lp(one, "dualpath").throughput_turns_per_s == pytest.approx(t_cf, rel=1e-6)


def test_paths_cli_json(cli) -> None:
    data = cli("paths", "--json").json()
    assert {ln["name"] for ln in data["links"]} == set(LINKS)
    assert data["bottleneck"] in LINKS
    assert 0 <= data["decode_path_fraction"] <= 1
    assert data["throughput_turns_per_s"] == pytest.approx(
        data["lp_throughput_turns_per_s"], rel=1e-6
    )
    text = cli("paths").out
    assert "binding" in text and "PE path" in text and "DE path" in text
    assert LINK_INDEX["pe_snic_read"] == 0


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (("-P", "0"), "at least one node"),
        (("-D", "0"), "at least one node"),
        (("--model", "deepseek-v3.2", "-P", "1", "-D", "1"), "do not fit"),
        (("--set", "node.snic_gbit_s=0"), "greater than or equal to 0.000000001"),
        (("--set", "node.cnic_gbit_s=nan"), "finite"),
        (("--mode", "fast"), "--mode"),
        (("--prefill-group", "dualpath-hopper:x"), "NODE:COUNT"),
        (("--scheduler", "magic"), "--scheduler"),
    ],
)
def test_paths_bad_input(cli, args, expect) -> None:
    result = cli("paths", *args)
    assert result.code == 2, result.err
    assert expect in result.err
    assert "Traceback" not in result.err and result.err.count("\n") == 1


def test_scheduler_imbalance_derates(cli) -> None:
    ideal = cli("paths", "--json").json()["throughput_turns_per_s"]
    rr = cli("paths", "--scheduler", "round_robin", "--json").json()["throughput_turns_per_s"]
    qa = cli("paths", "--scheduler", "queue_aware", "--json").json()["throughput_turns_per_s"]
    assert rr < qa < ideal
    # More requests in flight per engine: less imbalance.
    rr64 = cli("paths", "--scheduler", "round_robin", "--requests-per-engine", "64", "--json")
    assert rr < rr64.json()["throughput_turns_per_s"] <= ideal
    assert cli("paths", "--scheduler", "round_robin", "--load-cv", "-1").code == 2


def test_solvers_accept_the_abstract_workload_form(registry) -> None:
    from dualpath_plan.physics.workload import abstract_turn_demand

    sc = Scenario.from_ids(registry)
    abstract = abstract_turn_demand(
        gb_per_pflop=sc.turn_demand.gb_per_pflop,
        context_tokens=32721,
        append_tokens=429,
        generated_tokens=176,
        kv_bytes_per_token=40016,
        trajectory_turns=sc.turn_demand.trajectory_turns,
    )
    result = replace(sc, turn_demand=abstract).solve(("basic", "dualpath"))
    concrete = sc.solve(("basic", "dualpath"))
    for mode in ("basic", "dualpath"):
        # Same bytes per turn and the same ratio: the same I/O-bound throughput.
        assert float(result.closed_form[mode].throughput_turns_per_s) == pytest.approx(
            float(concrete.closed_form[mode].throughput_turns_per_s), rel=0.02
        )


def test_closed_form_is_vectorized(registry) -> None:
    sc = Scenario.from_ids(registry)
    cluster, _ = sc.cluster()
    snic = np.array([25e9, 50e9, 100e9, 200e9])
    P = np.array([1.0, 2.0, 3.0, 4.0])
    batch = replace(
        cluster,
        prefill_nodes=P,
        pe=replace(cluster.pe, snic_read=snic),
        de=replace(cluster.de, snic_read=snic),
    )
    many = solve(batch, sc.demand, "dualpath")
    for k in range(4):
        one = replace(
            cluster,
            prefill_nodes=np.float64(P[k]),
            pe=replace(cluster.pe, snic_read=np.float64(snic[k])),
            de=replace(cluster.de, snic_read=np.float64(snic[k])),
        )
        single = solve(one, sc.demand, "dualpath")
        assert float(many.throughput_turns_per_s[k]) == pytest.approx(
            float(single.throughput_turns_per_s), rel=1e-12
        )
        assert float(many.decode_path_fraction[k]) == pytest.approx(
            float(single.decode_path_fraction), abs=1e-12
        )


def test_bounds_without_cached_context_is_a_clear_error(cli) -> None:
    result = cli("bounds", "--set", "workload.context_tokens=0", "--json")
    assert result.code == 2 and "context_tokens" in result.err


def test_each_term_switches_to_the_papers_assumption(cli) -> None:
    from dualpath_plan.physics.links import PathOptions

    terms = list(PathOptions.__dataclass_fields__)
    all_off = []
    for t in terms:
        all_off += ["--paper-term", t]
    every = cli("bounds", *all_off, "--json").json()
    paper = cli("bounds", "--paper-assumptions", "--json").json()
    assert (every["pd_min"], every["pd_max"]) == (paper["pd_min"], paper["pd_max"])
    # One term at a time moves the extended bounds (efficiencies move both).
    ext = cli("bounds", "--json").json()
    no_miss = cli("bounds", "--paper-term", "miss_kv", "--json").json()
    assert no_miss["pd_max"] > ext["pd_max"]  # miss KV loads the DE DRAM
    assert cli("paths", "--paper-term", "writeback", "--json").code == 0
    assert cli("bounds", "--paper-term", "nope").code == 2
