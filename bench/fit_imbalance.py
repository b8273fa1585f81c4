"""Scheduler imbalance measured by the discrete-event simulation against the analytical factors.

The analytical model derates a side's capacity by a guessed max/avg load (physics/engines.py
``Scheduler``): round robin 1 + v sqrt(2 ln n / k) (v = load_cv 0.5, k = requests per engine,
16 per GPU and 128 per 8-GPU node), queue-aware 1 + 1/k. This runs the simulation
(outcomes/simulation.py) offline, saturated, on P = 1, 2, 4, 8 prefill nodes with D = 2P,
DS 27B on dualpath-hopper, for each scheduler (``paper``, ``round_robin``) in dualpath mode
(reads on both sides; storage-NIC-bound on this model) and in oracle mode (no I/O: prefill
compute binds, so only the GPU scheduling shows), and records per run:

- ``prefill_max_over_avg`` and ``snic_max_over_avg``: the busiest prefill GPU's busy time and
  the busiest node's storage reads over the mean, per 60 s window, averaged over the saturated
  windows (the simulation's own statistics; busy time saturates at 1 on a saturated GPU, so it
  understates a load imbalance there);
- ``throughput_ratio``: the simulation's turns/s over the closed form's with the ideal
  scheduler; its inverse is the imbalance that derates the cluster (``effective_imbalance``);
- the analytical factors (``analytic_gpu``, ``analytic_node``) and the derating size applies
  (``analytic_ratio``: size's closed form over the ideal one).

The workload draws each turn i.i.d. from 41 rows whose contexts spread evenly from 0 to twice
the paper-64k mean (coefficient of variation 0.58, the profile's growth over an agent's turns;
the analytical default load_cv is 0.5), 20 turns per agent, so the measured span holds the mean
turn the closed form assumes. Agents: 1,024 per prefill node (paper) and 2,048 (round robin,
whose passes run to the compute quota).

In oracle mode the SNIC column is meaningless (the simulation counts the hit bytes of an
I/O-free turn on its prefill node; the decode nodes read nothing: (P + D) / P = 3).

Writes bench/imbalance.csv and prints a least-squares fit of the effective imbalance to
1 + a sqrt(ln n) (n the prefill GPUs) per mode and scheduler. About a minute and a half.

    python bench/fit_imbalance.py [--out bench/imbalance.csv] [--quick]
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import itertools
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dualpath_plan.outcomes.serving import saturated
from dualpath_plan.outcomes.simulation import SimConfig, simulate
from dualpath_plan.physics.engines import Scheduler, Scheduling
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec

HERE = Path(__file__).resolve().parent
CONTEXT, APPEND, GENERATED, TURNS = 32721, 429, 176, 20
ROWS = 41
MODES = ("dualpath", "oracle")
MODEL = "ds-27b"  # fits on one prefill node (DeepSeek-V3.2 needs two)
ANALYTIC = {"queue_aware": "queue_aware", "round_robin": "round_robin"}


def write_workload(root: Path) -> None:
    d = root / "workload"
    d.mkdir(parents=True, exist_ok=True)
    contexts = np.linspace(0.0, 2.0 * CONTEXT, ROWS).round().astype(int)
    rows = ["trajectory_id,append_tokens,generated_tokens,context_tokens"]
    for i, c in enumerate(contexts):
        rows.append(f"{i // TURNS},{APPEND},{GENERATED},{c}")
    # Whole trajectories of TURNS turns: pad the last with mean turns.
    while (len(rows) - 1) % TURNS:
        rows.append(f"{(len(rows) - 1) // TURNS},{APPEND},{GENERATED},{CONTEXT}")
    (d / "spread.csv").write_text("\n".join(rows) + "\n")
    (d / "xval-spread.toml").write_text(
        'kind = "workload"\nname = "spread contexts"\n'
        'description = "paper-64k turns with contexts spread from 0 to twice the mean."\n'
        f"turns = {TURNS}\nappend_tokens = {APPEND}\ngenerated_tokens = {GENERATED}\n"
        f'context_tokens = {CONTEXT}\ntrace_file = "spread.csv"\n'
    )


def run(root: Path, prefill: list[int], out: Path) -> list[dict[str, float | int | str]]:
    registry = Registry.load([root], use_env=False)
    rows: list[dict[str, float | int | str]] = []
    for p in prefill:
        spec = ScenarioSpec(
            model=MODEL, workload="xval-spread", prefill_nodes=p, decode_nodes=2 * p
        )
        sc = Scenario.from_spec(registry, spec)
        ideal = dataclasses.replace(sc, scheduling=Scheduling(policy="ideal"))
        gpus = p * sc.prefill_node.gpus_per_node
        for mode, sched in itertools.product(MODES, ("queue_aware", "round_robin")):
            best = saturated(ideal, mode, p, 2 * p).solution
            t_ideal = float(best.throughput_turns_per_s)
            analytic = dataclasses.replace(sc, scheduling=Scheduling(policy=ANALYTIC[sched]))
            t_size = float(saturated(analytic, mode, p, 2 * p).solution.throughput_turns_per_s)
            s = Scheduler(ANALYTIC[sched])  # type: ignore[arg-type]
            agents = (1024 if sched == "queue_aware" else 2048) * p
            w = time.perf_counter()
            r = simulate(
                sc,
                SimConfig(mode=mode, agents=agents, scheduler=sched, window_s=60.0),  # type: ignore[arg-type]
            )
            ratio = r.throughput_turns_per_s / t_ideal
            row: dict[str, float | int | str] = {
                "mode": mode,
                "binding": "+".join(best.binding()),
                "scheduler": sched,
                "prefill_nodes": p,
                "decode_nodes": 2 * p,
                "prefill_gpus": gpus,
                "agents": agents,
                "prefill_max_over_avg": round(r.prefill_max_over_avg, 4),
                "snic_max_over_avg": round(r.snic_max_over_avg, 4),
                "throughput_turns_per_s": round(r.throughput_turns_per_s, 3),
                "ideal_turns_per_s": round(t_ideal, 3),
                "throughput_ratio": round(ratio, 4),
                "effective_imbalance": round(1.0 / ratio, 4),
                "analytic_gpu": round(float(s.imbalance(gpus)), 4),
                "analytic_node": round(float(s.imbalance(p, s.requests_per_engine * 8)), 4),
                "analytic_ratio": round(t_size / t_ideal, 4),
                "decode_path_fraction": round(r.decode_path_fraction, 4),
                "wall_s": round(time.perf_counter() - w, 1),
            }
            rows.append(row)
            print(
                f"P={p} D={2 * p} {mode:8s} {sched:11s} prefill {row['prefill_max_over_avg']:.3f} "
                f"snic {row['snic_max_over_avg']:.3f} throughput x{ratio:.3f} of ideal "
                f"(size x{row['analytic_ratio']:.3f}) [{row['wall_s']} s]",
                file=sys.stderr,
                flush=True,
            )
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return rows


def fit(rows: list[dict[str, float | int | str]]) -> None:
    """Least squares of effective_imbalance - 1 = a sqrt(ln n) per mode and scheduler (n the
    prefill GPUs), beside the SNIC max/avg."""
    for mode, sched in itertools.product(MODES, ("queue_aware", "round_robin")):
        pts = [r for r in rows if r["scheduler"] == sched and r["mode"] == mode]
        x = np.array([math.sqrt(math.log(float(r["prefill_gpus"]))) for r in pts])
        y = np.array([float(r["effective_imbalance"]) - 1.0 for r in pts])
        a = float(x @ y / (x @ x)) if x @ x > 0 else math.nan
        resid = y - a * x
        print(
            f"{mode} {sched}: effective imbalance ~ 1 + {a:.3f} sqrt(ln n) "
            f"(residual rms {math.sqrt(float(np.mean(resid**2))):.3f}; measured "
            f"{', '.join(str(r['effective_imbalance']) for r in pts)}); SNIC max/avg "
            f"{', '.join(str(r['snic_max_over_avg']) for r in pts)}; prefill max/avg "
            f"{', '.join(str(r['prefill_max_over_avg']) for r in pts)}; "
            f"P = {', '.join(str(r['prefill_nodes']) for r in pts)}"
        )
        if sched == "round_robin":
            # The analytical form 1 + v sqrt(2 ln n / 16): v = a sqrt(8).
            print(f"  as 1 + v sqrt(2 ln n / 16): v = {a * math.sqrt(8.0):.3f} (default 0.5)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=HERE / "imbalance.csv")
    ap.add_argument("--quick", action="store_true", help="P = 1 and 2 only")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        write_workload(Path(tmp))
        rows = run(Path(tmp), [1, 2] if args.quick else [1, 2, 4, 8], args.out)
    print(f"wrote {args.out}")
    fit(rows)


if __name__ == "__main__":
    main()
