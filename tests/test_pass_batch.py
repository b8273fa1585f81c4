"""The batch a saturated prefill GPU's pass holds (docs/model.md section 4, prefill batching;
INV-99): the least of the HBM cap, the engine's compute quota and, under the paper's
queue-aware scheduler, what its admission threshold beta lets wait."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualpath_plan.physics.engines import (
    BETA_COMPUTE_S,
    QUOTA_PER_LAYER_S,
    PrefillEngine,
    Scheduler,
)
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec


def _engine(t0: float, u: float, cap: float, g: float, quota: float, admission: float):
    return PrefillEngine(
        t1_s=u,
        t0_s=t0,
        copy_s=0.0,
        batch_cap=cap,
        read_latency_s=0.0,
        free_hbm_bytes=1e9,
        kv_bytes_per_request=1e9 / max(cap, 1e-9),
        request_gpus=g,
        pass_quota_s=quota,
        admission_s=admission,
    )


@settings(max_examples=200, deadline=None)
@given(
    t0=st.floats(1e-4, 5.0),
    u=st.floats(1e-3, 5.0),
    cap=st.floats(1.0, 1e4),
    g=st.sampled_from([1.0, 2.0, 4.0, 8.0]),
    quota=st.floats(0.01, 60.0),
    admission=st.sampled_from([0.0, BETA_COMPUTE_S]),
)
def test_the_pass_batch_is_the_least_of_its_limits(t0, u, cap, g, quota, admission) -> None:
    pm = _engine(t0, u, cap, g, quota, admission)
    b = pm.pass_batch
    assert 0 < b <= cap * (1 + 1e-12)
    assert b <= pm.quota_batch * (1 + 1e-12) and b <= pm.admitted_batch * (1 + 1e-12)
    assert b == pytest.approx(min(cap, pm.quota_batch, pm.admitted_batch), rel=1e-12)
    # The quota: a pass of the quota's batch takes the quota, unless one request is over it.
    q = pm.quota_batch
    if q > 1.0 / g:
        assert t0 + q * u == pytest.approx(quota, rel=1e-9)
    else:
        assert q == pytest.approx(1.0 / g)
    if admission == 0.0:
        assert pm.admitted_batch == float("inf")
        assert b == pytest.approx(min(cap, q), rel=1e-12)
    else:
        # beta: the requests prefilled in S seconds at the largest batch b*, at least one
        # request of its replica (a GPU under beta takes the next turn whole, however long).
        largest = max(min(cap, q), 1.0 / g)
        admitted = max(admission * largest / (t0 + largest * u), 1.0 / g)
        assert pm.admitted_batch == pytest.approx(admitted)
        assert pm.pass_batch >= min(cap, 1.0 / g) * (1 - 1e-12)
    # The rate at the pass batch never exceeds the rate at the HBM cap (the batch grows the
    # rate: b / (t0 + b u) rises with b).
    at_cap = dataclasses.replace(pm, pass_quota_s=float("inf"), admission_s=0.0)
    assert pm.max_rate <= at_cap.max_rate * (1 + 1e-12)


def test_the_queue_aware_scheduler_admits_and_balances_gpus() -> None:
    qa, rr = Scheduler("queue_aware"), Scheduler("round_robin")
    assert qa.admits_by_beta and not rr.admits_by_beta
    assert qa.gpu_imbalance(16.0) == 1.0 and rr.gpu_imbalance(16.0) > 1.0
    # Across nodes the queue-aware scheduler still keeps within one request of the mean.
    assert qa.imbalance(4.0) == pytest.approx(1 + 1 / 16)


def test_the_assembly_batches_at_the_pass_batch() -> None:
    """The README default: DualPath (queue-aware) batches at beta's 20.7 requests, not the HBM
    cap's 272 (the compute link's batching factor b / (b + h) falls accordingly); Basic's
    round-robin scheduler has no admission and its HBM cap (5.1) binds first."""
    sc = Scenario.from_spec(Registry.load(use_env=False), ScenarioSpec())
    from dualpath_plan.outcomes.serving import runnable

    dual = runnable(sc, "dualpath")[0].prefill.one_cluster()
    basic = runnable(sc, "basic")[0].prefill.one_cluster()
    assert dual.admission_s == BETA_COMPUTE_S and basic.admission_s == 0.0
    assert dual.pass_quota_s == pytest.approx(QUOTA_PER_LAYER_S * sc.model.num_layers)
    assert dual.pass_batch == pytest.approx(dual.admitted_batch) and dual.pass_batch < 25
    assert dual.batch_cap > 200 and dual.batch_limit() == "admission (beta)"
    assert basic.pass_batch == pytest.approx(basic.batch_cap) and basic.batch_limit() == "HBM"
