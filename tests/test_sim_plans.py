"""Plans by simulation and where they run (issue 33, items 2 to 4; INV-90 to INV-95): seeds
with Student t intervals, the APS search's bracket, the executors' identical results at any
worker count (and on a local Ray instance), a failing task retried once then named, and an
interrupted run leaving no output and no worker behind.

``SIM_PLAN_CASES`` sets how many scenarios the simulated APS is checked against the analytical
one on (CI: 0; 3 runs the README default and two others, several minutes)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from dualpath_plan.errors import PlanInputError, TaskFailedError
from dualpath_plan.outcomes import executor as ex
from dualpath_plan.outcomes.serving import closed_cycle, mode_core
from dualpath_plan.outcomes.sim_plans import (
    ApsSearch,
    SimTask,
    aps_search,
    mean_ci,
    run_seeds,
    run_task,
)
from dualpath_plan.outcomes.simulation import MAX_SIM_AGENTS, SimConfig, simulate
from dualpath_plan.outcomes.simulation.stats import Distribution, Histogram
from dualpath_plan.profiles.registry import Overrides, Registry
from dualpath_plan.reports.simulate import simulate_payload
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec, ServingConfig, SloPercentiles

CASES = int(os.environ.get("SIM_PLAN_CASES", "0"))

# A small offline run: 24 agents of paper-64k cut to 12 turns (a fraction of a second).
SMALL = SimConfig(agents=24)


@pytest.fixture(scope="module")
def small() -> Scenario:
    """The README default with 12 turns per agent (short lifetimes: cheap online runs)."""
    reg = Registry.load(overrides=Overrides.parse(["workload.turns=12"]), use_env=False)
    return Scenario.from_spec(reg, ScenarioSpec())


def _payloads(sc: Scenario, results) -> list[str]:
    slo = ServingConfig()
    return [json.dumps(simulate_payload(sc, r, slo), sort_keys=True) for r in results]


def test_mean_ci_is_students_t() -> None:
    values = [3.1, 2.7, 3.6, 2.9]
    got = mean_ci(values)
    lo, hi = stats.t.interval(0.95, len(values) - 1, np.mean(values), stats.sem(values))
    assert got.n == 4 and math.isclose(got.mean, np.mean(values))
    assert math.isclose(got.low, lo, rel_tol=1e-12) and math.isclose(got.high, hi, rel_tol=1e-12)
    one = mean_ci([2.0, math.nan])  # a seed that measured nothing is left out
    assert one.n == 1 and one.mean == 2.0 and math.isnan(one.half_width)


def test_histogram_percentile_at_any_p() -> None:
    rng = np.random.default_rng(5)
    values = rng.lognormal(0.0, 1.0, 20_000)
    h = Histogram()
    for v in values:
        h.add(float(v))
    d = h.distribution()
    for p in (10.0, 25.0, 75.0, 95.0, 98.0):
        # 2,000 bins a decade: a bin is 0.115% wide.
        assert math.isclose(d.percentile(p), np.percentile(values, p), rel_tol=2e-3), p
    assert d.percentile(90) == d.p90 and d.percentile(50) == d.p50
    exact = Distribution.of(values)
    assert math.isclose(exact.percentile(75), np.percentile(values, 75))


def test_seeds_are_the_single_runs_and_the_same_on_any_worker_count(small) -> None:
    singles = [simulate(small, replace(SMALL, seed=s)) for s in (4, 5, 6)]
    one = run_seeds(small, replace(SMALL, seed=4), 3, ex.InProcess())
    two = run_seeds(small, replace(SMALL, seed=4), 3, ex.LocalPool(2))
    assert _payloads(small, one) == _payloads(small, singles) == _payloads(small, two)
    assert len(set(_payloads(small, one))) == 3  # three seeds, three runs


def test_simulate_seeds_cli_reports_intervals(cli) -> None:
    args = ("simulate", "--agents", "24", "--set", "workload.turns=12", "--seeds", "3")
    a = cli(*args, "--workers", "1", "--json")
    b = cli(*args, "--workers", "2", "--json")
    assert a.code == b.code == 0, a.err + b.err
    assert a.out == b.out
    data = a.json()
    assert data["seeds"] == [0, 1, 2] and "Student t" in data["confidence"]
    tp = data["throughput_turns_per_s"]
    lo, hi = tp["ci95"]
    assert lo < tp["mean"] < hi and tp["n"] == 3
    text = cli(*args)
    assert text.code == 0 and "95% interval" in text.out and "Student t" in text.out
    bad = cli(*args, "--out", "x.csv")
    assert bad.code == 2 and bad.err.startswith("error:") and "--out" in bad.err
    lone = cli("simulate", "--agents", "24", "--workers", "2")
    assert lone.code == 2 and "--workers" in lone.err


# -- the APS search's bracket, driven by a synthetic simulation (its logic, not its model) --


def _fake_run(task: SimTask, true_aps: float, slo: ServingConfig, capacity: float) -> Any:
    """A run whose mean TTFT crosses the SLO at ``true_aps`` (linear in the rate), stable at
    every rate; offline, a saturated throughput of ``capacity`` agents/s."""
    if task.config.aps is None:
        turns = task.scenario.turn_demand.trajectory_turns.mean
        return SimpleNamespace(throughput_turns_per_s=capacity * turns)
    ttft = slo.ttft_slo_s * task.config.aps / true_aps
    d = Distribution(ttft, ttft, ttft, ttft, 100)
    tpot = Distribution(0.03, 0.03, 0.03, 0.03, 100)
    return SimpleNamespace(ttft_s=d, tpot_s=tpot, status="stable")


def _drive(search, true_aps: float, slo: ServingConfig, capacity: float = math.inf) -> ApsSearch:
    batch = next(search)
    try:
        while True:
            batch = search.send([_fake_run(t, true_aps, slo, capacity) for t in batch])
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


@settings(max_examples=25, deadline=None)
@given(ratio=st.floats(0.3, 3.0), tol=st.sampled_from([0.01, 0.02, 0.05]))
def test_aps_search_brackets_the_answer(small, ratio: float, tol: float) -> None:
    slo = ServingConfig()
    base = SimConfig(aps=1.0, agents=None)
    probe = aps_search(small, base, slo, seeds=2, tolerance=tol)
    first = next(probe)  # the two analytical ends, two seeds each
    a_lo, a_hi = first[0].config.aps, first[-1].config.aps
    assert len(first) == 4 and a_lo <= a_hi
    true_aps = ratio * a_lo
    s = _drive(aps_search(small, base, slo, seeds=2, tolerance=tol), true_aps, slo)
    assert s.analytical_aps == a_lo and s.analytical_slo_aps == a_hi
    if s.aps > 0 and math.isfinite(s.bracket[1]):
        lo, hi = s.bracket
        assert lo <= true_aps <= hi * (1 + 1e-12) and hi - lo <= tol * hi + 1e-15
        assert s.aps == lo
    if a_lo <= true_aps <= a_hi:
        # The analytical model right: the answer in its bracket, no widening.
        assert s.inside_bracket and s.widened == ""
    # Few simulations: the two ends, the offline run where the high end held, at most four
    # widenings and a bisection of a few steps.
    assert s.simulations <= 2 * (2 + 1 + 4 + 12)
    assert all(len(set(p.statuses)) == 1 for p in s.points)


@settings(max_examples=25, deadline=None)
@given(ratio=st.floats(1.0, 1.5), cap=st.floats(0.5, 1.3), tol=st.sampled_from([0.01, 0.02]))
def test_no_rate_above_the_simulated_capacity_holds(small, ratio, cap, tol) -> None:
    """Where the analytical high end holds, the simulation's own saturated rate (an offline run
    per seed) bounds the answer: a run of finite length can meet the SLOs a few percent above
    it (the README default's 5P3D held 4% above it), but no queue is stable there. Points at
    or above it do not hold and say so; the answer is below it, and inside the analytical
    bracket wherever the capacity is within it."""
    slo = ServingConfig()
    base = SimConfig(aps=1.0, agents=None)
    a_lo, a_hi = (t.config.aps for t in next(aps_search(small, base, slo, seeds=2))[::2])
    true_aps, capacity = ratio * a_hi, cap * a_hi
    s = _drive(aps_search(small, base, slo, seeds=2, tolerance=tol), true_aps, slo, capacity)
    assert s.simulated_capacity_aps == pytest.approx(capacity, rel=1e-12)
    assert s.aps < capacity or s.aps == 0
    for p in s.points:
        assert p.above_capacity == (p.aps >= s.simulated_capacity_aps)
        assert not (p.holds and p.above_capacity)
    if a_lo < capacity <= a_hi:
        assert s.inside_bracket and s.widened == ""
    assert s.simulations == 2 * (len(s.points) + 1)


def test_the_capacity_run_saturates_the_cluster_whatever_the_agents(small) -> None:
    """The offline runs that measure the simulation's saturated rate hold eight times the closed
    system's knee (N* = T c(N*): beyond it the agents saturate the cluster), whatever
    ``--agents`` says: 5,000,000 agents (more than a simulation takes) measured it as 2,048
    do, where it had been refused (a review found it)."""
    base = SimConfig(aps=1.0, agents=None)
    seen: list[SimTask] = []

    def drive(slo: ServingConfig) -> ApsSearch:
        search = aps_search(small, base, slo, seeds=2)
        batch = next(search)
        try:
            while True:
                seen.extend(t for t in batch if t.config.aps is None)
                # Every rate holds: the capacity run comes right after the two ends.
                batch = search.send([_fake_run(t, 1e9, slo, 1e9) for t in batch])
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    for agents in (2048, 5_000_000):
        seen.clear()
        s = drive(ServingConfig(agents=agents))
        assert s.simulated_capacity_aps is not None and len(seen) == 2
        n = seen[0].config.agents
        assert n is not None and 1 <= n <= MAX_SIM_AGENTS
        core = mode_core(small, "dualpath", ServingConfig())
        at = closed_cycle(small, core.sat)
        # Beyond the knee: the agents over their cycle outrun the saturated throughput.
        assert n / float(np.asarray(at(n)).reshape(-1)[0]) >= core.t_max


# -- the executor: retried once, then named --


def flaky(arg: tuple[str, int]) -> int:
    """Fails the first time it is called for a marker path, then returns its value."""
    marker, value = arg
    if not os.path.exists(marker):
        Path(marker).write_text("failed once")
        raise RuntimeError("a worker lost")
    return value


def broken(arg: tuple[str, int]) -> int:
    raise RuntimeError(f"always fails on {arg[1]}")


def bad_input(arg: tuple[str, int]) -> int:
    raise PlanInputError("expected agents/s > 0", field="--aps")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failed_task_is_retried_once_then_named(tmp_path: Path, workers: int) -> None:
    args = [(str(tmp_path / f"m{i}"), i) for i in range(4)]
    got = ex.run_all(ex.make_executor(workers), flaky, args, lambda a: f"task {a[1]}")
    assert got == [0, 1, 2, 3]  # every task failed once, was retried, and is in order
    with pytest.raises(TaskFailedError, match=r"failed twice \(task 2\).*always fails on 2"):
        ex.run_all(ex.make_executor(workers), broken, args[2:3], lambda a: f"task {a[1]}")
    with pytest.raises(PlanInputError, match=r"task 1: expected agents/s") as info:
        ex.run_all(ex.make_executor(workers), bad_input, args[1:2], lambda a: f"task {a[1]}")
    assert info.value.field == "--aps"


def test_cli_names_a_failed_simulation(cli, monkeypatch: pytest.MonkeyPatch) -> None:
    from dualpath_plan.outcomes import sim_plans

    def fails(task: SimTask) -> Any:
        raise RuntimeError("simulated crash")

    monkeypatch.setattr(sim_plans, "run_task", fails)
    r = cli("simulate", "--agents", "24", "--seeds", "2", "--workers", "1")
    assert r.code == 1 and r.out == ""
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: a task failed twice (simulate -P 2")
    assert "--seed 0" in lines[0] and "simulated crash" in lines[0]


# -- an interrupted run --


def _children(pid: int) -> set[int]:
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.add(int(entry.name))
    return out


def started_workers(proc: subprocess.Popen[bytes]) -> set[int]:
    """The two workers ``proc`` starts, once both run (and half a second more, so that they
    work): its children, within 30 s."""
    workers: set[int] = set()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and len(workers) < 2:
        time.sleep(0.1)
        workers = _children(proc.pid)
    assert workers, "no worker started"
    time.sleep(0.5)
    return workers


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process table from /proc")
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_stops_the_workers_and_leaves_no_output(tmp_path: Path, sig) -> None:
    md = tmp_path / "plan.md"
    cmd = [
        sys.executable, "-m", "dualpath_plan", "recommend", "--budget-nodes", "6", "--by",
        "simulation", "--workers", "2", "--markdown", str(md),
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        # As a terminal's Ctrl-C finds it: a test runner started in the background ignores
        # SIGINT, and a process keeps an ignored signal ignored (the program's convention).
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    workers = started_workers(proc)
    proc.send_signal(sig)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == (130 if sig == signal.SIGINT else 128 + sig)
    assert out == b"" and list(tmp_path.iterdir()) == []  # no report, no file, no temporary
    time.sleep(0.5)
    alive = [p for p in workers if Path(f"/proc/{p}").exists()]
    assert alive == [], "workers outlived the run"


# -- Ray: the same results on a local instance of two CPUs --


def test_a_local_ray_instance_gives_the_same_results(small) -> None:
    pytest.importorskip("ray", reason="Ray is the optional 'ray' extra (in 'test' for CI)")
    local = run_seeds(small, replace(SMALL, seed=1), 2, ex.LocalPool(2))
    on_ray = run_seeds(small, replace(SMALL, seed=1), 2, ex.RayCluster("local", 2))
    assert _payloads(small, on_ray) == _payloads(small, local)


# -- the must-reach: the simulated APS where means set the SLOs (slow: SIM_PLAN_CASES) --

SCENARIOS = [
    {},  # the README default: DeepSeek-V3.2 on 2P4D, paper-64k
    # Three machines, storage-bound (DeepSeek-V3.2 no longer fits one prefill node beside the
    # refitted HBM reserve: the case had become an error).
    {"model": "ds-27b", "prefill_nodes": 1, "decode_nodes": 2},
    {"prefill_nodes": 3, "decode_nodes": 4},
]


@pytest.mark.skipif(CASES == 0, reason="several minutes: SIM_PLAN_CASES=3 runs them")
@pytest.mark.parametrize("fields", SCENARIOS[: max(CASES, 1)])
def test_the_simulated_aps_is_near_the_analytical_one(registry, fields) -> None:
    """INV-96: where the means set the SLOs, the simulated APS inside the analytical bracket
    and within 10% of the APS the SLOs set (``slo_aps``: the simulation has no headroom cap;
    where the cap binds, DS 27B on 1P2D, the capped APS is 80% of the saturated rate by
    definition, not a prediction of the SLOs)."""
    sc = Scenario.from_spec(registry, ScenarioSpec(**fields))
    slo = ServingConfig()
    assert slo.slo_percentiles == SloPercentiles()
    from dualpath_plan.outcomes.sim_plans import search_aps

    s = search_aps(sc, SimConfig(aps=1.0, agents=None), slo, ex.make_executor(), seeds=3)
    assert s.inside_bracket, s
    assert abs(s.aps / s.analytical_slo_aps - 1) <= 0.10, s


def test_run_task_is_simulate(small) -> None:
    cfg = replace(SMALL, seed=2)
    assert _payloads(small, [run_task(SimTask(small, cfg))]) == _payloads(
        small, [simulate(small, cfg)]
    )
