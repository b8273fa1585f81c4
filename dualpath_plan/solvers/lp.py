"""The path model as a linear program (scipy.optimize.linprog, HiGHS).

It covers what the closed form cannot: several prefill and decode node groups with different
hardware, several workload classes with their own hit rates, and a split per class and group
pair. Its rows are the link table's links, with the capacities of the one assembly
(``scenario/assemble.py``), so on one group per side and one class it is the closed form's
problem. Variables, per class c, prefill group i and decode group j: r_cij turns/s routed to
the pair, y_cij of them read on the DE path (0 <= y <= r), and the total T. Maximize T s.t.

    sum_ij r_cij = w_c T                                       (the class mix)
    sum_(c,j) (a_lc r_cij + b_lc y_cij) / C_ilc <= 1            (every PE-side link l of group i)
    sum_(c,i) (a_lc r_cij + b_lc y_cij) / C_jlc <= 1            (every DE-side link of group j)
    sum_(c,i,j) (a_lc r_cij + b_lc y_cij) / C_lc <= 1           (cluster-wide: storage)

with the per-turn loads a, b of :func:`dualpath_plan.physics.links.turn_load_columns` and the
group's capacity C (per class: the prefill batch and the decode step depend on the turns). Each
row is the link's utilization. A second solve (``balanced``) keeps T at its optimum and
minimizes the busiest split-dependent link, the split a read-queue-balancing scheduler reaches
and the one the closed form reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field

import numpy as np
from scipy.optimize import linprog

from dualpath_plan.errors import InfeasibleError
from dualpath_plan.frozen import record
from dualpath_plan.physics.links import LINK_TABLE, Num
from dualpath_plan.physics.model import FloatArray
from dualpath_plan.physics.modes import SplitRule
from dualpath_plan.scenario.assemble import Assembly, read_share
from dualpath_plan.scenario.groups import GroupAssembly
from dualpath_plan.units import shares

# Rows within this of the busiest are tight. HiGHS meets rows to its 1e-7 feasibility
# tolerance (and the balancing stage keeps T within 1e-9 of its optimum), so links closer than
# this cannot be told apart by the LP; the closed form separates them to TIGHT_REL = 1e-9.
LP_TIGHT_REL = 1e-6


@record
class Group:
    name: str
    side: str  # "pe" or "de"
    nodes: float
    capacity: list[dict[str, float]]  # per class: the group's total capacity per second


@record
class LPClass:
    name: str
    weight: float  # share of turns
    load: dict[str, tuple[float, float]]  # per turn: a + b x
    hit_bytes: float


@record
class LPProblem:
    prefill: list[Group]
    decode: list[Group]
    classes: list[LPClass]
    shared: dict[str, float]  # cluster-wide links (storage aggregate), total capacity
    split: SplitRule

    @classmethod
    def from_assembly(cls, asm: Assembly) -> LPProblem:
        """One prefill group, one decode group, one class: the closed form's problem."""
        links = asm.links
        caps = links.capacity
        load = {k: (float(np.asarray(a)), float(np.asarray(b))) for k, (a, b) in links.load.items()}
        hit = float(np.asarray(links.hit_bytes))
        return cls(
            prefill=[Group("prefill", "pe", float(asm.pe.nodes), [_side(caps, "pe")])],
            decode=[Group("decode", "de", float(asm.de.nodes), [_side(caps, "de")])],
            classes=[LPClass("all", 1.0, load, hit)],
            shared=_side(caps, "storage"),
            split=links.split,
        )

    @classmethod
    def from_groups(cls, ga: GroupAssembly) -> LPProblem:
        def groups(side: str) -> list[Group]:
            parts = ga.pe if side == "pe" else ga.de
            specs = ga.prefill if side == "pe" else ga.decode
            return [
                Group(
                    spec.name,
                    side,
                    float(spec.nodes),
                    [
                        {
                            k: float(spec.nodes * np.asarray(v))
                            for k, v in parts[c][g].per_node.items()
                        }
                        for c in range(len(ga.classes))
                    ],
                )
                for g, spec in enumerate(specs)
            ]

        share = shares([c.weight for c in ga.classes])
        classes = [
            LPClass(
                c.name,
                w,
                {k: (float(np.asarray(a)), float(np.asarray(b))) for k, (a, b) in load.items()},
                c.turns.mean(c.turns.hit_bytes),
            )
            for c, load, w in zip(ga.classes, ga.loads, share, strict=True)
        ]
        return cls(
            groups("pe"),
            groups("de"),
            classes,
            {k: float(np.asarray(v)) for k, v in ga.shared.items()},
            "optimal" if ga.mode.split == "optimal" else ga.mode.split,
        )


def _side(caps: Mapping[str, Num], side: str) -> dict[str, float]:
    return {k.name: float(np.asarray(caps[k.name])) for k in LINK_TABLE if k.side == side}


@record
class Constraint:
    name: str  # e.g. "pe_snic_read[prefill]"
    link: str
    group: str
    utilization: float  # the row's value: load over capacity at the optimum
    capacity: float  # the group's capacity per second (of the first class)
    load: float  # utilization x capacity
    dual_per_percent: float  # turns/s that 1% more of this capacity buys
    nodes: float  # nodes behind the capacity (for a per-node reading)


@record
class LPSolution:
    split_rule: SplitRule
    throughput_turns_per_s: float
    decode_path_fraction: float  # hit-byte weighted over all classes and pairs
    split: dict[tuple[str, str, str], float]  # (class, prefill group, decode group) -> share
    routing: dict[tuple[str, str, str], float]  # turns/s per (class, pair)
    constraints: list[Constraint] = field(default_factory=list)

    def tight(self) -> list[Constraint]:
        """Constraints within LP_TIGHT_REL of the busiest, in table order."""
        top = max((c.utilization for c in self.constraints), default=0.0)
        return [
            c for c in self.constraints if top > 0 and c.utilization >= top * (1 - LP_TIGHT_REL)
        ]

    def binding(self) -> list[str]:
        """The tight links (by name, each once, in table order)."""
        names = {c.link for c in self.tight()}
        return [k.name for k in LINK_TABLE if k.name in names]

    def by_value(self) -> list[Constraint]:
        """Tight constraints ranked by what more capacity buys."""
        return sorted(self.tight(), key=lambda c: -c.dual_per_percent)


def _coef(a: float, c: float) -> float:
    """Seconds of a link per turn: a / c, with no load costing nothing whatever the capacity."""
    if a == 0.0 or c == np.inf:
        return 0.0
    return a / c if c > 0 else np.inf


def solve_lp(problem: LPProblem, balanced: bool = True) -> LPSolution:
    C, I, J = len(problem.classes), len(problem.prefill), len(problem.decode)  # noqa: E741
    npair = C * I * J
    nvar = 1 + 2 * npair  # T, r..., y...

    def r_idx(c: int, i: int, j: int) -> int:
        return 1 + (c * I + i) * J + j

    def y_idx(c: int, i: int, j: int) -> int:
        return 1 + npair + (c * I + i) * J + j

    rows: list[FloatArray] = []
    meta: list[tuple[str, str, float, float]] = []  # link, group, capacity, nodes

    def add_row(
        link: str, group: str, pairs: list[tuple[int, int, int]], caps: list[float], nodes: float
    ) -> None:
        row = np.zeros(nvar)
        for c, i, j in pairs:
            a, b = problem.classes[c].load[link]
            row[r_idx(c, i, j)] += _coef(a, caps[c])
            row[y_idx(c, i, j)] += _coef(b, caps[c]) if b >= 0 else -_coef(-b, caps[c])
        if not np.any(row):
            return
        if not np.all(np.isfinite(row)):
            raise InfeasibleError(
                f"{link} of {group} has no capacity for this workload", field="cluster"
            )
        rows.append(row)
        meta.append((link, group, caps[0], nodes))

    pairs = [(c, i, j) for c in range(C) for i in range(I) for j in range(J)]
    for side, groups in (("pe", problem.prefill), ("de", problem.decode)):
        for g_index, g in enumerate(groups):
            mine = [p for p in pairs if (p[1] if side == "pe" else p[2]) == g_index]
            for k in LINK_TABLE:
                if k.side == side:
                    add_row(
                        k.name, g.name, mine, [g.capacity[c][k.name] for c in range(C)], g.nodes
                    )
    for k in LINK_TABLE:
        if k.side == "storage":
            add_row(k.name, "storage", pairs, [problem.shared[k.name]] * C, 1.0)
    n_links = len(rows)
    # y <= r
    for c, i, j in pairs:
        row = np.zeros(nvar)
        row[y_idx(c, i, j)] = 1.0
        row[r_idx(c, i, j)] = -1.0
        rows.append(row)
    A_ub = np.array(rows)
    b_ub = np.concatenate([np.ones(n_links), np.zeros(len(rows) - n_links)])
    # Mix: sum_ij r_cij - w_c T = 0; even split: y = share r.
    eq_rows = []
    for c, wc in enumerate(problem.classes):
        row = np.zeros(nvar)
        row[0] = -wc.weight
        for i in range(I):
            for j in range(J):
                row[r_idx(c, i, j)] = 1.0
        eq_rows.append(row)
    bounds: list[tuple[float, float | None]] = [(0.0, None)] * nvar
    if problem.split == "pe_only":
        for v_index in range(1 + npair, nvar):
            bounds[v_index] = (0.0, 0.0)
    elif problem.split == "even":
        caps: dict[str, Num] = {
            k.name: sum(
                g.capacity[0][k.name]
                for g in (*problem.prefill, *problem.decode)
                if k.side == g.side
            )
            for k in LINK_TABLE
            if k.reads_storage
        }
        share = float(read_share(caps))
        for c, i, j in pairs:
            row = np.zeros(nvar)
            row[y_idx(c, i, j)] = 1.0
            row[r_idx(c, i, j)] = -share
            eq_rows.append(row)
    A_eq = np.array(eq_rows)
    b_eq = np.zeros(len(eq_rows))
    cost = np.zeros(nvar)
    cost[0] = -1.0
    res = linprog(cost, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=bounds, method="highs")
    if res.status == 3:
        raise InfeasibleError(
            "the LP is unbounded: no capacity limits the throughput; give the "
            "cluster at least one finite link",
            field="cluster",
        )
    if res.status != 0:
        raise InfeasibleError(f"the LP failed: {res.message}", field="cluster")
    t_star = -res.fun
    duals = -np.asarray(res.ineqlin.marginals)[:n_links]
    v = res.x
    if balanced and problem.split == "optimal" and t_star > 0:
        v = _balance(A_ub, b_ub, A_eq, b_eq, bounds, n_links, npair, t_star, v)
    util = A_ub[:n_links] @ v
    constraints = [
        Constraint(
            name=f"{link}[{group}]",
            link=link,
            group=group,
            utilization=float(u),
            capacity=float(cap),
            load=float(u * cap) if np.isfinite(cap) else 0.0,
            dual_per_percent=float(max(d, 0.0)) * 0.01,
            nodes=nodes,
        )
        for (link, group, cap, nodes), u, d in zip(meta, util, duals, strict=True)
    ]
    split, routing = {}, {}
    hit_total = de_total = 0.0
    for c, i, j in pairs:
        wc = problem.classes[c]
        r, y = v[r_idx(c, i, j)], v[y_idx(c, i, j)]
        key = (wc.name, problem.prefill[i].name, problem.decode[j].name)
        # HiGHS may return -0.0 or -1e-16 for a pair it routes nothing to.
        r, y = max(float(r), 0.0), max(float(y), 0.0)
        routing[key] = r
        split[key] = min(y / r, 1.0) if r > 1e-12 * max(t_star, 1e-300) else 0.0
        hit_total += r * wc.hit_bytes
        de_total += y * wc.hit_bytes
    return LPSolution(
        split_rule=problem.split,
        throughput_turns_per_s=float(t_star),
        decode_path_fraction=float(de_total / hit_total) if hit_total > 0 else 0.0,
        split=split,
        routing=routing,
        constraints=constraints,
    )


def _balance(
    A_ub: FloatArray,
    b_ub: FloatArray,
    A_eq: FloatArray,
    b_eq: FloatArray,
    bounds: list[tuple[float, float | None]],
    n_links: int,
    npair: int,
    t_star: float,
    fallback: FloatArray,
) -> FloatArray:
    """Second stage: T >= T* (1 - 1e-9); minimize s with every split-dependent link (a row
    with a y coefficient) at most s of its capacity."""
    nvar = A_ub.shape[1]
    varying = np.zeros(A_ub.shape[0], dtype=bool)
    varying[:n_links] = np.any(A_ub[:n_links, 1 + npair :] != 0, axis=1)
    A = np.hstack([A_ub, np.zeros((A_ub.shape[0], 1))])
    A[varying, -1] = -1.0
    t_row = np.zeros(nvar + 1)
    t_row[0] = -1.0
    A = np.vstack([A, t_row / max(t_star, 1e-300)])
    b = np.append(np.where(varying, 0.0, b_ub), -(1 - 1e-9))
    cost = np.zeros(nvar + 1)
    cost[-1] = 1.0
    res = linprog(
        cost,
        A_ub=A,
        b_ub=b,
        A_eq=np.hstack([A_eq, np.zeros((A_eq.shape[0], 1))]),
        b_eq=b_eq,
        bounds=[*bounds, (0, None)],
        method="highs",
    )
    return res.x[:nvar] if res.status == 0 else fallback


__all__ = ["Constraint", "Group", "LPClass", "LPProblem", "LPSolution", "solve_lp"]
