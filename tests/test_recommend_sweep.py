"""Issue 6: recommendation reports, sweeps and their grid specs."""

from __future__ import annotations

import csv
import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from dualpath_plan.errors import PlanInputError
from dualpath_plan.outcomes.recommend import Budget
from dualpath_plan.outcomes.serving import evaluate_mode, saturated
from dualpath_plan.outcomes.sweep import parse_axis, parse_values
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ServingConfig


def test_grid_value_specs() -> None:
    assert parse_values("x", "100,200,400") == (100.0, 200.0, 400.0)
    assert parse_values("P", "1:4") == (1.0, 2.0, 3.0, 4.0)
    assert parse_values("x", "1:100:3log") == pytest.approx((1.0, 10.0, 100.0))
    assert parse_values("x", "0:1:5lin") == pytest.approx((0, 0.25, 0.5, 0.75, 1.0))


@pytest.mark.parametrize(
    ("spec", "expect"),
    [
        ("node.snic_gbyte_s=1,2", "did you mean 'node.snic_gbit_s'"),
        ("nodes.x=1", "KIND.FIELD"),
        ("P=4:1", "empty range"),
        ("P=1:4:0lin", "N >= 1"),
        ("P=1:4:3geo", "Nlog or Nlin"),
        ("x.y=1:4:3lin", "KIND.FIELD"),
        ("node.snic_gbit_s=0:10:3log", "A > 0"),
        ("node.snic_gbit_s=a,b", "not a number"),
        ("P=0:3", "whole numbers >= 1"),
        ("P=1.5,2", "whole numbers"),
        ("node.gpu=1,2", "not numeric"),
        ("P", "NAME=VALUES"),
    ],
)
def test_bad_grid_specs(spec, expect) -> None:
    with pytest.raises(PlanInputError, match=expect):
        parse_axis(spec)


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        (("--grid", "P=4:1"), "empty range"),
        (("--grid", "node.nope=1"), "no field"),
        (("--grid", "P=1:2", "--grid", "P=3"), "twice"),
        (("--grid", "P=1:2", "--mode", "fast"), "--mode"),
        (("--grid", "P=1:2", "--out", "x.txt"), ".csv or .jsonl"),
        (("--grid", "P=1:2", "--solver", "milp"), "--solver"),
        (("--grid", "node.snic_gbit_s=-5"), "greater than or equal to 0.000000001"),
    ],
)
def test_sweep_bad_input_exits_2(cli, args, expect) -> None:
    result = cli("sweep", *args)
    assert result.code == 2, result.err
    assert expect in result.err and "Traceback" not in result.err


def test_sweep_matches_size_point_by_point(registry, cli, tmp_path) -> None:
    out = tmp_path / "points.csv"
    result = cli(
        "sweep",
        "--grid",
        "P=1:4",
        "--grid",
        "D=2:5",
        "--mode",
        "basic,dualpath",
        "--out",
        str(out),
        "--json",
    )
    assert result.code == 0, result.err
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 4 * 4 * 2
    sc = Scenario.from_ids(registry)
    cfg = ServingConfig()
    from dataclasses import replace

    checked = 0
    for row in rows:
        if row["feasible"] != "True":
            assert row["throughput_turns_per_s"] == ""  # never NaN in output
            continue
        o = evaluate_mode(
            replace(sc, prefill_nodes=int(row["P"]), decode_nodes=int(row["D"])), row["mode"], cfg
        )
        assert float(row["throughput_turns_per_s"]) == pytest.approx(
            o.throughput_turns_per_s, rel=1e-9
        )
        assert float(row["jct_s"]) == pytest.approx(o.jct_s, rel=1e-9)
        assert float(row["drain_s"]) == pytest.approx(o.drain_s, rel=1e-9, abs=1e-9)
        assert row["bottleneck"] == o.bottleneck
        checked += 1
    assert checked > 10
    summary = result.json()
    assert summary["points"] == 32
    assert sum(summary["bottleneck_share"].values()) == pytest.approx(1.0)


def test_sweep_profile_axes_and_jsonl(cli, tmp_path) -> None:
    out = tmp_path / "points.jsonl"
    result = cli(
        "sweep",
        "--grid",
        "node.snic_gbit_s=100,400",
        "--grid",
        "workload.append_tokens=128:4096:3log",
        "--grid",
        "P=1:3",
        "--out",
        str(out),
        "--json",
    )
    assert result.code == 0, result.err
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(lines) == 2 * 3 * 3
    assert {r["node.snic_gbit_s"] for r in lines} == {100.0, 400.0}
    # More SNIC bandwidth never lowers throughput (same append, P).
    by = {(r["node.snic_gbit_s"], r["workload.append_tokens"], r["P"]): r for r in lines}
    for (snic, app, p), r in by.items():
        if snic == 100.0 and r["throughput_turns_per_s"] is not None:
            hi = by[(400.0, app, p)]["throughput_turns_per_s"]
            assert hi >= r["throughput_turns_per_s"] * (1 - 1e-12)


def test_sweep_lp_solver_agrees(cli) -> None:
    grid = ("--grid", "P=1:3", "--grid", "D=2:3", "--top", "6", "--json")
    closed = cli("sweep", *grid).json()["modes"]["dualpath"]["best"]
    lp = cli("sweep", *grid, "--solver", "lp").json()["modes"]["dualpath"]["best"]
    a = {(r["P"], r["D"]): r["throughput_turns_per_s"] for r in closed}
    b = {(r["P"], r["D"]): r["throughput_turns_per_s"] for r in lp}
    assert a.keys() == b.keys()
    for k in a:
        assert b[k] == pytest.approx(a[k], rel=1e-6)


def test_sweep_memory_is_bounded_by_the_chunk(registry) -> None:
    # A chunk's arrays scale with the chunk, not the grid: evaluate one chunk of 10^5.
    sc = Scenario.from_ids(registry)
    P = np.full(100_000, 2.0)
    D = np.arange(100_000) % 16 + 1.0
    sat = saturated(sc, "dualpath", P, D)
    assert sat.solution.throughput_turns_per_s.shape == (100_000,)


def test_budget_splits() -> None:
    assert Budget(nodes=4).splits(8, 8) == [(1, 3), (2, 2), (3, 1)]
    assert Budget(gpus=32).splits(8, 8) == [(1, 3), (2, 2), (3, 1)]
    # Mixed costs: only maximal splits (no room for another node of either kind).
    splits = Budget(cost=10, prefill_node_cost=3, decode_node_cost=2).splits(8, 8)
    assert (1, 3) in splits and (2, 2) in splits and (1, 2) not in splits
    with pytest.raises(PlanInputError):
        Budget(nodes=4, gpus=8).validate()


def test_recommend_cli(cli, tmp_path) -> None:
    md, svg = tmp_path / "r.md", tmp_path / "r.svg"
    result = cli(
        "recommend", "--budget-nodes", "10", "--markdown", str(md), "--plot", str(svg), "--json"
    )
    assert result.code == 0, result.err
    data = result.json()
    assert len(data["candidates"]) == 9
    for mode in ("basic", "dualpath"):
        rec = data["recommended"][mode]
        assert rec["prefill_nodes"] + rec["decode_nodes"] == 10
        assert "binds" in rec["why"]
    # The recommended split is the best feasible candidate for the objective (JCT).
    best = min(
        (c for c in data["candidates"] if c["modes"]["dualpath"]),
        key=lambda c: c["modes"]["dualpath"]["jct_s"],
    )
    assert (best["prefill_nodes"], best["decode_nodes"]) == (
        data["recommended"]["dualpath"]["prefill_nodes"],
        data["recommended"]["dualpath"]["decode_nodes"],
    )
    text = md.read_text()
    assert "# P/D ratio recommendation" in text and "r.svg" in text and "| P/D |" in text
    ET.fromstring(svg.read_text())  # well-formed SVG
    assert "polyline" in svg.read_text()


def test_recommend_png_and_ranks(cli, tmp_path) -> None:
    png = tmp_path / "r.png"
    data = cli("recommend", "--budget-nodes", "8", "--plot", str(png), "--json").json()
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ranks = [c["modes"]["dualpath"]["rank"] for c in data["candidates"] if c["modes"]["dualpath"]]
    assert sorted(ranks) == list(range(1, len(ranks) + 1))
    best = next(
        c
        for c in data["candidates"]
        if c["modes"]["dualpath"] and c["modes"]["dualpath"]["rank"] == 1
    )
    assert best["prefill_nodes"] == data["recommended"]["dualpath"]["prefill_nodes"]


def test_recommend_phases(cli) -> None:
    data = cli(
        "recommend",
        "--budget-nodes",
        "12",
        "--phase",
        "paper-32k:1",
        "--phase",
        "paper-64k:1",
        "--json",
    ).json()
    assert data["phases"]["rebalancing_gain"] >= 1.0 - 1e-12
    assert len(data["phases"]["per_phase"]) == 2


@pytest.mark.parametrize(
    ("args", "expect"),
    [
        ((), "exactly one of"),
        (("--budget-nodes", "0"), "--budget-nodes"),
        (("--budget-nodes", "1"), "does not buy one prefill and one decode"),
        (("--budget-nodes", "3"), "no split of the budget is feasible"),
        (("--budget-nodes", "10", "--objective", "speed"), "--objective"),
        (("--budget-nodes", "10", "--plot", "x.gif"), ".svg or .png"),
        (("--budget-nodes", "10", "--phase", "paper-64k:-1"), "--phase"),
    ],
)
def test_recommend_bad_input(cli, args, expect) -> None:
    result = cli("recommend", *args)
    assert result.code == 2, result.err
    assert expect in result.err and "Traceback" not in result.err
