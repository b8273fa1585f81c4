"""The path model as a linear program (scipy.optimize.linprog, HiGHS).

It covers what the closed form cannot: several prefill and decode node groups with different
hardware, several workload classes with their own hit rates, and a split per class and group
pair. Variables, per class c, prefill group i and decode group j: r_cij turns/s routed to the
pair, y_cij of them read on the DE path (0 <= y <= r), and the total T. Maximize T subject to

    sum_ij r_cij = w_c T                                   (the class mix)
    sum_(c,j) a_lc r_cij + b_lc y_cij <= cap_il             (every PE-side link l of group i)
    sum_(c,i) a_lc r_cij + b_lc y_cij <= cap_jl             (every DE-side link of group j)
    sum_(c,i) G_c r_cij / rate_cj <= 1                      (decode group j's tokens/s)
    sum a r + b y <= cap                                    (storage cluster)

with the per-turn coefficients a, b of :func:`dualpath_plan.physics.links.turn_loads`. The duals
of the link rows are dT/dcap. A second solve (``balanced``) keeps T at its optimum and
minimizes the busiest I/O link, which picks the split a read-queue-balancing scheduler would.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import linprog

from dualpath_plan.errors import InfeasibleError
from dualpath_plan.physics.links import (
    LINK_INDEX,
    LINKS,
    SIDE_FIELDS,
    Cluster,
    Demand,
    PathOptions,
    SideCaps,
    turn_loads,
)
from dualpath_plan.physics.model import FloatArray
from dualpath_plan.solvers.closed_form import Mode


@dataclass(frozen=True)
class Group:
    name: str
    nodes: float
    caps: SideCaps  # one node


@dataclass(frozen=True)
class WorkClass:
    name: str
    weight: float  # share of turns
    demand: Demand  # scalars


@dataclass(frozen=True)
class LPProblem:
    prefill: list[Group]
    decode: list[Group]
    classes: list[WorkClass]
    # decode_tokens_per_s[c][j]: tokens/s decode group j sustains on class c's sequences.
    decode_tokens_per_s: list[list[float]]
    storage_read: float = np.inf
    storage_write: float = np.inf

    @classmethod
    def from_cluster(cls, cluster: Cluster, demand: Demand) -> LPProblem:
        """The homogeneous case: one prefill group, one decode group, one class."""
        return cls(
            prefill=[Group("prefill", float(cluster.prefill_nodes), cluster.pe)],
            decode=[Group("decode", float(cluster.decode_nodes), cluster.de)],
            classes=[WorkClass("all", 1.0, demand)],
            decode_tokens_per_s=[[float(cluster.decode_tokens_per_s)]],
            storage_read=float(cluster.storage_read),
            storage_write=float(cluster.storage_write),
        )


@dataclass(frozen=True)
class Constraint:
    name: str  # e.g. "pe_snic_read[prefill]"
    link: str
    group: str
    load: float  # per second at the optimum, in the link's unit
    capacity: float
    utilization: float
    dual: float  # d(turns/s) / d(capacity unit): 1 more B/s (FLOP/s, ...) buys this much
    nodes: float  # nodes behind the capacity (for a per-node reading)


@dataclass(frozen=True)
class LPSolution:
    mode: Mode
    throughput_turns_per_s: float
    decode_path_fraction: float  # hit-byte weighted over all classes and pairs
    split: dict[tuple[str, str, str], float]  # (class, prefill group, decode group) -> share
    routing: dict[tuple[str, str, str], float]  # turns/s per (class, pair)
    constraints: list[Constraint] = field(default_factory=list)

    def binding(self, tol: float = 1e-6) -> list[Constraint]:
        """Binding constraints, ranked by dual value (what capacity buys the most)."""
        hits = [c for c in self.constraints if c.utilization >= 1 - tol]
        return sorted(hits, key=lambda c: -c.dual * _unit_scale(c.link))

    def utilization(self, link: str) -> float:
        return max((c.utilization for c in self.constraints if c.link == link), default=0.0)


def _unit_scale(link: str) -> float:
    """Dual per GB/s (or per TFLOP/s, per token/s) for ranking across units."""
    if link.endswith("compute"):
        return 1e12
    if link.endswith("decode"):
        return 1.0
    return 1e9


def solve_lp(
    problem: LPProblem,
    mode: Mode = "dualpath",
    options: PathOptions = PathOptions(),
    balanced: bool = True,
) -> LPSolution:
    C, I, J = len(problem.classes), len(problem.prefill), len(problem.decode)  # noqa: E741
    npair = C * I * J
    nvar = 1 + 2 * npair  # T, r..., y...

    def r_idx(c: int, i: int, j: int) -> int:
        return 1 + (c * I + i) * J + j

    def y_idx(c: int, i: int, j: int) -> int:
        return 1 + npair + (c * I + i) * J + j

    coef = [turn_loads(wc.demand, options) for wc in problem.classes]
    a_c = [np.asarray(a, dtype=float) for a, _ in coef]
    b_c = [np.asarray(b, dtype=float) for _, b in coef]
    oracle = mode == "oracle"

    rows: list[np.ndarray] = []
    rhs: list[float] = []
    meta: list[tuple[str, str, float, float]] = []  # link, group, capacity, nodes

    def add_row(row: np.ndarray, cap: float, link: str, group: str, nodes: float) -> None:
        if not np.isfinite(cap) or not np.any(row):
            return
        rows.append(row)
        rhs.append(cap)
        meta.append((link, group, cap, nodes))

    for side, groups in (("pe", problem.prefill), ("de", problem.decode)):
        for g_index, g in enumerate(groups):
            for fname in SIDE_FIELDS:
                link = f"{side}_{fname}" if fname != "compute" or side == "pe" else "de_decode"
                if side == "de" and fname == "compute":
                    continue
                if oracle and link != "pe_compute":
                    continue
                li = LINK_INDEX[link]
                row = np.zeros(nvar)
                for c in range(C):
                    for i in range(I):
                        for j in range(J):
                            if (side == "pe" and i != g_index) or (side == "de" and j != g_index):
                                continue
                            row[r_idx(c, i, j)] += a_c[c][li]
                            row[y_idx(c, i, j)] += b_c[c][li]
                add_row(row, g.nodes * float(getattr(g.caps, fname)), link, g.name, g.nodes)
    li = LINK_INDEX["de_decode"]
    for j, g in enumerate(problem.decode):
        row = np.zeros(nvar)
        for c in range(C):
            for i in range(I):
                row[r_idx(c, i, j)] = a_c[c][li] / problem.decode_tokens_per_s[c][j]
        add_row(row, 1.0, "de_decode", g.name, g.nodes)
    if not oracle:
        for link, cap in (
            ("storage_read", problem.storage_read),
            ("storage_write", problem.storage_write),
        ):
            li = LINK_INDEX[link]
            row = np.zeros(nvar)
            for c in range(C):
                for i in range(I):
                    for j in range(J):
                        row[r_idx(c, i, j)] = a_c[c][li]
                        row[y_idx(c, i, j)] = b_c[c][li]
            add_row(row, cap, link, "storage", 1.0)
    n_links = len(rows)
    # y <= r
    for c in range(C):
        for i in range(I):
            for j in range(J):
                row = np.zeros(nvar)
                row[y_idx(c, i, j)] = 1.0
                row[r_idx(c, i, j)] = -1.0
                rows.append(row)
                rhs.append(0.0)
    A_ub = np.array(rows)
    b_ub = np.array(rhs)
    # Mix: sum_ij r_cij - w_c T = 0; even mode: y = e r.
    eq_rows, eq_rhs = [], []
    for c, wc in enumerate(problem.classes):
        row = np.zeros(nvar)
        row[0] = -wc.weight
        for i in range(I):
            for j in range(J):
                row[r_idx(c, i, j)] = 1.0
        eq_rows.append(row)
        eq_rhs.append(0.0)
    bounds: list[tuple[float, float | None]] = [(0.0, None)] * nvar
    if mode in ("basic", "oracle"):
        for k in range(1 + npair, nvar):
            bounds[k] = (0.0, 0.0)
    elif mode == "even":
        pe = sum(g.nodes * float(g.caps.snic_read) for g in problem.prefill)
        de = sum(g.nodes * float(g.caps.snic_read) for g in problem.decode)
        share = de / (pe + de)
        for c in range(C):
            for i in range(I):
                for j in range(J):
                    row = np.zeros(nvar)
                    row[y_idx(c, i, j)] = 1.0
                    row[r_idx(c, i, j)] = -share
                    eq_rows.append(row)
                    eq_rhs.append(0.0)
    A_eq, b_eq = np.array(eq_rows), np.array(eq_rhs)
    # Scale rows to unit capacity for conditioning (bytes/s and tokens/s differ by 1e9).
    scale = np.where(b_ub > 0, b_ub, 1.0)
    cost = np.zeros(nvar)
    cost[0] = -1.0
    res = linprog(
        cost,
        A_ub=A_ub / scale[:, None],
        b_ub=b_ub / scale,
        A_eq=A_eq,
        b_eq=b_eq,
        bounds=bounds,
        method="highs",
    )
    if res.status == 3:
        raise InfeasibleError(
            "the LP is unbounded: no capacity limits the throughput; give the "
            "cluster at least one finite link",
            field="cluster",
        )
    if res.status != 0:
        raise InfeasibleError(f"the LP failed: {res.message}", field="cluster")
    t_star = -res.fun
    duals = -np.asarray(res.ineqlin.marginals)[:n_links] / scale[:n_links]
    v = res.x
    if balanced and mode == "dualpath" and t_star > 0:
        v = _balance(A_ub, b_ub, A_eq, b_eq, bounds, meta, n_links, t_star, v)
    loads = A_ub[:n_links] @ v
    constraints = [
        Constraint(
            name=f"{link}[{group}]",
            link=link,
            group=group,
            load=float(load),
            capacity=float(cap),
            utilization=float(load / cap) if cap > 0 else 0.0,
            dual=float(max(d, 0.0)),
            nodes=nodes,
        )
        for (link, group, cap, nodes), load, d in zip(meta, loads, duals, strict=True)
    ]
    split, routing = {}, {}
    hit_total = de_total = 0.0
    for c, wc in enumerate(problem.classes):
        h = float(np.asarray(wc.demand.hit_bytes))
        for i, gi in enumerate(problem.prefill):
            for j, gj in enumerate(problem.decode):
                r, y = v[r_idx(c, i, j)], v[y_idx(c, i, j)]
                key = (wc.name, gi.name, gj.name)
                routing[key] = float(r)
                split[key] = float(y / r) if r > 1e-12 * max(t_star, 1e-300) else 0.0
                hit_total += r * h
                de_total += y * h
    return LPSolution(
        mode=mode,
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
    meta: list[tuple[str, str, float, float]],
    n_links: int,
    t_star: float,
    fallback: FloatArray,
) -> FloatArray:
    """Second stage: T >= T* (1 - 1e-9), minimize s with every I/O link <= s x capacity."""
    nvar = A_ub.shape[1]
    io = np.array(
        [not m[0].endswith(("compute", "decode")) for m in meta]
        + [False] * (A_ub.shape[0] - n_links)
    )
    A = np.hstack([A_ub, np.zeros((A_ub.shape[0], 1))])
    A[io, -1] = -b_ub[io]
    b = b_ub.copy()
    b[io] = 0.0
    t_row = np.zeros(nvar + 1)
    t_row[0] = -1.0
    A = np.vstack([A, t_row])
    b = np.append(b, -t_star * (1 - 1e-9))
    scale = np.where(b_ub > 0, b_ub, 1.0)
    scale = np.append(scale, max(t_star, 1e-300))
    cost = np.zeros(nvar + 1)
    cost[-1] = 1.0
    res = linprog(
        cost,
        A_ub=A / scale[:, None],
        b_ub=b / scale,
        A_eq=np.hstack([A_eq, np.zeros((A_eq.shape[0], 1))]),
        b_eq=b_eq,
        bounds=[*bounds, (0, None)],
        method="highs",
    )
    return res.x[:nvar] if res.status == 0 else fallback


__all__ = ["LINKS", "Constraint", "Group", "LPProblem", "LPSolution", "WorkClass", "solve_lp"]
