"""Cross-validation of the analytical model against the discrete-event simulation
(outcomes/simulation.py; issue 13): saturated throughput, determinism, the schedulers' read
imbalance, and the online TTFT at a given arrival rate.

The throughput checks run a workload of identical turns (a trace of one repeated row), so that
every turn is the mean turn the closed form assumes: a profile workload grows an agent's
context over its turns, and the offline throughput the simulation measures (10% to 50% of the
turns done) counts early, short turns (see test_offline_throughput_of_growing_contexts). The
closed form is taken with the ideal scheduler (no imbalance factor): the simulation schedules
by itself. Mixed hardware means a prefill side and a decode side of different nodes (the LP's
several node groups per side are not simulated).

Heavier cases (more agents, the full paper workload) run with SIMULATION_SLOW=1.
"""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dualpath_plan.outcomes.online import online_queue
from dualpath_plan.outcomes.serving import evaluate_mode, saturated
from dualpath_plan.outcomes.simulation import SimConfig, SimResult, simulate
from dualpath_plan.physics.engines import Scheduling
from dualpath_plan.physics.modes import ModeName
from dualpath_plan.profiles.registry import Overrides, Registry
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.assemble import assemble
from dualpath_plan.scenario.spec import ScenarioSpec, ServingConfig
from dualpath_plan.solvers.closed_form import solve

SLOW = os.environ.get("SIMULATION_SLOW", "") == "1"
slow = pytest.mark.skipif(not SLOW, reason="set SIMULATION_SLOW=1 for the heavier simulations")

TURNS = 20  # per agent: short lifetimes keep the online runs small
AGENTS = 1024  # offline: enough to saturate every configuration below with the paper scheduler
THROUGHPUT_TOL = 0.05
TTFT_TOL = 0.20
TPOT_TOL = 0.01  # INV-42; README: "TPOT within 1%"


def _constant_workload(root: Path, generated: int) -> Path:
    """A workload profile whose trace repeats the paper-64k mean turn: every turn identical."""
    d = root / "workload"
    d.mkdir(parents=True)
    rows = ["trajectory_id,append_tokens,generated_tokens,context_tokens"]
    for agent in range(8):
        rows += [f"{agent},429,{generated},32721"] * TURNS
    (d / "const.csv").write_text("\n".join(rows) + "\n")
    (d / "xval-const.toml").write_text(
        'kind = "workload"\nname = "identical turns"\n'
        'description = "The paper-64k mean turn, repeated (cross-validation)."\n'
        f"turns = {TURNS}\nappend_tokens = 429\ngenerated_tokens = {generated}\n"
        'context_tokens = 32721\ntrace_file = "const.csv"\n'
    )
    return root


@pytest.fixture(scope="module")
def profiles(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("xval")
    return {
        "short": _constant_workload(base / "short", 176),
        "long": _constant_workload(base / "long", 3000),  # decode-bound
    }


def _scenario(root: Path, sets: tuple[str, ...] = ()) -> Scenario:
    reg = Registry.load([root], overrides=Overrides.parse(list(sets)), use_env=False)
    return Scenario.from_spec(reg, ScenarioSpec(workload="xval-const"))


def _closed_form(sc: Scenario, mode: ModeName) -> tuple[float, tuple[str, ...], float]:
    """The closed form's turns/s without the scheduler imbalance, its binding links, and the
    figure size reports (with the imbalance)."""
    ideal = dataclasses.replace(sc, scheduling=Scheduling(policy="ideal"))
    s = saturated(ideal, mode, sc.prefill_nodes, sc.decode_nodes).solution
    own = saturated(sc, mode, sc.prefill_nodes, sc.decode_nodes).solution
    return (
        float(s.throughput_turns_per_s),
        tuple(s.binding()),
        float(own.throughput_turns_per_s),
    )


# (configuration, workload, overrides, mode, binding links of the closed form)
GRID = [
    ("snic", "short", (), "basic", ("pe_snic_read",)),
    ("storage", "short", ("storage.aggregate_read_gbyte_s=30",), "basic", ("storage_read",)),
    ("snic", "short", ("node.snic_gbit_s=100",), "dualpath", ("pe_snic_read", "de_snic_read")),
    ("decode", "long", (), "basic", ("de_decode",)),
    ("decode", "long", (), "dualpath", ("de_decode",)),
    ("decode", "long", (), "oracle", ("de_decode",)),
    ("storage", "short", ("storage.aggregate_read_gbyte_s=30",), "dualpath", ("storage_read",)),
]

# Where compute binds under the paper's scheduler: its beta (a GPU's tokens waiting for a pass
# at most 5 s of compute) caps a pass at about 5 s of work, some 20 turns of paper-64k, batching
# efficiency b / (b + h) about 0.89, not the 0.99 of the HBM cap. The ideal closed form (no
# admission) is about 10% above the simulation; size's own figure, whose pass batch is beta's
# (PrefillEngine.pass_batch), is what the simulation gives.
GAPS = [
    ("compute", "short", (), "dualpath", ("pe_compute",)),
    ("compute", "short", (), "oracle", ("pe_compute",)),
]


def _check_throughput(
    profiles: dict[str, Path],
    workload: str,
    sets: tuple[str, ...],
    mode: ModeName,
    binding: tuple[str, ...],
    agents: int = AGENTS,
    scheduler: str | None = None,
) -> None:
    sc = _scenario(profiles[workload], sets)
    t_ideal, bound, t_size = _closed_form(sc, mode)
    assert set(bound) == set(binding), bound
    # size's own figure carries the analytical imbalance: never above the ideal one.
    assert t_size <= t_ideal * (1 + 1e-9)
    r = simulate(sc, SimConfig(mode=mode, agents=agents, scheduler=scheduler))  # type: ignore[arg-type]
    err = r.throughput_turns_per_s / t_ideal - 1
    assert abs(err) <= THROUGHPUT_TOL, (mode, binding, r.throughput_turns_per_s, t_ideal, err)


@pytest.mark.parametrize(("config", "workload", "sets", "mode", "binding"), GRID)
def test_saturated_throughput_matches_the_closed_form(
    profiles, config, workload, sets, mode, binding
) -> None:
    """Offline, saturated: the simulation's turns/s within 5% of the closed form (ideal
    scheduler) where one link binds: SNIC, storage, decode; basic, dualpath, oracle."""
    _check_throughput(profiles, workload, sets, mode, binding)


@pytest.mark.parametrize(("config", "workload", "sets", "mode", "binding"), GAPS)
def test_paper_scheduler_is_sizes_pass_batch_where_compute_binds(
    profiles, config, workload, sets, mode, binding
) -> None:
    """The simulation's turns/s within 5% of size's own (the queue-aware pass batch), and
    clearly below the ideal closed form's (the HBM cap's batch)."""
    sc = _scenario(profiles[workload], sets)
    t_ideal, bound, t_size = _closed_form(sc, mode)
    assert set(bound) == set(binding), bound
    r = simulate(sc, SimConfig(mode=mode, agents=AGENTS))
    err = r.throughput_turns_per_s / t_size - 1
    assert abs(err) <= THROUGHPUT_TOL, (mode, r.throughput_turns_per_s, t_size, err)
    assert r.throughput_turns_per_s < 0.95 * t_ideal


# Identical turns started together share a SNIC equally, so their reads end together: the SNIC
# then idles while prefill works through the burst, and the agents come back together. With
# the mean turn repeated (no spread of sizes) the lockstep can persist.
LOCKSTEP_GAP = (
    "lockstep of identical turns: the reads of agents started together end together on a "
    "processor-shared SNIC, which then idles while prefill works through them; 24% below the "
    "closed form at 1,024 agents, within 1% at 512 and 1,536"
)


@pytest.mark.xfail(strict=True, reason=LOCKSTEP_GAP)
def test_snic_bound_basic_without_layerwise_prefill_at_1024_agents(registry) -> None:
    """DS 27B on 1P2D, paper-48k, basic (SNIC-bound): found in a trial. Strict: the marker
    goes when the simulation stops synchronizing identical turns."""
    spec = ScenarioSpec(model="ds-27b", workload="paper-48k", prefill_nodes=1, decode_nodes=2)
    sc = Scenario.from_spec(registry, spec)
    t_ideal, bound, _ = _closed_form(sc, "basic")
    assert "pe_snic_read" in bound
    r = simulate(sc, SimConfig(mode="basic", agents=1024))
    assert abs(r.throughput_turns_per_s / t_ideal - 1) <= THROUGHPUT_TOL


@slow
@pytest.mark.parametrize("mode", ["dualpath", "oracle"])
def test_compute_bound_without_the_token_cap_matches(profiles, mode) -> None:
    """Compute-bound with the blind scheduler (no beta): the closed form's batch at the cap is
    reached once enough agents queue (the passes run to the compute quota, so it takes
    thousands of agents to stay saturated)."""
    _check_throughput(profiles, "short", (), mode, ("pe_compute",), 4096, "round_robin")


def _as_dict(r: SimResult) -> dict:
    out = {}
    for f in dataclasses.fields(r):
        v = getattr(r, f.name)
        if f.name == "wall_s":
            continue
        if f.name == "servers":
            v = [(s.name, s.servers, s.mean_busy_share, s.busy_share.tolist()) for s in v]
        elif isinstance(v, np.ndarray):
            v = v.tolist()
        elif dataclasses.is_dataclass(v):
            v = dataclasses.asdict(v)  # type: ignore[arg-type]
        out[f.name] = v
    return out


def test_same_seed_same_result_other_seed_another() -> None:
    """Same seed, identical results (every field but the wall time); another seed draws other
    trajectories (turn counts: the paper-64k spread, shortened to 20 turns)."""
    reg = Registry.load(overrides=Overrides.parse(["workload.turns=20"]), use_env=False)
    sc = Scenario.from_spec(reg, ScenarioSpec())
    cfg = SimConfig(mode="dualpath", agents=None, aps=1.0, duration_s=150.0, warmup_s=40.0)
    a, b = simulate(sc, cfg), simulate(sc, cfg)
    c = simulate(sc, dataclasses.replace(cfg, seed=1))
    da, db, dc = _as_dict(a), _as_dict(b), _as_dict(c)
    assert repr(da) == repr(db)
    assert da["ttft_s"] != dc["ttft_s"] and da["agents"] != dc["agents"]
    off = SimConfig(mode="basic", agents=64)
    x, y, z = (simulate(sc, off), simulate(sc, off), simulate(sc, dataclasses.replace(off, seed=7)))
    assert repr(_as_dict(x)) == repr(_as_dict(y))
    assert x.jct_s != z.jct_s


def test_round_robin_reads_are_less_balanced_than_the_paper_scheduler(profiles) -> None:
    """The paper's Figure 13: storage-NIC max/avg 1.53 with round robin, 1.18 with its
    scheduler (2P4D). Round robin alternates the two paths, so each of the 2 PE nodes reads a
    quarter of the bytes against a sixth on average: 1.5."""
    sc = _scenario(profiles["short"])
    rr = simulate(sc, SimConfig(mode="dualpath", agents=512, scheduler="round_robin"))
    paper = simulate(sc, SimConfig(mode="dualpath", agents=512, scheduler="queue_aware"))
    assert rr.snic_max_over_avg == pytest.approx(1.5, abs=0.05)
    assert paper.snic_max_over_avg < 1.3
    assert rr.snic_max_over_avg - paper.snic_max_over_avg > 0.2


@pytest.mark.parametrize("mode", ["basic", "dualpath"])
@pytest.mark.parametrize("scheduler", ["queue_aware", "round_robin"])
def test_a_windows_reads_are_what_the_snic_moved_in_it(profiles, mode, scheduler) -> None:
    """Each node's reads per window are the bytes its SNIC moved in that window: never more
    than its read link carries in the window (they were counted when each read ended, up to
    twice the link's rate where reads last longer than a window), and all of them together the
    bytes of every read (the hit bytes of the turns, less what the run left unfinished)."""
    sc = _scenario(profiles["short"])
    sim = SimConfig(mode=mode, agents=512, scheduler=scheduler, window_s=1.0)
    r = simulate(sc, sim)
    engine_rates = _read_rates(sc, sim)
    moved = r.snic_bytes / r.window_length_s[:, None]
    assert np.all(moved <= np.asarray(engine_rates)[None, :] * (1 + 1e-9))
    hit = float(np.sum(sc.turn_demand.hit_bytes * sc.turn_demand.weight))
    assert float(r.snic_bytes.sum()) == pytest.approx(r.turns * hit, rel=1e-6)


def _read_rates(sc: Scenario, sim: SimConfig) -> list[float]:
    """Each node's read capacity (P nodes, then D) as the simulation has it: the least of its
    side's storage-read links per node, without the analytical scheduler imbalance."""
    ideal = dataclasses.replace(sc, scheduling=Scheduling(policy="ideal"))
    asm = saturated(ideal, sim.mode, sc.prefill_nodes, sc.decode_nodes).assembly
    rate = {
        side: min(
            float(np.asarray(group.per_node[f"{side}_{k}"]))
            for k in ("snic_read", "storage_client_read")
        )
        for side, group in (("pe", asm.pe), ("de", asm.de))
    }
    return [rate["pe"]] * sc.prefill_nodes + [rate["de"]] * sc.decode_nodes


def _latencies(
    sc: Scenario, mode: ModeName, load: float, ideal: bool = False
) -> tuple[float, float, float, float]:
    """Simulated and analytical mean TTFT, then simulated and analytical mean TPOT, at
    ``load`` x the saturated turn rate."""
    t_ideal, _, _ = _closed_form(sc, mode)
    aps = load * t_ideal / sc.turn_demand.trajectory_turns.mean
    model = dataclasses.replace(sc, scheduling=Scheduling(policy="ideal")) if ideal else sc
    asm = assemble(model, mode, sc.prefill_nodes, sc.decode_nodes)
    ttft, tpot = online_queue(model, asm, solve(asm.links)).at(np.array([aps]))
    r = simulate(sc, SimConfig(mode=mode, agents=None, aps=aps, seed=1))
    assert r.stable and r.ttft_s.count > 500
    return r.ttft_s.mean, float(ttft[0]), r.tpot_s.mean, float(tpot[0])


ONLINE = [("dualpath", x) for x in (0.1, 0.3, 0.5, 0.65)] + [("basic", x) for x in (0.1, 0.3)]


@pytest.mark.parametrize(("mode", "load"), ONLINE)
def test_online_ttft_matches_the_simulation(profiles, mode, load) -> None:
    """Below 70% of the saturated rate the analytical mean TTFT is within 20% of the
    simulation's (identical turns, Poisson agents), the mean TPOT within 1%."""
    sim, model, sim_tpot, model_tpot = _latencies(_scenario(profiles["short"]), mode, load)
    assert math.isfinite(model)
    assert abs(model / sim - 1) <= TTFT_TOL, (mode, load, sim, model)
    assert abs(model_tpot / sim_tpot - 1) <= TPOT_TOL, (mode, load, sim_tpot, model_tpot)


@pytest.mark.parametrize("load", [0.5, 0.65])
@pytest.mark.parametrize("ideal", [False, True])
def test_online_ttft_basic_at_the_mean_gpus_rate(profiles, load, ideal) -> None:
    """Basic under round robin at half and two thirds of capacity: the waits at the mean GPU's
    rate, the imbalance factor (1.29 on 16 GPUs) deciding only stability, are within 20% of
    the simulation, as with the ideal scheduler (at the busiest GPU's rate they were 34% to
    84% high: blind dealing gives every GPU the same share of equal turns)."""
    sim, model, _, _ = _latencies(_scenario(profiles["short"]), "basic", load, ideal=ideal)
    assert abs(model / sim - 1) <= TTFT_TOL, (load, sim, model)


@slow
@pytest.mark.xfail(strict=True, reason="contexts grow over an agent's turns: early turns are short")
def test_offline_throughput_of_growing_contexts() -> None:
    """With ``context_growth`` a profile workload's offline throughput over 10% to 50% of the
    turns done counts the agents' early turns, whose contexts are shorter than the mean: basic
    measures 48 turns/s on paper-64k at 2,048 agents against a 39.1 turns/s SNIC capacity
    (hence the mean turn by default)."""
    sc = Scenario.from_spec(Registry.load(use_env=False), ScenarioSpec())
    t_ideal, _, _ = _closed_form(sc, "basic")
    r = simulate(sc, SimConfig(mode="basic", agents=2048, context_growth=True))
    assert r.throughput_turns_per_s <= t_ideal * (1 + THROUGHPUT_TOL)


def test_the_span_ttft_is_the_mean_of_the_span_turns() -> None:
    """INV-79: the simulation's span TTFT is the TTFT of the turns done from 10% to 50% of all
    (in the order they finish, as ``turn_sink`` sees them), the throughput's span; online the
    measured turns' TTFT itself."""
    sc = Scenario.from_spec(
        Registry.load(use_env=False), ScenarioSpec(model="ds-27b", prefill_nodes=1, decode_nodes=2)
    )
    records: list[tuple] = []
    r = simulate(sc, SimConfig(agents=128), turn_sink=records.append)
    n = len(records)
    span = np.array([rec[3] for rec in records[n // 10 : n // 2]])
    assert r.ttft_span_s.count == span.size == n // 2 - n // 10 > 100
    assert r.ttft_span_s.mean == pytest.approx(span.mean(), rel=1e-12)
    # The histogram's percentiles: within its bins (0.12% of the value).
    assert r.ttft_span_s.p90 == pytest.approx(np.percentile(span, 90), rel=3e-3)
    # The span's turns finish between the throughput span's ends.
    ends = [rec[5] for rec in records[n // 10 : n // 2]]
    assert r.throughput_span_s[0] <= ends[0] and ends[-1] == r.throughput_span_s[1]
    assert r.ttft_s.count == n and r.ttft_span_s.mean != r.ttft_s.mean
    on = simulate(sc, SimConfig(agents=None, aps=0.5, duration_s=300.0, warmup_s=100.0))
    assert on.ttft_span_s == on.ttft_s


def test_the_default_simulation_is_within_5_percent_of_size() -> None:
    """Issue 13: ``simulate`` on the paper default (2P4D, 2,048 agents of paper-64k, offline)
    gives a dualpath throughput within 5% of ``size``'s (which carries the analytical
    imbalance of the paper scheduler, 1 + 1/16), and latencies for every turn."""
    sc = Scenario.from_spec(Registry.load(use_env=False), ScenarioSpec())
    t_size = float(saturated(sc, "dualpath", 2, 4).solution.throughput_turns_per_s)
    r = simulate(sc, SimConfig(mode="dualpath", agents=2048))
    assert abs(r.throughput_turns_per_s / t_size - 1) <= THROUGHPUT_TOL, (
        r.throughput_turns_per_s,
        t_size,
    )
    assert r.turns == int(sc.turn_demand.trajectory_turns.mean * 2048 * 0.9) or r.turns > 250_000
    assert r.ttft_s.count == r.turns and 0 < r.ttft_s.p50 <= r.ttft_s.p90 <= r.ttft_s.p99
    assert r.tpot_s.count == r.turns and 0 < r.tpot_s.p50 <= r.tpot_s.p99
    assert math.isfinite(r.snic_max_over_avg) and r.jct_s > 0
    # Issue 30, INV-84: every row of `simulate --compare` within 10%, the two TTFTs like with
    # like (the analytical closed system's over the saturated span and over the whole run).
    o = evaluate_mode(sc, "dualpath", ServingConfig(agents=2048))
    for model, sim in (
        (o.throughput_turns_per_s, r.throughput_turns_per_s),
        (o.ttft_span_s, r.ttft_span_s.mean),
        (o.ttft_s, r.ttft_s.mean),
        (o.tpot_s, r.tpot_s.mean),
        (o.jct_s, r.jct_s),
    ):
        assert abs(model / sim - 1) <= 0.10, (model, sim)


@pytest.mark.parametrize(
    ("workload", "sets", "mode", "binding"),
    [
        ("short", (), "basic", ("pe_prefill_batch",)),
        ("short", ("node.snic_gbit_s=25",), "dualpath", ("pe_snic_read", "de_snic_read")),
        ("long", (), "dualpath", ("de_decode",)),
    ],
)
def test_mixed_prefill_and_decode_hardware(profiles, workload, sets, mode, binding) -> None:
    """Hopper prefill nodes with Blackwell decode nodes (each side its own node, GPU and
    engines): the simulation's saturated throughput within 5% of the closed form, bound by
    the prefill batch without layer-wise prefill, by both sides' SNICs, or by decode."""
    reg = Registry.load([profiles[workload]], overrides=Overrides.parse(list(sets)), use_env=False)
    spec = ScenarioSpec(workload="xval-const", prefill_node="dgx-h100", decode_node="dgx-b200")
    sc = Scenario.from_spec(reg, spec)
    assert sc.prefill_gpu.id != sc.decode_gpu.id
    t_ideal, bound, _ = _closed_form(sc, mode)
    assert set(bound) == set(binding), bound
    # Enough agents to fill the decode group's HBM-limited batch (B200's holds more).
    group = saturated(sc, mode, sc.prefill_nodes, sc.decode_nodes).assembly.de.decode
    assert group is not None
    r = simulate(sc, SimConfig(mode=mode, agents=max(AGENTS, 2 * group.max_batch)))
    err = r.throughput_turns_per_s / t_ideal - 1
    assert abs(err) <= THROUGHPUT_TOL, (r.throughput_turns_per_s, t_ideal, err)


@pytest.mark.parametrize(("aps", "seed"), [(3e-4, 1), (3e-4, 4), (1e-4, 6)])
def test_a_job_a_few_bytes_short_never_spins(aps, seed) -> None:
    """A storage-cluster read a few bytes short of done, whose completion is less than half a
    floating-point step of the clock away, is done (it fired again at the same instant for
    ever: these runs took the 5e8-event limit)."""
    sc = Scenario.from_spec(Registry.load(use_env=False), ScenarioSpec())
    r = simulate(sc, SimConfig(agents=None, aps=aps, seed=seed, max_events=200_000))
    assert r.events < 200_000 and r.turns > 0


@pytest.mark.parametrize("seed", range(6))
def test_light_load_is_never_called_unstable(seed) -> None:
    """A handful of agents at no queueing: too few arrivals is the arrivals' own variation,
    not an unstable queue (it was at 0.002 agents/s, 4 seeds of 6)."""
    reg = Registry.load(overrides=Overrides.parse(["workload.turns=20"]), use_env=False)
    sc = Scenario.from_spec(reg, ScenarioSpec())
    r = simulate(sc, SimConfig(agents=None, aps=0.01, seed=seed))
    assert r.status == "stable", (r.agents, r.turns)


def test_turn_counts_keep_the_workloads_mean() -> None:
    """Drawn turn counts are whole and at least 1, with the distribution's mean (rounding up
    every draw added half a turn)."""
    from dualpath_plan.outcomes.simulation import draw_turn_counts
    from dualpath_plan.physics.workload import TurnCounts

    rng = np.random.default_rng(0)
    for mean, spread in ((20.0, 0.5), (5.0, 1.0), (20.4, 0.0), (157.0, 1.0)):
        counts = draw_turn_counts(TurnCounts.uniform(mean, spread), 200_000, rng)
        assert counts.min() >= 1
        assert counts.mean() == pytest.approx(mean, rel=0.01, abs=0.02), (mean, spread)


@settings(max_examples=20 if SLOW else 5, deadline=None, derandomize=True)
@given(
    p=st.integers(1, 3),
    d=st.integers(1, 4),
    mode=st.sampled_from(["basic", "dualpath", "oracle"]),
    scheduler=st.sampled_from(["queue_aware", "round_robin"]),
    snic=st.sampled_from([100.0, 400.0]),
)
def test_the_simulation_never_beats_the_closed_form(p, d, mode, scheduler, snic) -> None:
    """No scheduler gets more turns/s out of a cluster than its capacities allow: the
    simulation's saturated throughput is at most the closed form's with no imbalance, on
    random small DS 27B clusters. Every agent has the same turns, so no early exits empty the
    pipeline inside the measured span (work done before it would count as turns in it), and
    the measurement adds at most 2%."""
    reg = Registry.load(
        overrides=Overrides.parse(
            ["workload.turns=20", "workload.turns_spread=0", f"node.snic_gbit_s={snic}"]
        ),
        use_env=False,
    )
    sc = Scenario.from_spec(reg, ScenarioSpec(model="ds-27b", prefill_nodes=p, decode_nodes=d))
    ideal = dataclasses.replace(sc, scheduling=Scheduling(policy="ideal"))
    t = float(saturated(ideal, mode, p, d).solution.throughput_turns_per_s)
    r = simulate(sc, SimConfig(mode=mode, agents=256, scheduler=scheduler))  # type: ignore[arg-type]
    assert r.throughput_turns_per_s <= t * 1.02, (r.throughput_turns_per_s, t)


def test_compare_says_where_the_run_simulates_what_the_model_leaves_out(cli) -> None:
    # Round robin's alternating paths and --context-growth made --compare print errors of
    # +52% and -35% with nothing saying they measure a difference of models.
    base = ("simulate", "--model", "ds-27b", "-P", "1", "-D", "2", "--agents", "64")
    runs = {
        "default": (),
        "round_robin": ("--scheduler", "round_robin"),
        "basic_round_robin": ("--scheduler", "round_robin", "--mode", "basic"),
        "growth": ("--context-growth",),
    }
    caveats = {}
    for name, extra in runs.items():
        result = cli(*base, *extra, "--compare", "--json")
        assert result.code == 0, result.err
        caveats[name] = result.json()["analytical"]["caveats"]
    assert caveats["default"] == [] and caveats["basic_round_robin"] == []
    assert (
        len(caveats["round_robin"]) == 1
        and "alternates the two read paths" in caveats["round_robin"][0]
    )
    assert len(caveats["growth"]) == 1 and "--context-growth" in caveats["growth"][0]
    text = cli(*base, *runs["round_robin"], "--compare").out
    assert "alternates the two read paths" in text


def test_the_decode_step_table_is_bounded_by_the_agents(registry) -> None:
    # It covered every batch the HBM holds: --set gpu.hbm_gbyte=1e8 took 24 GB and was killed,
    # 1e10 was a MemoryError. At 1e4 GB (the most a GPU plausibly has: a batch of hundreds of
    # thousands) the run now stays small.
    import tracemalloc
    from dataclasses import replace as dc_replace

    reg = dc_replace(
        registry, overrides=registry.overrides.merged(Overrides.parse(["gpu.hbm_gbyte=1e4"]))
    )
    sc = Scenario.from_spec(reg, ScenarioSpec())
    tracemalloc.start()
    try:
        r = simulate(sc, SimConfig(mode="dualpath", agents=8))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert r.turns > 0 and peak < 50e6, peak
    # What the run reports is still the batch the HBM holds, not the agents (a review found
    # "of the 256 its HBM holds" at 256 agents).
    small = simulate(Scenario.from_spec(registry, ScenarioSpec()), SimConfig(agents=64))
    assert small.decode_batch_max > 64
    asm = saturated(Scenario.from_spec(registry, ScenarioSpec()), "dualpath", 2, 4).assembly
    assert asm.de.decode is not None
    assert small.decode_batch_max == max(int(asm.de.decode.max_batch), 1)
