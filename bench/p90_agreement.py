"""The analytical p90 TTFT against the discrete-event simulation's on random scenarios (issue
33: within 15% below 70% load, the simulation's p90 the mean of five seeds).

    python bench/p90_agreement.py [--cases 50] [--seeds 5] [--draw-seed 0] [--csv OUT.csv]

A case is a scenario drawn at random (model, node, prefill and decode nodes, workload), a mode
(basic or dualpath) and a load (0.1 to 0.7 of the mode's saturated rate), kept only where the
analytical model runs it (``outcomes.serving.runnable``) and the simulation's run is short
(at most ``MAX_TURNS_PER_RUN`` turns). The draw is deterministic in ``--draw-seed``, so case
i is the same case in every run and in ``tests/test_tail_slos.py`` (``TAIL_SLO_RANDOM=N``
runs the first N).
The simulation runs a shorter span than ``simulate``'s default (four lifetimes of the longest
agent): a warm-up of ``WARMUP_LIVES`` such lifetimes at the case's load (``Span``: its
turns at the analytical mean TTFT and TPOT there; the draw keeps its light-load lifetimes, so
case i stays case i), then at least ``MEASURED_TURNS`` turns (at least ``MEASURED_LIVES``
lifetimes). Prints one row per case and the share within 15%.
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np

import dualpath_plan.api as dp
from dualpath_plan.errors import PlanInputError
from dualpath_plan.outcomes.online import online_queue
from dualpath_plan.outcomes.serving import light_load, runnable
from dualpath_plan.outcomes.simulation import SimConfig, simulate

MODELS = (
    "deepseek-v3.2",
    "deepseek-v3",
    "ds-27b",
    "gpt-oss-120b",
    "kimi-k2",
    "llama-3.1-70b",
    "llama-3.1-8b",
    "qwen2.5-32b",
    "qwen3-235b-a22b",
    "qwen3-30b-a3b",
    "qwen3-32b",
)
NODES = ("dualpath-hopper", "dgx-a100", "dgx-h100", "dgx-h200", "dgx-b200", "hgx-b300")
WORKLOADS = ("paper-32k", "paper-48k", "paper-64k", "agentic-22gb-pflop")
MODES = ("basic", "dualpath")
LOADS = (0.1, 0.7)
BOUND = 0.15  # issue 33: the analytical p90 within 15% of the simulation's

# The simulation's span: a warm-up of WARMUP_LIVES lifetimes of the longest agent at the case's
# load (the rate of turns is steady once the first agents' longest trajectories could end), then
# MEASURED_TURNS turns at the offered rate, at least MEASURED_LIVES lifetimes.
WARMUP_LIVES = 1.25
MEASURED_LIVES = 1.0
MEASURED_TURNS = 6000
# Cases whose run would simulate more turns than this are drawn again (a run of 60,000 turns
# takes about 10 s here).
MAX_TURNS_PER_RUN = 60_000


@dataclass(frozen=True)
class Case:
    spec: dict[str, object] = field(hash=False)
    mode: str
    load: float

    def label(self) -> str:
        s = self.spec
        return (
            f"{s['model']} {s['node']} {s['prefill_nodes']}P{s['decode_nodes']}D "
            f"{s['workload']} {self.mode} {self.load:.2f}"
        )


@dataclass(frozen=True)
class Measured:
    case: Case
    analytical_p90_s: float
    simulated_p90_s: float  # the mean over seeds
    analytical_mean_s: float
    simulated_mean_s: float
    seeds_p90_s: tuple[float, ...]
    wall_s: float

    @property
    def error(self) -> float:
        return self.analytical_p90_s / self.simulated_p90_s - 1.0


@dataclass(frozen=True)
class Span:
    """A case's arrival rate (agents/s), the analytical p90 and mean TTFT there, and the
    simulation's (duration, warm-up) in lifetimes of the longest agent at light load (what the
    draw keeps a case by, so that case i stays case i) and at the case's load (what is
    simulated: its turns at the analytical mean TTFT and TPOT there). The agents in the system
    reach their steady number only after a lifetime at the load (a run warmed up for
    light-load lifetimes measured a load still rising: DS 27B DGX A100 3P4D at 69%, whose turns
    take 7.2 s alone and 9.5 s there, had seeds' p90 from 5.9 to 10.0 s, their mean 7.9 s; 9.5
    s over four loaded lifetimes)."""

    aps: float
    p90_s: float
    mean_s: float
    light_duration_s: float
    duration_s: float
    warmup_s: float


def _span(case: Case) -> Span:
    """The case's ``Span``; raises PlanInputError where the model does not run it."""
    sc = dp.scenario(dp.spec(**case.spec))
    sat, t_max = runnable(sc, case.mode)  # type: ignore[arg-type]
    q = online_queue(sc, sat.assembly, sat.solution)
    turns = float(np.asarray(q.turns))
    aps = case.load * t_max / turns
    w = q.waits(np.array([aps]))
    p90 = float(w.ttft_quantile(0.9)[0])
    mean = float(w.mean_ttft_s[0])
    if not (math.isfinite(p90) and math.isfinite(mean)):
        raise PlanInputError("unstable at this load", field="load")
    d = sc.turn_demand
    ttft, tpot = (float(v[0]) for v in q.at(np.array([aps])))
    lives = (
        float(np.asarray(light_load(sc, sat)[1]).reshape(-1)[0]),
        ttft + d.mean(d.generated_tokens) * tpot + sc.workload.tool_latency_s,
    )
    spans = []
    for cycle in lives:
        life = d.trajectory_turns.longest * cycle
        warmup = WARMUP_LIVES * life
        spans.append((warmup + max(MEASURED_LIVES * life, MEASURED_TURNS / (case.load * t_max)),
                      warmup))  # fmt: skip
    return Span(aps, p90, mean, spans[0][0], *spans[1])


def draw_cases(n: int, seed: int = 0) -> list[Case]:
    """The first ``n`` cases of the draw of ``seed`` that the analytical model runs and whose
    simulation is short (at most MAX_TURNS_PER_RUN turns a run)."""
    rng = np.random.default_rng(seed)
    out: list[Case] = []
    while len(out) < n:
        node = str(rng.choice(NODES))
        spec: dict[str, object] = {
            "model": str(rng.choice(MODELS)),
            "node": node,
            "prefill_nodes": int(rng.integers(1, 5)),
            "decode_nodes": int(rng.integers(1, 5)),
            "workload": str(rng.choice(WORKLOADS)),
        }
        case = Case(spec, str(rng.choice(MODES)), round(float(rng.uniform(*LOADS)), 3))
        try:
            span = _span(case)
        except (PlanInputError, ValueError):
            continue
        turns = dp.scenario(dp.spec(**spec)).turn_demand.trajectory_turns.mean
        if span.aps * span.light_duration_s * turns > MAX_TURNS_PER_RUN:
            continue
        out.append(case)
    return out


def measure(case: Case, seeds: int = 5) -> Measured:
    """The analytical p90 and mean TTFT of ``case`` and the simulation's (the mean over
    ``seeds`` seeds, 0 to seeds - 1)."""
    span = _span(case)
    sc = dp.scenario(dp.spec(**case.spec))
    start = time.perf_counter()
    runs = [
        simulate(
            sc,
            SimConfig(
                mode=case.mode,  # type: ignore[arg-type]
                agents=None,
                aps=span.aps,
                seed=s,
                duration_s=span.duration_s,
                warmup_s=span.warmup_s,
            ),
        )
        for s in range(seeds)
    ]
    return Measured(
        case=case,
        analytical_p90_s=span.p90_s,
        simulated_p90_s=float(np.mean([r.ttft_s.p90 for r in runs])),
        analytical_mean_s=span.mean_s,
        simulated_mean_s=float(np.mean([r.ttft_s.mean for r in runs])),
        seeds_p90_s=tuple(float(r.ttft_s.p90) for r in runs),
        wall_s=time.perf_counter() - start,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=int, default=50)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--draw-seed", type=int, default=0)
    parser.add_argument("--only", type=str, default="", help="case numbers, e.g. 3,7")
    parser.add_argument("--csv", type=str, default="")
    args = parser.parse_args()
    cases = draw_cases(args.cases, args.draw_seed)
    picked = [int(i) for i in args.only.split(",") if i] or list(range(len(cases)))
    rows = []
    print(
        f"{'#':>3} {'case':<62} {'p90 an.':>8} {'p90 sim':>8} {'err':>7} "
        f"{'mean an.':>8} {'mean sim':>8} {'s':>5}"
    )
    for i in picked:
        m = measure(cases[i], args.seeds)
        rows.append((i, m))
        flag = "" if abs(m.error) <= BOUND else "  MISS"
        print(
            f"{i:>3} {m.case.label():<62} {m.analytical_p90_s:8.3f} {m.simulated_p90_s:8.3f} "
            f"{m.error:+7.1%} {m.analytical_mean_s:8.3f} {m.simulated_mean_s:8.3f} "
            f"{m.wall_s:5.0f}{flag}",
            flush=True,
        )
    within = sum(abs(m.error) <= BOUND for _, m in rows)
    print(f"within {BOUND:.0%}: {within} of {len(rows)}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            out = csv.writer(f)
            out.writerow(
                ["case", "scenario", "analytical_p90_s", "simulated_p90_s", "error",
                 "analytical_mean_s", "simulated_mean_s", "seeds_p90_s", "wall_s"]
            )  # fmt: skip
            for i, m in rows:
                out.writerow(
                    [i, m.case.label(), m.analytical_p90_s, m.simulated_p90_s, m.error,
                     m.analytical_mean_s, m.simulated_mean_s,
                     " ".join(f"{v:.4f}" for v in m.seeds_p90_s), m.wall_s]
                )  # fmt: skip
    sys.exit(0)


if __name__ == "__main__":
    main()
