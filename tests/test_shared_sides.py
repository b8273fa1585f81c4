"""The modes of one cluster share the sides they build alike (scenario/assemble.py side_key,
outcomes/serving.py ClusterMemo): every mode's assembly, optimum and outcome are those it has
built alone, in every mode, for every scheduler, with mixed nodes and with efficiencies off;
evaluate()'s one APS search for all modes gives each mode what it gets alone; the intervals
reuse the centre's outcomes for a perturbation that a bound cut to nothing; a plain `size`'s
one search for the cluster and its perturbed twins gives what evaluate and the intervals give
apart; scenarios alike in all their sides read share them."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from dualpath_plan.errors import InfeasibleError, PlanInputError
from dualpath_plan.outcomes import uncertainty
from dualpath_plan.outcomes.serving import (
    ClusterMemo,
    cores_each,
    evaluate,
    evaluate_mode,
    mode_offline,
    offline_each,
)
from dualpath_plan.outcomes.uncertainty import (
    _unmoved,
    evaluate_with_intervals,
    mode_intervals,
    perturbations,
)
from dualpath_plan.physics.engines import Scheduling
from dualpath_plan.physics.modes import MODES
from dualpath_plan.physics.workload import workload_demand
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ServingConfig


def _scenarios(registry) -> list[Scenario]:
    base = Scenario.from_ids(
        registry, model="deepseek-v3.2", prefill_nodes=2, decode_nodes=4, workload="paper-64k"
    )
    mixed = Scenario.from_ids(
        registry,
        model="deepseek-v3.2",
        prefill_nodes=3,
        decode_nodes=2,
        workload="paper-32k",
        prefill_node="dgx-h100",
        decode_node="dualpath-hopper",
    )
    return [
        base,
        mixed,
        replace(base, scheduling=Scheduling(policy="round_robin")),
        replace(base, scheduling=Scheduling(baseline="ideal")),
        replace(base, options=replace(base.options, efficiencies=False)),
        # Basic cannot hold a request's KV beside this reserve: the other modes run.
        replace(
            base,
            prefill_node=base.prefill_node.model_copy(update={"prefill_hbm_reserve_gbyte": 20.5}),
        ),
    ]


def _same(a: object, b: object) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for k in a:
            _same(a[k], b[k])
    elif isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _same(x, y)
    else:
        assert np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True), (a, b)


@pytest.mark.parametrize("index", range(6))
def test_modes_sharing_sides_get_what_they_build_alone(registry, index) -> None:
    sc = _scenarios(registry)[index]
    cfg = ServingConfig()
    memo = ClusterMemo()
    for m in MODES:
        try:
            alone = mode_offline(sc, m, cfg)
        except InfeasibleError as exc:
            with pytest.raises(InfeasibleError) as shared_exc:
                mode_offline(sc, m, cfg, memo)
            assert str(shared_exc.value) == str(exc)
            continue
        shared = mode_offline(sc, m, cfg, memo)
        _same(shared[1:], alone[1:])
        for got, want in ((shared[0].assembly, alone[0].assembly),):
            _same(got.links.capacity, want.links.capacity)
            _same(got.links.load, want.links.load)
            _same(got.pe.per_node, want.pe.per_node)
            _same(got.de.per_node, want.de.per_node)
            for side in ("pe", "de"):
                g, w = getattr(got, side), getattr(want, side)
                assert {k: [f.describe() for f in v] for k, v in g.factors.items()} == {
                    k: [f.describe() for f in v] for k, v in w.factors.items()
                }
        _same(shared[0].solution.throughput_turns_per_s, alone[0].solution.throughput_turns_per_s)
    shared_memo = ClusterMemo()
    for m in MODES:
        try:
            alone_outcome = evaluate_mode(sc, m, cfg)
        except InfeasibleError:
            continue
        assert evaluate_mode(sc, m, cfg, shared_memo) == alone_outcome


@pytest.mark.parametrize("index", range(6))
@pytest.mark.parametrize(
    "cfg",
    [
        ServingConfig(),
        ServingConfig(max_utilization=1.0, agents=64),
        ServingConfig(ttft_slo_s=3.0, max_utilization=1.0),  # TTFT- and throughput-bound
        ServingConfig(ttft_slo_s=0.5, tpot_slo_s=0.02),  # unreachable
    ],
)
def test_evaluate_searches_every_mode_at_once_as_each_alone(registry, index, cfg) -> None:
    """evaluate() finds every mode's APS in one search (online.stack_queues): each mode's
    outcome is evaluate_mode's, bit for bit."""
    sc = _scenarios(registry)[index]
    report = evaluate(sc, cfg, MODES, strict=False)
    assert len(report.modes) + len(report.infeasible) == len(MODES)
    for m in MODES:
        if m in report.modes:
            assert report.modes[m] == evaluate_mode(sc, m, cfg)


def test_intervals_take_the_centre_for_a_step_cut_to_nothing(registry) -> None:
    """A turns_spread at its upper bound (paper-64k's, until its refit of 2026-12-06): its
    step up leaves the scenario as it was, and the intervals take the centre's outcomes
    (evaluate's) for it instead of evaluating it again; the same numbers, bit for bit, as
    evaluating it."""
    sc = _scenarios(registry)[0]
    at_bound = sc.workload.model_copy(update={"turns_spread": 1.0})
    sc = replace(sc, workload=at_bound, turn_demand=workload_demand(sc.model, at_bound))
    cfg = ServingConfig()
    moves = perturbations(sc)
    spread = next(p for p in moves if p.field == "turns_spread")
    assert spread.above.workload.turns_spread == sc.workload.turns_spread
    report = evaluate(sc, cfg, strict=False)
    modes = tuple(report.modes)
    assert mode_intervals(sc, cfg, modes, report.modes) == mode_intervals(sc, cfg, modes)


def test_size_evaluates_the_cluster_and_its_intervals_at_once(registry, monkeypatch) -> None:
    """evaluate_with_intervals (`size`: the cluster and its perturbed twins in one solve per
    mode and one APS search, nothing evaluated again) gives evaluate's report and
    mode_intervals' intervals, each found apart, to the bit: calibrated, mixed and
    uncalibrated nodes, a mode that does not run, and a turns_spread at its bound (a step cut
    to nothing)."""
    scenarios = _scenarios(registry)
    at_bound = scenarios[0].workload.model_copy(update={"turns_spread": 1.0})
    scenarios.append(
        replace(
            scenarios[0],
            workload=at_bound,
            turn_demand=workload_demand(scenarios[0].model, at_bound),
        )
    )
    cfg = ServingConfig(agents=96)
    for sc in scenarios:
        calls: list[int] = []

        def once(scenarios, modes, cfg, calls=calls):
            calls.append(len(scenarios))
            return cores_each(scenarios, modes, cfg)

        with monkeypatch.context() as m:
            m.setattr(uncertainty, "cores_each", once)
            m.setattr(uncertainty, "_mode_outcomes", None)  # no evaluation one by one
            report, intervals = evaluate_with_intervals(sc, cfg)
        # One evaluation of the cluster and its moved twins (none where it has no interval).
        assert len(calls) == 1 and calls[0] == 1 + 2 * len(intervals.fields) - sum(
            _unmoved(sc, p, s) for p in perturbations(sc) for s in (p.below, p.above)
        )
        alone = evaluate(sc, cfg, strict=False)
        assert report.infeasible == alone.infeasible
        assert report.modes == alone.modes
        assert intervals == mode_intervals(sc, cfg, tuple(alone.modes), alone.modes)


def test_the_clusters_of_many_scenarios_at_once_are_each_alone(registry) -> None:
    """offline_each (every mode of many scenarios, their optima solved at once per mode:
    closed_form.solve_each) gives each scenario and mode what mode_offline gives it alone, or
    the same error: the scenarios above and each one moved by every fitted field's error,
    with reserves at which a step up leaves basic, or every mode, no room for a request."""
    scenarios = []
    for sc in _scenarios(registry):
        scenarios += [sc, *(s for p in perturbations(sc) for s in (p.below, p.above))]
    base = scenarios[0]
    for reserve in (19.9, 20.3, 24.0, 60.0):
        node = base.prefill_node.model_copy(update={"prefill_hbm_reserve_gbyte": reserve})
        moved = replace(base, prefill_node=node, decode_node=node)
        scenarios += [moved, *(s for p in perturbations(moved) for s in (p.below, p.above))]
    cfg = ServingConfig()
    found = offline_each(scenarios, MODES, cfg)
    errors = 0
    for sc, each in zip(scenarios, found, strict=True):
        assert tuple(each) == tuple(MODES)
        for m, got in each.items():
            try:
                alone = mode_offline(sc, m, cfg)
            except PlanInputError as exc:
                assert isinstance(got, PlanInputError) and str(got) == str(exc)
                errors += 1
                continue
            assert not isinstance(got, PlanInputError)
            _same(got[1:], alone[1:])
            g, w = got[0].solution, alone[0].solution
            for f in ("throughput_turns_per_s", "decode_path_fraction", "split_low", "split_high"):
                _same(getattr(g, f), getattr(w, f))
            _same(g.binding_mask, w.binding_mask)
            _same(g.utilization, w.utilization)
    assert errors  # some steps leave a mode no room


def test_scenarios_alike_in_their_sides_share_them(registry) -> None:
    """Scenarios that differ only in what no side reads (turns_spread moves how many turns an
    agent takes, not a turn's mean) build their sides once (serving._sides_key), and each
    still gets what it gets alone (the test above); a node moved by its error builds its own."""
    sc = _scenarios(registry)[0]
    spread = [s for p in perturbations(sc) if p.field == "turns_spread" for s in (p.below, p.above)]
    spread = [s for s in spread if s.turn_demand is not sc.turn_demand]
    assert spread
    cfg = ServingConfig()
    rows = offline_each([sc, *spread], MODES, cfg)
    for m in MODES:
        centre = rows[0][m]
        assert not isinstance(centre, PlanInputError)
        for row in rows[1:]:
            got = row[m]
            assert not isinstance(got, PlanInputError)
            assert got[0].assembly.pe is centre[0].assembly.pe
            assert got[0].assembly.de is centre[0].assembly.de
    node = next(p.below for p in perturbations(sc) if p.field == "snic_efficiency")
    rows = offline_each([sc, node], ("dualpath",), cfg)
    apart = [row["dualpath"] for row in rows]
    assert not any(isinstance(a, PlanInputError) for a in apart)
    assert apart[0][0].assembly.pe is not apart[1][0].assembly.pe  # type: ignore[index]


def _decode_side(registry, values: list[str], node: str = "dualpath-hopper"):
    from dualpath_plan.profiles.registry import Overrides
    from dualpath_plan.scenario.assemble import assemble

    reg = replace(registry, overrides=Overrides.parse(values))
    sc = Scenario.from_ids(reg, prefill_node=node, decode_node=node)
    P, D = np.arange(1.0, 5.0).reshape(-1, 1), np.arange(1.0, 7.0).reshape(1, -1)
    return assemble(sc, "dualpath", P, D).de.decode


def test_decode_groups_of_the_same_fields_are_one(registry, monkeypatch) -> None:
    """A decode group over an array of node counts is given again where its fields are the
    same (physics/engines.py ``_interned``): scenarios that differ in a field the decode side
    does not read (the storage NIC's rate) share it, so that its step table is built once;
    one the group reads (the MFU sets its peak, the appended tokens its context) gets its own;
    a group with the operator model (an engine profile) is always its own; and the shared
    group steps as the one built for its scenario alone, bit for bit."""
    from dualpath_plan.physics import engines

    base = _decode_side(registry, ["node.snic_gbit_s=100"])
    same = _decode_side(registry, ["node.snic_gbit_s=800"])
    assert same is base
    assert _decode_side(registry, ["node.prefill_mfu=0.2"]) is not base
    assert _decode_side(registry, ["workload.append_tokens=512"]) is not base
    with monkeypatch.context() as m:
        m.setattr(engines, "_interned", lambda group: group)
        alone = _decode_side(registry, ["node.snic_gbit_s=800"])
    assert alone is not base
    b = np.array([[1.0], [8.0], [64.0], [512.0]])
    assert np.array_equal(alone.step_array_s(b), base.step_array_s(b))
    assert np.array_equal(alone.max_batch_array(), base.max_batch_array())
    with_engine = [_decode_side(registry, [f"node.snic_gbit_s={v}"], "dgx-h100") for v in (1, 2)]
    assert with_engine[0].operators is not None and with_engine[0] is not with_engine[1]
