"""The ``simulate`` report: JSON payload, terminal rendering, the CSV time series, the per-turn
JSON Lines log and an SVG chart of the run."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from dualpath_plan.outcomes.simulation import Distribution, SimResult, TurnRecord
from dualpath_plan.reports.provenance import efficiency_line, efficiency_payload
from dualpath_plan.reports.recommend import nice_ticks, tick_label
from dualpath_plan.reports.size import scenario_line
from dualpath_plan.scenario import Scenario


@dataclass(frozen=True)
class Analytical:
    """The analytical model's numbers for the same cluster, mode and load (``--compare``)."""

    throughput_turns_per_s: float
    ttft_s: float | None  # None: beyond capacity
    tpot_s: float | None
    jct_s: float | None  # offline: all agents; online: one agent's
    what: str  # where the numbers come from


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


def _dist(d: Distribution) -> dict[str, float | int | None]:
    return {
        "mean": _finite(d.mean),
        "p50": _finite(d.p50),
        "p90": _finite(d.p90),
        "p99": _finite(d.p99),
        "count": d.count,
    }


def _error(sim: float | None, model: float | None) -> float | None:
    """The analytical model's relative error against the simulation."""
    if sim is None or model is None or not sim:
        return None
    return model / sim - 1.0


def simulate_payload(
    sc: Scenario, r: SimResult, compare: Analytical | None = None
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
        "throughput_turns_per_s": _finite(r.throughput_turns_per_s),
        "throughput_span_s": list(r.throughput_span_s),
        "offered_turns_per_s": r.offered_turns_per_s if c.online else None,
        "stable": r.stable,
        "unfinished_agents": r.unfinished,
        "jct_s": _finite(r.jct_s),
        "agent_jct_s": _dist(r.agent_jct_s),
        "ttft_s": _dist(r.ttft_s),
        "tpot_s": _dist(r.tpot_s),
        "decode_path_fraction": r.decode_path_fraction,
        "snic_max_over_avg": _finite(r.snic_max_over_avg),
        "prefill_max_over_avg": _finite(r.prefill_max_over_avg),
        "kv_working_set_gbyte": {
            "mean": _finite(float(np.mean(r.working_set_gbyte)))
            if r.working_set_gbyte.size
            else None,
            "max": _finite(float(np.max(r.working_set_gbyte)))
            if r.working_set_gbyte.size
            else None,
        },
        "links": {
            s.name: {
                "servers": s.servers,
                "capacity_per_server": _finite(s.capacity),
                "queued": s.queued,
                "mean_utilization": _finite(s.mean_utilization),
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
            "throughput_turns_per_s": compare.throughput_turns_per_s,
            "ttft_s": compare.ttft_s,
            "tpot_s": compare.tpot_s,
            "jct_s": compare.jct_s,
            "error": {
                "throughput": _error(
                    _finite(r.throughput_turns_per_s), compare.throughput_turns_per_s
                ),
                "ttft_mean": _error(_finite(r.ttft_s.mean), compare.ttft_s),
                "tpot_mean": _error(_finite(r.tpot_s.mean), compare.tpot_s),
                "jct": _error(
                    _finite(r.jct_s if not c.online else r.agent_jct_s.mean), compare.jct_s
                ),
            },
        }
    return out


def _s(v: float | None) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    if v >= 3600:
        return f"{v / 3600:.2f} h"
    if v >= 60:
        return f"{v:,.0f} s"
    return f"{v:.2f} s" if v >= 1 else f"{v * 1e3:.1f} ms"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1%}"


def render_simulate(
    sc: Scenario, r: SimResult, console: Console, compare: Analytical | None = None
) -> None:
    c = r.config
    console.print(scenario_line(sc))
    load = (
        f"online: Poisson arrivals at {c.aps:g} agents/s for {_s(c.duration_s)}, measured after "
        f"{_s(c.warmup_s)}"
        if c.online
        else f"offline: {c.agents:,} agents started together"
    )
    console.print(f"simulation of {r.mode}, scheduler {r.scheduler}, seed {c.seed}; {load}")
    t = Table()
    for col in ("metric", "mean", "p50", "p90", "p99"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    for name, d in (("TTFT", r.ttft_s), ("TPOT", r.tpot_s), ("agent JCT", r.agent_jct_s)):
        t.add_row(name, _s(d.mean), _s(d.p50), _s(d.p90), _s(d.p99))
    console.print(t)
    span = f"{_s(r.throughput_span_s[0])} to {_s(r.throughput_span_s[1])}"
    where = "measured span" if c.online else "saturated span: 10% to 50% of the turns done"
    console.print(
        f"throughput {r.throughput_turns_per_s:.4g} turns/s ({where}, {span})"
        + (f"; offered {r.offered_turns_per_s:.4g} turns/s" if c.online else "")
    )
    if c.online and not r.stable:
        console.print(
            "[bold]unstable[/bold]: the cluster did not keep up with the arrivals (fewer than "
            "90% of the offered turns started in the measured span); the run stopped at the "
            "end of the arrivals"
        )
    jct_what = "mean of the agents arriving in the span" if c.online else "all agents done"
    console.print(
        f"JCT {_s(r.jct_s)} ({jct_what}); "
        f"turns {r.turns:,} of {r.agents:,} agents; decode-path share of reads "
        f"{r.decode_path_fraction:.0%}"
    )
    console.print(
        f"storage reads max/avg across nodes {r.snic_max_over_avg:.2f}, prefill GPUs' busy time "
        f"max/avg {r.prefill_max_over_avg:.2f} (mean over {r.window_s:g} s windows)"
    )
    if r.working_set_gbyte.size:
        console.print(
            f"KV working set (live agents' contexts): mean "
            f"{float(np.mean(r.working_set_gbyte)):,.0f} GB, max "
            f"{float(np.max(r.working_set_gbyte)):,.0f} GB"
        )
    links = Table(title="links (mean utilization over the measured span)")
    for col in ("link", "servers", "utilization"):
        links.add_column(col, justify="left" if col == "link" else "right")
    for s in r.servers:
        if s.queued:
            links.add_row(s.name, str(s.servers), f"{s.mean_utilization:.0%}")
    console.print(links)
    fixed = [s.name for s in r.servers if not s.queued]
    if fixed:
        console.print(
            f"not queued (below {c.queued_utilization:.0%} utilization at the analytical "
            f"optimum: crossed in size/capacity): {', '.join(fixed)}"
        )
    if compare is not None:
        cmp = Table(title=f"simulation vs analytical ({compare.what})")
        for col in ("metric", "simulation", "analytical", "error"):
            cmp.add_column(col, justify="left" if col == "metric" else "right")
        cmp.add_row(
            "throughput (turns/s)",
            f"{r.throughput_turns_per_s:.4g}",
            f"{compare.throughput_turns_per_s:.4g}",
            _pct(_error(_finite(r.throughput_turns_per_s), compare.throughput_turns_per_s)),
        )
        cmp.add_row(
            "TTFT mean",
            _s(r.ttft_s.mean),
            _s(compare.ttft_s) if compare.ttft_s is not None else "beyond capacity",
            _pct(_error(_finite(r.ttft_s.mean), compare.ttft_s)),
        )
        cmp.add_row(
            "TPOT mean",
            _s(r.tpot_s.mean),
            _s(compare.tpot_s) if compare.tpot_s is not None else "beyond capacity",
            _pct(_error(_finite(r.tpot_s.mean), compare.tpot_s)),
        )
        sim_jct = r.agent_jct_s.mean if c.online else r.jct_s
        cmp.add_row(
            "agent JCT" if c.online else "JCT",
            _s(sim_jct),
            _s(compare.jct_s),
            _pct(_error(_finite(sim_jct), compare.jct_s)),
        )
        console.print(cmp)
        console.print(
            "error: the analytical figure over the simulated one, less 1"
            + (
                "; offline, the analytical TTFT is the operating point's (all agents running), "
                "the simulated one the mean over every turn, the drain included"
                if not c.online
                else ""
            )
        )
    console.print(efficiency_line(sc))
    console.print(
        f"{r.events:,} events in {r.wall_s:.1f} s ({r.events / max(r.wall_s, 1e-9):,.0f} events/s)"
    )


def series_csv_lines(r: SimResult) -> Iterator[str]:
    """The time series: one row per window (its end), turns/s, turns in flight, the KV working
    set, each queued link's utilization and each node's storage reads in GB/s."""
    queued = [s for s in r.servers if s.queued]
    nodes = r.snic_bytes.shape[1] if r.snic_bytes.ndim == 2 else 0  # P nodes, then D
    head = ["time_s", "turns_per_s", "turns_in_flight", "kv_working_set_gbyte"]
    head += [f"util_{s.name}" for s in queued]
    head += [f"read_gbyte_s_node{i}" for i in range(nodes)]
    yield ",".join(head) + "\n"
    w = r.window_s
    for k in range(r.window_end_s.size):
        row = [
            f"{r.window_end_s[k]:.6g}",
            f"{r.turns_done[k] / w:.6g}",
            str(int(r.in_flight[k])),
            f"{r.working_set_gbyte[k]:.6g}",
        ]
        row += [f"{s.utilization[k]:.4f}" for s in queued]
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


def simulate_svg(sc: Scenario, r: SimResult, width: int = 800, height: int = 420) -> str:
    """Turns/s and the busiest storage-reading node's GB/s over the average node's, per window,
    and the KV working set, over time."""
    left, right, top, bottom = 70, 70, 40, 50
    x_max = float(r.window_end_s[-1]) if r.window_end_s.size else 1.0
    rate = r.turns_done / r.window_s if r.turns_done.size else np.zeros(1)
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
        'text-anchor="middle" fill="#1f77b4">turns/s per window</text>',
        f'<text x="{width - 14}" y="{height / 2}" transform="rotate(90 {width - 14} '
        f'{height / 2})" text-anchor="middle" fill="#d62728">KV working set (GB)</text>',
        "</svg>",
    ]
    return "\n".join(out) + "\n"
