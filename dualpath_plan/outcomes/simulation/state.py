"""The simulated cluster's state, in typed objects: the agents' turns in flight, the prefill
GPUs, the decode nodes, the nodes' storage reads (what a scheduler reads), the working set
and the tallies. Per-unit values are Python lists: the event loop reads and writes one element
at a time, where a list is several times faster than a NumPy array."""

from __future__ import annotations

import math
import random
from collections import deque
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from dualpath_plan.outcomes.simulation.stats import Histogram


@dataclass(slots=True)
class Agents:
    """Per agent: its run (turns, arrival, the trajectory it replays) and the one turn it has
    in flight at most (its index, kind, engines, read side and progress)."""

    n_turns: list[int]
    start: list[float]
    trajectory: list[int]
    turn_k: list[int]
    kind: list[int]
    pe_gpu: list[int]
    de_node: list[int]
    on_de: list[bool]
    pending: list[int]  # jobs left in the current phase
    t_start: list[float]
    t_prefilled: list[float]
    moving: list[bool]  # phase B started (with the turn's first pass)
    remaining_u: list[float]  # compute left (chunked prefill)
    end: list[float]

    @classmethod
    def new(cls, counts: np.ndarray, arrivals: np.ndarray, replayed: np.ndarray) -> Agents:
        n = int(arrivals.size)
        return cls(
            n_turns=counts.tolist(),
            start=arrivals.tolist(),
            trajectory=replayed.tolist(),
            turn_k=[0] * n,
            kind=[0] * n,
            pe_gpu=[0] * n,
            de_node=[0] * n,
            on_de=[False] * n,
            pending=[0] * n,
            t_start=[0.0] * n,
            t_prefilled=[0.0] * n,
            moving=[False] * n,
            remaining_u=[0.0] * n,
            end=[math.nan] * n,
        )


@dataclass(slots=True)
class PrefillGpus:
    """Per prefill GPU: its unfinished tokens, its turns ready for a pass, the pass running;
    per prefill node, its least-loaded GPU among those not over beta (the paper's PE choice)."""

    per_node: int
    beta: float  # tokens: the paper's overload threshold
    beta_waiting: bool  # beta tests the tokens waiting for a pass (else every unfinished one)
    tokens: list[float]  # unfinished: assigned, prefill not done (the load order)
    waiting: list[float]  # of those, not yet in a pass (the overload test, beta)
    # How many turns each count holds: a count back at 0 is reset to exactly 0, so the
    # rounding residue of adding and removing tokens never breaks a tie.
    count: list[int]
    wait_count: list[int]
    ready: list[deque[int]]
    busy: list[bool]
    batch: list[list[int]]
    busy_time: list[float]  # passes ended, cumulative
    pass_start: list[float]  # of the running pass
    node: list[int]
    node_min_tok: list[float]
    node_min_gpu: list[int]
    beta_load: list[float] = field(default_factory=list)  # waiting or tokens, as beta tests

    def __post_init__(self) -> None:
        self.beta_load = self.waiting if self.beta_waiting else self.tokens

    @classmethod
    def new(cls, P: int, per_node: int, beta: float, beta_waiting: bool) -> PrefillGpus:
        G = P * per_node
        return cls(
            per_node=per_node,
            beta=beta,
            beta_waiting=beta_waiting,
            tokens=[0.0] * G,
            waiting=[0.0] * G,
            count=[0] * G,
            wait_count=[0] * G,
            ready=[deque() for _ in range(G)],
            busy=[False] * G,
            batch=[[] for _ in range(G)],
            busy_time=[0.0] * G,
            pass_start=[0.0] * G,
            node=[g // per_node for g in range(G)],
            node_min_tok=[0.0] * P,
            node_min_gpu=[n * per_node for n in range(P)],
        )

    def refresh_node(self, node: int) -> None:
        """The node's GPU with the fewest unfinished tokens among those not overloaded (inf:
        every GPU of the node is)."""
        g_pn, beta, tokens, load = self.per_node, self.beta, self.tokens, self.beta_load
        best, best_tok = node * g_pn, math.inf
        for g in range(node * g_pn, node * g_pn + g_pn):
            if load[g] > beta:
                continue
            if tokens[g] < best_tok:
                best, best_tok = g, tokens[g]
        self.node_min_gpu[node] = best
        self.node_min_tok[node] = best_tok

    def book(self, g: int, tok: float) -> None:
        """A turn of ``tok`` prompt tokens is assigned to GPU ``g``."""
        self.tokens[g] += tok
        self.waiting[g] += tok
        self.count[g] += 1
        self.wait_count[g] += 1
        self.refresh_node(self.node[g])


@dataclass(slots=True)
class DecodeNodes:
    """Per decode node: the sequences assigned to it and their prompt tokens, those decoding
    (at most ``slots``) and those prefilled and waiting for a slot."""

    slots: int
    seq: list[int]
    tokens: list[float]
    active: list[int]
    queue: list[deque[int]]
    token_sum: float = 0.0
    seq_total: int = 0

    @classmethod
    def new(cls, D: int, slots: int) -> DecodeNodes:
        return cls(slots, [0] * D, [0.0] * D, [0] * D, [deque() for _ in range(D)])

    def book(self, e: int, tok: float) -> None:
        self.seq[e] += 1
        self.seq_total += 1
        self.tokens[e] += tok
        self.token_sum += tok

    def release(self, e: int, tok: float) -> None:
        """A sequence of ``tok`` prompt tokens is done on node ``e`` (counts back at 0 are
        reset to exactly 0)."""
        self.active[e] -= 1
        self.seq[e] -= 1
        self.tokens[e] -= tok
        self.token_sum -= tok
        self.seq_total -= 1
        if self.seq[e] == 0:
            self.tokens[e] = 0.0
        if self.seq_total == 0:
            self.token_sum = 0.0


@dataclass(slots=True)
class Reads:
    """Per node (P prefill nodes, then D decode nodes): bytes assigned and not yet read, how
    many reads, the node's read rate (its read links' least capacity), alpha (what it reads
    in 3 s) and its read server (None: its reads are not queued). A count back at 0 resets its
    queue to exactly 0: no rounding residue breaks the next tie."""

    queue: list[float]
    count: list[int]
    rate: list[float]
    alpha: list[float]
    server: list[int | None]


@dataclass(slots=True)
class Cluster:
    """What a scheduler decides from: node and GPU counts and the engines' and reads' state."""

    P: int
    D: int
    G: int
    gpus: PrefillGpus
    decode: DecodeNodes
    reads: Reads
    # Ties between equally loaded engines, broken at random from the run's seed (the paper
    # scheduler: which group fetches first decides them in the real system, not an index).
    ties: random.Random


@dataclass(slots=True)
class WorkingSet:
    """The live agents' contexts (each agent's latest turn's prompt KV): its value, its
    integral over the window so far, when it last changed or the window began, and its peak in
    the window (``hold`` keeps it at least the value)."""

    held: list[float]  # what each agent holds of it
    live: float = 0.0
    area: float = 0.0  # byte-seconds
    since: float = 0.0
    peak: float = 0.0

    def hold(self, now: float, a: int, kv: float) -> None:
        """Agent ``a`` now holds ``kv`` bytes of context (its turn's prompt; 0 when done)."""
        self.area += self.live * (now - self.since)
        self.since = now
        live = self.live + (kv - self.held[a])
        self.live = live
        self.held[a] = kv
        if live > self.peak:  # max(peak, live), without the call: every turn's start
            self.peak = live


@dataclass(slots=True)
class Tally:
    """The run's counts and latency histograms; online, turns count when they start within
    [warmup, duration]; offline, the span is from 10% (``tenth``) to 50% (``half``) of the
    turns done, and ``ttft_span`` holds the TTFT of the turns done in it (online the measured
    turns' ``ttft`` is already the span's)."""

    warmup: float
    duration: float
    tenth: int
    half: int
    ttft: Histogram
    ttft_span: Histogram
    tpot: Histogram
    wait: Histogram
    span_lo: float = math.nan
    span_hi: float = math.nan
    measured_starts: int = 0
    measured_done: int = 0
    done: int = 0
    in_flight: int = 0
    agents_alive: int = 0
    window_turns: int = 0
    de_read: float = 0.0
    all_read: float = 0.0


class Window(NamedTuple):
    """A window of the time series: its end, its length, turns done in it, turns in flight at
    its end, the KV working set's time average over it, per server its busy time, per GPU its
    busy time, per node its storage reads (bytes) in it, and the working set's peak in it."""

    end: float
    length: float
    turns: int
    in_flight: int
    kv_mean: float
    busy: list[float]
    gpu_busy: list[float]
    reads: list[float]
    kv_peak: float


@dataclass(slots=True)
class WindowLog:
    """The windows recorded so far and the cumulative values at the last one's end."""

    last_busy: list[float]
    last_gpu: list[float]
    last_end: float = 0.0
    rows: list[Window] = field(default_factory=list)
