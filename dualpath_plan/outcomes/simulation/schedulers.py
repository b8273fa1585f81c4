"""The simulation's schedulers: what gives a turn its prefill GPU, its decode node and its read
path. Each is a class in ``SCHEDULERS`` under the name ``simulate --scheduler`` takes; the
engine books the choice (``state.PrefillGpus.book``, ``state.DecodeNodes.book``) and asks for
the read path only where the mode reads on either side and does not split reads at random
(``even``). A new scheduler: a class with ``engines`` and ``read_on_decode``, a name in
``SimScheduler`` and a row in ``SCHEDULERS`` (docs/extending.md)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from dualpath_plan.outcomes.simulation.state import Cluster

# The paper's scheduler (section 6) is queue-aware: the name the analytical model gives it.
SimScheduler = Literal["queue_aware", "round_robin", "least_loaded"]

# The paper's scheduler thresholds (section 6, A.4): alpha, beta and the compute quota of a
# forward pass live with the engines (physics/engines.py: the analytical model reads them too);
# the DE high-token margin 1.05.
HIGH_TOKEN_MARGIN = 1.05

_INF = math.inf


class Scheduler(Protocol):
    """Places one turn. ``engines``: its prefill GPU and decode node for ``tok`` prompt
    tokens, or None where every prefill engine is overloaded (the turn waits in the global
    FIFO and is offered again when a pass frees tokens); ``read_on_decode``: whether a turn on
    GPU ``g`` and decode node ``e`` reads its hit KV on the decode side."""

    def engines(self, tok: float) -> tuple[int, int] | None: ...

    def read_on_decode(self, g: int, e: int) -> bool: ...


class QueueAware:
    """The paper's scheduler (section 6). PE (Algorithm 1): per prefill node, its GPU with the
    fewest unfinished tokens among those not over beta; the node's read queue puts it in the
    low- or high-read category (alpha), the least-loaded low-read node first. DE: the nodes
    with room, not high-token, fewest sequences; else the high-token one with the fewest
    tokens. Read path: the side whose node has the shorter read queue in seconds of reads.
    Ties between equally loaded nodes (on either side) are broken at random from the run's
    seed (``Cluster.ties``): section 6 does not order them, and in the real system the group
    that fetches first takes the work; taking the lowest index instead sent a lightly loaded
    cluster's turns to prefill node 0 while it had an idle GPU, and every read to its SNIC
    (docs/model.md section 10)."""

    __slots__ = (
        "D",
        "P",
        "alpha",
        "c",
        "de_seq",
        "de_tokens",
        "node_min_gpu",
        "node_min_tok",
        "read_queue",
        "ties",
    )

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster
        # The state's lists, bound once (each is updated in place, never replaced): the
        # scheduler is asked on every turn's start.
        self.P, self.D = cluster.P, cluster.D
        self.node_min_tok, self.node_min_gpu = cluster.gpus.node_min_tok, cluster.gpus.node_min_gpu
        self.read_queue, self.alpha = cluster.reads.queue, cluster.reads.alpha
        self.de_seq, self.de_tokens = cluster.decode.seq, cluster.decode.tokens
        self.ties = cluster.ties

    def engines(self, tok: float) -> tuple[int, int] | None:
        node = self._prefill_node()
        if node < 0:
            return None
        # DE (section 6, phase 2, on one group): the nodes with room, not high-token, fewest
        # sequences; else the high-token one with the fewest tokens.
        d = self.c.decode
        e = -1
        # Where every node is full (most turns of a saturated run), no loop over the nodes:
        # the fewest tokens, the first such node (min's and index's order), both in C.
        if min(self.de_seq) < d.slots:
            e = self._decode_with_room(tok, d.token_sum, d.slots)
        if e < 0:
            de_tokens = self.de_tokens
            fewest = min(de_tokens)
            e = de_tokens.index(fewest)
            if de_tokens.count(fewest) > 1:
                e = self._one_of([i for i in range(e, self.D) if de_tokens[i] == fewest])
        return self.node_min_gpu[node], e

    def _one_of(self, tied: list[int]) -> int:
        """One of equally loaded nodes, at random (the class docstring)."""
        return tied[0] if len(tied) == 1 else tied[self.ties.randrange(len(tied))]

    def _prefill_node(self) -> int:
        """The least-loaded low-read node, else the least-loaded high-read one (its best GPU's
        unfinished tokens; -1: every GPU is over beta)."""
        node_min_tok, read_queue, alpha = self.node_min_tok, self.read_queue, self.alpha
        # The least-loaded node of all, the first such (in C): where it is low-read, no other
        # low-read node is less loaded, nor one as loaded before it (most turns).
        least = min(node_min_tok, default=_INF)
        if least == _INF:
            return -1
        node = node_min_tok.index(least)
        if read_queue[node] <= alpha[node] and node_min_tok.count(least) == 1:
            return node
        # Otherwise the categories' least loaded nodes, ties kept for _one_of (where the
        # first least-loaded node is low-read, the low category's are the nodes at `least`).
        low: list[int] = []
        high: list[int] = []
        low_tok = high_tok = _INF
        for node in range(self.P):
            gt = node_min_tok[node]
            if gt == _INF:
                continue
            if read_queue[node] <= alpha[node]:
                if gt < low_tok:
                    low, low_tok = [node], gt
                elif gt == low_tok:
                    low.append(node)
            elif gt < high_tok:
                high, high_tok = [node], gt
            elif gt == high_tok:
                high.append(node)
        return self._one_of(low or high)

    def _decode_with_room(self, tok: float, token_sum: float, slots: int) -> int:
        """Among the decode nodes with room: the one not high-token with the fewest sequences,
        else the high-token one with the fewest tokens (-1: none has room)."""
        D, de_seq, de_tokens = self.D, self.de_seq, self.de_tokens
        z = HIGH_TOKEN_MARGIN * (tok + token_sum) / D
        pick: list[int] = []
        alt: list[int] = []
        pick_seq, alt_tok = 1 << 60, _INF
        for e in range(D):
            seq = de_seq[e]
            if seq >= slots:
                continue
            te = de_tokens[e]
            if te + tok <= z:
                if seq < pick_seq:
                    pick, pick_seq = [e], seq
                elif seq == pick_seq:
                    pick.append(e)
            elif te < alt_tok:
                alt, alt_tok = [e], te
            elif te == alt_tok:
                alt.append(e)
        chosen = pick or alt
        return self._one_of(chosen) if chosen else -1

    def read_on_decode(self, g: int, e: int) -> bool:
        """The side whose node has the shorter read queue, in seconds of reads."""
        c = self.c
        read_queue, read_rate = c.reads.queue, c.reads.rate
        pn, dn = c.gpus.node[g], c.P + e
        return read_queue[dn] / read_rate[dn] < read_queue[pn] / read_rate[pn]


class RoundRobin:
    """Blind to every queue: prefill GPUs in turn, decode nodes in turn, the two read paths in
    turn (the paper's round-robin baseline, Figure 13: with P < D a PE node reads more than
    its share)."""

    __slots__ = ("D", "G", "de", "path", "pe")

    def __init__(self, cluster: Cluster) -> None:
        self.G, self.D = cluster.G, cluster.D
        self.pe = self.de = self.path = 0

    def engines(self, tok: float) -> tuple[int, int] | None:
        g = self.pe % self.G
        self.pe += 1
        e = self.de % self.D
        self.de += 1
        return g, e

    def read_on_decode(self, g: int, e: int) -> bool:
        side_de = self.path % 2 == 1
        self.path += 1
        return side_de


class LeastLoaded:
    """What a user would try first: every choice to the least-loaded unit, no thresholds. The
    prefill GPU with the fewest unfinished tokens (of all GPUs; a turn never waits in the
    global FIFO), the decode node with the fewest tokens among those with a free decode slot
    (of all nodes when none has one), the read on the side whose node has the shorter read
    queue in seconds of reads. Ties go to the lowest index, so at light load it hunts the
    first GPU's node; the analytical model `--compare` runs for it (queue_aware's) takes the
    reads as placed blind and at random (docs/model.md section 6), which this one's are not."""

    __slots__ = ("c",)

    def __init__(self, cluster: Cluster) -> None:
        self.c = cluster

    def engines(self, tok: float) -> tuple[int, int] | None:
        tokens = self.c.gpus.tokens
        g = min(range(self.c.G), key=tokens.__getitem__)
        d = self.c.decode
        free = [e for e in range(self.c.D) if d.seq[e] < d.slots]
        e = min(free or range(self.c.D), key=d.tokens.__getitem__)
        return g, e

    # The paper's read path: the shorter read queue in seconds of reads.
    read_on_decode = QueueAware.read_on_decode


# The registry: ``simulate --scheduler NAME`` runs SCHEDULERS[NAME](cluster).
SCHEDULERS: dict[str, Callable[[Cluster], Scheduler]] = {
    "queue_aware": QueueAware,
    "round_robin": RoundRobin,
    "least_loaded": LeastLoaded,
}
SIM_SCHEDULERS: tuple[str, ...] = tuple(SCHEDULERS)
