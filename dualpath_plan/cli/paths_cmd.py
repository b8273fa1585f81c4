"""``dualpath-plan bounds`` and ``dualpath-plan paths``."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from dualpath_plan.cli.common import (
    DecodeNodeOpt,
    DOpt,
    GpuOpt,
    JsonOpt,
    ModelOpt,
    NodeOpt,
    PaperOpt,
    PaperTermOpt,
    POpt,
    PrefillNodeOpt,
    ProfilesOpt,
    SchedulerOpt,
    SetOpt,
    StorageOpt,
    WorkloadOpt,
    load_registry,
    print_json,
    stdout,
    storage_id,
)
from dualpath_plan.errors import PlanInputError
from dualpath_plan.physics.cluster import Scheduler
from dualpath_plan.physics.links import (
    LINK_DESCRIPTIONS,
    LINKS,
    PathOptions,
    capacities,
    link_resource,
    link_unit,
    turn_loads,
)
from dualpath_plan.plan import DEFAULTS, Scenario, heterogeneous_problem
from dualpath_plan.solvers.closed_form import MODES

if TYPE_CHECKING:  # scipy.optimize loads only for commands that solve an LP
    from dualpath_plan.solvers.lp import LPSolution


def _options(paper: bool, terms: list[str] | None = None) -> PathOptions:
    """All extended terms, none (--paper-assumptions), or all but the --paper-term ones."""
    if paper:
        return PathOptions.paper()
    known = list(PathOptions.__dataclass_fields__)
    off = {}
    for term in terms or []:
        if term not in known:
            raise PlanInputError(
                f"unknown term {term!r}; expected one of {', '.join(known)}", field="--paper-term"
            )
        off[term] = False
    return replace(PathOptions(), **off)


def _scheduler(name: str, requests_per_engine: float, load_cv: float) -> Scheduler:
    if name not in ("ideal", "round_robin", "queue_aware"):
        raise PlanInputError(
            f"expected ideal, round_robin or queue_aware, got {name!r}", field="--scheduler"
        )
    if not (math.isfinite(requests_per_engine) and requests_per_engine >= 1):
        raise PlanInputError(
            f"expected a number >= 1, got {requests_per_engine!r}", field="--requests-per-engine"
        )
    if not (math.isfinite(load_cv) and load_cv >= 0):
        raise PlanInputError(f"expected a number >= 0, got {load_cv!r}", field="--load-cv")
    return Scheduler(
        policy=name,  # type: ignore[arg-type]
        requests_per_engine=requests_per_engine,
        load_cv=load_cv,
    )


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


def _fmt(v: float) -> str:
    if math.isinf(v):
        return "none"
    return f"{v:.4g}"


def bounds(
    node: NodeOpt = DEFAULTS["node"],  # type: ignore[assignment]
    prefill_node: PrefillNodeOpt = None,
    decode_node: DecodeNodeOpt = None,
    model: ModelOpt = DEFAULTS["model"],  # type: ignore[assignment]
    workload: WorkloadOpt = DEFAULTS["workload"],  # type: ignore[assignment]
    paper: PaperOpt = False,
    paper_term: PaperTermOpt = None,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Bottleneck-free P/D range (paper eq. (1)-(9)): the P/D node ratios at which no NIC, PCIe
    or DRAM link is over capacity while every storage NIC is saturated and shared evenly.
    Without --paper-assumptions the extended terms apply and the report says how much they
    move each bound."""
    registry = load_registry(profiles, set_)
    kw = dict(
        model=model,
        workload=workload,
        node=node,
        prefill_node=prefill_node,
        decode_node=decode_node,
        storage=None,
        prefill_nodes=1,
        decode_nodes=1,
    )
    sc = Scenario.from_ids(registry, options=_options(paper, paper_term), **kw)  # type: ignore[arg-type]
    b = sc.bounds()
    ref = Scenario.from_ids(registry, options=PathOptions.paper(), **kw).bounds()  # type: ignore[arg-type]
    pd_min, pd_max = float(b.pd_min), float(b.pd_max)
    feasible = pd_min <= pd_max and not b.violated[0]
    payload = {
        # null where a bound does not exist (none below, none above, or no feasible ratio).
        "pd_min": _finite(pd_min),
        "pd_max": _finite(pd_max),
        "binding_lower": b.binding_lower[0],
        "binding_upper": b.binding_upper[0],
        "feasible": bool(feasible),
        "violated_at_every_ratio": b.violated[0],
        "paper_assumptions": paper,
        "per_link": {k: _finite(float(v)) for k, v in b.per_link.items()},
        "shift_vs_paper_assumptions": {
            "pd_min": _finite(pd_min - float(ref.pd_min)),
            "pd_max": _finite(pd_max - float(ref.pd_max)),
        },
    }
    if as_json:
        print_json(payload)
        return
    pn = sc.prefill_node
    s = pn.snic_count * pn.snic_gbit_s / pn.cnic_gbit_s
    which = "paper assumptions" if paper else "extended model"
    stdout.print(
        f"[bold]Bottleneck-free P/D range[/bold] ({which}; "
        f"prefill {sc.prefill_node.id}, decode {sc.decode_node.id}; g={pn.gpus_per_node}, "
        f"s={s:g}, B={pn.cnic_gbit_s / 8:g} GB/s, M={pn.dram_gbyte_s:g} GB/s)"
    )
    stdout.print(
        f"  {_fmt(pd_min)} <= P/D <= {_fmt(pd_max)}   "
        f"(lower: {b.binding_lower[0]}, upper: {b.binding_upper[0]})"
    )
    if not feasible:
        stdout.print(
            f"  [red]no P/D ratio is bottleneck-free[/red]: "
            f"{', '.join(b.violated[0]) or 'the lower bound exceeds the upper'}"
        )
    if not paper:
        stdout.print(
            f"  the extended terms move the lower bound by {pd_min - float(ref.pd_min):+.4g} "
            f"and the upper by {pd_max - float(ref.pd_max):+.4g} "
            f"(paper assumptions: {_fmt(float(ref.pd_min))} .. {_fmt(float(ref.pd_max))})"
        )
    table = Table(title="each link's bound on P/D")
    for col in ("link", "bound", "kind", "what"):
        table.add_column(col)
    for name, v in b.per_link.items():
        val = float(v)
        if (name.startswith("pe_") and val == 0) or (name.startswith("de_") and math.isinf(val)):
            continue
        kind = "P/D >=" if name.startswith("pe_") else "P/D <="
        table.add_row(name, _fmt(val), kind, LINK_DESCRIPTIONS.get(link_resource(name), ""))
    stdout.print(table)


def _parse_groups(specs: list[str] | None, name: str) -> list[tuple[str, int]]:
    out = []
    for spec in specs or []:
        nid, _, count = spec.partition(":")
        try:
            n = int(count) if count else 1
        except ValueError:
            raise PlanInputError(f"expected NODE:COUNT, got {spec!r}", field=name) from None
        if n < 1:
            raise PlanInputError(f"a group needs at least one node, got {spec!r}", field=name)
        out.append((nid, n))
    return out


def _parse_classes(specs: list[str] | None) -> list[tuple[str, float]]:
    out = []
    for spec in specs or []:
        wid, _, weight = spec.partition(":")
        try:
            w = float(weight) if weight else 1.0
        except ValueError:
            raise PlanInputError(
                f"expected WORKLOAD:WEIGHT, got {spec!r}", field="--class"
            ) from None
        if not (math.isfinite(w) and w > 0):
            raise PlanInputError(f"a class weight must be > 0, got {spec!r}", field="--class")
        out.append((wid, w))
    return out


def _dual_reading(c: object, solution: LPSolution) -> str:
    link, dual, nodes = c.link, c.dual, c.nodes  # type: ignore[attr-defined]
    if link.endswith("compute"):
        return f"1 TFLOP/s more prefill compute on each node buys {dual * 1e12 * nodes:.3g} turns/s"
    if link.endswith("decode"):
        return f"1% more decode capacity buys {dual * 0.01:.3g} turns/s"
    where = (
        "storage cluster"
        if link.startswith("storage")
        else f"each {'prefill' if link.startswith('pe_') else 'decode'} node"
    )
    per = nodes if not link.startswith("storage") else 1.0
    return (
        f"1 GB/s more of {link_resource(link).replace('_', ' ')} on {where} buys "
        f"{dual * 1e9 * per:.3g} turns/s"
    )


def _bar(u: float, width: int = 12) -> str:
    n = round(min(max(u, 0.0), 1.0) * width)
    return "█" * n + "·" * (width - n)


def paths(
    model: ModelOpt = DEFAULTS["model"],  # type: ignore[assignment]
    workload: WorkloadOpt = DEFAULTS["workload"],  # type: ignore[assignment]
    node: NodeOpt = DEFAULTS["node"],  # type: ignore[assignment]
    prefill_node: PrefillNodeOpt = None,
    decode_node: DecodeNodeOpt = None,
    gpu: GpuOpt = None,
    storage: StorageOpt = DEFAULTS["storage"],  # type: ignore[assignment]
    prefill_nodes: POpt = DEFAULTS["prefill_nodes"],  # type: ignore[assignment]
    decode_nodes: DOpt = DEFAULTS["decode_nodes"],  # type: ignore[assignment]
    mode: Annotated[
        str, typer.Option("--mode", help="basic, even, dualpath or oracle.")
    ] = "dualpath",
    prefill_group: Annotated[
        list[str] | None,
        typer.Option(
            "--prefill-group",
            help="NODE:COUNT, repeatable: heterogeneous prefill groups (LP).",
            show_default=False,
        ),
    ] = None,
    decode_group: Annotated[
        list[str] | None,
        typer.Option(
            "--decode-group",
            help="NODE:COUNT, repeatable: heterogeneous decode groups (LP).",
            show_default=False,
        ),
    ] = None,
    work_class: Annotated[
        list[str] | None,
        typer.Option(
            "--class",
            help="WORKLOAD:WEIGHT, repeatable: workload classes with their share of turns (LP).",
            show_default=False,
        ),
    ] = None,
    paper: PaperOpt = False,
    paper_term: PaperTermOpt = None,
    scheduler: SchedulerOpt = "ideal",
    requests_per_engine: Annotated[
        float,
        typer.Option(
            "--requests-per-engine",
            help="Requests in flight per engine, k, of the imbalance model "
            "(round_robin: 1 + v sqrt(2 ln n / k); queue_aware: 1 + 1/k).",
        ),
    ] = Scheduler().requests_per_engine,
    load_cv: Annotated[
        float,
        typer.Option(
            "--load-cv", help="Coefficient of variation v of per-request load (round_robin)."
        ),
    ] = Scheduler().load_cv,
    as_json: JsonOpt = False,
    profiles: ProfilesOpt = None,
    set_: SetOpt = None,
) -> None:
    """Both read paths of one configuration: every link's load and utilization at the optimum
    of the chosen mode, the binding link, and what more capacity of it would buy (LP duals)."""
    if mode not in MODES:
        raise PlanInputError(f"expected one of {', '.join(MODES)}, got {mode!r}", field="--mode")
    registry = load_registry(profiles, set_)
    options = _options(paper, paper_term)
    if prefill_group or decode_group or work_class:
        _paths_lp(
            registry,
            model,
            workload,
            node,
            storage,
            prefill_nodes,
            decode_nodes,
            mode,
            prefill_group,
            decode_group,
            work_class,
            options,
            as_json,
        )
        return
    sc = Scenario.from_ids(
        registry,
        model=model,
        workload=workload,
        node=node,
        prefill_node=prefill_node,
        decode_node=decode_node,
        gpu=gpu,
        storage=storage_id(storage),
        prefill_nodes=prefill_nodes,
        decode_nodes=decode_nodes,
        options=options,
        scheduler=_scheduler(scheduler, requests_per_engine, load_cv),
    )
    result = sc.solve((mode,))  # type: ignore[arg-type]
    sol = result.closed_form[mode]  # type: ignore[index]
    lp = result.lp[mode]  # type: ignore[index]
    a, b = turn_loads(sc.demand, options)
    cap = capacities(result.cluster)
    x = float(sol.decode_path_fraction)
    t = float(sol.throughput_turns_per_s)
    per_side = {"pe": float(sc.prefill_nodes), "de": float(sc.decode_nodes)}
    links = []
    oracle = mode == "oracle"
    for i, name in enumerate(LINKS):
        side = name[:2] if name[:3] in ("pe_", "de_") else "storage"
        n = per_side.get(side, 1.0)
        load = (a[i] + b[i] * x) * t
        if oracle and name not in ("pe_compute", "de_decode"):
            load = 0.0
        c = float(cap[i])
        links.append(
            {
                "name": name,
                "side": side,
                "resource": link_resource(name),
                "unit": link_unit(name) + "/s",
                "load_per_node": float(load / n),
                "capacity_per_node": c / n if math.isfinite(c) else None,
                "utilization": float(sol.utilization[i]),
                "binding": bool(sol.utilization[i] >= 1 - 1e-6),
            }
        )
    binding = [
        {"name": con.name, "dual_turns_per_s_per_unit": con.dual, "reading": _dual_reading(con, lp)}
        for con in lp.binding()
    ]
    payload = {
        "mode": mode,
        "prefill_nodes": sc.prefill_nodes,
        "decode_nodes": sc.decode_nodes,
        "throughput_turns_per_s": t,
        "decode_path_fraction": x,
        "decode_path_fraction_range": [float(sol.split_low), float(sol.split_high)],
        "bottleneck": sol.bottleneck_name(),
        "links": links,
        "binding": binding,
        "lp_throughput_turns_per_s": lp.throughput_turns_per_s,
    }
    if as_json:
        print_json(payload)
        return
    _render_paths(sc, payload, links, binding)


def _render_paths(sc: Scenario, payload: dict, links: list[dict], binding: list[dict]) -> None:
    x = payload["decode_path_fraction"]
    stdout.print(
        f"[bold]{payload['mode']}[/bold]: {sc.model.id} on {payload['prefill_nodes']}P"
        f"{payload['decode_nodes']}D ({sc.prefill_node.id} / {sc.decode_node.id}), "
        f"{sc.workload.id}: [bold]{payload['throughput_turns_per_s']:.4g} turns/s[/bold], "
        f"DE-path share {x:.1%}, binding: [red]{payload['bottleneck']}[/red]"
    )
    stdout.print(
        f"  PE path ({1 - x:.0%} of hit KV): storage -> PE SNIC -> PE DRAM -> PE CNIC -> "
        "PE HBM -> CNIC -> network -> DE CNIC -> DE DRAM -> DE HBM"
    )
    stdout.print(
        f"  DE path ({x:.0%} of hit KV): storage -> DE SNIC -> DE DRAM -> DE CNIC -> "
        "network -> PE CNIC -> PE HBM;  DE DRAM -> DE HBM"
    )
    by = {ln["name"]: ln for ln in links}
    table = Table(title="per-node load and utilization (█ used, · free)")
    for col in ("prefill node", "load", "util", "", "decode node", "load", "util"):
        table.add_column(col, justify="right" if col in ("load", "util") else "left")

    def cell(name: str) -> tuple[str, str, str]:
        ln = by[name]
        unit = ln["unit"]
        v = ln["load_per_node"]
        load = (
            f"{v / 1e12:.3g} TFLOP/s"
            if unit.startswith("FLOP")
            else (f"{v:,.0f} tok/s" if unit.startswith("token") else f"{v / 1e9:.3g} GB/s")
        )
        style = "[red bold]" if ln["binding"] else ""
        end = "[/red bold]" if ln["binding"] else ""
        return (
            f"{style}{ln['resource']}{end}",
            load,
            f"{_bar(ln['utilization'])} {ln['utilization']:4.0%}",
        )

    pe_names = [n for n in LINKS if n.startswith("pe_")]
    de_names = [n for n in LINKS if n.startswith("de_")]
    for pn, dn in zip(pe_names, de_names, strict=True):
        table.add_row(*cell(pn), "", *cell(dn))
    stdout.print(table)
    for name in ("storage_read", "storage_write"):
        ln = by[name]
        stdout.print(
            f"  storage {name[8:]}: {ln['load_per_node'] / 1e9:.4g} GB/s, "
            f"{ln['utilization']:.0%} of the cluster's limit"
        )
    if binding:
        stdout.print("[bold]what more capacity buys[/bold] (LP duals):")
        for bnd in binding:
            stdout.print(f"  {bnd['name']}: {bnd['reading']}")


def _paths_lp(
    registry,
    model,
    workload,
    node,
    storage,
    P,
    D,
    mode,
    prefill_group,  # type: ignore[no-untyped-def]
    decode_group,
    work_class,
    options,
    as_json,
) -> None:
    from dualpath_plan.solvers.lp import solve_lp

    problem = heterogeneous_problem(
        registry,
        model=model,
        classes=_parse_classes(work_class) or [(workload, 1.0)],
        prefill_groups=_parse_groups(prefill_group, "--prefill-group") or [(node, P)],
        decode_groups=_parse_groups(decode_group, "--decode-group") or [(node, D)],
        storage=storage_id(storage),
        options=options,
    )
    sol = solve_lp(problem, mode, options)
    payload = {
        "mode": mode,
        "solver": "lp",
        "throughput_turns_per_s": sol.throughput_turns_per_s,
        "decode_path_fraction": sol.decode_path_fraction,
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
                "utilization": c.utilization,
                "load": c.load,
                "capacity": c.capacity,
                "dual": c.dual,
            }
            for c in sol.constraints
        ],
        "binding": [{"name": c.name, "reading": _dual_reading(c, sol)} for c in sol.binding()],
    }
    if as_json:
        print_json(payload)
        return
    stdout.print(
        f"[bold]{mode}[/bold] (LP): [bold]{sol.throughput_turns_per_s:.4g} turns/s[/bold], "
        f"DE-path share {sol.decode_path_fraction:.1%}"
    )
    t1 = Table(title="routing and split per class and group pair")
    for col in ("class", "prefill group", "decode group", "turns/s", "DE-path share"):
        t1.add_column(col)
    for s in payload["splits"]:
        t1.add_row(
            s["class"],
            s["prefill_group"],
            s["decode_group"],
            f"{s['turns_per_s']:.4g}",
            f"{s['decode_path_fraction']:.1%}",
        )
    stdout.print(t1)
    t2 = Table(title="constraint utilization")
    for col in ("constraint", "utilization"):
        t2.add_column(col)
    for c in sorted(sol.constraints, key=lambda c: -c.utilization):
        t2.add_row(c.name, f"{_bar(c.utilization)} {c.utilization:4.0%}")
    stdout.print(t2)
    for bnd in payload["binding"]:
        stdout.print(f"  {bnd['name']}: {bnd['reading']}")


def register(app: typer.Typer) -> None:
    app.command("bounds")(bounds)
    app.command("paths")(paths)
