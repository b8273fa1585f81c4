"""Issue 3: KV bytes, FLOPs, the cache-compute ratio and the hardware trend."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualpath_plan.physics import model as phys
from dualpath_plan.physics.trend import trend
from dualpath_plan.physics.workload import (
    TurnCounts,
    abstract_turn_demand,
    load_trace,
    turn_demand,
    turn_mix,
)
from dualpath_plan.profiles.registry import Registry

# --- golden values: the paper's Table 1 and text (dualpath-paper.md 2.1), within 10% ----------


@pytest.mark.parametrize(("context", "paper"), [(16384, 13.0), (65536, 36.0)])
def test_deepseek_v32_table1(registry: Registry, context: int, paper: float) -> None:
    value = float(
        phys.cache_compute_ratio_gb_per_pflop(registry.model("deepseek-v3.2"), context, 429)
    )
    assert value == pytest.approx(paper, rel=0.10)


def test_deepseek_v32_trace_mean_is_about_22(registry: Registry) -> None:
    m = registry.model("deepseek-v3.2")
    demand = turn_demand(m, turn_mix(registry.workload("paper-64k")))
    assert demand.gb_per_pflop == pytest.approx(22.0, rel=0.10)


@pytest.mark.parametrize(("context", "paper"), [(16384, 117.0), (65536, 267.0)])
def test_qwen25_32b_table1(registry: Registry, context: int, paper: float) -> None:
    value = float(
        phys.cache_compute_ratio_gb_per_pflop(registry.model("qwen2.5-32b"), context, 429)
    )
    assert value == pytest.approx(paper, rel=0.10)


def test_known_kv_sizes(registry: Registry) -> None:
    # hardware-and-models.md D.2
    assert phys.kv_bytes_per_token(registry.model("deepseek-v3.2")) == 40_016
    assert phys.kv_bytes_per_token(registry.model("qwen2.5-32b")) == 262_144
    assert phys.kv_bytes_per_token(registry.model("llama-3.1-70b")) == 327_680
    assert phys.kv_bytes_per_token(registry.model("qwen3-235b-a22b")) == 192_512
    loaded = registry.model("deepseek-v3.2").model_copy(update={"indexer_cache_loaded": True})
    assert phys.kv_bytes_per_token(loaded) == 48_068


def test_indexer_cache_raises_ratio_to_about_26(registry: Registry) -> None:
    # dualpath-paper.md 2.1: counting the indexer key cache gives about 26 at 32.7K.
    m = registry.model("deepseek-v3.2").model_copy(update={"indexer_cache_loaded": True})
    assert float(phys.cache_compute_ratio_gb_per_pflop(m, 32721, 429)) == pytest.approx(
        26, rel=0.05
    )


@pytest.mark.parametrize(
    "mid",
    [
        "deepseek-v3",
        "deepseek-v3.2",
        "qwen2.5-32b",
        "qwen3-235b-a22b",
        "gpt-oss-120b",
        "llama-3.1-70b",
        "kimi-k2",
    ],
)
def test_derived_params_match_published(registry: Registry, mid: str) -> None:
    m = registry.model(mid)
    p = phys.param_counts(m)
    if m.published_active_params_billions:
        assert p.active / 1e9 == pytest.approx(m.published_active_params_billions, rel=0.05)
    assert p.total / 1e9 == pytest.approx(m.published_total_params_billions, rel=0.05)


def test_v32_weight_term_matches_reference(registry: Registry) -> None:
    # hardware-and-models.md D.3: 36.55B non-embedding active -> 73.1 GFLOP per token.
    p = phys.param_counts(registry.model("deepseek-v3.2"))
    assert p.active_matmul / 1e9 == pytest.approx(36.55, rel=0.01)


def test_sliding_window_kv_is_not_linear(registry: Registry) -> None:
    m = registry.model("gpt-oss-120b")
    per_layer = phys.kv_bytes_per_token_layer(m)
    c = np.array([64.0, 128.0, 4096.0])
    expected = 18 * per_layer * c + 18 * per_layer * np.minimum(c, 128)
    np.testing.assert_allclose(phys.kv_bytes_for_context(m, c), expected)


def test_capped_pairs_against_a_loop() -> None:
    for c, a, cap in [(0, 5, 3), (2, 10, 4), (100, 7, 50), (10, 10, 15)]:
        brute = sum(min(t, cap) for t in range(c + 1, c + a + 1))
        assert float(phys.capped_pairs(c, a, cap)) == brute
        assert float(phys.causal_pairs(c, a)) == sum(range(c + 1, c + a + 1))


# --- properties ---------------------------------------------------------------------------

MODEL_IDS = [
    "deepseek-v3",
    "deepseek-v3.2",
    "ds-27b",
    "qwen2.5-32b",
    "qwen3-235b-a22b",
    "gpt-oss-120b",
    "llama-3.1-70b",
    "kimi-k2",
]


@settings(max_examples=60, deadline=None)
@given(mid=st.sampled_from(MODEL_IDS), context=st.floats(0, 1e6), append=st.floats(1, 1e5))
def test_bytes_and_flops_positive_finite(
    registry: Registry, mid: str, context: float, append: float
) -> None:
    m = registry.model(mid)
    flops = float(phys.prefill_flops(m, context, append))
    kv = float(phys.kv_bytes_for_context(m, context))
    assert np.isfinite(flops) and flops > 0
    assert np.isfinite(kv) and kv >= 0
    step = phys.decode_step(m, 8, context + append)
    assert np.all(np.isfinite(step.hbm_bytes)) and float(step.flops) > 0


@settings(max_examples=40, deadline=None)
@given(
    mid=st.sampled_from([i for i in MODEL_IDS if i != "gpt-oss-120b"]),
    c1=st.floats(1, 1e6),
    c2=st.floats(1, 1e6),
)
def test_kv_linear_in_context(registry: Registry, mid: str, c1: float, c2: float) -> None:
    m = registry.model(mid)
    np.testing.assert_allclose(
        phys.kv_bytes_for_context(m, c1 + c2),
        phys.kv_bytes_for_context(m, c1) + phys.kv_bytes_for_context(m, c2),
        rtol=1e-12,
    )


@settings(max_examples=40, deadline=None)
@given(
    mid=st.sampled_from(MODEL_IDS),
    context=st.floats(0, 5e5),
    append=st.floats(1, 1e4),
    extra=st.floats(1, 1e5),
)
def test_flops_monotone_in_context_and_append(registry, mid, context, append, extra) -> None:
    m = registry.model(mid)
    base = float(phys.prefill_flops(m, context, append))
    assert float(phys.prefill_flops(m, context + extra, append)) >= base
    assert float(phys.prefill_flops(m, context, append + extra)) > base


def test_dense_ratio_tends_to_constant_dsa_keeps_rising(registry: Registry) -> None:
    ctx = np.array([1e7, 2e7, 4e7])
    qwen = phys.cache_compute_ratio_gb_per_pflop(registry.model("qwen2.5-32b"), ctx, 429)
    v32 = phys.cache_compute_ratio_gb_per_pflop(registry.model("deepseek-v3.2"), ctx, 429)
    # Dense GQA: ratio converges to kv_bytes / (4 heads head_dim layers) per token pair.
    m = registry.model("qwen2.5-32b")
    limit = (
        phys.kv_bytes_per_token(m)
        / 1e9
        / (m.num_layers * phys.attention_flops_per_pair_layer(m) * 429 / 1e15)
    )
    assert abs(qwen[-1] - limit) / limit < 0.01
    assert abs(qwen[-1] - qwen[-2]) / qwen[-1] < 0.01
    # DSA: main attention is capped, so the ratio keeps growing until the indexer dominates.
    assert (
        v32[1] > v32[0] * 1.0
        and float(
            phys.cache_compute_ratio_gb_per_pflop(registry.model("deepseek-v3.2"), 131072, 429)
        )
        > float(phys.cache_compute_ratio_gb_per_pflop(registry.model("deepseek-v3.2"), 65536, 429))
        * 1.3
    )


def test_decode_step_weights_grow_with_batch(registry: Registry) -> None:
    m = registry.model("deepseek-v3.2")
    small = phys.decode_step(m, 1, 32768)
    large = phys.decode_step(m, 256, 32768)
    assert float(large.weight_bytes) > float(small.weight_bytes)
    assert float(large.weight_bytes) <= phys.weight_bytes(m) * 1.0001


# --- workloads -----------------------------------------------------------------------------


def test_trace_file_csv_and_jsonl(tmp_path) -> None:
    csv = tmp_path / "t.csv"
    csv.write_text("trajectory_id,append_tokens,generated_tokens\na,100,10\na,50,5\nb,200,20\n")
    mix = load_trace(csv)
    np.testing.assert_array_equal(mix.cached_tokens, [0, 110, 0])
    assert mix.turns_per_trajectory == 1.5
    # The observed turns per trajectory (2 and 1) set the straggler tail of an offline JCT.
    assert mix.trajectory_turns is not None
    assert mix.trajectory_turns.mean == pytest.approx(1.5)
    assert mix.trajectory_turns.longest == 2.0
    jl = tmp_path / "t.jsonl"
    jl.write_text(
        '{"trajectory_id": 1, "append_tokens": 10, "generated_tokens": 1, "context_tokens": 500}\n'
    )
    assert float(load_trace(jl).cached_tokens[0]) == 500


def test_abstract_workload_keeps_its_ratio() -> None:
    demand = abstract_turn_demand(
        gb_per_pflop=22.0,
        context_tokens=32721,
        append_tokens=429,
        generated_tokens=176,
        kv_bytes_per_token=40016,
        trajectory_turns=TurnCounts.uniform(157, 0.0),
    )
    assert demand.gb_per_pflop == pytest.approx(22.0)


# --- trend ---------------------------------------------------------------------------------


def test_trend_reproduces_the_papers_factors(registry: Registry) -> None:
    gpus = [registry.gpu(i) for i in registry.ids("gpu")]
    rows = {r.gpu: r for r in trend(gpus, registry.gpu("a100-sxm-80gb"), "best")}
    b200 = rows["b200"]
    assert b200.flops_x == pytest.approx(28.8, rel=0.01)
    assert b200.pcie_x == 2.0
    assert b200.hbm_capacity_x == pytest.approx(2.4)
    assert 1 / b200.io_to_compute_x == pytest.approx(14.4, rel=0.01)
    like = {r.gpu: r for r in trend(gpus, registry.gpu("a100-sxm-80gb"), "bf16")}["b200"]
    assert like.flops_x == pytest.approx(7.2, rel=0.01)
    assert 1 / like.io_to_compute_x == pytest.approx(3.6, rel=0.01)


def test_ratio_cli(cli) -> None:
    result = cli("ratio", "--model", "deepseek-v3.2", "--context", "16384,65536", "--json")
    rows = result.json()["rows"]
    assert [r["context_tokens"] for r in rows] == [16384, 65536]
    assert set(rows[0]) == {"model", "context_tokens", "append_tokens", "gb_per_pflop"}
    assert cli("ratio", "--workload", "paper-64k", "--model", "deepseek-v3.2", "--json").code == 0
    for args, field in [
        (("--model", "nope"), "unknown model"),
        (("--append", "0"), "--append"),
        (("--append", "-5"), "--append"),
        (("--context", "0"), "--context"),
        (("--context", "abc"), "--context"),
    ]:
        full = (
            ("ratio", *args) if args[0] == "--model" else ("ratio", "--model", "qwen2.5-32b", *args)
        )
        result = cli(*full)
        assert result.code == 2, args
        assert field in result.err and "Traceback" not in result.err


def test_trend_cli(cli) -> None:
    data = cli("trend", "--json").json()
    assert {r["gpu"] for r in data["rows"]} >= {"a100-sxm-80gb", "b200"}
    assert cli("trend", "--dtype", "fp16").code == 2
    assert cli("trend", "--dtype", "fp8").code == 2  # the A100 base has no FP8
    assert cli("trend", "--dtype", "fp8", "--base", "h100-sxm").code == 0


def test_abstract_workload_profile_runs_everywhere(cli, registry) -> None:
    from dualpath_plan.outcomes.serving import evaluate
    from dualpath_plan.scenario import Scenario
    from dualpath_plan.scenario.spec import ServingConfig

    w = registry.workload("agentic-22gb-pflop")
    assert w.is_abstract
    abstract = evaluate(Scenario.from_ids(registry, workload=w.id), ServingConfig())
    concrete = evaluate(Scenario.from_ids(registry, workload="paper-64k"), ServingConfig())
    # Same trace means and about the same ratio (22 vs 21.7): the same JCT within 3%.
    for m in ("basic", "dualpath"):
        assert abstract.modes[m].jct_s == pytest.approx(concrete.modes[m].jct_s, rel=0.03)
    ratio = cli("ratio", "--workload", w.id, "--model", "deepseek-v3.2", "--json").json()
    assert ratio["rows"][0]["gb_per_pflop"] == pytest.approx(22.0)
    for command in (("size",), ("paths",), ("bounds",), ("recommend", "--budget-nodes", "8")):
        assert cli(*command, "--workload", w.id, "--json").code == 0, command


def test_abstract_form_needs_both_fields(cli, tmp_path) -> None:
    from tests.conftest import copy_profile

    path = copy_profile(tmp_path, "workload", "paper-64k")
    path.write_text(path.read_text().replace("turns = 157", "turns = 157\ngb_per_pflop = 22"))
    result = cli("profiles", "validate", str(path))
    assert result.code == 2 and "kv_bytes_per_token" in result.out + result.err


def test_turn_counts_keep_their_mean() -> None:
    for turns, spread in ((157, 0.0), (157, 1.0), (60, 0.3)):
        counts = TurnCounts.uniform(turns, spread)
        assert counts.mean == pytest.approx(turns, rel=1e-12)
        assert counts.longest == pytest.approx(turns * (1 + spread))
        assert np.all(np.diff(counts.surviving) <= 0)
    observed = TurnCounts.observed(np.array([3, 1, 3, 7]))
    assert observed.mean == pytest.approx(3.5)
    assert observed.longest == 7
