"""The analytical model against the simulation offline on random scenarios (issue 30, item 5;
INV-100, INV-101): bench/agreement.py's draw of seed 0.

``SIM_AGREEMENT_CASES`` sets how many of its cases run (default 2, a few seconds; 500 for the
issue's bound, about two hours here)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import numpy as np
import pytest

import dualpath_plan.api as dp
from dualpath_plan.outcomes.serving import closed_cycle, light_load, runnable
from tests.conftest import load_bench

if TYPE_CHECKING:
    from dualpath_plan.outcomes.serving import ModeOutcome
    from dualpath_plan.outcomes.simulation import SimResult

CASES = int(os.environ.get("SIM_AGREEMENT_CASES", "2"))


@pytest.mark.parametrize("case", range(CASES))
def test_size_agrees_with_the_simulation_on_random_scenarios(case: int) -> None:
    """INV-100: outside the regimes docs/model.md names as known limits (dualpath under round
    robin, a processor-sharing read link binding, latency-bound), throughput within 5% and
    JCT and TPOT within 10% of the simulation's; a case in a known limit says which."""
    bench = load_bench("agreement")
    m = bench.measure(bench.draw_cases(case + 1)[case])
    why = bench.known_limit(m)
    if why is not None:
        pytest.skip(f"{m.case.label()}: known limit, {why}")
    for metric in ("throughput", "jct", "tpot"):
        assert m.within(metric), (m.case.label(), metric, m.error(metric))


def test_the_loaded_cycle_is_the_closed_systems_fixed_point() -> None:
    """INV-101: the load-dependent cycle c(n) is the light-load cycle for one agent, rises
    with the agents running, and at each n solves Little's law at the decode group,
    b = n g TPOT(b) / c(n), within 0.3% (the table's interpolation)."""
    sc = dp.scenario(dp.spec())
    sat, _ = runnable(sc, "dualpath")
    at = closed_cycle(sc, sat)
    one = float(light_load(sc, sat)[1][()])
    assert float(at(1.0)) == pytest.approx(one, rel=1e-12)
    n = np.array([1.0, 8.0, 64.0, 256.0, 1024.0, 4096.0])
    c = at(n)
    assert np.all(np.diff(c) >= 0)
    group = sat.assembly.de.decode
    assert group is not None
    d = sc.turn_demand
    gen = d.mean(d.generated_tokens)
    rest = c[0] - gen * group.step_s(1.0)
    for ni, ci in zip(n[1:], c[1:], strict=True):
        b = ni * (ci - rest) / ci  # Little: the share of the cycle spent decoding
        if b < 1.0 or b > group.max_batch:
            continue
        assert ci == pytest.approx(rest + gen * group.step_s(b), rel=3e-3)


def _both(spec: dict[str, object], mode: str, scheduler: str) -> tuple[SimResult, ModeOutcome]:
    """The simulation of ``spec`` offline (seed 0) and the analytical outcome of its cluster
    under the scheduler ``simulate --compare`` pairs with the simulated one."""
    from dataclasses import replace

    from dualpath_plan.cli.simulate_cmd import ANALYTICAL_SCHEDULER
    from dualpath_plan.outcomes.serving import evaluate_mode
    from dualpath_plan.outcomes.simulation import SimConfig, simulate

    stated = dp.spec(**spec)
    sc = dp.scenario(stated)
    r = simulate(sc, SimConfig(mode=mode, agents=stated.agents, scheduler=scheduler, seed=0))  # type: ignore[arg-type]
    policy = ANALYTICAL_SCHEDULER[scheduler]
    sc = replace(sc, scheduling=replace(sc.scheduling, policy=policy))  # type: ignore[arg-type]
    return r, evaluate_mode(sc, mode, stated.serving)  # type: ignore[arg-type]


def test_offline_tpot_is_turn_weighted_over_the_agents_still_running() -> None:
    """INV-111: the offline TPOT is the mean over every turn of the run, as the simulation's
    is: while n = N S(k) agents run, the step at their Little's batch (``offline_tpot_s``).
    Llama-3.1-70B on dualpath-hopper 4P1D, 128 agents of paper-32k, basic, decode bound
    (bench/agreement.py case 270): the simulation's 48.5 ms; the step at the N agents' batch
    54.8 ms (+12.9%), over the run 50.5 ms (+4.2%)."""
    from dualpath_plan.outcomes.serving import cluster_assembly

    spec = {
        "model": "llama-3.1-70b",
        "node": "dualpath-hopper",
        "prefill_nodes": 4,
        "decode_nodes": 1,
        "workload": "paper-32k",
        "agents": 128,
    }
    r, o = _both(spec, "basic", "queue_aware")
    group = cluster_assembly(dp.scenario(dp.spec(**spec)), "basic").de.decode
    assert group is not None
    sim, at_n = r.tpot_s.mean, group.step_s(max(o.decode_batch, 1.0))
    assert o.tpot_s == pytest.approx(sim, rel=0.10)
    assert at_n > sim * 1.10  # the batch of all N agents: outside the bound
    assert o.tpot_s < at_n  # fewer agents run through the run, a smaller batch


def test_offline_slot_wait_is_the_simulations_where_the_decode_slots_bind() -> None:
    """INV-111: where the decode group's HBM batch binds, the closed system's wait at the
    decode slots (``decode_wait_s``, turn-weighted over the run with the TPOT) is the
    simulation's. Qwen3-235B-A22B on DGX H100 4P1D, 64 agents of paper-64k, basic
    (bench/agreement.py case 13): 15.84 s a turn simulated, 16.11 s analytical; TPOT 113.2 ms
    and 114.7 ms."""
    spec = {
        "model": "qwen3-235b-a22b",
        "node": "dgx-h100",
        "prefill_nodes": 4,
        "decode_nodes": 1,
        "workload": "paper-64k",
        "agents": 64,
    }
    r, o = _both(spec, "basic", "queue_aware")
    assert o.decode_wait_s == pytest.approx(r.decode_wait_s.mean, rel=0.10)
    assert o.tpot_s == pytest.approx(r.tpot_s.mean, rel=0.10)
