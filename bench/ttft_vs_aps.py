"""TTFT against the arrival rate on the paper default, both models: the analytical online model
(``size --aps-curve``) and the discrete-event simulation (``simulate --aps``), for basic and
dualpath (the README's picture, paper Figure 10's axes).

    python bench/ttft_vs_aps.py [--out docs/ttft_vs_aps] [--workload paper-64k]

Writes OUT.csv (one row per mode and simulated rate: the analytical mean TTFT and TPOT, the
simulation's mean, p50, p90 and p99 TTFT, its mean TPOT and whether it kept up) and OUT.svg
(the analytical curve up to its capacity, the simulated points at 10% to 95% of the
simulation's own capacity: the closed form without the analytical scheduler imbalance).
The simulation runs the default duration and warm-up (four and two lifetimes of the longest
agent at light load), seed 0; about two minutes in all.
"""

from __future__ import annotations

import argparse
import csv
import math
from dataclasses import replace
from pathlib import Path

import numpy as np

from dualpath_plan.outcomes.at_rate import rate_points
from dualpath_plan.outcomes.serving import saturated
from dualpath_plan.outcomes.simulation import SimConfig, simulate
from dualpath_plan.physics.engines import Scheduling
from dualpath_plan.profiles.registry import Registry
from dualpath_plan.reports.recommend import nice_ticks, tick_label
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ScenarioSpec

MODES = ("basic", "dualpath")
COLORS = {"basic": "#d62728", "dualpath": "#1f77b4"}
SLO_S = 4.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default="docs/ttft_vs_aps")
    parser.add_argument("--workload", default="paper-64k")
    args = parser.parse_args()
    sc = Scenario.from_spec(Registry.load([]), ScenarioSpec(workload=args.workload))
    turns = sc.turn_demand.trajectory_turns.mean
    rows: list[dict[str, object]] = []
    curves: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    sims: dict[str, list[tuple[float, float, float, bool]]] = {}
    for mode in MODES:
        cap = rate_points(sc, mode, np.array([1e-6])).saturated_turns_per_s / turns
        grid = np.linspace(cap * 0.02, cap * 0.98, 60)
        p = rate_points(sc, mode, grid)
        curves[mode] = (grid, np.where(p.beyond, np.nan, p.ttft_s))
        sims[mode] = []
        # The simulation's own capacity: the closed form without the analytical imbalance
        # (the simulation schedules by itself).
        ideal = replace(sc, scheduling=Scheduling(policy="ideal"))
        sat = saturated(ideal, mode, sc.prefill_nodes, sc.decode_nodes).solution
        sim_cap = float(sat.throughput_turns_per_s) / turns
        for share in (0.1, 0.3, 0.5, 0.65, 0.8, 0.9, 0.95):
            aps = round(sim_cap * share, 4)
            r = simulate(sc, SimConfig(mode=mode, agents=None, aps=aps))
            model = rate_points(sc, mode, np.array([aps]))
            analytical = float(model.ttft_s[0]) if not bool(model.beyond[0]) else math.nan
            sims[mode].append((aps, r.ttft_s.mean, r.ttft_s.p90, r.stable))
            rows.append(
                {
                    "mode": mode,
                    "aps": aps,
                    "share_of_sim_capacity": share,
                    "analytical_ttft_s": analytical,
                    "sim_ttft_mean_s": r.ttft_s.mean,
                    "sim_ttft_p50_s": r.ttft_s.p50,
                    "sim_ttft_p90_s": r.ttft_s.p90,
                    "sim_ttft_p99_s": r.ttft_s.p99,
                    "sim_tpot_mean_s": r.tpot_s.mean,
                    "analytical_tpot_s": float(model.tpot_s[0])
                    if not bool(model.beyond[0])
                    else math.nan,
                    "sim_stable": r.stable,
                    "sim_turns": r.turns,
                }
            )
            print(
                f"{mode} {aps:.4g} APS ({share:.0%} of {sim_cap:.3g}): "
                f"analytical {analytical:.3g} s, "
                f"simulated mean {r.ttft_s.mean:.3g} s p90 {r.ttft_s.p90:.3g} s"
                + ("" if r.stable else " (did not keep up)")
            )
    out = Path(args.out)
    with out.with_suffix(".csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for row in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in row.items()})
    out.with_suffix(".svg").write_text(_svg(sc, curves, sims))
    print(f"wrote {out.with_suffix('.csv')} and {out.with_suffix('.svg')}")


def _svg(
    sc: Scenario,
    curves: dict[str, tuple[np.ndarray, np.ndarray]],
    sims: dict[str, list[tuple[float, float, float, bool]]],
    width: int = 720,
    height: int = 420,
) -> str:
    left, right, top, bottom = 60, 20, 40, 50
    x_max = max(float(g[-1]) for g, _ in curves.values())
    y_cap = 3 * SLO_S
    xt, yt = nice_ticks(x_max), nice_ticks(y_cap)

    def xp(v: float) -> float:
        return left + (width - left - right) * v / xt[-1]

    def yp(v: float) -> float:
        return height - bottom - (height - top - bottom) * min(v, yt[-1]) / yt[-1]

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">Mean TTFT vs '
        f"agents/s: {sc.model.id} {sc.prefill_nodes}P{sc.decode_nodes}D, {sc.workload.id}</text>",
    ]
    xs, ys = xt[1] - xt[0], yt[1] - yt[0]
    for v in xt:
        out.append(
            f'<line x1="{xp(v):.1f}" y1="{top}" x2="{xp(v):.1f}" y2="{height - bottom}" '
            f'stroke="#eee"/><text x="{xp(v):.1f}" y="{height - bottom + 16}" '
            f'text-anchor="middle">{tick_label(v, xs)}</text>'
        )
    for v in yt:
        out.append(
            f'<line x1="{left}" y1="{yp(v):.1f}" x2="{width - right}" y2="{yp(v):.1f}" '
            f'stroke="#eee"/><text x="{left - 6}" y="{yp(v) + 4:.1f}" text-anchor="end">'
            f"{tick_label(v, ys)}</text>"
        )
    out.append(
        f'<line x1="{left}" y1="{yp(SLO_S):.1f}" x2="{width - right}" y2="{yp(SLO_S):.1f}" '
        f'stroke="#555" stroke-dasharray="6,4"/><text x="{width - right - 4}" '
        f'y="{yp(SLO_S) - 4:.1f}" text-anchor="end" fill="#555">TTFT SLO {SLO_S:g} s</text>'
    )
    for mode, (grid, ttft) in curves.items():
        ok = np.isfinite(ttft) & (ttft <= yt[-1])
        pts = " ".join(
            f"{xp(float(a)):.1f},{yp(float(b)):.1f}"
            for a, b in zip(grid[ok], ttft[ok], strict=True)
        )
        out.append(
            f'<polyline fill="none" stroke="{COLORS[mode]}" stroke-width="2" points="{pts}"/>'
        )
        for aps, mean, _p90, stable in sims[mode]:
            if math.isfinite(mean):
                fill = COLORS[mode] if stable else "white"
                out.append(
                    f'<circle cx="{xp(aps):.1f}" cy="{yp(mean):.1f}" r="4.5" fill="{fill}" '
                    f'stroke="{COLORS[mode]}" stroke-width="1.5"/>'
                )
    y = top + 14
    for mode in curves:
        out.append(
            f'<line x1="{left + 10}" y1="{y - 4}" x2="{left + 34}" y2="{y - 4}" '
            f'stroke="{COLORS[mode]}" stroke-width="2"/><circle cx="{left + 22}" cy="{y - 4}" '
            f'r="4" fill="{COLORS[mode]}"/><text x="{left + 40}" y="{y}">{mode}: line analytical, '
            "dots simulated (hollow: did not keep up)</text>"
        )
        y += 18
    out += [
        f'<text x="{width / 2}" y="{height - 12}" text-anchor="middle">agents/s (APS)</text>',
        f'<text x="16" y="{height / 2}" transform="rotate(-90 16 {height / 2})" '
        'text-anchor="middle">mean TTFT (s)</text>',
        "</svg>",
    ]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    main()
