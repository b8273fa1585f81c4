"""Issue 6: recommendation reports, sweeps and their grid specs."""

from __future__ import annotations

import csv
import json
import math
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualpath_plan.errors import InfeasibleError, PlanInputError
from dualpath_plan.outcomes.online import online_aps, online_queue
from dualpath_plan.outcomes.recommend import Budget
from dualpath_plan.outcomes.serving import evaluate_mode, saturated
from dualpath_plan.outcomes.sweep import parse_axis, parse_values
from dualpath_plan.reports import text_columns
from dualpath_plan.reports.text_columns import (
    FLOAT_DIGITS,
    Column,
    Floats,
    Ints,
    Picked,
    TextBuffer,
    column_cells,
    format_float,
    format_rows,
    join_cells,
)
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ServingConfig

# The relative rounding of a float written by sweep --out (FLOAT_DIGITS significant digits).
FILE_REL = 0.5 * 10.0 ** (1 - FLOAT_DIGITS)

# sweep --out's two writers: the compiled one (_rowtext.c) and NumPy's (the reference).
WRITERS = ["compiled", "numpy"]
# The tests import the source tree: an editable install (`pip install -e`) builds the compiled
# writer there, a plain `pip install .` into site-packages only.
NOT_BUILT = (
    "the compiled writer is not in the source tree (install with `pip install -e '.[test]'`, "
    "with a C compiler)"
)


def _need(writer: str) -> None:
    if writer == "compiled" and text_columns.rowtext is None:
        pytest.skip(NOT_BUILT)


@pytest.fixture(params=WRITERS)
def writer(request, monkeypatch) -> str:
    """Each writer in turn for PointWriter (NumPy's: the compiled one set aside)."""
    _need(request.param)
    if request.param == "numpy":
        monkeypatch.setattr(text_columns, "rowtext", None)
    return request.param


def _rows_text(parts: list[bytes | Column], rows: int, writer: str) -> bytes:
    """The rows of ``parts`` (texts and columns) as ``writer`` writes them."""
    if writer == "numpy":
        cells = [p if isinstance(p, bytes) else column_cells(p) for p in parts]
        return join_cells(cells, rows).tobytes()
    out = bytearray()
    return bytes(out[: format_rows(parts, rows, out)])


def _cells(column: Column, writer: str) -> list[str]:
    """Each row's cell of a column of numbers as ``writer`` writes it."""
    rows = column.values.size if isinstance(column, Floats | Ints) else 0
    return _rows_text([column, b"\n"], rows, writer).decode().split("\n")[:-1]


def test_grid_value_specs() -> None:
    assert parse_values("x", "100,200,400").tolist() == [100.0, 200.0, 400.0]
    assert parse_values("P", "1:4").tolist() == [1.0, 2.0, 3.0, 4.0]
    assert parse_values("x", "1:100:3log").tolist() == pytest.approx([1.0, 10.0, 100.0])
    assert parse_values("x", "0:1:5lin").tolist() == pytest.approx([0, 0.25, 0.5, 0.75, 1.0])
    # A range's points are its decimals to 12 digits, exactly (geomspace gave 50.00000000000002
    # for 50, written as 50.0 and evaluated as the other); its ends are the ones given.
    assert parse_values("x", "2:50:3log").tolist() == [2.0, 10.0, 50.0]
    assert parse_values("x", "0:1:11lin").tolist() == [k / 10 for k in range(11)]
    assert parse_values("x", "1e-30:1e30:5log").tolist() == [1e-30, 1e-15, 1.0, 1e15, 1e30]
    assert parse_values("x", "0.3:0.7:3lin").tolist() == [0.3, 0.5, 0.7]
    # An axis of whole numbers takes a range's nearest whole numbers, each once, in order.
    assert parse_axis("D=1:64:7log").values.tolist() == [1, 2, 4, 8, 16, 32, 64]
    assert parse_axis("agents=2:2048:11log").values.tolist() == [2**k for k in range(1, 12)]
    assert parse_axis("P=1:10:6log").values.tolist() == [1, 2, 3, 4, 6, 10]
    assert parse_axis("node.gpus_per_node=2:8:3log").values.tolist() == [2, 4, 8]
    # ... within the range asked (1.4:3.6 holds 2 and 3; 0.4:2 does not hold 0).
    assert parse_axis("D=1.4:3.6:3lin").values.tolist() == [2, 3]
    assert parse_axis("agents=0.4:2:3lin").values.tolist() == [1, 2]
    # Digits at every magnitude (a latency of 3e-13 s too), a lin range's to its larger end
    # (0 is 0, not 1e-17), and a point that rounds onto its neighbour is one point.
    assert parse_values("x", "3e-14:3e-12:3log").tolist() == [3e-14, 3e-13, 3e-12]
    assert parse_values("x", "-0.1:0.2:4lin").tolist() == [-0.1, 0.0, 0.1, 0.2]
    assert parse_values("x", "100:100.0000000004:5lin").tolist() == [100.0, 100.0000000004]
    # An axis is a read-only float64 array: built and checked whole, never edited in place.
    values = parse_values("P", "1:10000000")
    assert values.dtype == np.float64 and not values.flags.writeable
    assert values[0] == 1.0 and values[-1] == 1e7 and values.size == 10_000_000


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
        ("P=0:3", "whole numbers from 1"),
        ("P=1e19", "from 1 to 1,000,000"),  # was -9223372036854775808 nodes, exit 0
        ("D=1000001", "from 1 to 1,000,000"),
        ("agents=1e19", "from 1 to 1,000,000,000"),
        ("P=1.5,2", "whole numbers"),
        ("node.gpus_per_node=1.5", "whole-number field, got 1.5"),  # was blamed on a --set
        ("node.gpu=1,2", "not numeric"),
        ("P", "NAME=VALUES"),
        ("D=1.2:1.8:2lin", "no whole number from 1.2 to 1.8"),
        ("node.snic_gbit_s=-1e308:1e308:3lin", "the range's points overflow"),
        ("node.snic_gbit_s=1:2:20000lin", "at most 10,000"),
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
        (("--grid", "P=1:2", "--grid", "P=3"), "names the axis P twice"),
        (
            ("--grid", "node.snic_gbit_s=100,200", "--set", "node.snic_gbit_s=300"),
            "--grid node.snic_gbit_s and --set node.snic_gbit_s both set it",
        ),
        (("--grid", "P=1:2", "--mode", "fast"), "--mode"),
        (("--grid", "P=1:2", "--out", "x.txt"), ".csv or .jsonl"),
        (("--grid", "P=1:2", "--solver", "milp"), "--solver"),
        # cost is recommend's objective; a sweep prices no point (was an internal KeyError).
        (("--grid", "P=1:2", "--objective", "cost"), "--objective"),
        (("--grid", "node.snic_gbit_s=-5"), "-5 is outside the field's range"),
        # An axis and its option both given (the option was ignored; --grid and --set on one
        # field already were an error).
        (("--grid", "P=2", "-P", "3"), "--grid P and -P/--prefill-nodes both set it"),
        (("--grid", "D=2", "--decode-nodes", "3"), "--grid D and -D/--decode-nodes"),
        (("--grid", "agents=5", "--agents", "10"), "--grid agents and --agents"),
        # A profile the grid's values make invalid is named by them, not by a --set.
        (("--grid", "node.gpus_per_node=1"), "--grid node.gpus_per_node=1: cnic_count"),
        (
            ("--grid", "model.context_window_tokens=1000,100000"),
            "--grid model.context_window_tokens=1000: workload 'paper-64k'",
        ),
        # ... and one of --set, by the --set (the grid's first value did not cause it).
        (
            ("--grid", "node.snic_gbit_s=100,200", "--set", "node.gpus_per_node=1"),
            "--set on node 'dualpath-hopper'",
        ),
        (("--grid", "P=0.5,2"), "whole numbers from 1 to 1,000,000, got 0.5"),
        # An empty item or a value twice was dropped or evaluated twice, silently.
        (("--grid", "P=1,,3"), "--grid P=1,,3: an empty item between commas"),
        (("--grid", "P=2,2,2"), "--grid P=2,2,2: 2 is given twice"),
    ],
)
def test_sweep_bad_input_exits_2(cli, args, expect) -> None:
    result = cli("sweep", *args)
    assert result.code == 2, result.err
    assert expect in result.err and "Traceback" not in result.err


def _size_of_row(sc: Scenario, row: dict[str, str], cfg: ServingConfig):
    """size's outcome (evaluate_mode) for a sweep row's cluster and mode."""
    cluster = replace(sc, prefill_nodes=int(row["P"]), decode_nodes=int(row["D"]))
    return evaluate_mode(cluster, row["mode"], cfg)


def _assert_row_is_size(row: dict[str, str], o) -> None:
    # The file's floats carry FLOAT_DIGITS significant digits: FILE_REL beyond the model.
    assert float(row["throughput_turns_per_s"]) == pytest.approx(
        o.throughput_turns_per_s, rel=1e-9 + FILE_REL
    )
    assert float(row["jct_s"]) == pytest.approx(o.jct_s, rel=1e-9 + FILE_REL)


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
    checked = 0
    for row in rows:
        if row["feasible"] != "True":
            assert row["throughput_turns_per_s"] == ""  # never NaN in output
            continue
        o = _size_of_row(sc, row, cfg)
        _assert_row_is_size(row, o)
        assert float(row["drain_s"]) == pytest.approx(o.drain_s, rel=1e-9 + FILE_REL, abs=1e-9)
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
    assert "# P/D ratio recommendation" in text and "<svg" in text and "| P/D |" in text
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


def test_recommend_recommends_no_split_that_serves_no_agents(cli) -> None:
    """Objective aps: a mode whose APS is 0 at every split (no arrival rate meets the SLOs) gets
    no recommended split (the first in order used to be "recommended"), but says so and why,
    in the text, the Markdown and the JSON; the modes that serve agents are still recommended,
    each at its highest APS."""
    # A 25 Gb/s storage NIC: one agent's TTFT is 9.43 s in basic (the KV read, then its copy
    # into HBM serialized with compute) and 9.22 s with layer-wise prefill (the copy hidden):
    # a 9.35 s SLO that basic misses at every split and the others meet.
    args = ("recommend", "--budget-nodes", "7", "--model", "llama-3.1-70b")
    args += ("--set", "node.snic_gbit_s=25", "--objective", "aps", "--ttft-slo", "9.35")
    data = cli(*args, "--json").json()
    assert set(data["unserved"]) == {"basic"}
    assert "no split of the budget meets the SLOs" in data["unserved"]["basic"]
    assert all(
        not c["modes"]["basic"] or c["modes"]["basic"]["aps"] == 0 for c in data["candidates"]
    )
    assert "basic" not in data["recommended"]
    for mode in ("dualpath", "oracle"):
        rec = data["recommended"][mode]
        best = max(c["modes"][mode]["aps"] for c in data["candidates"] if c["modes"][mode])
        at = next(
            c
            for c in data["candidates"]
            if (c["prefill_nodes"], c["decode_nodes"])
            == (rec["prefill_nodes"], rec["decode_nodes"])
        )
        assert at["modes"][mode]["aps"] == best > 0
    text = cli(*args).out
    assert "basic: no split of the budget meets the SLOs" in text
    assert "basic: run" not in text


def test_a_phase_no_split_serves_is_said_and_the_report_stays(cli, tmp_path) -> None:
    """Objective aps over phases, one of which no split serves under the SLOs: the report, its
    Markdown and JSON stay (the whole command used to fail), the phase says why, and there is
    no static ratio or gain (a phase serving no agents/s serves none in the run)."""
    md = tmp_path / "r.md"
    args = ("recommend", "--budget-nodes", "6", "--objective", "aps", "--ttft-slo", "1.0")
    args += ("--phase", "paper-32k:1", "--phase", "paper-64k:1")
    result = cli(*args, "--markdown", str(md))
    assert result.code == 0, result.err
    assert "phase paper-32k: no split of the budget meets the SLOs" in result.out
    assert "no static ratio and no re-balancing gain" in result.out
    assert " in dualpath even one agent" not in result.out  # the mode is named once
    assert "`paper-32k`: no split of the budget meets the SLOs" in md.read_text()
    phases = cli(*args, "--json").json()["phases"]
    assert set(phases["unserved"]) == {"paper-32k"}
    assert phases["static"] is None and phases["rebalancing_gain"] is None
    assert [p["workload"] for p in phases["per_phase"]] == ["paper-64k"]


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


# --- issue 12, item 8: reports a reader can use alone -------------------------------------


def _sweep_rows(cli, tmp_path, *args: str) -> tuple[list[dict], dict]:
    out = tmp_path / "points.csv"
    result = cli("sweep", *args, "--out", str(out), "--json")
    assert result.code == 0, result.err
    return list(csv.DictReader(out.open())), result.json()


@settings(max_examples=15, deadline=None)
@given(
    ps=st.lists(st.integers(1, 12), min_size=1, max_size=6),
    ds=st.lists(st.integers(1, 12), min_size=1, max_size=6),
    mode=st.sampled_from(["basic", "even", "dualpath", "oracle"]),
    ttft=st.sampled_from([0.3, 1.0, 4.0, 20.0]),
    tpot=st.sampled_from([0.03, 0.05, 0.2]),
)
def test_online_aps_over_arrays_equals_one_cluster(registry, ps, ds, mode, ttft, tpot) -> None:
    # INV-18: the online model over arrays of clusters (what sweep runs) gives each cluster
    # what evaluate_mode (size, recommend) gives it alone.
    sc = Scenario.from_ids(registry)
    cfg = ServingConfig(ttft_slo_s=ttft, tpot_slo_s=tpot)
    P = np.asarray([float(p) for p in ps for _ in ds])
    D = np.asarray([float(d) for _ in ps for d in ds])
    sat = saturated(sc, mode, P, D)
    on = online_aps(online_queue(sc, sat.assembly, sat.solution), cfg)
    checked = 0
    for k in range(P.size):
        try:
            o = evaluate_mode(
                replace(sc, prefill_nodes=int(P[k]), decode_nodes=int(D[k])), mode, cfg
            )
        except InfeasibleError:
            continue
        assert on.aps[k] == pytest.approx(o.aps, rel=1e-12, abs=1e-15)
        assert on.limit_names()[k] == o.aps_limit
        assert on.ttft_s[k] == pytest.approx(o.online_ttft_s, rel=1e-12)
        checked += 1
    assert checked or not sat.feasible.any()


@settings(max_examples=20, deadline=None)
@given(
    d=st.integers(3, 64),
    rates=st.lists(st.floats(0.0, 500.0), min_size=1, max_size=40),
    search=st.booleans(),
)
def test_decode_batch_over_arrays_equals_the_scalar(registry, d, rates, search) -> None:
    # The decode group's Little's-law batch and step time over an array of turn rates, by
    # either path (every grid point at once, or the search), equal the scalar methods.
    import dualpath_plan.outcomes.online as online

    sc = replace(Scenario.from_ids(registry), decode_nodes=d)
    group = saturated(sc, "dualpath", 2, d).assembly.de.decode
    gen = sc.turn_demand.mean(sc.turn_demand.generated_tokens)
    old = online._DIRECT_CELLS
    online._DIRECT_CELLS = 0 if search else old
    try:
        batch = online.decode_little_batch(group, np.asarray(rates), gen)
    finally:
        online._DIRECT_CELLS = old
    step = online.decode_step(group, np.maximum(batch, 1.0))
    for r, b, t in zip(rates, batch, step, strict=True):
        assert b == pytest.approx(group.little_batch(r, gen), rel=1e-12, abs=1e-12)
        assert t == pytest.approx(group.step_s(max(b, 1.0)), rel=1e-12)


def test_sweep_aps_is_size_aps(registry, cli, tmp_path) -> None:
    # INV-18 through the CLI: the sweep's APS and its limit are size's at every point.
    rows, _ = _sweep_rows(
        cli,
        tmp_path,
        "--grid",
        "P=1:4",
        "--grid",
        "D=1:5",
        "--grid",
        "agents=64,2048",
        "--mode",
        "all",
        "--aps",
        "--ttft-slo",
        "2",
    )
    sc = Scenario.from_ids(registry)
    cfg = ServingConfig(ttft_slo_s=2.0)
    checked = set()
    for row in rows:
        if row["feasible"] != "True":
            assert row["aps"] == "" and row["aps_limit"] == ""
            continue
        o = evaluate_mode(
            replace(sc, prefill_nodes=int(row["P"]), decode_nodes=int(row["D"])), row["mode"], cfg
        )
        assert float(row["aps"]) == pytest.approx(o.aps, rel=1e-12 + FILE_REL, abs=1e-15)
        assert row["aps_limit"] == o.aps_limit
        checked.add(o.aps_limit)
    assert "ttft" in checked


def test_sweep_objective_aps_ranks_by_aps_per_mode(cli, tmp_path) -> None:
    rows, summary = _sweep_rows(
        cli,
        tmp_path,
        "--grid",
        "P=1:5",
        "--grid",
        "D=1:5",
        "--mode",
        "basic,dualpath,oracle",
        "--objective",
        "aps",
    )
    assert summary["objective"] == "aps" and summary["aps_computed"]
    for mode in ("basic", "dualpath", "oracle"):
        mine = [r for r in rows if r["mode"] == mode and r["feasible"] == "True"]
        best = max(float(r["aps"]) for r in mine)
        (top,) = summary["modes"][mode]["best"]  # one best point per mode by default
        assert top["mode"] == mode and format_float(top["aps"]) == format_float(best)
        # the first point of the grid among the ties (the file's ties: to FLOAT_DIGITS digits)
        tied = [int(r["point"]) for r in mine if float(r["aps"]) == best]
        assert top["point"] in tied and (len(tied) == 1 or top["point"] == min(tied))


def test_sweep_summary_is_per_mode_not_filled_by_one(cli) -> None:
    # Oracle (or any mode) used to fill a top-N list; each mode has its own best points now.
    data = cli(
        "sweep", "--grid", "P=2:4", "--grid", "D=2:4", "--mode", "all", "--top", "3", "--json"
    ).json()
    assert list(data["modes"]) == ["basic", "even", "dualpath", "oracle"]
    for mode, part in data["modes"].items():
        assert len(part["best"]) == 3 and {r["mode"] for r in part["best"]} == {mode}
        values = [r["throughput_per_gpu"] for r in part["best"]]
        assert values == sorted(values, reverse=True)
    assert data["aps_computed"] is False
    assert all(r["aps"] is None for p in data["modes"].values() for r in p["best"])


def test_sweep_reason_is_given_exactly_for_infeasible_points(cli, tmp_path) -> None:
    rows, summary = _sweep_rows(
        cli, tmp_path, "--grid", "P=1:3", "--grid", "D=1:3", "--mode", "basic,dualpath"
    )
    infeasible = [r for r in rows if r["feasible"] != "True"]
    assert infeasible and len(infeasible) < len(rows)
    for r in rows:
        assert (r["reason"] != "") == (r["feasible"] != "True")
    assert any("do not fit" in r["reason"] for r in infeasible)
    part = summary["modes"]["dualpath"]
    assert part["feasible"] < part["points"] and "do not fit" in part["infeasible_reason"]


@pytest.mark.parametrize(
    "args",
    [
        ("--grid", "P=1:4", "--grid", "D=1:6", "--mode", "all", "--aps"),
        (
            "--grid",
            "P=2:3",
            "--grid",
            "agents=64,2048",
            "--grid",
            "node.snic_gbit_s=200,400",
            "--objective",
            "aps",
        ),
    ],
)
def test_sweep_headers_fit_100_columns(registry, args) -> None:
    from rich.console import Console

    from dualpath_plan.outcomes.sweep import run_sweep
    from dualpath_plan.reports.sweep import render_sweep
    from dualpath_plan.scenario.spec import ScenarioSpec

    axes = [parse_axis(args[i + 1]) for i, a in enumerate(args) if a == "--grid"]
    modes = ("basic", "even", "dualpath", "oracle") if "all" in args else ("dualpath",)
    objective = "aps" if "aps" in args[-1] else "throughput_per_gpu"
    spec = ScenarioSpec()
    summary = run_sweep(registry, spec, axes, modes, spec.serving, objective=objective, aps=True)
    console = Console(width=100, record=True, color_system=None)
    extra = [a.name for a in axes if not a.is_vector]
    render_sweep(summary, objective, modes, extra, None, console, True, "", False)
    text = console.export_text()
    header = next(line for line in text.splitlines() if line.lstrip().startswith("mode"))
    assert "…" not in text and len(header.rstrip()) <= 100
    for name in ("P/D", "turns/s", "per GPU", "JCT s", "APS", "limit", "binding"):
        assert name in header


def _recommend(cli, tmp_path, *args: str) -> tuple[dict, str, str, str]:
    md, svg = tmp_path / "r.md", tmp_path / "r.svg"
    result = cli("recommend", *args, "--markdown", str(md), "--plot", str(svg), "--json")
    assert result.code == 0, result.err
    return result.json(), md.read_text(), svg.read_text(), result.err


def test_recommend_chart_has_title_inputs_markers_and_the_free_range(cli, tmp_path) -> None:
    data, _, svg, _ = _recommend(cli, tmp_path, "--budget-nodes", "8")
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    texts = [t.text or "" for t in root.iter(f"{ns}text")]
    assert texts[0].startswith("JCT (s) per P/D split")
    assert any("deepseek-v3.2" in t and "paper-64k" in t for t in texts)
    assert any("budget 8 nodes" in t and "2,048 agents" in t for t in texts)
    markers = [c for c in root.iter(f"{ns}circle") if c.get("class") == "recommended"]
    lines = {p.get("data-mode") for p in root.iter(f"{ns}polyline")}
    # even and dualpath coincide: one line and one marker for both
    assert data["coinciding_modes"] == [["even", "dualpath"]]
    assert lines == {"basic", "even = dualpath", "oracle"}
    assert {m.get("data-mode") for m in markers} == lines
    shaded = [r for r in root.iter(f"{ns}rect") if r.get("class") == "bottleneck-free"]
    assert shaded and "bottleneck-free P/D" in texts
    # the shaded range covers the bottleneck-free splits only (2P6D .. 6P2D of 1P7D .. 7P1D)
    free = [c["bottleneck_free"] for c in data["candidates"]]
    assert free == [False, True, True, True, True, True, False]
    (band,) = shaded
    x0, width = float(band.get("x")), float(band.get("width"))
    assert width == pytest.approx(5 / 7 * (800 - 78 - 210), abs=0.2)
    assert x0 == pytest.approx(78 + 1 / 7 * (800 - 78 - 210), abs=0.2)


def test_recommend_mode_colours_are_one_per_mode_everywhere(cli, tmp_path) -> None:
    from dualpath_plan.reports.recommend import COLORS, LINK_COLORS, link_color

    svgs = [
        _recommend(cli, tmp_path, "--budget-nodes", "8", "--objective", o)[2]
        for o in ("jct_s", "aps")
    ]
    for svg in svgs:
        for mode in ("basic", "oracle"):
            assert f'data-mode="{mode}" points=' in svg
            assert re.search(
                f'data-mode="{mode}" points="[^"]*" fill="none" stroke="{COLORS[mode]}"', svg
            )
    assert not set(LINK_COLORS) & set(COLORS.values())
    assert link_color("pe_compute") == link_color("pe_compute + de_decode")


@given(st.floats(1e-6, 1e9))
def test_chart_ticks_are_round(vmax) -> None:
    from dualpath_plan.reports.recommend import nice_ticks

    ticks = nice_ticks(vmax)
    step = ticks[1] - ticks[0]
    mantissa = step / 10 ** math.floor(math.log10(step) + 1e-9)
    assert round(mantissa, 6) in (1.0, 2.0, 5.0, 10.0)
    assert ticks[0] == 0 and ticks[-1] >= vmax * (1 - 1e-9) and 3 <= len(ticks) <= 11
    assert ticks[-2] < vmax  # no empty tick above the data


def test_recommend_markdown_stands_alone(cli, tmp_path) -> None:
    _, md, _, _ = _recommend(cli, tmp_path, "--budget-nodes", "8", "--objective", "aps")
    assert "<svg" in md and "</svg>" in md and "](" not in md  # the chart inline, no link
    assert "dualpath-plan recommend --budget-nodes 8 --objective aps --markdown" in md
    from dualpath_plan import __version__

    assert f"dualpath-plan {__version__}" in md
    assert "8 x h800-sxm, SNIC 1 x 400 Gb/s, CNIC 8 x 400 Gb/s" in md and "DRAM 2,048 GB" in md
    assert (
        "efficiencies: dualpath-hopper (prefill and decode) measured" in md and "SNIC 0.513" in md
    )
    assert "prefill_mfu" in md and "SLOs TTFT 4 s, TPOT 50 ms" in md
    assert "even and dualpath coincide" in md and "**even = dualpath**" in md
    assert "| 1P7D | n/a | n/a | n/a | n/a |  |  | no (infeasible) |" in md
    assert "nan" not in md.lower() and "inf " not in md


def test_efficiency_line_lists_the_calibration_in_force(registry) -> None:
    from dualpath_plan.reports.provenance import efficiency_line
    from dualpath_plan.scenario.provenance import LABELS

    sc = Scenario.from_ids(registry)
    line = efficiency_line(sc)
    assert "measured" in line and sc.prefill_node.id in line
    for name in sc.efficiencies.nodes[0].values:
        assert LABELS[name][0] in line
    off = replace(sc, options=replace(sc.options, efficiencies=False))
    assert "speed of light" in efficiency_line(off)


@settings(max_examples=8, deadline=None)
@given(nodes=st.integers(2, 14), objective=st.sampled_from(["jct_s", "aps"]))
def test_an_infeasible_split_is_never_bottleneck_free(registry, nodes, objective) -> None:
    from dualpath_plan.errors import InfeasibleError as Infeasible
    from dualpath_plan.outcomes.recommend import recommend
    from dualpath_plan.reports.recommend import recommend_markdown, recommend_payload

    sc = Scenario.from_ids(registry)
    try:
        r = recommend(sc, Budget(nodes=nodes), ServingConfig(), objective)
    except Infeasible:
        return
    payload = recommend_payload(r)
    md = recommend_markdown(r)
    for c, row in zip(r.candidates, payload["candidates"], strict=True):
        if not c.feasible:
            assert not c.bottleneck_free and row["bottleneck_free"] is False
            assert f"| {c.prefill_nodes}P{c.decode_nodes}D |" in md
            assert (
                md.split(f"| {c.prefill_nodes}P{c.decode_nodes}D |")[1]
                .split("\n")[0]
                .endswith("no (infeasible) |")
            )


def test_coinciding_modes_are_said_to_coincide(cli, registry) -> None:
    from dualpath_plan.outcomes.recommend import coinciding_modes, recommend

    sc = Scenario.from_ids(registry)
    r = recommend(sc, Budget(nodes=8), ServingConfig(), "jct_s")
    assert r.coinciding == (("even", "dualpath"),)
    assert (
        r.label("dualpath") == r.label("even") == "even = dualpath" and r.label("basic") == "basic"
    )
    # one mode nudged by more than 1e-9 at one split no longer coincides
    c = r.candidates[3]
    o = c.modes["even"]
    assert o is not None
    nudged = [*r.candidates]
    nudged[3] = replace(c, modes={**c.modes, "even": replace(o, jct_s=o.jct_s * (1 + 1e-8))})
    assert coinciding_modes(nudged, ("basic", "even", "dualpath", "oracle")) == ()
    out = cli("recommend", "--budget-nodes", "8").out
    assert "even and dualpath coincide" in out and "even = dualpath: run 4P4D" in out


# --- issue 15, item 2: a sweep evaluates each capacity set once and writes whole columns ---


def _reference_points(registry, spec, axes, modes, aps: bool) -> list[dict]:
    """Every point as the sweep had it before: each point its own cluster (the assembly, the
    closed form, the APS and the reason computed per point) and its row built one at a time,
    cleaned as the row writer cleaned it (NaN and inf empty)."""
    import itertools

    from dualpath_plan.outcomes import sweep as sw
    from dualpath_plan.profiles.registry import Overrides

    vector = {a.name: np.asarray(a.values) for a in axes if a.is_vector}
    profile = [a for a in axes if not a.is_vector]
    grid = [
        vector.get("P", np.asarray([float(spec.prefill_nodes)])),
        vector.get("D", np.asarray([float(spec.decode_nodes)])),
        vector.get("agents", np.asarray([float(spec.serving.agents)])),
    ]
    P, D, agents = (g.ravel() for g in np.meshgrid(*grid, indexing="ij"))
    out: list[dict] = []
    for c, combo in enumerate(itertools.product(*[a.values for a in profile])):
        sets = [f"{a.name}={sw._fmt(v)}" for a, v in zip(profile, combo, strict=True)]
        reg = replace(registry, overrides=registry.overrides.merged(Overrides.parse(sets)))
        sc = Scenario.from_spec(reg, spec)
        for k, mode in enumerate(modes):
            rows = sw._evaluate_chunk(sc, mode, spec.serving, P, D, agents, "closed", None, aps)
            rows["reason"] = np.asarray(
                [
                    None if ok else sw._reason(sc, mode, spec.serving, int(p), int(d))
                    for ok, p, d in zip(rows["feasible"], P, D, strict=True)
                ],
                dtype=object,
            )
            rows["point"] = (c * len(modes) + k) * P.size + np.arange(P.size)
            for a, v in zip(profile, combo, strict=True):
                rows[a.name] = np.full(P.size, v)
            for row in sw.iter_rows(rows):
                clean = {
                    key: None if isinstance(v, float) and not math.isfinite(v) else v
                    for key, v in row.items()
                }
                clean["feasible"] = bool(clean["feasible"])
                out.append(clean)
    return out


@pytest.mark.parametrize("suffix", [".csv", ".jsonl"])
def test_sweep_rows_are_those_of_one_point_at_a_time(
    registry, cli, tmp_path, suffix, writer
) -> None:
    # Each P/D pair is now evaluated once and spread over its agents, and --out writes whole
    # columns (either writer): every row must be what evaluating and writing one point at a
    # time gave, infeasible points (P=1: the weights do not fit) with their reason, chunks
    # that split a pair's agents, two profile fields, the APS.
    from dualpath_plan.reports.sweep import OUT_COLUMNS
    from dualpath_plan.scenario.spec import ScenarioSpec

    grid = [
        "P=1:3", "D=2:4", "agents=1,64,2048,100000",
        "node.snic_gbit_s=100,400", "workload.append_tokens=128,2048",
    ]  # fmt: skip
    out = tmp_path / f"points{suffix}"
    args = [a for g in grid for a in ("--grid", g)]
    result = cli("sweep", *args, "--mode", "basic,dualpath", "--aps", "--chunk", "7",
                 "--out", str(out))  # fmt: skip
    assert result.code == 0, result.err
    axes = [parse_axis(g) for g in grid]
    expect = _reference_points(registry, ScenarioSpec(), axes, ("basic", "dualpath"), True)
    columns = ["node.snic_gbit_s", "workload.append_tokens", *OUT_COLUMNS]

    # The file holds a chunk of each mode in turn; compared point by point.
    # Floats as the file writes them: FLOAT_DIGITS significant digits (format_float).
    def written(v: object) -> object:
        return format_float(v) if isinstance(v, float) else v

    if suffix == ".jsonl":
        got = [json.loads(line) for line in out.read_text().splitlines()]
        got.sort(key=lambda r: r["point"])
        want = [{c: written(r.get(c)) for c in columns} for r in expect]
        assert got == [
            {c: float(v) if isinstance(v, str) and c not in ("mode", "bottleneck", "aps_limit",
             "reason") else v for c, v in row.items()} for row in want
        ]  # fmt: skip
    else:
        got = list(csv.reader(out.open(newline="")))
        assert got[0] == columns
        got[1:] = sorted(got[1:], key=lambda r: int(r[2]))
        text = [[("" if r.get(c) is None else str(written(r.get(c)))) for c in columns]
                for r in expect]  # fmt: skip
        assert got[1:] == text
    assert len(got) >= 3 * 3 * 4 * 2 * 2 * 2
    assert any(r["reason"] for r in expect) and any(r["feasible"] for r in expect)
    assert any(r["aps_limit"] for r in expect)


def test_sweep_summary_with_agents_does_not_depend_on_the_chunk(registry) -> None:
    # INV-14 with pairs spread over agents: a chunk that ends within a pair's agents counts
    # the pair's binding links and ranks its points as a chunk holding all of them.
    from dualpath_plan.outcomes.sweep import run_sweep
    from dualpath_plan.scenario.spec import ScenarioSpec

    spec = ScenarioSpec()
    axes = [parse_axis("P=1:4"), parse_axis("D=2:5"), parse_axis("agents=1,10,100,1000,10000")]
    for objective in ("throughput_per_gpu", "jct_s"):
        summaries = [
            run_sweep(
                registry,
                spec,
                axes,
                ("basic", "dualpath"),
                spec.serving,
                objective=objective,
                chunk=c,
                top=7,
            )
            for c in (1, 3, 7, 1000)
        ]
        for s in summaries[1:]:
            assert s.best == summaries[0].best
            assert s.binding_counts == summaries[0].binding_counts
            assert {m: p.infeasible_reason for m, p in s.modes.items()} == {
                m: p.infeasible_reason for m, p in summaries[0].modes.items()
            }
        assert sum(summaries[0].binding_counts.values()) == summaries[0].feasible
        assert summaries[0].feasible < summaries[0].points  # P=1 does not hold the weights


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 40), max_size=200).map(lambda v: np.asarray(v, dtype=np.int64)),
    st.booleans(),
)
def test_binding_masks_are_counted_as_by_sorting(values, weighted) -> None:
    # Peeled one distinct mask at a time (a sort past PEELED_MASKS of them): the counts and
    # their order (ascending) are np.unique's.
    from dualpath_plan.outcomes.sweep import _weighted_counts

    weights = np.arange(1, values.size + 1) if weighted else None
    masks, inverse = np.unique(values, return_inverse=True)
    counts = np.bincount(np.ravel(inverse), weights=weights, minlength=masks.size)
    want = [(int(m), int(n)) for m, n in zip(masks, counts, strict=True)]
    assert _weighted_counts(values, weights) == want


def test_profile_cache_builds_the_scenario_from_spec_builds(registry) -> None:
    # Profiles re-resolved only when their own kind's overrides change: every scenario of a
    # run of overrides equals the one built without the cache.
    from dualpath_plan.profiles.registry import Overrides
    from dualpath_plan.scenario.bundle import ProfileCache
    from dualpath_plan.scenario.spec import ScenarioSpec

    spec = ScenarioSpec(gpu="h200-sxm")
    cache = ProfileCache()
    for sets in (
        [], ["node.snic_gbit_s=100"], ["node.snic_gbit_s=400", "workload.append_tokens=512"],
        ["node.snic_gbit_s=100"], ["gpu.hbm_gbyte=100", "model.num_layers=30"], [],
    ):  # fmt: skip
        reg = replace(registry, overrides=registry.overrides.merged(Overrides.parse(sets)))
        _same_value(Scenario.from_spec(reg, spec, cache), Scenario.from_spec(reg, spec))


def _same_value(a: object, b: object) -> None:
    """a == b, through dataclasses and arrays (NaN equal to NaN)."""
    import dataclasses

    assert type(a) is type(b)
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            _same_value(getattr(a, f.name), getattr(b, f.name))
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f")  # type: ignore[arg-type]
    else:
        assert a == b


def test_summary_alone_defers_the_jct_and_keeps_every_value(registry) -> None:
    # Without rows to write, the JCT and drain are computed only for a kept best point: the
    # summary (best rows with their JCT, binding counts, reasons) is the one a sweep writing
    # its rows gives, for every objective and several best points.
    from dualpath_plan.outcomes.sweep import run_sweep
    from dualpath_plan.scenario.spec import ScenarioSpec

    spec = ScenarioSpec()
    axes = [parse_axis("P=1:5"), parse_axis("D=1:6"), parse_axis("node.snic_gbit_s=100,400,800"),
            parse_axis("agents=1,300,5000")]  # fmt: skip
    for objective in ("throughput_per_gpu", "jct_s", "throughput_turns_per_s"):
        for top in (1, 4):
            kw = dict(objective=objective, top=top)
            alone = run_sweep(registry, spec, axes, ("basic", "dualpath"), spec.serving, **kw)
            written = run_sweep(
                registry, spec, axes, ("basic", "dualpath"), spec.serving,
                on_chunk=lambda rows: None, **kw,
            )  # fmt: skip
            assert alone.best == written.best
            assert all(math.isfinite(r["jct_s"]) for r in alone.best)
            assert alone.binding_counts == written.binding_counts
            assert {m: p.infeasible_reason for m, p in alone.modes.items()} == {
                m: p.infeasible_reason for m, p in written.modes.items()
            }


def _same_rows(a: dict, b: dict) -> None:
    assert list(a) == list(b)
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        assert x.dtype == y.dtype and x.shape == y.shape, k
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), k


@pytest.mark.parametrize(
    "options",
    [{}, {"speed_of_light": True}, {"paper_assumptions": True}, {"scheduler": "round_robin"}],
)
def test_sweep_grid_chunks_are_the_flat_ones_bit_for_bit(registry, options) -> None:
    # A chunk of whole P rows is solved on P as a column and D as a row (per node count, then
    # broadcast) and its JCT on (P, D, agents) axes: every column the same bits as each pair
    # and point laid flat (infeasible P = 1 included), in every mode.
    from dualpath_plan.outcomes import sweep as sw
    from dualpath_plan.scenario.spec import ScenarioSpec

    spec = ScenarioSpec(**options)
    sc = Scenario.from_spec(registry, spec)
    p_vals, d_vals = np.asarray([1.0, 2.0, 3.0, 5.0, 16.0]), np.asarray([1.0, 2.0, 4.0, 7.0])
    for a_vals in (np.asarray([2048.0]), np.asarray([1.0, 3.0, 64.0, 2048.0, 1e6])):
        agents = np.tile(a_vals, p_vals.size * d_vals.size)
        pair = np.repeat(np.arange(p_vals.size * d_vals.size), a_vals.size)
        P, D = (g.ravel() for g in np.meshgrid(p_vals, d_vals, indexing="ij"))
        grid = (p_vals, d_vals, a_vals)
        for mode in ("basic", "even", "dualpath", "oracle"):
            flat = sw._evaluate_chunk(sc, mode, spec.serving, P, D, agents, "closed", pair)
            rows = sw._evaluate_chunk(
                sc, mode, spec.serving, P, D, agents, "closed", pair, grid=grid
            )
            _same_rows(flat, rows)
            assert flat["feasible"].any() and not flat["feasible"].all()


def test_sweep_chunks_of_whole_rows_or_not_give_the_same_rows(registry) -> None:
    # Chunks that are whole P rows take the grid path, others the flat one: the rows written
    # are the same whatever the chunk.
    from dualpath_plan.outcomes import sweep as sw
    from dualpath_plan.outcomes.sweep import run_sweep
    from dualpath_plan.scenario.spec import ScenarioSpec

    spec = ScenarioSpec()
    axes = [parse_axis("P=1:4"), parse_axis("D=2:5"), parse_axis("agents=1,100,10000")]
    assert sw._grid(0, 12, (4, 4, 3), *(np.asarray(a.values) for a in axes)) is not None
    assert sw._grid(12, 7, (4, 4, 3), *(np.asarray(a.values) for a in axes)) is None
    runs = []
    for c in (5, 12, 24, 1000):
        rows: list[dict] = []
        run_sweep(registry, spec, axes, ("dualpath",), spec.serving, chunk=c, on_chunk=rows.append)
        runs.append({k: np.concatenate([r[k] for r in rows]) for k in rows[0] if k[0] != "_"
                     and np.ndim(rows[0][k])})  # fmt: skip
    for r in runs[1:]:
        _same_rows(runs[0], r)


@pytest.mark.parametrize("writer", WRITERS)
@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.floats(allow_nan=True, allow_infinity=True),
            st.floats(min_value=1e-6, max_value=1e12),
            st.integers(0, 10**12).map(float),
            st.integers(1, 10**9).map(lambda i: i / 10**9),
            st.integers(-30, 30).map(lambda k: 10.0**k),
        ),
        min_size=1,
        max_size=50,
    )
)
def test_float_columns_are_percent_g(values, writer) -> None:
    # sweep --out formats whole columns at once; every cell is Python's '%.9g' of the value
    # (".0" added to a whole number), NaN and inf empty: the same text as one value at a time.
    _need(writer)
    cells = _cells(Floats(np.asarray(values, dtype=float), b"null"), writer)
    for v, text in zip(values, cells, strict=True):
        assert text == (format_float(v) if math.isfinite(v) else "null")
        if math.isfinite(v):
            assert float(text) == pytest.approx(v, rel=FILE_REL, abs=0.0)
            assert text == f"{v:.9g}" or text == f"{v:.9g}.0"


def _hard_floats() -> list[float]:
    """Floats where a shortcut to '%.9g' goes wrong: ties at the 9th digit (m + 0.5 at any
    decade, and the floats either side), powers of ten and the floats either side, values
    that round up to the next power of ten, the fast path's bounds, zeros, subnormals, the
    largest and least floats."""
    rng = np.random.default_rng(11)
    out = [0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e-13, 1e15]
    out += [999999999.5, 999999999.6, 9.999999995, 99999999.95, 0.5e-8, 100000000.5]
    for e in range(-16, 18):
        for m in rng.integers(10**8, 10**9, 40).tolist():
            tie = (m + 0.5) * 10.0 ** (e - 8)
            out += [tie, math.nextafter(tie, 0.0), math.nextafter(tie, math.inf)]
        ten = 10.0**e
        out += [ten, math.nextafter(ten, 0.0), math.nextafter(ten, math.inf), ten * (1 - 5e-10)]
    return out + [-v for v in out]


@settings(max_examples=3000, deadline=None)
@given(v=st.floats(allow_nan=False, allow_infinity=False) | st.floats(-1e16, 1e16))
def test_compiled_float_text_is_percent_g(v) -> None:
    # The compiled writer formats a float by scaling it to 9 digits in one rounding, as
    # float_cells does, and by the C library where that may not give the digits: every float
    # is Python's '%.9g' text (format_float).
    if text_columns.rowtext is None:
        pytest.skip(NOT_BUILT)
    assert text_columns.rowtext.float_text(v) == format_float(v).encode()


@pytest.mark.parametrize("writer", WRITERS)
def test_hard_floats_are_percent_g(writer) -> None:
    _need(writer)
    values = np.asarray(_hard_floats())
    assert _cells(Floats(values), writer) == [format_float(v) for v in values.tolist()]


def test_compiled_writer_refuses_what_it_cannot_write() -> None:
    # A code beyond its texts, an array of another type or length: an error, not a guess.
    _need("compiled")
    out = bytearray()
    codes = Picked((b"a", b"b"), np.asarray([0, 2], dtype=np.intp))
    with pytest.raises(ValueError, match="code beyond"):
        format_rows([codes], 2, out)
    rowtext = text_columns.rowtext
    with pytest.raises(TypeError, match="float64"):
        rowtext.format_rows(out, 2, ((b"", "f", np.zeros(2, np.float32), b""),), b"")
    with pytest.raises(ValueError, match="of 3 items"):
        rowtext.format_rows(out, 3, ((b"", "i", np.zeros(2, np.int64), None),), b"")
    with pytest.raises(ValueError, match="contiguous"):
        rowtext.format_rows(out, 2, ((b"", "f", np.zeros(4)[::2], b""),), b"")
    assert format_rows([b"x", Floats(np.zeros(0))], 0, out) == 0


def test_pure_writer_is_chosen_by_the_environment(tmp_path) -> None:
    # DUALPATH_PLAN_PURE_WRITER=1 sets the compiled writer aside (sweep --out writes with
    # NumPy); unset, the compiled one is used where it was built. (The package this test
    # imported, not whichever the working directory would give.)
    package = Path(text_columns.__file__).parents[2]
    said = {}
    for value in ("1", ""):
        code = "from dualpath_plan.reports import text_columns as t; print(t.rowtext is None)"
        env = {**os.environ, "DUALPATH_PLAN_PURE_WRITER": value, "PYTHONPATH": str(package)}
        run = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
        )
        said[value] = run.stdout.strip()
    assert said["1"] == "True"
    assert said[""] == str(text_columns.rowtext is None)


def test_sweep_summary_names_the_writer_of_its_file(cli, tmp_path, writer, monkeypatch) -> None:
    # A file written slowly says why: the summary (text and JSON) names the writer that wrote
    # it, and why NumPy's where it was.
    out = tmp_path / "points.csv"
    monkeypatch.delenv("DUALPATH_PLAN_PURE_WRITER", raising=False)
    want = "compiled" if writer == "compiled" else "numpy (the compiled writer did not load"
    r = cli("sweep", "--grid", "P=2:3", "--grid", "D=2:3", "--out", str(out))
    assert r.code == 0, r.err
    assert f"every point written to {out} ({want}" in " ".join(r.out.split())
    r = cli("sweep", "--grid", "P=2:3", "--grid", "D=2:3", "--out", str(out), "--json")
    assert json.loads(r.out)["out_writer"].startswith(want)
    monkeypatch.setenv("DUALPATH_PLAN_PURE_WRITER", "1")
    if writer == "numpy":
        assert text_columns.writer_in_use() == "numpy (DUALPATH_PLAN_PURE_WRITER)"
    r = cli("sweep", "--grid", "P=2:3", "--grid", "D=2:3", "--json")
    assert json.loads(r.out)["out_writer"] is None  # no file, no writer


@pytest.mark.parametrize("writer", WRITERS)
def test_float_columns_of_one_range_are_percent_g(writer) -> None:
    # A column's checks are on its least and largest values: columns all in exponent
    # notation, all below 1, all whole, all at a magnitude, negative, with NaN or zeros.
    _need(writer)
    rng = np.random.default_rng(9)
    for lo, hi in [(-13, -5), (-5, 0), (0, 9), (7, 9), (9, 15), (-13, 15), (14, 15), (0, 1)]:
        x = rng.random(2000) * 10.0 ** rng.integers(lo, hi, 2000)
        columns = [x, np.round(x), -x, np.where(rng.random(x.size) < 0.1, np.nan, x)]
        columns.append(np.where(rng.random(x.size) < 0.1, 0.0, x))
        for values in columns:
            want = [format_float(v) if math.isfinite(v) else "" for v in values.tolist()]
            assert _cells(Floats(values), writer) == want


@pytest.mark.parametrize("writer", WRITERS)
def test_int_columns_are_decimal(writer) -> None:
    _need(writer)
    values = np.asarray([0, 1, 9, 10, 99, 100, 12345, -5, -100, 10**17, 2**62, -(2**63)])
    assert _cells(Ints(values), writer) == [str(v) for v in values.tolist()]
    # Each way int_cells goes (by the column's largest value), with negatives, both ends.
    rng = np.random.default_rng(6)
    for top in (9, 999, 1000, 10**8 - 1, 10**8, 10**16 - 1, 10**16, 2**63 - 1):
        values = rng.integers(-top, top, 300, endpoint=True)
        values[:2] = (top, -top)
        assert _cells(Ints(values), writer) == [str(v) for v in values.tolist()]


@pytest.mark.parametrize("writer", WRITERS)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_joined_rows_are_their_cells_one_after_another(data, writer) -> None:
    # join_cells writes each column's cells at their byte offsets in whole words, the bytes
    # past a cell overwritten by the next column's; the last column, and any whose words
    # would reach the next row, exactly. The compiled writer copies texts in whole words
    # too, and copies a cell again for a value the same as the row before's. Either way,
    # every row must be its parts' text in order, each cell NumPy's (column_cells).
    _need(writer)
    rows = data.draw(st.integers(1, 40))
    glue = st.binary(max_size=40).filter(lambda b: b"\0" not in b)
    text = st.binary(max_size=70)

    def values(element: st.SearchStrategy) -> np.ndarray:
        # Runs of one value, as a P/D pair's over its agents.
        drawn = data.draw(st.lists(element, min_size=1, max_size=rows))
        return np.resize(np.repeat(drawn, data.draw(st.integers(1, 3))), rows)

    parts: list[bytes | Column] = []
    for _ in range(data.draw(st.integers(1, 7))):
        parts.append(data.draw(glue))
        kind = data.draw(st.sampled_from(["int", "float", "few", "many", "bool", "constant"]))
        if kind == "int":
            parts.append(Ints(values(st.integers(-(2**63), 2**63 - 1)).astype(np.int64)))
        elif kind == "float":
            empty = data.draw(st.sampled_from([b"", b"null"]))
            parts.append(Floats(values(st.floats()).astype(np.float64), empty))
        elif kind == "constant":
            parts.append(Picked((data.draw(text),)))
        elif kind == "bool":
            flags = data.draw(st.lists(st.booleans(), min_size=rows, max_size=rows))
            parts.append(Picked((b"False", b"True"), np.asarray(flags)))
        else:  # a few texts picked by codes (labels), or many (one per P/D pair)
            texts = data.draw(st.lists(text, min_size=1, max_size=3 if kind == "few" else 80))
            codes = data.draw(
                st.lists(st.integers(0, len(texts) - 1), min_size=rows, max_size=rows)
            )
            parts.append(Picked(tuple(texts), np.asarray(codes, dtype=np.intp)))
    parts.append(data.draw(glue))
    texts = [
        [p] * rows if isinstance(p, bytes) else _cell_bytes(column_cells(p), rows) for p in parts
    ]
    want = b"".join(b"".join(t[r] for t in texts) for r in range(rows))
    assert _rows_text(parts, rows, writer) == want
    # Memory holding another block's text first.
    if writer == "numpy":
        buffer = TextBuffer()
        join_cells(
            [p if isinstance(p, bytes) else column_cells(p) for p in parts[::-1]], rows, buffer
        )
        got = join_cells(
            [p if isinstance(p, bytes) else column_cells(p) for p in parts], rows, buffer
        )
        assert got.tobytes() == want
    else:
        out = bytearray(b"x" * 100)
        format_rows(parts[::-1], rows, out)
        assert bytes(out[: format_rows(parts, rows, out)]) == want


def _cell_bytes(cells, rows: int) -> list[bytes]:
    """Each row's cell (a constant one on every row): any bytes."""
    words, length = cells.dense()
    raw = [words[:, i].astype("<u8").tobytes()[: int(length[i])] for i in range(length.size)]
    return raw * (rows if cells.constant else 1)


def test_sweep_reasons_are_evaluate_modes(registry) -> None:
    # sweep --out asks why the weights do not fit once per node count of a side; each
    # infeasible point's reason must still be what evaluate_mode says for that cluster.
    from dualpath_plan.outcomes import sweep as sw

    sc = Scenario.from_ids(registry)
    cfg = ServingConfig()
    P, D = (g.ravel().astype(float) for g in np.meshgrid(np.arange(1, 5), np.arange(1, 5)))
    for mode in ("basic", "dualpath"):
        rows = sw._evaluate_chunk(sc, mode, cfg, P, D, np.full(P.size, 64.0))
        got = sw._reasons(sc, mode, cfg, P, D, np.arange(P.size), rows["feasible"], sw._Reasons())
        bad = np.flatnonzero(~rows["feasible"])
        assert bad.size
        for i in bad:
            assert got[i] == sw._reason(sc, mode, cfg, int(P[i]), int(D[i]))


def test_the_weights_read_only_their_key(registry) -> None:
    # sweep._Reasons keeps the weights' fit and text under the model and weights_key: the
    # functions must read nothing else of a node or GPU. Given stand-ins that have nothing
    # else (any other attribute read is an AttributeError), every shipped model, node and GPU
    # at 1 to 40 nodes gives what the profiles give.
    from types import SimpleNamespace

    from dualpath_plan.physics.engines import (
        check_weights_fit,
        gpu_weight_bytes,
        weights_fit,
        weights_key,
    )

    def said(model, node, gpu, n) -> object:
        try:
            return check_weights_fit(model, node, gpu, n, "decode")
        except InfeasibleError as exc:
            return exc.detail

    n = np.arange(1.0, 41.0)
    failing = 0
    for model in (registry.get("model", m) for m in registry.ids("model")):
        for node in (registry.get("node", i) for i in registry.ids("node")):
            for gpu in (registry.get("gpu", g) for g in registry.ids("gpu")):
                gpus, hbm = weights_key(node, gpu)
                node_key, gpu_key = (
                    SimpleNamespace(gpus_per_node=gpus),
                    SimpleNamespace(hbm_gbyte=hbm),
                )
                fits = weights_fit(model, node, gpu, n)
                assert np.array_equal(weights_fit(model, node_key, gpu_key, n), fits)
                assert np.array_equal(
                    gpu_weight_bytes(model, node_key, gpu_key, n),
                    gpu_weight_bytes(model, node, gpu, n),
                )
                for k in (1, 2, 3, 8, 40):
                    assert said(model, node_key, gpu_key, k) == said(model, node, gpu, k)
                failing += int(np.count_nonzero(~fits))
    assert failing  # some do not fit: their texts were compared too


def _varied_scenarios(registry, base: dict[str, str]) -> list[Scenario]:
    """The scenario of ``base`` (--set assignments) and, for every numeric field of every
    profile kind, that scenario with the field at half and at one and a half times its value
    (an int field at least 1), where the profile accepts the value."""
    import itertools

    from dualpath_plan.outcomes.sweep import _fmt
    from dualpath_plan.profiles.registry import Overrides
    from dualpath_plan.profiles.schemas import KINDS, schema_for
    from dualpath_plan.scenario.spec import ScenarioSpec

    spec = ScenarioSpec(model=base.get("model", "deepseek-v3.2"))
    sets = [f"{k}={v}" for k, v in base.items() if k != "model"]

    def build(extra: list[str]) -> Scenario | None:
        try:
            reg = replace(registry, overrides=Overrides.parse([*sets, *extra]))
            return Scenario.from_spec(reg, spec)
        except PlanInputError:
            return None

    first = build([])
    assert first is not None
    profiles = {
        "model": first.model, "workload": first.workload, "node": first.prefill_node,
        "gpu": first.prefill_gpu, "storage": first.storage,
    }  # fmt: skip
    out = [first]
    for kind in KINDS:
        if kind not in profiles:
            continue  # engine profiles: nested curves, no numeric field of their own
        for name in schema_for(kind).model_fields:
            value = getattr(profiles[kind], name, None)
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            for factor in (0.5, 1.5):
                v = max(1, round(value * factor)) if isinstance(value, int) else value * factor
                if v != value and (sc := build([f"{kind}.{name}={_fmt(float(v))}"])):
                    out.append(sc)
    assert len(out) > 60 and len(set(itertools.chain.from_iterable(
        (id(s.model), id(s.prefill_node), id(s.prefill_gpu)) for s in out))) > 40  # fmt: skip
    return out


@pytest.mark.parametrize(
    "base",
    [{}, {"model": "llama-3.1-70b", "gpu.hbm_gbyte": "20", "workload.context_tokens": "60000"}],
)
def test_sweep_reasons_follow_every_profile_field(registry, base, monkeypatch) -> None:
    # One sweep's reasons (sweep._Reasons: the weights' fit and text per node count of a side,
    # kept across scenarios by their model and weights_key, and per pair of a layout asked for
    # again; past the weights, the decode side's by D and the prefill side's by mode and P
    # where the assembly does not run the pair) must be each scenario's own: every numeric
    # field of every profile kind varied, the scenarios visited in a shuffled order twice
    # with one memo, every infeasible pair's reason what evaluate_mode says; the same with the
    # memo's bounds so small that it starts over again and again, and without the assembly's
    # word (as for the summary's first infeasible point).
    from dualpath_plan.outcomes import sweep as sw

    rng = np.random.default_rng(15)
    scenarios = _varied_scenarios(registry, base)
    cfg = ServingConfig()
    P, D = (g.ravel().astype(float) for g in np.meshgrid([1, 2, 3, 6], [1, 2, 3, 6]))
    feasible, assembled, want = {}, {}, {}
    for k, sc in enumerate(scenarios):
        for mode in ("basic", "dualpath"):
            rows = sw._evaluate_chunk(sc, mode, cfg, P, D, np.full(P.size, 64.0))
            feasible[k, mode] = ok = rows["feasible"]
            assembled[k, mode] = rows["_assembled"]
            want[k, mode] = [
                None if ok[i] else sw._reason(sc, mode, cfg, int(P[i]), int(D[i]))
                for i in range(P.size)
            ]
    for bounded, told in ((False, True), (True, True), (False, False)):
        if bounded:
            monkeypatch.setattr(sw._Reasons, "MAX_MODELS", 1)
            monkeypatch.setattr(sw._Reasons, "MAX_TABLES", 2)
            monkeypatch.setattr(sw._Reasons, "MAX_PAIRS", 3)
            monkeypatch.setattr(sw._WeightsTable, "MAX_COUNTS", 2)
        said = sw._Reasons()
        for k in [*rng.permutation(len(scenarios)), *rng.permutation(len(scenarios))]:
            for mode in ("basic", "dualpath"):
                ok, runs = feasible[k, mode], assembled[k, mode] if told else None
                got = sw._reasons(scenarios[k], mode, cfg, P, D, np.arange(P.size), ok, said, runs)
                assert got.tolist() == want[k, mode]
        assert said._layout is not None  # the pairs' weights kept for the layout, and used
        monkeypatch.undo()
    said_of = {
        "weights, prefill": "prefill group's HBM", "weights, decode": "decode group's HBM",
        "one request's KV": "a prefill GPU cannot hold", "one sequence": "not one request fits",
    }  # fmt: skip
    kinds = {k for w in want.values() for r in w if r for k, v in said_of.items() if v in r}
    assert len(kinds) >= 3, kinds


def test_a_pair_the_assembly_runs_is_asked_alone(registry) -> None:
    # Past the weights and the decode side, a pair the assembly does not run takes the
    # prefill side's message (of the mode and P: basic here, without layer-wise prefill), and
    # one it runs is asked of evaluate_mode alone (no turns; here feasible pairs marked
    # infeasible, which evaluate_mode runs). One memo for both modes.
    from dualpath_plan.outcomes import sweep as sw
    from dualpath_plan.profiles.registry import Overrides
    from dualpath_plan.scenario.spec import ScenarioSpec

    reg = replace(registry, overrides=Overrides.parse(["gpu.hbm_gbyte=40"]))
    sc = Scenario.from_spec(reg, ScenarioSpec(model="llama-3.1-70b", gpu="a100-sxm-80gb"))
    cfg = ServingConfig()
    P, D = (g.ravel().astype(float) for g in np.meshgrid([1, 2, 4, 8], [1, 2, 4, 8]))
    said = sw._Reasons()
    for mode in ("basic", "dualpath"):
        rows = sw._evaluate_chunk(sc, mode, cfg, P, D, np.full(P.size, 64.0))
        runs, ok = rows["_assembled"], rows["feasible"].copy()
        assert runs.all() == (mode == "dualpath") and ok.all() == (mode == "dualpath")
        ok[::3] = False
        got = sw._reasons(sc, mode, cfg, P, D, np.arange(P.size), ok, said, runs)
        for i in np.flatnonzero(~ok):
            assert got[i] == sw._reason(sc, mode, cfg, int(P[i]), int(D[i]))
        prefill = "in basic, a prefill GPU cannot hold one request's KV"
        assert all(t == "infeasible" if mode == "dualpath" else t.startswith(prefill)
                   for t in got[~ok].tolist())  # fmt: skip


def test_stacked_queues_give_each_cluster_its_own_aps(registry) -> None:
    # INV-22 for the intervals: the APS of many clusters of different scenarios and modes,
    # searched at once (online.stack_queues), is each one's own, bit for bit.
    from dualpath_plan.outcomes.online import stack_queues
    from dualpath_plan.outcomes.uncertainty import perturbations

    base = Scenario.from_ids(registry)
    scenarios = [base, replace(base, prefill_nodes=3, decode_nodes=5)]
    scenarios += [s for p in perturbations(base) for s in (p.below, p.above)]
    for cfg in (ServingConfig(), ServingConfig(ttft_slo_s=0.5, max_utilization=1.0)):
        queues, alone = [], []
        for s in scenarios:
            for mode in ("basic", "even", "dualpath", "oracle"):
                sat = saturated(s, mode, s.prefill_nodes, s.decode_nodes)
                q = online_queue(s, sat.assembly, sat.solution)
                queues.append(q)
                alone.append(online_aps(q, cfg))
        stacked = stack_queues(queues)
        assert len(stacked.groups) < len(queues)  # equal decode groups are one
        together = online_aps(stacked, cfg)
        for k, one in enumerate(alone):
            for name in ("aps", "limit", "ttft_s", "tpot_s", "slo_aps"):
                assert getattr(together, name)[k] == getattr(one, name)[0], (k, name)


def test_sweep_on_an_engine_node_is_size_at_every_point(registry, cli, tmp_path) -> None:
    """A node timed by its engine profile (the operator model) runs each prefill node count
    on its own replica layout (EP8 within one DGX H200, EP16 over two, ...): a sweep's point
    is size's for that cluster, whatever else the grid holds (the grid's first count's layout
    was applied to every point: 2P3D read 61.5 turns/s in a P=1:4 sweep, 43.3 in size)."""
    rows, _ = _sweep_rows(
        cli,
        tmp_path,
        "--node",
        "dgx-h200",
        "--grid",
        "P=1:3",
        "--grid",
        "D=1:3",
        "--mode",
        "basic,dualpath",
        "--aps",
    )
    sc = Scenario.from_ids(registry, node="dgx-h200")
    cfg = ServingConfig()
    checked = 0
    for row in rows:
        if row["feasible"] != "True":
            continue
        o = _size_of_row(sc, row, cfg)
        _assert_row_is_size(row, o)
        assert float(row["aps"]) == pytest.approx(o.aps, rel=1e-9 + FILE_REL, abs=1e-15)
        checked += 1
    assert checked >= 8


def test_sweep_ranks_the_rate_the_agents_run_at(cli, tmp_path) -> None:
    # issue 31: a sweep over agents ranked 89P80D at 1 agent, 2,719 turns/s (the saturated
    # rate), first, and its CSV kept 2,719 for 1, 2 and 100 agents; size said 0.17 turns/s.
    out = tmp_path / "points.csv"
    args = ("--grid", "P=89", "--grid", "D=80", "--grid", "agents=1,2,100")
    assert cli("sweep", *args, "--out", str(out)).code == 0
    rows = list(csv.DictReader(out.open()))
    size = cli("size", "-P", "89", "-D", "80", "--agents", "1", "--json").json()["modes"]
    one = size["dualpath"]
    assert float(rows[0]["throughput_turns_per_s"]) == pytest.approx(
        one["throughput_turns_per_s"], rel=1e-8
    )
    assert float(rows[0]["saturated_turns_per_s"]) == pytest.approx(
        one["saturated_turns_per_s"], rel=1e-8
    )
    rates = [float(r["throughput_turns_per_s"]) for r in rows]
    assert rates[0] < rates[1] < rates[2] < float(rows[0]["saturated_turns_per_s"])
    data = cli("sweep", "--grid", "P=1:6", "--grid", "D=1:6", "--grid", "agents=1:100",
               "--json").json()  # fmt: skip
    best = data["modes"]["dualpath"]["best"][0]
    assert best["agents"] == 100  # the most agents run the most turns per GPU
    assert best["throughput_turns_per_s"] <= best["saturated_turns_per_s"]


@pytest.mark.parametrize(
    ("args", "new"),
    [
        (("recommend", "--budget-nodes", "4", "--objective", "jct"), "jct_s"),
        (("recommend", "--budget-nodes", "4", "--objective", "throughput-per-gpu"),
         "throughput_per_gpu"),
        (("simulate", "--agents", "8", "--scheduler", "paper"), "queue_aware"),
    ],
)  # fmt: skip
def test_old_spellings_are_refused_with_the_new_one(cli, args, new) -> None:
    result = cli(*args)
    assert result.code == 2
    assert f"now spelled '{new}'" in result.err and "Traceback" not in result.err


def test_a_grid_over_p_on_a_stock_node_runs(cli) -> None:
    """A grid of P on a node timed by its engine profile: the load-dependent cycle's table is
    P by D there and its per-agent tail the decode side's (one per D value); laying the tail
    out as the table crashed (`sweep --node dgx-b200 --grid P=1:3`, found by the fuzzer)."""
    r = cli("sweep", "--node", "dgx-b200", "--grid", "P=1:3", "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert data["feasible"] > 0
