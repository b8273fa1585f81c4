"""The ``recommend`` report: JSON payload, terminal tables, Markdown, and an SVG chart.

The chart is SVG written directly (a line per mode over the candidate splits, the dualpath
bottleneck regions shaded): a line chart needs no plotting library, SVG scales, opens in any
browser and embeds in the Markdown report. PNG goes through matplotlib (the ``plot`` extra).
"""

from __future__ import annotations

import html
import io
import math
from typing import Any

from rich.console import Console
from rich.table import Table

from dualpath_plan.errors import PlanInputError
from dualpath_plan.files import atomic_write
from dualpath_plan.outcomes.recommend import Candidate, PhasePlan, RecommendReport, score
from dualpath_plan.outcomes.serving import ModeOutcome
from dualpath_plan.reports.size import mode_payload

METRIC = {
    "jct": ("jct_s", "JCT (s)"),
    "aps": ("aps", "APS (agents/s)"),
    "throughput-per-gpu": ("throughput_per_gpu", "turns/s per GPU"),
}
COLORS = {"basic": "#d62728", "even": "#9467bd", "dualpath": "#1f77b4", "oracle": "#2ca02c"}
REGION_COLORS = ["#fde0dd", "#deebf7", "#e5f5e0", "#fff7bc", "#efedf5", "#fee6ce", "#f0f0f0"]


def _value(o: ModeOutcome | None, c: Candidate, objective: str) -> float | None:
    if o is None:
        return None
    if objective == "jct":
        return o.jct_s
    if objective == "aps":
        return o.aps
    return o.throughput_turns_per_s / c.gpus


def recommend_payload(r: RecommendReport, phases: PhasePlan | None = None) -> dict[str, Any]:
    ranks = {m: _ranks(r, m) for m in r.candidates[0].modes}
    out: dict[str, Any] = {
        "objective": r.objective,
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
                    m: ({**mode_payload(o), "rank": ranks[m][i]} if o is not None else None)
                    for m, o in c.modes.items()
                },
            }
            for i, c in enumerate(r.candidates)
        ],
        "recommended": {
            m: {
                "prefill_nodes": rec.candidate.prefill_nodes,
                "decode_nodes": rec.candidate.decode_nodes,
                "gpus": rec.candidate.gpus,
                "why": rec.why,
            }
            for m, rec in r.recommended.items()
        },
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
            },
            "rebalancing_gain": phases.gain,
        }
    return out


def _ranks(r: RecommendReport, mode: str) -> list[int | None]:
    """Rank of each candidate for a mode by the objective (1 = best; None: infeasible)."""
    scored = []
    for i, c in enumerate(r.candidates):
        o = c.modes.get(mode)  # type: ignore[call-overload]
        if o is not None:
            scored.append((score(o, c.gpus, r.objective), i))
    out: list[int | None] = [None] * len(r.candidates)
    for rank, (_, i) in enumerate(sorted(scored, key=lambda t: -t[0]), 1):
        out[i] = rank
    return out


def _fmt(v: float | None, objective: str) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.0f}" if objective == "jct" else f"{v:.3g}"


def render_recommend(r: RecommendReport, console: Console, phases: PhasePlan | None = None) -> None:
    sc = r.scenario
    console.print(
        f"[bold]{sc.model.id}[/bold], {sc.workload.id}, prefill {sc.prefill_node.id} / "
        f"decode {sc.decode_node.id}; objective {r.objective}; bottleneck-free "
        f"{r.pd_min:.3g} <= P/D <= {r.pd_max:.3g} (marked *)"
    )
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
        table.add_column(f"{m} {what}", justify="right")
    table.add_column("dualpath binds")
    table.add_column("DE share", justify="right")

    def cell(c: Candidate, m: str, what: str) -> str:
        o = c.modes.get(m)  # type: ignore[call-overload]
        if o is None:
            return "n/a"
        v = {
            "JCT": f"{o.jct_s:,.0f} s",
            "APS": f"{o.aps:.3g}",
            "turns/s": f"{o.throughput_turns_per_s:.3g}",
        }[what]
        rec = r.recommended.get(m)  # type: ignore[call-overload]
        return f"[bold green]{v} <[/bold green]" if rec is not None and rec.candidate is c else v

    for c in r.candidates:
        dp = c.modes.get("dualpath")
        table.add_row(
            f"{c.prefill_nodes}P{c.decode_nodes}D{' *' if c.bottleneck_free else ''}",
            *[cell(c, m, w) for m, w in cols],
            dp.bottleneck if dp else "",
            f"{dp.decode_path_fraction:.0%}" if dp else "",
        )
    console.print(table)
    for m, rec in r.recommended.items():
        console.print(
            f"[bold]{m}[/bold]: run {rec.candidate.prefill_nodes}P"
            f"{rec.candidate.decode_nodes}D ({rec.candidate.gpus} GPUs). {rec.why}"
        )
    if phases is not None:
        _render_phases(phases, console)


def _render_phases(p: PhasePlan, console: Console) -> None:
    console.print(
        "[bold]phases[/bold]: "
        + "; ".join(
            f"{w} ({wt:.0%}): {rec.candidate.prefill_nodes}P{rec.candidate.decode_nodes}D"
            for w, wt, rec in p.phases
        )
    )
    console.print(
        f"best static ratio {p.static.prefill_nodes}P{p.static.decode_nodes}D; "
        f"re-balancing per phase gains {p.gain:.3f}x"
    )


def recommend_markdown(
    r: RecommendReport, phases: PhasePlan | None = None, plot: str | None = None
) -> str:
    sc = r.scenario
    _, label = METRIC[r.objective]
    lines = [
        f"# P/D ratio recommendation: {sc.model.id} on {sc.prefill_node.id} / {sc.decode_node.id}",
        "",
        f"- workload: `{sc.workload.id}` ({sc.workload.turns:g} turns, "
        f"{sc.workload.context_tokens:,.0f} context, {sc.workload.append_tokens:g} appended, "
        f"{sc.workload.generated_tokens:g} generated tokens per turn)",
        f"- storage: `{sc.storage.id if sc.storage else 'unlimited'}`",
        f"- objective: {r.objective}",
        f"- bottleneck-free P/D range (paper eq. 9, extended): {r.pd_min:.3g} .. {r.pd_max:.3g}",
        "",
        "## Recommendation",
        "",
    ]
    for m, rec in r.recommended.items():
        o = rec.candidate.modes[m]
        assert o is not None
        lines.append(
            f"- **{m}**: {rec.candidate.prefill_nodes}P{rec.candidate.decode_nodes}D "
            f"({rec.candidate.gpus} GPUs): {o.throughput_turns_per_s:.3g} turns/s, "
            f"JCT {o.jct_s:,.0f} s, APS {o.aps:.3g}. {rec.why}."
        )
    lines += ["", f"## {label} per split", ""]
    modes = list(r.candidates[0].modes)
    lines.append(
        "| P/D | " + " | ".join(modes) + " | dualpath binds | DE share | bottleneck-free |"
    )
    lines.append("|---|" + "---:|" * len(modes) + "---|---:|---|")
    for c in r.candidates:
        dp = c.modes.get("dualpath")
        vals = [_fmt(_value(c.modes.get(m), c, r.objective), r.objective) for m in modes]
        lines.append(
            f"| {c.prefill_nodes}P{c.decode_nodes}D | "
            + " | ".join(vals)
            + f" | {dp.bottleneck if dp else ''} | "
            f"{f'{dp.decode_path_fraction:.0%}' if dp else ''} | "
            f"{'yes' if c.bottleneck_free else 'no'} |"
        )
    if phases is not None:
        lines += ["", "## Phases", ""]
        for w, wt, rec in phases.phases:
            lines.append(
                f"- `{w}` ({wt:.0%} of the run): {rec.candidate.prefill_nodes}P"
                f"{rec.candidate.decode_nodes}D"
            )
        lines.append(
            f"- best static ratio: {phases.static.prefill_nodes}P"
            f"{phases.static.decode_nodes}D; re-balancing per phase gains "
            f"{phases.gain:.3f}x"
        )
    if plot:
        lines += ["", f"![{label} against the P/D split]({plot})"]
    lines += [
        "",
        "Generated by `dualpath-plan recommend`; the model and its sources are in "
        "docs/model.md of dualpath-plan.",
        "",
    ]
    return "\n".join(lines)


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
    except ImportError as exc:
        raise PlanInputError(
            "a PNG chart needs matplotlib: pip install 'dualpath-plan[plot]', or write .svg",
            field="--plot",
        ) from exc
    cands = r.candidates
    _, label = METRIC[r.objective]
    fig, ax = plt.subplots(figsize=(8, 4.5), dpi=120)
    region_of: dict[str, str] = {}
    for i, c in enumerate(cands):
        dp = c.modes.get("dualpath")
        b = dp.bottleneck if dp else "infeasible"
        color = region_of.setdefault(b, REGION_COLORS[len(region_of) % len(REGION_COLORS)])
        ax.axvspan(i - 0.5, i + 0.5, color=color, lw=0)
    for m in cands[0].modes:
        pts = [
            (i, v)
            for i, c in enumerate(cands)
            if (v := _value(c.modes.get(m), c, r.objective)) is not None
        ]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=m, color=COLORS.get(m), lw=2)
    ax.set_xticks(
        range(len(cands)), [f"{c.prefill_nodes}P{c.decode_nodes}D" for c in cands], rotation=45
    )
    ax.set_ylabel(label)
    ax.set_xlabel("split (prefill P, decode D nodes); shading: what binds dualpath")
    handles, _ = ax.get_legend_handles_labels()
    handles += [mpatches.Patch(color=c, label=b) for b, c in region_of.items()]
    ax.legend(handles=handles, fontsize=8, loc="best")
    fig.tight_layout()
    buffer = io.BytesIO()  # rendered in memory; the caller writes it atomically
    try:
        fig.savefig(buffer, format="png")
    finally:
        plt.close(fig)
    return buffer.getvalue()


def recommend_svg(r: RecommendReport, width: int = 720, height: int = 420) -> str:
    """A line per mode of the objective over the splits, dualpath's bottleneck regions shaded."""
    cands = r.candidates
    _, label = METRIC[r.objective]
    modes = list(cands[0].modes)
    left, right, top, bottom = 70, 150, 30, 60
    w, h = width - left - right, height - top - bottom
    vals = [
        v for c in cands for m in modes if (v := _value(c.modes.get(m), c, r.objective)) is not None
    ]
    vmax = max(vals) if vals else 1.0
    vmax = vmax * 1.05 if vmax > 0 else 1.0
    n = len(cands)

    def xpos(i: int) -> float:
        return left + (w * (i + 0.5) / n)

    def ypos(v: float) -> float:
        return top + h * (1 - v / vmax)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
    ]
    # Bottleneck regions of dualpath.
    region_of: dict[str, str] = {}
    start = 0
    for i in range(1, n + 1):
        prev = cands[start].modes.get("dualpath")
        cur = cands[i].modes.get("dualpath") if i < n else None
        b_prev = prev.bottleneck if prev else "infeasible"
        b_cur = cur.bottleneck if cur else ("infeasible" if i < n else None)
        if i == n or b_cur != b_prev:
            color = region_of.setdefault(b_prev, REGION_COLORS[len(region_of) % len(REGION_COLORS)])
            x0 = left + w * start / n
            out.append(
                f'<rect x="{x0:.1f}" y="{top}" width="{w * (i - start) / n:.1f}" '
                f'height="{h}" fill="{color}"/>'
            )
            start = i
    out.append(f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="black"/>')
    out.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + h}" stroke="black"/>')
    for k in range(5):
        v = vmax * k / 4
        out.append(
            f'<text x="{left - 6}" y="{ypos(v) + 4:.1f}" text-anchor="end">'
            f"{_fmt(v, r.objective)}</text>"
        )
    step = max(1, n // 12)
    for i, c in enumerate(cands):
        if i % step == 0:
            out.append(
                f'<text x="{xpos(i):.1f}" y="{top + h + 16}" text-anchor="middle">'
                f"{c.prefill_nodes}P{c.decode_nodes}D</text>"
            )
    out.append(
        f'<text x="{left + w / 2}" y="{height - 12}" text-anchor="middle">'
        f"split (prefill P, decode D nodes)</text>"
    )
    out.append(
        f'<text x="16" y="{top + h / 2}" transform="rotate(-90 16 {top + h / 2})" '
        f'text-anchor="middle">{html.escape(label)}</text>'
    )
    for m in modes:
        pts = [
            (xpos(i), ypos(v))
            for i, c in enumerate(cands)
            if (v := _value(c.modes.get(m), c, r.objective)) is not None
        ]
        if pts:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
            out.append(
                f'<polyline points="{path}" fill="none" stroke="{COLORS.get(m, "black")}" '
                f'stroke-width="2"/>'
            )
    ly = top
    for m in modes:
        out.append(
            f'<line x1="{left + w + 12}" y1="{ly + 6}" x2="{left + w + 32}" y2="{ly + 6}" '
            f'stroke="{COLORS.get(m, "black")}" stroke-width="2"/>'
        )
        out.append(f'<text x="{left + w + 36}" y="{ly + 10}">{m}</text>')
        ly += 18
    ly += 8
    out.append(f'<text x="{left + w + 12}" y="{ly + 10}">dualpath binds:</text>')
    for b, color in region_of.items():
        ly += 18
        out.append(
            f'<rect x="{left + w + 12}" y="{ly}" width="14" height="12" fill="{color}" '
            f'stroke="#999"/>'
        )
        out.append(f'<text x="{left + w + 30}" y="{ly + 10}">{html.escape(b)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
