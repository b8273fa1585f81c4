"""The ``size`` report: JSON payload and terminal rendering."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dualpath_plan.formatting import (
    BYTE_UNITS,
    RATE_UNITS,
    SIG,
    column,
    count,
    durations,
    finite,
    interval_column,
    number,
    percent,
    plain,
    scaled_column,
)
from dualpath_plan.outcomes.cost import size_costs
from dualpath_plan.outcomes.limits import LinkLimit
from dualpath_plan.outcomes.serving import (
    GAP_METRICS,
    ModeOutcome,
    SizeReport,
    unreachable_reason,
)
from dualpath_plan.outcomes.uncertainty import Interval, OutcomeIntervals
from dualpath_plan.physics.modes import MODE_TABLE
from dualpath_plan.reports.cost import cost_payload, render_costs
from dualpath_plan.reports.provenance import (
    efficiency_line,
    efficiency_payload,
    interval_fields,
    intervals_line,
    intervals_payload,
)
from dualpath_plan.reports.store import read_lines, store_lines, store_payload
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ServingConfig

if TYPE_CHECKING:  # annotations only: a plain size does not import the search
    from dualpath_plan.outcomes.sizing import SizingReport


def limits_payload(limits: Mapping[str, LinkLimit]) -> dict[str, Any]:
    """{link: {capacity, load, unit, derated_by}} (capacity null: no limit)."""
    return {
        name: {
            "capacity": lim.capacity,
            "load": lim.load,
            "unit": lim.unit,
            "utilization": lim.utilization,
            "derated_by": list(lim.derated_by),
        }
        for name, lim in limits.items()
    }


def mode_payload(o: ModeOutcome) -> dict[str, Any]:
    return {
        # offline while all the agents run: the saturated rate, or the agents over their
        # critical path where too few to saturate it (latency_bound)
        "throughput_turns_per_s": o.throughput_turns_per_s,
        "saturated_turns_per_s": o.saturated_turns_per_s,  # the cluster's most
        "jct_s": o.jct_s,
        "drain_s": o.drain_s,
        "aps": o.aps,
        "ttft_s": o.ttft_s,  # offline, the mean over every turn (docs/model.md, "Metrics")
        "ttft_span_s": o.ttft_span_s,  # offline, over the saturated span
        "tpot_s": o.tpot_s,  # offline, over the run; a wait for a decode slot included
        "decode_wait_s": o.decode_wait_s,  # offline, of it the wait (docs/model.md, "Metrics")
        # null where no arrival rate meets the SLOs and the light-load latency is unbounded
        "online_ttft_s": finite(o.online_ttft_s),
        "online_tpot_s": finite(o.online_tpot_s),
        "aps_limit": o.aps_limit,
        # the busiest link's utilization at the APS (its turn rate over the saturated one)
        "binding_utilization": o.binding_utilization,
        "slo_aps": o.slo_aps,  # under the SLOs alone, before the utilization cap
        "bottleneck": o.bottleneck,
        "binding": list(o.binding),
        "limits": limits_payload(o.limits),
        "decode_path_fraction": o.decode_path_fraction,
        "latency_bound": o.latency_bound,
        "prefill_batch_per_gpu": o.prefill_batch,
        "decode_batch": o.decode_batch,
        "kv_working_set_gbyte": o.working_set_gbyte,  # online, at the APS (Little)
        "utilization": o.utilization,
    }


def inputs_payload(sc: Scenario, cfg: ServingConfig) -> dict[str, Any]:
    """The scenario a size report ran, by ids, node counts and serving settings."""
    return {
        "model": sc.model.id,
        "workload": sc.workload.id,
        "prefill_node": sc.prefill_node.id,
        "decode_node": sc.decode_node.id,
        "prefill_gpu": sc.prefill_gpu.id,
        "decode_gpu": sc.decode_gpu.id,
        "storage": sc.storage.id if sc.storage else None,
        "prefill_nodes": sc.prefill_nodes,
        "decode_nodes": sc.decode_nodes,
        "agents": cfg.agents,
        "ttft_slo_s": cfg.ttft_slo_s,
        "tpot_slo_s": cfg.tpot_slo_s,
        "max_utilization": cfg.max_utilization,
        # Only where the SLOs hold percentiles: a report on the means reads as it always has.
        **(
            {"slo_percentiles": {"ttft": pct.ttft, "tpot": pct.tpot}}
            if (pct := cfg.slo_percentiles).ttft is not None or pct.tpot is not None
            else {}
        ),
    }


def size_payload(r: SizeReport, intervals: OutcomeIntervals | None = None) -> dict[str, Any]:
    sc, cfg = r.scenario, r.config
    costs = size_costs(r)
    modes: dict[str, dict[str, Any]] = {m: mode_payload(o) for m, o in r.modes.items()}
    for m in modes:
        modes[m].update(interval_fields(intervals, m))
    return {
        "inputs": inputs_payload(sc, cfg),
        **(
            {"store": store_payload(sc, {m: o.read_share for m, o in r.modes.items()})}
            if sc.store is not None
            else {}
        ),
        "efficiencies": efficiency_payload(sc),
        "intervals": intervals_payload(intervals) if intervals is not None else None,
        "gb_per_pflop": r.gb_per_pflop,
        "modes": modes,
        "infeasible": dict(r.infeasible),  # modes the cluster cannot run, and why
        "speedup": {"jct": finite(r.speedup_jct), "aps": finite(r.speedup_aps)},
        # per metric: dualpath's value over the oracle's minus 1 (null: no such ratio)
        "oracle_gap": {k: finite(v) for k, v in r.oracle_gap.items()},
        **({"cost": {m: cost_payload(c) for m, c in costs.items()}} if costs else {}),
    }


def workload_text(sc: Scenario) -> str:
    """The workload the model runs: mean turns per trajectory, with the spread that sets the
    straggler tail, and a turn's mean tokens (a trace's own, where it has one)."""
    d = sc.turn_demand
    counts = d.trajectory_turns
    if sc.workload.trace_file:
        # The trace's own means, not the profile's: the model runs on the trace.
        return (
            f"trace {sc.workload.trace_file}: {count(counts.mean, 'turn', 4)}, longest "
            f"{plain(counts.longest)}, {d.mean(d.context_tokens):,.0f} prompt tokens, "
            f"{number(d.mean(d.generated_tokens), 4)} generated"
        )
    w = sc.workload
    spread = f" ±{w.turns_spread:.0%}" if w.turns_spread else ""
    return (
        f"{count(counts.mean, 'turn', SIG)}{spread}, {w.context_tokens:,.0f} context, "
        f"{plain(w.append_tokens)} appended, {plain(w.generated_tokens)} generated"
    )


def scenario_line(sc: Scenario) -> str:
    """The cluster, storage and workload in one line (rich markup), the first of a report."""
    return (
        f"[bold]{sc.model.id}[/bold] on [bold]{sc.prefill_nodes}P{sc.decode_nodes}D[/bold] "
        f"({sc.prefill_node.id} x {sc.prefill_node.gpus_per_node} {sc.prefill_gpu.id} / "
        f"{sc.decode_node.id}), storage {sc.storage.id if sc.storage else 'unlimited'}, "
        f"workload {sc.workload.id} ({workload_text(sc)})"
    )


def render_header(sc: Scenario, console: Console) -> None:
    """The cluster, its nodes, storage and workload, and the cache-compute ratio: the first
    lines of every ``size`` report of one cluster."""
    console.print(scenario_line(sc))
    d = sc.turn_demand
    console.print(f"cache-compute ratio {d.gb_per_pflop:.1f} GB/PFLOP, hit rate {d.hit_rate:.1%}")
    for line in store_lines(sc):
        console.print(escape(line))


def render_size(r: SizeReport, console: Console, intervals: OutcomeIntervals | None = None) -> None:
    sc, cfg = r.scenario, r.config
    iv = intervals.by_mode if intervals is not None else {}

    def bound(m: str, metric: str) -> Interval | None:
        return iv.get(m, {}).get(metric)

    render_header(sc, console)
    modes = r.modes
    for line in read_lines(sc, {m: o.read_share for m, o in modes.items()}):
        console.print(escape(line))
    # Each column formatted as one: one unit and one precision (dualpath_plan/formatting.py).
    os_ = list(modes.values())
    max_tps = column([o.saturated_turns_per_s for o in os_])
    jcts = interval_column(
        [o.jct_s for o in os_], [_pair(bound(m, "jct_s")) for m in modes], durations
    )
    ttfts = durations([o.ttft_span_s for o in os_])
    tpots = durations([o.tpot_s for o in os_])
    offline = Table(title=f"offline: {count(cfg.agents, 'agent')} started together (RL rollout)")
    for col in (
        "mode",
        "max\nturns/s",
        "JCT",
        "drain",
        "TTFT under load",
        "TPOT",
        "binding",
        "DE share",
    ):
        offline.add_column(col, justify="left" if col in ("mode", "binding") else "right")
    for k, (m, o) in enumerate(modes.items()):
        offline.add_row(
            m + (" L" if o.latency_bound else ""),  # (beside the JCT, it wrapped its interval)
            max_tps[k],
            jcts[k],
            percent(o.drain_s / o.jct_s),
            ttfts[k],
            tpots[k],
            o.bottleneck,
            "-" if MODE_TABLE[m].io_free else percent(o.decode_path_fraction),
        )
    console.print(offline)
    if any(MODE_TABLE[m].io_free for m in modes):
        console.print("DE share: the hit KV read through the decode nodes (oracle: no reads, -)")
    few = {m: o for m, o in modes.items() if o.latency_bound}
    if few:
        running = ", ".join(f"{m} {number(o.throughput_turns_per_s)}" for m, o in few.items())
        console.print(
            "L: JCT set by each agent's critical path (turns x (TTFT + generated x "
            "TPOT)), not by throughput: too few agents to fill the cluster (turns/s while all "
            f"run: {running}; max turns/s: the cluster's saturated rate)"
        )
    console.print(
        "drain: the share of the JCT the cluster runs below saturation (stragglers and "
        "critical paths: fewer agents left than keep it busy)"
    )
    online = Table(
        title="online: Poisson agent arrivals, SLO {} and {}, busiest link at most {:.0%}".format(
            *cfg.slo_parts, cfg.max_utilization
        )
    )
    pct = cfg.slo_percentiles
    cols = (
        "mode",
        "APS",
        "util.",
        f"{pct.name('TTFT')} at APS",
        f"{pct.name('TPOT')} at APS",
        "APS limit",
        "KV working set",
    )
    for col in cols:
        online.add_column(col, justify="left" if col == "mode" else "right")
    reached = [o.aps_limit != "unreachable" for o in os_]

    def shown(values: list[float]) -> list[float]:  # "-" where the mode reaches no rate
        return [v if ok else math.nan for v, ok in zip(values, reached, strict=True)]

    apss = interval_column(
        [o.aps for o in os_],
        [_pair(bound(m, "aps")) if ok else None for m, ok in zip(modes, reached, strict=True)],
    )
    online_ttfts = durations(shown([o.online_ttft_s for o in os_]))
    online_tpots = durations(shown([o.online_tpot_s for o in os_]))
    working_sets = scaled_column(shown([o.working_set_gbyte for o in os_]), BYTE_UNITS)
    for k, (m, o) in enumerate(modes.items()):
        online.add_row(
            m,
            apss[k],
            percent(o.binding_utilization) if reached[k] else "-",
            online_ttfts[k],
            online_tpots[k],
            o.aps_limit,
            working_sets[k],
        )
    console.print(online)
    console.print(
        "util.: the busiest link's utilization at the APS (its turns/s over the saturated "
        "turns/s); APS limit 'utilization': --max-utilization caps it, not an SLO"
    )
    for m, o in modes.items():
        if o.aps_limit == "unreachable":
            console.print(
                f"{m}: APS 0, no arrival rate meets the SLOs: {unreachable_reason(o, r.config)}"
            )
    for m, why in r.infeasible.items():
        console.print(escape(f"{m}: cannot run this cluster: {why}"), highlight=False)
    aps = f"{r.speedup_aps:.2f}x" if math.isfinite(r.speedup_aps) else "n/a (basic serves none)"
    if not (math.isfinite(r.speedup_jct) and r.speedup_jct > 0):
        faster = "n/a"
    elif r.speedup_jct >= 1.0:
        faster = f"{r.speedup_jct:.2f}x faster"
    else:  # basic's JCT below dualpath's: "0.49x faster" read as faster
        faster = f"{1.0 / r.speedup_jct:.2f}x slower"
    console.print(
        f"dualpath vs basic: JCT {faster}, APS {aps}; KV working set by Little's law (paper 2.5)"
    )
    gaps = r.oracle_gap
    if any(math.isfinite(v) for v in gaps.values()):
        console.print(
            "dualpath vs oracle: "
            # Through the formatter: a gap that rounds to nothing is "0.0%", not "-0.0%".
            + ", ".join(
                f"{GAP_LABELS[k]} {percent(v, 1, sign=True)}"
                for k, v in gaps.items()
                if math.isfinite(v)
            ),
            highlight=False,
        )
    render_costs(size_costs(r), console)
    console.print(efficiency_line(sc), highlight=False)
    if intervals is not None:
        console.print(intervals_line(intervals), highlight=False)


# Each gap's label in the text line, in the tables' words (offline, then online at the APS).
GAP_LABELS = {
    "saturated_turns_per_s": "max turns/s",
    "throughput_turns_per_s": "turns/s",
    "jct_s": "JCT",
    "ttft_span_s": "TTFT under load",
    "tpot_s": "TPOT",
    "aps": "APS",
    "online_ttft_s": "online TTFT",
    "online_tpot_s": "online TPOT",
}
assert set(GAP_LABELS) == set(GAP_METRICS)


def _pair(i: Interval | None) -> tuple[float, float] | None:
    return None if i is None else (i.low, i.high)


def sizing_payload(r: SizingReport, intervals: OutcomeIntervals | None = None) -> dict[str, Any]:
    costs = r.costs()
    target: dict[str, float] = (
        {"aps": r.goal} if r.target == "aps" else {"deadline_s": r.goal, "agents": r.spec.agents}
    )
    return {
        "target": target,
        "max_nodes": r.max_nodes,
        "efficiencies": efficiency_payload(r.scenario),
        "intervals": intervals_payload(intervals) if intervals is not None else None,
        "max_utilization": r.spec.max_utilization,
        "modes": {
            m: (
                {
                    "reached": True,
                    "prefill_nodes": s.prefill_nodes,
                    "decode_nodes": s.decode_nodes,
                    "nodes": s.nodes,
                    "gpus": s.gpus,
                    "aps": s.outcome.aps,
                    "aps_limit": s.outcome.aps_limit,
                    "binding_utilization": s.outcome.binding_utilization,
                    "jct_s": s.outcome.jct_s,
                    "bottleneck": s.outcome.bottleneck,
                    "binding": list(s.outcome.binding),
                    **interval_fields(intervals, m),
                    # Whether the target still holds at the interval's pessimistic end.
                    "target_met_at_interval_end": _met_at_end(r, intervals, m),
                    **_store_field(r, m),
                    **({"cost": cost_payload(costs[m])} if m in costs else {}),
                }
                if s.outcome is not None
                else {"reached": False, "reason": s.reason}
            )
            for m, s in r.modes.items()
        },
    }


def _store_field(r: SizingReport, mode: str) -> dict[str, Any]:
    """The store serving a mode's cluster (--target-aps only; null: not sized)."""
    if r.target != "aps":
        return {}
    st = r.stores.get(mode)  # type: ignore[call-overload]
    return {"store": None if st is None else dict(vars(st))}


def _render_stores(r: SizingReport, console: Console) -> None:
    """The store each mode's cluster needs at the target: nodes, and what sets the count."""
    stores = {m: st for m, st in r.stores.items() if st is not None}
    if not stores or r.scenario.storage is None:
        return
    name = r.scenario.storage.id
    table = Table(title=f"the store serving it ({name} nodes)", title_justify="left")
    cols = ("mode", "nodes", "for bandwidth", "for capacity", "read", "write", "KV", "set by")
    for c in cols:
        table.add_column(c, justify="left" if c in ("mode", "set by") else "right")
    reads = scaled_column([st.read_gbyte_s for st in stores.values()], RATE_UNITS)
    writes = scaled_column([st.write_gbyte_s for st in stores.values()], RATE_UNITS)
    kv = scaled_column([st.capacity_tbyte * 1e3 for st in stores.values()], BYTE_UNITS)
    for k, (m, st) in enumerate(stores.items()):
        table.add_row(
            m,
            f"{st.nodes:,}",
            f"{st.nodes_for_bandwidth:,}",
            f"{st.nodes_for_capacity:,}",
            reads[k],
            writes[k],
            kv[k],
            st.set_by,
        )
    console.print(table)
    console.print(
        "for bandwidth: storage reads and writes at the target APS, each node at most "
        "--max-utilization of its read and write GB/s; for capacity: the KV working set at the "
        "cluster's APS (Little's law) over a node's TB"
    )


def _met_at_end(r: SizingReport, intervals: OutcomeIntervals | None, mode: str) -> bool | None:
    """The target at the pessimistic end of the answer's interval: APS at its low end, JCT at
    its high end (None: no interval)."""
    values = intervals.by_mode.get(mode, {}) if intervals is not None else {}
    if r.target == "aps":
        aps = values.get("aps")
        return None if aps is None else aps.low >= r.goal
    jct = values.get("jct_s")
    return None if jct is None else jct.high <= r.goal


def render_sizing(
    r: SizingReport, console: Console, intervals: OutcomeIntervals | None = None
) -> None:
    spec = r.spec
    iv = intervals.by_mode if intervals is not None else {}
    aps = r.target == "aps"
    what = (
        f"{plain(r.goal)} agents/s under {', '.join(spec.serving.slo_parts)}, "
        f"busiest link at most {spec.max_utilization:.0%}"
        if aps
        else f"{count(spec.agents, 'agent')} within {plain(r.goal)} s"
    )
    table = Table(title=f"smallest cluster for {what}")
    jct_col = f"JCT, {count(spec.agents, 'agent')}"
    cols = ("mode", "nodes", "P", "D", "GPUs", "APS", *(("util.",) if aps else ()), jct_col)
    for col in (*cols, "binding (or why not)"):
        table.add_column(col, justify="right" if col[0] not in "mb" else "left")
    found = {m: s.outcome for m, s in r.modes.items() if s.outcome is not None}
    apss = dict(
        zip(
            found,
            interval_column(
                [o.aps for o in found.values()], [_pair(iv.get(m, {}).get("aps")) for m in found]
            ),
            strict=True,
        )
    )
    jcts = dict(
        zip(
            found,
            interval_column(
                [o.jct_s for o in found.values()],
                [_pair(iv.get(m, {}).get("jct_s")) for m in found],
                durations,
            ),
            strict=True,
        )
    )
    for m, s in r.modes.items():
        if s.outcome is None:
            table.add_row(m, *["-"] * (len(cols) - 1), f"[red]{s.reason}[/red]")
            continue
        table.add_row(
            m,
            str(s.nodes),
            str(s.prefill_nodes),
            str(s.decode_nodes),
            str(s.gpus),
            apss[m],
            *((percent(s.outcome.binding_utilization),) if aps else ()),
            jcts[m],
            s.outcome.bottleneck,
        )
    console.print(table)
    if aps:
        console.print(
            "util.: the busiest link's utilization at the APS; the offline JCT runs saturated, "
            "not capped by --max-utilization"
        )
    short = [m for m in r.modes if _met_at_end(r, intervals, m) is False]
    if short:
        end, margin = (
            ("low end of the APS", "a higher --target-aps")
            if r.target == "aps"
            else ("high end of the JCT", "a shorter --deadline")
        )
        console.print(
            f"[yellow]at the {end} interval the target is missed by: {', '.join(short)}[/yellow]"
            f" (for a margin, size for {margin})"
        )
    _render_stores(r, console)
    render_costs(r.costs(), console)
    console.print(efficiency_line(r.scenario), highlight=False)
    if intervals is not None:
        console.print(intervals_line(intervals) + " (at each mode's cluster)", highlight=False)
