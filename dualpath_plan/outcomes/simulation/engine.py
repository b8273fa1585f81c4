"""The event loop: a binary heap of (time, sequence, kind, agent or unit, data) events, each
kind with a handler of its own (``Engine.HANDLERS``), and the handlers' steps of a turn."""

from __future__ import annotations

import math
import random
import time as wallclock
from bisect import bisect_right
from collections import deque
from collections.abc import Callable
from heapq import heappop, heappush
from itertools import count

import numpy as np

from dualpath_plan.errors import PlanInputError
from dualpath_plan.outcomes.serving import saturated_span_turns
from dualpath_plan.outcomes.simulation.config import STABLE_SHARE, SimConfig
from dualpath_plan.outcomes.simulation.kinds import Kinds, turn_kinds
from dualpath_plan.outcomes.simulation.links import (
    DECODE,
    MOVE,
    READ,
    WRITE,
    LinkGroup,
    Routes,
    Server,
)
from dualpath_plan.outcomes.simulation.results import (
    GroupServers,
    Outcome,
    SimResult,
    build_result,
)
from dualpath_plan.outcomes.simulation.schedulers import SCHEDULERS, SimScheduler
from dualpath_plan.outcomes.simulation.state import (
    Agents,
    Cluster,
    DecodeNodes,
    PrefillGpus,
    Reads,
    Tally,
    Window,
    WindowLog,
    WorkingSet,
)
from dualpath_plan.outcomes.simulation.stats import Histogram
from dualpath_plan.physics.engines import ALPHA_READ_S, BETA_COMPUTE_S, QUOTA_PER_LAYER_S
from dualpath_plan.physics.modes import MODE_TABLE
from dualpath_plan.scenario.assemble import Assembly
from dualpath_plan.scenario.bundle import Scenario

# Event kinds: the index of each one's handler in the loop's table.
TURN, SERVER, FORWARD, DELAY, AGENT, WINDOW = range(6)

# A phase's plan for one kind of turn and read side: per queued route its side (_PE, _DE or
# the storage cluster's), its servers per node and the load; and the fixed routes' delay.
_PE, _DE, _STORAGE = range(3)
_SIDES = {"pe": _PE, "de": _DE, "storage": _STORAGE}
_Plan = tuple[tuple[tuple[int, list[int], float], ...], float]

# A completed turn, as ``turn_sink`` receives it: agent, turn index, start, TTFT, TPOT, end,
# prefill GPU, decode node, read on the decode side, hit bytes, prompt tokens.
TurnRecord = tuple[int, int, float, float, float, float, int, int, bool, float, float]
TurnSink = Callable[[TurnRecord], None]
ProgressHook = Callable[[int, int], None]


class Engine:
    """One run. Every agent has at most one turn in flight, so the state of a turn in flight
    is kept per agent (``Agents``): memory grows with the agents and the kinds of turns, not
    with the turns simulated."""

    # Slots: the handlers read the engine's attributes tens of times a turn, and an instance
    # with this many in a dict reads each about half again as slowly.
    __slots__ = (
        "D",
        "G",
        "P",
        "agents",
        "alpha",
        "arrivals",
        "arrivals_end",
        "beta",
        "beta_freed",
        "cfg",
        "cluster",
        "counts",
        "decode",
        "decode_batch_max",
        "decode_server",
        "decode_slots",
        "draws",
        "dual",
        "engines",
        "even",
        "events",
        "gpus",
        "gpus_per_node",
        "group_servers",
        "groups",
        "growth",
        "hbm_free",
        "heap",
        "io_free",
        "kinds",
        "lifetime_s",
        "log",
        "mode",
        "next_seq",
        "now",
        "offered",
        "plans",
        "progress",
        "quota",
        "rank_gpus",
        "read_rate",
        "read_server",
        "reads",
        "routes",
        "sc",
        "scheduler",
        "scheduler_name",
        "servers",
        "split",
        "superseded",
        "superseded_last",
        "superseded_last_late",
        "superseded_late",
        "t0",
        "tally",
        "tool_s",
        "turn_sink",
        "turns_squared_mean",
        "waiting",
        "working",
        "writes_back",
    )

    def __init__(
        self,
        sc: Scenario,
        cfg: SimConfig,
        scheduler: SimScheduler,
        asm: Assembly,
        groups: list[LinkGroup],
        counts: np.ndarray,
        replayed: np.ndarray,
        arrivals: np.ndarray,
        lifetime_s: float,
        progress: ProgressHook | None,
        turn_sink: TurnSink | None,
    ) -> None:
        self.sc, self.cfg, self.scheduler_name = sc, cfg, scheduler
        self.mode = MODE_TABLE[cfg.mode]
        self.counts, self.arrivals = counts, arrivals
        self.tool_s = sc.workload.tool_latency_s
        self.growth = cfg.context_growth
        self.lifetime_s = lifetime_s  # the longest agent's at light load
        self.progress, self.turn_sink = progress, turn_sink
        self.P, self.D = sc.prefill_nodes, sc.decode_nodes
        # A prefill unit is a rank: the GPUs one request runs on (its tensor-parallel degree
        # under the operator model, ``PrefillEngine.request_gpus``), which prefill it together
        # in 1 / request_gpus of one GPU's time. Ranks that span nodes are not modelled: there
        # every GPU is its own unit, as before.
        pm = asm.pe.prefill
        assert pm is not None
        gpn = sc.prefill_node.gpus_per_node
        rank = round(float(np.asarray(pm.request_gpus)))
        self.rank_gpus = rank if 1 <= rank <= gpn and gpn % rank == 0 else 1
        self.gpus_per_node = gpn // self.rank_gpus
        self.G = self.P * self.gpus_per_node
        self.groups = groups
        self._build_servers(asm)
        self._build_prefill(asm)
        self.offered = (cfg.aps or 0.0) * sc.turn_demand.trajectory_turns.mean
        self.turns_squared_mean = (
            float(np.mean(counts.astype(np.float64) ** 2)) if counts.size else 0.0
        )
        # The even mode's share of reads on the DE side (the sides' read capacity).
        self.split = float(np.asarray(asm.links.even_share))
        self._build_state(counts, replayed, arrivals)

    def _build_servers(self, asm: Assembly) -> None:
        """One list of servers: per link group, one per node of its side (none if not
        queued), then the decode group's; and each node's read rate and read server."""
        P, D = self.P, self.D
        dg = asm.de.decode
        assert dg is not None
        self.servers: list[Server] = []
        self.group_servers: list[list[int]] = []
        for gr in self.groups:
            n = P if gr.side == "pe" else D if gr.side == "de" else 1
            ids = []
            for _ in range(n if gr.queued else 0):
                ids.append(len(self.servers))
                self.servers.append(Server(len(self.servers), gr.capacity))
            self.group_servers.append(ids)
        # Decode: one server for the group; each sequence advances 1 / step(n) tokens per s.
        top = max(int(dg.max_batch), 1)
        # The step table covers every batch the run can reach: each agent has at most one turn
        # in flight, so no more sequences decode at once than there are agents (a table as
        # large as the HBM's batch took gigabytes where a GPU was given a huge HBM).
        self.decode_batch_max = top
        reach = min(top, max(int(self.arrivals.size), 1))
        steps = np.asarray(dg.step_array_s(np.arange(1, reach + 1, dtype=np.float64)))
        # Indexed by the sequences decoding (entry 0 stands in for none: never read).
        rates = [1.0 / float(steps[0])] + [1.0 / float(x) for x in steps]
        self.decode_server = len(self.servers)
        self.servers.append(Server(self.decode_server, 0.0, rates))
        self.decode_slots = max(top // D, 1)  # sequences per decode node
        # Each node's storage reads (P nodes, then D): the rate of its read link group, and
        # its server (each of its jobs is the bytes of one read on that node; a side's read
        # links carry the same bytes, so they are one group: the SNIC and the storage's
        # per-client limit).
        self.read_rate = [math.inf] * (P + D)
        self.read_server: list[int | None] = [None] * (P + D)
        for gr, ids in zip(self.groups, self.group_servers, strict=True):
            if gr.phase == READ and gr.side in ("pe", "de"):
                base = 0 if gr.side == "pe" else P
                for node in range(P if gr.side == "pe" else D):
                    self.read_rate[base + node] = min(self.read_rate[base + node], gr.capacity)
                    if ids and self.read_server[base + node] is None:
                        self.read_server[base + node] = ids[node]
        self.routes = Routes.of(self.groups, self.group_servers)

    def _build_prefill(self, asm: Assembly) -> None:
        """The prefill engine's numbers: a turn's compute, t0, the HBM free for a pass, the
        compute quota, and the paper scheduler's alpha and beta."""
        sc, cfg = self.sc, self.cfg
        pm = asm.pe.prefill
        assert pm is not None
        # Prefill compute of a turn: its FLOPs at the engine's peak (t1 of the mean turn), and
        # without layer-wise prefill the KV copy serialized with it (copy_s of the mean turn).
        w = sc.turn_demand.weight
        mean_flops = float(np.sum(sc.turn_demand.prefill_flops * w))
        mean_hit = float(np.sum(sc.turn_demand.hit_bytes * w))
        t1 = float(np.asarray(pm.t1_s))  # one cluster: numbers
        # A rank computes a request in 1 / rank_gpus of one GPU's time, and holds its KV in
        # the HBM of its rank_gpus GPUs.
        peak = mean_flops / t1 * self.rank_gpus if t1 > 0 else math.inf
        copy_per_byte = pm.copy_s / mean_hit / self.rank_gpus if mean_hit > 0 else 0.0
        layers = sc.model.num_layers if self.mode.layerwise else 1
        self.kinds: Kinds = turn_kinds(
            sc, self.counts, peak, copy_per_byte, layers, cfg.context_growth
        )
        self.hbm_free = float(np.asarray(pm.free_hbm_bytes)) * self.rank_gpus
        self.t0 = float(np.asarray(pm.t0_s))
        self.quota = (
            cfg.prefill_quota_s
            if cfg.prefill_quota_s is not None
            else QUOTA_PER_LAYER_S * sc.model.num_layers
        )
        # beta: the tokens one GPU prefills in 5 s at its largest batch; alpha: the bytes a
        # node reads in 3 s (both "profiled in advance", paper A.4).
        mean_prompt = float(np.sum(sc.turn_demand.context_tokens * w))
        u_rank = pm.u_s / self.rank_gpus
        cap = float(np.asarray(pm.batch_cap)) * self.rank_gpus
        b = max(min(cap, (self.quota - self.t0) / u_rank), 1.0)
        self.beta = float(BETA_COMPUTE_S * b / (self.t0 + b * u_rank) * mean_prompt)
        self.alpha = [ALPHA_READ_S * r for r in self.read_rate]

    def _build_state(self, counts: np.ndarray, replayed: np.ndarray, arrivals: np.ndarray) -> None:
        """The run's mutable state, its scheduler and its event heap."""
        cfg, P, D = self.cfg, self.P, self.D
        self.agents = Agents.new(counts, arrivals, replayed)
        self.gpus = PrefillGpus.new(
            P, self.gpus_per_node, self.beta, not cfg.beta_counts_running_pass
        )
        self.decode = DecodeNodes.new(D, self.decode_slots)
        self.reads = Reads(
            [0.0] * (P + D), [0] * (P + D), self.read_rate, self.alpha, self.read_server
        )
        # The ties' stream is its own (a string seed), not another seed's turn draws (seed + 1).
        ties = random.Random(f"ties:{cfg.seed}")
        self.cluster = Cluster(P, D, self.G, self.gpus, self.decode, self.reads, ties)
        self.scheduler = SCHEDULERS[self.scheduler_name](self.cluster)
        self.engines = self.scheduler.engines  # bound once: asked on every turn's start
        total_turns = int(counts.sum())
        tenth, half = saturated_span_turns(total_turns)
        self.tally = Tally(
            warmup=cfg.warmup if cfg.online else 0.0,
            duration=cfg.duration if cfg.online else math.inf,
            tenth=tenth,
            half=half,
            ttft=Histogram(),
            ttft_span=Histogram(),
            tpot=Histogram(),
            wait=Histogram(),
        )
        self.working = WorkingSet([0.0] * int(arrivals.size))
        self.log = WindowLog([0.0] * len(self.servers), [0.0] * self.G)
        self.waiting: deque[int] = deque()  # the global FIFO of turns no PE can take
        self.beta_freed = False
        self.draws = random.Random(cfg.seed + 1)  # the even split's and a trace's turn draws
        self.dual = self.mode.split != "pe_only" and not self.mode.io_free
        self.even = self.mode.split == "even"
        self.io_free = self.mode.io_free
        # Whether a write-back puts jobs on any server (only queued routes do: nothing waits
        # on its crossing of the others), so that a turn without one skips the phase.
        self.writes_back = not self.io_free and bool(self.routes.queued[WRITE])
        self.heap: list[tuple[float, int, int, int, int]] = []
        # Each phase's plan per kind of turn and read side, made when first needed.
        self.plans: dict[int, _Plan] = {}
        self.next_seq = count(1).__next__  # ties in time go in the order events were posted
        self.now = 0.0
        self.events = 0
        # Superseded server completions (``reschedule``): how many and the last one's time, up
        # to the end of the arrivals online (the whole run offline) and after it.
        self.arrivals_end = self.tally.duration  # (online; offline inf)
        self.superseded = self.superseded_late = 0
        self.superseded_last = self.superseded_last_late = 0.0

    # --- the loop ----------------------------------------------------------------------------

    def post(self, t: float, what: int, a: int, b: int) -> None:
        heappush(self.heap, (t, self.next_seq(), what, a, b))

    def run(self) -> SimResult:
        """Post the arrivals and the first window, run the events, and measure."""
        for a, at in enumerate(self.agents.start):
            self.post(at, AGENT, a, 0)
        self.post(self.cfg.window_s, WINDOW, 0, 0)
        wall0 = wallclock.perf_counter()
        stable, last_event = self._loop()
        # The run ends at its last event (not at a window boundary); the window it ends in is
        # recorded for the part it covers.
        now = min(self.now, last_event) if stable else self.now
        rows = self.log.rows
        if not rows or rows[-1].end < now:
            self.record_window(now)
        return build_result(self._outcome(now, stable, wallclock.perf_counter() - wall0))

    def _loop(self) -> tuple[bool, float]:
        """Every event in time order, each to its kind's handler; whether the run was stable
        and when its last event (a window's aside) happened."""
        heap, tally = self.heap, self.tally
        handlers = (
            self.on_turn,
            self.on_server,
            self.on_forward,
            self.on_delay,
            self.on_agent,
            self.on_window,
        )
        duration = tally.duration
        horizon = duration
        last_event = 0.0
        events = self.events
        next_report = wallclock.perf_counter() + 0.25
        servers = self.servers
        while heap:
            now, seq, what, a, b = heappop(heap)
            if now > horizon:
                # Online, the arrivals are over: a queue that kept up drains (every measured
                # agent finishes), one that did not stops here.
                horizon = math.inf
                if not self._kept_up():
                    return self._stop(events, last_event)
            if what == SERVER:
                s = servers[a]
                if seq != s.anchor:
                    continue  # an anchor a sooner completion replaced: not an event
                s.anchor = 0
                if seq != s.due_seq:
                    self._repost(s)  # an anchor ahead of its server's completion
                    continue
                s.due_seq = 0  # the completion is this event
                last_event = now
            elif what != WINDOW:
                last_event = now
            events += 1
            self.now = now
            handlers[what](a, b)
            if self.beta_freed:
                # A pass took turns off some GPU's waiting tokens (at a pass's end or when an
                # idle GPU started one on a read just done): the global queue may go now.
                self.beta_freed = False
                if self.waiting:
                    self.retry_waiting()
            if events & 4095 == 0:
                next_report = self._checkpoint(events + self.superseded, next_report)
        if horizon < math.inf and self.superseded_late and not self._kept_up():
            # The arrivals' end passed among superseded completions only: the loop's check at
            # the first event after it, made at the last.
            return self._stop(events, last_event)
        self.events = events + self.superseded + self.superseded_late
        return True, max(last_event, self.superseded_last, self.superseded_last_late)

    def _stop(self, events: int, last_event: float) -> tuple[bool, float]:
        """The online run stops at the end of its arrivals (the queue did not keep up): the
        events up to then, superseded completions with them, and the last one's time."""
        self.now = self.tally.duration
        self.events = events + self.superseded
        return False, max(last_event, self.superseded_last)

    def _repost(self, s: Server) -> None:
        """Server ``s``'s anchor came out of the heap before its completion, which a change
        of its job count put later: the completion takes the anchor's place, at its own time
        and sequence (none: the server has no job left)."""
        if s.due_seq:
            s.anchor, s.anchor_t = s.due_seq, s.due
            heappush(self.heap, (s.due, s.due_seq, SERVER, s.index, 0))

    def _kept_up(self) -> bool:
        """Online, at the end of the arrivals: whether the turns started in the measured span
        kept up with those offered, within the arrivals' own variation (a compound Poisson
        count of turns: agents at APS x span, each its turns, standard deviation
        sqrt(APS x span x E[n^2]))."""
        cfg, tally = self.cfg, self.tally
        measured = tally.duration - tally.warmup
        offered = self.offered * measured
        spread = math.sqrt((cfg.aps or 0.0) * measured * self.turns_squared_mean)
        return tally.measured_starts >= min(STABLE_SHARE * offered, offered - 3.0 * spread)

    def _checkpoint(self, events: int, next_report: float) -> float:
        """Every 4,096 events: the progress report (every 0.25 s at most) and the bound on
        events."""
        if self.progress is not None:
            w = wallclock.perf_counter()
            if w >= next_report:
                next_report = w + 0.25
                self.progress(self.tally.done, int(self.counts.sum()))
        if events > self.cfg.max_events:
            raise PlanInputError(
                f"more than {self.cfg.max_events:,} events: shorten the run", field="--duration"
            )
        return next_report

    def _outcome(self, end: float, stable: bool, wall_s: float) -> Outcome:
        t = self.tally
        return Outcome(
            config=self.cfg,
            scheduler=self.scheduler_name,
            io_free=self.io_free,
            arrivals=self.arrivals,
            total_turns=int(self.counts.sum()),
            groups=tuple(
                GroupServers(gr.name, gr.capacity, tuple(ids))
                for gr, ids in zip(self.groups, self.group_servers, strict=True)
            ),
            n_servers=len(self.servers),
            gpus=self.G,
            nodes=self.P + self.D,
            offered=self.offered,
            lifetime_s=self.lifetime_s,
            decode_area=self.servers[self.decode_server].area,
            decode_batch_max=self.decode_batch_max,
            ttft=t.ttft.distribution(),
            ttft_span=t.ttft_span.distribution(),
            tpot=t.tpot.distribution(),
            decode_wait=t.wait.distribution(),
            measured_done=t.measured_done,
            span=(t.span_lo, t.span_hi),
            done=t.done,
            agent_end=np.asarray(self.agents.end, dtype=np.float64),
            windows=self.log.rows,
            events=self.events,
            wall_s=wall_s,
            end_s=end,
            de_read=t.de_read,
            all_read=t.all_read if not self.io_free else 0.0,
            stable=stable,
        )

    # --- event handlers ----------------------------------------------------------------------

    def on_agent(self, a: int, _: int) -> None:
        """An agent arrives: its first turn starts."""
        self.tally.agents_alive += 1
        self.start_turn(a)

    def on_turn(self, a: int, _: int) -> None:
        """The tool call after an agent's turn is over: its next turn starts."""
        self.start_turn(a)

    def on_server(self, index: int, _: int) -> None:
        """A server's next job completion (the loop drops one a change of its job count
        superseded)."""
        s = self.servers[index]
        now = self.now
        s.advance(now)
        jobs = s.jobs
        # Done: within rounding of the virtual time, or of the event's own time (a job a few
        # bytes short whose completion is less than half a step of ``now`` away would
        # otherwise fire again at the same instant, for ever).
        n, r = s.n, s.rates  # s.rate(), inline (the hot path)
        rate = s.cap / n if r is None else r[n] if n < len(r) else r[-1]
        v = s.v
        limit = v + max(1e-9 * (abs(v) + 1.0), 4.0 * math.ulp(now) * rate)
        finished = []
        while jobs and jobs[0][0] <= limit:
            finished.append(heappop(jobs)[2])
        s.n = n - len(finished)
        self.reschedule(s)
        pending = self.agents.pending
        for owner in finished:
            phase = owner & 3  # owner = agent x 4 + phase
            if phase == DECODE:
                self.decoded(owner >> 2)
            elif phase == READ:
                agent = owner >> 2
                pending[agent] -= 1
                if pending[agent] == 0:
                    self.read_done(agent)
            elif phase == MOVE:
                self.move_part_done(owner >> 2)
            # WRITE: nothing waits on the write-back

    def on_forward(self, g: int, _: int) -> None:
        """GPU ``g``'s forward pass ends: its turns' prefill compute is done."""
        gp = self.gpus
        gp.busy[g] = False
        gp.busy_time[g] += self.now - gp.pass_start[g]
        prompt, kind = self.kinds.prompt, self.agents.kind
        tokens, gcount = gp.tokens, gp.count
        for agent in gp.batch[g]:
            tokens[g] -= prompt[kind[agent]]
            gcount[g] -= 1
            self.move_part_done(agent)
        if gcount[g] == 0:
            tokens[g] = 0.0
        gp.batch[g] = []
        self.beta_freed = True  # (beta_counts_running_pass tests these tokens)
        if gp.ready[g]:
            self.start_pass(g)  # which refreshes the node's least-loaded GPU when it starts
        else:
            gp.refresh_node(gp.node[g])

    def on_delay(self, a: int, phase: int) -> None:
        """A transfer over links too lightly loaded to queue on has crossed them."""
        if phase == READ:
            pending = self.agents.pending
            pending[a] -= 1
            if pending[a] == 0:
                self.read_done(a)
        else:
            self.move_part_done(a)

    def on_window(self, _a: int, _b: int) -> None:
        """A window of the time series ends: record it and post the next one while the run
        goes on."""
        cfg, now, alive = self.cfg, self.now, self.tally.agents_alive
        if alive == 0 and not (cfg.online and now < cfg.duration):
            return  # past the last turn: the run's own end closes the last window
        self.record_window(now)
        if alive > 0 or (cfg.online and now < cfg.duration):
            self.post(now + cfg.window_s, WINDOW, 0, 0)

    # --- links -------------------------------------------------------------------------------

    def reschedule(self, s: Server) -> None:
        """Server ``s``'s job count changed: its next completion supersedes the one posted.

        A superseded completion is still an event (the count of events and the last event's
        time are as if it were popped and dropped), but it is not left on the heap: there,
        each server has one entry, its anchor, no later than its completion (time, then
        sequence), and an anchor that comes out before its completion posts the completion
        (``_repost``). Most changes put the completion later (one job more slows every
        job of a processor-sharing server) and push nothing: pushing each change's completion
        left more than half of the default's events on the heap only to be popped and dropped.
        """
        if s.due_seq:
            t = s.due
            if t <= self.arrivals_end:
                self.superseded += 1
                if t > self.superseded_last:
                    self.superseded_last = t
            else:  # online, after the arrivals: counted only if the run goes on (``_loop``)
                self.superseded_late += 1
                if t > self.superseded_last_late:
                    self.superseded_last_late = t
        n = s.n
        if n:
            r = s.rates  # s.rate(), inline (the hot path)
            dt = (s.jobs[0][0] - s.v) / (s.cap / n if r is None else r[n] if n < len(r) else r[-1])
            t = self.now + (dt if dt > 0 else 0.0)
            seq = self.next_seq()
            s.due, s.due_seq = t, seq
            # (t, seq) before the anchor's: seq is the later, so t before anchor_t.
            if not s.anchor or t < s.anchor_t:
                s.anchor, s.anchor_t = seq, t
                heappush(self.heap, (t, seq, SERVER, s.index, 0))
        else:
            s.due_seq = 0

    def add_job(self, index: int, size: float, owner: int) -> None:
        """A job of ``size`` joins server ``index`` (``Server.advance`` inline: this runs for
        every job, three per turn by default)."""
        s = self.servers[index]
        now = self.now
        n, r = s.n, s.rates
        dt = now - s.t
        if n and dt > 0:
            s.v += dt * (s.cap / n if r is None else r[n] if n < len(r) else r[-1])
            s.busy += dt
            s.area += dt * n
        s.t = now
        heappush(s.jobs, (s.v + size, self.next_seq(), owner))
        s.n = n + 1
        self.reschedule(s)

    def start_phase(self, a: int, phase: int) -> int:
        """Start the jobs of one phase of agent a's turn; how many it waits for."""
        ag = self.agents
        i, de = ag.kind[a], ag.on_de[a]
        key = i * 6 + (3 if de else 0) + phase
        plan = self.plans.get(key)
        if plan is None:
            plan = self.plans[key] = self._plan(i, de, phase)
        jobs, delay = plan
        if jobs:
            owner = a * 4 + phase
            add_job = self.add_job
            for side, ids, load in jobs:
                if side == _PE:
                    idx = ids[self.gpus.node[ag.pe_gpu[a]]]
                elif side == _DE:
                    idx = ids[ag.de_node[a]]
                else:
                    idx = ids[0]
                add_job(idx, load, owner)
        if delay > 0:
            heappush(self.heap, (self.now + delay, self.next_seq(), DELAY, a, phase))
            return len(jobs) + 1
        return len(jobs)

    def _plan(self, i: int, de: bool, phase: int) -> _Plan:
        """What one phase of a turn of kind ``i`` read on the decode side (``de``) or not puts
        on the links: per queued route its side, servers and load; and the longest crossing
        of the others (none for the write-back: nothing waits on it)."""
        k = self.kinds
        h, mi, ga, aw = k.hit[i], k.miss[i], k.gen_kv[i], k.writeback[i]
        jobs = []
        for side, ids, c0, c1 in self.routes.queued[phase]:
            c = c1 if de else c0
            load = c[0] * h + c[1] * mi + c[2] * ga + c[3] * aw
            if not load <= 0.0:  # (as a load of NaN would be)
                jobs.append((_SIDES[side], ids, load))
        delay = 0.0
        if phase != WRITE:
            for f0, f1 in self.routes.fixed[phase]:
                f = f1 if de else f0
                dt = f[0] * h + f[1] * mi + f[2] * ga + f[3] * aw
                if dt > delay:
                    delay = dt
        return tuple(jobs), delay

    # --- a turn's steps ----------------------------------------------------------------------

    def start_turn(self, a: int) -> None:
        """Agent a's next turn: its kind, then its engines and read (or the global FIFO)."""
        ag, kinds, tally, now = self.agents, self.kinds, self.tally, self.now
        k = ag.turn_k[a]
        if kinds.offset is not None:
            i = kinds.offset[ag.n_turns[a]] + (k if self.growth else 0)
        elif kinds.replay is not None:
            i = kinds.replay[ag.trajectory[a]][k]
        else:
            cumulative = kinds.cumulative
            assert cumulative is not None
            i = min(bisect_right(cumulative, self.draws.random()), len(cumulative) - 1)
        ag.kind[a] = i
        ag.t_start[a] = now
        ag.moving[a] = False
        ag.remaining_u[a] = kinds.u[i]
        if tally.warmup <= now <= tally.duration:
            tally.measured_starts += 1
        tally.in_flight += 1
        self.working.hold(now, a, kinds.kv_prompt[i])
        if self.waiting:
            # The global FIFO: behind the turns already in it. (They wait because every PE is
            # over beta, and whatever lowers a PE's load retries them first: the scheduler
            # would refuse this turn too. Asking it cost a fifth of the default's turns' time.)
            self.waiting.append(a)
        elif self.assign(a):
            self.begin_read(a)
        else:
            self.waiting.append(a)

    def retry_waiting(self) -> None:
        waiting, assign, begin_read = self.waiting, self.assign, self.begin_read
        while waiting:
            a = waiting[0]
            if not assign(a):
                return
            waiting.popleft()
            begin_read(a)

    def assign(self, a: int) -> bool:
        """Agent a's turn gets its prefill GPU, decode node and read path from the scheduler;
        False: every PE is overloaded (the turn waits in the global queue)."""
        ag, kinds = self.agents, self.kinds
        i = ag.kind[a]
        tok = kinds.prompt[i]
        picked = self.engines(tok)
        if picked is None:
            return False
        g, e = picked
        ag.pe_gpu[a], ag.de_node[a] = g, e
        self.gpus.book(g, tok)
        self.decode.book(e, tok)
        h = kinds.hit[i]
        side_de = False
        if self.dual and h > 0:
            if self.even:
                side_de = self.draws.random() < self.split
            else:
                side_de = self.scheduler.read_on_decode(g, e)
        ag.on_de[a] = side_de
        tally = self.tally
        tally.all_read += h
        if side_de:
            tally.de_read += h
        return True

    def begin_read(self, a: int) -> None:
        """Phase A: the turn's hit KV from storage into its reading node's DRAM (the node
        counts it in its read queue until it is read)."""
        if self.io_free:  # the oracle reads nothing
            self.read_done(a)
            return
        ag, reads = self.agents, self.reads
        node = (self.P + ag.de_node[a]) if ag.on_de[a] else self.gpus.node[ag.pe_gpu[a]]
        reads.queue[node] += self.kinds.hit[ag.kind[a]]
        reads.count[node] += 1
        n = self.start_phase(a, READ)
        ag.pending[a] = n
        if n == 0:
            self.read_done(a)

    def read_done(self, a: int) -> None:
        """Read: the turn leaves its node's read queue and joins its GPU's ready queue."""
        ag, gp = self.agents, self.gpus
        g = ag.pe_gpu[a]
        if not self.io_free:
            reads = self.reads
            node = (self.P + ag.de_node[a]) if ag.on_de[a] else gp.node[g]
            count = reads.count
            reads.queue[node] -= self.kinds.hit[ag.kind[a]]
            count[node] -= 1
            if count[node] == 0:
                reads.queue[node] = 0.0  # no rounding residue to break the next tie
        gp.ready[g].append(a)
        if not gp.busy[g]:
            self.start_pass(g)

    def begin_move(self, a: int) -> None:
        """Phase B starts with the turn's first pass; the pass itself is one more wait."""
        ag = self.agents
        ag.moving[a] = True
        ag.pending[a] = (0 if self.io_free else self.start_phase(a, MOVE)) + 1

    def start_pass(self, g: int) -> None:
        """GPU g's next forward pass: FIFO turns up to the HBM free for their KV and the
        compute quota, the turn that overflows the quota chunked."""
        gp, ag = self.gpus, self.agents
        ready = gp.ready[g]
        if not ready:
            return
        kind, remaining_u, moving = ag.kind, ag.remaining_u, ag.moving
        k_pass, k_prompt = self.kinds.kv_pass, self.kinds.prompt
        quota, hbm_free = self.quota, self.hbm_free
        batch: list[int] = []
        used_hbm = 0.0
        span = self.t0
        while ready:
            a = ready[0]
            u = remaining_u[a]
            need = k_pass[kind[a]]
            if batch and used_hbm + need > hbm_free:
                break
            if batch and span + u > quota:
                part = quota - span
                if part <= 0:
                    break
                # Chunked prefill: this pass computes part of the turn, the rest waits at the
                # head of the queue for the next one.
                remaining_u[a] = u - part
                span += part
                if not moving[a]:
                    self.begin_move(a)
                break
            ready.popleft()
            batch.append(a)
            used_hbm += need
            span += u
            remaining_u[a] = 0.0
            gp.waiting[g] -= k_prompt[kind[a]]
            gp.wait_count[g] -= 1
            if gp.wait_count[g] == 0:
                gp.waiting[g] = 0.0
            self.beta_freed = True  # the global queue may fit under beta now
            if not moving[a]:
                self.begin_move(a)
        gp.refresh_node(gp.node[g])
        gp.busy[g] = True
        gp.batch[g] = batch
        gp.pass_start[g] = self.now
        heappush(self.heap, (self.now + span, self.next_seq(), FORWARD, g, 0))

    def move_part_done(self, a: int) -> None:
        """One of phase B's waits (a link or the pass) is over; after the last, the turn is
        prefilled and decodes, or waits for a slot on its decode node."""
        pending = self.agents.pending
        left = pending[a] - 1
        pending[a] = left
        if left == 0:
            ag = self.agents
            ag.t_prefilled[a] = self.now
            e = ag.de_node[a]
            decode = self.decode
            if decode.active[e] < decode.slots:
                self.start_decode(a)
            else:
                decode.queue[e].append(a)

    def start_decode(self, a: int) -> None:
        ag, t = self.agents, self.tally
        if t.warmup <= ag.t_start[a] <= t.duration:
            t.wait.add(self.now - ag.t_prefilled[a])
        self.decode.active[ag.de_node[a]] += 1
        gen = self.kinds.generated[ag.kind[a]]
        self.add_job(self.decode_server, gen if gen > 0 else 1e-9, a * 4 + DECODE)

    def decoded(self, a: int) -> None:
        """Agent a's turn has its tokens: free its decode slot, count it (its latencies, the
        counts, its record for ``turn_sink``), write its KV back (phase C) and post its next
        turn after the tool call, or end the agent."""
        ag, t, k, now = self.agents, self.tally, self.kinds, self.now
        i = ag.kind[a]
        e = ag.de_node[a]
        decode = self.decode
        decode.release(e, k.prompt[i])
        queue = decode.queue[e]
        if queue:
            self.start_decode(queue.popleft())
        gen = k.generated[i]
        t_start, t_prefilled = ag.t_start[a], ag.t_prefilled[a]
        ttft = t_prefilled - t_start
        tpot = (now - t_prefilled) / gen if gen > 0 else 0.0
        if t.warmup <= t_start <= t.duration:
            t.ttft.add(ttft)
            t.tpot.add(tpot)
            t.measured_done += 1
        done = t.done + 1
        t.done = done
        if t.tenth < done <= t.half:
            t.ttft_span.add(ttft)  # offline, a turn of the saturated span (online unused)
        if done == t.tenth:
            t.span_lo = now
        if done == t.half:
            t.span_hi = now
        t.window_turns += 1
        t.in_flight -= 1
        turn_k = ag.turn_k[a]
        if self.turn_sink is not None:
            self.turn_sink(
                (a, turn_k, t_start, ttft, tpot, now, ag.pe_gpu[a], e, ag.on_de[a], k.hit[i],
                 k.prompt[i])
            )  # fmt: skip
        if self.writes_back:
            self.start_phase(a, WRITE)
        if turn_k + 1 < ag.n_turns[a]:
            ag.turn_k[a] = turn_k + 1
            heappush(self.heap, (now + self.tool_s, self.next_seq(), TURN, a, 0))
        else:
            ag.end[a] = now
            t.agents_alive -= 1
            self.working.hold(now, a, 0.0)  # the agent is done: its context leaves the set

    # --- the time series ---------------------------------------------------------------------

    def record_window(self, at: float) -> None:
        """The window ending at ``at``: its length, turns done, turns in flight, the KV
        working set, each server's busy time, each GPU's and each node's reads in it."""
        log, gp, ws, t = self.log, self.gpus, self.working, self.tally
        servers = self.servers
        for srv in servers:
            srv.advance(at)
        busy = [srv.busy - log.last_busy[j] for j, srv in enumerate(servers)]
        log.last_busy = [srv.busy for srv in servers]
        # Busy time up to now: passes ended and the running one so far.
        cum = [
            gp.busy_time[g] + (at - gp.pass_start[g] if gp.busy[g] else 0.0) for g in range(self.G)
        ]
        gb = [cum[g] - log.last_gpu[g] for g in range(self.G)]
        log.last_gpu = cum
        # The bytes each node's SNIC moved in the window, as they moved (not when each read
        # ended, which put a long read's bytes in one window): a processor-sharing server
        # moves its capacity whenever it holds a job, so capacity x busy time.
        rb = [0.0 if j is None else servers[j].cap * busy[j] for j in self.read_server]
        # The working set's time average over the window (a snapshot at its end depended on
        # the window: the last one, at the run's end, was always empty).
        ws.area += ws.live * (at - ws.since)
        length = at - log.last_end
        kv_mean = ws.area / length if length > 0 else ws.live
        log.rows.append(
            Window(at, length, t.window_turns, t.in_flight, kv_mean, busy, gb, rb, ws.peak)
        )
        ws.area, ws.since, ws.peak = 0.0, at, ws.live
        log.last_end = at
        t.window_turns = 0
