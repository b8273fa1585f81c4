"""The kinds of turn a run can see (a profile's mean turn, a growing context, a trace's rows)
and each agent's turn count."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dualpath_plan.frozen import record
from dualpath_plan.physics import model as phys
from dualpath_plan.physics.workload import TurnCounts, TurnDemand, TurnMix, turn_demand
from dualpath_plan.scenario.bundle import Scenario


@record
class Kinds:
    """The distinct contents a turn can have, and how a turn finds its own. A profile's turn
    k of an agent with n turns is kind ``offset[n] + k`` (its context grows over the agent's
    turns); a trace's turn is a row drawn by weight (``cumulative``). Memory is per kind, not
    per turn."""

    hit: list[float]  # bytes: the demand fields of links.FIELDS
    miss: list[float]
    gen_kv: list[float]
    writeback: list[float]
    u: list[float]  # prefill compute of the turn (s), with the serialized copy
    kv_pass: list[float]  # HBM the turn holds during its pass
    prompt: list[float]  # tokens
    generated: list[float]
    kv_prompt: list[float]  # bytes of the prompt's KV (the working set)
    offset: dict[int, int] | None
    cumulative: list[float] | None
    # A trace with trajectories: each trajectory's rows in turn order (an agent replays one).
    replay: list[list[int]] | None = None


def draw_turn_counts(counts: TurnCounts, n: int, rng: np.random.Generator) -> np.ndarray:
    """``n`` agents' turn counts from the workload's distribution, each at least 1."""
    u = rng.random(n)
    ends = np.cumsum(counts.length)
    s = np.asarray(counts.surviving, dtype=np.float64)
    top = float(s[-1]) if s.size else 1.0
    # S(k) is a step function with S = s[j] on segment j, then a linear ramp from top to 0.
    # Turns > k with probability S(k): the count is the end of the last segment with s >= u,
    # or inside the ramp where S(k) = u.
    if counts.ramp_turns > 0:
        base = float(ends[-1]) if ends.size else 0.0
        ramp = base + counts.ramp_turns * (1.0 - u / top)
    else:
        ramp = np.zeros(n)
    j = np.searchsorted(-s, -u, side="right") - 1  # last segment with s[j] >= u
    steps = np.where(j >= 0, ends[np.maximum(j, 0)] if ends.size else 0.0, 0.0)
    out = np.where((u < top) & (counts.ramp_turns > 0), ramp, steps)
    # Whole turns with the drawn mean kept: up with the probability of the fraction (rounding
    # up always would add half a turn per agent).
    whole = np.floor(out + rng.random(n))
    return np.maximum(whole, 1).astype(np.int64)


def turn_kinds(
    sc: Scenario,
    counts: np.ndarray,
    peak: float,
    copy_per_byte: float,
    layers: int,
    growth: bool,
) -> Kinds:
    """Every kind of turn the run can see, from the workload's own demand (physics/workload.py):
    its bytes per demand field (the link table's options apply in its coefficients), its
    prefill compute u = F / peak (+ the copy serialized with compute), what it holds in HBM
    during its pass (one of ``layers`` layers), and how a turn finds its kind."""
    d = sc.turn_demand
    rows = d.weight.size
    offset: dict[int, int] | None = None
    cumulative: list[float] | None = None
    replay: list[list[int]] | None = None
    profile = sc.workload.trace_file is None and rows == 1
    if profile and not growth:
        offset = {int(n): 0 for n in counts}  # every turn the profile's mean turn
    elif profile:
        # An agent's context grows over its turns: turn k of n caches 2 x mean x (k + 1/2)/n.
        offset, start, parts = {}, 0, []
        cached_mean = float(d.context_tokens[0] - d.append_tokens[0])
        for n in sorted({int(n) for n in counts}):
            offset[n] = start
            start += n
            parts.append(2.0 * cached_mean * (np.arange(n) + 0.5) / n)
        cached = np.concatenate(parts) if parts else np.zeros(0)
        d = _grown(sc, cached)
    elif replays(sc):
        order = np.argsort(d.trajectory, kind="stable")  # rows by trajectory, in order
        ends = np.cumsum(np.bincount(d.trajectory))
        replay = [part.tolist() for part in np.split(order, ends[:-1])]
    else:
        cumulative = np.cumsum(d.weight / d.weight.sum()).tolist()
    size = np.broadcast(d.hit_bytes, d.context_tokens, d.weight).size

    def col(v: np.ndarray) -> np.ndarray:
        return np.broadcast_to(np.asarray(v, dtype=np.float64), (size,))

    hit, flops, context = col(d.hit_bytes), col(d.prefill_flops), col(d.context_tokens)
    if sc.workload.is_abstract:
        kv_prompt = context * float(sc.workload.kv_bytes_per_token or 0.0)
    else:
        kv_prompt = col(phys.kv_bytes_for_context(sc.model, context))
    return Kinds(
        hit=hit.tolist(),
        miss=col(d.miss_bytes).tolist(),
        gen_kv=col(d.generated_kv_bytes).tolist(),
        writeback=col(d.append_writeback_bytes).tolist(),
        u=(flops / peak + hit * copy_per_byte).tolist(),
        kv_pass=(kv_prompt / layers).tolist(),
        prompt=context.tolist(),
        generated=col(d.generated_tokens).tolist(),
        kv_prompt=kv_prompt.tolist(),
        offset=offset,
        cumulative=cumulative,
        replay=replay,
    )


def _grown(sc: Scenario, cached: np.ndarray) -> TurnDemand:
    """The profile's turn with ``cached`` tokens each (its appended and generated tokens): a
    model's demand by the physics of ``turn_demand``, an abstract workload's scaled with the
    context (its hit bytes and FLOPs are proportional to it by definition)."""
    d = sc.turn_demand
    k = cached.size
    append = np.full(k, float(d.append_tokens[0]))
    generated = np.full(k, float(d.generated_tokens[0]))
    if not sc.workload.is_abstract:
        mix = TurnMix(cached, append, generated, np.full(k, 1.0 / max(k, 1)), d.trajectory_turns)
        return turn_demand(sc.model, mix)
    scale = cached / float(d.context_tokens[0] - d.append_tokens[0])
    return replace(
        d,
        hit_bytes=d.hit_bytes[0] * scale,
        prefill_flops=d.prefill_flops[0] * scale,
        context_tokens=cached + append,
        miss_bytes=np.full(k, float(d.miss_bytes[0])),
        generated_kv_bytes=np.full(k, float(d.generated_kv_bytes[0])),
        append_writeback_bytes=np.full(k, float(d.append_writeback_bytes[0])),
        generated_tokens=generated,
        append_tokens=append,
        weight=np.full(k, 1.0 / max(k, 1)),
    )


def replays(sc: Scenario) -> bool:
    """Whether the workload is a trace whose trajectories the agents replay turn by turn."""
    d = sc.turn_demand
    return d.trajectory.size > 0 and d.trajectory.size == d.weight.size
