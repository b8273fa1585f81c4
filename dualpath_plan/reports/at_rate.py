"""The ``size --aps`` and ``size --aps-curve`` reports: JSON payload, terminal tables, CSV and
an SVG chart of TTFT against the arrival rate.

A rate beyond a mode's capacity has no latency: tables say "beyond capacity" (and why, in a
line under the table), JSON gives null and a ``reason``, CSV leaves the cell empty, the chart
breaks the line. No inf or NaN reaches any of them.
"""

from __future__ import annotations

import csv
import html
import io
import math
import textwrap
from typing import Any

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
from dualpath_plan.outcomes.at_rate import RatePoints, RateReport
from dualpath_plan.reports.provenance import efficiency_line, efficiency_payload
from dualpath_plan.reports.recommend import COLORS, _runs, nice_ticks, tick_label
from dualpath_plan.reports.size import inputs_payload, render_header
from dualpath_plan.reports.store import read_lines, store_payload

# The CSV's columns, one row per rate and mode (long form: what a plotting or data-frame tool
# reads directly, and room for the reason).
CSV_COLUMNS = (
    "aps",
    "mode",
    "ttft_s",
    "tpot_s",
    "agent_jct_s",
    "kv_working_set_gbyte",
    "utilization",
    "beyond_capacity",
    "reason",
)


def _point(p: RatePoints, i: int) -> dict[str, Any]:
    return {
        "ttft_s": finite(float(p.ttft_s[i])),
        "tpot_s": finite(float(p.tpot_s[i])),
        "agent_jct_s": finite(float(p.agent_jct_s[i])),
        "kv_working_set_gbyte": finite(float(p.kv_working_set_gbyte[i])),
        "utilization": float(p.utilization[i]),
        "beyond_capacity": bool(p.beyond[i]),
        "reason": p.reason(i),
    }


def _store(r: RateReport) -> dict[str, Any]:
    """The store's block where a capacity is given (as ``size``'s): each mode's read share."""
    if r.scenario.store is None:
        return {}
    return {"store": store_payload(r.scenario, {m: p.read_share for m, p in r.modes.items()})}


def _reads(r: RateReport, console: Console) -> None:
    """Which modes read less of the store's cache than it holds (as ``size`` says)."""
    for line in read_lines(r.scenario, {m: p.read_share for m, p in r.modes.items()}):
        console.print(escape(line))


def _capacity(p: RatePoints) -> dict[str, float]:
    return {"saturated_turns_per_s": p.saturated_turns_per_s, "capacity_aps": p.capacity_aps}


def rate_payload(r: RateReport) -> dict[str, Any]:
    """``size --aps X --json``: per mode the numbers at the one rate (null where beyond
    capacity, with the reason)."""
    aps = float(r.aps[0])
    return {
        "inputs": {**inputs_payload(r.scenario, r.config), "aps": aps},
        **_store(r),
        "efficiencies": efficiency_payload(r.scenario),
        "modes": {
            m: {
                "aps": aps,
                "turns_per_s": float(p.turns_per_s[0]),
                **_point(p, 0),
                "slo_met": bool(r.slo_met(m)[0]),
                **_capacity(p),
            }
            for m, p in r.modes.items()
        },
        "infeasible": dict(r.infeasible),  # modes the cluster cannot run, and why
    }


def curve_payload(r: RateReport, out: str | None = None) -> dict[str, Any]:
    """``size --aps-curve LO:HI:N --json``: the rates, and per mode an array per quantity (null
    where beyond capacity)."""
    modes: dict[str, Any] = {}
    for m, p in r.modes.items():
        points = [_point(p, i) for i in range(r.aps.size)]
        modes[m] = {key: [pt[key] for pt in points] for key in points[0]} if points else {}
        modes[m]["slo_met"] = [bool(v) for v in r.slo_met(m)]
        modes[m].update(_capacity(p))
    return {
        "inputs": inputs_payload(r.scenario, r.config),
        **_store(r),
        "efficiencies": efficiency_payload(r.scenario),
        "aps": [float(v) for v in r.aps],
        "modes": modes,
        "infeasible": dict(r.infeasible),
        "out": out,
    }


def _rate(aps: float) -> str:
    """The rate the user gave (--aps), echoed as given: ``0.3``, not ``0.300``."""
    return f"{plain(aps)}"


def _slos(r: RateReport) -> str:
    cfg = r.config
    return "SLO {} and {}".format(*cfg.slo_parts)


def _slo_cell(r: RateReport, m: str, i: int) -> str:
    p = r.modes[m]  # type: ignore[index]
    ttft = float(p.ttft_s[i]) <= r.config.ttft_slo_s
    tpot = float(p.tpot_s[i]) <= r.config.tpot_slo_s
    if ttft and tpot:
        return "met"
    return "TTFT missed" if tpot else ("TPOT missed" if ttft else "both missed")


def _footer(r: RateReport, console: Console) -> None:
    for m, why in r.infeasible.items():
        console.print(escape(f"{m}: cannot run this cluster: {why}"), highlight=False)
    console.print(escape(efficiency_line(r.scenario)), highlight=False)


def render_rate(r: RateReport, console: Console) -> None:
    """``size --aps X``: a row per mode at the rate, and the reason of any mode beyond
    capacity."""
    render_header(r.scenario, console)
    _reads(r, console)
    aps = float(r.aps[0])
    turns = r.scenario.turn_demand.trajectory_turns.mean
    table = Table(
        title=f"online at {_rate(aps)} agents/s ({number(aps * turns)} turns/s): Poisson agent "
        f"arrivals, {_slos(r)}"
    )
    pct = r.config.slo_percentiles
    cols = (
        "mode",
        "util.",
        pct.name("TTFT"),
        pct.name("TPOT"),
        "agent JCT",
        "KV working set",
        "SLOs",
    )
    for col in cols:
        table.add_column(col, justify="left" if col in ("mode", "SLOs") else "right")
    for m, p in r.modes.items():
        util = percent(float(p.utilization[0]))
        if bool(p.beyond[0]):
            table.add_row(m, util, "-", "-", "-", "-", "beyond capacity")
            continue
        table.add_row(
            m,
            util,
            duration(float(p.ttft_s[0])),
            duration(float(p.tpot_s[0])),
            duration(float(p.agent_jct_s[0])),
            gbyte(float(p.kv_working_set_gbyte[0])),
            _slo_cell(r, m, 0),
        )
    console.print(table)
    console.print(
        "util.: the busiest link's utilization at this rate (its turns/s over the saturated "
        "turns/s); agent JCT: one agent's turns x (TTFT + generated x TPOT + tool latency); "
        "KV working set by Little's law (paper 2.5)"
    )
    for m, p in r.modes.items():
        why = p.reason(0)
        if why is not None:
            console.print(escape(f"{m}: {why}"), highlight=False)
    # The headroom a plan keeps (``size``'s APS is capped there) is not an SLO: said apart.
    cap = r.config.max_utilization
    above = [m for m, p in r.modes.items() if not p.beyond[0] and p.utilization[0] > cap]
    if above:
        console.print(
            f"{', '.join(above)}: the busiest link above the {cap:.0%} that --max-utilization "
            "keeps as headroom"
        )
    _footer(r, console)


def render_curve(r: RateReport, console: Console, out: str | None = None) -> None:
    """``size --aps-curve``: a row per rate, TTFT and TPOT per mode; "beyond" past a mode's
    capacity, "*" above the TTFT SLO."""
    render_header(r.scenario, console)
    _reads(r, console)
    table = Table(
        title=f"TTFT and TPOT vs arrival rate ({r.aps.size} rates): Poisson agent arrivals, "
        f"{_slos(r)}"
    )
    table.add_column("APS", justify="right")
    for m in r.modes:
        table.add_column(f"{m} {r.config.slo_percentiles.name('TTFT')}", justify="right")
        table.add_column(f"{m} TPOT", justify="right")
    slo = r.config.ttft_slo_s
    # Each column one unit and one precision (beyond capacity: said in words).
    rates = column([float(a) for a in r.aps])
    shown: list[tuple[list[str], list[str]]] = []
    for p in r.modes.values():
        beyond = [bool(b) for b in p.beyond]
        ttfts = durations(
            [math.nan if b else float(t) for t, b in zip(p.ttft_s, beyond, strict=True)]
        )
        tpots = durations(
            [math.nan if b else float(t) for t, b in zip(p.tpot_s, beyond, strict=True)]
        )
        shown.append(
            (
                [
                    "beyond" if b else t + (" *" if float(v) > slo else "")
                    for t, v, b in zip(ttfts, p.ttft_s, beyond, strict=True)
                ],
                ["beyond" if b else t for t, b in zip(tpots, beyond, strict=True)],
            )
        )
    for i in range(r.aps.size):
        cells = [rates[i]]
        for ttft_cells, tpot_cells in shown:
            cells += [ttft_cells[i], tpot_cells[i]]
        table.add_row(*cells)
    console.print(table)
    console.print(f"*: above the TTFT SLO ({plain(slo)} s)")
    if any(bool(p.beyond.any()) for p in r.modes.values()):
        console.print(
            "beyond: beyond capacity, the rate's turns/s at or over the mode's saturated "
            "turns/s ("
            + ", ".join(
                f"{m} {number(p.saturated_turns_per_s)} turns/s = {number(p.capacity_aps)} agents/s"
                for m, p in r.modes.items()
            )
            + ")"
        )
    _footer(r, console)
    if out is not None:
        console.print(escape(f"wrote {out}"), highlight=False)


def curve_csv(r: RateReport) -> str:
    """A row per rate and mode (``CSV_COLUMNS``); the cells beyond capacity empty, their
    reason given."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for i, aps in enumerate(r.aps):
        for m, p in r.modes.items():
            pt = _point(p, i)
            writer.writerow(
                [
                    repr(float(aps)),
                    m,
                    *("" if pt[k] is None else repr(pt[k]) for k in CSV_COLUMNS[2:7]),
                    "true" if pt["beyond_capacity"] else "false",
                    pt["reason"] or "",
                ]
            )
    return buffer.getvalue()


def curve_svg(r: RateReport, width: int = 800, height: int = 480) -> str:
    """TTFT against the arrival rate, a line per mode (broken where beyond capacity), the TTFT
    SLO as a horizontal line, each mode's saturated rate as a dashed vertical line in its
    colour; a title, the inputs and the efficiencies in force."""
    sc, cfg = r.scenario, r.config
    slo = cfg.ttft_slo_s
    left, right, top, bottom = 78, 190, 84, 84
    w, h = width - left - right, height - top - bottom
    finite = [v for p in r.modes.values() for v in p.ttft_s[~p.beyond]]
    # TTFT rises without bound towards capacity: the axis stops at 3x the SLO (the lines are
    # clipped there), and shows the SLO with room above it.
    y_top = max(1.25 * slo, min(max(finite, default=slo), 3.0 * slo))
    y_ticks = nice_ticks(y_top)
    x_ticks = nice_ticks(float(r.aps[-1]))
    ymax, xmax = y_ticks[-1], x_ticks[-1]
    esc = html.escape

    def xpos(v: float) -> float:
        return left + w * v / xmax

    def ypos(v: float) -> float:
        return top + h * (1 - v / ymax)

    storage = sc.storage.id if sc.storage else "unlimited"
    inputs = [
        f"{sc.model.id} on {sc.prefill_nodes}P{sc.decode_nodes}D ({sc.prefill_node.id} / "
        f"{sc.decode_node.id}), workload {sc.workload.id}, storage {storage}",
        f"Poisson agent arrivals, {_slos(r)}; {r.aps.size} rates from {_rate(float(r.aps[0]))} "
        f"to {_rate(float(r.aps[-1]))} agents/s",
    ]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f"<desc>{esc(efficiency_line(sc))}</desc>",
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
        '<text x="12" y="22" font-size="15" font-weight="bold">'
        "TTFT vs arrival rate, per mode (lower is better)</text>",
        f'<clipPath id="plot"><rect x="{left}" y="{top}" width="{w}" height="{h}"/></clipPath>',
    ]
    for k, line in enumerate(inputs):
        out.append(f'<text x="12" y="{42 + 15 * k}" font-size="11" fill="#444">{esc(line)}</text>')
    for v in y_ticks:
        y = ypos(v)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + w}" y2="{y:.1f}" stroke="#d0d0d0" '
            'stroke-width="0.5"/>'
        )
        out.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">'
            f"{tick_label(v, y_ticks[1] - y_ticks[0])}</text>"
        )
    for v in x_ticks:
        x = xpos(v)
        out.append(
            f'<line x1="{x:.1f}" y1="{top + h}" x2="{x:.1f}" y2="{top + h + 4}" stroke="black"/>'
        )
        out.append(
            f'<text x="{x:.1f}" y="{top + h + 18}" text-anchor="middle">'
            f"{tick_label(v, x_ticks[1] - x_ticks[0])}</text>"
        )
    out.append(f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + h}" stroke="black"/>')
    out.append(
        f'<text x="{left + w / 2}" y="{top + h + 38}" text-anchor="middle">'
        "arrival rate (agents/s)</text>"
    )
    out.append(
        f'<text x="18" y="{top + h / 2}" transform="rotate(-90 18 {top + h / 2})" '
        'text-anchor="middle">TTFT (s)</text>'
    )
    # The SLO: a horizontal line across the plot.
    y_slo = ypos(slo)
    out.append(
        f'<line class="slo" x1="{left}" y1="{y_slo:.1f}" x2="{left + w}" y2="{y_slo:.1f}" '
        'stroke="#333" stroke-width="1.5" stroke-dasharray="8 4"/>'
    )
    out.append(
        f'<text x="{left + w - 4}" y="{y_slo - 5:.1f}" text-anchor="end" fill="#333">'
        f"TTFT SLO {plain(slo)} s</text>"
    )
    # Modes that coincide draw over each other: the last mode first, each wider than the next,
    # so a line on top of another leaves it visible at its edges.
    modes = list(r.modes.items())
    for k, (m, p) in enumerate(reversed(modes)):
        stroke = 2.0 + 1.6 * (len(modes) - 1 - k)
        color = COLORS.get(m, "black")
        if p.capacity_aps <= xmax:
            x = xpos(p.capacity_aps)
            out.append(
                f'<line class="capacity" data-mode="{esc(m)}" x1="{x:.1f}" y1="{top}" '
                f'x2="{x:.1f}" y2="{top + h}" stroke="{color}" stroke-width="{stroke / 2:g}" '
                'stroke-dasharray="3 3"/>'
            )
        for a, b in _runs([not bool(v) for v in p.beyond]):
            pts = " ".join(
                f"{xpos(float(r.aps[i])):.1f},{ypos(float(p.ttft_s[i])):.1f}"
                for i in range(a, b + 1)
            )
            out.append(
                f'<polyline class="mode" data-mode="{esc(m)}" points="{pts}" fill="none" '
                f'stroke="{color}" stroke-width="{stroke:g}" clip-path="url(#plot)"/>'
            )
    lx, ly = left + w + 14, top
    for m, _ in modes:
        out.append(
            f'<line x1="{lx}" y1="{ly + 6}" x2="{lx + 22}" y2="{ly + 6}" '
            f'stroke="{COLORS.get(m, "black")}" stroke-width="2"/>'
            f'<text x="{lx + 28}" y="{ly + 10}">{esc(m)}</text>'
        )
        ly += 18
    out.append(
        f'<line x1="{lx}" y1="{ly + 6}" x2="{lx + 22}" y2="{ly + 6}" stroke="#333" '
        f'stroke-dasharray="8 4"/><text x="{lx + 28}" y="{ly + 10}">TTFT SLO</text>'
    )
    ly += 18
    out.append(
        f'<line x1="{lx + 11}" y1="{ly}" x2="{lx + 11}" y2="{ly + 12}" stroke="#888" '
        f'stroke-dasharray="3 3"/><text x="{lx + 28}" y="{ly + 10}">saturated rate</text>'
    )
    for k, line in enumerate(textwrap.wrap(efficiency_line(sc), 150)):
        out.append(
            f'<text x="12" y="{height - 24 + 11 * k}" font-size="9" fill="#666">{esc(line)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
