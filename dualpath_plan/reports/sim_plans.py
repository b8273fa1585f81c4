"""Reports of plans by simulation: ``simulate --seeds N`` (every metric as a mean with its 95%
confidence interval across seeds), ``simulate --aps-search`` and the ``--by simulation``
answers of ``size --target-aps`` and ``recommend``."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from dualpath_plan.formatting import duration, finite, number, percent, plain
from dualpath_plan.outcomes.sim_plans import (
    CONFIDENCE,
    ApsSearch,
    MeanCI,
    RatePoint,
    SimSizing,
    mean_ci,
)
from dualpath_plan.outcomes.simulation import SimResult, slo_verdict
from dualpath_plan.reports.simulate import simulate_payload
from dualpath_plan.reports.size import scenario_line
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ServingConfig

CI_WORDS = (
    f"mean over the seeds with its {CONFIDENCE:.0%} confidence interval (Student t, n - 1 "
    "degrees of freedom)"
)


def ci_payload(m: MeanCI) -> dict[str, Any]:
    return {
        "mean": finite(m.mean),
        "ci95": [finite(m.low), finite(m.high)] if math.isfinite(m.half_width) else None,
        "n": m.n,
    }


def _numeric(v: Any) -> bool:
    return v is None or (isinstance(v, int | float) and not isinstance(v, bool))


def aggregate(values: list[Any]) -> Any:
    """One JSON value from the seeds' values of one field: the value where they agree, a
    number's mean and interval (``ci_payload``) where they differ, dicts and lists field by
    field, anything else (a status, a verdict) as the list of the seeds' values."""
    first = values[0]
    if all(v == first for v in values[1:]):
        return first
    if all(_numeric(v) for v in values):
        return ci_payload(mean_ci([math.nan if v is None else float(v) for v in values]))
    if all(isinstance(v, dict) for v in values) and all(v.keys() == first.keys() for v in values):
        return {k: aggregate([v[k] for v in values]) for k in first}
    if all(isinstance(v, list) for v in values) and all(len(v) == len(first) for v in values):
        return [aggregate([v[i] for v in values]) for i in range(len(first))]
    return {"per_seed": values}


def seeds_payload(sc: Scenario, results: Sequence[SimResult], slo: ServingConfig) -> dict[str, Any]:
    """Every field of ``simulate --json`` across the seeds (``aggregate``), and the seeds."""
    per = [simulate_payload(sc, r, slo) for r in results]
    for p in per:
        del p["seed"]
    out: dict[str, Any] = {
        "seeds": [r.config.seed for r in results],
        "confidence": CI_WORDS,
    }
    out.update(aggregate(per))
    return out


def _ci_text(m: MeanCI, fmt: Any) -> tuple[str, str]:
    if not math.isfinite(m.mean):
        return "-", "-"
    if not math.isfinite(m.half_width):
        return fmt(m.mean), "-"
    return fmt(m.mean), f"{fmt(m.low)} to {fmt(m.high)}"


def render_seeds(
    sc: Scenario, results: Sequence[SimResult], console: Console, slo: ServingConfig
) -> None:
    r0 = results[0]
    c = r0.config
    console.print(scenario_line(sc))
    load = (
        f"online: Poisson arrivals at {number(c.aps or 0.0)} agents/s"
        if c.online
        else f"offline: {c.agents:,} agents started together"
    )
    console.print(
        f"simulation of {r0.mode}, scheduler {r0.scheduler}, {len(results)} seeds "
        f"({c.seed} to {c.seed + len(results) - 1}); {load}"
    )
    t = Table(title=CI_WORDS)
    for col in ("metric", "mean", "95% interval"):
        t.add_column(col, justify="left" if col == "metric" else "right")

    def row(name: str, values: list[float], fmt: Any = duration) -> None:
        t.add_row(name, *_ci_text(mean_ci(values), fmt))

    row("throughput (turns/s)", [r.throughput_turns_per_s for r in results], number)
    row(
        "agent JCT (mean)" if c.online else "JCT (all agents)",
        [r.agent_jct_s.mean if c.online else r.jct_s for r in results],
    )
    for name, get in (("TTFT", lambda r: r.ttft_s), ("TPOT", lambda r: r.tpot_s)):
        for stat in ("mean", "p50", "p90", "p99"):
            row(f"{name} {stat}", [getattr(get(r), stat) for r in results])
    row("wait for a decode slot (mean)", [r.decode_wait_s.mean for r in results])
    row("storage reads max/avg", [r.snic_max_over_avg for r in results], number)
    row("prefill GPUs max/avg", [r.prefill_max_over_avg for r in results], number)
    row("decode batch (mean)", [r.decode_batch_mean for r in results], number)
    row("KV working set mean (GB)", [r.working_set_mean_gbyte for r in results], number)
    console.print(t)
    if c.online:
        verdicts = [slo_verdict(r, slo) for r in results]
        met = sum(1 for v in verdicts if v.met)
        statuses = sorted({r.status for r in results})
        ttft = mean_ci([v.ttft_s for v in verdicts])
        tpot = mean_ci([v.tpot_s for v in verdicts])
        pct = slo.slo_percentiles
        console.print(
            f"SLOs ({pct.words}): {pct.name('TTFT')} {_ci_text(ttft, duration)[0]} against "
            f"{plain(slo.ttft_slo_s)} s, {pct.name('TPOT')} {_ci_text(tpot, duration)[0]} "
            f"against {plain(slo.tpot_slo_s * 1e3)} ms (means over the seeds); met in {met} of "
            f"{len(results)} runs; status {', '.join(statuses)}"
        )
    console.print("--json gives every metric of one run's report, each across the seeds")


def point_payload(p: RatePoint) -> dict[str, Any]:
    return {
        "aps": p.aps,
        "ttft_s": ci_payload(p.ttft_s),
        "tpot_s": ci_payload(p.tpot_s),
        "statuses": list(p.statuses),
        "holds": p.holds,
        "above_capacity": p.above_capacity,
    }


def search_payload(s: ApsSearch) -> dict[str, Any]:
    return {
        "mode": s.mode,
        "prefill_nodes": s.prefill_nodes,
        "decode_nodes": s.decode_nodes,
        "aps": s.aps,
        "analytical": {"aps": s.analytical_aps, "slo_aps": s.analytical_slo_aps},
        "inside_analytical_bracket": s.inside_bracket,
        "bracket": [s.bracket[0], finite(s.bracket[1])],
        "tolerance": s.tolerance,
        "widened": s.widened or None,
        "seeds": s.seeds,
        "simulations": s.simulations,
        "points": [point_payload(p) for p in s.points],
        "simulated_capacity_aps": s.simulated_capacity_aps,
        "reason": s.reason or None,
    }


def aps_search_payload(
    sc: Scenario, s: ApsSearch, slo: ServingConfig, first_seed: int
) -> dict[str, Any]:
    pct = slo.slo_percentiles
    return {
        "cluster": {"prefill_nodes": sc.prefill_nodes, "decode_nodes": sc.decode_nodes},
        "slo": {
            "ttft_s": slo.ttft_slo_s,
            "tpot_s": slo.tpot_slo_s,
            "percentiles": {"ttft": pct.ttft, "tpot": pct.tpot},
        },
        "first_seed": first_seed,
        "confidence": CI_WORDS,
        "search": search_payload(s),
    }


def _points_table(points: Sequence[RatePoint], slo: ServingConfig, title: str) -> Table:
    pct = slo.slo_percentiles
    t = Table(title=title)
    for col in ("agents/s", pct.name("TTFT"), pct.name("TPOT"), "status", "holds"):
        t.add_column(col, justify="left" if col == "status" else "right")
    for p in points:
        t.add_row(
            plain(p.aps, 4),
            _with_ci(p.ttft_s),
            _with_ci(p.tpot_s),
            ", ".join(sorted(set(p.statuses))) + (", above capacity" if p.above_capacity else ""),
            "yes" if p.holds else "no",
        )
    return t


def _with_ci(m: MeanCI) -> str:
    mean, ci = _ci_text(m, duration)
    return mean if ci == "-" else f"{mean} ({ci})"


def search_line(s: ApsSearch) -> str:
    """The answer of one search in a sentence."""
    if s.reason and s.aps == 0:
        return f"no simulated rate holds: {s.reason}"
    where = "inside" if s.inside_bracket else "outside"
    widened = {
        "": "",
        "down": "; the simulation missed the SLOs at the analytical APS: bracket moved down",
        "up": "; the simulation met them at the analytical high end: bracket moved up",
    }[s.widened]
    hi = "unbounded" if not math.isfinite(s.bracket[1]) else plain(s.bracket[1], 4)
    capacity = (
        f"; the simulation's saturated rate {plain(s.simulated_capacity_aps, 4)} agents/s "
        "(offline, the same seeds) bounds it"
        if s.simulated_capacity_aps is not None
        else ""
    )
    return (
        f"simulated APS {plain(s.aps, 4)} agents/s (holds at {plain(s.bracket[0], 4)}, not at "
        f"{hi}; tolerance {percent(s.tolerance)}), {where} the analytical bracket "
        f"{plain(s.analytical_aps, 4)} to {plain(s.analytical_slo_aps, 4)}; "
        f"{s.simulations} simulations{widened}{capacity}" + (f" ({s.reason})" if s.reason else "")
    )


def render_aps_search(
    sc: Scenario, s: ApsSearch, console: Console, slo: ServingConfig, first_seed: int
) -> None:
    console.print(scenario_line(sc))
    console.print(
        f"APS search by simulation: {s.mode}; SLOs {', '.join(slo.slo_parts)}; "
        f"{s.seeds} seeds per rate ({first_seed} to {first_seed + s.seeds - 1}), each rate "
        "judged on the mean over the seeds and every run stable; bracketed by the analytical "
        f"APS with the {percent(slo.max_utilization)} headroom cap ({plain(s.analytical_aps, 4)}) "
        f"and under the SLOs alone ({plain(s.analytical_slo_aps, 4)})"
    )
    console.print(_points_table(s.points, slo, f"rates simulated ({CI_WORDS})"))
    console.print(search_line(s))


def recommend_sim_payload(
    splits: Sequence[tuple[int, int]], found: Sequence[ApsSearch | str], top: int, total: int
) -> dict[str, Any]:
    best = best_search(found)
    return {
        "by": "simulation",
        "mode": next((f.mode for f in found if isinstance(f, ApsSearch)), None),
        "top_splits": top,
        "splits_in_budget": total,
        "splits": [
            {"prefill_nodes": p, "decode_nodes": d, "reason": f}
            if isinstance(f, str)
            else search_payload(f)
            for (p, d), f in zip(splits, found, strict=True)
        ],
        "recommended": (
            {
                "prefill_nodes": best.prefill_nodes,
                "decode_nodes": best.decode_nodes,
                "aps": best.aps,
            }
            if best is not None
            else None
        ),
    }


def best_search(found: Sequence[ApsSearch | str]) -> ApsSearch | None:
    """The split with the highest simulated APS (fewer prefill nodes among equals)."""
    done = [f for f in found if isinstance(f, ApsSearch) and f.aps > 0]
    return max(done, key=lambda f: (f.aps, -f.prefill_nodes)) if done else None


def render_recommend_sim(
    splits: Sequence[tuple[int, int]],
    found: Sequence[ApsSearch | str],
    top: int,
    total: int,
    console: Console,
    slo: ServingConfig,
) -> None:
    mode = next((f.mode for f in found if isinstance(f, ApsSearch)), "dualpath")
    console.print(
        f"by simulation ({mode}): the {len(splits)} splits the analytical model ranks highest "
        f"by APS (the top {top} of the {total} in the budget; --top-splits), each searched "
        f"for the highest APS whose SLOs ({', '.join(slo.slo_parts)}) hold"
    )
    t = Table()
    for col in ("split", "analytical APS", "simulated APS", "inside bracket", "simulations"):
        t.add_column(col, justify="left" if col == "split" else "right")
    for (p, d), f in zip(splits, found, strict=True):
        if isinstance(f, str):
            t.add_row(f"{p}P{d}D", "-", f"cannot run: {f}", "-", "0")
            continue
        t.add_row(
            f"{p}P{d}D",
            f"{plain(f.analytical_aps, 4)} to {plain(f.analytical_slo_aps, 4)}",
            plain(f.aps, 4),
            "yes" if f.inside_bracket else "no",
            str(f.simulations),
        )
    console.print(t)
    best = best_search(found)
    if best is None:
        console.print("no simulated split holds the SLOs at any rate tried")
    else:
        console.print(
            f"recommended by simulation: {best.prefill_nodes}P{best.decode_nodes}D at "
            f"{plain(best.aps, 4)} agents/s"
        )


def sizing_sim_payload(s: SimSizing) -> dict[str, Any]:
    def trial(t: Any) -> dict[str, Any]:
        return {
            "prefill_nodes": t.prefill_nodes,
            "decode_nodes": t.decode_nodes,
            "analytical_aps": t.analytical_aps,
            **point_payload(t.point),
        }

    return {
        "by": "simulation",
        "target_aps": s.target_aps,
        "analytical_nodes": s.analytical_nodes,
        "top_splits": s.top_splits,
        "seeds": s.seeds,
        "answer": trial(s.answer) if s.answer is not None else None,
        "trials": [trial(t) for t in s.trials],
        "reason": s.reason or None,
    }


def render_sizing_sim(s: SimSizing, console: Console, slo: ServingConfig, mode: str) -> None:
    console.print(
        f"by simulation ({mode}): from the analytical answer's {s.analytical_nodes} nodes, the "
        f"top {s.top_splits} splits of each node count (by the analytical APS) simulated at "
        f"{plain(s.target_aps)} agents/s, {s.seeds} seeds each"
    )
    pct = slo.slo_percentiles
    t = Table(title=CI_WORDS)
    for col in ("split", "analytical APS", pct.name("TTFT"), pct.name("TPOT"), "holds"):
        t.add_column(col, justify="left" if col == "split" else "right")
    for x in s.trials:
        t.add_row(
            f"{x.prefill_nodes}P{x.decode_nodes}D",
            plain(x.analytical_aps, 4),
            _with_ci(x.point.ttft_s),
            _with_ci(x.point.tpot_s),
            "yes" if x.point.holds else "no",
        )
    console.print(t)
    if s.answer is None:
        console.print(f"not reached by simulation: {s.reason}")
    else:
        a = s.answer
        console.print(
            f"smallest by simulation: {a.prefill_nodes}P{a.decode_nodes}D "
            f"({a.prefill_nodes + a.decode_nodes} nodes; the analytical answer "
            f"{s.analytical_nodes})"
        )
