"""What a simulation measured (``SimResult``) and how the event loop's tallies become it."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from dualpath_plan.frozen import record
from dualpath_plan.outcomes.serving import saturated_span_turns
from dualpath_plan.outcomes.simulation.schedulers import SimScheduler
from dualpath_plan.outcomes.simulation.stats import Distribution
from dualpath_plan.physics.modes import ModeName
from dualpath_plan.scenario.spec import ServingConfig

if TYPE_CHECKING:
    from dualpath_plan.outcomes.simulation.config import SimConfig
    from dualpath_plan.outcomes.simulation.state import Window


_NONE = np.zeros(0)  # no turns: a distribution of none


@record
class ServerSeries:
    """One simulated link kind: its name, how many servers (nodes), the capacity of each, and
    its busy share per window (busy time over window time, averaged over its servers). A busy
    share is not a utilization (load over capacity, docs/model.md "Metrics"): a link's server
    moves its full capacity whenever busy, so for a link the two agree, but a prefill GPU is
    busy running a pass of one request as much as a full batch."""

    name: str
    servers: int
    capacity: float  # per server, in the link's unit per second
    queued: bool  # simulated with processor sharing (else a fixed crossing time)
    busy_share: np.ndarray  # per window
    mean_busy_share: float  # over the measured span


@record
class SimResult:
    """What a simulation measured. Offline: the JCT of all agents and the throughput while the
    cluster is saturated (from 10% to 50% of all turns done); online: the throughput over the
    measured span. Latencies over the measured turns."""

    config: SimConfig
    scheduler: SimScheduler
    mode: ModeName
    turns: int
    agents: int
    events: int
    wall_s: float
    sim_time_s: float
    throughput_turns_per_s: float
    throughput_span_s: tuple[float, float]
    whole_run: bool  # offline: too few turns for the 10%-50% span, the throughput is the run's
    jct_s: float  # offline: all agents done; online: mean JCT of the agents measured
    agent_jct_s: Distribution  # per agent, of the agents that started after the warm-up
    # TTFT over every measured turn (offline the whole run, drain included) and over the
    # saturated span (offline the turns done from 10% to 50% of all, the throughput's span;
    # online the measured span, the same turns as ``ttft_s``; none where the run is too short
    # for a saturated span): docs/model.md, "Metrics"
    ttft_s: Distribution
    ttft_span_s: Distribution
    tpot_s: Distribution
    decode_path_fraction: float  # of the hit bytes read on the decode side
    reads: bool  # any KV read at all (none in the oracle)
    snic_max_over_avg: float  # mean over windows of max/avg storage reads across nodes
    prefill_max_over_avg: float  # the same over prefill GPUs' busy time
    window_s: float
    window_end_s: np.ndarray
    window_length_s: np.ndarray  # the last window may be shorter: the run ends in it
    turns_done: np.ndarray  # per window
    in_flight: np.ndarray  # turns in the cluster at each window's end
    # KV of the live agents' contexts (an agent's from its first turn to its last, tool
    # calls included: Little's law's agents in the system), each window's time average
    working_set_gbyte: np.ndarray
    # Over the measured span online (the whole run offline): the time average and the peak
    # (neither depends on --window beyond where the span's windows begin and end).
    working_set_mean_gbyte: float
    working_set_max_gbyte: float
    snic_bytes: np.ndarray  # [window, node]: storage reads per node (P nodes, then D)
    servers: tuple[ServerSeries, ...]
    unfinished: int  # online: agents still running at the end
    stable: bool  # online: the measured turn rate kept up with the offered one
    # Online: "stable", "unstable" (the turns fell behind the arrivals), "too_short" (the
    # measured span or the warm-up shorter than one lifetime of the longest agent at light
    # load: no steady state to measure) or "no_arrivals"; offline: "offline".
    status: str
    lifetime_s: float  # the longest agent's lifetime at light load
    decode_wait_s: Distribution  # prefilled to decoding (a node's decode slots all taken)
    decode_batch_mean: float  # sequences decoding, time-averaged over the run
    decode_batch_max: int  # the group's HBM-limited batch
    agents_measured: int  # online: agents arriving in the measured span (of them, agent_jct_s
    # counts those that finished); offline: every agent
    offered_turns_per_s: float  # online: APS x mean turns per agent


@record
class GroupServers:
    """A link group as the statistics see it: its name, capacity per server and servers."""

    name: str
    capacity: float
    ids: tuple[int, ...]


@record
class Outcome:
    """What the event loop leaves for the statistics, and the run's facts they need."""

    config: SimConfig
    scheduler: SimScheduler
    io_free: bool
    arrivals: np.ndarray
    total_turns: int
    groups: tuple[GroupServers, ...]
    n_servers: int
    gpus: int
    nodes: int
    offered: float
    lifetime_s: float
    decode_area: float  # sequences decoding x time, over the run
    decode_batch_max: int
    ttft: Distribution
    ttft_span: Distribution  # offline: the turns done in the saturated span
    tpot: Distribution
    decode_wait: Distribution
    measured_done: int
    span: tuple[float, float]  # offline: when 10% and 50% of the turns were done
    done: int
    agent_end: np.ndarray
    windows: list[Window]
    events: int
    wall_s: float
    end_s: float
    de_read: float
    all_read: float
    stable: bool


@record
class _Summary:
    """The run's headline numbers, online or offline."""

    span: tuple[float, float]
    throughput: float
    jct: float
    jct_agents: np.ndarray
    unfinished: int
    measured_agents: int
    saturated_span: bool
    status: str


def _online_summary(o: Outcome) -> _Summary:
    cfg = o.config
    lo, hi = cfg.warmup, cfg.duration
    throughput = o.measured_done / (hi - lo)
    agents_in = (o.arrivals >= lo) & (o.arrivals <= hi) & np.isfinite(o.agent_end)
    jct_agents = (o.agent_end - o.arrivals)[agents_in]
    jct = float(jct_agents.mean()) if jct_agents.size else math.nan
    unfinished = int(np.count_nonzero(~np.isfinite(o.agent_end)))
    measured_agents = int(np.count_nonzero((o.arrivals >= lo) & (o.arrivals <= hi)))
    life = o.lifetime_s
    if o.arrivals.size == 0:
        status = "no_arrivals"
    elif lo < life or hi - lo < life:
        status = "too_short"
    else:
        status = "stable" if o.stable else "unstable"
    return _Summary(
        (lo, hi), throughput, jct, jct_agents, unfinished, measured_agents, False, status
    )


def _offline_summary(o: Outcome) -> _Summary:
    # Offline: the throughput while the cluster is saturated, from 10% to 50% of all turns
    # done (most agents still run; the drain after is the stragglers').
    total = o.total_turns
    lo_i, hi_i = saturated_span_turns(total)
    saturated_span = total >= 20 and o.span[1] > o.span[0]
    if saturated_span:
        span = o.span
        throughput = (hi_i - lo_i) / (span[1] - span[0])
    else:  # too few turns for a span: the whole run
        span = (0.0, o.end_s)
        throughput = o.done / o.end_s if o.end_s > 0 else 0.0
    jct = float(np.max(o.agent_end)) if o.agent_end.size else 0.0
    jct_agents = o.agent_end - o.arrivals
    return _Summary(
        span, throughput, jct, jct_agents, 0, int(o.arrivals.size), saturated_span, "offline"
    )


@record
class _Series:
    """The per-window arrays."""

    end: np.ndarray
    length: np.ndarray
    busy: np.ndarray  # [window, server]
    gpu: np.ndarray  # [window, GPU]
    reads: np.ndarray  # [window, node]
    in_span: np.ndarray  # windows wholly inside the measured span (all where none is)


def _series(o: Outcome, span: tuple[float, float]) -> _Series:
    w = o.windows
    w_end = np.array([x.end for x in w], dtype=np.float64)
    w_len = np.array([x.length for x in w], dtype=np.float64)
    busy = np.array([x.busy for x in w], dtype=np.float64).reshape(len(w), o.n_servers)
    gpu = np.array([x.gpu_busy for x in w], dtype=np.float64).reshape(len(w), o.gpus)
    reads = np.array([x.reads for x in w], dtype=np.float64).reshape(len(w), o.nodes)
    in_span = (w_end - w_len >= span[0] - 1e-9) & (w_end <= span[1] + 1e-9) & (w_len > 0)
    if not in_span.any():
        in_span = w_len > 0
    return _Series(w_end, w_len, busy, gpu, reads, in_span)


def _server_series(o: Outcome, s: _Series) -> tuple[ServerSeries, ...]:
    """Each link group's busy share per window and over the span, and the prefill GPUs'."""
    per = np.where(s.length > 0, s.length, 1.0)[:, None]  # a window's share of its own length

    def mean_in_span(u: np.ndarray) -> float:
        return float(u[s.in_span].mean()) if u.size else math.nan

    series: list[ServerSeries] = []
    for gr in o.groups:
        ids = list(gr.ids)
        if ids:
            u = (s.busy[:, ids] / per).mean(axis=1)
            series.append(ServerSeries(gr.name, len(ids), gr.capacity, True, u, mean_in_span(u)))
        else:
            series.append(ServerSeries(gr.name, 0, gr.capacity, False, np.zeros(0), math.nan))
    gu = np.minimum(s.gpu / per, 1.0).mean(axis=1)  # rounding: never above 1
    series.append(ServerSeries("prefill GPUs", o.gpus, math.nan, True, gu, mean_in_span(gu)))
    return tuple(series)


def _working_set(o: Outcome, s: _Series) -> tuple[np.ndarray, float, float]:
    """The working set per window (GB), its time average and its peak over the kept windows
    (the measured span online, the whole run offline)."""
    w = o.windows
    ws = np.array([x.kv_mean for x in w], dtype=np.float64) / 1e9
    ws_peak = np.array([x.kv_peak for x in w], dtype=np.float64) / 1e9
    kept = s.in_span if o.config.online else s.length > 0
    if not kept.any():  # a run of no time: its one window's values
        kept = np.ones(len(w), dtype=bool)
    weights = s.length[kept] if s.length[kept].sum() > 0 else np.ones(int(kept.sum()))
    mean = float(np.average(ws[kept], weights=weights)) if w else 0.0
    peak = float(ws_peak[kept].max()) if w else 0.0
    return ws, mean, peak


def build_result(o: Outcome) -> SimResult:
    cfg = o.config
    m = _online_summary(o) if cfg.online else _offline_summary(o)
    s = _series(o, m.span)
    ws, ws_mean, ws_max = _working_set(o, s)
    return SimResult(
        config=cfg,
        scheduler=o.scheduler,
        mode=cfg.mode,
        turns=o.done,
        agents=int(o.arrivals.size),
        events=o.events,
        wall_s=o.wall_s,
        sim_time_s=float(o.end_s),
        throughput_turns_per_s=float(m.throughput),
        throughput_span_s=(float(m.span[0]), float(m.span[1])),
        whole_run=not cfg.online and not m.saturated_span,
        jct_s=m.jct,
        agent_jct_s=Distribution.of(m.jct_agents[np.isfinite(m.jct_agents)]),
        ttft_s=o.ttft,
        ttft_span_s=(
            o.ttft if cfg.online else o.ttft_span if m.saturated_span else Distribution.of(_NONE)
        ),
        tpot_s=o.tpot,
        decode_path_fraction=o.de_read / o.all_read if o.all_read > 0 else 0.0,
        reads=o.all_read > 0 and not o.io_free,
        snic_max_over_avg=max_over_avg(s.reads[s.in_span]),
        prefill_max_over_avg=max_over_avg(s.gpu[s.in_span]),
        window_s=cfg.window_s,
        window_end_s=s.end,
        window_length_s=s.length,
        turns_done=np.array([x.turns for x in o.windows], dtype=np.int64),
        in_flight=np.array([x.in_flight for x in o.windows], dtype=np.int64),
        working_set_gbyte=ws,
        working_set_mean_gbyte=ws_mean,
        working_set_max_gbyte=ws_max,
        snic_bytes=s.reads,
        servers=_server_series(o, s),
        unfinished=m.unfinished,
        stable=o.stable,
        offered_turns_per_s=o.offered if cfg.online else 0.0,
        status=m.status,
        lifetime_s=o.lifetime_s,
        decode_wait_s=o.decode_wait,
        decode_batch_mean=o.decode_area / o.end_s if o.end_s > 0 else 0.0,
        decode_batch_max=o.decode_batch_max,
        agents_measured=m.measured_agents,
    )


def max_over_avg(per_window: np.ndarray) -> float:
    """Mean over windows of the busiest unit's amount over the units' mean (windows with
    nothing moved are left out)."""
    if per_window.size == 0:
        return math.nan
    mean = per_window.mean(axis=1)
    ok = mean > 0
    if not ok.any():
        return math.nan
    return float((per_window[ok].max(axis=1) / mean[ok]).mean())


@record
class SloVerdict:
    """A run against the SLOs: the measured TTFT and TPOT the SLOs hold (the means, or the
    percentiles ``--slo-percentile`` names, read from the run's histograms), whether both are
    within them (None: not judged) and why."""

    ttft_s: float
    tpot_s: float
    met: bool | None
    why: str


def slo_verdict(r: SimResult, slo: ServingConfig) -> SloVerdict:
    """The SLOs against the measured means or percentiles, and why where they do not decide:
    a queue that fell behind its arrivals misses them whatever its waits so far (they grow
    without bound), and a run too short for a steady state has transient waits, which judge
    nothing (an overloaded run of 200 s, 5x the cluster's capacity, showed means within the
    SLOs and was called "met"; whether such a run falls behind its arrivals its turn count
    cannot tell, as its agents are still arriving)."""
    pct = slo.slo_percentiles
    ttft = r.ttft_s.mean if pct.ttft is None else r.ttft_s.percentile(pct.ttft)
    tpot = r.tpot_s.mean if pct.tpot is None else r.tpot_s.percentile(pct.tpot)
    met: bool | None
    why = f"the measured {pct.words}"
    if r.status == "unstable":
        met, why = False, "the turns fell behind the arrivals: the waits grow without bound"
    elif r.status == "too_short":
        met, why = None, f"too short for a steady state: the {pct.words} are transient"
    elif not (math.isfinite(ttft) and math.isfinite(tpot)):
        met, why = None, "no turn measured"
    else:
        met = ttft <= slo.ttft_slo_s and tpot <= slo.tpot_slo_s
    return SloVerdict(ttft, tpot, met, why)
