"""The ``recommend`` report: JSON payload, terminal tables, Markdown, and an SVG chart.

The chart is SVG written directly: a line chart needs no plotting library, SVG scales, opens in
any browser and sits inline in the Markdown report. It carries a title and its inputs, a line
per mode (modes that coincide share one, labelled "even = dualpath"), a marker on each mode's
recommended split, the bottleneck-free range shaded and labelled, what binds dualpath per split
in a strip under the axis, and round (1-2-5) ticks. A mode has one colour (``COLORS``) in every
chart and in the terminal's table; a link one colour (``link_color``) in every chart, none of
them a mode's. PNG goes through matplotlib (the ``plot`` extra) with the same content.
"""

from __future__ import annotations

import html
import io
import math
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dualpath_plan import __version__
from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import atomic_write
from dualpath_plan.formatting import (
    column,
    count,
    fixed,
    interval_text,
    number,
    plain,
    with_interval,
)
from dualpath_plan.outcomes.recommend import Candidate, PhasePlan, RecommendReport, score
from dualpath_plan.outcomes.serving import ModeOutcome
from dualpath_plan.outcomes.uncertainty import Interval
from dualpath_plan.physics.links import LINK_INDEX
from dualpath_plan.reports.cost import cost_payload, render_costs
from dualpath_plan.reports.provenance import (
    efficiency_line,
    efficiency_payload,
    interval_fields,
    intervals_line,
    intervals_payload,
    node_lines,
)
from dualpath_plan.reports.size import mode_payload, workload_text

METRIC = {
    "jct_s": ("jct_s", "JCT (s)"),
    "aps": ("aps", "APS (agents/s)"),
    "throughput_per_gpu": ("throughput_per_gpu", "turns/s per GPU"),
}
# One colour per mode, in every chart and in the terminal's table headers.
COLORS = {
    "basic": "#d62728",
    "basic_layerwise": "#ff7f0e",
    "dualpath_unscheduled": "#8c564b",
    "even": "#9467bd",
    "dualpath": "#1f77b4",
    "oracle": "#2ca02c",
}
# Links' colours: light tints, none of them a mode's; a link keeps its colour in every chart.
LINK_COLORS = (
    "#fdd0a2",
    "#c7e9c0",
    "#dadaeb",
    "#fcbba1",
    "#c6dbef",
    "#fee391",
    "#d9d9d9",
    "#e5d8bd",
    "#ccebc5",
    "#fbb4ae",
)
FREE_COLOR = "#ececec"  # the bottleneck-free range (grey: no mode's, no link's)
INFEASIBLE_COLOR = "#ffffff"


def link_color(label: str) -> str:
    """The colour of a binding label ("a + b": its first link's) in every chart."""
    first = label.split(" + ")[0]
    return LINK_COLORS[LINK_INDEX[first] % len(LINK_COLORS)] if first in LINK_INDEX else "#f0f0f0"


def nice_ticks(vmax: float, count: int = 5) -> list[float]:
    """Round ticks from 0 past ``vmax``: a step of 1, 2 or 5 x 10^k, about ``count`` of them."""
    if not (math.isfinite(vmax) and vmax > 0):
        return [0.0, 1.0]
    raw = vmax / count
    mag = 10.0 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw * (1 - 1e-12))
    n = math.ceil(vmax / step - 1e-9)
    # To 12 significant digits, not 12 decimals: ticks of 1e-20 rounded to 0 (a chart over
    # them divided by zero).
    return [float(f"{k * step:.12g}") for k in range(n + 1)]


def tick_label(v: float, step: float) -> str:
    """A tick's label through the one formatter: every tick with the decimals of the step
    between them (a step of 0.05: "0.10", "0.15"), grouped, no exponent."""
    return fixed(v, 0 if step >= 1 else -math.floor(math.log10(step) + 1e-12))


def inputs_lines(r: RecommendReport) -> list[str]:
    """What the chart was computed from, in two lines: model, workload, storage; nodes,
    budget and what the objective is measured at."""
    sc, cfg = r.scenario, r.config
    storage = sc.storage.id if sc.storage else "unlimited"
    pe = f"{sc.prefill_node.id} ({sc.prefill_node.gpus_per_node} x {sc.prefill_gpu.id})"
    de = f"{sc.decode_node.id} ({sc.decode_node.gpus_per_node} x {sc.decode_gpu.id})"
    nodes = f"nodes {pe}" if pe == de else f"prefill {pe}, decode {de}"
    budget = r.budget.describe(sc.prefill_node.gpus_per_node, sc.decode_node.gpus_per_node)
    at = (
        f"{count(cfg.agents, 'agent')} started together"
        if r.objective == "jct_s"
        else f"SLOs {', '.join(cfg.slo_parts)}"
        if r.objective in ("aps", "cost")
        else "saturated"
    )
    return [
        f"{sc.model.id}, workload {sc.workload.id}, storage {storage}",
        f"{nodes}; budget {budget}; objective {r.objective} ({at})",
    ]


def free_range_text(r: RecommendReport) -> str:
    """The bottleneck-free P/D range in words (never NaN or inf)."""
    if not math.isfinite(r.pd_min):
        return "none (some link is over capacity at every P/D)"
    if not math.isfinite(r.pd_max):
        return f"P/D >= {number(r.pd_min)}"
    return f"{number(r.pd_min)} <= P/D <= {number(r.pd_max)}"


def coincide_text(r: RecommendReport) -> str | None:
    """Which modes coincide, in a sentence (None if none do)."""
    if not r.coinciding:
        return None
    groups = "; ".join(" and ".join(g) for g in r.coinciding)
    return (
        f"{groups} coincide: the same throughput, JCT and APS at every split (one line, "
        f"{', '.join(' = '.join(g) for g in r.coinciding)})"
    )


def _value(o: ModeOutcome | None, c: Candidate, objective: str) -> float | None:
    if o is None:
        return None
    if objective == "jct_s":
        return o.jct_s
    if objective == "aps":
        return o.aps
    if objective == "cost":
        pc = c.costs.get(o.mode)
        return None if pc is None else pc.usd_per_agent
    return o.throughput_turns_per_s / c.gpus


def recommend_payload(r: RecommendReport, phases: PhasePlan | None = None) -> dict[str, Any]:
    ranks = {m: _ranks(r, m) for m in r.candidates[0].modes}
    out: dict[str, Any] = {
        "objective": r.objective,
        "coinciding_modes": [list(g) for g in r.coinciding],
        "bottleneck_free_range": {
            # null where no ratio is bottleneck-free (or nothing bounds P/D from above)
            "pd_min": r.pd_min if math.isfinite(r.pd_min) else None,
            "pd_max": r.pd_max if math.isfinite(r.pd_max) else None,
        },
        "candidates": [
            {
                "prefill_nodes": c.prefill_nodes,
                "decode_nodes": c.decode_nodes,
                "gpus": c.gpus,
                "bottleneck_free": c.bottleneck_free,
                "modes": {
                    m: (
                        {
                            **mode_payload(o),
                            "rank": ranks[m][i],
                            **({"cost": cost_payload(c.costs[m])} if m in c.costs else {}),
                        }
                        if o is not None
                        else None
                    )
                    for m, o in c.modes.items()
                },
                # why each mode that has no outcome here is infeasible
                "infeasible_reasons": dict(c.reasons),
            }
            for i, c in enumerate(r.candidates)
        ],
        "recommended": {
            m: {
                "prefill_nodes": rec.candidate.prefill_nodes,
                "decode_nodes": rec.candidate.decode_nodes,
                "gpus": rec.candidate.gpus,
                "why": rec.why,
                **interval_fields(r.intervals, m),
                **(
                    {"cost": cost_payload(rec.candidate.costs[m])}
                    if m in rec.candidate.costs
                    else {}
                ),
            }
            for m, rec in r.recommended.items()
        },
        # modes that run but serve no agents/s at any split (objective aps), and why
        "unserved": dict(r.unserved),
        "efficiencies": efficiency_payload(r.scenario),
        "intervals": intervals_payload(r.intervals) if r.intervals is not None else None,
    }
    if phases is not None:
        out["phases"] = {
            "per_phase": [
                {
                    "workload": w,
                    "weight": wt,
                    "prefill_nodes": rec.candidate.prefill_nodes,
                    "decode_nodes": rec.candidate.decode_nodes,
                }
                for w, wt, rec in phases.phases
            ],
            "static": {
                "prefill_nodes": phases.static.prefill_nodes,
                "decode_nodes": phases.static.decode_nodes,
            }
            if phases.static is not None
            else None,
            "rebalancing_gain": phases.gain,
            # phases no split serves (objective aps), and why: no static split, no gain
            "unserved": dict(phases.unserved),
        }
    return out


def _ranks(r: RecommendReport, mode: str) -> list[int | None]:
    """Rank of each candidate for a mode by the objective (1 = best; None: infeasible)."""
    scored = []
    for i, c in enumerate(r.candidates):
        o = c.modes.get(mode)  # type: ignore[call-overload]
        if o is not None:
            scored.append((score(o, c.gpus, r.objective, c.costs.get(mode)), i))  # type: ignore[call-overload]
    out: list[int | None] = [None] * len(r.candidates)
    for rank, (_, i) in enumerate(sorted(scored, key=lambda t: -t[0]), 1):
        out[i] = rank
    return out


def _fmt(v: float | None, objective: str) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if objective == "jct_s" else number(v)


def _mode_name(m: str) -> str:
    """A mode's name in its colour (the charts' colour), for the terminal."""
    return f"[{COLORS[m]}]{m}[/]" if m in COLORS else m


def render_recommend(r: RecommendReport, console: Console, phases: PhasePlan | None = None) -> None:
    console.print(f"[bold]{html.unescape(inputs_lines(r)[0])}[/bold]")
    console.print(inputs_lines(r)[1])
    console.print(f"bottleneck-free {free_range_text(r)} (marked *)")
    said = coincide_text(r)
    if said:
        console.print(said)
    table = Table(title=f"per split (< recommended by {r.objective}; * bottleneck-free)")
    table.add_column("P/D")
    cols = [
        ("basic", "JCT"),
        ("basic", "APS"),
        ("dualpath", "turns/s"),
        ("dualpath", "JCT"),
        ("dualpath", "APS"),
        ("oracle", "JCT"),
    ]
    for m, what in cols:
        table.add_column(f"{_mode_name(m)} {what}", justify="right")
    table.add_column("dualpath binds")
    table.add_column("DE share", justify="right")

    def cell(c: Candidate, m: str, what: str) -> str:
        o = c.modes.get(m)  # type: ignore[call-overload]
        if o is None:
            return "n/a"
        v = {
            "JCT": f"{o.jct_s:,.0f} s",
            "APS": number(o.aps),
            "turns/s": number(o.throughput_turns_per_s),
        }[what]
        rec = r.recommended.get(m)  # type: ignore[call-overload]
        return f"[bold green]{v} <[/bold green]" if rec is not None and rec.candidate is c else v

    for c in r.candidates:
        dp = c.modes.get("dualpath")
        table.add_row(
            f"{c.prefill_nodes}P{c.decode_nodes}D{' *' if c.bottleneck_free else ''}",
            *[cell(c, m, w) for m, w in cols],
            dp.bottleneck if dp else ("none (below)" if not c.feasible else ""),
            f"{dp.decode_path_fraction:.0%}" if dp else "",
        )
    console.print(table)
    for c in r.candidates:
        if not c.feasible:
            console.print(
                escape(f"{c.prefill_nodes}P{c.decode_nodes}D runs in no mode: {c.reason}"),
                highlight=False,
            )
    for m in r.drawn():
        rec = r.recommended.get(m)
        if m in r.unserved:
            console.print(
                f"[bold]{' = '.join(_mode_name(x) for x in r.label(m).split(' = '))}[/bold]: "
                + escape(r.unserved[m])
            )
        if rec is None:
            continue
        console.print(
            f"[bold]{' = '.join(_mode_name(x) for x in r.label(m).split(' = '))}[/bold]: run "
            f"{rec.candidate.prefill_nodes}P{rec.candidate.decode_nodes}D "
            f"({rec.candidate.gpus} GPUs){_answer_interval(r, m)}. {rec.why}"
        )
    render_costs(
        {
            f"{m} {rec.candidate.prefill_nodes}P{rec.candidate.decode_nodes}D": pc
            for m, rec in r.recommended.items()
            if (pc := rec.candidate.costs.get(m)) is not None
        },
        console,
    )
    console.print(escape(efficiency_line(r.scenario)), highlight=False)
    if r.intervals is not None:
        console.print(
            escape(intervals_line(r.intervals)) + " (at each mode's recommended split)",
            highlight=False,
        )
    if phases is not None:
        _render_phases(phases, console)


def _answer_interval(r: RecommendReport, mode: str) -> str:
    """', JCT 1.52 h (1.38 h to 1.66 h), APS ...' at a mode's recommended split."""
    iv = r.intervals.by_mode.get(mode, {}) if r.intervals is not None else {}
    rec = r.recommended.get(mode)  # type: ignore[call-overload]
    o = rec.candidate.modes.get(mode) if rec is not None else None
    if o is None or not iv:
        return ""
    parts = []
    jct, aps = iv.get("jct_s"), iv.get("aps")
    if jct is not None:
        hours = _hours(r)  # one unit for every recommendation's JCT and its interval
        shown = [_seconds(v, hours) for v in (o.jct_s, jct.low, jct.high)]
        parts.append(f"JCT {with_interval(*shown)}")
    if aps is not None:
        parts.append(f"APS {interval_text(o.aps, aps.low, aps.high, column)}")
    return ": " + ", ".join(parts) if parts else ""


def _hours(r: RecommendReport) -> bool:
    """Whether the recommendations' JCTs (and their intervals) are best said in hours."""
    tops = [
        max(o.jct_s, (r.intervals.by_mode.get(m, {}).get("jct_s") or Interval(0, 0)).high)
        if r.intervals is not None
        else o.jct_s
        for m, rec in r.recommended.items()
        if (o := rec.candidate.modes.get(m)) is not None
    ]
    return max(tops, default=0.0) >= 3600


def _seconds(v: float, hours: bool) -> str:
    return f"{v / 3600:.2f} h" if hours else f"{v:,.0f} s"


def _render_phases(p: PhasePlan, console: Console) -> None:
    console.print(
        "[bold]phases[/bold]: "
        + "; ".join(
            f"{w} ({wt:.0%}): {rec.candidate.prefill_nodes}P{rec.candidate.decode_nodes}D"
            for w, wt, rec in p.phases
        )
    )
    for w, why in p.unserved.items():
        console.print(escape(f"phase {w}: {why}"), highlight=False)
    console.print(_phases_outcome(p), highlight=False)


def _phases_outcome(p: PhasePlan) -> str:
    """The best static ratio and the gain of re-balancing, or why there is none."""
    if p.static is None:
        return (
            "no static ratio and no re-balancing gain: a phase no split serves serves no "
            "agents/s in the run, whatever the split"
        )
    return (
        f"best static ratio {p.static.prefill_nodes}P{p.static.decode_nodes}D; "
        f"re-balancing per phase gains {p.gain:.3f}x"
    )


def recommend_markdown(
    r: RecommendReport, phases: PhasePlan | None = None, command: str = "dualpath-plan recommend"
) -> str:
    """A report that stands alone: its inputs (the nodes' specs and the efficiencies in
    force), the recommendation, the chart inline (SVG), every split, the command line that
    made it and the version."""
    sc = r.scenario
    _, label = METRIC[r.objective]
    lines = [
        f"# P/D ratio recommendation: {sc.model.id} on {sc.prefill_node.id} / {sc.decode_node.id}",
        "",
        f"- workload: `{sc.workload.id}` ({workload_text(sc)} tokens per turn)",
        f"- model: `{sc.model.id}` ({sc.model.name})",
        "- storage: "
        + (
            f"`{sc.storage.id}` ({sc.storage.name}: {sc.storage.aggregate_read_gbyte_s:,.0f} GB/s "
            f"aggregate read, at most {plain(sc.storage.max_client_read_gbyte_s)} GB/s per client "
            "node)"
            if sc.storage
            else "unlimited (no storage-cluster limit)"
        ),
        *[f"- {line}" for line in node_lines(sc)],
        f"- {efficiency_line(sc)}",
        "- budget: "
        + r.budget.describe(sc.prefill_node.gpus_per_node, sc.decode_node.gpus_per_node),
        f"- objective: {r.objective} ({inputs_lines(r)[1].rpartition('(')[2].rstrip(')')})",
        f"- offline: {count(r.config.agents, 'agent')} started together; online: SLOs "
        f"{', '.join(r.config.slo_parts)}, "
        "the busiest link at "
        f"most {r.config.max_utilization:.0%} (--max-utilization)",
        "- bottleneck-free P/D range (paper eq. 9, extended, derated by the scheduler as "
        f"every solver derates): {free_range_text(r)}; a split "
        "where no mode is feasible is never marked bottleneck-free",
    ]
    said = coincide_text(r)
    if said:
        lines.append(f"- {said}")
    lines += ["", "## Recommendation", ""]
    for m in r.drawn():
        rec = r.recommended.get(m)
        if m in r.unserved:
            lines.append(f"- **{r.label(m)}**: {r.unserved[m]}.")
        if rec is None:
            continue
        o = rec.candidate.modes[m]
        assert o is not None
        interval = _answer_interval(r, m).removeprefix(": ")
        outcome = interval or f"JCT {o.jct_s:,.0f} s, APS {number(o.aps)}"
        lines.append(
            f"- **{r.label(m)}**: {rec.candidate.prefill_nodes}P{rec.candidate.decode_nodes}D "
            f"({rec.candidate.gpus} GPUs): {number(o.throughput_turns_per_s)} turns/s, "
            + outcome
            + f". {rec.why}."
        )
    if r.intervals is not None:
        lines += ["", f"{intervals_line(r.intervals)} (at each mode's recommended split)"]
    lines += ["", "## Chart", "", recommend_svg(r).strip(), ""]
    lines += [f"## {label} per split", ""]
    modes = list(r.candidates[0].modes)
    lines.append(
        "| P/D | " + " | ".join(modes) + " | dualpath binds | DE share | bottleneck-free |"
    )
    lines.append("|---|" + "---:|" * len(modes) + "---|---:|---|")
    for c in r.candidates:
        dp = c.modes.get("dualpath")
        vals = [_fmt(_value(c.modes.get(m), c, r.objective), r.objective) for m in modes]
        free = "yes" if c.bottleneck_free else ("no" if c.feasible else "no (infeasible)")
        lines.append(
            f"| {c.prefill_nodes}P{c.decode_nodes}D | "
            + " | ".join(vals)
            + f" | {dp.bottleneck if dp else ''} | "
            f"{f'{dp.decode_path_fraction:.0%}' if dp else ''} | {free} |"
        )
    infeasible = [c for c in r.candidates if not c.feasible]
    if infeasible:
        lines.append("")
        lines += [
            f"- {c.prefill_nodes}P{c.decode_nodes}D runs in no mode: {c.reason}" for c in infeasible
        ]
    if phases is not None:
        lines += ["", "## Phases", ""]
        for w, wt, rec in phases.phases:
            lines.append(
                f"- `{w}` ({wt:.0%} of the run): {rec.candidate.prefill_nodes}P"
                f"{rec.candidate.decode_nodes}D"
            )
        lines += [f"- `{w}`: {why}" for w, why in phases.unserved.items()]
        lines.append(f"- {_phases_outcome(phases)}")
    lines += [
        "",
        "## How this was made",
        "",
        f"dualpath-plan {__version__}; the model and its sources are in docs/model.md of "
        "dualpath-plan. The command line:",
        "",
        "```",
        command,
        "```",
        "",
    ]
    return "\n".join(lines)


def _runs(flags: list[bool]) -> list[tuple[int, int]]:
    """(first, last) index of each run of consecutive true flags."""
    out: list[tuple[int, int]] = []
    for i, f in enumerate(flags):
        if f and out and out[-1][1] == i - 1:
            out[-1] = (out[-1][0], i)
        elif f:
            out.append((i, i))
    return out


def _binding_labels(r: RecommendReport) -> list[str]:
    """What binds dualpath (or the first mode) at each split; "infeasible" where it is."""
    mode = "dualpath" if "dualpath" in r.candidates[0].modes else next(iter(r.candidates[0].modes))
    out = []
    for c in r.candidates:
        o = c.modes.get(mode)
        out.append(o.bottleneck if o is not None else "infeasible")
    return out


def recommend_png(r: RecommendReport, path: str) -> None:
    """The chart of :func:`recommend_png_bytes` written to ``path`` through a temporary file
    renamed into place: a failure leaves a previous chart as it was."""
    atomic_write(path, recommend_png_bytes(r), field="--plot")


def recommend_png_bytes(r: RecommendReport) -> bytes:
    """The same chart as PNG, through matplotlib (the optional ``plot`` extra): rasterizing
    is what a plotting library does better than code of ours."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.patches as mpatches
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator
    except ImportError as exc:
        raise PlanInputError(
            "a PNG chart needs matplotlib: pip install 'dualpath-plan[plot]', or write .svg",
            field="--plot",
        ) from exc
    cands = r.candidates
    _, label = METRIC[r.objective]
    fig, ax = plt.subplots(figsize=(9, 5.2), dpi=120)
    for a, b in _runs([c.bottleneck_free for c in cands]):
        ax.axvspan(a - 0.5, b + 0.5, color=FREE_COLOR, lw=0, zorder=0)
    strip = ax.get_xaxis_transform()  # x in data, y in axes fraction
    binds = _binding_labels(r)
    for i, bind in enumerate(binds):
        color = INFEASIBLE_COLOR if bind == "infeasible" else link_color(bind)
        ax.add_patch(
            mpatches.Rectangle(
                (i - 0.5, 0.0), 1.0, 0.035, transform=strip, color=color, lw=0, zorder=1
            )
        )
    drawn = r.drawn()
    for k, m in enumerate(reversed(drawn)):  # as in the SVG: last mode first, widest
        group = r.label(m).split(" = ")
        width = 2.0 + 1.6 * (len(drawn) - 1 - k)
        runs = _runs([c.modes.get(m) is not None for c in cands])  # type: ignore[call-overload]
        for n_run, (a, b) in enumerate(runs):
            xs = list(range(a, b + 1))
            ys = [_value(cands[i].modes.get(m), cands[i], r.objective) or 0.0 for i in xs]  # type: ignore[call-overload]
            for j, x in enumerate(group):
                ax.plot(
                    xs,
                    ys,
                    color=COLORS.get(x, "black"),
                    lw=width,
                    ls="-" if j == 0 else (0, (4, 4 * j)),
                    label=r.label(m) if n_run == 0 and j == 0 else None,
                    zorder=3 + k,
                )
        rec = r.recommended.get(m)
        if rec is not None:
            i = cands.index(rec.candidate)
            v = _value(rec.candidate.modes.get(m), rec.candidate, r.objective)  # type: ignore[call-overload]
            size = 7.0 + 2.0 * (len(drawn) - 1 - k)
            ax.plot(
                [i],
                [v or 0.0],
                "o",
                ms=size,
                color=COLORS.get(m, "black"),
                mec="black",
                zorder=10 + k,
            )
    ax.set_xticks(
        range(len(cands)), [f"{c.prefill_nodes}P{c.decode_nodes}D" for c in cands], rotation=45
    )
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_locator(MaxNLocator(nbins=6, steps=[1, 2, 5, 10]))
    ax.set_ylabel(label)
    ax.set_xlabel("split (prefill P, decode D nodes); strip under the lines: what binds dualpath")
    top, sub = _title(r), inputs_lines(r)
    fig.suptitle(html.unescape(top), fontsize=12, fontweight="bold", x=0.01, ha="left")
    ax.set_title(html.unescape("\n".join(sub)), fontsize=8, loc="left")
    handles, labels = ax.get_legend_handles_labels()
    handles = [handles[labels.index(r.label(m))] for m in drawn]
    if r.recommended:  # no marker is drawn where every mode is unserved
        handles.append(
            plt.Line2D(
                [], [], marker="o", ls="", color="grey", mec="black", label="recommended split"
            )
        )
    handles.append(mpatches.Patch(color=FREE_COLOR, label="bottleneck-free P/D"))
    handles += [
        mpatches.Patch(color=link_color(bind), label=f"binds: {bind}")
        for bind in dict.fromkeys(binds)
        if bind != "infeasible"
    ]
    ax.legend(handles=handles, fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    buffer = io.BytesIO()  # rendered in memory; the caller writes it atomically
    try:
        fig.savefig(buffer, format="png")
    finally:
        plt.close(fig)
    return buffer.getvalue()


def _title(r: RecommendReport) -> str:
    _, label = METRIC[r.objective]
    best = "lower" if r.objective == "jct_s" else "higher"
    return f"{label} per P/D split, per mode ({best} is better)"


def recommend_svg(r: RecommendReport, width: int = 800, height: int = 480) -> str:
    """A line per mode of the objective over the splits (one line for modes that coincide), a
    marker on each mode's recommended split, the bottleneck-free range shaded, what binds
    dualpath in a strip under the axis; a title and the inputs above."""
    cands = r.candidates
    _, label = METRIC[r.objective]
    drawn = r.drawn()
    left, right, top, bottom = 78, 210, 84, 66
    w, h = width - left - right, height - top - bottom
    vals = [
        v
        for c in cands
        for m in drawn
        if (v := _value(c.modes.get(m), c, r.objective)) is not None  # type: ignore[call-overload]
    ]
    ticks = nice_ticks(max(vals) if vals else 1.0)
    vmax = ticks[-1]
    step = ticks[1] - ticks[0]
    n = len(cands)
    esc = html.escape

    def xpos(i: float) -> float:
        return left + (w * (i + 0.5) / n)

    def ypos(v: float) -> float:
        return top + h * (1 - v / vmax)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
        f'<text x="12" y="22" font-size="15" font-weight="bold">{esc(_title(r))}</text>',
    ]
    for k, line in enumerate(inputs_lines(r)):
        out.append(f'<text x="12" y="{42 + 15 * k}" font-size="11" fill="#444">{esc(line)}</text>')
    # The bottleneck-free range, shaded and labelled.
    for a, b in _runs([c.bottleneck_free for c in cands]):
        x0, x1 = left + w * a / n, left + w * (b + 1) / n
        out.append(
            f'<rect class="bottleneck-free" x="{x0:.1f}" y="{top}" width="{x1 - x0:.1f}" '
            f'height="{h}" fill="{FREE_COLOR}"/>'
        )
        out.append(
            f'<text x="{(x0 + x1) / 2:.1f}" y="{top - 5}" text-anchor="middle" font-size="11" '
            f'fill="#555">bottleneck-free P/D</text>'
        )
    # Round ticks and grid lines.
    for v in ticks:
        y = ypos(v)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + w}" y2="{y:.1f}" stroke="#d0d0d0" '
            f'stroke-width="0.5"/>'
        )
        out.append(
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{tick_label(v, step)}</text>'
        )
    out.append(f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + h}" stroke="black"/>')
    # What binds dualpath per split: a strip under the axis.
    binds = _binding_labels(r)
    for i, bind in enumerate(binds):
        color = INFEASIBLE_COLOR if bind == "infeasible" else link_color(bind)
        out.append(
            f'<rect x="{left + w * i / n:.1f}" y="{top + h + 2}" width="{w / n:.1f}" height="8" '
            f'fill="{color}" stroke="#999" stroke-width="0.5"><title>{esc(bind)}</title></rect>'
        )
    label_step = max(1, math.ceil(n / 12))
    for i, c in enumerate(cands):
        if i % label_step == 0:
            out.append(
                f'<text x="{xpos(i):.1f}" y="{top + h + 24}" text-anchor="middle">'
                f"{c.prefill_nodes}P{c.decode_nodes}D</text>"
            )
    out.append(
        f'<text x="{left + w / 2}" y="{height - 14}" text-anchor="middle">'
        f"split (prefill P, decode D nodes)</text>"
    )
    out.append(
        f'<text x="18" y="{top + h / 2}" transform="rotate(-90 18 {top + h / 2})" '
        f'text-anchor="middle">{esc(label)}</text>'
    )
    # A line per drawn mode, broken where the mode is infeasible; coinciding modes share it
    # (the first mode's colour, the others' dashed over it). Drawn last mode first, each wider
    # than the next, so that a line on top of another leaves it visible at its edges.
    for k, m in enumerate(reversed(drawn)):
        group = r.label(m).split(" = ")
        stroke = 2.0 + 1.6 * (len(drawn) - 1 - k)
        runs = _runs([c.modes.get(m) is not None for c in cands])  # type: ignore[call-overload]
        for a, b in runs:
            pts = " ".join(
                f"{xpos(i):.1f},{ypos(v):.1f}"
                for i in range(a, b + 1)
                if (v := _value(cands[i].modes.get(m), cands[i], r.objective)) is not None  # type: ignore[call-overload]
            )
            for j, x in enumerate(group):
                dash = "" if j == 0 else f' stroke-dasharray="6 {6 * j}"'
                out.append(
                    f'<polyline class="mode" data-mode="{esc(r.label(m))}" points="{pts}" '
                    f'fill="none" stroke="{COLORS.get(x, "black")}" stroke-width="{stroke:g}"'
                    f"{dash}/>"
                )
    # A marker on each drawn mode's recommended split (the same order and widening).
    for k, m in enumerate(reversed(drawn)):
        rec = r.recommended.get(m)
        if rec is None:
            continue
        i = cands.index(rec.candidate)
        v = _value(rec.candidate.modes.get(m), rec.candidate, r.objective)  # type: ignore[call-overload]
        if v is None:
            continue
        radius = 5.0 + 1.5 * (len(drawn) - 1 - k)
        out.append(
            f'<circle class="recommended" data-mode="{esc(r.label(m))}" cx="{xpos(i):.1f}" '
            f'cy="{ypos(v):.1f}" r="{radius:g}" fill="{COLORS.get(m, "black")}" stroke="black">'
            f"<title>{esc(r.label(m))}: {rec.candidate.prefill_nodes}P"
            f"{rec.candidate.decode_nodes}D</title></circle>"
        )
    # Legend: modes, the marker, the shaded range, the links.
    lx, ly = left + w + 14, top
    for m in drawn:
        group = r.label(m).split(" = ")
        for j, x in enumerate(group):
            dash = "" if j == 0 else f' stroke-dasharray="6 {6 * j}"'
            out.append(
                f'<line x1="{lx}" y1="{ly + 6}" x2="{lx + 22}" y2="{ly + 6}" '
                f'stroke="{COLORS.get(x, "black")}" stroke-width="2"{dash}/>'
            )
        out.append(f'<text x="{lx + 28}" y="{ly + 10}">{esc(r.label(m))}</text>')
        ly += 18
    if r.recommended:  # no marker is drawn where every mode is unserved
        out.append(
            f'<circle cx="{lx + 11}" cy="{ly + 6}" r="5" fill="#888" stroke="black"/>'
            f'<text x="{lx + 28}" y="{ly + 10}">recommended split</text>'
        )
        ly += 18
    out.append(
        f'<rect x="{lx}" y="{ly}" width="22" height="12" fill="{FREE_COLOR}"/>'
        f'<text x="{lx + 28}" y="{ly + 10}">bottleneck-free P/D</text>'
    )
    ly += 26
    out.append(f'<text x="{lx}" y="{ly + 10}">strip: dualpath binds</text>')
    for bind in dict.fromkeys(binds):
        ly += 18
        color = INFEASIBLE_COLOR if bind == "infeasible" else link_color(bind)
        out.append(
            f'<rect x="{lx}" y="{ly}" width="14" height="12" fill="{color}" stroke="#999"/>'
            f'<text x="{lx + 20}" y="{ly + 10}" font-size="11">{esc(bind)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"
