"""Read or recompute: how much of the resident cache a mode reads (issue 32; docs/model.md
section 12, "Read or recompute"; INV-81).

A store of finite size holds a share r of the turns' cached KV. Reading every resident block
is what a serving engine does, and where a storage link binds with prefill compute to spare
it is not the fastest plan: recomputing part of the cached prefix moves load from the read
links to the GPUs. A smaller store recomputes more of its own accord, so with every resident
block read a smaller store could serve more turns than a larger one. The plan therefore
reads a share s <= r, chosen per cluster and mode so that throughput never rises as the
capacity falls:

    T(s)  the saturated throughput with a share s of the cached KV read and the rest
          recomputed (physics/store.py ``demand_reading``) in a store that holds every block,
          tabulated at the points ``READ_POINTS``: 0, and for j = 1 .. ``READ_STEPS`` both
          j / J - ``READ_NEAR`` and j / J. One table for every capacity: a smaller store's
          misses are also written back (a load on the write links that no choice changes),
          and that is applied to the share chosen, not to the choice;
    k     the last point of the table's leading run that never falls (T(p_0) <= ... <=
          T(p_k)); T being quasi-concave in s (every link's load per turn is affine in s and
          the prefill engine's capacity is monotone in it: tests/test_store.py checks the
          table on random scenarios), its peak lies at or beyond p_(k-1), so T does not fall
          on [0, p_(k-1)]: s_c = p_(k-1) (0 where k = 0);
    s     r where r <= s_c (T(r) is the best of [0, r]), else the table's best point at or
          below r (the largest share on a tie; throughputs within 1e-12 of each other tie,
          as a flat stretch where decode binds rounds).

T_plan(r) is T(r) on [0, s_c] and a running maximum of fixed points beyond it: it never
rises as r (the capacity) falls, and it is at least T at every table point the store
holds. Where reading everything is fastest (T rising up to s = 1) the plan reads every
resident block, as without the choice. Without a capacity nothing is chosen: every number is
today's (INV-80).
"""

from __future__ import annotations

import numpy as np

from dualpath_plan.memo import KeyedMemo
from dualpath_plan.physics.links import Num
from dualpath_plan.physics.modes import ModeName
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.assemble import SideMemo, assemble
from dualpath_plan.solvers.closed_form import solve

# The table's steps in s, and how far below each step its twin lies: the twin certifies that
# T still rises into the step, so a peak between two steps costs at most the twin's cell.
READ_STEPS = 32
READ_NEAR = 1e-6


def _points() -> np.ndarray:
    steps = np.arange(1, READ_STEPS + 1, dtype=np.float64) / READ_STEPS
    return np.concatenate([[0.0], np.column_stack([steps - READ_NEAR, steps]).reshape(-1)])


READ_POINTS = _points()


def read_table(sc: Scenario, mode: ModeName, prefill_nodes: Num, decode_nodes: Num) -> np.ndarray:
    """T at each of ``READ_POINTS`` (leading axis) per cluster (P and D broadcast) in a store
    that holds every cached block (what a smaller store writes back of its misses aside: the
    table is the same at every capacity, so the choices of two capacities are made on one
    table): the closed form's saturated throughput, NaN where the cluster does not run."""
    rows = []
    # The decode side reads of the turns their context and output alone, which no share
    # changes: built once, for every point.
    decode: SideMemo = {}
    for share in READ_POINTS:
        sides = dict(decode)
        reading = sc.reading(float(share), resident=1.0)
        asm = assemble(reading, mode, prefill_nodes, decode_nodes, sides)
        decode = {k: v for k, v in sides.items() if k[0] == "de"}
        t = np.asarray(solve(asm.links).throughput_turns_per_s, dtype=np.float64)
        rows.append(np.where(asm.feasible, t, np.nan))
    return np.stack(np.broadcast_arrays(*rows))


def choose_reads(table: np.ndarray, resident: float) -> np.ndarray:
    """The share of the cached context each cluster reads, from its ``read_table`` (module
    docstring)."""
    t = np.where(np.isfinite(table), table, -np.inf)
    count = t.shape[0]
    points = READ_POINTS.reshape((count,) + (1,) * (t.ndim - 1))
    # Within ``_TIE`` of each other two points tie: a flat stretch (decode binds) rounds to
    # neither a fall nor a rise, and a tie goes to the larger share.
    falls = t[1:] < t[:-1] * (1.0 - _TIE)
    last = np.where(falls.any(axis=0), falls.argmax(axis=0), count - 1)
    certified = READ_POINTS[np.maximum(last - 1, 0)]
    held = np.where(points <= resident, t, -np.inf)
    top = np.max(held, axis=0)
    near = held >= top * (1.0 - _TIE)
    best = count - 1 - np.argmax(near[::-1], axis=0)  # the largest share of the best
    found = top > -np.inf
    resident_itself = (resident <= certified) | ~found
    return np.where(resident_itself, resident, READ_POINTS[best])


# Throughputs this close (relative) are one: rounding, not a rise or a fall.
_TIE = 1e-12


# A scenario's choice per mode, by the scenario's identity: every outcome of one cluster
# (its mode core, its full outcome, its report) reads the same chosen scenario.
_CHOSEN: KeyedMemo[str, Scenario] = KeyedMemo(256)


def read_scenario(sc: Scenario, mode: ModeName) -> Scenario:
    """``sc`` reading what ``mode`` chooses on its cluster (module docstring); ``sc`` itself
    without a store, or where a share is chosen already."""
    if sc.store is None or sc.read_share is not None:
        return sc

    def choose() -> Scenario:
        assert sc.store is not None
        table = read_table(sc, mode, sc.prefill_nodes, sc.decode_nodes)
        return sc.reading(float(choose_reads(table, sc.store.resident)))

    return _CHOSEN.get((sc,), mode, choose, max_each=8)
