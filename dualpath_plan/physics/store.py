"""A KV store of finite size (issue 32; docs/model.md section 12): the share of the cached
prefix KV that is resident at a capacity, and a turn's demand when the rest is recomputed.

Every turn of a workload re-reads its cached context c (hit bytes H = KV(c)). A store of
capacity C below the KV working set W keeps only part of it: a share r(C) of the cached KV is
resident (read as before), the rest is computed again by prefill. Per turn, with r:

    H'  = r H                              (read from the store)
    Mi' = Mi + (1 - r) H                   (KV the prefill computes, moved P -> D)
    Aw' = Aw + (1 - r) H                   (written back: an LRU store admits every block
                                            it serves, hit or not, as physics/hitcurve.py's)
    F'  = r F(c, a) + (1 - r) F(0, c + a)  (the whole prompt prefilled where it missed)
    a'  = a + (1 - r) c                    (tokens prefilled)

a share r of turns finding their whole context resident and 1 - r none of it (whole agent
contexts, as the profile model below keeps them); the context c and the decode side do not
change. r = 1 returns the demand itself, so a store at or above the working set changes no
number.

Where r comes from (:class:`StoreFit`):
- a trace (a workload with ``trace_file``): its exact LRU hit curve (physics/hitcurve.py, the
  rows' sessions as growing prefixes of 16-token blocks), r(C) = hit tokens at C over hit
  tokens in an infinite cache; W = the smallest capacity at which the curve reaches its top.
- a profile (its means): the store keeps whole agent contexts, A agents live (``--agents``),
  each holding on average half a trajectory's tokens (context grows from nothing to its
  total; serving.kv_working_set_gbyte's per-agent term), W = A x KV(total / 2); under the
  independent reference model with every live agent equally likely to run the next turn, an
  LRU store of C < W blocks holds each agent's context with probability C / W (King, 1971:
  LRU's hit ratio under uniform reference probabilities is the fraction of items it holds),
  so r = min(1, C / W).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dualpath_plan.errors import PlanInputError
from dualpath_plan.frozen import record
from dualpath_plan.physics import model as phys
from dualpath_plan.physics.workload import TurnDemand, trajectory_tokens
from dualpath_plan.profiles.schemas import ModelProfile, WorkloadProfile

# Blocks of a trace's rows, in tokens: vLLM's default KV block (docs.vllm.ai, CacheConfig
# block_size = 16), as workload hitcurve's default for traces without hashes.
TRACE_BLOCK_TOKENS = 16


@record
class StoreFit:
    """The store's capacity against the workload's KV working set, and the resident share r
    of the cached KV at that capacity (module docstring)."""

    capacity_bytes: float
    working_set_bytes: float
    resident: float
    basis: str  # where r comes from, as a report says it
    hit_rate_full: float  # the workload's hit rate in an infinite store
    hit_rate: float  # at this capacity
    agents: int = 0  # the live agents a workload profile's working set is fitted to

    @property
    def beyond(self) -> bool:
        """The working set exceeds the capacity (some cached context is recomputed)."""
        return self.working_set_bytes > self.capacity_bytes


def uniform_resident(capacity_bytes: float, working_set_bytes: float) -> float:
    """The profile model's r = min(1, C / W) (module docstring)."""
    if working_set_bytes <= capacity_bytes:
        return 1.0
    return capacity_bytes / working_set_bytes


def trace_resident(
    model: ModelProfile, d: TurnDemand, capacity_bytes: float
) -> tuple[float, float] | None:
    """(r, W in bytes) from the exact LRU hit curve of a trace's rows, each trajectory one
    growing token sequence of ``TRACE_BLOCK_TOKENS``-token blocks; None when the rows share no
    block (one-turn sessions whose hits the trace measured against other sessions' blocks,
    which the rows do not keep: the caller then uses the profile model)."""
    # The trace machinery is imported here, where a store of finite size meets a trace: every
    # other run (no --storage-capacity) does not load it.
    from dualpath_plan.physics.hitcurve import BlockCollector, hit_curve
    from dualpath_plan.physics.traces import Turn

    collector = BlockCollector(TRACE_BLOCK_TOKENS)
    cached = d.context_tokens - d.append_tokens
    for i in range(cached.size):
        session = str(int(d.trajectory[i])) if d.trajectory.size else str(i)
        collector.add(
            Turn(
                session=session,
                input_tokens=float(d.context_tokens[i]),
                output_tokens=float(d.generated_tokens[i]),
                hit_tokens=float(cached[i]),
                scope=session,
                shared_tokens=float(cached[i]),
            )
        )
    curve = hit_curve(collector.trace())
    top = int(curve.hit_tokens[-1])
    if top <= 0:
        return None
    block_bytes = phys.kv_bytes_per_token(model) * TRACE_BLOCK_TOKENS
    blocks = int(min(capacity_bytes // block_bytes, float(1 << 62)))
    resident = float(curve.tokens_at([blocks])[0]) / top
    working_set = float(curve.capacity[-1]) * block_bytes
    return resident, working_set


def fit_store(
    model: ModelProfile,
    workload: WorkloadProfile,
    d: TurnDemand,
    capacity_bytes: float,
    agents: int,
) -> StoreFit:
    """The resident share at ``capacity_bytes`` (module docstring): a trace's hit curve, else
    the profile model over ``agents`` live agents."""
    if workload.is_abstract:
        raise PlanInputError(
            "a store's capacity needs the workload's tokens and a model's KV and FLOPs; an "
            "abstract workload (gb_per_pflop) has no prefix to recompute",
            source=f"workload '{workload.id}'",
            field="gb_per_pflop",
        )
    fitted = trace_resident(model, d, capacity_bytes) if workload.trace_file else None
    if fitted is not None:
        resident, working_set = fitted
        basis = (
            f"the trace's LRU hit curve ({TRACE_BLOCK_TOKENS}-token blocks of each trajectory's "
            "growing prefix)"
        )
    else:
        per_agent = trajectory_tokens(workload, d) / 2.0 * phys.kv_bytes_per_token(model)
        working_set = agents * per_agent
        resident = uniform_resident(capacity_bytes, working_set)
        basis = (
            f"whole agent contexts: {agents:,} live agents (--agents) x half a trajectory's KV, "
            "each resident with probability capacity / working set"
            + ("; the trace's rows share no block" if workload.trace_file else "")
        )
    at = demand_at_capacity(model, d, resident)
    return StoreFit(
        capacity_bytes=capacity_bytes,
        working_set_bytes=working_set,
        resident=resident,
        basis=basis,
        hit_rate_full=d.hit_rate,
        hit_rate=at.hit_rate,
        agents=agents,
    )


def demand_at_capacity(model: ModelProfile, d: TurnDemand, resident: float) -> TurnDemand:
    """The turns' demand with a share ``resident`` of their cached KV in the store, all of it
    read, and the rest recomputed (module docstring); ``resident`` >= 1: ``d`` itself."""
    return demand_reading(model, d, resident, resident)


def demand_reading(model: ModelProfile, d: TurnDemand, resident: float, read: float) -> TurnDemand:
    """The turns' demand with a share ``resident`` of their cached KV in the store of which
    they read a share ``read`` (at most ``resident``) and recompute the rest (module
    docstring): the recomputed KV is moved P -> D and prefilled as a miss's, but written back
    only where it was not resident (a block the store holds is not written again).
    ``resident`` and ``read`` >= 1: ``d`` itself."""
    if resident >= 1.0 and read >= 1.0:
        return d
    r, s = float(resident), float(min(read, resident))
    unread, written = 1.0 - s, 1.0 - r
    cached_tokens = d.context_tokens - d.append_tokens
    full = phys.prefill_flops(model, np.zeros_like(cached_tokens), d.context_tokens)
    return replace(
        d,
        hit_bytes=s * d.hit_bytes,
        miss_bytes=d.miss_bytes + unread * d.hit_bytes,
        append_writeback_bytes=d.append_writeback_bytes + written * d.hit_bytes,
        prefill_flops=s * d.prefill_flops + unread * full,
        append_tokens=d.append_tokens + unread * cached_tokens,
    )
