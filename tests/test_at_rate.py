"""The online model at a given arrival rate (``rate_points``, ``size --aps``, ``--aps-curve``):
docs/invariants.md INV-37 to INV-40."""

from __future__ import annotations

import csv
import io
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dualpath_plan.errors import InfeasibleError, PlanInputError
from dualpath_plan.outcomes.at_rate import RatePoints, rate_points
from dualpath_plan.outcomes.online import online_queue
from dualpath_plan.outcomes.serving import evaluate_mode, runnable
from dualpath_plan.physics.modes import REPORT_MODES, ModeName
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ServingConfig
from tests.conftest import trace_workload

REGISTRY = Registry.load(use_env=False)
MODELS = ["deepseek-v3.2", "ds-27b", "qwen2.5-32b", "llama-3.1-70b"]


def _scenario(model: str, workload: str, p: int, d: int) -> Scenario | None:
    """A random cluster, or None where its weights do not fit (no answer to check)."""
    try:
        return Scenario.from_ids(
            REGISTRY, model=model, workload=workload, prefill_nodes=p, decode_nodes=d
        )
    except PlanInputError:
        return None


def _points(sc: Scenario, mode: ModeName, rates: list[float]) -> RatePoints | None:
    try:
        return rate_points(sc, mode, np.asarray(rates, dtype=np.float64))
    except InfeasibleError:
        return None


clusters = st.tuples(
    st.sampled_from(MODELS),
    st.sampled_from(["paper-32k", "paper-64k"]),
    st.integers(1, 6),
    st.integers(1, 10),
    st.sampled_from(REPORT_MODES),
)


# --- INV-37: monotone in the rate; beyond capacity exactly past saturation or instability ----


@settings(max_examples=25, deadline=None)
@given(cluster=clusters, shares=st.lists(st.floats(0.0, 1.3), min_size=2, max_size=40))
# A rate of 1.7e-189 of capacity: the exact block wait's Erlang terms cancelled there (the
# series below y = 1 keeps them apart), and its TTFT came out above 12.5%'s.
@example(
    cluster=("deepseek-v3.2", "paper-32k", 2, 2, "basic"), shares=[0.125, 1.7352107440920554e-189]
)
# A pool of read links sized by the paper scheduler's ordered hunting grew with the rate and
# its wait fell (2 -> 3 links between 50% and 55% load): not in the model.
@example(cluster=("ds-27b", "paper-64k", 2, 1, "dualpath"), shares=[0.5, 0.75])
def test_ttft_and_tpot_never_fall_as_the_rate_rises(cluster, shares) -> None:
    model, workload, p, d, mode = cluster
    sc = _scenario(model, workload, p, d)
    if sc is None:
        return
    probe = _points(sc, mode, [0.0])
    if probe is None:
        return
    # Rates as shares of the saturated rate, so that every draw crosses the interesting range.
    rates = np.sort(np.asarray(shares)) * probe.capacity_aps
    r = rate_points(sc, mode, rates)
    for a, b in ((r.ttft_s, "ttft"), (r.tpot_s, "tpot")):
        finite = a[~r.beyond]
        assert np.all(np.diff(finite) >= -1e-12 * finite[1:]), b
    # Once beyond, every higher rate is too.
    if r.beyond.any():
        assert r.beyond[int(np.argmax(r.beyond)) :].all()
    assert np.all(np.diff(r.agent_jct_s[~r.beyond]) >= -1e-9)
    assert np.all(np.diff(r.utilization) >= 0)


@settings(max_examples=25, deadline=None)
@given(cluster=clusters, shares=st.lists(st.floats(0.0, 2.0), min_size=1, max_size=20))
def test_beyond_capacity_exactly_at_saturation_or_an_unstable_queue(cluster, shares) -> None:
    model, workload, p, d, mode = cluster
    sc = _scenario(model, workload, p, d)
    if sc is None:
        return
    try:
        sat, t_max = runnable(sc, mode)
    except InfeasibleError:
        return
    q = online_queue(sc, sat.assembly, sat.solution)
    turns = sc.turn_demand.trajectory_turns.mean
    cap = t_max / turns
    # The drawn shares, and the saturated rate itself and its floating-point neighbours.
    rates = np.asarray([*(s * cap for s in shares), cap, np.nextafter(cap, 0), cap * (1 + 1e-12)])
    r = rate_points(sc, mode, rates)
    ttft, tpot = q.at(rates)
    unstable = ~(np.isfinite(ttft) & np.isfinite(tpot))
    expected = (rates * turns >= t_max) | unstable
    assert np.array_equal(r.beyond, expected)
    assert r.beyond[-1]  # just past the saturated rate
    for name in ("ttft_s", "tpot_s", "agent_jct_s", "kv_working_set_gbyte"):
        values = getattr(r, name)
        assert np.all(np.isinf(values[r.beyond])) and np.all(np.isfinite(values[~r.beyond]))
    assert np.all(np.isfinite(r.utilization))
    assert r.utilization == pytest.approx(rates * turns / t_max, rel=1e-15)
    for i, why in enumerate(r.reasons()):
        assert (why is None) == (not r.beyond[i])
        assert why is None or (why.startswith("beyond capacity") and "inf" not in why)


# --- INV-38: one online model; one working set and one agent time ---------------------------


@settings(max_examples=25, deadline=None)
@given(
    cluster=clusters,
    ttft=st.sampled_from([1.0, 4.0, 20.0]),
    tpot=st.sampled_from([0.03, 0.05, 0.2]),
    u=st.sampled_from([0.5, 0.8, 1.0]),
)
def test_at_the_aps_the_rate_model_is_size(cluster, ttft, tpot, u) -> None:
    model, workload, p, d, mode = cluster
    sc = _scenario(model, workload, p, d)
    if sc is None:
        return
    cfg = ServingConfig(ttft_slo_s=ttft, tpot_slo_s=tpot, max_utilization=u)
    try:
        o = evaluate_mode(sc, mode, cfg)
    except InfeasibleError:
        return
    if o.aps_limit == "unreachable":  # no rate: size reports what one agent sees
        return
    r = rate_points(sc, mode, np.array([o.aps]))
    # The same function at the same input: equal, not merely close.
    assert r.ttft_s[0] == o.online_ttft_s and r.tpot_s[0] == o.online_tpot_s
    assert r.kv_working_set_gbyte[0] == o.working_set_gbyte
    assert r.utilization[0] == o.binding_utilization
    assert not r.beyond[0]
    demand = sc.turn_demand
    agent = demand.trajectory_turns.mean * (
        o.online_ttft_s
        + demand.mean(demand.generated_tokens) * o.online_tpot_s
        + sc.workload.tool_latency_s
    )
    assert r.agent_jct_s[0] == pytest.approx(agent, rel=1e-12)
    assert r.saturated_turns_per_s == o.saturated_turns_per_s


def test_rates_over_an_array_equal_each_rate_alone() -> None:
    sc = Scenario.from_ids(REGISTRY)
    rates = np.linspace(0.0, 0.45, 19)
    for mode in REPORT_MODES:
        many = rate_points(sc, mode, rates)
        for i, x in enumerate(rates):
            one = rate_points(sc, mode, np.array([x]))
            for name in ("ttft_s", "tpot_s", "agent_jct_s", "kv_working_set_gbyte", "beyond"):
                assert getattr(one, name)[0] == getattr(many, name)[i], (mode, x, name)


def test_no_arrivals_hold_no_working_set_and_bad_rates_are_refused() -> None:
    sc = Scenario.from_ids(REGISTRY)
    r = rate_points(sc, "dualpath", np.array([0.0]))
    assert r.kv_working_set_gbyte[0] == 0.0 and r.utilization[0] == 0.0
    assert math.isfinite(r.ttft_s[0]) and not r.beyond[0]
    for bad in (-0.1, math.nan, math.inf):
        with pytest.raises(ValueError):
            rate_points(sc, "dualpath", np.array([bad]))


def test_a_mode_that_cannot_run_says_why_as_size_does(cli) -> None:
    # A 20 GB reserve leaves a prefill GPU less than one request's KV: basic (no layer-wise
    # prefill) cannot run, the others can; --aps says so in size's words.
    args = ("size", "--set", "node.prefill_hbm_reserve_gbyte=20", "--json")
    size = cli(*args).json()
    at = cli(*args, "--aps", "0.1").json()
    assert set(at["infeasible"]) == {"basic"} and at["infeasible"] == size["infeasible"]
    assert set(at["modes"]) == set(size["modes"]) == set(REPORT_MODES) - {"basic"}
    text = cli(*args[:-1], "--aps", "0.1").out
    assert "basic: cannot run this cluster: in basic, a prefill GPU cannot hold" in text
    nothing = cli("size", "-P", "1", "--aps", "0.1")  # the weights fit in no mode
    assert nothing.code == 2 and "no mode can run this cluster" in nothing.err


# --- INV-39: size --aps and --aps-curve reports -------------------------------------------


RATE_KEYS = {
    "ttft_s",
    "tpot_s",
    "agent_jct_s",
    "kv_working_set_gbyte",
    "utilization",
    "beyond_capacity",
    "reason",
}


def test_size_aps_json_gives_every_mode_at_the_rate(cli) -> None:
    data = cli("size", "--aps", "0.3", "--json").json()
    assert data["inputs"]["aps"] == 0.3
    assert data["efficiencies"]["line"].startswith("efficiencies:")
    size = cli("size", "--json").json()
    assert set(data["modes"]) | set(data["infeasible"]) == set(size["modes"]) | set(
        size["infeasible"]
    )
    for m, o in data["modes"].items():
        assert set(o) >= RATE_KEYS, m
        cap = o["saturated_turns_per_s"]
        assert o["beyond_capacity"] == (o["turns_per_s"] >= cap)
        assert o["utilization"] == pytest.approx(o["turns_per_s"] / cap)
    basic = data["modes"]["basic"]  # 47 turns/s, over basic's 32 turns/s
    assert basic["beyond_capacity"] and basic["ttft_s"] is None and basic["tpot_s"] is None
    assert basic["agent_jct_s"] is None and basic["kv_working_set_gbyte"] is None
    assert basic["reason"].startswith("beyond capacity (rate 0.3 agents/s = ")
    assert ">= saturated" in basic["reason"] and basic["slo_met"] is False
    dp = data["modes"]["dualpath"]
    assert not dp["beyond_capacity"] and dp["reason"] is None and dp["ttft_s"] > 0


def test_size_aps_at_the_size_aps_repeats_size(cli) -> None:
    size = cli("size", "--json").json()["modes"]["dualpath"]
    at = cli("size", "--aps", repr(size["aps"]), "--json").json()["modes"]["dualpath"]
    assert at["ttft_s"] == size["online_ttft_s"] and at["tpot_s"] == size["online_tpot_s"]
    assert at["kv_working_set_gbyte"] == size["kv_working_set_gbyte"]
    assert at["utilization"] == size["binding_utilization"]


def test_size_aps_text_says_beyond_capacity_and_never_inf(cli) -> None:
    result = cli("size", "--aps", "0.3")
    assert result.code == 0, result.err
    text = result.out
    assert "online at 0.3 agents/s" in text and "agent JCT" in text
    assert "basic: beyond capacity (rate 0.3 agents/s = " in text
    assert "\nefficiencies: " in text
    for word in ("inf", "nan", "NaN"):
        assert word not in text.replace("infeasible", "")
    over = cli("size", "--aps", "5").out  # every mode beyond
    assert over.count("beyond capacity (rate 5 agents/s") == 4


def test_size_aps_curve_table_and_json(cli) -> None:
    result = cli("size", "--aps-curve", "0.05:0.6:12")
    assert result.code == 0, result.err
    text = result.out
    assert "basic TTFT" in text and "dualpath TPOT" in text and "beyond" in text
    assert "\nefficiencies: " in text and "inf" not in text
    data = cli("size", "--aps-curve", "0.05:0.6:12", "--json").json()
    assert data["aps"] == pytest.approx(list(np.linspace(0.05, 0.6, 12)))
    for m, o in data["modes"].items():
        assert set(o) >= RATE_KEYS, m
        assert all(len(o[k]) == 12 for k in RATE_KEYS)
        ttft = [v for v in o["ttft_s"] if v is not None]
        assert ttft == sorted(ttft)
        for v, beyond in zip(o["ttft_s"], o["beyond_capacity"], strict=True):
            assert (v is None) == beyond
    assert data["out"] is None


def test_size_aps_curve_writes_csv(cli, tmp_path) -> None:
    out = tmp_path / "curve.csv"
    result = cli("size", "--aps-curve", "0:0.5:6", "--out", str(out), "--json")
    assert result.code == 0, result.err
    data = result.json()
    assert data["out"] == str(out)
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == 6 * len(data["modes"])
    for row in rows:
        o = data["modes"][row["mode"]]
        i = data["aps"].index(float(row["aps"]))
        beyond = row["beyond_capacity"] == "true"
        assert beyond == o["beyond_capacity"][i]
        assert (row["ttft_s"] == "") == beyond and (row["reason"] != "") == beyond
        if not beyond:
            assert float(row["ttft_s"]) == o["ttft_s"][i]
            assert float(row["agent_jct_s"]) == o["agent_jct_s"][i]
    assert not list(tmp_path.glob(".*tmp"))  # the temporary file renamed into place


def test_size_aps_curve_writes_an_svg_chart_with_the_slo(cli, tmp_path) -> None:
    out = tmp_path / "curve.svg"
    result = cli("size", "--aps-curve", "0.05:0.6:12", "--out", str(out), "--ttft-slo", "3")
    assert result.code == 0, result.err
    assert f"wrote {out}" in result.out
    svg = out.read_text()
    root = ET.fromstring(svg)  # well-formed
    ns = "{http://www.w3.org/2000/svg}"
    lines = {e.get("data-mode") for e in root.iter(f"{ns}polyline")}
    assert lines == set(REPORT_MODES)
    slo = [e for e in root.iter(f"{ns}line") if e.get("class") == "slo"]
    assert len(slo) == 1 and slo[0].get("y1") == slo[0].get("y2")
    texts = " ".join(e.text or "" for e in root.iter(f"{ns}text"))
    assert "TTFT SLO 3 s" in texts and "arrival rate (agents/s)" in texts
    assert "efficiencies:" in texts and "inf" not in svg.lower().replace("info", "")
    assert "nan" not in svg.lower()


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("--aps", "0"), "--aps"),
        (("--aps", "-1"), "--aps"),
        (("--aps", "nan"), "--aps"),
        (("--aps", "inf"), "--aps"),
        (("--aps", "abc"), "--aps"),
        (("--aps-curve", "0.5:0.1:4"), "--aps-curve"),
        (("--aps-curve", "0.1:0.5"), "--aps-curve"),
        (("--aps-curve", "0.1:0.5:1"), "--aps-curve"),
        (("--aps-curve", "0.1:0.5:x"), "--aps-curve"),
        (("--aps-curve", "-1:0.5:3"), "--aps-curve"),
        (("--aps-curve", "0.1:nan:3"), "--aps-curve"),
        (("--aps-curve", "0.1:0.5:100000"), "--aps-curve"),
        (("--aps", "0.3", "--aps-curve", "0.1:0.5:3"), "--aps-curve"),
        (("--aps", "0.3", "--target-aps", "0.3"), "--aps"),
        (("--aps-curve", "0.1:0.5:3", "--deadline", "100"), "--aps-curve"),
        (("--aps", "0.3", "--out", "x.csv"), "--out"),
        (("--aps-curve", "0.1:0.5:3", "--out", "x.png"), "--out"),
    ],
)
def test_bad_rate_flags_are_one_line_exit_2(cli, args, flag) -> None:
    result = cli("size", *args)
    assert result.code == 2, (args, result.out)
    assert result.err.count("\n") == 1 and flag in result.err, result.err
    assert "Traceback" not in result.err and result.out == ""


def test_the_curve_never_overwrites_an_input(cli, tmp_path) -> None:
    # A trace workload's rows are a .csv: --out naming it is refused, the trace left intact.
    header = "trajectory_id,append_tokens,generated_tokens"
    trace = trace_workload(tmp_path, "mine", [header] + [f"{t},400,150" for t in range(4)] * 5)
    before = trace.read_bytes()
    args = ("size", "--profiles", str(tmp_path / "profiles"), "--workload", "mine")
    assert cli(*args, "--aps", "0.1").code == 0
    result = cli(*args, "--aps-curve", "0.1:0.2:3", "--out", str(trace))
    assert result.code == 2 and "--out" in result.err and "input" in result.err, result.err
    assert trace.read_bytes() == before


def test_help_describes_the_rate_flags(cli) -> None:
    text = cli("size", "--help").out
    assert "--aps-curve" in text and "LO:HI:N" in text and "--out" in text


def test_readme_rate_example_is_what_size_prints(cli) -> None:
    # INV-16: the README's size --aps example is the command's output.
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    start = readme.index("$ dualpath-plan size --aps 0.3\n") + len(
        "$ dualpath-plan size --aps 0.3\n"
    )
    end = readme.index("```", start)
    result = cli("size", "--aps", "0.3")
    assert result.code == 0
    assert readme[start:end].strip() == result.out.strip()
