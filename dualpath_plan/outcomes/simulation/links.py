"""The I/O links as the simulation runs them: processor-sharing servers, the link groups a
mode's links fall into, and which servers and fixed crossing times each phase of a turn
meets."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from dualpath_plan.frozen import record
from dualpath_plan.physics.links import LINK_TABLE, Demand, turn_load_columns
from dualpath_plan.physics.modes import MODE_TABLE, ModeName
from dualpath_plan.scenario.bundle import Scenario

# Phases of a turn that wait on links. A job's owner is agent x 4 + phase (3: decode). A
# write-back (phase C) may finish after its agent's next turn started: nothing may ever wait
# on it.
READ, MOVE, WRITE = range(3)
DECODE = 3

# The demand fields a link's load is linear in.
FIELDS = ("hit_bytes", "miss_bytes", "generated_kv_bytes", "append_writeback_bytes")


class Server:
    """Processor sharing on virtual time: ``v`` advances at rate(n) while n jobs run; a job of
    size s that starts at v0 finishes when v reaches v0 + s. Its next completion is an event
    (``due``, ``due_seq``: its time and sequence); the event heap holds an anchor for it
    (``anchor``, ``anchor_t``: the sequence and time of an entry no later than it), which
    ``Engine.reschedule`` explains."""

    __slots__ = (
        "anchor",
        "anchor_t",
        "area",
        "busy",
        "cap",
        "due",
        "due_seq",
        "index",
        "jobs",
        "n",
        "rates",
        "t",
        "v",
    )

    def __init__(self, index: int, cap: float, rates: list[float] | None = None) -> None:
        self.index = index
        self.cap = cap  # units/s of the whole server (bandwidth); unused with rates
        self.rates = rates  # per job count: progress per second of each job (decode)
        self.v = 0.0
        self.t = 0.0
        self.n = 0
        self.jobs: list[tuple[float, int, int]] = []  # (finish v, sequence, owner)
        self.due = 0.0
        self.due_seq = 0  # 0: no completion posted (no job)
        self.anchor = 0  # the sequence of its entry in the event heap (0: none)
        self.anchor_t = 0.0
        self.busy = 0.0  # time with at least one job
        self.area = 0.0  # jobs x time (the time-averaged job count over a span: area / span)

    def rate(self) -> float:
        """Each job's progress per second at the current job count (n > 0)."""
        r, n = self.rates, self.n
        return self.cap / n if r is None else r[n] if n < len(r) else r[-1]

    def advance(self, now: float) -> None:
        dt = now - self.t
        n = self.n
        if n and dt > 0:
            # rate(), inline: this runs on every job's start and end.
            r = self.rates
            self.v += dt * (self.cap / n if r is None else r[n] if n < len(r) else r[-1])
            self.busy += dt
            self.area += dt * n
        self.t = now


@record
class LinkGroup:
    """Links of one side and phase with the same per-turn coefficients, simulated as one
    server per node (the least capacity of them): e.g. the SNIC and the storage client limit
    both carry a node's reads."""

    name: str
    side: str  # pe, de or storage
    phase: int
    coef: tuple[float, ...]  # per demand field, load per turn at x = 0
    dcoef: tuple[float, ...]  # per demand field, load per turn per unit x
    capacity: float  # per node
    queued: bool


def _unit_loads(sc: Scenario) -> dict[str, tuple[list[float], list[float]]]:
    """Per link, its per-turn load of one unit of each demand field at x = 0 and per unit x."""
    unit: dict[str, tuple[list[float], list[float]]] = {k.name: ([], []) for k in LINK_TABLE}
    for f in FIELDS:
        fields = {
            g: np.float64(1.0 if g == f else 0.0)
            for g in (*FIELDS, "prefill_flops", "generated_tokens")
        }
        cols = turn_load_columns(Demand(**fields), sc.options)
        for name, (a, b) in cols.items():
            unit[name][0].append(float(a))
            unit[name][1].append(float(b))
    return unit


def link_groups(
    sc: Scenario, mode: ModeName, capacity: dict[str, float], util: dict[str, float], th: float
) -> list[LinkGroup]:
    """The mode's I/O links as per-turn linear loads in the demand fields, grouped by side,
    whether they carry storage reads (phase A) and coefficients; the others carry phase B
    (hit and miss bytes) and phase C (the write-back's bytes)."""
    if MODE_TABLE[mode].io_free:
        return []
    unit = _unit_loads(sc)
    groups: dict[tuple[str, int, tuple[float, ...], tuple[float, ...]], LinkGroup] = {}
    for link in LINK_TABLE:
        if not link.io:
            continue
        coef, dcoef = tuple(unit[link.name][0]), tuple(unit[link.name][1])
        if not any(coef) and not any(dcoef):
            continue
        cap = float(capacity[link.name])
        if not math.isfinite(cap):
            continue
        # A node's storage reads, or the storage cluster's (its outward direction).
        reads = link.read_phase
        # Not a read: its hit and miss bytes move in phase B, its write-back bytes in phase C,
        # on the same servers (the engine splits the coefficients).
        phase = READ if reads else MOVE
        key = (link.side, phase, coef, dcoef)
        queued = reads or util.get(link.name, 0.0) >= th
        old = groups.get(key)
        if old is None:
            groups[key] = LinkGroup(link.name, link.side, phase, coef, dcoef, cap, queued)
        else:
            groups[key] = replace(
                old,
                name=f"{old.name}+{link.name}",
                capacity=min(old.capacity, cap),
                queued=old.queued or queued,
            )
    return list(groups.values())


# Per phase, a queued route: the side, the servers per node and the coefficients at x = 0 and
# x = 1; a fixed one: the crossing time per unit of each demand field at x = 0 and x = 1.
QueuedRoute = tuple[str, list[int], tuple[float, ...], tuple[float, ...]]
FixedRoute = tuple[tuple[float, ...], tuple[float, ...]]

# Which demand fields each phase moves on a link that is not a read: B the hit and miss bytes,
# C the write-back's (generated and appended KV).
_MOVED = {
    READ: (1.0, 1.0, 1.0, 1.0),
    MOVE: (1.0, 1.0, 0.0, 0.0),
    WRITE: (0.0, 0.0, 1.0, 1.0),
}


@record
class Routes:
    """Per phase (READ, MOVE, WRITE), the queued link groups a turn's bytes wait on and the
    others' crossing times."""

    queued: tuple[list[QueuedRoute], ...]
    fixed: tuple[list[FixedRoute], ...]

    @classmethod
    def of(cls, groups: list[LinkGroup], group_servers: list[list[int]]) -> Routes:
        queued: tuple[list[QueuedRoute], ...] = ([], [], [])
        fixed: tuple[list[FixedRoute], ...] = ([], [], [])
        for gi, gr in enumerate(groups):
            full0 = gr.coef
            full1 = tuple(a + b for a, b in zip(gr.coef, gr.dcoef, strict=True))
            for phase in (READ,) if gr.phase == READ else (MOVE, WRITE):
                keep = _MOVED[phase]
                c0 = tuple(c * k for c, k in zip(full0, keep, strict=True))
                c1 = tuple(c * k for c, k in zip(full1, keep, strict=True))
                if not any(c0) and not any(c1):
                    continue
                if gr.queued:
                    queued[phase].append((gr.side, group_servers[gi], c0, c1))
                else:
                    cap = gr.capacity
                    fixed[phase].append((tuple(c / cap for c in c0), tuple(c / cap for c in c1)))
        return cls(queued, fixed)
