"""The prefix-cache hit rate of a trace at every LRU capacity at once (``workload hitcurve``).

A trace is read as the ordered KV blocks of its requests (:class:`BlockCollector`). The cache
reuses prefixes as serving engines do (vLLM's and SGLang's prefix caches, Mooncake's store):
block j of a request hits only if it and every block before it in the request are cached, and
every block of a request is touched (moved to the most recently used end, or inserted), hit or
not. Since every block is touched whatever the capacity, the cache of capacity C after any
access holds exactly the C most recently used blocks, and a block is in it at its access iff its
LRU stack distance d (Mattson et al., "Evaluation techniques for storage hierarchies", IBM
Systems Journal 9(2), 1970: the number of distinct blocks accessed since its previous access,
itself included; infinite at a first access) is at most C. The prefix rule then makes block j
of a request hit iff m_j = max(d_1, ..., d_j) <= C (the running maximum along the request), so

    hit_blocks(C) = #{counted accesses with m <= C},
    hit_tokens(C) = sum of the tokens of those accesses,

one histogram of m for every capacity at once. (Checking a request's blocks before touching
any of them, as engines do, gives the same hits: blocks touched before block j of the request
are hits, which evict nothing, or follow a miss, after which nothing hits.)

Stack distances (:func:`stack_distances`) come from one pass: with p = prev(i) the previous
access of the block accessed at i, d_i = (i - p) - #{j < i : prev(j) > p} (the accesses in
between, less those re-accessing a block already counted in the window), and the count of
earlier larger values is computed for all i at once by a bit-by-bit partition in NumPy
(:func:`earlier_greater`, O(n log n)).
"""

from __future__ import annotations

import itertools
from array import array
from collections.abc import Sequence

import numpy as np

from dualpath_plan.frozen import record
from dualpath_plan.physics.traces import Turn

IntArray = np.ndarray  # int64 arrays (NumPy's typing of shapes adds nothing here)


def earlier_greater(values: np.ndarray) -> np.ndarray:
    """For every i, ``#{j < i : values[j] > values[i]}`` (non-negative integers below 2**31).

    Most significant bit first: the elements are kept ordered by (value >> (k + 1), position);
    at bit k an element whose bit is 0 is exceeded by every earlier element of its group whose
    bit is 1 (the pair first differs at bit k), and the groups are then split stably by bit k.
    Every level is a few O(n) NumPy passes."""
    n = int(values.size)
    counts = np.zeros(n, dtype=np.int64)
    if n == 0:
        return counts
    top = int(values.max()).bit_length()
    # value and original position packed into one word, moved together at every level
    key = (values.astype(np.int64) << 32) | np.arange(n, dtype=np.int64)
    pos = np.arange(n, dtype=np.int64)
    start = np.empty(n, dtype=bool)
    start[0] = True
    for k in range(top - 1, -1, -1):
        high = key >> (k + 33)
        bit = (key >> (k + 32)) & 1
        np.not_equal(high[1:], high[:-1], out=start[1:])
        starts = np.flatnonzero(start)
        sizes = np.diff(starts, append=n)
        ones = np.cumsum(bit)
        ones -= bit  # the ones before each element
        ones_before = ones - np.repeat(ones[starts], sizes)
        group_ones = np.repeat(np.add.reduceat(bit, starts), sizes)
        group_end = np.repeat(starts + sizes, sizes)
        zero = bit == 0
        counts += np.where(zero, ones_before, 0)
        # zeros keep their order at the front of the group, ones at its back
        new = np.where(zero, pos - ones_before, group_end - group_ones + ones_before)
        moved = np.empty_like(key)
        moved[new] = key
        key = moved
        moved_counts = np.empty_like(counts)
        moved_counts[new] = counts
        counts = moved_counts
    out = np.empty_like(counts)
    out[key & 0xFFFFFFFF] = counts
    return out


def stack_distances(keys: np.ndarray) -> np.ndarray:
    """The LRU stack distance of every access of ``keys`` (1 = the block accessed just
    before), 0 at a block's first access."""
    n = int(keys.size)
    if n >= 1 << 31:
        raise ValueError("at most 2**31 - 1 block accesses")
    prev = np.full(n, -1, dtype=np.int64)
    if n:
        order = np.argsort(keys, kind="stable")
        again = keys[order[1:]] == keys[order[:-1]]
        prev[order[1:][again]] = order[:-1][again]
    reuse = np.flatnonzero(prev >= 0)
    dist = np.zeros(n, dtype=np.int64)
    # first accesses (prev = -1) are never larger than a reuse's prev: left out of the count
    p = prev[reuse]
    dist[reuse] = (reuse - p) - earlier_greater(p)
    return dist


@record
class BlockTrace:
    """A trace as its block accesses in order: per access the block's key, its request, whether
    it counts (a prompt block; False for the response blocks a request without hashes also
    writes, see :class:`BlockCollector`) and the prompt tokens it adds to the request's hit."""

    keys: IntArray
    request: IntArray
    counted: np.ndarray  # bool
    tokens: IntArray
    requests: int
    input_tokens: int
    block_size: int


class BlockCollector:
    """The block accesses of a stream of :class:`Turn` s (:meth:`add`, then :meth:`trace`).

    Formats with hashes: a request's blocks are its hash ids in its hash scope. Formats without
    (csv, burstgpt): a session is one growing token sequence; block j of a request (tokens
    jB to (j+1)B - 1) is the block of the session's previous request when wholly within the
    tokens the two share (``Turn.shared_tokens``: the context the import counts as the hit,
    before the last-token cap) and a new block otherwise; after its prompt blocks the request
    touches the blocks of its response too (uncounted: the import's assumption is that the
    previous prompt and response are cached, so the response's KV is written as it is made).
    A partial last block is never shared, as engines cache only full blocks.

    Tokens: block j of a request with I prompt tokens adds min((j+1)B, I-1) - min(jB, I-1) to
    its hit, so a hit prefix of k blocks is min(kB, I - 1) tokens, the import's
    :func:`~dualpath_plan.physics.traces.cached_tokens` (the last prompt token is always
    computed)."""

    def __init__(self, block_size: int) -> None:
        self.block = block_size
        self.keys = array("q")
        self.request = array("q")
        self.counted = bytearray()
        self.tokens = array("q")
        self.requests = 0
        self.input_tokens = 0
        self._ids: dict[str, dict[int, int]] = {}
        self._fresh = itertools.count()
        self._stream: dict[str, list[int]] = {}  # a session's full blocks, hashless formats

    def add(self, turn: Turn) -> None:
        b = self.block
        inp = int(turn.input_tokens)
        cap = max(inp - 1, 0)
        if turn.hash_ids is not None:
            table = self._ids.setdefault(turn.scope, {})
            fresh = self._fresh
            keys = [
                table[h] if h in table else table.setdefault(h, next(fresh)) for h in turn.hash_ids
            ]
            prompt = len(keys)
        else:
            total = inp + int(turn.output_tokens)
            before = self._stream.get(turn.scope, [])
            shared = min(int(turn.shared_tokens or 0) // b, len(before))
            keys = before[:shared]
            keys += [next(self._fresh) for _ in range(-(-total // b) - shared)]
            self._stream[turn.scope] = keys[: total // b]
            prompt = -(-inp // b)
        n = len(keys)
        self.keys.extend(keys)
        self.request.extend(itertools.repeat(self.requests, n))
        self.counted.extend(b"\x01" * prompt + b"\x00" * (n - prompt))
        self.tokens.extend(min((j + 1) * b, cap) - min(j * b, cap) for j in range(prompt))
        self.tokens.extend(itertools.repeat(0, n - prompt))
        self.requests += 1
        self.input_tokens += inp

    def trace(self) -> BlockTrace:
        return BlockTrace(
            keys=np.frombuffer(self.keys, dtype=np.int64),
            request=np.frombuffer(self.request, dtype=np.int64),
            counted=np.frombuffer(self.counted, dtype=np.uint8).astype(bool),
            tokens=np.frombuffer(self.tokens, dtype=np.int64),
            requests=self.requests,
            input_tokens=self.input_tokens,
            block_size=self.block,
        )


@record
class TierShare:
    """One tier of an ordered list (HBM, host DRAM, SSD, ...), the tiers together one LRU stack:
    tier k holds the blocks at stack distances S_(k-1) + 1 to S_k, S_k = C_1 + ... + C_k, so the
    first k tiers hold the top S_k of the stack as one cache of S_k blocks would."""

    name: str
    capacity_blocks: int
    cumulative_blocks: int  # S_k
    served_blocks: int  # the prompt blocks that hit (with all tiers) and were found in this tier
    served_tokens: int
    hit_blocks_through: int  # hit_blocks(S_k): the hits with this tier and those above it only
    hit_tokens_through: int


@record
class HitCurve:
    """Hits against LRU capacity (in blocks) of a trace, exact at every capacity: a step
    function whose steps are at ``capacity`` (ascending, starting at 0): at a capacity c,
    ``hit_blocks[i]`` and ``hit_tokens[i]`` with i the last step at or below c."""

    block_size: int
    requests: int
    accesses: int  # prompt blocks, the denominator of the block hit rate
    touched: int  # every block access, response blocks written by hashless formats included
    distinct: int  # distinct blocks: at or above this capacity nothing is ever evicted
    input_tokens: int  # prompt tokens, the denominator of the token hit rate
    capacity: IntArray
    hit_blocks: IntArray
    hit_tokens: IntArray
    tiers: tuple[TierShare, ...]

    def _index(self, capacities: Sequence[int] | np.ndarray) -> np.ndarray:
        return np.searchsorted(self.capacity, np.asarray(capacities, dtype=np.int64), "right") - 1

    def blocks_at(self, capacities: Sequence[int] | np.ndarray) -> IntArray:
        return self.hit_blocks[self._index(capacities)]

    def tokens_at(self, capacities: Sequence[int] | np.ndarray) -> IntArray:
        return self.hit_tokens[self._index(capacities)]


def hit_curve(trace: BlockTrace, tiers: Sequence[tuple[str, int]] = ()) -> HitCurve:
    """The exact LRU prefix-cache hit curve of ``trace`` (see the module's equations), and
    with ``tiers`` (names and capacities in blocks, top first) the hits each serves."""
    dist = stack_distances(trace.keys)
    distinct = int(np.count_nonzero(dist == 0))
    never = distinct + 1  # a first access: a miss at every capacity
    dist[dist == 0] = never
    # the running maximum within each request: requests are in order, so offsetting each by
    # its index times a bound above every distance turns it into one running maximum
    span = never + 1
    offset = trace.request * span
    running = np.maximum.accumulate(dist + offset) - offset
    counted = trace.counted
    m = running[counted]
    tokens = trace.tokens[counted]
    by_blocks = np.bincount(m, minlength=span)
    by_tokens = np.bincount(m, weights=tokens, minlength=span)
    steps = np.flatnonzero(by_blocks[:never])
    capacity = np.concatenate(([0], steps[steps > 0])).astype(np.int64)
    blocks_cum = np.cumsum(by_blocks)
    tokens_cum = np.rint(np.cumsum(by_tokens)).astype(np.int64)
    shares: list[TierShare] = []
    if tiers:
        bounds = np.cumsum([c for _, c in tiers]).astype(np.int64)
        hit = (m <= bounds[-1]) & (m < never)
        # the tier a hit block is found in is set by its own distance, not the running maximum
        where = np.searchsorted(bounds, dist[counted][hit], side="left")
        served = np.bincount(where, minlength=len(tiers))
        served_tokens = np.bincount(where, weights=tokens[hit], minlength=len(tiers))
        for k, (name, cap) in enumerate(tiers):
            s = int(min(bounds[k], never - 1))
            shares.append(
                TierShare(
                    name=name,
                    capacity_blocks=int(cap),
                    cumulative_blocks=int(bounds[k]),
                    served_blocks=int(served[k]),
                    served_tokens=round(float(served_tokens[k])),
                    hit_blocks_through=int(blocks_cum[s]),
                    hit_tokens_through=int(tokens_cum[s]),
                )
            )
    return HitCurve(
        block_size=trace.block_size,
        requests=trace.requests,
        accesses=int(np.count_nonzero(counted)),
        touched=int(trace.keys.size),
        distinct=distinct,
        input_tokens=trace.input_tokens,
        capacity=capacity,
        hit_blocks=blocks_cum[capacity],
        hit_tokens=tokens_cum[capacity],
        tiers=tuple(shares),
    )
