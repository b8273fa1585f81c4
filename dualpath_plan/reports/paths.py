"""The ``paths`` and ``bounds`` reports: JSON payloads and terminal rendering."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dualpath_plan.formatting import column, finite, number, percent, plain, unit_column
from dualpath_plan.frozen import record
from dualpath_plan.outcomes.paths import BOUNDS_MODE, MixedResult, PathsResult
from dualpath_plan.physics.links import LINK_TABLE, NicRates, link
from dualpath_plan.physics.modes import MODE_TABLE
from dualpath_plan.physics.modes import mode as mode_named
from dualpath_plan.reports.provenance import efficiency_line, efficiency_payload
from dualpath_plan.reports.size import limits_payload
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.provenance import Efficiencies
from dualpath_plan.solvers.bounds import Bounds

if TYPE_CHECKING:
    from dualpath_plan.solvers.lp import Constraint, LPSolution


def _fmt(v: float) -> str:
    """A P/D bound: 4 significant digits (a ratio of node counts read against whole splits)."""
    return "none" if math.isinf(v) else plain(v, 4)


@record
class BoundsView:
    scenario: Scenario
    bounds: Bounds
    paper: Bounds  # the same nodes under the paper's assumptions
    paper_assumptions: bool


def bounds_scheduler(sc: Scenario) -> str:
    """The scheduler whose imbalance derates the bounds' capacities (the dualpath mode's)."""
    return sc.scheduling.scheduler(MODE_TABLE[BOUNDS_MODE].scheduler).describe()


def bounds_payload(v: BoundsView) -> dict[str, Any]:
    b, ref = v.bounds, v.paper
    pd_min, pd_max = float(b.pd_min), float(b.pd_max)
    return {
        # null where a bound does not exist (none below, none above, or no feasible ratio).
        "pd_min": finite(pd_min),
        "pd_max": finite(pd_max),
        "binding_lower": b.binding_lower[0],
        "binding_upper": b.binding_upper[0],
        "feasible": bool(b.feasible),
        "violated_at_every_ratio": b.violated[0],
        "paper_assumptions": v.paper_assumptions,
        "scheduler": bounds_scheduler(v.scenario),
        "efficiencies": efficiency_payload(v.scenario),
        "per_link": {k: finite(float(x)) for k, x in b.per_link.items()},
        "shift_vs_paper_assumptions": {
            "pd_min": _shift(v, pd_min, float(ref.pd_min)),
            "pd_max": _shift(v, pd_max, float(ref.pd_max)),
        },
    }


def _shift(v: BoundsView, extended: float, paper: float) -> float | None:
    """How far the extended terms move a bound: None where either range is empty or the
    bound does not exist on either side (an empty range's bounds cross: no distance between
    them says anything)."""
    both = bool(v.bounds.feasible) and bool(v.paper.feasible)
    return finite(extended - paper) if both and math.isfinite(extended + paper) else None


def render_bounds(v: BoundsView, console: Console) -> None:
    b, ref, sc = v.bounds, v.paper, v.scenario
    pd_min, pd_max = float(b.pd_min), float(b.pd_max)
    pn = sc.prefill_node
    rates = NicRates.of(pn)  # line rates: the paper's s and B
    which = "paper assumptions" if v.paper_assumptions else "extended model"
    console.print(
        f"[bold]Bottleneck-free P/D range[/bold] ({which}; "
        f"prefill {sc.prefill_node.id}, decode {sc.decode_node.id}; g={pn.gpus_per_node}, "
        f"s={plain(rates.snic_per_cnic)}, B={plain(rates.cnic_line / 1e9)} GB/s, "
        f"M={plain(pn.dram_gbyte_s)} GB/s; scheduler {bounds_scheduler(sc)})"
    )
    console.print(
        f"  {_fmt(pd_min)} <= P/D <= {_fmt(pd_max)}   "
        f"(lower: {b.binding_lower[0]}, upper: {b.binding_upper[0]})"
    )
    if not bool(b.feasible):
        console.print(
            f"  [red]no P/D ratio is bottleneck-free[/red]: "
            f"{', '.join(b.violated[0]) or 'the lower bound exceeds the upper'}"
        )
    if not v.paper_assumptions:
        lo, hi = _shift(v, pd_min, float(ref.pd_min)), _shift(v, pd_max, float(ref.pd_max))
        paper = (
            f"{_fmt(float(ref.pd_min))} .. {_fmt(float(ref.pd_max))}"
            if bool(ref.feasible)
            else "no ratio is bottleneck-free"
        )
        if lo is None and hi is None:
            console.print(f"  paper assumptions: {paper}")
        else:
            moved = [
                f"the {which} bound by {'+' if d > 0 else ''}{plain(d, 4)}"
                for which, d in (("lower", lo), ("upper", hi))
                if d
            ] or ["neither bound"]
            console.print(
                f"  the extended terms move {' and '.join(moved)} (paper assumptions: {paper})"
            )
    table = Table(title="each link's bound on P/D")
    for col in ("link", "bound", "kind", "what"):
        table.add_column(col)
    for name, x in b.per_link.items():
        val = float(x)
        pe = link(name).side == "pe"
        if (pe and val == 0) or (not pe and math.isinf(val)):
            continue
        table.add_row(name, _fmt(val), "P/D >=" if pe else "P/D <=", link(name).description)
    console.print(table)
    console.print(escape(efficiency_line(sc)), highlight=False)


def _dual_reading(c: Constraint) -> str:
    k = link(c.link)
    where = "the storage cluster" if k.side == "storage" else f"group {c.group}"
    more = f"1% more {k.resource.replace('_', ' ')} on {where}"
    return f"{more} buys {number(c.dual_per_percent)} turns/s"


def duals_payload(sol: LPSolution) -> list[dict[str, Any]]:
    """What more capacity buys. Where several constraints bind together the LP's optimum is
    degenerate: its duals split the gain of raising all of them among them, so only their sum
    is a reading of its own (one raised alone may buy less, down to nothing)."""
    tight = sol.by_value()
    out: list[dict[str, Any]] = [
        {
            "name": c.name,
            "dual_turns_per_s_per_percent": c.dual_per_percent,
            "reading": _dual_reading(c)
            if len(tight) == 1
            else f"the LP's share of the tie: {number(c.dual_per_percent)} turns/s per 1%",
        }
        for c in tight
    ]
    if len(tight) > 1:
        total = sum(c.dual_per_percent for c in tight)
        out.insert(
            0,
            {
                "name": " + ".join(c.name for c in tight),
                "dual_turns_per_s_per_percent": total,
                "reading": f"{len(tight)} constraints bind together: 1% more of all of them "
                f"buys {number(total)} turns/s; one raised alone may buy less, down to nothing",
            },
        )
    return out


def _render_duals(sol: LPSolution, console: Console) -> None:
    duals = duals_payload(sol)
    if duals:
        console.print("[bold]what more capacity buys[/bold] (LP duals):")
        for d in duals:
            console.print(escape(f"  {d['name']}: {d['reading']}"))


def paths_payload(r: PathsResult) -> dict[str, Any]:
    sc = r.scenario
    links = [
        {
            "name": k.name,
            "side": k.side,
            "resource": k.resource,
            "unit": f"{k.unit}/s",
            "load_per_node": r.limits[k.name].load_per_node,
            "capacity_per_node": r.limits[k.name].capacity_per_node,
            "utilization": r.limits[k.name].utilization,
            "binding": k.name in r.binding,
            "derated_by": list(r.limits[k.name].derated_by),
        }
        for k in LINK_TABLE
    ]
    return {
        "mode": r.mode,
        "prefill_nodes": sc.prefill_nodes,
        "decode_nodes": sc.decode_nodes,
        "saturated_turns_per_s": r.saturated_turns_per_s,
        "decode_path_fraction": r.decode_path_fraction,
        "decode_path_fraction_range": list(r.decode_path_fraction_range),
        "bottleneck": " + ".join(r.binding),
        "binding": list(r.binding),
        "limits": limits_payload(r.limits),
        "links": links,
        "duals": duals_payload(r.lp),
        "lp_saturated_turns_per_s": r.lp.throughput_turns_per_s,
        "lp_binding": r.lp.binding(),
        "efficiencies": efficiency_payload(sc),
    }


def _bar(u: float, width: int = 12) -> str:
    n = round(min(max(u, 0.0), 1.0) * width)
    return "█" * n + "·" * (width - n)


def _scaled(v: float | None, unit: str) -> tuple[float, str]:
    """A link's amount per second in the unit its table cell shows (None: no limit)."""
    if v is None:
        return math.nan, ""
    if unit.startswith("FLOP"):
        return v / 1e12, "TFLOP/s"
    if unit.startswith("token"):
        return v, "tok/s"
    if unit.startswith("request"):
        return v, "req/s"
    return v / 1e9, "GB/s"


def _amounts(values: list[float | None], unit: list[str]) -> list[str]:
    """A column of link amounts: each unit's rows with one precision; "no limit" for None."""
    scaled = [_scaled(v, u) for v, u in zip(values, unit, strict=True)]
    cells = unit_column([a for a, _ in scaled], [u for _, u in scaled])
    return ["no limit" if v is None else c for v, c in zip(values, cells, strict=True)]


def render_paths(r: PathsResult, console: Console) -> None:
    sc, x = r.scenario, r.decode_path_fraction
    io_free = mode_named(r.mode).io_free
    console.print(
        f"[bold]{r.mode}[/bold]: {sc.model.id} on {sc.prefill_nodes}P{sc.decode_nodes}D "
        f"({sc.prefill_node.id} / {sc.decode_node.id}), {sc.workload.id}: "
        f"[bold]{number(r.saturated_turns_per_s, 4)} turns/s[/bold], "
        + ("" if io_free else f"DE-path share {x:.1%}, ")
        + f"binding: [red]{' + '.join(r.binding)}[/red]"
    )
    if io_free:
        console.print(
            "  no KV I/O (the oracle): no storage reads, copies or P-D transfers; compute only"
        )
    else:
        console.print(
            f"  PE path ({1 - x:.0%} of hit KV): storage -> PE SNIC -> PE DRAM -> PE CNIC -> "
            "PE HBM -> CNIC -> network -> DE CNIC -> DE DRAM -> DE HBM"
        )
        console.print(
            f"  DE path ({x:.0%} of hit KV): storage -> DE SNIC -> DE DRAM -> DE CNIC -> "
            "network -> PE CNIC -> PE HBM;  DE DRAM -> DE HBM"
        )
    table = Table(title="per-node load, capacity and utilization (█ used, · free)")
    for col in ("link", "load", "capacity", "util", "derated by"):
        table.add_column(col, justify="right" if col in ("load", "capacity") else "left")
    units = [r.limits[k.name].unit for k in LINK_TABLE]
    loads = _amounts([r.limits[k.name].load_per_node for k in LINK_TABLE], units)
    caps = _amounts([r.limits[k.name].capacity_per_node for k in LINK_TABLE], units)
    for k, load, cap in zip(LINK_TABLE, loads, caps, strict=True):
        lim = r.limits[k.name]
        tight = k.name in r.binding
        name = f"[red bold]{k.name}[/red bold]" if tight else k.name
        table.add_row(
            name,
            load,
            cap,
            f"{_bar(lim.utilization)} {percent(lim.utilization):>4}",
            "; ".join(lim.derated_by),
        )
    console.print(table)
    console.print(escape(efficiency_line(sc)), highlight=False)
    _render_duals(r.lp, console)


def mixed_payload(m: MixedResult) -> dict[str, Any]:
    sol = m.solution
    return {
        "mode": m.mode,
        "solver": "lp",
        "efficiencies": efficiency_payload(_mixed_efficiencies(m)),
        "saturated_turns_per_s": sol.throughput_turns_per_s,
        "decode_path_fraction": sol.decode_path_fraction,
        "binding": sol.binding(),
        "splits": [
            {
                "class": c,
                "prefill_group": p,
                "decode_group": d,
                "decode_path_fraction": v,
                "turns_per_s": sol.routing[(c, p, d)],
            }
            for (c, p, d), v in sol.split.items()
        ],
        "constraints": [
            {
                "name": c.name,
                "link": c.link,
                "group": c.group,
                "utilization": c.utilization,
                "load": c.load,
                "capacity": finite(c.capacity),
                "unit": f"{link(c.link).unit}/s",
                "derated_by": list(m.derated_by(c.link, c.group)),
                "dual_turns_per_s_per_percent": c.dual_per_percent,
            }
            for c in sol.constraints
        ],
        "binding_constraints": [c.name for c in sol.tight()],
        "duals": duals_payload(sol),
    }


def _mixed_efficiencies(m: MixedResult) -> Efficiencies:
    return Efficiencies.of_nodes(
        m.scenario, [g.node for g in m.prefill], [g.node for g in m.decode]
    )


def render_mixed(m: MixedResult, console: Console) -> None:
    sol = m.solution
    console.print(
        f"[bold]{m.mode}[/bold] (LP): "
        f"[bold]{number(sol.throughput_turns_per_s, 4)} turns/s[/bold], "
        f"DE-path share {sol.decode_path_fraction:.1%}, prefill "
        f"{', '.join(f'{g.name} x {g.nodes}' for g in m.prefill)}, decode "
        f"{', '.join(f'{g.name} x {g.nodes}' for g in m.decode)}; binding: "
        f"[red]{' + '.join(sol.binding())}[/red]"
    )
    t1 = Table(title="routing and split per class and group pair")
    for col in ("class", "prefill group", "decode group", "turns/s", "DE-path share"):
        t1.add_column(col)
    routed = column([sol.routing[key] for key in sol.split], 4)
    for ((c, p, d), v), turns in zip(sol.split.items(), routed, strict=True):
        t1.add_row(c, p, d, turns, percent(v, 1))
    console.print(t1)
    t2 = Table(title="constraint utilization")
    for col in ("constraint", "utilization"):
        t2.add_column(col)
    for con in sorted(sol.constraints, key=lambda con: -con.utilization):
        t2.add_row(escape(con.name), f"{_bar(con.utilization)} {percent(con.utilization):>4}")
    console.print(t2)
    console.print(escape(efficiency_line(_mixed_efficiencies(m))), highlight=False)
    _render_duals(sol, console)
