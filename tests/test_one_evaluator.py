"""Issue 31: one answer for one cluster, whichever command asks. Over random scenarios (models,
workloads, a prefill node unlike the decode node, SLOs and headroom, a grid over P, D, agents
and a profile field), a sweep point, ``size`` (``evaluate_mode``), the ``recommend`` row of
that split (one point of each example: it evaluates the whole budget) and ``paths`` give the
same numbers, field by field, to a relative 1e-9; a point that does not run is infeasible in
every one of them (INV-72).

``ONE_EVALUATOR_EXAMPLES`` sets the examples (CI: the default, 10; 200 for a long run)."""

from __future__ import annotations

import math
import os
from dataclasses import fields, replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dualpath_plan.errors import InfeasibleError
from dualpath_plan.outcomes.limits import LinkLimit
from dualpath_plan.outcomes.online import APS_LIMITS
from dualpath_plan.outcomes.paths import explain_paths
from dualpath_plan.outcomes.recommend import Budget, recommend
from dualpath_plan.outcomes.serving import ModeOutcome, evaluate_mode
from dualpath_plan.outcomes.sweep import parse_axis, run_sweep
from dualpath_plan.physics.modes import REPORT_MODES
from dualpath_plan.profiles.registry import Overrides
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec
from dualpath_plan.solvers.closed_form import mask_names

EXAMPLES = int(os.environ.get("ONE_EVALUATOR_EXAMPLES", "10"))
REL = 1e-9
NODES = ("dualpath-hopper", "dgx-h100", "dgx-h200", "dgx-b200")
# A profile field a grid sweeps, with the range its values are drawn from.
FIELDS = {
    "node.snic_efficiency": (0.2, 1.0),
    "node.cnic_efficiency": (0.3, 1.0),
    "workload.tool_latency_s": (0.0, 30.0),
    "storage.max_client_read_gbyte_s": (5.0, 200.0),
}


def close(a: object, b: object, where: str) -> None:
    """Equal to REL for numbers (NaN with NaN, inf with inf), recursively in dicts and
    sequences, exactly otherwise."""
    if isinstance(a, LinkLimit) and isinstance(b, LinkLimit):
        for f in fields(a):
            close(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), where
        for k in a:
            close(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, tuple | list) and isinstance(b, tuple | list):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            close(x, y, f"{where}[{i}]")
    elif isinstance(a, float | int | np.floating | np.integer) and not isinstance(a, bool):
        x, y = float(a), float(b)  # type: ignore[arg-type]
        if math.isnan(x) or math.isnan(y):
            assert math.isnan(x) and math.isnan(y), (where, x, y)
        else:
            assert x == pytest.approx(y, rel=REL, abs=1e-300), (where, x, y)
    else:
        assert a == b, (where, a, b)


@st.composite
def cases(draw):
    prefill = draw(st.sampled_from(NODES))
    decode = draw(st.sampled_from([n for n in NODES if n != prefill]))
    name = draw(st.sampled_from(sorted(FIELDS)))
    lo, hi = FIELDS[name]
    values = sorted({round(draw(st.floats(lo, hi)), 4) for _ in range(2)})
    workload = draw(st.sampled_from(["paper-64k", "paper-32k", "agentic-22gb-pflop"]))
    spec = {
        "model": draw(st.sampled_from(["deepseek-v3.2", "ds-27b", "qwen2.5-32b"])),
        "workload": workload,
        "prefill_node": prefill,
        "decode_node": decode,
        "ttft_slo_s": draw(st.sampled_from([0.5, 2.0, 4.0, 20.0])),
        "tpot_slo_s": draw(st.sampled_from([0.02, 0.05, 0.2])),
        "max_utilization": draw(st.sampled_from([0.5, 0.8, 1.0])),
        "scheduler": draw(st.sampled_from(["ideal", "round_robin", "queue_aware"])),
    }
    # A store of finite size (a workload of tokens: an abstract one has no prefix to hold),
    # each mode reading the share of it that it chooses per cluster (read_choice).
    if workload != "agentic-22gb-pflop":
        capacity = draw(st.sampled_from([None, None, "300GB", "3TB", "1PB"]))
        if capacity is not None:
            spec["storage_capacity"] = capacity
    grid = {
        "P": sorted({draw(st.integers(1, 5)) for _ in range(2)}),
        "D": sorted({draw(st.integers(1, 5)) for _ in range(2)}),
        "agents": sorted({draw(st.integers(1, 3000)) for _ in range(2)}),
        name: values,
    }
    if "storage_capacity" in spec:  # a profile's working set is its live agents': one value
        grid["agents"] = grid["agents"][:1]
    return spec, grid, draw(st.sampled_from(REPORT_MODES))


def _axes(grid: dict[str, list[float]]):
    return [parse_axis(f"{k}={','.join(repr(float(v)) for v in vs)}") for k, vs in grid.items()]


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(case=cases())
def test_sweep_size_recommend_and_paths_agree_field_by_field(registry, case) -> None:
    spec_values, grid, mode = case
    spec = ScenarioSpec.build(spec_values)
    chunks: list[dict] = []
    try:
        run_sweep(registry, spec, _axes(grid), (mode,), spec.serving, aps=True,
                  on_chunk=chunks.append)  # fmt: skip
    except InfeasibleError:
        return  # a profile value no cluster can use (said once, for the grid)
    field_name = next(k for k in grid if "." in k)
    recommended: set[tuple[float, int, int]] = set()
    for rows in chunks:
        for k in range(int(np.size(rows["point"]))):
            P, D, agents = int(rows["P"][k]), int(rows["D"][k]), int(rows["agents"][k])
            value = float(rows[field_name][k])
            reg = replace(
                registry,
                overrides=registry.overrides.merged(Overrides.parse([f"{field_name}={value!r}"])),
            )
            point_spec = spec.with_(prefill_nodes=P, decode_nodes=D, agents=agents)
            sc = Scenario.from_spec(reg, point_spec)
            where = f"{mode} {P}P{D}D {agents} agents {field_name}={value}"
            try:
                size = evaluate_mode(sc, mode, point_spec.serving)
            except InfeasibleError:
                assert not rows["feasible"][k], where
                continue
            assert rows["feasible"][k], where
            gpus = P * sc.prefill_node.gpus_per_node + D * sc.decode_node.gpus_per_node
            point = {
                "throughput_turns_per_s": size.throughput_turns_per_s,
                "throughput_per_gpu": size.throughput_turns_per_s / gpus,
                "saturated_turns_per_s": size.saturated_turns_per_s,
                "jct_s": size.jct_s,
                "drain_s": size.drain_s,
                "decode_path_fraction": size.decode_path_fraction,
                "aps": size.aps,
            }
            if size.read_share is not None:
                point["read_share"] = size.read_share
            for name, expected in point.items():
                close(float(rows[name][k]), expected, f"sweep {where}: {name}")
            assert mask_names(int(rows["binding_mask"][k])) == list(size.binding), where
            assert APS_LIMITS[int(rows["aps_limit"][k])] == size.aps_limit, where

            paths = explain_paths(sc, mode)
            close(paths.saturated_turns_per_s, size.saturated_turns_per_s, f"paths {where}")
            close(paths.decode_path_fraction, size.decode_path_fraction, f"paths {where}")
            assert paths.binding == size.binding, where
            close(paths.limits, size.limits, f"paths {where}: limits")

            if recommended:
                continue  # recommend evaluates a whole budget: one point per example
            recommended.add((value, P + D, agents))
            rec = recommend(sc, Budget(nodes=P + D), point_spec.serving, "jct_s", (mode,))
            row = next(c for c in rec.candidates if (c.prefill_nodes, c.decode_nodes) == (P, D))
            got = row.modes[mode]
            assert isinstance(got, ModeOutcome), where
            for f in fields(ModeOutcome):
                close(getattr(got, f.name), getattr(size, f.name), f"recommend {where}: {f.name}")
