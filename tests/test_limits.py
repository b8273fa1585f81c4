"""Issue 12, items 3 and 4: model limits (the context window, a decode batch of one) and the
headroom a planner keeps (``--max-utilization``)."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualpath_plan.errors import PlanInputError
from dualpath_plan.outcomes.serving import evaluate_mode
from dualpath_plan.outcomes.sizing import smallest_cluster
from dualpath_plan.physics.modes import REPORT_MODES
from dualpath_plan.profiles.registry import Overrides, Registry
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.feasibility import check_feasible
from dualpath_plan.scenario.spec import ServingConfig
from tests.conftest import copy_profile

# --- the context window --------------------------------------------------------------------


def one_line_error(result) -> str:
    """A bad input: exit 2, one printable line on stderr, nothing on stdout, no traceback."""
    assert result.code == 2, (result.code, result.out, result.err)
    assert result.out == ""
    assert result.err.startswith("error: ") and result.err.count("\n") == 1, result.err
    assert "Traceback" not in result.err and result.err[:-1].isprintable()
    return result.err


def test_every_shipped_model_has_a_sourced_context_window(registry: Registry) -> None:
    for model in registry.profiles["model"].values():
        window = getattr(model, "context_window_tokens", None)
        assert isinstance(window, int) and window >= 32_768, model.id
        assert model.sources.get("context_window_tokens"), f"{model.id}: no source"


@pytest.mark.parametrize("command", ["size", "paths", "bounds", "recommend"])
def test_a_workload_beyond_the_context_window_is_exit_2(cli, command) -> None:
    extra = ["--budget-nodes", "6"] if command == "recommend" else []
    longer = ("--set", "workload.max_len_tokens=400429")  # the longest at least the mean
    err = one_line_error(cli(command, *extra, "--set", "workload.context_tokens=400000", *longer))
    assert "workload 'paper-64k'" in err
    assert "context_tokens + append_tokens + generated_tokens = 400,605" in err
    assert "deepseek-v3.2's context_window_tokens 163,840" in err


def test_a_workload_at_the_window_is_served(cli) -> None:
    # 163,235 + 429 + 176 = 163,840: exactly the window. (With the testbed's HBM reserve a
    # non-layer-wise prefill GPU cannot hold a 6.6 GB request; at the datasheet it can.)
    result = cli(
        "size", "--json", "--speed-of-light", "--set", "workload.context_tokens=163235",
        "--set", "workload.max_len_tokens=163664",
    )  # fmt: skip
    assert result.code == 0, result.err


def test_max_len_beyond_the_window_names_the_field(cli) -> None:
    err = one_line_error(
        cli("size", "--model", "qwen2.5-32b", "-P", "1", "-D", "2",
            "--set", "workload.max_len_tokens=200000")
    )  # fmt: skip
    assert "field 'max_len_tokens'" in err and "qwen2.5-32b's context_window_tokens 131,072" in err


def test_a_smaller_window_applies_to_the_abstract_form(cli) -> None:
    err = one_line_error(
        cli(
            "size", "--workload", "agentic-22gb-pflop", "--set", "model.context_window_tokens=32768"
        )
    )
    assert "workload 'agentic-22gb-pflop'" in err and "33,326 exceeds" in err


@pytest.mark.parametrize("context_column", [False, True])
def test_a_trace_row_beyond_the_window_names_the_file_and_line(
    cli, tmp_path: Path, context_column: bool
) -> None:
    folder = tmp_path / "profiles" / "workload"
    folder.mkdir(parents=True)
    trace = folder / "t.csv"
    if context_column:
        rows = "a,100,10,0\na,200,10,110\nb,1000,100,170000\nb,5,5,0\n"
        trace.write_text("trajectory_id,append_tokens,generated_tokens,context_tokens\n" + rows)
    else:  # the context is the trajectory's earlier turns: 100,000 + 10 + 64,000 + 10
        trace.write_text(
            "trajectory_id,append_tokens,generated_tokens\na,100000,10\na,64000,10\nb,5,5\n"
        )
    (folder / "traced.toml").write_text(
        'kind = "workload"\nname = "traced"\nturns = 2\nappend_tokens = 100\n'
        'generated_tokens = 10\ncontext_tokens = 0\ntrace_file = "t.csv"\n'
    )
    err = one_line_error(
        cli("size", "--profiles", str(tmp_path / "profiles"), "--workload", "traced")
    )
    assert f"error: {trace}: line " in err
    if context_column:
        assert "line 4:" in err and "context_tokens + append_tokens" in err and "171,100" in err
    else:
        assert "line 3:" in err and "context (the turns before) + append_tokens" in err
        assert "164,020 exceeds deepseek-v3.2's context_window_tokens 163,840" in err


def test_a_model_without_a_window_is_not_checked(registry: Registry) -> None:
    m = registry.model("deepseek-v3.2").model_copy(update={"context_window_tokens": None})
    from dualpath_plan.physics.workload import workload_demand

    wl = Overrides.parse(
        ["workload.context_tokens=400000", "workload.max_len_tokens=400429"]
    ).apply(registry.workload("paper-64k"))
    assert workload_demand(m, wl).mean(workload_demand(m, wl).context_tokens) > 400_000


# --- a decode batch of one -----------------------------------------------------------------


def tight_hbm_profiles(tmp_path: Path, hbm_gbyte: float = 100.2) -> Path:
    """A Hopper node whose 8 GPUs have ``hbm_gbyte`` each: one decode node holds the
    DeepSeek-V3.2 weights (99.7 GB per GPU: 18.0 GB every GPU holds under data-parallel
    attention, and an eighth of the 654 GB of routed experts) with a few GB to spare."""
    gpu = copy_profile(tmp_path, "gpu", "h800-sxm")
    gpu.rename(gpu.with_name("h800-tight.toml"))
    gpu = gpu.with_name("h800-tight.toml")
    gpu.write_text(gpu.read_text().replace("hbm_gbyte = 80.0", f"hbm_gbyte = {hbm_gbyte}"))
    node = copy_profile(tmp_path, "node", "dualpath-hopper")
    node.rename(node.with_name("hopper-tight.toml"))
    node = node.with_name("hopper-tight.toml")
    node.write_text(node.read_text().replace('gpu = "h800-sxm"', 'gpu = "h800-tight"'))
    return tmp_path / "profiles"


# 6.03 GB of KV per request (and the longest request at least that long)
LONG = ("--set", "workload.context_tokens=150000", "--set", "workload.max_len_tokens=150429")


@pytest.mark.parametrize("command", ["size", "paths"])
def test_a_decode_group_that_holds_no_request_is_one_line(cli, tmp_path, command) -> None:
    profiles = tight_hbm_profiles(tmp_path)
    args = ("--profiles", str(profiles), "--decode-node", "hopper-tight", "-D", "1", *LONG)
    err = one_line_error(cli(command, *args))
    assert "field '-D/--decode-nodes'" in err
    assert "1 decode node (1 x 8 x 100.2 GB = 802 GB of HBM) keeps 3.95 GB" in err
    assert "6.03 GB for 150,429 context + 176 generated tokens" in err


def test_the_same_decode_limit_is_an_infeasible_point_in_recommend(cli, tmp_path) -> None:
    profiles = tight_hbm_profiles(tmp_path)
    result = cli(
        "recommend", "--json", "--budget-nodes", "4", "--profiles", str(profiles),
        "--decode-node", "hopper-tight", *LONG,
    )  # fmt: skip
    assert result.code == 0, result.err
    rows = {(c["prefill_nodes"], c["decode_nodes"]): c for c in result.json()["candidates"]}
    assert all(v is None for v in rows[(3, 1)]["modes"].values())  # one decode node: none fits
    assert rows[(2, 2)]["modes"]["dualpath"] is not None


def test_check_feasible_passes_where_one_request_fits(tmp_path) -> None:
    reg = Registry.load(
        [tight_hbm_profiles(tmp_path)], overrides=Overrides.parse(["workload.context_tokens=1000"])
    )
    check_feasible(Scenario.from_ids(reg, decode_node="hopper-tight", decode_nodes=1))


# --- headroom: --max-utilization -------------------------------------------------------------

SCENARIOS = [
    {"model": "deepseek-v3.2", "prefill_nodes": 2, "decode_nodes": 4},
    {"model": "deepseek-v3.2", "prefill_nodes": 3, "decode_nodes": 2},
    {"model": "ds-27b", "prefill_nodes": 1, "decode_nodes": 1},
    {"model": "ds-27b", "prefill_nodes": 2, "decode_nodes": 3, "workload": "paper-32k"},
    {"model": "qwen2.5-32b", "prefill_nodes": 1, "decode_nodes": 2, "workload": "paper-48k"},
]
utilizations = st.floats(0.01, 1.0, allow_nan=False)


@functools.cache
def _scenario(i: int) -> Scenario:
    return Scenario.from_ids(Registry.load(use_env=False), **SCENARIOS[i])  # type: ignore[arg-type]


def _outcome(i: int, mode: str, u: float, **kw: float):
    sc = _scenario(i)
    return evaluate_mode(sc, mode, ServingConfig(max_utilization=u, **kw)), sc  # type: ignore[arg-type]


@settings(max_examples=30, deadline=None)
@given(st.integers(0, len(SCENARIOS) - 1), st.sampled_from(REPORT_MODES), utilizations)
def test_aps_never_exceeds_u_times_the_saturated_rate(i, mode, u) -> None:
    o, sc = _outcome(i, mode, u)
    saturated_aps = o.throughput_turns_per_s / sc.turn_demand.trajectory_turns.mean
    assert o.aps <= u * saturated_aps * (1 + 1e-12)
    assert o.binding_utilization <= u * (1 + 1e-12)
    if o.aps_limit != "unreachable":
        assert o.aps == pytest.approx(min(o.slo_aps, u * saturated_aps), rel=1e-12)
        assert o.binding_utilization == pytest.approx(o.aps / saturated_aps, rel=1e-12)
        assert (o.aps_limit == "utilization") == (o.slo_aps > u * saturated_aps)
        # At the capped rate both SLOs still hold (INV-12).
        assert o.online_ttft_s <= 4.0 * (1 + 1e-6) and o.online_tpot_s <= 0.05 * (1 + 1e-6)


@settings(max_examples=25, deadline=None)
@given(
    st.integers(0, len(SCENARIOS) - 1), st.sampled_from(REPORT_MODES), utilizations, utilizations
)
def test_aps_is_monotone_in_u(i, mode, u1, u2) -> None:
    lo, hi = sorted((u1, u2))
    a, _ = _outcome(i, mode, lo)
    b, _ = _outcome(i, mode, hi)
    assert a.aps <= b.aps
    assert a.slo_aps == b.slo_aps  # the SLOs' own answer does not depend on the cap
    assert (a.throughput_turns_per_s, a.jct_s, a.drain_s) == (
        b.throughput_turns_per_s,
        b.jct_s,
        b.drain_s,
    )  # offline runs saturated: not capped


@settings(max_examples=15, deadline=None)
@given(st.integers(0, len(SCENARIOS) - 1), st.sampled_from(REPORT_MODES))
def test_u_of_one_is_the_rate_under_the_slos_alone(i, mode) -> None:
    # The previous behaviour: the bisection's rate under both SLOs, never capped (the baseline's
    # size-default-no-headroom records the same numbers the default scenario had before).
    o, _ = _outcome(i, mode, 1.0)
    assert o.aps == o.slo_aps and o.aps_limit != "utilization"


def test_the_cap_binds_only_where_the_slos_allow_more(registry) -> None:
    # dualpath-hopper, DS 660B 2P4D: DualPath is TTFT-limited at 88% of its capacity, so a
    # cap of 0.9 leaves it and the default 0.8 sets it; Basic meets its SLOs up to its
    # capacity, so any cap below 1 sets its APS.
    sc = Scenario.from_ids(registry)
    loose = ServingConfig(max_utilization=0.9)
    dp = evaluate_mode(sc, "dualpath", loose)
    basic = evaluate_mode(sc, "basic", loose)
    assert dp.aps_limit == "ttft" and 0.80 < dp.binding_utilization < 0.9
    assert basic.aps_limit == "utilization" and basic.binding_utilization == pytest.approx(0.9)
    default = evaluate_mode(sc, "dualpath", ServingConfig())
    assert default.aps_limit == "utilization" and default.binding_utilization == pytest.approx(0.8)
    assert evaluate_mode(sc, "basic", ServingConfig(max_utilization=1.0)).binding_utilization > 0.99


def test_inverse_sizing_uses_the_capped_aps(registry) -> None:
    sc = Scenario.from_ids(registry, model="ds-27b", prefill_nodes=1, decode_nodes=1)
    loose = smallest_cluster(sc, "dualpath", ServingConfig(max_utilization=1.0), target_aps=1.0)
    tight = smallest_cluster(sc, "dualpath", ServingConfig(max_utilization=0.5), target_aps=1.0)
    assert tight.outcome is not None and loose.outcome is not None
    assert tight.outcome.aps >= 1.0 and tight.outcome.binding_utilization <= 0.5
    assert tight.nodes > loose.nodes


@pytest.mark.parametrize("value", ["0", "-0.1", "1.01", "nan", "inf", "x"])
def test_a_bad_max_utilization_is_one_line(cli, value) -> None:
    err = one_line_error(cli("size", "--max-utilization", value))
    assert "--max-utilization" in err


def test_a_bad_max_utilization_from_python_is_an_input_error() -> None:
    with pytest.raises(PlanInputError, match="max_utilization"):
        ServingConfig(max_utilization=0.0)


def test_reports_show_the_binding_utilization(cli) -> None:
    data = cli("size", "--json", "--max-utilization", "0.5").json()
    assert data["inputs"]["max_utilization"] == 0.5
    for o in data["modes"].values():
        assert o["binding_utilization"] <= 0.5 + 1e-12 and o["aps"] <= o["slo_aps"]
        assert o["aps_limit"] == "utilization"
    text = cli("size", "--max-utilization", "0.5").out
    assert "busiest link at most 50%" in text and "util." in text and "utilization" in text
    sizing = cli("size", "--target-aps", "0.4", "--json", "--max-nodes", "32").json()
    assert sizing["max_utilization"] == 0.8
    for m in sizing["modes"].values():
        assert m["reached"] and m["binding_utilization"] <= 0.8 + 1e-12
    rec = cli("recommend", "--budget-nodes", "6", "--objective", "aps", "--json").json()
    for c in rec["candidates"]:
        for o in c["modes"].values():
            assert o is None or o["binding_utilization"] <= 0.8 + 1e-12


def test_an_unreachable_deadline_says_whether_nodes_would_help(registry) -> None:
    """A deadline below the agents' own critical path (their turns one after another at light
    load) is out of reach of any cluster: the reason says so and gives that floor, which the
    best cluster's JCT is at least (the message implied that more nodes would help)."""
    sc = Scenario.from_ids(registry)
    cfg = ServingConfig(agents=128)
    short = smallest_cluster(sc, "dualpath", cfg, deadline_s=100.0, max_nodes=16)
    assert short.outcome is None
    m = re.search(r"takes ([\d,]+) s, of which .* critical path .* is ([\d,]+) s", short.reason)
    assert m, short.reason
    best, floor = (float(g.replace(",", "")) for g in m.groups())
    assert 100.0 < floor <= best
    # A deadline that more nodes would reach: no floor is named at a too small cluster.
    capped = smallest_cluster(sc, "dualpath", ServingConfig(), deadline_s=4000.0, max_nodes=4)
    assert capped.outcome is None
    assert "takes" in capped.reason and "critical path" not in capped.reason
    assert smallest_cluster(sc, "dualpath", ServingConfig(), deadline_s=4000.0).outcome


def test_weights_no_node_count_holds_name_the_gpu(cli) -> None:
    """Where every GPU's own share (the replicated attention weights) exceeds its HBM, more
    nodes cannot help: the error names --gpu and says so (it blamed -P and showed '0 GB' for
    16 MB: found in a trial); where nodes help, -P as before."""
    # 1 GB, the least a GPU plausibly has (a smaller HBM is refused as a unit slip).
    tiny = cli("size", "--set", "gpu.hbm_gbyte=1")
    assert tiny.code == 2 and "field '--gpu'" in tiny.err
    assert "no number of nodes holds it" in tiny.err and "= 16 GB" in tiny.err
    few = cli("size", "-P", "1", "-D", "1")
    assert few.code == 2 and "field '-P/--prefill-nodes'" in few.err
    assert "add prefill nodes" in few.err
