"""Issue 11: one model, one answer. Every command reads the one assembly of a cluster, so the
same cluster gets the same throughput and the same binding links from size, paths, the LP
(one group per side), recommend's row for that split, sweep's row and check's metric; and a
regression test for each disagreement the issue found."""

from __future__ import annotations

import json
import math
import os
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dualpath_plan.errors import InfeasibleError
from dualpath_plan.outcomes.paths import bottleneck_free_range, explain_mixed, explain_paths
from dualpath_plan.outcomes.recommend import Budget, recommend
from dualpath_plan.outcomes.serving import evaluate_mode
from dualpath_plan.outcomes.sizing import smallest_cluster
from dualpath_plan.outcomes.sweep import parse_axis, run_sweep
from dualpath_plan.physics.links import LINK_TABLE, LINKS
from dualpath_plan.physics.modes import REPORT_MODES
from dualpath_plan.profiles.registry import Overrides
from dualpath_plan.reports.text_columns import format_float
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec
from dualpath_plan.solvers.lp import LP_TIGHT_REL
from dualpath_plan.validation.metrics import compute

EXAMPLES = int(os.environ.get("AGREEMENT_EXAMPLES", "25"))
NODES = ("dualpath-hopper", "dgx-h100", "dgx-h200", "dgx-b200", "hgx-b300")


@st.composite
def scenarios(draw):
    """Random homogeneous and two-group clusters: models, nodes, P, D, efficiencies and
    storage limits."""
    prefill = draw(st.sampled_from(NODES))
    decode = draw(st.sampled_from(NODES)) if draw(st.booleans()) else prefill
    spec = {
        "model": draw(st.sampled_from(["deepseek-v3.2", "ds-27b", "qwen2.5-32b"])),
        "workload": draw(st.sampled_from(["paper-64k", "paper-32k", "agentic-22gb-pflop"])),
        "prefill_node": prefill,  # both sides named: --node would set neither (refused)
        "decode_node": decode,
        "storage": draw(st.sampled_from(["3fs", "none"])),
        "prefill_nodes": draw(st.integers(1, 6)),
        "decode_nodes": draw(st.integers(1, 6)),
    }
    sets = [
        f"node.{name}={draw(st.floats(0.2, 1.0)):.6g}"
        for name in ("snic_efficiency", "cnic_efficiency", "prefill_mfu", "dram_efficiency")
        if draw(st.booleans())
    ]
    if draw(st.booleans()):
        sets.append(f"storage.max_client_read_gbyte_s={draw(st.floats(5.0, 200.0)):.6g}")
    return spec, sets, draw(st.sampled_from(REPORT_MODES))


def _scenario(registry, spec_values, sets):
    reg = replace(registry, overrides=Overrides.parse(sets))
    spec = ScenarioSpec.build(spec_values)
    sc = Scenario.from_spec(reg, spec)
    try:
        out = evaluate_mode(sc, "basic", spec.serving)  # weights and one request fit
    except InfeasibleError:
        return None
    return reg, spec, sc if out.saturated_turns_per_s > 0 else None


def assert_lp_binding(closed_binding, utilization, lp_binding) -> None:
    """The LP names the closed form's binding links, wherever it can tell them apart: every
    other link further from binding than ten times its resolution."""
    top = max(utilization.values())
    others = [u for n, u in utilization.items() if n not in closed_binding]
    if max(others, default=0.0) < top * (1 - 10 * LP_TIGHT_REL):
        assert list(lp_binding) == list(closed_binding)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(case=scenarios())
def test_every_command_gives_one_answer(registry, case) -> None:
    spec_values, sets, mode = case
    made = _scenario(registry, spec_values, sets)
    assume(made is not None and made[2] is not None)
    reg, spec, sc = made  # type: ignore[misc]
    P, D = spec.prefill_nodes, spec.decode_nodes

    size = evaluate_mode(sc, mode, spec.serving)
    t, binding = size.saturated_turns_per_s, list(size.binding)
    util = {n: lim.utilization for n, lim in size.limits.items()}

    paths = explain_paths(sc, mode)
    assert paths.saturated_turns_per_s == pytest.approx(t, rel=1e-12)
    assert list(paths.binding) == binding

    lp = paths.lp  # the LP on the same assembly
    assert lp.throughput_turns_per_s == pytest.approx(t, rel=1e-6)
    assert_lp_binding(binding, util, lp.binding())

    mixed = explain_mixed(
        reg, sc, mode, [(sc.prefill_node.id, P)], [(sc.decode_node.id, D)], [(spec.workload, 1.0)]
    ).solution  # the LP with one group per side, built from --prefill-group/--decode-group
    assert mixed.throughput_turns_per_s == pytest.approx(t, rel=1e-6)
    assert_lp_binding(binding, util, mixed.binding())

    rec = recommend(sc, Budget(nodes=P + D), spec.serving, "jct_s", (mode,))
    row = next(c for c in rec.candidates if (c.prefill_nodes, c.decode_nodes) == (P, D))
    assert row.modes[mode] is not None
    assert row.modes[mode].saturated_turns_per_s == pytest.approx(t, rel=1e-12)
    assert list(row.modes[mode].binding) == binding

    rows: list[dict] = []
    axes = [parse_axis(f"P={P}"), parse_axis(f"D={D}")]
    run_sweep(reg, spec, axes, (mode,), spec.serving, on_chunk=rows.append)
    assert float(rows[0]["saturated_turns_per_s"][0]) == pytest.approx(t, rel=1e-12)
    from dualpath_plan.solvers.closed_form import mask_names

    assert mask_names(int(rows[0]["binding_mask"][0])) == binding
    assert float(rows[0]["jct_s"][0]) == pytest.approx(size.jct_s, rel=1e-12)

    inputs = {**spec_values, "modes": [mode]}
    metrics = compute("size", inputs, reg)  # what check records
    assert metrics[f"{mode}.saturated_turns_per_s"] == pytest.approx(t, rel=1e-12)
    assert metrics[f"{mode}.binding"] == " + ".join(binding)


# --- the same through the CLI's JSON, for fixed cases -------------------------------------

CLI_CASES = [
    ("dualpath", ()),
    ("basic", ()),
    ("even", ("--node", "dgx-h200", "-P", "2", "-D", "6")),
    ("dualpath", ("--model", "ds-27b", "-P", "1", "-D", "1")),
    ("dualpath", ("--prefill-node", "dualpath-hopper", "--decode-node", "dgx-b200")),
]


@pytest.mark.parametrize(("mode", "args"), CLI_CASES)
def test_cli_json_agrees(cli, tmp_path, mode, args) -> None:
    size = cli("size", *args, "--json").json()["modes"][mode]
    t, binding = size["saturated_turns_per_s"], size["binding"]
    assert set(size["limits"]) == set(LINKS)
    for name in binding:
        assert size["limits"][name]["utilization"] == pytest.approx(1.0, rel=1e-9)
    paths = cli("paths", *args, "--mode", mode, "--json").json()
    assert paths["saturated_turns_per_s"] == pytest.approx(t, rel=1e-12)
    assert paths["binding"] == binding and paths["lp_binding"] == binding
    assert paths["lp_saturated_turns_per_s"] == pytest.approx(t, rel=1e-6)
    assert paths["limits"] == size["limits"]
    spec = dict(zip(args[::2], args[1::2], strict=True))
    pn = spec.get("--prefill-node", spec.get("--node", "dualpath-hopper"))
    dn = spec.get("--decode-node", spec.get("--node", "dualpath-hopper"))
    P, D = int(spec.get("-P", 2)), int(spec.get("-D", 4))
    model = ("--model", spec["--model"]) if "--model" in spec else ()
    lp = cli(
        "paths", *model, "--mode", mode, "--prefill-group", f"{pn}:{P}",
        "--decode-group", f"{dn}:{D}", "--json",
    ).json()  # fmt: skip
    assert lp["saturated_turns_per_s"] == pytest.approx(t, rel=1e-6)
    assert lp["binding"] == binding
    rec = cli("recommend", *[a for a in args if a not in ("-P", "-D", str(P), str(D))],
              "--budget-nodes", str(P + D), "--json").json()  # fmt: skip
    row = next(c for c in rec["candidates"] if (c["prefill_nodes"], c["decode_nodes"]) == (P, D))
    assert row["modes"][mode]["saturated_turns_per_s"] == pytest.approx(t, rel=1e-12)
    assert row["modes"][mode]["binding"] == binding
    out = tmp_path / "points.jsonl"
    # The grid's P replaces -P (both given are an error).
    no_p = [a for i, a in enumerate(args) if a != "-P" and (i == 0 or args[i - 1] != "-P")]
    assert cli("sweep", *no_p, "--grid", f"P={P}", "--mode", mode, "--out", str(out)).code == 0
    point = json.loads(out.read_text().splitlines()[0])
    # The file's floats carry FLOAT_DIGITS significant digits.
    assert point["saturated_turns_per_s"] == float(format_float(t))
    assert point["bottleneck"] == " + ".join(binding)
    baseline = tmp_path / "baseline.json"
    inputs = {k.lstrip("-").replace("-", "_"): v for k, v in spec.items()}
    inputs = {{"P": "prefill_nodes", "D": "decode_nodes"}.get(k, k): v for k, v in inputs.items()}
    inputs = {k: int(v) if k.endswith("_nodes") else v for k, v in inputs.items()}
    baseline.write_text(json.dumps({"scenarios": [{"id": "x", "kind": "size", "inputs": inputs}]}))
    assert cli("check", str(baseline), "--update").code == 0
    recorded = json.loads(baseline.read_text())["scenarios"][0]["metrics"]
    assert recorded[f"{mode}.saturated_turns_per_s"]["value"] == pytest.approx(t, rel=1e-12)
    assert recorded[f"{mode}.binding"]["value"] == " + ".join(binding)


# --- one regression test per disagreement of the issue -------------------------------------


def test_paths_shows_size_throughput_not_its_own(cli) -> None:
    # size said dualpath 60.6 turns/s, paths 64.8 (its own ideal scheduler, no batch cap).
    size = cli("size", "--json").json()["modes"]
    for mode in REPORT_MODES:
        paths = cli("paths", "--mode", mode, "--json").json()
        assert paths["saturated_turns_per_s"] == pytest.approx(
            size[mode]["saturated_turns_per_s"], rel=1e-12
        )
        assert paths["binding"] == size[mode]["binding"]


def test_storage_client_cap_is_its_own_link_everywhere(cli, registry) -> None:
    # dgx-h200 has 2 x 400 Gb/s SNICs, but 3fs serves one client 50 GB/s: at the datasheet
    # rates the cap binds and is named as what it is, by paths, size, the LP form and bounds
    # alike. (1P2D: the prefill replica within its node, its compute 75% used; over two
    # prefill nodes a replica's expert parallelism crosses the network and its compute binds
    # within a few percent of the caps.)
    args = ("--node", "dgx-h200", "-P", "1", "-D", "2", "--speed-of-light")
    paths = cli("paths", *args, "--json").json()
    assert paths["binding"] == ["pe_storage_client_read", "de_storage_client_read"]
    snic = paths["limits"]["pe_snic_read"]
    # The SNICs' own line rate (less the queue-aware scheduler's imbalance), half used.
    assert snic["capacity"] == pytest.approx(100e9, rel=0.01)
    assert snic["utilization"] == pytest.approx(0.5, rel=0.01)
    lp = cli(
        "paths", "--prefill-group", "dgx-h200:1", "--decode-group", "dgx-h200:2",
        "--class", "paper-64k:1", "--speed-of-light", "--json",
    ).json()  # fmt: skip
    assert lp["saturated_turns_per_s"] == pytest.approx(paths["saturated_turns_per_s"], rel=1e-6)
    assert lp["binding"] == paths["binding"]
    # bounds saturate the reads at the cap, not at the NICs.
    sc = Scenario.from_ids(registry, node="dgx-h200")
    capped = bottleneck_free_range(sc)
    uncapped = bottleneck_free_range(replace(sc, storage=None))
    assert float(capped.pd_max) > float(uncapped.pd_max)


def test_size_and_lp_agree_on_mixed_prefill_and_decode_nodes(cli) -> None:
    # size --prefill-node A --decode-node B and the LP with the same groups differed by 34%.
    args = ("--prefill-node", "dualpath-hopper", "--decode-node", "dgx-b200")
    size = cli("size", *args, "--json").json()["modes"]["dualpath"]
    lp = cli(
        "paths", "--prefill-group", "dualpath-hopper:2", "--decode-group", "dgx-b200:4", "--json"
    ).json()
    assert lp["saturated_turns_per_s"] == pytest.approx(size["saturated_turns_per_s"], rel=1e-6)


def test_lp_form_honours_gpu_nodes_and_scheduler(cli) -> None:
    # paths --class paper-64k:1 --gpu h20 returned the H800 result: --gpu, --prefill-node and
    # --scheduler were ignored in the LP form.
    for extra in (
        ("--gpu", "h20"),
        ("--prefill-node", "dgx-h200", "--decode-node", "dgx-h200", "-D", "6"),
        ("--scheduler", "round_robin"),
    ):
        closed = cli("paths", *extra, "--json").json()
        lp = cli("paths", *extra, "--class", "paper-64k:1", "--json").json()
        assert lp["saturated_turns_per_s"] == pytest.approx(
            closed["saturated_turns_per_s"], rel=1e-6
        ), extra
    h800 = cli("paths", "--class", "paper-64k:1", "--json").json()["saturated_turns_per_s"]
    h20 = cli("paths", "--class", "paper-64k:1", "--gpu", "h20", "--json").json()
    assert h20["saturated_turns_per_s"] < 0.5 * h800  # H20: a seventh of the H800's FLOPS


def test_smallest_cluster_searches_up_to_max_nodes(registry) -> None:
    # The search doubled from 32 straight to 64 nodes, past --max-nodes: 3.5 agents/s needs
    # 43 nodes in dualpath, yet --max-nodes 53 answered "no cluster of up to 53 nodes".
    sc = Scenario.from_ids(registry)
    cfg = ScenarioSpec().serving
    found = smallest_cluster(sc, "dualpath", cfg, target_aps=3.5, max_nodes=53)
    assert found.outcome is not None and found.nodes <= 53
    assert found.outcome.aps >= 3.5
    smaller = smallest_cluster(sc, "dualpath", cfg, target_aps=3.5, max_nodes=found.nodes - 1)
    assert smaller.outcome is None and "up to" in smaller.reason


def test_size_target_reports_every_mode_even_when_one_cannot_reach(cli) -> None:
    result = cli("size", "--target-aps", "3.5", "--max-nodes", "53", "--json")
    assert result.code == 0, result.err
    modes = result.json()["modes"]
    assert set(modes) == set(REPORT_MODES)
    assert not modes["basic"]["reached"] and "53 nodes" in modes["basic"]["reason"]
    assert modes["dualpath"]["reached"] and modes["dualpath"]["aps"] >= 3.5
    text = cli("size", "--deadline", "600", "--agents", "4096", "--max-nodes", "8").out
    assert text.count("no cluster of up to 8 nodes") == 4


def test_sweep_lp_solver_takes_jct_from_the_lp(cli, tmp_path) -> None:
    # sweep --solver lp swapped in the LP throughput but kept the closed form's jct_s/drain_s.
    closed, lp = tmp_path / "closed.jsonl", tmp_path / "lp.jsonl"
    grid = ("--grid", "P=2:3", "--grid", "node.snic_efficiency=0.3,0.9", "--mode", "all")
    assert cli("sweep", *grid, "--out", str(closed)).code == 0
    assert cli("sweep", *grid, "--solver", "lp", "--out", str(lp)).code == 0
    a = [json.loads(line) for line in closed.read_text().splitlines()]
    b = [json.loads(line) for line in lp.read_text().splitlines()]
    assert len(a) == len(b) == 16
    for x, y in zip(a, b, strict=True):
        assert y["saturated_turns_per_s"] == pytest.approx(x["saturated_turns_per_s"], rel=1e-6)
        assert y["jct_s"] == pytest.approx(x["jct_s"], rel=1e-5)
        assert y["bottleneck"] == x["bottleneck"]


def test_lp_sweep_jct_moves_with_lp_throughput(registry) -> None:
    # The JCT is computed from whichever solver's throughput the row reports.
    from dualpath_plan.outcomes import sweep as sw
    from dualpath_plan.solvers import lp as lp_module

    spec = ScenarioSpec()
    sc = Scenario.from_spec(registry, spec)
    P, D, agents = np.array([2.0]), np.array([4.0]), np.array([2048.0])
    closed = sw._evaluate_chunk(sc, "dualpath", spec.serving, P, D, agents)
    real = lp_module.solve_lp

    def slower(problem, balanced=True):  # an LP answer 10% below the closed form's
        out = real(problem, balanced)
        return replace(out, throughput_turns_per_s=out.throughput_turns_per_s * 0.9)

    lp_module.solve_lp = slower
    try:
        lp = sw._evaluate_chunk(sc, "dualpath", spec.serving, P, D, agents, "lp")
    finally:
        lp_module.solve_lp = real
    assert lp["saturated_turns_per_s"][0] == pytest.approx(0.9 * closed["saturated_turns_per_s"][0])
    assert lp["jct_s"][0] > closed["jct_s"][0] * 1.05


def test_basic_is_bound_by_its_prefill_batch_not_compute(registry) -> None:
    # Basic was labelled pe_compute like dualpath; its limit is the HBM-capped batch without
    # layer-wise prefill, shown with the batch size.
    sc = Scenario.from_ids(registry)
    cfg = ScenarioSpec().serving
    basic = evaluate_mode(sc, "basic", cfg)
    dual = evaluate_mode(sc, "dualpath", cfg)
    assert basic.binding == ("pe_prefill_batch",)
    assert dual.binding == ("pe_compute",)
    derated = " ".join(basic.limits["pe_prefill_batch"].derated_by)
    assert (
        "pass batch" in derated and "set by HBM" in derated and "no layer-wise prefill" in derated
    )
    assert basic.limits["pe_compute"].utilization < 0.9  # compute is not what stops Basic
    assert basic.limits["pe_prefill_batch"].capacity < basic.limits["pe_compute"].capacity / (
        basic.limits["pe_compute"].load / basic.saturated_turns_per_s
    )


def test_both_saturated_sides_are_named(registry) -> None:
    # When both sides' SNICs are saturated only one was named.
    sc = Scenario.from_ids(registry, model="ds-27b", prefill_nodes=1, decode_nodes=1)
    out = evaluate_mode(sc, "dualpath", ScenarioSpec().serving)
    assert out.binding == ("pe_snic_read", "de_snic_read")
    assert out.bottleneck == "pe_snic_read + de_snic_read"


def test_even_and_dualpath_at_one_operating_point_share_a_label(registry) -> None:
    # even and dualpath at the same operating point carried different labels.
    sc = Scenario.from_ids(registry)
    cfg = ScenarioSpec().serving
    even, dual = evaluate_mode(sc, "even", cfg), evaluate_mode(sc, "dualpath", cfg)
    assert even.saturated_turns_per_s == pytest.approx(dual.saturated_turns_per_s, rel=1e-12)
    assert even.binding == dual.binding


def test_every_limit_is_a_row_of_the_link_table() -> None:
    names = [k.name for k in LINK_TABLE]
    assert len(names) == len(set(names))
    assert {"pe_storage_client_read", "de_storage_client_read", "pe_prefill_batch"} <= set(names)
    assert {"storage_read", "storage_write"} <= set(names)
    for k in LINK_TABLE:
        assert k.side in ("pe", "de", "storage") and k.description and k.unit
        assert k.name == (k.resource if k.side == "storage" else f"{k.side}_{k.resource}")


def test_limits_carry_their_deratings(cli) -> None:
    limits = cli("size", "--json").json()["modes"]["dualpath"]["limits"]
    snic = limits["pe_snic_read"]
    assert snic["unit"] == "B/s"
    assert any("snic_efficiency x0.513" in d for d in snic["derated_by"])
    assert any("imbalance" in d for d in snic["derated_by"])
    assert any("prefill_mfu" in d for d in limits["pe_compute"]["derated_by"])
    assert limits["storage_read"]["capacity"] == pytest.approx(7256.8e9)
    assert all(not math.isnan(v["load"]) for v in limits.values())


def test_a_link_lives_in_three_places() -> None:
    """Adding a link is a row of LINK_TABLE and its load (physics/links.py) and its capacity
    (scenario/assemble.py): no other module names a link or its resource (docs/extending.md).
    validation/metrics.py's storage-ceiling case builds a synthetic cluster from two links by
    name, on purpose."""
    import re
    from pathlib import Path

    root = Path(__file__).parent.parent / "dualpath_plan"
    resources = "|".join(sorted({k.resource for k in LINK_TABLE}, key=len, reverse=True))
    literal = re.compile(rf"[\"'](?:pe_|de_)?(?:{resources})[\"']")
    allowed = {"physics/links.py", "scenario/assemble.py"}
    exempt = {"validation/metrics.py": {'"pe_snic_read"', '"de_snic_read"', '"compute"'}}
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel in allowed:
            continue
        found = set(literal.findall(path.read_text(encoding="utf-8")))
        # a side's name ("decode" group, "prefill" check) is not a link
        found -= {'"decode"', '"prefill"', "'decode'", "'prefill'"}
        assert found <= exempt.get(rel, set()), (rel, found)


def test_sweep_summary_does_not_depend_on_the_chunk(registry) -> None:
    # Ties (even and dualpath, or splits with equal throughput per GPU) are broken by the
    # point's place in the grid, not by which chunk it fell in.
    spec = ScenarioSpec()
    axes = [parse_axis("P=1:6"), parse_axis("D=1:6")]
    summaries = [
        run_sweep(registry, spec, axes, ("even", "dualpath"), spec.serving, chunk=c, top=5)
        for c in (1, 7, 1000)
    ]
    for s in summaries[1:]:
        assert s.best == summaries[0].best
        assert s.binding_counts == summaries[0].binding_counts
    points = [r["point"] for r in summaries[0].best]
    assert len(set(points)) == len(points)


def test_outputs_are_deterministic(cli) -> None:
    assert cli("size", "--json").out == cli("size", "--json").out
    assert (
        cli("paths", "--class", "paper-64k:1", "--json").out
        == cli("paths", "--class", "paper-64k:1", "--json").out
    )


def test_invariants_name_tests_that_exist() -> None:
    import re
    from pathlib import Path

    root = Path(__file__).parent.parent
    text = (root / "docs" / "invariants.md").read_text(encoding="utf-8")
    for row in (line for line in text.splitlines() if line.startswith("| INV-")):
        module = None
        for ref in re.findall(r"`([^`]*::test_\w+)`", row):
            path, _, name = ref.rpartition("::")
            module = path or module
            assert module, ref
            source = (root / module).read_text(encoding="utf-8")
            assert f"def {name}(" in source, (module, name)


def test_tied_duals_are_read_together(cli) -> None:
    # Four links tie (both sides' SNICs and storage client caps): the LP's duals split the
    # gain among them, so the report reads their sum, not one alone.
    data = cli(
        "paths", "--node", "dgx-a100", "--model", "ds-27b", "-P", "1", "-D", "1",
        "--speed-of-light", "--json",
    )  # fmt: skip
    duals = data.json()["duals"]
    assert "bind together" in duals[0]["reading"]
    assert duals[0]["dual_turns_per_s_per_percent"] == pytest.approx(
        sum(d["dual_turns_per_s_per_percent"] for d in duals[1:])
    )
    # Raising all of them by 1% buys what the sum says (up to the LP's resolution).
    t0 = data.json()["saturated_turns_per_s"]
    more = cli(
        "paths", "--node", "dgx-a100", "--model", "ds-27b", "-P", "1", "-D", "1",
        "--set", "node.snic_gbit_s=202", "--set", "storage.max_client_read_gbyte_s=50.5",
        "--speed-of-light", "--json",
    ).json()["saturated_turns_per_s"]  # fmt: skip
    assert more - t0 == pytest.approx(duals[0]["dual_turns_per_s_per_percent"], rel=0.01)


def test_a_trace_reports_its_own_hit_rate(cli, tmp_path) -> None:
    # The size header showed the profile's placeholder hit rate for a trace workload.
    w = tmp_path / "p" / "workload"
    w.mkdir(parents=True)
    (w / "tr.csv").write_text(
        "trajectory_id,append_tokens,generated_tokens\n"
        + "".join(f"t{k % 4},{500 + k},{100}\n" for k in range(40))
    )
    (w / "tr.toml").write_text(
        'kind = "workload"\nname = "t"\nturns = 10\nappend_tokens = 100\n'
        'generated_tokens = 100\ncontext_tokens = 1000\ntrace_file = "tr.csv"\n'
        '[unconfirmed]\n"*" = "test"\n'
    )
    out = cli("size", "--profiles", str(tmp_path / "p"), "--workload", "tr").out
    assert "hit rate 90.9%" not in out  # 1000 / (1000 + 100): the placeholders
    rate = float(out.split("hit rate ")[1].split("%")[0])
    assert 80 < rate < 95  # the trace's: cached context over the prompt, turns 1 to 10


def test_one_unreachable_mode_does_not_hide_the_others(cli) -> None:
    # The slowest store and storage NICs any deployment has (plausible.py).
    slow = ("--set", "storage.aggregate_read_gbyte_s=0.01", "--set", "node.snic_gbit_s=1")
    result = cli("size", *slow, "--json")
    assert result.code == 0, result.err
    modes = result.json()["modes"]
    assert modes["basic"]["aps_limit"] == "unreachable" and modes["basic"]["aps"] == 0
    assert modes["oracle"]["aps"] > 0  # no I/O: the storage limit does not touch it
    assert result.json()["speedup"]["aps"] is None


def test_mixed_paths_name_groups_units_and_deratings(cli) -> None:
    data = cli(
        "paths", "--prefill-group", "dualpath-hopper:2", "--prefill-group", "dgx-b200:1",
        "--decode-group", "dgx-b200:3", "--json",
    ).json()  # fmt: skip
    by = {c["name"]: c for c in data["constraints"]}
    assert by["pe_compute[dualpath-hopper#0]"]["unit"] == "FLOP/s"
    assert any("prefill_mfu x0.13" in d for d in by["pe_compute[dualpath-hopper#0]"]["derated_by"])
    # dgx-b200 times its passes with its engine profile (the operator model).
    derated = by["pe_compute[dgx-b200#1]"]["derated_by"]
    assert any("operator model, engine 'b200-sglang-0.5.14'" in d for d in derated)
    assert set(data["binding_constraints"]) <= set(by)
    assert {by[n]["link"] for n in data["binding_constraints"]} == set(data["binding"])
    assert all(s["turns_per_s"] >= 0 for s in data["splits"])


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"model": "ds-27b", "storage": "none"},
        {"node": "dgx-h200", "scheduler": "round_robin"},
        {"prefill_node": "dualpath-hopper", "decode_node": "dgx-b200", "speed_of_light": True},
    ],
)
def test_recommend_evaluates_each_split_as_size_does(registry, values) -> None:
    """recommend evaluates all splits at once (serving.evaluate_each: one solve per mode, one
    APS search): every candidate's outcome is evaluate_mode's for the split, field by field,
    and a split a mode cannot run has evaluate_mode's reason (9 nodes: 1P8D does not hold
    DeepSeek-V3.2's weights)."""
    spec = ScenarioSpec.build(values)
    sc = Scenario.from_spec(registry, spec)
    rec = recommend(sc, Budget(nodes=9), spec.serving, "aps")
    for c in rec.candidates:
        split = replace(sc, prefill_nodes=c.prefill_nodes, decode_nodes=c.decode_nodes)
        for m, got in c.modes.items():
            try:
                alone = evaluate_mode(split, m, spec.serving)
            except InfeasibleError as exc:
                assert got is None and c.reasons[m] == exc.detail
                continue
            assert got == alone, (c.prefill_nodes, m)
    if not values:  # the default's 1P8D: the reasons' path is taken
        assert any(o is None for c in rec.candidates for o in c.modes.values())
