"""Numbers a planner can act on (issue 12): decode latency floors, efficiency provenance,
the speed-of-light upper bound, and intervals from the calibration's standard errors."""

from __future__ import annotations

import math
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dualpath_plan.errors import PlanInputError
from dualpath_plan.outcomes.serving import evaluate, saturated
from dualpath_plan.outcomes.uncertainty import Interval, interval, mode_intervals
from dualpath_plan.physics.engines import prefill_engine
from dualpath_plan.physics.latency import layer_floor_s
from dualpath_plan.physics.links import PathOptions
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.profiles.schemas import NodeProfile
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ServingConfig
from tests.conftest import BUILTIN, copy_profile

STOCK_NODES = sorted(p.stem for p in (BUILTIN / "node").glob("*.toml"))
AIC_RESULT = Path(__file__).parent / "data" / "aic" / "best_config_topn_disagg.csv"
UPPER_BOUND_EXAMPLES = int(os.environ.get("UPPER_BOUND_EXAMPLES", "25"))
REGISTRY = Registry.load(use_env=False)


@pytest.mark.parametrize("node", STOCK_NODES)
def test_every_stock_node_has_a_realistic_tpot(cli, node) -> None:
    """A 671B MoE model decodes at tens of ms per token on any of them (latency floors), never
    below 8 ms and within the SLO; the JSON says where the efficiencies come from."""
    data = cli("size", "--node", node, "--json").json()
    slo = data["inputs"]["tpot_slo_s"]
    for mode, o in data["modes"].items():
        assert 0.008 <= o["tpot_s"] <= slo, (node, mode, o["tpot_s"])
    eff = data["efficiencies"]
    assert eff["in_force"] and eff["source"] in ("measured", "transferred")
    assert eff["nodes"][0]["efficiency_source"] in ("measured", "transferred")
    assert node in eff["line"]


def test_the_stock_library_states_its_efficiency_sources(registry) -> None:
    """A datasheet node sets no calibration field; a measured one sets some (and the profile
    test checks each cites its source); a transferred one takes them from a measured node."""
    for node_id in registry.ids("node"):
        raw = registry.raw("node", node_id)
        assert isinstance(raw, NodeProfile)
        set_here = set(NodeProfile.CALIBRATION_FIELDS) & raw.model_fields_set
        if raw.efficiency_source == "datasheet":
            assert not set_here, node_id
        elif raw.efficiency_source == "measured":
            assert set_here and set(raw.calibration_stderr) <= set_here, node_id
        else:
            origin = registry.raw("node", raw.efficiencies_from or "")
            assert isinstance(origin, NodeProfile) and origin.efficiency_source == "measured"
            resolved = registry.node(node_id)
            for f in origin.model_fields_set & set(NodeProfile.CALIBRATION_FIELDS):
                if f not in set_here:
                    assert getattr(resolved, f) == getattr(origin, f), (node_id, f)
                    assert "transferred from" in resolved.sources[f][0]


def test_a_transfer_must_name_a_measured_node(cli, tmp_path) -> None:
    path = copy_profile(tmp_path, "node", "dgx-h200")
    path.write_text(
        path.read_text().replace(
            'efficiencies_from = "dualpath-hopper"', 'efficiencies_from = "dgx-h100"'
        )
    )
    result = cli("size", "--profiles", str(tmp_path / "profiles"), "--node", "dgx-h200")
    assert result.code == 2 and result.err.count("\n") == 1
    assert "efficiencies_from" in result.err and "not 'measured'" in result.err
    assert "dgx-h200.toml" in result.err


def test_set_on_the_command_line_is_reported(cli) -> None:
    data = cli("size", "--node", "dgx-h200", "--set", "node.snic_efficiency=0.9", "--json").json()
    node = data["efficiencies"]["nodes"][0]
    assert node["set_on_command_line"] == ["snic_efficiency"]
    assert node["values"]["snic_efficiency"] == 0.9
    # An overridden field is no longer the calibration's: it carries no interval.
    assert "node.snic_efficiency" not in data["intervals"]["fields"]


# --- latency floors ------------------------------------------------------------------------

# DeepEP's low-latency kernels, H800 + CX7 400 Gb/s, 128 tokens per GPU (docs/legacy.md of
# github.com/deepseek-ai/DeepEP): EP size -> dispatch + combine, seconds.
DEEPEP = {16: 313e-6, 32: 428e-6, 64: 487e-6, 128: 561e-6, 256: 554e-6}


def test_ep_floor_reproduces_deepep(registry) -> None:
    """The testbed node's EP fields give DeepEP's published times within 5%."""
    model = registry.model("deepseek-v3.2")
    node = registry.node("dualpath-hopper")
    gpu = registry.gpu(node.gpu)
    no_layer = node.model_copy(update={"layer_fixed_s": 0.0})
    for ep, measured in DEEPEP.items():
        per_layer = layer_floor_s(model, no_layer, gpu, ep, 128.0 * ep) / model.num_moe_layers
        assert per_layer == pytest.approx(measured, rel=0.05), ep


def test_floors_follow_the_parallel_layout(registry) -> None:
    """MoE: the EP floor grows with the tokens per GPU and with the share sent off-node;
    dense: two all-reduces per layer; none at all at the speed of light."""
    node = registry.node("dualpath-hopper")
    gpu = registry.gpu(node.gpu)
    moe, dense = registry.model("deepseek-v3.2"), registry.model("llama-3.1-70b")
    tokens = np.array([0.0, 32.0, 1024.0])
    f = np.asarray(layer_floor_s(moe, node, gpu, 32, tokens))
    assert np.all(np.diff(f) > 0)
    assert f[0] == pytest.approx(
        moe.num_layers * node.layer_fixed_s + moe.num_moe_layers * node.ep_latency_s
    )
    assert layer_floor_s(moe, node, gpu, 64, 64.0 * 32) > layer_floor_s(moe, node, gpu, 8, 8.0 * 32)
    d0 = layer_floor_s(dense, node, gpu, 8, 0.0)
    assert d0 == pytest.approx(
        dense.num_layers * (node.layer_fixed_s + 2 * node.tp_allreduce_latency_s)
    )
    assert layer_floor_s(moe, node, gpu, 32, tokens, efficiencies=False) == pytest.approx(0.0)


def test_the_floor_bounds_a_prefill_pass_from_below(registry) -> None:
    """Figure 3's h t1 already holds the fixed costs of a pass; the floor binds only when it is
    larger (a tiny model on a fast GPU)."""
    model = registry.model("deepseek-v3.2")
    node = registry.node("dualpath-hopper")
    gpu = registry.gpu(node.gpu)
    kw = dict(hit_bytes=1e9, context_tokens=32_000.0, layerwise=True, io_free=False, nodes=2)
    big = prefill_engine(model, node, gpu, prefill_flops=5e13, **kw)
    assert big.t0_s == pytest.approx(node.prefill_batch_half_requests * big.t1_s)
    small = prefill_engine(model, node, gpu, prefill_flops=1e9, **kw)
    floor = layer_floor_s(model, node, gpu, 8, 0.0, bandwidth=False)
    assert (
        small.t0_s == pytest.approx(floor) and floor > node.prefill_batch_half_requests * small.t1_s
    )


# --- the speed-of-light upper bound --------------------------------------------------------


@settings(
    max_examples=UPPER_BOUND_EXAMPLES,
    deadline=None,
)
@given(
    node=st.sampled_from(STOCK_NODES),
    model=st.sampled_from(["deepseek-v3.2", "ds-27b", "qwen2.5-32b", "llama-3.1-70b"]),
    workload=st.sampled_from(["paper-32k", "paper-64k"]),
    p=st.integers(1, 8),
    d=st.integers(1, 12),
    agents=st.sampled_from([64, 2048, 16384]),
)
def test_speed_of_light_upper_bounds_the_defaults(node, model, workload, p, d, agents) -> None:
    """Every efficiency 1, no reserve, no floors: throughput, APS and the decode rate never
    lower, JCT and the step time of any decode batch never higher, in every mode, than with
    the nodes' calibration. (TTFT under load and TPOT at the operating point are not bounded:
    a faster cluster runs bigger batches, whose steps take longer, and returns agents sooner,
    so more of them queue at prefill.)"""
    try:
        sc = Scenario.from_ids(
            REGISTRY, node=node, model=model, workload=workload, prefill_nodes=p, decode_nodes=d
        )
        cfg = ServingConfig(agents=agents)
        real = evaluate(sc, cfg, strict=False)
    except PlanInputError as exc:  # weights that do not fit: no answer to bound
        assert "fit" in str(exc) or "hold" in str(exc), exc
        return
    light_sc = replace(sc, options=replace(sc.options, efficiencies=False))
    light = evaluate(light_sc, cfg, strict=False)
    tol = 1e-9
    for m, o in real.modes.items():
        u = light.modes[m]
        assert u.throughput_turns_per_s >= o.throughput_turns_per_s * (1 - tol), m
        assert u.jct_s <= o.jct_s * (1 + tol), m
        assert u.aps >= o.aps * (1 - 1e-6), m
    batches = np.array([1.0, 8.0, 64.0, 512.0])
    slow = saturated(sc, "dualpath", sc.prefill_nodes, sc.decode_nodes).assembly.de.decode
    fast = saturated(light_sc, "dualpath", sc.prefill_nodes, sc.decode_nodes).assembly.de.decode
    assert slow is not None and fast is not None
    assert np.all(fast.step_array_s(batches) <= slow.step_array_s(batches) * (1 + tol))


def test_speed_of_light_through_the_cli(cli) -> None:
    real = cli("size", "--node", "dgx-h200", "--json").json()
    light = cli("size", "--node", "dgx-h200", "--speed-of-light", "--json").json()
    assert light["efficiencies"]["source"] == "speed-of-light"
    assert not light["efficiencies"]["in_force"]
    assert light["intervals"]["reason"].startswith("no interval: speed of light")
    for m in real["modes"]:
        assert (
            light["modes"][m]["throughput_turns_per_s"]
            >= real["modes"][m]["throughput_turns_per_s"]
        )
    for command in ("paths", "bounds", "recommend", "sweep"):
        assert cli(command, "--speed-of-light", "--help").code == 0, command


# --- intervals -----------------------------------------------------------------------------


def test_the_paper_default_interval_contains_the_paper_jct(cli) -> None:
    """The paper's DualPath JCT at 2048 agents (Figure 12 right, about 5,450 s) lies in the
    95% interval that size derives from the calibration's standard errors."""
    data = cli("size", "--json").json()
    low, high = data["modes"]["dualpath"]["jct_s_interval"]
    assert low < 5450 < high
    assert low < data["modes"]["dualpath"]["jct_s"] < high
    assert data["intervals"]["confidence"] == 0.95
    assert "node.prefill_mfu" in data["intervals"]["fields"]
    text = cli("size").out
    assert "h to" in text and "intervals: 95%" in text


def test_an_uncalibrated_node_says_so(cli, tmp_path) -> None:
    path = copy_profile(tmp_path, "node", "dgx-h200")
    text = path.read_text()
    text = text.replace(
        'efficiency_source = "transferred"\nefficiencies_from = "dualpath-hopper"\n', ""
    )
    text = "\n".join(line for line in text.splitlines() if not line.startswith("efficiencies_from"))
    path.write_text(text + "\n")
    data = cli("size", "--profiles", str(tmp_path / "profiles"), "--node", "dgx-h200", "--json")
    assert data.code == 0, data.err
    payload = data.json()
    assert payload["efficiencies"]["source"] == "datasheet"
    assert payload["intervals"]["reason"] == (
        "no interval: node 'dgx-h200' not calibrated (no calibration_stderr in its profile)"
    )
    # Every calibrated field set on the command line: its errors are gone, and it says so.
    sets = [
        a
        for f in ("snic_efficiency", "prefill_mfu", "prefill_hbm_reserve_gbyte", "layer_fixed_s")
        for a in ("--set", f"node.{f}={0.0005 if f.endswith('_s') else 0.5}")
    ]
    reason = cli(*sets, "size", "--json").json()["intervals"]["reason"]
    assert reason.startswith("no interval: node 'dualpath-hopper' measured, without") and (
        "--set" in reason
    )
    # The workload's fitted spread has an error of its own, but alone it would make a
    # datasheet upper bound look known to a few percent.
    assert all(m["jct_s_interval"] is None for m in payload["modes"].values())


def test_one_uncalibrated_node_in_the_cluster_means_no_interval(cli, tmp_path) -> None:
    # A calibrated decode node beside a datasheet prefill node gave intervals from the
    # decode node's errors alone, while the datasheet side bound basic's throughput.
    path = copy_profile(tmp_path, "node", "dgx-h200")
    text = path.read_text().replace('efficiency_source = "transferred"\n', "")
    path.write_text(
        "\n".join(ln for ln in text.splitlines() if not ln.startswith("efficiencies_from")) + "\n"
    )
    profiles = str(tmp_path / "profiles")
    for pre, dec, side in (
        ("dgx-h200", "dualpath-hopper", "prefill"),
        ("dualpath-hopper", "dgx-h200", "decode"),
    ):
        args = ("size", "--profiles", profiles, "--prefill-node", pre, "--decode-node", dec)
        data = cli(*args, "--json")
        assert data.code == 0, data.err
        payload = data.json()
        assert payload["intervals"]["reason"] == (
            f"no interval: {side} node 'dgx-h200' not calibrated "
            "(no calibration_stderr in its profile)"
        )
        assert all(m["jct_s_interval"] is None for m in payload["modes"].values())
        assert f"{side} node 'dgx-h200' not calibrated" in cli(*args).out
    # Both calibrated (the stock dgx-h200 transfers dualpath-hopper's): intervals.
    data = cli("size", "--prefill-node", "dgx-h200", "--decode-node", "dualpath-hopper", "--json")
    assert data.json()["intervals"].get("reason") is None
    assert all(m["jct_s_interval"] is not None for m in data.json()["modes"].values())


def test_interval_is_log_symmetric_and_grows_with_the_error() -> None:
    i = interval(100.0, [(90.0, 110.0, 1.0)])
    assert isinstance(i, Interval)
    assert i.low * i.high == pytest.approx(100.0**2)
    wider = interval(100.0, [(80.0, 125.0, 1.0)])
    assert wider is not None and wider.low < i.low and wider.high > i.high
    assert interval(0.0, [(0.0, 1.0, 1.0)]) is None
    # A step cut in half by a bound counts twice as steep.
    half = interval(100.0, [(95.0, 105.0, 0.5)])
    assert half is not None and half.high == pytest.approx(i.high, rel=0.02)


def test_intervals_do_not_move_the_answer(registry) -> None:
    sc = Scenario.from_ids(registry)
    iv = mode_intervals(sc, ServingConfig())
    centre = evaluate(sc, strict=False).modes
    for m, values in iv.by_mode.items():
        for metric, i in values.items():
            v = getattr(centre[m], metric)
            assert i is not None and i.low <= v <= i.high, (m, metric)
            assert math.isfinite(i.low) and math.isfinite(i.high)
    assert Registry is not None and PathOptions is not None


def test_every_scenario_report_says_which_efficiencies_are_in_force(cli) -> None:
    """One line in the terminal, ``efficiencies`` in JSON: size, paths, bounds, recommend,
    sweep (and which of them a sweep's grid varies), the LP form of paths and aic check (which
    said nothing of the calibration it applied)."""
    commands = [
        ("size",),
        ("size", "--target-aps", "0.5"),
        ("size", "--aps", "0.3"),
        ("size", "--aps-curve", "0.1:0.5:3"),
        ("paths",),
        ("bounds",),
        ("recommend", "--budget-nodes", "6"),
        ("sweep", "--grid", "P=1:2", "--grid", "D=2:3"),
        ("paths", "--prefill-group", "dualpath-hopper:2", "--decode-group", "dgx-b200:3"),
        ("aic", "check", str(AIC_RESULT), "--node", "dualpath-hopper"),
    ]
    for args in commands:
        text = cli(*args)
        assert text.code == 0, (args, text.err)
        assert "efficiencies: dualpath-hopper" in text.out, args
        data = cli(*args, "--json").json()
        assert data["efficiencies"]["in_force"] is True, args
        assert data["efficiencies"]["nodes"][0]["efficiency_source"] == "measured", args
    varied = cli("sweep", "--grid", "P=2", "--grid", "D=4", "--grid", "node.prefill_mfu=0.1,0.2")
    assert "varied by --grid: node.prefill_mfu" in varied.out


def test_recommend_gives_the_interval_of_each_recommended_split(cli) -> None:
    data = cli("recommend", "--budget-nodes", "8", "--json").json()
    for mode, rec in data["recommended"].items():
        low, high = rec["jct_s_interval"]
        split = next(
            c
            for c in data["candidates"]
            if (c["prefill_nodes"], c["decode_nodes"])
            == (rec["prefill_nodes"], rec["decode_nodes"])
        )
        assert low < split["modes"][mode]["jct_s"] < high, mode
    assert data["intervals"]["confidence"] == 0.95


def test_validate_says_which_efficiencies_its_cluster_cases_use(kept_cli) -> None:
    data = kept_cli("validate", "--json").json()
    sources = [e["source"] for e in data["efficiencies"]]
    # the calibrated testbed, and the paper's assumptions (bounds cases) at the speed of light
    assert sources == ["measured", "speed-of-light"]
    # The text report of the cluster cases alone (every case again would be seconds more: the
    # JSON above ran them all).
    text = kept_cli("validate", "--only", "figure7-*").out
    assert "efficiencies in the cluster cases: dualpath-hopper" in text


@pytest.mark.parametrize(
    "model", ["deepseek-v3.2", "ds-27b", "gpt-oss-120b", "qwen3-235b-a22b", "llama-3.1-70b"]
)
@pytest.mark.parametrize("decode_nodes", [1, 4, 16])
def test_a_decode_step_reads_at_least_what_one_gpu_must(registry, model, decode_nodes) -> None:
    """The layout's weight-read floor, at the speed of light: under expert parallelism with
    data-parallel attention every GPU reads the replicated weights each step; under tensor
    parallelism a node reads its replica's weights. Adding nodes never beats it."""
    from dualpath_plan.physics import model as phys
    from dualpath_plan.physics.engines import decode_group, weights_fit
    from dualpath_plan.physics.latency import replicated_weight_bytes, uses_expert_parallelism

    m = registry.model(model)
    node = registry.node("dgx-h200")
    gpu = registry.gpu(node.gpu)
    if not bool(weights_fit(m, node, gpu, decode_nodes)):
        return
    group = decode_group(m, node, gpu, decode_nodes, 32_000.0, 200.0, efficiencies=False)
    gpu_bw = gpu.hbm_tbyte_s * 1e12
    # What a step reads of the weights besides the routed experts (the embedding is a lookup).
    one = phys.decode_step(m, 1.0, 32_000.0)
    unrouted = float(one.weight_bytes - one.routed_weight_bytes)
    if uses_expert_parallelism(m):
        floor = unrouted / gpu_bw
    else:
        floor = unrouted / (node.gpus_per_node * gpu_bw)
    steps = group.step_array_s(np.array([1.0, 16.0, 256.0]))
    assert np.all(steps >= floor * (1 - 1e-12)), (steps, floor)
    # Weights per GPU: the replicated part and a share of the rest.
    held = float(np.asarray(group.gpus) * gpu.hbm_gbyte * 1e9 - np.asarray(group.free_hbm_bytes))
    expected = (
        decode_nodes * node.gpus_per_node * replicated_weight_bytes(m) + phys.routed_expert_bytes(m)
        if uses_expert_parallelism(m)
        else decode_nodes * phys.weight_bytes(m)
    )
    assert held == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        (('efficiencies_from = "dualpath-hopper"', 'efficiencies_from = "nope"'), "no node"),
        (
            ('efficiencies_from = "dualpath-hopper"', 'efficiencies_from = "dgx-h100"'),
            "not 'measured'",
        ),
        (('efficiency_source = "transferred"\n', 'efficiency_source = "datasheet"\n'), "only for"),
        (
            ("[sources]", "[calibration_stderr]\ngpus_per_node = 1.0\n\n[sources]"),
            "not a calibration field",
        ),
    ],
)
def test_profiles_validate_checks_a_nodes_calibration(cli, tmp_path, edit, expect) -> None:
    path = copy_profile(tmp_path, "node", "dgx-h200")
    path.write_text(path.read_text().replace(*edit, 1))
    result = cli("profiles", "validate", str(path))
    assert result.code == 2 and expect in result.out + result.err, result.out + result.err


def test_a_measured_node_must_measure_something(cli, tmp_path) -> None:
    path = copy_profile(tmp_path, "node", "dgx-h200")
    text = path.read_text().replace(
        'efficiency_source = "transferred"', 'efficiency_source = "measured"'
    )
    text = "\n".join(line for line in text.splitlines() if not line.startswith("efficiencies_from"))
    path.write_text(text + "\n")
    result = cli("profiles", "validate", str(path))
    assert (
        result.code == 2
        and "every calibration field is at its datasheet" in result.out + result.err
    )


def test_an_infeasible_cluster_names_the_flag_to_change(cli) -> None:
    """Errors about a scenario input name its flags, as the option parser does."""
    result = cli("size", "-P", "1", "-D", "1")
    assert result.code == 2 and "field '-P/--prefill-nodes'" in result.err
    assert result.err.count("\n") == 1


def test_where_efficiencies_come_from_is_not_set_on_the_command_line(cli) -> None:
    for field in ("efficiencies_from=nope", "efficiency_source=datasheet"):
        result = cli("size", "--node", "dgx-h100", "--set", f"node.{field}")
        assert result.code == 2 and "cannot be set on the command line" in result.err
    # The GPU is --gpu, whose reports say the calibration was measured on another GPU (with
    # --set node.gpu they said 'measured' and gave its intervals: found in a trial).
    result = cli("size", "--set", "node.gpu=b200")
    assert result.code == 2 and "give --gpu" in result.err
    assert "calibrated with h800-sxm, run on b200" in cli("size", "--gpu", "b200").out


def test_a_value_set_on_the_command_line_is_not_the_fits(cli) -> None:
    """--set replaces a fitted value: it loses the fit's standard error (no interval term, no
    '±' in profiles show) and cites the command line."""
    data = cli("size", "--set", "workload.turns_spread=0.9", "--json").json()
    assert "workload.turns_spread" not in data["intervals"]["fields"]
    shown = cli("profiles", "show", "dgx-h100", "--set", "node.snic_efficiency=0.9", "--json")
    payload = shown.json()
    assert "snic_efficiency" not in payload["calibration_stderr"]
    assert payload["sources"]["snic_efficiency"] == ["set on the command line (--set)"]


def test_one_fit_moves_every_node_it_calibrates_together(registry) -> None:
    """Prefill and decode nodes that both take the testbed's fit are one fitted value each,
    not two independent ones; a field their engine profiles replace (prefill_mfu) is not
    moved at all."""
    from dualpath_plan.outcomes.uncertainty import perturbations

    sc = Scenario.from_ids(registry, prefill_node="dgx-h100", decode_node="dgx-h200")
    moves = perturbations(sc)
    fields = [f"{p.kind}.{p.field}" for p in moves]
    assert len(fields) == len(set(fields))
    assert "prefill_mfu" not in {p.field for p in moves}
    snic = next(p for p in moves if p.field == "snic_efficiency")
    assert snic.above.prefill_node.snic_efficiency == snic.above.decode_node.snic_efficiency
    assert snic.above.prefill_node.snic_efficiency > 0.512
    mixed = Scenario.from_ids(registry, prefill_node="dgx-a100", decode_node="dualpath-hopper")
    mfu = next(p for p in perturbations(mixed) if p.field == "prefill_mfu")
    assert mfu.above.prefill_node.prefill_mfu == mfu.above.decode_node.prefill_mfu > 0.1302


@settings(max_examples=15, deadline=None)
@given(
    cv=st.floats(0.0, 5.0),
    more=st.floats(0.01, 3.0),
    p=st.integers(2, 4),
    d=st.integers(2, 8),
)
def test_burstier_arrivals_never_raise_the_aps(cv, more, p, d) -> None:
    """Arrivals of squared variation c^2 scale the queueing waits (Kingman); Poisson (cv 1) is
    the model as before, and a burstier trace never serves more agents/s."""
    from dualpath_plan.outcomes.serving import evaluate_mode

    sc = Scenario.from_ids(REGISTRY, prefill_nodes=p, decode_nodes=d)

    def aps(c: float) -> float:
        w = sc.workload.model_copy(update={"arrival_cv": c})
        return evaluate_mode(replace(sc, workload=w), "dualpath", ServingConfig()).aps

    assert aps(cv + more) <= aps(cv) * (1 + 1e-9)
    assert aps(1.0) == evaluate_mode(sc, "dualpath", ServingConfig()).aps


@settings(max_examples=15, deadline=None)
@given(
    c=st.floats(0.0, 3.0),
    load=st.floats(0.05, 0.6),
    p=st.integers(2, 4),
    d=st.integers(2, 8),
    mode=st.sampled_from(["basic", "dualpath"]),
)
# Poisson's block reads exact and the others a diffusion form: the reads fell from c^2 = 1 to 2.
@example(c=1.0, load=0.25, p=2, d=2, mode="basic")
def test_arrival_variation_scales_the_queueing_waits_by_c_squared(c, load, p, d, mode) -> None:
    """INV-29, Kingman: with arrivals of coefficient of variation c, every FIFO queueing wait is
    c^2 times Poisson's (c = 1); the batches' variation rises with c^2 (the own pass and the
    running pass's residual never fall) and round robin's processor-shared block reads only
    rise with c; where the batches do not vary, TTFT(c) - TTFT(0) equals c^2 (TTFT(1) -
    TTFT(0)), where the running pass's residual does not cap the wait. TPOT
    does not depend on c. And with no headroom cap (max utilization 1) a burstier trace serves
    strictly fewer agents/s wherever the TTFT SLO sets the APS."""
    import dataclasses

    from dualpath_plan.outcomes.online import online_queue
    from dualpath_plan.outcomes.serving import evaluate_mode
    from dualpath_plan.scenario.assemble import assemble
    from dualpath_plan.solvers.closed_form import solve

    sc = Scenario.from_ids(REGISTRY, prefill_nodes=p, decode_nodes=d)
    asm = assemble(sc, mode, sc.prefill_nodes, sc.decode_nodes)
    sol = solve(asm.links)
    q = online_queue(sc, asm, sol)
    rate = np.array(
        [load * float(sol.throughput_turns_per_s) / sc.turn_demand.trajectory_turns.mean]
    )

    def at(c2: float) -> tuple[float, float]:
        # Less round robin's processor-shared block reads (basic: Kraemer and
        # Langenbach-Belz's factor between blocks, not linear in c^2; checked apart below).
        moved = dataclasses.replace(q, arrival_cv2=c2)
        ttft, tpot = moved.at(rate)
        return float(ttft[0] - moved.waits(rate).shared_s[0]), float(tpot[0])

    def shared(c2: float) -> float:
        return float(dataclasses.replace(q, arrival_cv2=c2).waits(rate).shared_s[0])

    # The block reads never fall as the arrivals get burstier.
    assert shared(0.0) <= shared(1.0) * (1 + 1e-12) + 1e-15
    assert shared(1.0) <= shared(1.0 + c * c) * (1 + 1e-12) + 1e-15
    (t0, s0), (t1, s1), (tc, sc_) = at(0.0), at(1.0), at(c * c)
    parts = {c2: dataclasses.replace(q, arrival_cv2=c2).waits(rate) for c2 in (0.0, 1.0, c * c)}
    # Kingman: the FIFO queues' waits (the batches', the reads') are c^2 times Poisson's.
    q0, q1, qc = (float(parts[c2].queued_s[0]) for c2 in (0.0, 1.0, c * c))
    assert qc - q0 == pytest.approx(c * c * (q1 - q0), rel=1e-9, abs=1e-15)
    # A GPU's batches vary as its arrivals do (INV-104): the turn's own pass and the running
    # pass's residual only rise with c^2.
    for part in ("fixed_s", "residual_s"):
        by_c2 = [float(getattr(parts[c2], part)[0]) for c2 in sorted(parts)]
        assert by_c2 == sorted(by_c2), part
    # Where the batches do not vary (below one request a pass), and the running pass's wait is
    # under its residual, half a pass of at least one request, nothing caps the scaling.
    half_pass = float(np.ravel(q.prefill.t0_s + q.prefill.u_s)[0]) / 2
    fixed = {float(parts[c2].fixed_s[0]) for c2 in parts}
    if len(fixed) == 1 and max(tc, t1) - t0 <= half_pass:
        assert tc - t0 == pytest.approx(c * c * (t1 - t0), rel=1e-9, abs=1e-12)
    assert s0 == s1 == sc_
    assert t1 > t0  # Poisson arrivals do wait

    def aps(cv: float) -> tuple[float, str]:
        w = sc.workload.model_copy(update={"arrival_cv": cv})
        r = evaluate_mode(replace(sc, workload=w), mode, ServingConfig(max_utilization=1.0))
        return r.aps, r.aps_limit

    (calm, limit), (bursty, _) = aps(c), aps(c + 1.0)
    assert bursty <= calm * (1 + 1e-9)
    if limit == "ttft":
        assert bursty < calm


def test_size_gives_the_modes_that_run_and_says_why_the_others_cannot(cli) -> None:
    """A cluster basic cannot run (no room for a whole request's KV without layer-wise
    prefill) still gets the other modes' answers; the JSON names the missing mode's reason
    and the ratios it would enter are null, never NaN."""
    args = ("--set", "workload.context_tokens=150000", "--set", "workload.max_len_tokens=150429")
    args += ("--set", "node.prefill_hbm_reserve_gbyte=18")
    result = cli("size", *args, "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert "basic" not in data["modes"] and "dualpath" in data["modes"]
    assert "cannot hold one request's KV" in data["infeasible"]["basic"]
    assert data["speedup"] == {"jct": None, "aps": None}
    assert "basic: cannot run this cluster" in cli("size", *args).out
    # No mode at all: one line, exit 2, naming the flag.
    none = cli("size", "--model", "kimi-k2", "-D", "4")
    assert none.code == 2 and "no mode can run this cluster" in none.err
    assert "-P/--prefill-nodes" in none.err and none.err.count("\n") == 1


@settings(max_examples=20, deadline=None)
@given(
    snic=st.floats(10.0, 400.0),
    p=st.integers(1, 8),
    d=st.integers(1, 32),
    model=st.sampled_from(["deepseek-v3.2", "llama-3.1-70b"]),
    mode=st.sampled_from(["even", "dualpath"]),
)
def test_the_aps_does_not_jump_between_rounding_steps_of_a_link_rate(snic, p, d, model, mode):
    """INV-57: where a balanced split makes the PE and DE read links tie, a turn still waits for
    its read on one side, and each side adds its wait on its share: the APS is
    continuous in a SNIC rate, and moving it by a few ulps (which decides which tied
    utilization rounds higher) moves the APS by no more than rounding (it jumped 2.35x)."""
    import math

    from hypothesis import assume

    from dualpath_plan.errors import InfeasibleError
    from dualpath_plan.outcomes.serving import evaluate_mode

    sc = Scenario.from_ids(REGISTRY, prefill_nodes=p, decode_nodes=d, model=model)

    def aps(rate: float) -> float:
        nodes = {
            "prefill_node": sc.prefill_node.model_copy(update={"snic_gbit_s": rate}),
            "decode_node": sc.decode_node.model_copy(update={"snic_gbit_s": rate}),
        }
        return evaluate_mode(replace(sc, **nodes), mode, ServingConfig()).aps

    try:
        here = aps(snic)
    except InfeasibleError:
        assume(False)  # the weights do not fit this cluster
    for near in (math.nextafter(snic, 0), math.nextafter(math.nextafter(snic, 1e9), 1e9)):
        assert aps(near) == pytest.approx(here, rel=1e-6, abs=1e-12)


@settings(max_examples=15, deadline=None)
@given(
    p=st.integers(2, 8),
    d=st.integers(1, 16),
    mode=st.sampled_from(["basic", "even", "dualpath"]),
    slo=st.floats(0.5, 8.0),
)
def test_the_aps_does_not_jump_where_storage_and_a_nodes_link_cross(p, d, mode, slo):
    """INV-57: a read waits in every I/O queue it passes (storage and a node's links), each
    taken on its own and summed: where a storage rate makes the storage link as busy as the
    nodes' busiest I/O link, the APS under a TTFT SLO (no headroom cap) on either side of that
    rate is the same to rounding (taking only the busiest queue's wait dropped it by 5% across
    1e-7 of the rate)."""
    from hypothesis import assume

    from dualpath_plan.errors import InfeasibleError
    from dualpath_plan.outcomes.serving import evaluate_mode
    from dualpath_plan.physics.links import LINK_TABLE
    from dualpath_plan.scenario.assemble import assemble
    from dualpath_plan.solvers.closed_form import solve

    sc = Scenario.from_ids(REGISTRY, prefill_nodes=p, decode_nodes=d)

    def with_storage(rate: float) -> Scenario:
        return replace(sc, storage=sc.storage.model_copy(update={"aggregate_read_gbyte_s": rate}))

    try:
        util = solve(assemble(sc, mode, p, d).links).utilization.reshape(-1)
    except InfeasibleError:
        assume(False)
    by = {k.name: float(u) for k, u in zip(LINK_TABLE, util, strict=True)}
    node = max(by[k.name] for k in LINK_TABLE if k.io and k.side != "storage")
    assume(node > 0 and by["storage_read"] > 0)
    # The storage rate at which storage_read is as busy as the nodes' busiest I/O link (the
    # throughput does not move while neither binds).
    crossing = sc.storage.aggregate_read_gbyte_s * by["storage_read"] / node

    def aps(rate: float) -> float:
        cfg = ServingConfig(max_utilization=1.0, ttft_slo_s=slo)
        return evaluate_mode(with_storage(rate), mode, cfg).aps

    below, above = aps(crossing * (1 - 1e-9)), aps(crossing * (1 + 1e-9))
    assert below == pytest.approx(above, rel=1e-6, abs=1e-12)
