"""The operator model (issue 29): a prefill pass or decode step per operator, per layer, per
shape, with an engine profile's measured efficiency curves; the `engine` command; accuracy
against AIConfigurator 0.12.0's own estimates (bench/aic_reference.csv)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualpath_plan.physics.operators import (
    Layout,
    check_layout,
    hottest_rank_load,
    moe_compute_dtype,
    time_pass,
    touched_experts,
)
from dualpath_plan.profiles.registry import Registry
from tests.conftest import load_bench

REGISTRY = Registry.load(use_env=False)
BENCH = Path(__file__).parent.parent / "bench"
ENGINES = sorted(
    p.stem for p in (Path(__file__).parent.parent / "hardware_profiles" / "engine").glob("*.toml")
)
MODELS = ["deepseek-v3", "llama-3.1-70b", "qwen3-32b", "qwen3-235b-a22b", "gpt-oss-120b", "kimi-k2"]


def _layouts(model_id: str) -> list[Layout]:
    model = REGISTRY.model(model_id)
    if model.num_moe_layers:
        return [Layout(tp=1, dp=8, ep=8), Layout(tp=4, dp=1, ep=4), Layout(tp=8, dp=1, ep=1)]
    return [Layout(tp=1, dp=1, ep=1), Layout(tp=4, dp=1, ep=1), Layout(tp=8, dp=1, ep=1)]


@settings(max_examples=60, deadline=None)
@given(
    model_id=st.sampled_from(MODELS),
    engine_id=st.sampled_from(ENGINES),
    which=st.integers(0, 2),
    batch=st.integers(1, 64),
    context=st.integers(256, 65536),
    hit=st.floats(0.0, 0.99),
    decode=st.booleans(),
)
def test_speed_of_light_is_a_lower_bound_of_every_operator(
    model_id: str,
    engine_id: str,
    which: int,
    batch: int,
    context: int,
    hit: float,
    decode: bool,
) -> None:
    """INV-68: with no curves (datasheet rates, no launch latency, the hottest rank at the mean,
    the fewer experts read of balanced and skewed routing) every
    operator's time is at most its calibrated time (INV-25 for the operator model)."""
    model = REGISTRY.model(model_id)
    engine = REGISTRY.engine(engine_id)
    gpu = REGISTRY.gpu(engine.gpu)
    layout = _layouts(model_id)[which]
    check_layout(model, layout)
    new = 1.0 if decode else max(1.0, round(context * (1.0 - hit)))
    sol = time_pass(model, gpu, None, layout, batch=batch, context=context, new_tokens=new)
    cal = time_pass(model, gpu, engine, layout, batch=batch, context=context, new_tokens=new)
    assert [o.name for o in sol.operators] == [o.name for o in cal.operators]
    for a, b in zip(sol.operators, cal.operators, strict=True):
        assert float(a.time_s) <= float(b.time_s) * (1 + 1e-12), a.name
    assert 0 < float(sol.time_s) <= float(cal.time_s)


@pytest.mark.parametrize("engine_id", ENGINES)
def test_speed_of_light_bounds_every_moe_shape_on_a_grid(engine_id: str) -> None:
    """INV-68 on a grid the property test above samples thinly: every MoE model, layout,
    batch 1 to 64 (where skewed routing reads fewer experts than balanced routing: DeepSeek-V3
    TP4 EP4 on H100 at batch 32 read 0.96 of the balanced experts' weights, below the speed
    of light's) and context, decode and prefill."""
    engine = REGISTRY.engine(engine_id)
    gpu = REGISTRY.gpu(engine.gpu)
    for model_id in ("deepseek-v3", "qwen3-235b-a22b", "gpt-oss-120b", "kimi-k2"):
        model = REGISTRY.model(model_id)
        for layout in _layouts(model_id):
            check_layout(model, layout)
            for batch, context, new in itertools.product(
                (1, 2, 4, 8, 16, 32, 64), (1024, 32768), (1, 512)
            ):
                args = {"batch": batch, "context": context, "new_tokens": new}
                sol = time_pass(model, gpu, None, layout, **args)
                cal = time_pass(model, gpu, engine, layout, **args)
                for a, b in zip(sol.operators, cal.operators, strict=True):
                    assert float(a.time_s) <= float(b.time_s) * (1 + 1e-12), (
                        model_id, layout, args, a.name,
                    )  # fmt: skip


@pytest.mark.parametrize("model_id", MODELS)
def test_more_work_never_takes_less_time(model_id: str) -> None:
    """A decode step is no faster at a larger batch or a longer context; a prefill pass no
    faster with more new tokens over the same context."""
    model = REGISTRY.model(model_id)
    engine = REGISTRY.engine("h200-sglang-0.5.14")
    gpu = REGISTRY.gpu(engine.gpu)
    layout = _layouts(model_id)[0]
    batches = np.array([1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0])
    steps = [
        float(time_pass(model, gpu, engine, layout, batch=b, context=8192, new_tokens=1).time_s)
        for b in batches
    ]
    assert steps == sorted(steps)
    contexts = [1024.0, 4096.0, 16384.0, 65536.0]
    steps = [
        float(time_pass(model, gpu, engine, layout, batch=8, context=c, new_tokens=1).time_s)
        for c in contexts
    ]
    assert steps == sorted(steps)
    passes = [
        float(time_pass(model, gpu, engine, layout, batch=1, context=32768, new_tokens=n).time_s)
        for n in (128.0, 1024.0, 8192.0, 32768.0)
    ]
    assert passes == sorted(passes)


@given(
    tokens=st.floats(1.0, 1e6),
    experts=st.sampled_from([8, 64, 128, 256, 384]),
    top_k=st.integers(1, 8),
    ep_exp=st.integers(0, 5),
    alpha=st.floats(0.5, 3.0),
)
def test_the_hottest_rank_carries_at_least_the_mean(
    tokens: float, experts: int, top_k: int, ep_exp: int, alpha: float
) -> None:
    """Skewed routing: the most loaded rank carries at least the mean and at most every token
    of its experts; fewer, larger ranks (lower EP) even the load out; balanced routing is 1."""
    ep = min(2**ep_exp, experts)
    hot = float(hottest_rank_load(tokens, top_k, experts, ep, alpha))
    assert np.isfinite(hot)
    assert 1.0 <= hot <= experts / top_k + 1e-9
    if ep > 1:
        assert float(hottest_rank_load(tokens, top_k, experts, ep // 2, alpha)) <= hot + 1e-12
    assert float(hottest_rank_load(tokens, top_k, experts, ep, None)) == 1.0


def _collector_hottest_rank(
    rng: np.random.Generator, tokens: int, experts: int, top_k: int, ep: int, alpha: float
) -> np.ndarray:
    """One draw of AIConfigurator's MoE collector routing (power_law_logits_v3, described in
    physics/operators.py:_PowerLaw), written from its description: per-expert weights from a
    bounded power law, loads rounded to T k in all, the shortfall topped up one slot an
    expert in descending load (ties at random); the most loaded rank's experts' loads."""
    lo, hi = (1.0, 0.8 * tokens) if tokens * top_k > experts else (0.01, 2.0)
    u = rng.random(experts)
    x = ((hi ** (1 - alpha) - lo ** (1 - alpha)) * u + lo ** (1 - alpha)) ** (1 / (1 - alpha))
    n = np.round(x / x.sum() * tokens * top_k).astype(int)
    short = tokens * top_k - int(n.sum())
    order = np.lexsort((rng.random(experts), -n))
    for i in range(abs(short)):
        if short > 0:
            n[order[i % experts]] += 1
        else:
            j = order[-(i % experts) - 1]
            n[j if n[j] > 0 else int(np.argmax(n))] -= 1
    ranks = n.reshape(ep, experts // ep)
    return ranks[int(np.argmax(ranks.sum(axis=1)))]


@pytest.mark.parametrize(
    ("tokens", "experts", "top_k", "ep", "alpha"),
    [
        (1, 128, 8, 1, 1.2),  # Qwen3 at batch 1: the top-up touches k experts
        (16, 128, 8, 1, 1.2),
        (32, 128, 8, 2, 1.2),
        (16, 128, 8, 8, 1.2),
        (32, 128, 4, 4, 1.2),  # gpt-oss at batch 32
        (64, 128, 4, 4, 1.2),
        (64, 256, 8, 8, 1.01),  # DeepSeek-V3, 8 ranks of 8 tokens
        (512, 256, 8, 8, 1.01),
        (128, 384, 8, 8, 1.01),  # Kimi-K2
        (4096, 256, 8, 8, 1.01),
    ],
)
def test_touched_experts_follow_the_collectors_routing(
    tokens: int, experts: int, top_k: int, ep: int, alpha: float
) -> None:
    """INV-68: the experts a step reads on the hottest rank under skewed routing, the closed
    form against 400 draws of the routing the kernel tables were measured under: within 15%
    where every rank gets a slot on average (T k >= E) or one rank holds every expert. (With
    fewer slots than experts over several ranks the hottest rank is a balls-in-bins maximum
    the closed form underestimates; docs/model.md section 6b.)"""
    rng = np.random.default_rng(29)
    draws = [_collector_hottest_rank(rng, tokens, experts, top_k, ep, alpha) for _ in range(400)]
    measured = float(np.mean([(d > 0).sum() for d in draws]))
    ours = float(touched_experts(tokens, top_k, experts, ep, alpha))
    assert ours == pytest.approx(measured, rel=0.15)


@given(
    tokens=st.floats(1.0, 1e6),
    experts=st.sampled_from([8, 64, 128, 256, 384]),
    top_k=st.integers(1, 8),
    ep_exp=st.integers(0, 5),
    alpha=st.one_of(st.none(), st.floats(0.5, 3.0)),
)
def test_touched_experts_are_within_the_ranks_experts_and_slots(
    tokens: float, experts: int, top_k: int, ep_exp: int, alpha: float | None
) -> None:
    ep = min(2**ep_exp, experts)
    touched = float(touched_experts(tokens, top_k, experts, ep, alpha))
    slots = float(hottest_rank_load(tokens, top_k, experts, ep, alpha)) * tokens * top_k / ep
    assert np.isfinite(touched)
    assert 0.0 < touched <= min(experts / ep, slots) + 1e-9


def test_weight_only_fp4_experts_run_at_the_models_compute_rate() -> None:
    assert moe_compute_dtype("fp4", "bf16") == "bf16"  # w4a16 (gpt-oss on SGLang)
    assert moe_compute_dtype("fp8", "fp8") == "fp8"
    assert moe_compute_dtype("fp8", "bf16") == "bf16"


def test_a_replicas_prefill_is_its_pass_not_one_gpus_share() -> None:
    """Issue 29: Llama-3.1-70B TP8 on H100, one 4,096-token prompt: the TTFT of a TP8
    replica is its pass (AIConfigurator 0.12.0: 188.7 ms; bench/aic_reference.csv), not
    eight GPUs' work on one (the old model: 15.9 s)."""
    model = REGISTRY.model("llama-3.1-70b")
    engine = REGISTRY.engine("h100-sglang-0.5.14")
    gpu = REGISTRY.gpu(engine.gpu)
    t = time_pass(
        model, gpu, engine, Layout(tp=8, dp=1, ep=1), batch=1, context=4096, new_tokens=4096
    )
    assert float(t.time_s) == pytest.approx(0.1887, rel=0.30)


def test_accuracy_against_aiconfigurator_holds() -> None:
    """The accuracy table (README), issue 29's bar: on its grid (DeepSeek-V3, Llama-3.1-70B,
    Qwen3-235B-A22B, gpt-oss-120b, Qwen3-32B x H100, H200, B200 x batch 1-64 x context 4K-32K)
    median |error| at most 10% and worst at most 30% per phase. Over every row of
    bench/aic_reference.csv the median holds too, and the worst stays where the README
    records it: Kimi-K2's prefill, where AIConfigurator times MLA at DeepSeek's 128 heads
    (its sdk/models/deepseek.py, "128-head kernel-table convention") and we at Kimi's 64."""
    bench = load_bench("bench_engine")
    table = bench.load_reference(BENCH / "aic_reference.csv")
    for phase, (median, worst) in bench.summarize(table, REGISTRY, grid_only=True).items():
        assert median <= 0.10, (phase, median)
        assert worst <= 0.30, (phase, worst)
    for phase, (median, worst) in bench.summarize(table, REGISTRY).items():
        assert median <= 0.10, (phase, median)
        assert worst <= {"prefill": 0.36, "decode": 0.30}[phase], (phase, worst)


def test_accuracy_holds_on_held_out_layouts() -> None:
    """Layouts the reference table does not run (bench/aic_reference_heldout.csv, README):
    the medians within 10% per phase, the worst where the README records it (a shape's
    Triton configuration steps with its token count: Qwen3-235B-A22B EP4 on H200, +32%)."""
    bench = load_bench("bench_engine")
    table = bench.load_reference(BENCH / "aic_reference_heldout.csv")
    for phase, (median, worst) in bench.summarize(table, REGISTRY).items():
        assert median <= 0.10, (phase, median)
        assert worst <= 0.35, (phase, worst)


def test_shape_factors_never_lift_an_efficiency_above_one() -> None:
    """A per-shape factor stays within the speed of light (INV-25), and a bad row is refused
    with its field named."""
    from dualpath_plan.profiles.schemas import OperatorCurve

    for engine_id in ENGINES:
        engine = REGISTRY.engine(engine_id)
        for name in ("moe_bf16", "moe_fp8", "moe_fp4"):
            curve = getattr(engine, name)
            if curve is None:
                continue
            assert curve.shapes, (engine_id, name)
            for row in curve.shapes:
                assert row[5] * curve.compute_efficiency <= 1.0 + 1e-9
                assert row[6] * curve.memory_efficiency <= 1.0 + 1e-9
    base = {"launch_s": 1e-5, "compute_efficiency": 0.5, "memory_efficiency": 0.5}
    with pytest.raises(ValueError, match="compute factor"):
        OperatorCurve(**base, shapes=((4096, 384, 128, 128, 8, 2.5, 1.0, 1e-5),))
    with pytest.raises(ValueError, match="expected 8"):
        OperatorCurve(**base, shapes=((4096, 384, 128, 128, 8, 1.0),))
    curve = OperatorCurve(**base, shapes=((4096, 384, 128, 128, 8, 1.5, 0.8, 2e-5),))
    fc, fm, launch = curve.shape_factors(4096, np.array([384.0, 768.0]), 128, 128, 8)
    assert fc.tolist() == [1.5, 1.0] and fm.tolist() == [0.8, 1.0]
    assert launch.tolist() == [2e-5, 1e-5]


def test_engine_json_is_the_sum_of_its_operators(cli) -> None:
    r = cli(
        "engine",
        "--model", "llama-3.1-70b",
        "--node", "dgx-h100",
        "--engine", "h100-sglang-0.5.14",
        "--phase", "decode",
        "--batch", "16",
        "--context", "8K",
        "--json",
    )  # fmt: skip
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["engine"] == "h100-sglang-0.5.14"
    total = sum(o["time_s"] for o in data["operators"])
    assert data["time_s"] == pytest.approx(total, rel=1e-9)
    sol = json.loads(
        cli(
            "engine", "--model", "llama-3.1-70b", "--node", "dgx-h100",
            "--engine", "h100-sglang-0.5.14", "--phase", "decode",
            "--batch", "16", "--context", "8K", "--speed-of-light", "--json",
        ).out
    )  # fmt: skip
    assert sol["time_s"] < data["time_s"]


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("--tp", "3"), "--tp"),
        (("--ep", "5"), "--ep"),
        (("--batch", "0"), "--batch"),
        (("--context", "-5"), "--context"),
        (("--context", "nan"), "--context"),
        (("--phase", "both"), "--phase"),
        (("--engine", "no-such-engine"), "engine"),
        (("--batch", "100000"), "--batch"),
        (("--tp", "16"), "--tp"),  # a tensor-parallel ring beyond the node's NVLink
        (("--context", "128K", "--tp", "1", "--batch", "1"), "--context"),  # not one fits
        (("--set", "engine.gpu=no-such-gpu"), "gpu"),
    ],
)
def test_engine_bad_input_is_one_line_and_exit_2(cli, args: tuple[str, ...], field: str) -> None:
    base = {"--phase": "decode", "--context": "8K", "--model": "llama-3.1-70b"}
    for k, v in zip(args[::2], args[1::2], strict=True):
        base[k] = v
    flat = [x for kv in base.items() for x in kv]
    r = cli("engine", "--node", "dgx-h100", *flat)
    assert r.code == 2, (r.code, r.out, r.err)
    assert "Traceback" not in r.err
    assert field in r.err
    assert len(r.err.strip().splitlines()) == 1, r.err


@pytest.mark.parametrize(
    ("node", "model"), [("dgx-h200", "deepseek-v3.2"), ("dgx-h100", "llama-3.1-70b")]
)
def test_sizes_tpot_is_the_engine_commands_step(cli, node: str, model: str) -> None:
    """Issue 29: every command uses the one engine model. The decode group's step at size's
    decode batch (the batch while all N agents run; size's TPOT is the turn-weighted mean of
    such steps over the run, ``offline_tpot_s``) is `engine --phase decode` at that batch per
    attention-DP rank (the outcomes function the command calls, which takes size's fractional
    mean batch), and the command at a whole batch is the decode group's step at that batch."""
    from dualpath_plan.outcomes.engine import EngineQuery, engine_at
    from dualpath_plan.outcomes.serving import cluster_assembly
    from dualpath_plan.scenario.bundle import Scenario

    size = cli("size", "--node", node, "--model", model, "--json").json()["modes"]["dualpath"]
    sc = Scenario.from_ids(REGISTRY, node=node, model=model)
    group = cluster_assembly(sc, "dualpath").de.decode
    assert group is not None and group.operators is not None
    layout = group.operators.layout
    per_rank = float(group.batch_per_rank(max(size["decode_batch"], 1.0)))
    flags = {"tp": int(layout.tp), "dp": int(np.max(layout.dp)), "ep": int(np.max(layout.ep))}
    query = EngineQuery("decode", per_rank, group.context_tokens, new_tokens=0.0, **flags)
    step = engine_at(REGISTRY, model, node, None, None, query)
    assert step.time_s == pytest.approx(group.step_s(max(size["decode_batch"], 1.0)), rel=1e-9)
    whole = max(round(per_rank), 1)
    # The command attends --context + --new-tokens / 2: the group's mean context.
    assert float(group.context_tokens).is_integer()
    prompt = str(int(group.context_tokens) - 1)
    out = cli(
        "engine", "--model", model, "--node", node, "--phase", "decode",
        "--batch", str(whole), "--context", prompt, "--new-tokens", "2",
        "--tp", str(flags["tp"]), "--dp", str(flags["dp"]), "--ep", str(flags["ep"]), "--json",
    ).json()  # fmt: skip
    replica_batch = whole * flags["dp"] * float(np.max(group.replicas))
    assert out["time_s"] == pytest.approx(float(group.step_s(replica_batch)), rel=1e-9)


def test_expert_parallelism_across_nodes_pays_the_network() -> None:
    """A replica over two nodes sends the share of its dispatch and combine held on the other
    node through the compute NICs (ScaleOut), not NVLink: DeepSeek-V3 EP16 on two DGX H200
    moves half of its routed tokens at 50 GB/s x ep_link_efficiency per GPU; within one node
    the same rank's transfers are NVLink's alone. The speed of light stays below."""
    from dualpath_plan.physics.latency import network_byte_s_per_gpu
    from dualpath_plan.physics.operators import ScaleOut

    model = REGISTRY.model("deepseek-v3")
    node = REGISTRY.node("dgx-h200")
    engine = REGISTRY.engine("h200-sglang-0.5.14")
    gpu = REGISTRY.gpu(node.gpu)
    net = ScaleOut(node.gpus_per_node, network_byte_s_per_gpu(node))
    args = {"batch": 4, "context": 8192, "new_tokens": 1024}

    def dispatch(layout: Layout, scale_out: ScaleOut | None, curves=engine) -> float:
        t = time_pass(model, gpu, curves, layout, scale_out=scale_out, **args)
        return float(next(o.time_s for o in t.operators if o.name == "ep_dispatch_combine"))

    two_nodes = dispatch(Layout(tp=1, dp=16, ep=16), net)
    one_node = dispatch(Layout(tp=1, dp=8, ep=8), net)
    assert dispatch(Layout(tp=1, dp=8, ep=8), None) == pytest.approx(one_node, rel=1e-12)
    tokens = args["batch"] * args["new_tokens"]
    payload = 2 * model.num_moe_layers * tokens * model.num_experts_per_token * model.hidden_size
    remote = payload * 2.0 * (8 / 16) / net.network_byte_s  # BF16, half on the other node
    assert two_nodes == pytest.approx(remote, rel=1e-9)
    assert two_nodes > 3 * one_node
    sol = ScaleOut(node.gpus_per_node, network_byte_s_per_gpu(node, efficiencies=False))
    assert dispatch(Layout(tp=1, dp=16, ep=16), sol, None) <= two_nodes


def test_set_reaches_one_field_of_an_engine_curve(cli) -> None:
    """--set engine.CURVE.FIELD=VALUE (found in a trial: only a whole inline table could be
    set): a lower GEMM memory efficiency slows a memory-bound decode step; the curve's source
    keeps its file and says what --set changed; a misspelt field gets a hint, a curve the
    engine lacks and an efficiency above 1 one line each, exit 2."""
    base = ("engine", "--model", "llama-3.1-70b", "--node", "dgx-h100", "--phase", "decode",
            "--batch", "16", "--context", "8K", "--json")  # fmt: skip
    plain = cli(*base).json()["time_s"]
    slower = cli(*base, "--set", "engine.gemm_bf16.memory_efficiency=0.4").json()["time_s"]
    assert slower > plain * 1.2
    shown = cli(
        "profiles", "show", "h100-sglang-0.5.14", "--set", "engine.gemm_bf16.launch_s=1e-5",
        "--json",
    ).json()  # fmt: skip
    assert shown["sources"]["gemm_bf16"][-1] == "launch_s set on the command line (--set)"
    assert "gemm_perf.parquet" in shown["sources"]["gemm_bf16"][0]
    for setting, words in (
        ("engine.gemm_bf16.memory_effic=0.5", "did you mean 'engine.gemm_bf16.memory_efficiency'"),
        ("engine.gemm_fp4.launch_s=1e-5", "has no gemm_fp4"),
        ("engine.gemm_bf16.memory_efficiency=1.5", "less than or equal to 1"),
    ):
        r = cli(*base, "--set", setting)
        assert r.code == 2 and words in r.err and len(r.err.strip().splitlines()) == 1, r.err
