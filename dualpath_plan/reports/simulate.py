"""The ``simulate`` report: JSON payload, terminal rendering, the CSV time series, the per-turn
JSON Lines log and an SVG chart of the run."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dualpath_plan.formatting import (
    column,
    duration,
    durations,
    finite,
    gbyte,
    number,
    percent,
    plain,
)
from dualpath_plan.frozen import record
from dualpath_plan.outcomes.simulation import Distribution, SimResult, TurnRecord, slo_verdict
from dualpath_plan.reports.provenance import efficiency_line, efficiency_payload
from dualpath_plan.reports.recommend import nice_ticks, tick_label
from dualpath_plan.reports.size import scenario_line
from dualpath_plan.scenario import Scenario
from dualpath_plan.scenario.spec import ServingConfig


@record
class Analytical:
    """The analytical model's numbers for the same cluster, mode and load (``--compare``)."""

    throughput_turns_per_s: float
    # TTFT under the names the simulation uses (docs/model.md, "Metrics"): offline the mean
    # over every turn and over the saturated span; online one quantity, the measured span's
    # (``ttft_span_s`` None). None elsewhere: beyond capacity.
    ttft_s: float | None
    ttft_span_s: float | None
    tpot_s: float | None
    jct_s: float | None  # offline: all agents; online: one agent's
    what: str  # where the numbers come from
    # Where the run simulates something the analytical model leaves out, each said with the
    # errors (they measure that difference, not the model's accuracy).
    caveats: tuple[str, ...] = ()


def _dist(d: Distribution) -> dict[str, float | int | None]:
    return {
        "mean": finite(d.mean),
        "p50": finite(d.p50),
        "p90": finite(d.p90),
        "p99": finite(d.p99),
        "count": d.count,
    }


def _error(sim: float | None, model: float | None) -> float | None:
    """The analytical model's relative error against the simulation."""
    if sim is None or model is None or not sim:
        return None
    return model / sim - 1.0


def simulate_payload(
    sc: Scenario, r: SimResult, slo: ServingConfig, compare: Analytical | None = None
) -> dict[str, Any]:
    """Everything the run measured, without wall-clock figures (the same seed gives the same
    bytes)."""
    c = r.config
    out: dict[str, Any] = {
        "mode": r.mode,
        "scheduler": r.scheduler,
        "seed": c.seed,
        "cluster": {"prefill_nodes": sc.prefill_nodes, "decode_nodes": sc.decode_nodes},
        "load": (
            {"kind": "online", "aps": c.aps, "duration_s": c.duration_s, "warmup_s": c.warmup_s}
            if c.online
            else {"kind": "offline", "agents": c.agents}
        ),
        "agents": r.agents,
        "turns": r.turns,
        "events": r.events,
        "sim_time_s": r.sim_time_s,
        "throughput_turns_per_s": finite(r.throughput_turns_per_s),
        "throughput_span_s": list(r.throughput_span_s),
        "offered_turns_per_s": r.offered_turns_per_s if c.online else None,
        "stable": r.stable,
        "status": r.status,
        "lifetime_s": finite(r.lifetime_s),
        "unfinished_agents": r.unfinished,
        "agents_measured": r.agents_measured,
        "jct_s": finite(r.jct_s),
        "agent_jct_s": _dist(r.agent_jct_s),
        "ttft_s": _dist(r.ttft_s),
        # offline, the turns done from 10% to 50% of all (online the measured span's TTFT is
        # ttft_s: not repeated)
        **({} if c.online else {"ttft_span_s": _dist(r.ttft_span_s)}),
        "tpot_s": _dist(r.tpot_s),
        "decode_wait_s": _dist(r.decode_wait_s),
        "decode_batch": {"mean": r.decode_batch_mean, "max": r.decode_batch_max},
        "slo": _slo(r, slo),
        "context_growth": c.context_growth,
        "decode_path_fraction": r.decode_path_fraction if r.reads else None,
        "snic_max_over_avg": finite(r.snic_max_over_avg),
        "prefill_max_over_avg": finite(r.prefill_max_over_avg),
        # the time average and the peak, over the measured span online (the run offline)
        "kv_working_set_gbyte": {
            "mean": finite(r.working_set_mean_gbyte) if r.working_set_gbyte.size else None,
            "max": finite(r.working_set_max_gbyte) if r.working_set_gbyte.size else None,
        },
        "links": {
            s.name: {
                "servers": s.servers,
                "capacity_per_server": finite(s.capacity),
                "queued": s.queued,
                "mean_busy_share": finite(s.mean_busy_share),
            }
            for s in r.servers
        },
        "window_s": r.window_s,
        "queued_utilization": c.queued_utilization,
        "efficiencies": efficiency_payload(sc),
    }
    if compare is not None:
        out["analytical"] = {
            "source": compare.what,
            "caveats": list(compare.caveats),
            "throughput_turns_per_s": compare.throughput_turns_per_s,
            "ttft_s": compare.ttft_s,
            **({} if c.online else {"ttft_span_s": compare.ttft_span_s}),
            "tpot_s": compare.tpot_s,
            "jct_s": compare.jct_s,
            "error": {
                "throughput": _error(
                    finite(r.throughput_turns_per_s), compare.throughput_turns_per_s
                ),
                "ttft_mean": _error(finite(r.ttft_s.mean), compare.ttft_s),
                **(
                    {}
                    if c.online
                    else {"ttft_span_mean": _error(finite(r.ttft_span_s.mean), compare.ttft_span_s)}
                ),
                "tpot_mean": _error(finite(r.tpot_s.mean), compare.tpot_s),
                "jct": _error(
                    finite(r.jct_s if not c.online else r.agent_jct_s.mean), compare.jct_s
                ),
            },
        }
    return out


def _ttft_rows(r: SimResult, compare: Analytical) -> list[tuple[str, Distribution, float | None]]:
    """The compared TTFTs, like with like (docs/model.md, "Metrics"): offline over the
    saturated span and over the whole run, online the measured span's alone."""
    if r.config.online:
        return [("TTFT mean", r.ttft_s, compare.ttft_s)]
    return [
        ("TTFT mean, saturated span", r.ttft_span_s, compare.ttft_span_s),
        ("TTFT mean, whole run", r.ttft_s, compare.ttft_s),
    ]


def _slo(r: SimResult, slo: ServingConfig) -> dict[str, Any]:
    """The SLOs against the measured means (the analytical model's reading of them) or the
    percentiles --slo-percentile names (``slo_verdict``); with percentiles, which ones and the
    values they were judged on."""
    v = slo_verdict(r, slo)
    out: dict[str, Any] = {
        "ttft_s": slo.ttft_slo_s, "tpot_s": slo.tpot_slo_s, "met": v.met, "why": v.why,
    }  # fmt: skip
    pct = slo.slo_percentiles
    if pct.ttft is not None or pct.tpot is not None:
        # Only with the flag: the payload of a run without it is byte-identical to before.
        out["percentiles"] = {"ttft": pct.ttft, "tpot": pct.tpot}
        out["measured"] = {"ttft_s": finite(v.ttft_s), "tpot_s": finite(v.tpot_s)}
    return out


def _s(v: float | None) -> str:
    """A latency or duration: "-" where there is none, in the unit that suits it."""
    return "-" if v is None else duration(v)


def _pct(v: float | None) -> str:
    return "-" if v is None else percent(v, 1, sign=True)


def _ratio(v: float, none: str = "-") -> str:
    return number(v) if math.isfinite(v) else none


def _agents(n: int) -> str:
    return f"{n:,} agent" + ("" if n == 1 else "s")


STATUS_TEXT = {
    "unstable": "[bold]unstable[/bold]: the cluster did not keep up with the arrivals (fewer "
    "than 90% of the offered turns started in the measured span); the run stopped at the end "
    "of the arrivals, and the figures below are those of a growing queue",
    "too_short": "[bold]too short for a steady state[/bold]: the warm-up or the measured span is "
    "shorter than the longest agent's lifetime at light load ({life}); the figures below are "
    "transient (omit --duration and --warmup for four and two lifetimes)",
    "no_arrivals": "[bold]no agents arrived[/bold] in the run: raise --aps or --duration",
}


def render_simulate(
    sc: Scenario,
    r: SimResult,
    console: Console,
    slo: ServingConfig,
    compare: Analytical | None = None,
) -> None:
    c = r.config
    console.print(scenario_line(sc))
    load = (
        f"online: Poisson arrivals at {number(c.aps or 0.0)} agents/s for {_s(c.duration_s)}, "
        f"measured after {_s(c.warmup_s)}"
        if c.online
        else f"offline: {_agents(c.agents or 0)} started together"
    )
    turns = (
        "context growing over each agent's turns"
        if c.context_growth
        else (
            "each agent replaying a trace trajectory" if sc.workload.trace_file else "the mean turn"
        )
    )
    console.print(
        f"simulation of {r.mode}, scheduler {r.scheduler}, seed {c.seed}; {load}; {turns}"
    )
    if r.status in STATUS_TEXT:
        console.print(STATUS_TEXT[r.status].format(life=_s(r.lifetime_s)))
    t = Table()
    for col in ("metric", "mean", "p50", "p90", "p99"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    # Offline the TTFT of every turn (the drain included) and of the saturated span's turns
    # (docs/model.md, "Metrics"); online the measured span's is the one.
    ttfts = (
        [("TTFT", r.ttft_s)]
        if c.online or not r.ttft_span_s.count
        else [("TTFT, whole run", r.ttft_s), ("TTFT, saturated span", r.ttft_span_s)]
    )
    for name, d in (
        *ttfts,
        ("TPOT", r.tpot_s),
        ("wait for a decode slot", r.decode_wait_s),
        ("agent JCT", r.agent_jct_s),
    ):
        # A row is one quantity: one unit and one precision across its statistics.
        stats = [math.nan if v is None else v for v in (d.mean, d.p50, d.p90, d.p99)]
        t.add_row(name, *durations(stats))
    console.print(t)
    if c.online:
        console.print(
            f"agent JCT: the {r.agent_jct_s.count:,} of {_agents(r.agents_measured)} arriving in "
            "the measured span that finished"
        )
        v = slo_verdict(r, slo)
        pct = slo.slo_percentiles
        said = "met" if v.met else "missed" if v.met is not None else "not judged"
        if v.why != f"the measured {pct.words}":
            said += f" ({v.why})"
        console.print(
            f"SLOs ({pct.words}): {pct.name('TTFT')} {_s(finite(v.ttft_s))} against "
            f"{plain(slo.ttft_slo_s)} s, {pct.name('TPOT')} {_s(finite(v.tpot_s))} against "
            f"{plain(slo.tpot_slo_s * 1e3)} ms: {said}"
        )
    span = f"{_s(r.throughput_span_s[0])} to {_s(r.throughput_span_s[1])}"
    where = (
        "measured span"
        if c.online
        else "the whole run: too few turns for a saturated span"
        if r.whole_run
        else "10% to 50% of the turns done"
    )
    console.print(
        f"throughput {number(r.throughput_turns_per_s)} turns/s ({where}, {span})"
        + (f"; offered {number(r.offered_turns_per_s)} turns/s" if c.online else "")
    )
    jct_what = "mean of the agents arriving in the span" if c.online else "all agents done"
    share = percent(r.decode_path_fraction) if r.reads else "no reads"
    console.print(
        f"JCT {_s(r.jct_s)} ({jct_what}); turns {r.turns:,} of {_agents(r.agents)}; "
        f"decode-path share of reads {share}"
    )
    console.print(
        f"decode: {number(r.decode_batch_mean)} sequences on average of the "
        f"{r.decode_batch_max:,} its HBM holds"
    )
    console.print(
        f"storage reads max/avg across nodes {_ratio(r.snic_max_over_avg, 'no reads')}, prefill "
        f"GPUs' busy time max/avg {_ratio(r.prefill_max_over_avg)} (mean over "
        f"{_s(r.window_s)} windows)"
    )
    if r.working_set_gbyte.size:
        console.print(
            f"KV working set (live agents' contexts, tool calls included): mean "
            f"{gbyte(r.working_set_mean_gbyte)}, max {gbyte(r.working_set_max_gbyte)} "
            f"({'over the measured span' if r.config.online else 'over the run'})"
        )
    links = Table(title="links: share of the measured span each was busy (moving any bytes)")
    for col in ("link", "servers", "busy"):
        links.add_column(col, justify="left" if col == "link" else "right")
    for s in r.servers:
        if s.queued:
            busy = percent(s.mean_busy_share)
            links.add_row(s.name, str(s.servers), busy)
    console.print(links)
    fixed = [s.name for s in r.servers if not s.queued]
    if fixed:
        console.print(
            f"not queued (below {percent(c.queued_utilization)} utilization at the analytical "
            f"optimum: crossed in size/capacity): {', '.join(fixed)}"
        )
    if compare is not None:
        cmp = Table(title=f"simulation vs analytical ({compare.what})")
        for col in ("metric", "simulation", "analytical", "error"):
            cmp.add_column(col, justify="left" if col == "metric" else "right")
        beyond = "beyond capacity"
        cmp.add_row(
            "throughput (turns/s)",
            *column([r.throughput_turns_per_s, compare.throughput_turns_per_s]),
            _pct(_error(finite(r.throughput_turns_per_s), compare.throughput_turns_per_s)),
        )
        for name, sim_ttft, model_ttft in _ttft_rows(r, compare):
            cmp.add_row(
                name,
                _s(finite(sim_ttft.mean)) if sim_ttft.count else "none",
                _s(model_ttft) if model_ttft is not None else beyond,
                _pct(_error(finite(sim_ttft.mean), model_ttft)),
            )
        cmp.add_row(
            "TPOT mean",
            _s(r.tpot_s.mean),
            _s(compare.tpot_s) if compare.tpot_s is not None else beyond,
            _pct(_error(finite(r.tpot_s.mean), compare.tpot_s)),
        )
        sim_jct = r.agent_jct_s.mean if c.online else r.jct_s
        cmp.add_row(
            "agent JCT" if c.online else "JCT",
            _s(sim_jct),
            _s(compare.jct_s) if compare.jct_s is not None else beyond,
            _pct(_error(finite(sim_jct), compare.jct_s)),
        )
        console.print(cmp)
        notes = ["error: the analytical figure over the simulated one, less 1"]
        if not c.online:
            notes.append(
                "offline, the analytical throughput is its operating point's (the saturated "
                "rate, or the agents over their critical path when too few to saturate); TTFT "
                "saturated span: the turns done from 10% to 50% of all (the throughput's span), "
                "whole run: every turn, the drain included (the analytical model's the closed "
                "system's wait at the agents still running, turn-weighted over each); a wait "
                "for a decode slot counts in the simulated TPOT"
            )
            if not r.ttft_span_s.count:
                notes.append(
                    "the run is too short for a saturated span: the simulation has no span TTFT"
                )
        else:
            notes.append("online, TTFT over the measured span (the span TTFT is the same quantity)")
        if c.online and r.status != "stable":
            notes.append("the simulated figures are not a steady state (see above)")
        notes += compare.caveats
        console.print(escape("; ".join(notes)))
    console.print(efficiency_line(sc))
    console.print(
        f"{r.events:,} events in {_s(r.wall_s)} ({number(r.events / max(r.wall_s, 1e-9))} events/s)"
    )


def series_csv_lines(r: SimResult, decode_nodes: int) -> Iterator[str]:
    """The time series: one row per window (its end and length: the run ends in the last),
    turns/s, turns in flight, the KV working
    set, each queued link's busy share and each node's storage reads in GB/s (prefill nodes
    ``pe0...``, decode nodes ``de0...``)."""
    queued = [s for s in r.servers if s.queued]
    nodes = r.snic_bytes.shape[1] if r.snic_bytes.ndim == 2 else 0  # P nodes, then D
    head = ["time_s", "window_s", "turns_per_s", "turns_in_flight", "kv_working_set_gbyte"]
    head += [f"busy_{s.name.replace(' ', '_')}" for s in queued]
    p = r.snic_bytes.shape[1] - decode_nodes if nodes else 0
    head += [f"read_gbyte_s_pe{i}" for i in range(p)]
    head += [f"read_gbyte_s_de{i}" for i in range(nodes - p)]
    yield ",".join(head) + "\n"
    for k in range(r.window_end_s.size):
        w = float(r.window_length_s[k]) or 1.0
        row = [
            f"{r.window_end_s[k]:.6g}",
            f"{r.window_length_s[k]:.6g}",
            f"{r.turns_done[k] / w:.6g}",
            str(int(r.in_flight[k])),
            f"{r.working_set_gbyte[k]:.6g}",
        ]
        row += [f"{s.busy_share[k]:.4f}" for s in queued]
        row += [f"{r.snic_bytes[k, i] / w / 1e9:.6g}" for i in range(nodes)]
        yield ",".join(row) + "\n"


def turn_line(rec: TurnRecord) -> str:
    """One turn of ``--trace-out`` as a JSON object on one line (turns in the order they
    finish)."""
    agent, turn, start, ttft, tpot, done, gpu, node, on_decode, hit, prompt = rec
    return (
        json.dumps(
            {
                "agent": agent,
                "turn": turn,
                "start_s": start,
                "ttft_s": ttft,
                "tpot_s": tpot,
                "done_s": done,
                "prefill_gpu": gpu,
                "decode_node": node,
                "read_on": "decode" if on_decode else "prefill",
                "hit_gbyte": hit / 1e9,
                "prompt_tokens": prompt,
            },
            allow_nan=False,
        )
        + "\n"
    )


# The chart's turns/s is averaged over this many mean turn cycles: turns finish in waves (a
# prefill batch's turns together, agents in step after an offline start), so a 10 s window
# holds one wave or two and the raw series is a comb (32, 64, 64, 32 turns/s); over a few
# cycles the waves average out and the curve shows the trend (ramp, plateau, drain).
AVERAGE_CYCLES = 3.0
# ... but over no more than this share of the run, so that the curve keeps its shape.
AVERAGE_AT_MOST = 0.2


@record
class SmoothedRate:
    """Turns/s per window, each the centred average over ``windows`` windows (fewer at the
    run's ends), ``span_s`` seconds of the run."""

    turns_per_s: np.ndarray
    windows: int
    span_s: float


def smoothed_rate(r: SimResult) -> SmoothedRate:
    """The chart's turns/s: the completions of the ``k`` windows around each (k odd, centred)
    over their length. ``k`` from the run itself: ``AVERAGE_CYCLES`` mean turn cycles, a turn
    cycle being the mean time a turn is in the cluster by Little's law (mean turns in flight
    over the mean turns/s), in whole windows, at most ``AVERAGE_AT_MOST`` of the run."""
    done = r.turns_done.astype(np.float64)
    length = np.asarray(r.window_length_s, dtype=np.float64)
    n = done.size
    if n == 0:
        return SmoothedRate(np.zeros(1), 1, 0.0)
    total_s = float(length.sum())
    mean_rate = float(done.sum()) / total_s if total_s > 0 else 0.0
    cycle_s = float(np.mean(r.in_flight)) / mean_rate if mean_rate > 0 else 0.0
    k = math.ceil(AVERAGE_CYCLES * cycle_s / r.window_s) if math.isfinite(cycle_s) else 1
    k = max(min(k, math.floor(AVERAGE_AT_MOST * n)), 1)
    k += 1 - k % 2  # odd: centred on its window
    h = k // 2
    # Sums over [i - h, i + h] by cumulative sums (the ends take the windows there are).
    c_done = np.concatenate([[0.0], np.cumsum(done)])
    c_len = np.concatenate([[0.0], np.cumsum(length)])
    lo = np.clip(np.arange(n) - h, 0, n)
    hi = np.clip(np.arange(n) + h + 1, 0, n)
    span = c_len[hi] - c_len[lo]
    rate = np.divide(c_done[hi] - c_done[lo], span, out=np.zeros(n), where=span > 0)
    return SmoothedRate(rate, k, k * r.window_s)


def simulate_svg(sc: Scenario, r: SimResult, width: int = 800, height: int = 420) -> str:
    """Turns/s and the busiest storage-reading node's GB/s over the average node's, per window,
    and the KV working set, over time."""
    left, right, top, bottom = 70, 70, 40, 50
    x_max = float(r.window_end_s[-1]) if r.window_end_s.size else 1.0
    smooth = smoothed_rate(r)
    rate = smooth.turns_per_s
    ws = r.working_set_gbyte if r.working_set_gbyte.size else np.zeros(1)
    y_ticks = nice_ticks(float(max(rate.max(), 1e-9)))
    ws_ticks = nice_ticks(float(max(ws.max(), 1e-9)))
    y_max, ws_max = y_ticks[-1], ws_ticks[-1]
    x_ticks = nice_ticks(x_max)

    def xp(v: float) -> float:
        return left + (width - left - right) * v / max(x_ticks[-1], 1e-9)

    def yp(v: float, top_value: float) -> float:
        return height - bottom - (height - top - bottom) * v / max(top_value, 1e-9)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14">'
        f"simulation: {sc.model.id} {sc.prefill_nodes}P{sc.decode_nodes}D, {r.mode}, "
        f"{r.scheduler} scheduler</text>",
        f'<text class="window" x="{width / 2}" y="34" text-anchor="middle" font-size="11">'
        f"turns/s: each point the mean over the {duration(smooth.span_s)} around it "
        f"({smooth.windows} windows of {duration(r.window_s)}: "
        f"{number(AVERAGE_CYCLES, 1)} mean turn cycles, or a fifth of the run if less)</text>",
    ]
    x_step = x_ticks[1] - x_ticks[0] if len(x_ticks) > 1 else 1.0
    for v in x_ticks:
        out.append(
            f'<line x1="{xp(v):.1f}" y1="{height - bottom}" x2="{xp(v):.1f}" y2="{top}" '
            'stroke="#eee"/>'
            f'<text x="{xp(v):.1f}" y="{height - bottom + 16}" text-anchor="middle">'
            f"{tick_label(v, x_step)}</text>"
        )
    y_step = y_ticks[1] - y_ticks[0] if len(y_ticks) > 1 else 1.0
    ws_step = ws_ticks[1] - ws_ticks[0] if len(ws_ticks) > 1 else 1.0
    for v in y_ticks:
        out.append(
            f'<text x="{left - 6}" y="{yp(v, y_max) + 4:.1f}" text-anchor="end" '
            f'fill="#1f77b4">{tick_label(v, y_step)}</text>'
        )
    for v in ws_ticks:
        out.append(
            f'<text x="{width - right + 6}" y="{yp(v, ws_max) + 4:.1f}" fill="#d62728">'
            f"{tick_label(v, ws_step)}</text>"
        )
    t = r.window_end_s
    if t.size:
        pts = " ".join(
            f"{xp(float(a)):.1f},{yp(float(b), y_max):.1f}" for a, b in zip(t, rate, strict=True)
        )
        out.append(f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{pts}"/>')
        pts = " ".join(
            f"{xp(float(a)):.1f},{yp(float(b), ws_max):.1f}" for a, b in zip(t, ws, strict=True)
        )
        out.append(f'<polyline fill="none" stroke="#d62728" stroke-width="1.5" points="{pts}"/>')
    out += [
        f'<text x="{width / 2}" y="{height - 12}" text-anchor="middle">time (s)</text>',
        f'<text x="16" y="{height / 2}" transform="rotate(-90 16 {height / 2})" '
        'text-anchor="middle" fill="#1f77b4">turns/s (averaged: see above)</text>',
        f'<text x="{width - 14}" y="{height / 2}" transform="rotate(90 {width - 14} '
        f'{height / 2})" text-anchor="middle" fill="#d62728">KV working set (GB)</text>',
        "</svg>",
    ]
    return "\n".join(out) + "\n"
