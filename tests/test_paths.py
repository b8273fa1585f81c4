"""Issue 4: the two-path model, closed form vs LP, bounds, and the CLI."""

from __future__ import annotations

import math
import os
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualpath_plan.outcomes.paths import bottleneck_free_range
from dualpath_plan.physics.engines import Scheduling
from dualpath_plan.physics.links import (
    LINK_INDEX,
    LINK_TABLE,
    LINKS,
    Demand,
    PathOptions,
    turn_load_columns,
    turn_loads,
)
from dualpath_plan.physics.modes import MODE_TABLE
from dualpath_plan.profiles.registry import Overrides
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.assemble import LinkSet, assemble, read_share
from dualpath_plan.solvers.closed_form import solve
from dualpath_plan.solvers.lp import Group, LPClass, LPProblem, solve_lp

rate = st.floats(1e9, 1e12)
SPLITS = {"basic": "pe_only", "even": "even", "dualpath": "optimal", "oracle": "pe_only"}


@st.composite
def clusters(draw):  # random homogeneous clusters and demands, as the solvers read them
    P = float(draw(st.integers(1, 64)))
    D = float(draw(st.integers(1, 64)))
    per_node = {}
    for k in LINK_TABLE:
        if k.side == "storage":
            per_node[k.name] = draw(st.sampled_from([math.inf, 1e12, 1e13]))
        elif k.name == "pe_prefill_batch":
            per_node[k.name] = draw(st.sampled_from([math.inf, draw(st.floats(1, 1e3))]))
        elif k.name == "de_decode":
            per_node[k.name] = draw(st.floats(1e3, 1e7)) / D
        elif k.reads_storage and k.resource == "storage_client_read":
            per_node[k.name] = draw(st.sampled_from([math.inf, draw(rate)]))
        else:
            per_node[k.name] = draw(rate) * (1e3 if k.unit == "FLOP" else 1.0)
    hit = draw(st.floats(1e8, 1e10))
    demand = Demand(
        hit_bytes=np.float64(hit),
        miss_bytes=np.float64(hit * draw(st.floats(0, 0.1))),
        generated_kv_bytes=np.float64(hit * draw(st.floats(0, 0.05))),
        append_writeback_bytes=np.float64(hit * draw(st.floats(0, 0.05))),
        prefill_flops=np.float64(draw(st.floats(1e12, 1e15))),
        generated_tokens=np.float64(draw(st.floats(1, 2000))),
    )
    nodes = {"pe": P, "de": D, "storage": 1.0}
    capacity = {k.name: np.float64(per_node[k.name] * nodes[k.side]) for k in LINK_TABLE}
    return capacity, demand, P, D


def link_set(case, mode: str) -> LinkSet:
    capacity, demand, _, _ = case
    load = turn_load_columns(demand)
    if MODE_TABLE[mode].io_free:
        load = {k: ((0.0, 0.0) if LINK_TABLE[LINK_INDEX[k]].io else v) for k, v in load.items()}
    split = SPLITS[mode]
    return LinkSet(load, capacity, split, read_share(capacity) if split == "even" else 0.0)  # type: ignore[arg-type]


def lp_problem(case, mode: str) -> LPProblem:
    links = link_set(case, mode)
    capacity, demand, P, D = case
    side = lambda s: {k.name: float(capacity[k.name]) for k in LINK_TABLE if k.side == s}  # noqa: E731
    load = {k: (float(a), float(b)) for k, (a, b) in links.load.items()}
    return LPProblem(
        prefill=[Group("prefill", "pe", P, [side("pe")])],
        decode=[Group("decode", "de", D, [side("de")])],
        classes=[LPClass("all", 1.0, load, float(demand.hit_bytes))],
        shared=side("storage"),
        split=links.split,
    )


@settings(max_examples=int(os.environ.get("LP_EXAMPLES", "80")), deadline=None)
@given(case=clusters(), mode=st.sampled_from(["basic", "even", "dualpath", "oracle"]))
def test_lp_equals_closed_form(case, mode) -> None:
    cf = solve(link_set(case, mode))
    lp = solve_lp(lp_problem(case, mode))
    assert lp.throughput_turns_per_s == pytest.approx(float(cf.throughput_turns_per_s), rel=1e-6)
    tol = 1e-6
    assert float(cf.split_low) - tol <= lp.decode_path_fraction <= float(cf.split_high) + tol
    # The same links bind in both (ties included) wherever the LP can tell: every other link
    # is further from binding than ten times the LP's resolution.
    assert_same_binding(cf, lp)


def assert_same_binding(cf, lp, index=()) -> None:
    from dualpath_plan.solvers.lp import LP_TIGHT_REL

    u = np.asarray(cf.utilization)[index]
    tight = cf.binding(index)
    others = [v for n, v in zip(LINKS, u, strict=True) if n not in tight]
    if max(others, default=0.0) < u.max() * (1 - 10 * LP_TIGHT_REL):
        assert lp.binding() == tight


@settings(max_examples=80, deadline=None)
@given(case=clusters())
def test_mode_ordering_and_split_range(case) -> None:
    t = {m: float(solve(link_set(case, m)).throughput_turns_per_s) for m in SPLITS}
    assert t["dualpath"] >= max(t["basic"], t["even"]) * (1 - 1e-12)
    assert t["dualpath"] <= t["oracle"] * (1 + 1e-12)
    x = float(solve(link_set(case, "dualpath")).decode_path_fraction)
    assert 0.0 <= x <= 1.0
    for m in t:
        assert math.isfinite(t[m]) and t[m] > 0


@settings(max_examples=60, deadline=None)
@given(
    case=clusters(),
    name=st.sampled_from(LINKS),
    factor=st.floats(1.0, 10.0),
    mode=st.sampled_from(["basic", "dualpath", "oracle"]),
)
def test_throughput_never_falls_when_a_capacity_rises(case, name, factor, mode) -> None:
    # Every mode whose split is fixed (basic, oracle) or chosen for the capacities (dualpath).
    before = float(solve(link_set(case, mode)).throughput_turns_per_s)
    capacity, demand, P, D = case
    bigger = ({**capacity, name: capacity[name] * factor}, demand, P, D)
    after = float(solve(link_set(bigger, mode)).throughput_turns_per_s)
    assert after >= before * (1 - 1e-12)


def test_even_can_fall_when_a_read_capacity_rises() -> None:
    # even's split is the DE side's share of read capacity (the paper's assumption), not the
    # best split: more read capacity on the DE side moves reads there even when the DE side's
    # DRAM then binds. The exception to INV-5, stated; dualpath never falls.
    from dualpath_plan.profiles.registry import Registry
    from dualpath_plan.scenario.assemble import assemble
    from dualpath_plan.scenario.bundle import Scenario
    from dualpath_plan.scenario.spec import DEFAULT_SPEC

    registry = Registry.load()
    spec = DEFAULT_SPEC.with_(
        model="ds-27b", prefill_node="dualpath-hopper", decode_node="dgx-b200"
    )
    spec = spec.with_(prefill_nodes=1, decode_nodes=1)

    def throughput(mode: str, client_gbyte_s: float) -> float:
        reg = replace(
            registry,
            overrides=registry.overrides.merged(
                Overrides.parse(
                    ["node.dram_gbyte_s=20", f"storage.max_client_read_gbyte_s={client_gbyte_s}"]
                )
            ),
        )
        sc = Scenario.from_spec(reg, spec)
        return float(solve(assemble(sc, mode, 1, 1).links).throughput_turns_per_s)

    assert throughput("even", 50) < throughput("even", 20)
    assert throughput("dualpath", 50) >= throughput("dualpath", 20)


@settings(max_examples=60, deadline=None)
@given(case=clusters(), x=st.floats(0, 1))
def test_bytes_conserved_on_each_path(case, x) -> None:
    _, d, _, _ = case
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
    # DRAM: a buffer's link carries what is written into it and what is read out, and every
    # byte written is read out. PE: the SNIC writes the hit KV, the CNIC reads it once.
    pe_in = load["pe_snic_read"]
    assert load["pe_dram"] == pytest.approx(2 * pe_in)
    # DE: written by its SNIC (the DE path's hit), the compute network (the PE path's hit and
    # the miss, from the prefill node) and the GPU (generated KV); read out into the decode
    # HBM (the whole prompt), to the compute network (the DE path's hit, for the prefill GPU)
    # and to storage (the write-back). The DE path's hit is read twice (both HBMs), the
    # appended KV twice (HBM and storage): reads exceed writes by exactly those.
    de_in = load["de_snic_read"] + load["de_cnic_net_recv"] + load["de_gpu_pcie_d2h"]
    de_out = load["de_gpu_pcie_h2d"] + load["de_cnic_net_send"] + load["de_snic_write"]
    assert load["de_dram"] == pytest.approx(de_in + de_out)
    assert de_out - de_in == pytest.approx(H * x + float(d.append_writeback_bytes), abs=1e-6 * H)


def test_storage_bound_speedup_is_p_plus_d_over_p() -> None:
    # Only SNICs limit: dualpath/basic = (P+D)/P (paper section 2.3).
    demand = Demand(*(np.float64(v) for v in (1.3e9, 0.0, 0.0, 0.0, 6e13, 176.0)))
    load = turn_load_columns(demand)
    for P, D in [(1, 1), (1, 2), (2, 1), (2, 4)]:
        capacity = {k: np.float64(math.inf) for k in LINKS}
        capacity |= {"pe_snic_read": np.float64(50e9 * P), "de_snic_read": np.float64(50e9 * D)}
        dual = solve(LinkSet(load, capacity, "optimal"))
        basic = solve(LinkSet(load, capacity, "pe_only"))
        ratio = float(dual.throughput_turns_per_s) / float(basic.throughput_turns_per_s)
        assert ratio == pytest.approx((P + D) / P, rel=1e-9)
        assert float(dual.decode_path_fraction) == pytest.approx(D / (P + D))
        # Both sides' storage reads are saturated: both are named.
        assert dual.binding() == ["pe_snic_read", "de_snic_read"]


def test_paper_assumptions_mean_balanced_reads(cli) -> None:
    """Issue 31: eq. (9)'s bounds assume balanced reads, one of the paper's assumptions:
    --paper-assumptions alone gives 1/7 and 7/2 exactly (it gave 0.1532 and 3.265, the
    queue-aware imbalance applied); --scheduler still chooses another: round robin's imbalance
    narrows them, the queue-aware scheduler's (balanced GPUs, nodes within 1 + 1/k alike on
    both sides) leaves them."""
    data = cli("bounds", "--node", "dualpath-hopper", "--paper-assumptions", "--json").json()
    assert data["scheduler"] == "ideal"
    assert data["pd_min"] == 1 / 7 and data["pd_max"] == 7 / 2
    dealt = cli(
        "bounds", "--node", "dualpath-hopper", "--paper-assumptions", "--scheduler",
        "round_robin", "--json",
    ).json()  # fmt: skip
    assert dealt["scheduler"].startswith("round_robin") and dealt["pd_min"] > 1 / 7
    assert dealt["pd_max"] < 7 / 2
    queued = cli(
        "bounds", "--node", "dualpath-hopper", "--paper-assumptions", "--scheduler",
        "queue_aware", "--json",
    ).json()  # fmt: skip
    assert queued["pd_min"] == pytest.approx(1 / 7) and queued["pd_max"] == pytest.approx(7 / 2)


def test_node_with_both_sides_named_is_refused(cli) -> None:
    """Issue 31: --node beside --prefill-node and --decode-node sets nothing; it was ignored
    silently (size, bounds); one line naming --node, exit 2. One side named with --node is
    the other side, as before."""
    for command in ("size", "bounds", "paths"):
        r = cli(command, "--prefill-node", "dgx-b200", "--decode-node", "dgx-h200",
                "--node", "dgx-h100")  # fmt: skip
        assert r.code == 2 and "--node" in r.err and len(r.err.strip().splitlines()) == 1
    ok = cli("bounds", "--prefill-node", "dgx-b200", "--node", "dgx-h100", "--json")
    assert ok.code == 0, ok.err


def test_paper_bounds_for_the_testbed(cli) -> None:
    # Eq. (9) assumes perfectly balanced reads: the ideal scheduler.
    args = ("bounds", "--node", "dualpath-hopper", "--paper-assumptions", "--scheduler", "ideal")
    data = cli(*args, "--json").json()
    assert data["scheduler"] == "ideal"
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
    sc = Scenario.from_ids(
        registry, options=PathOptions.paper(), storage=None, scheduling=Scheduling("ideal")
    )
    sc = replace(sc, prefill_node=node, decode_node=node)
    b = bottleneck_free_range(sc)
    s, B, M = float(s_count), 50.0, dram
    if 2 * s > g or 2 * s * B > M:  # eq. (1), or PE DRAM 2sB <= M, fails at any ratio
        assert b.violated[0]
        return
    lower = s / (g - s) if g > s else math.inf
    upper = min((g - 2 * s) / s, (g - s) / (2 * s), (M / (B * s) - 3) / 2)
    assert float(b.pd_min) == pytest.approx(lower, rel=1e-9)
    if upper > 0:
        assert float(b.pd_max) == pytest.approx(upper, rel=1e-9)


def test_no_split_inside_the_bounds_has_an_io_link_binding(cli) -> None:
    # bounds took the paper's balanced reads while every solver derates by the scheduler's
    # imbalance: recommend marked 2P28D bottleneck-free with pe_cnic_pcie_write binding there
    # (found in a trial). Compute, HBM and decode relaxed, so that the I/O links show.
    from dualpath_plan.solvers.bounds import BOUND_LINKS

    relax = ("--set", "gpu.fp8_dense_tflops=100000", "--set", "gpu.hbm_tbyte_s=100",
             "--set", "gpu.hbm_gbyte=1000")  # fmt: skip
    for extra in ((), ("--paper-assumptions",)):
        data = cli(*relax, "recommend", "--budget-nodes", "30", *extra, "--json").json()
        marked = [c for c in data["candidates"] if c["bottleneck_free"]]
        assert marked, extra
        for c in marked:
            binding = c["modes"]["dualpath"]["binding"]
            assert not set(binding) & set(BOUND_LINKS), (extra, c["prefill_nodes"], binding)


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
    assert data["saturated_turns_per_s"] > 0
    assert {s["class"] for s in data["splits"]} == {"paper-64k", "paper-32k"}
    assert all(0 <= s["decode_path_fraction"] <= 1 for s in data["splits"])
    assert data["binding"]


def test_one_group_lp_equals_the_closed_form_of_size(registry) -> None:
    # The mixed-cluster LP with the scenario's own groups and class is size's problem.
    from dualpath_plan.outcomes.paths import explain_mixed
    from dualpath_plan.outcomes.serving import saturated

    sc = Scenario.from_ids(registry)
    mixed = explain_mixed(
        registry,
        sc,
        "dualpath",
        [("dualpath-hopper", 2)],
        [("dualpath-hopper", 4)],
        [("paper-64k", 1)],
    )
    t_cf = float(saturated(sc, "dualpath", 2.0, 4.0).solution.throughput_turns_per_s)
    assert mixed.solution.throughput_turns_per_s == pytest.approx(t_cf, rel=1e-6)


def test_paths_cli_json(cli) -> None:
    data = cli("paths", "--json").json()
    assert {ln["name"] for ln in data["links"]} == set(LINKS)
    assert set(data["binding"]) <= set(LINKS) and data["binding"]
    assert set(data["limits"]) == set(LINKS)
    assert 0 <= data["decode_path_fraction"] <= 1
    assert data["saturated_turns_per_s"] == pytest.approx(
        data["lp_saturated_turns_per_s"], rel=1e-6
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
    ideal = cli("paths", "--scheduler", "ideal", "--json").json()["saturated_turns_per_s"]
    rr = cli("paths", "--scheduler", "round_robin", "--json").json()["saturated_turns_per_s"]
    qa = cli("paths", "--scheduler", "queue_aware", "--json").json()["saturated_turns_per_s"]
    assert rr < qa < ideal
    # More requests in flight per engine: less imbalance.
    rr64 = cli("paths", "--scheduler", "round_robin", "--requests-per-engine", "64", "--json")
    assert rr < rr64.json()["saturated_turns_per_s"] <= ideal
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
    for mode in ("basic", "dualpath"):
        # Same bytes per turn and the same ratio: the same I/O-bound throughput.
        a = solve(assemble(replace(sc, turn_demand=abstract), mode, 2.0, 4.0).links)
        c = solve(assemble(sc, mode, 2.0, 4.0).links)
        assert float(a.throughput_turns_per_s) == pytest.approx(
            float(c.throughput_turns_per_s), rel=0.02
        )


def test_closed_form_is_vectorized(registry) -> None:
    sc = Scenario.from_ids(registry)
    P = np.array([1.0, 2.0, 3.0, 4.0, 2.0])
    D = np.array([1.0, 4.0, 2.0, 8.0, 4.0])
    many = solve(assemble(sc, "dualpath", P, D).links)
    for k in range(P.size):
        single = solve(assemble(sc, "dualpath", P[k], D[k]).links)
        assert float(many.throughput_turns_per_s[k]) == pytest.approx(
            float(single.throughput_turns_per_s), rel=1e-12
        )
        assert float(many.decode_path_fraction[k]) == pytest.approx(
            float(single.decode_path_fraction), abs=1e-12
        )
        assert many.binding((k,)) == single.binding()


def test_bounds_without_cached_context_is_a_clear_error(cli) -> None:
    result = cli("bounds", "--set", "workload.context_tokens=0", "--json")
    assert result.code == 2 and "context_tokens" in result.err


def test_each_term_switches_to_the_papers_assumption(cli) -> None:
    from dualpath_plan.physics.links import PathOptions

    terms = list(PathOptions.__dataclass_fields__)
    all_off = []
    for t in terms:
        all_off += ["--paper-term", t]
    # Every term switched, and the balanced reads --paper-assumptions takes with them.
    every = cli("bounds", *all_off, "--scheduler", "ideal", "--json").json()
    paper = cli("bounds", "--paper-assumptions", "--json").json()
    assert (every["pd_min"], every["pd_max"]) == (paper["pd_min"], paper["pd_max"])
    # One term at a time moves the extended bounds (efficiencies move both).
    ext = cli("bounds", "--json").json()
    no_miss = cli("bounds", "--paper-term", "miss_kv", "--json").json()
    assert no_miss["pd_max"] > ext["pd_max"]  # miss KV loads the DE DRAM
    assert cli("paths", "--paper-term", "writeback", "--json").code == 0
    assert cli("bounds", "--paper-term", "nope").code == 2


def test_paths_refuses_a_cluster_for_sizes_reason(cli) -> None:
    # paths said only "the cluster sustains no turns" where size names the prefill GPU's
    # missing HBM (found in a trial): one set of checks for every outcome of a cluster.
    size = cli("size", "--model", "kimi-k2")
    paths = cli("paths", "--model", "kimi-k2")
    assert size.code == paths.code == 2
    assert "cannot hold" in paths.err and "add prefill nodes" in paths.err
    # A shortfall is said as one, not as "leave -10.4 GB".
    assert "exceed its HBM by 10.4 GB" in paths.err and "leave -" not in paths.err


@pytest.mark.parametrize(
    ("command", "args", "expect"),
    [
        # Options that another one given with them replaced were silently ignored.
        ("paths", ("-P", "3", "--prefill-group", "dgx-h100:2"), "--prefill-group replaces -P"),
        ("paths", ("--decode-node", "dgx-h100", "--decode-group", "dgx-h100"), "--decode-node"),
        (
            "paths",
            ("--node", "dgx-h100", "--prefill-group", "dgx-h100", "--decode-group", "dgx-h100"),
            "--prefill-group replaces --node",
        ),
        ("paths", ("--workload", "paper-32k", "--class", "paper-64k:1"), "--class replaces"),
        ("bounds", ("--paper-assumptions", "--paper-term", "miss_kv"), "give --paper-term without"),
        ("size", ("--paper-assumptions", "--paper-term", "writeback"), "give --paper-term without"),
        (
            "recommend",
            ("--budget-nodes", "6", "--prefill-node-cost", "2"),
            "weighs nodes against --budget-cost, not given",
        ),
        # ... and options the command does not use (found in a trial: each was ignored).
        ("size", ("--target-aps", "0.4", "-P", "7"), "--target-aps searches for the cluster"),
        ("size", ("--deadline", "5000", "-D", "9"), "--deadline searches for the cluster"),
        ("size", ("--max-nodes", "8"), "bounds the search of --target-aps or --deadline"),
        ("simulate", ("--aps", "0.1", "--agents", "5"), "--aps runs online"),
        ("paths", ("--agents", "3"), "No such option: --agents"),
        ("paths", ("--ttft-slo", "1"), "No such option: --ttft-slo"),
    ],
)
def test_an_option_another_replaces_is_refused(cli, command, args, expect) -> None:
    result = cli(command, *args)
    assert result.code == 2, result.out
    assert expect in result.err and "Traceback" not in result.err


def test_node_gives_the_side_without_a_group(cli) -> None:
    """--node still gives the side that has no group: not a contradiction."""
    result = cli("paths", "--node", "dgx-h100", "--decode-group", "dgx-h100:2", "--json")
    assert result.code == 0, result.err
    assert "dgx-h100" in result.out


def test_bounds_shift_only_between_two_ranges(cli) -> None:
    """Where the paper's assumptions leave no bottleneck-free ratio, the extended terms do not
    'move the bounds by -inf and +inf' (found in a trial): no shift, the empty range said."""
    args = ("bounds", "--speed-of-light", "--set", "node.snic_gbit_s=3200")
    text = cli(*args).out
    assert "inf" not in text and "paper assumptions: no ratio is bottleneck-free" in text
    data = cli(*args, "--json").json()
    assert data["feasible"] and data["shift_vs_paper_assumptions"] == {
        "pd_min": None,
        "pd_max": None,
    }
    default = cli("bounds", "--json").json()["shift_vs_paper_assumptions"]
    assert default["pd_min"] < 0 < default["pd_max"]


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("sweep", "--grid", "P=2:3", "--mode", "basic", "--mode", "oracle"), "--mode"),
        (("size", "-P", "2", "-P", "3"), "-P"),
        (("size", "-P2", "--prefill-nodes=3"), "-P"),
        (("profiles", "show", "dgx-h100", "--kind", "node", "--kind", "gpu"), "--kind"),
    ],
)
def test_an_option_of_one_value_given_twice_is_refused(cli, args, flag) -> None:
    """The parser kept the last value and dropped the others silently (sweep --mode basic
    --mode oracle ran oracle alone: found in a trial); repeatable options and flags repeat."""
    result = cli(*args)
    assert result.code == 2 and f"field '{flag}': given twice" in result.err, result.err
    assert cli("--set", "node.snic_gbit_s=200", "size", "--set", "gpu.hbm_gbyte=90").code == 0
    assert cli("size", "--json", "--json").code == 0
